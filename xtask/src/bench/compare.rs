//! `cargo xtask bench compare --before FP`: two builds of fp measured in ONE VM boot, their rounds
//! alternating, so that the figures of a change are compared with its parent's on the same boot
//! and load (per-call figures of two VM runs hours apart differ by ±20% on unchanged code).
use super::{guest_lines, guest_number, median, release_executable, run_in_vm, spread};
use crate::kernels;
use crate::{setup, step::Report};
use anyhow::{Context as _, Result, bail};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
pub struct CompareArgs {
    /// The `fp` executable to compare with, built from another commit (e.g. in a
    /// `git worktree`: `cargo build --release -p fp-agent`).
    #[arg(long)]
    before: PathBuf,
    /// `6.1` or `6.12`.
    #[arg(long, default_value = "6.12")]
    kernel: String,
    /// Rounds; each runs both builds once, in turn.
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
    #[command(flatten)]
    clock: crate::vm::ClockArg,
}

/// The builds, in the order every round runs them.
const BUILDS: [&str; 2] = ["before", "after"];
/// (workload, unit, scale from the guest's ns).
const WORKLOADS: [(&str, &str, f64); 4] = [
    ("open+close", "ns/op", 1.0),
    ("tar-x", "ms", 1e-6),
    ("churn", "ns/op", 1.0),
    ("start", "ms", 1e-6),
];

/// Runs in the guest: per round and build one `fp run` session under the kernel bench's base
/// policy (read everywhere, write the workspace, one generated deny rule, the floors) running
/// open+close, `tar -x` of 5,000 files and `churn`; then, the session still loaded, its
/// programs' `bpf_stats`; then `fp run`'s start. Prints `CMP <build> <round> <workload> <ns>` and
/// `PROG <build> <round> <program> <run_time_ns> <run_cnt>`.
const SCRIPT: &str = r#"
set -eu
export W=/tmp/compare LOAD=@LOAD@ HOME=/tmp/compare/home
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
BPFTOOL="$(command -v bpftool || echo /usr/sbin/bpftool)"
mkdir -p $W/home && echo bench > $W/file
printf '[file_policy]\ndefault = "read"\nwrite_paths = ["<workspace>/**"]\ndeny_paths = ["**/f1.h"]\n' > $W/policy.toml
awk -v root=$W/src 'BEGIN { for (d = 0; d < 50; d++) { dir = root "/d" d; system("mkdir -p " dir);
  for (f = 0; f < 100; f++) { p = dir "/f" f ".c"; print "int f" f ";" > p; close(p) } } }'
tar -cf $W/tree.tar -C $W src
cat > $W/session.sh <<'END'
set -eu
$LOAD open $W/file 20000 1 | sed "s/^ns_per_op/CMP $1 $2 open+close/"
@CMD_TIME@
t=$(cmd_time 'tar -xf $W/tree.tar -C $W/x'); echo "CMP $1 $2 tar-x $t"
$LOAD churn $W/y 2000 1 | sed "s/^ns_per_op/CMP $1 $2 churn/"
touch $W/done
read go < $W/go
END
echo 1 > /proc/sys/kernel/bpf_stats_enabled
r=1
while [ $r -le @ROUNDS@ ]; do
  for build in before after; do
    if [ $build = before ]; then fp=@BEFORE@; else fp=@AFTER@; fi
    rm -rf $W/x $W/y $W/done $W/go && mkdir $W/x $W/y && mkfifo $W/go
    $fp run --policy $W/policy.toml --workspace $W -- sh $W/session.sh $build $r &
    session=$!
    n=0
    until [ -e $W/done ]; do
      kill -0 $session || { echo "compare: fp run ($build) failed" >&2; exit 1; }
      n=$((n + 1)); [ $n -lt 3000 ] || { echo "compare: timed out" >&2; exit 1; }
      sleep 0.1
    done
    $BPFTOOL prog show --json | python3 -c '
import json, sys
for p in json.load(sys.stdin):
    if p.get("name", "").startswith("fp_") and p.get("run_cnt", 0) > 0:
        print("PROG", sys.argv[1], sys.argv[2], p["name"], p.get("run_time_ns", 0), p["run_cnt"])' $build $r
    echo go > $W/go
    wait $session
    while $BPFTOOL prog show | grep -qE " name fp_"; do sleep 0.1; done
    # fp run's start: from its exec to the command's first instruction (load, verify, attach).
    s=$(date +%s%N); e=$($fp run --policy $W/policy.toml --workspace $W -- date +%s%N)
    echo "CMP $build $r start $((e - s))"
    while $BPFTOOL prog show | grep -qE " name fp_"; do sleep 0.1; done
  done
  r=$((r + 1))
done
"#;

pub fn main(args: CompareArgs) -> Result<ExitCode> {
    let before = std::fs::canonicalize(&args.before)
        .with_context(|| format!("--before {}: no such executable", args.before.display()))?;
    let pin = kernels::find(&args.kernel)?;
    setup::for_vm(Report::ChangesOnly)?;
    println!("xtask: building fp and fp-bench-load (release, real BPF object)");
    let after = release_executable(&["-p", "fp-agent", "--bin", "fp"], "fp")?;
    let load = release_executable(&["-p", "fp-tests", "--bin", "fp-bench-load"], "fp-bench-load")?;
    let kernel = kernels::ensure(pin, Report::ChangesOnly)?;
    println!("xtask: kernel {}: {} rounds of both builds, alternating", kernel.name, args.rounds);
    let quote = |p: &std::path::Path| crate::cmd::shell_quote(&p.display().to_string());
    let script = SCRIPT
        .replace("@CMD_TIME@", super::CMD_TIME)
        .replace("@LOAD@", &quote(&load))
        .replace("@BEFORE@", &quote(&before))
        .replace("@AFTER@", &quote(&after))
        .replace("@ROUNDS@", &args.rounds.to_string());
    let output = run_in_vm(
        &kernel,
        script,
        Duration::from_secs(600 + 120 * u64::from(args.rounds)),
        args.clock.clock(),
    )?;
    let results = parse(&output)?;
    args.clock.announce();
    println!("\n== kernel {}: before = {}, after = this tree ==", kernel.name, before.display());
    print!("{}", report(&results));
    Ok(ExitCode::SUCCESS)
}

/// What the VM printed, by (build, what) and round: workload ns, or a program's ns per call.
#[derive(Default)]
struct Results {
    workloads: Samples,
    programs: Samples,
}

fn parse(output: &str) -> Result<Results> {
    let mut results = Results::default();
    for (line, fields) in guest_lines(output) {
        let number = |s: &str| guest_number(line, s);
        match fields.as_slice() {
            ["CMP", build, round, workload, ns] => {
                let round = u32::try_from(number(round)?)?;
                let entry = results.workloads.entry((build.to_string(), workload.to_string()));
                entry.or_default().insert(round, number(ns)? as f64);
            }
            ["PROG", build, round, program, ns, count] => {
                let (round, count) = (u32::try_from(number(round)?)?, number(count)?);
                let entry = results.programs.entry((build.to_string(), program.to_string()));
                entry.or_default().insert(round, number(ns)? as f64 / count.max(1) as f64);
            }
            _ => {}
        }
    }
    for build in BUILDS {
        for (workload, ..) in WORKLOADS {
            if !results.workloads.contains_key(&(build.to_string(), workload.to_string())) {
                bail!("the guest printed no {workload} figure for {build} (see its output above)");
            }
        }
    }
    Ok(results)
}

/// Samples by (build, workload or program) and round.
type Samples = BTreeMap<(String, String), BTreeMap<u32, f64>>;

/// The table: medians per build and the median [min-max] over the rounds of after / before.
fn report(results: &Results) -> String {
    let rounds = results.workloads.values().map(BTreeMap::len).max().unwrap_or(0);
    let mut out = format!(
        "{rounds} rounds, builds alternating; medians, and after/before per round: median \
         [min-max]\n  {:<26} {:>18} {:>18}  after/before\n",
        "workload", "before", "after"
    );
    for (workload, unit, scale) in WORKLOADS {
        out += &row(&results.workloads, workload, unit, scale);
    }
    out += "per-program cost inside the session, run_time_ns / run_cnt (bpf_stats):\n";
    let programs: std::collections::BTreeSet<&String> =
        results.programs.keys().map(|(_, program)| program).collect();
    for program in programs {
        out += &row(&results.programs, program, "ns", 1.0);
    }
    out
}

/// One line of the table; empty if either build lacks the figure.
fn row(samples: &Samples, name: &str, unit: &str, scale: f64) -> String {
    let of = |build: &str| samples.get(&(build.to_string(), name.to_string()));
    let (Some(a), Some(b)) = (of("before"), of("after")) else { return String::new() };
    let values = |m: &BTreeMap<u32, f64>| m.values().copied().collect::<Vec<_>>();
    let (Some(ma), Some(mb)) = (median(&values(a)), median(&values(b))) else {
        return String::new();
    };
    let ratios: Vec<f64> =
        b.iter().filter_map(|(r, y)| a.get(r).filter(|x| **x > 0.0).map(|x| y / x)).collect();
    let ratio = match spread(&ratios) {
        Some((m, lo, hi)) => format!("{m:.3}x [{lo:.2}-{hi:.2}]"),
        None => "-".into(),
    };
    format!("  {name:<26} {:>12.1} {unit:<5} {:>12.1} {unit:<5}  {ratio}\n", ma * scale, mb * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_compares_medians_and_per_round_ratios() {
        let mut output = String::from("console noise\n");
        for (round, base) in [(1, 100), (2, 200), (3, 100)] {
            for (build, factor) in [("before", 1.0), ("after", 0.9)] {
                let v = (base as f64 * factor) as u64;
                for (workload, ..) in WORKLOADS {
                    output += &format!("CMP {build} {round} {workload} {v}\n");
                }
                output += &format!("PROG {build} {round} fp_path_mknod {} 10\n", v * 10);
            }
        }
        let table = report(&parse(&output).unwrap());
        assert!(table.contains("3 rounds"), "{table}");
        assert!(table.contains("0.900x [0.90-0.90]"), "{table}");
        assert!(table.contains("fp_path_mknod"), "{table}");
        assert!(table.contains("100.0 ns"), "{table}");
    }

    #[test]
    fn a_missing_build_is_an_error() {
        assert!(parse("CMP before 1 tar-x 5\n").is_err());
        assert!(parse("CMP before 1 tar-x many\n").is_err());
    }
}
