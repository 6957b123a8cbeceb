//! `cargo xtask bench compare --before FP`: two builds of fp measured in ONE VM boot, their rounds
//! alternating, so that the figures of a change are compared with its parent's on the same boot
//! and load (per-call figures of two VM runs hours apart differ by ±20% on unchanged code).
use super::table::{Unit, Workload};
use super::{guest_lines, guest_number, median, release_executable, run_in_vm, spread};
use crate::kernels;
use crate::{setup, step::Report};
use anyhow::{Context as _, Result, bail};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
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
/// The workloads, in the report's row order; `start` is `fp run`'s start.
const WORKLOADS: [Workload; 4] = [
    Workload { name: "open+close", unit: Unit::NsPerOp, always: true },
    Workload { name: "tar-x", unit: Unit::Ms, always: true },
    Workload { name: "churn", unit: Unit::NsPerOp, always: true },
    Workload { name: "start", unit: Unit::Ms, always: true },
];

/// Runs in the guest (guest/compare.sh): per round and build one `fp run` session under the
/// kernel bench's base policy (read everywhere, write the workspace, one generated deny rule, the
/// floors) running open+close, `tar -x` of 5,000 files and `churn`; then, the session still
/// loaded, its programs' `bpf_stats`; then `fp run`'s start. Prints
/// `CMP <build> <round> <workload> <ns>` and
/// `PROG <build> <round> <program> <run_time_ns> <run_cnt>`; the `@X@` are filled in by `script`.
const SCRIPT: &str = include_str!("guest/compare.sh");

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
    let script = script(&load, &before, &after, args.rounds);
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

/// The guest script, its `@X@` filled in.
pub(super) fn script(load: &Path, before: &Path, after: &Path, rounds: u32) -> String {
    let quote = |p: &Path| crate::cmd::shell_quote(&p.display().to_string());
    SCRIPT
        .replace("@CMD_TIME@\n", super::CMD_TIME)
        .replace("@LOAD@", &quote(load))
        .replace("@BEFORE@", &quote(before))
        .replace("@AFTER@", &quote(after))
        .replace("@ROUNDS@", &rounds.to_string())
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
        for workload in WORKLOADS.iter().filter(|w| w.always).map(|w| w.name) {
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
    for Workload { name, unit, .. } in &WORKLOADS {
        out += &row(&results.workloads, name, unit.label(), unit.scale());
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
                for Workload { name, .. } in &WORKLOADS {
                    output += &format!("CMP {build} {round} {name} {v}\n");
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
    fn the_table_and_the_guest_script_name_the_same_workloads_and_builds() {
        // `CMP <build> <round> <workload> ...` (echo or sed's replacement).
        let mut script: Vec<&str> = SCRIPT
            .split("CMP ")
            .skip(1)
            .filter_map(|s| s.split_whitespace().nth(2))
            .map(|w| w.trim_end_matches(['/', '"']))
            .collect();
        let mut table: Vec<&str> = WORKLOADS.iter().map(|w| w.name).collect();
        script.sort_unstable();
        table.sort_unstable();
        assert_eq!(script, table, "guest/compare.sh against WORKLOADS");
        assert!(SCRIPT.contains(&format!("for build in {}; do", BUILDS.join(" "))));
    }

    #[test]
    fn a_missing_build_is_an_error() {
        assert!(parse("CMP before 1 tar-x 5\n").is_err());
        assert!(parse("CMP before 1 tar-x many\n").is_err());
    }
}
