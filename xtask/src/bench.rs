//! `cargo xtask bench kernel`: what fp's BPF LSM programs cost, measured in the test VM against
//! the same workloads with no fp program loaded. See docs/performance.md.
use crate::kernels::{self, KERNELS};
use crate::setup::{self, Report};
use crate::test_kernel::cargo_executables;
use crate::vm::{self, VmRun};
use anyhow::{Context as _, Result, anyhow, bail};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Subcommand)]
pub enum BenchArgs {
    /// Syscall and workload overhead of fp's programs, outside and inside sessions (one VM per kernel).
    Kernel(KernelBenchArgs),
    /// What the prompt broker (fanotify) adds per open, natively as root (docs/prompt.md).
    Prompt {
        /// Fewer iterations: a smoke check, not a measurement.
        #[arg(long)]
        quick: bool,
    },
}

#[derive(clap::Args)]
pub struct KernelBenchArgs {
    /// `6.1`, `6.12` or `all` (one VM per pinned kernel).
    #[arg(long, default_value = "all")]
    kernel: String,
    /// Fewer iterations and rounds: a smoke check, not a measurement.
    #[arg(long)]
    quick: bool,
}

/// The session sizes measured, in deny rules.
const RULE_COUNTS: [u32; 4] = [1, 100, 1_000, 10_000];
/// The session size the real workloads (tar, find+cat, git) run in.
const REAL_WORKLOAD_RULES: u32 = 100;

/// Runs in the guest. Each measurement prints `BENCH <phase> <workload> <ns>` and each loaded fp
/// program `HOOK <phase> <name> <run_time_ns> <run_cnt>`; the `@X@` are filled in by `script`.
const SCRIPT: &str = r#"
set -eu
export LOAD=@LOAD@ ITERATIONS=@ITERATIONS@ RUNS=@RUNS@ REAL_RUNS=@REAL_RUNS@ W=/tmp/bench
export STATS_ITERATIONS=$((ITERATIONS / 10))
export BPFTOOL="$(command -v bpftool || echo /usr/sbin/bpftool)"
# Workloads never touch root's home (a safety-floor tree in sessions) or the host's shims.
export HOME=$W/home PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
FP=@FP@
mkdir -p $W/rules $W/existing $W/home
echo bench > $W/file
for i in 1 2 3 4 5; do echo x > $W/existing/e$i; done

# A source tree of 5,000 small files, as a tar and as a git repository when git is there.
awk -v root=$W/src 'BEGIN { for (d = 0; d < 50; d++) { dir = root "/d" d; system("mkdir -p " dir);
  for (f = 0; f < 100; f++) { p = dir "/f" f ".c";
    for (l = 0; l < 20; l++) print "int f" d "_" f "_" l "(void) { return " l "; }" > p; close(p) } } }'
tar -cf $W/tree.tar -C $W src
if command -v git > /dev/null; then
  git -C $W/src init -q && git -C $W/src add -A
  git -C $W/src -c user.name=bench -c user.email=bench@localhost commit -qm tree
fi

# real.sh PHASE ROUNDS: the real workloads.
cat > $W/real.sh <<'EOF'
now() { date +%s%N; }
i=0
while [ $i -lt $2 ]; do
  rm -rf $W/x && mkdir $W/x
  s=$(now); tar -xf $W/tree.tar -C $W/x; e=$(now); echo "BENCH $1 tar-x $((e - s))"
  s=$(now); find $W/x -type f -exec cat {} + > /dev/null; e=$(now); echo "BENCH $1 find+cat $((e - s))"
  if [ -d $W/src/.git ]; then
    s=$(now); git -C $W/src status --porcelain > /dev/null; e=$(now); echo "BENCH $1 git-status $((e - s))"
  fi
  i=$((i + 1))
done
EOF
# stats.sh PHASE: each loaded fp program's run time and count (bpf() is refused inside sessions,
# so this always runs outside them).
cat > $W/stats.sh <<'EOF'
$BPFTOOL prog show --json | python3 -c '
import json, sys
for p in json.load(sys.stdin):
    if p.get("name", "").startswith("fp_"):
        print("HOOK", sys.argv[1], p["name"], p.get("run_time_ns", 0), p.get("run_cnt", 0))' "$1"
EOF
# phase.sh PHASE REAL [inside]: one phase's measurements, run wherever the caller puts it (inside
# a session or not). The timed rounds run with bpf_stats off (its clock reads around every program
# run would inflate the ratios); a shorter pass with it on then gives each fp program's cost,
# read by stats.sh: here, or outside the session while this waits for it.
cat > $W/phase.sh <<'EOF'
set -eu
$LOAD open $W/file $ITERATIONS $RUNS | sed "s/^ns_per_op/BENCH $1 open+close/"
$LOAD stat $W/file $ITERATIONS $RUNS | sed "s/^ns_per_op/BENCH $1 stat/"
if [ "$2" = 1 ]; then sh $W/real.sh "$1" $REAL_RUNS; fi
echo 1 > /proc/sys/kernel/bpf_stats_enabled
$LOAD open $W/file $STATS_ITERATIONS 1 > /dev/null
$LOAD stat $W/file $STATS_ITERATIONS 1 > /dev/null
if [ "$2" = 1 ]; then sh $W/real.sh "$1" 1 > /dev/null; fi
echo 0 > /proc/sys/kernel/bpf_stats_enabled
if [ "${3:-}" = inside ]; then
  touch $W/measured
  while [ ! -e $W/collected ]; do sleep 0.1; done
else
  sh $W/stats.sh "$1"
fi
EOF

# Waits (at most 10 s) until `cond` holds.
wait_until() {
  n=0
  until eval "$1"; do
    n=$((n + 1)); [ $n -lt 100 ] || { echo "bench: timed out waiting for: $1" >&2; exit 1; }
    sleep 0.1
  done
}
# Unpinned links detach asynchronously: the next phase starts once no fp program is left.
fp_unloaded='! $BPFTOOL prog show | grep -q " name fp_"'

# One untimed round first: the baseline must not pay for cold caches alone.
sh $W/real.sh warm-up 1 > /dev/null
sh $W/phase.sh baseline 1

$FP run --deny $W/rules/outside -- sleep 1000 &
session=$!
wait_until 'grep -qs . /sys/fs/cgroup/fp/run-*/cgroup.procs'
sh $W/phase.sh outside 1
kill $session; wait $session || true
wait_until "$fp_unloaded"

for n in @RULE_COUNTS@; do
  # A few existing files (so the inode table is not empty), the rest nonexistent paths in
  # distinct directories; none covers $W/file.
  seq 1 $n | awk -v w=$W '{ if (NR <= 5) print "--deny " w "/existing/e" NR; else print "--deny " w "/rules/d" NR "/x" }' > $W/args
  real=0; [ $n != @REAL_WORKLOAD_RULES@ ] || real=1
  rm -f $W/measured $W/collected
  $FP run $(cat $W/args) -- sh $W/phase.sh "inside($n)" $real inside &
  session=$!
  while [ ! -e $W/measured ]; do kill -0 $session || { echo "bench: fp run failed" >&2; exit 1; }; sleep 0.2; done
  sh $W/stats.sh "inside($n)"
  touch $W/collected
  wait $session
  wait_until "$fp_unloaded"
done

sh $W/phase.sh baseline-end 1
"#;

/// What one kernel's VM printed: samples per (phase, workload) and per-program stats per phase.
#[derive(Default)]
struct Results {
    samples: BTreeMap<(String, String), Vec<u64>>,
    /// (phase, program) -> (run_time_ns, run_cnt)
    hooks: BTreeMap<(String, String), (u64, u64)>,
}

pub fn main(args: BenchArgs) -> Result<ExitCode> {
    let args = match args {
        BenchArgs::Kernel(args) => args,
        BenchArgs::Prompt { quick } => return prompt(quick),
    };
    let pins: Vec<_> = if args.kernel == "all" {
        KERNELS.iter().collect()
    } else {
        vec![kernels::find(&args.kernel)?]
    };
    setup::for_vm(Report::ChangesOnly)?;
    println!("xtask: building fp and fp-bench-load (release, real BPF object)");
    let fp = release_executable(&["-p", "fp-agent", "--bin", "fp"], "fp")?;
    let load = release_executable(&["-p", "fp-tests", "--bin", "fp-bench-load"], "fp-bench-load")?;
    for pin in pins {
        let kernel = kernels::ensure(pin, Report::ChangesOnly)?;
        println!("xtask: kernel {}: measuring (this takes a few minutes)", kernel.name);
        let run = VmRun {
            // 6.1 took 516 s on a shared 2-core host; leave room for a busier one.
            timeout: Duration::from_secs(1800),
            rw: Vec::new(),
            env: vm::guest_env(),
            cwd: "/".into(),
            command: vec!["sh".into(), "-c".into(), script(&fp, &load, args.quick)],
        };
        let finished = vm::boot(&kernel, &run)?;
        if finished.exit_code != 0 {
            let tail: Vec<&str> = finished.output.lines().rev().take(20).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            bail!(
                "the benchmark failed in the {} VM (exit {}):\n{}",
                kernel.name,
                finished.exit_code,
                tail.join("\n")
            );
        }
        let results = parse(&finished.output)?;
        print!("{}", report(kernel.name, args.quick, &results)?);
    }
    Ok(ExitCode::SUCCESS)
}

/// The prompt broker needs no BPF: the measuring example runs on this host, built with the stub.
fn prompt(quick: bool) -> Result<ExitCode> {
    let mut cargo = std::process::Command::new("cargo");
    cargo
        .args(["run", "--release", "-q", "-p", "fp-agent", "--example", "prompt_bench", "--"])
        .args(quick.then_some("--quick"))
        .env("FP_EBPF_STUB", "1")
        .current_dir(crate::paths::workspace_root());
    crate::cmd::run(&mut cargo)?;
    Ok(ExitCode::SUCCESS)
}

fn release_executable(package: &[&str], name: &str) -> Result<PathBuf> {
    let args: Vec<&str> = ["build", "--release"].iter().chain(package).copied().collect();
    cargo_executables(&args, |a| a.target.name == name)?
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!("cargo built no `{name}` executable"))
}

fn script(fp: &std::path::Path, load: &std::path::Path, quick: bool) -> String {
    let (iterations, runs, real_runs) = if quick { (20_000, 3, 1) } else { (200_000, 5, 3) };
    let rule_counts: Vec<String> = RULE_COUNTS.iter().map(u32::to_string).collect();
    SCRIPT
        .replace("@FP@", &crate::cmd::shell_quote(&fp.display().to_string()))
        .replace("@LOAD@", &crate::cmd::shell_quote(&load.display().to_string()))
        .replace("@ITERATIONS@", &iterations.to_string())
        .replace("@RUNS@", &runs.to_string())
        .replace("@REAL_RUNS@", &real_runs.to_string())
        .replace("@RULE_COUNTS@", &rule_counts.join(" "))
        .replace("@REAL_WORKLOAD_RULES@", &REAL_WORKLOAD_RULES.to_string())
}

fn parse(output: &str) -> Result<Results> {
    let mut results = Results::default();
    for line in output.lines().map(str::trim) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let number = |s: &str| -> Result<u64> {
            s.parse().with_context(|| format!("not a number in the guest's line {line:?}"))
        };
        match fields.as_slice() {
            ["BENCH", phase, workload, ns] => results
                .samples
                .entry((phase.to_string(), workload.to_string()))
                .or_default()
                .push(number(ns)?),
            ["HOOK", phase, program, run_time_ns, run_cnt] => {
                results.hooks.insert(
                    (phase.to_string(), program.to_string()),
                    (number(run_time_ns)?, number(run_cnt)?),
                );
            }
            _ => {}
        }
    }
    // A workload that failed in a pipeline leaves a hole rather than an exit status: refuse it.
    let phases = ["baseline", "outside", "baseline-end"].map(String::from);
    for phase in phases.into_iter().chain(RULE_COUNTS.map(inside)) {
        for workload in ["open+close", "stat"] {
            if !results.samples.contains_key(&(phase.clone(), workload.to_string())) {
                bail!("the guest printed no {workload} figure for {phase} (see its output above)");
            }
        }
    }
    Ok(results)
}

fn median(samples: &[u64]) -> Option<f64> {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    match sorted.len() {
        0 => None,
        n if n % 2 == 1 => Some(sorted[n / 2] as f64),
        n => Some((sorted[n / 2 - 1] + sorted[n / 2]) as f64 / 2.0),
    }
}

fn inside(rules: u32) -> String {
    format!("inside({rules})")
}

/// The table of medians and ratios for one kernel, and whether the issue's goals are met.
fn report(kernel: &str, quick: bool, results: &Results) -> Result<String> {
    use std::fmt::Write as _;
    let phases: Vec<String> =
        ["outside".to_string()].into_iter().chain(RULE_COUNTS.map(inside)).collect();
    let samples = |phase: &str, workload: &str| {
        results.samples.get(&(phase.to_string(), workload.to_string())).map(Vec::as_slice)
    };
    // The baseline pools the rounds before and after the fp phases, so drift over the run
    // widens it instead of favouring one side.
    let baseline = |workload: &str| {
        let pooled: Vec<u64> = ["baseline", "baseline-end"]
            .iter()
            .filter_map(|p| samples(p, workload))
            .flatten()
            .copied()
            .collect();
        median(&pooled)
    };
    let ratio = |phase: &str, workload: &str| -> Option<f64> {
        Some(median(samples(phase, workload)?)? / baseline(workload)?)
    };

    let mut out = String::new();
    writeln!(
        out,
        "\n== kernel {kernel}{} ==",
        if quick { " (--quick: smoke check only)" } else { "" }
    )?;
    writeln!(
        out,
        "medians; ratio = median with fp / median of the baseline (no fp program loaded)"
    )?;
    for (workload, unit, scale) in [
        ("open+close", "ns/op", 1.0),
        ("stat", "ns/op", 1.0),
        ("tar-x", "ms", 1e-6),
        ("find+cat", "ms", 1e-6),
        ("git-status", "ms", 1e-6),
    ] {
        let Some(base) = baseline(workload) else { continue };
        write!(out, "{workload:<11} baseline {:>8.1} {unit:<5}", base * scale)?;
        for phase in &phases {
            if let Some(r) = ratio(phase, workload) {
                write!(out, "  {phase} {r:.2}x")?;
            }
        }
        if let (Some(start), Some(end)) =
            (samples("baseline", workload), samples("baseline-end", workload))
            && let (Some(start), Some(end)) = (median(start), median(end))
        {
            write!(out, "  (baseline drift {:+.1}%)", (end / start - 1.0) * 100.0)?;
        }
        writeln!(out)?;
    }

    writeln!(out, "per-program cost, run_time_ns / run_cnt (bpf_stats), ns per call:")?;
    let programs: std::collections::BTreeSet<&String> =
        results.hooks.keys().map(|(_, program)| program).collect();
    for program in programs {
        write!(out, "  {program:<24}")?;
        for phase in &phases {
            match results.hooks.get(&(phase.clone(), program.clone())) {
                Some(&(ns, count)) if count > 0 => {
                    write!(out, "  {phase} {:>6.0} ({count})", ns as f64 / count as f64)?
                }
                _ => write!(out, "  {phase} {:>6} (0)", "-")?,
            }
        }
        writeln!(out)?;
    }

    let goal = |name: &str, value: Option<f64>, limit: f64| -> String {
        match value {
            Some(v) if v <= limit => format!("goal {name} <= {limit:.2}x: met ({v:.3}x)\n"),
            Some(v) => format!("goal {name} <= {limit:.2}x: NOT met ({v:.3}x)\n"),
            None => format!("goal {name}: not measured\n"),
        }
    };
    let first = inside(RULE_COUNTS[0]);
    let last = inside(RULE_COUNTS[RULE_COUNTS.len() - 1]);
    out += &goal("outside open+close", ratio("outside", "open+close"), 1.02);
    out += &goal(&format!("{first} open+close"), ratio(&first, "open+close"), 1.15);
    out += &goal(&format!("{last} open+close"), ratio(&last, "open+close"), 1.15);
    let flat = ratio(&last, "open+close").zip(ratio(&first, "open+close")).map(|(a, b)| a / b);
    out += &goal(&format!("flat: {last} / {first} open+close"), flat, 1.05);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[5, 1, 3]), Some(3.0));
        assert_eq!(median(&[4, 1, 3, 2]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn report_shows_ratios_against_the_pooled_baseline() {
        let mut output = String::from("console noise\nHOOK inside(1) fp_file_open 3000 10\n");
        for (phase, open_close) in [
            ("baseline", 100),
            ("baseline-end", 100),
            ("outside", 101),
            ("inside(1)", 120),
            ("inside(100)", 120),
            ("inside(1000)", 121),
            ("inside(10000)", 121),
        ] {
            output += &format!("BENCH {phase} open+close {open_close}\nBENCH {phase} stat 50\n");
        }
        let results = parse(&output).unwrap();
        let table = report("6.12", false, &results).unwrap();
        assert!(table.contains("outside 1.01x"), "{table}");
        assert!(table.contains("inside(1) 1.20x"), "{table}");
        assert!(table.contains("inside(1)    300 (10)"), "{table}");
        assert!(table.contains("goal outside open+close <= 1.02x: met"), "{table}");
        assert!(table.contains("goal inside(1) open+close <= 1.15x: NOT met"), "{table}");
        assert!(table.contains("flat: inside(10000) / inside(1) open+close <= 1.05x: met"));
    }

    #[test]
    fn a_garbled_or_missing_measurement_is_an_error() {
        assert!(parse("BENCH baseline stat many\n").is_err());
        assert!(parse("BENCH baseline stat 5\n").is_err(), "the other phases are missing");
    }
}
