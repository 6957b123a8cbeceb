//! `cargo xtask bench kernel`: what fp's BPF LSM programs cost, measured in the test VM against
//! the same workloads with no fp program loaded; `bench compare`: two builds in one VM boot. See
//! docs/performance.md.
mod compare;
mod table;

use crate::kernels::{self, KERNELS, PreparedKernel};
use crate::test_kernel::cargo_executables;
use crate::vm::{self, VmRun};
use crate::{setup, step::Report};
use anyhow::{Context as _, Result, anyhow, bail};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use table::{COMPARED, GOALS, PHASES, WORKLOADS, always_measured};

#[derive(clap::Subcommand)]
pub enum BenchArgs {
    /// Syscall and workload overhead of fp's programs, outside and inside sessions (one VM per kernel).
    Kernel(KernelBenchArgs),
    /// Two builds of fp in one VM boot, rounds alternating: a change against its parent.
    Compare(compare::CompareArgs),
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
    /// Interleaved rounds (default 5, or 2 with --quick): more rounds narrow the spread of the
    /// ratios, at about 2.5 minutes per round and kernel on a quiet 2-core host.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: Option<u32>,
    /// Only these phases, comma-separated (default: all; `baseline` always runs): e.g.
    /// `noop,outside,outside-prompt` for the outsider lines, affordable with many rounds.
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(PHASES))]
    phases: Vec<String>,
    #[command(flatten)]
    clock: vm::ClockArg,
}

impl KernelBenchArgs {
    /// The phases to run, in [`PHASES`] order.
    fn phases(&self) -> Vec<&'static str> {
        PHASES
            .into_iter()
            .filter(|p| {
                *p == "baseline" || self.phases.is_empty() || self.phases.iter().any(|s| s == p)
            })
            .collect()
    }
}

/// Runs in the guest (guest/kernel.sh). Each measurement prints
/// `BENCH <phase> <workload> <round> <ns>`, each loaded program
/// `HOOK <phase> <name> <run_time_ns> <run_cnt> <verified_insns>`, each embedded session start
/// `START <round> <ns>`, and each start through the daemon and of the command alone
/// `START-DAEMON <round> <ns>`, `START-BARE <round> <ns>`, and each time of Claude Code to its
/// first model request through the daemon and alone `AGENT-DAEMON <round> <ns>`,
/// `AGENT-BARE <round> <ns>`; the `@X@` are filled in by `script`. One VM boot, interleaved rounds:
/// every round runs every phase once, in `PHASES` order, so drift over the run spreads over all
/// phases alike. The phases and workloads it runs are the rows of [`table`].
const SCRIPT: &str = include_str!("guest/kernel.sh");

/// The shell function both guest scripts time whole commands with (guest/cmd_time.sh): it
/// replaces the line `@CMD_TIME@`.
const CMD_TIME: &str = include_str!("guest/cmd_time.sh");

/// What one kernel's VM printed: samples per (phase, workload) by round, and per-program stats
/// per phase.
#[derive(Default)]
struct Results {
    samples: BTreeMap<(String, String), BTreeMap<u32, u64>>,
    /// (phase, program) -> (run_time_ns, run_cnt)
    hooks: BTreeMap<(String, String), (u64, u64)>,
    /// program -> the instructions the verifier processed to load it
    verified: BTreeMap<String, u64>,
    /// `fp run`'s start per round, ns
    starts: BTreeMap<u32, u64>,
    /// `fp run`'s start through the daemon, and the command's alone, per round, ns
    daemon_starts: BTreeMap<u32, u64>,
    bare_starts: BTreeMap<u32, u64>,
    /// Claude Code's time to its first model request under its profile through the daemon, and
    /// alone, per round, ns
    agent_daemon: BTreeMap<u32, u64>,
    agent_bare: BTreeMap<u32, u64>,
}

pub fn main(args: BenchArgs) -> Result<ExitCode> {
    let args = match args {
        BenchArgs::Kernel(args) => args,
        BenchArgs::Compare(args) => return compare::main(args),
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
    let rounds = args.rounds.unwrap_or(if args.quick { 2 } else { 5 });
    let phases = args.phases();
    // The agent CLI whose first model request the `inside` phase times through the daemon.
    let claude = match phases.contains(&"inside") {
        true => Some(crate::agent_clis::claude_code(Report::ChangesOnly)?),
        false => None,
    };
    for pin in pins {
        let kernel = kernels::ensure(pin, Report::ChangesOnly)?;
        println!(
            "xtask: kernel {}: measuring {rounds} rounds of {} (about {} minutes on a quiet 2-core \
             host)",
            kernel.name,
            phases.join(", "),
            // 6.1 took 1,282 s for 5 rounds of the ten phases at `98249eb`, 6.12 992 s.
            2 + rounds as usize * phases.len() * 2 / 5
        );
        // Leave room for a busier host.
        let timeout = Duration::from_secs(1200 + 600 * u64::from(rounds));
        let script = script(&fp, &load, claude.as_deref(), args.quick, rounds, &phases);
        let output = run_in_vm(&kernel, script, timeout, args.clock.clock())?;
        let results = parse(&output, &phases)?;
        args.clock.announce();
        print!("{}", report(kernel.name, args.quick, &results, &phases)?);
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

fn script(
    fp: &std::path::Path,
    load: &std::path::Path,
    claude: Option<&std::path::Path>,
    quick: bool,
    rounds: u32,
    phases: &[&str],
) -> String {
    let iterations = if quick { 10_000 } else { 100_000 };
    SCRIPT
        .replace("@CMD_TIME@\n", CMD_TIME)
        .replace("@FP@", &crate::cmd::shell_quote(&fp.display().to_string()))
        .replace("@LOAD@", &crate::cmd::shell_quote(&load.display().to_string()))
        .replace(
            "@CLAUDE@",
            &crate::cmd::shell_quote(&claude.map(|c| c.display().to_string()).unwrap_or_default()),
        )
        .replace("@ITERATIONS@", &iterations.to_string())
        .replace("@ROUNDS@", &rounds.to_string())
        .replace("@PHASES@", &phases.join(" "))
}

/// Runs the shell `script` as root in a VM booting `kernel` whose clock counts `clock`; when it
/// counts instructions, with one vCPU (the clock would count both) and `FP_BENCH_CPU_TIME=1`,
/// which tells the script to time whole commands by their CPU time. What it printed, or its last
/// lines in the error if it failed.
fn run_in_vm(
    kernel: &PreparedKernel,
    script: String,
    timeout: Duration,
    clock: vm::GuestClock,
) -> Result<String> {
    let run = VmRun {
        timeout,
        rw: Vec::new(),
        env: vm::guest_env()
            .into_iter()
            .chain(
                (clock == vm::GuestClock::Instructions)
                    .then(|| ("FP_BENCH_CPU_TIME".into(), "1".into())),
            )
            .collect(),
        cwd: "/".into(),
        command: vec!["sh".into(), "-c".into(), script],
        cmdline: None,
        cpus: clock.cpus(),
        clock,
    };
    let finished = vm::boot(kernel, &run)?;
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
    Ok(finished.output)
}

/// The guest's output lines, each with its whitespace-separated fields.
fn guest_lines(output: &str) -> impl Iterator<Item = (&str, Vec<&str>)> {
    output.lines().map(|line| (line.trim(), line.split_whitespace().collect()))
}

/// A number in the guest's `line`.
fn guest_number(line: &str, field: &str) -> Result<u64> {
    field.parse().with_context(|| format!("not a number in the guest's line {line:?}"))
}

/// The guest's figures; an error if a workload every phase reports is missing for one of
/// `phases`.
fn parse(output: &str, phases: &[&str]) -> Result<Results> {
    let mut results = Results::default();
    for (line, fields) in guest_lines(output) {
        let number = |s: &str| guest_number(line, s);
        match fields.as_slice() {
            ["BENCH", phase, workload, round, ns] => {
                let round = u32::try_from(number(round)?)?;
                results
                    .samples
                    .entry((phase.to_string(), workload.to_string()))
                    .or_default()
                    .insert(round, number(ns)?);
            }
            ["HOOK", phase, program, run_time_ns, run_cnt, verified] => {
                results.hooks.insert(
                    (phase.to_string(), program.to_string()),
                    (number(run_time_ns)?, number(run_cnt)?),
                );
                results.verified.insert(program.to_string(), number(verified)?);
            }
            [
                kind @ ("START" | "START-DAEMON" | "START-BARE" | "AGENT-DAEMON" | "AGENT-BARE"),
                round,
                ns,
            ] => {
                let starts = match *kind {
                    "START" => &mut results.starts,
                    "START-DAEMON" => &mut results.daemon_starts,
                    "START-BARE" => &mut results.bare_starts,
                    "AGENT-DAEMON" => &mut results.agent_daemon,
                    _ => &mut results.agent_bare,
                };
                starts.insert(u32::try_from(number(round)?)?, number(ns)?);
            }
            _ => {}
        }
    }
    // A session's programs served its outside and then its inside pass (`OUTSIDE+INSIDE`):
    // inside is the difference.
    let both: Vec<(String, String, String, (u64, u64))> = results
        .hooks
        .iter()
        .filter_map(|((phase, program), &v)| {
            let (outside, inside) = phase.split_once('+')?;
            Some((outside.to_owned(), inside.to_owned(), program.clone(), v))
        })
        .collect();
    for (outside, inside, program, (ns, count)) in both {
        let (ns0, count0) =
            results.hooks.get(&(outside, program.clone())).copied().unwrap_or((0, 0));
        results
            .hooks
            .insert((inside, program), (ns.saturating_sub(ns0), count.saturating_sub(count0)));
    }
    // A workload that failed in a pipeline leaves a hole rather than an exit status: refuse it.
    for phase in phases {
        for workload in always_measured() {
            if !results.samples.contains_key(&(phase.to_string(), workload.to_string())) {
                bail!("the guest printed no {workload} figure for {phase} (see its output above)");
            }
        }
    }
    Ok(results)
}

fn median(samples: &[f64]) -> Option<f64> {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable_by(f64::total_cmp);
    match sorted.len() {
        0 => None,
        n if n % 2 == 1 => Some(sorted[n / 2]),
        n => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// The ratio of `phase` to `to` per round (rounds both have), as (median, min, max).
fn ratio(results: &Results, workload: &str, phase: &str, to: &str) -> Option<(f64, f64, f64)> {
    spread(&ratios(results, workload, phase, to))
}

/// The ratios of `phase` to `to`, one per round both have.
fn ratios(results: &Results, workload: &str, phase: &str, to: &str) -> Vec<f64> {
    let of = |p: &str| results.samples.get(&(p.to_string(), workload.to_string()));
    let (Some(a), Some(b)) = (of(phase), of(to)) else {
        return Vec::new();
    };
    a.iter()
        .filter_map(|(round, &x)| b.get(round).filter(|&&y| y > 0).map(|&y| x as f64 / y as f64))
        .collect()
}

/// A distribution-free interval holding the median with at least 95% confidence: the k-th
/// smallest and k-th largest sample, k the largest with P(Binomial(n, 1/2) < k) <= 2.5%. None
/// for fewer than 6 samples, where no such k exists.
fn median_interval(samples: &[f64]) -> Option<(f64, f64)> {
    let n = samples.len();
    let mut sorted = samples.to_vec();
    sorted.sort_unstable_by(f64::total_cmp);
    // P(X < k) for k = 1, 2, ...: cumulative binomial probabilities.
    let (mut k, mut below, mut term) = (0, 0.0, 0.5f64.powi(n as i32));
    while k < n / 2 && below + term <= 0.025 {
        below += term;
        term *= (n - k) as f64 / (k + 1) as f64;
        k += 1;
    }
    (k > 0).then(|| (sorted[k - 1], sorted[n - k]))
}

/// (median, min, max) of `samples`; None if there are none.
fn spread(samples: &[f64]) -> Option<(f64, f64, f64)> {
    let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
    let max = samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((median(samples)?, min, max))
}

/// The table of medians and ratios for one kernel, and how the goals fare.
fn report(kernel: &str, quick: bool, results: &Results, phases: &[&str]) -> Result<String> {
    use std::fmt::Write as _;
    let rounds = results
        .samples
        .get(&("baseline".to_string(), "open+close".to_string()))
        .map_or(0, BTreeMap::len);
    let mut out = String::new();
    writeln!(
        out,
        "\n== kernel {kernel}{} ==",
        if quick { " (--quick: smoke check only)" } else { "" }
    )?;
    writeln!(
        out,
        "{rounds} interleaved rounds; baseline: median; every other column: the median over the \
         rounds of (phase / baseline of the same round) [min-max]"
    )?;
    // The phases besides the baseline, and the columns comparing two of them.
    let measured = |p: &str| phases.contains(&p);
    let compared: Vec<&table::Compared> =
        COMPARED.iter().filter(|c| measured(c.phase) && measured(c.to)).collect();
    write!(out, "{:<11} {:>16}", "workload", "baseline")?;
    for phase in &phases[1..] {
        write!(out, "  {phase:<19}")?;
    }
    for c in &compared {
        write!(out, "  {:<19}", c.title)?;
    }
    writeln!(out)?;
    for &table::Workload { name: workload, unit, .. } in &WORKLOADS {
        let (unit, scale) = (unit.label(), unit.scale());
        let Some(base) = results.samples.get(&("baseline".to_string(), workload.to_string()))
        else {
            continue;
        };
        let base: Vec<f64> = base.values().map(|&v| v as f64).collect();
        let Some(base) = median(&base) else { continue };
        write!(out, "{workload:<11} {:>10.1} {unit:<5}", base * scale)?;
        let pairs = phases[1..]
            .iter()
            .map(|p| (*p, "baseline"))
            .chain(compared.iter().map(|c| (c.phase, c.to)));
        for (phase, to) in pairs {
            match ratio(results, workload, phase, to) {
                Some((m, lo, hi)) => write!(out, "  {:<19}", format!("{m:.3}x [{lo:.2}-{hi:.2}]"))?,
                None => write!(out, "  {:<19}", "-")?,
            }
        }
        writeln!(out)?;
    }

    writeln!(out, "per-program cost, run_time_ns / run_cnt (bpf_stats pass), ns per call:")?;
    let programs: std::collections::BTreeSet<&String> =
        results.hooks.keys().map(|(_, program)| program).collect();
    for program in programs {
        let phases: &[&str] =
            if program.starts_with("noop_fmod_ret_") || program.starts_with("noop_fentry_") {
                &["noop-fmod-ret"]
            } else if program.starts_with("noop_") {
                &["noop", "noop-cgroup"]
            } else if program.starts_with("fp_fmod_ret_") || program.starts_with("fp_fentry_") {
                &["outside-fmod-ret", "inside-fmod-ret"]
            } else {
                &["outside", "inside"]
            };
        let called = |phase: &&str| {
            results.hooks.get(&(phase.to_string(), program.clone())).is_some_and(|h| h.1 > 0)
        };
        if !phases.iter().any(called) {
            continue; // never called in the run
        }
        write!(out, "  {program:<26}")?;
        for phase in phases {
            match results.hooks.get(&(phase.to_string(), program.clone())) {
                Some(&(ns, count)) if count > 0 => {
                    write!(out, "  {phase} {:>7.0} ({count:>6})", ns as f64 / count as f64)?
                }
                _ => write!(out, "  {phase} {:>7} ({:>6})", "-", 0)?,
            }
        }
        writeln!(out)?;
    }

    // What a session's start pays for: the verifier's work per program, and the start itself.
    let mut verified: Vec<(&String, &u64)> =
        results.verified.iter().filter(|(program, _)| program.starts_with("fp_")).collect();
    verified.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    writeln!(out, "instructions the verifier processed per fp program (its budget: 1,000,000):")?;
    for line in verified.chunks(4) {
        let cells: Vec<String> = line.iter().map(|(p, n)| format!("{p:<24} {n:>7}")).collect();
        writeln!(out, "  {}", cells.join("  "))?;
    }
    let starts: Vec<f64> = results.starts.values().map(|&ns| ns as f64 / 1e9).collect();
    if let Some((m, lo, hi)) = spread(&starts) {
        writeln!(
            out,
            "fp run start (exec to the command's first instruction): {m:.2} s [{lo:.2}-{hi:.2}] \
             over {} rounds",
            starts.len()
        )?;
    }
    // Through the daemon: the start's cost against the same command started alone, per round.
    if let Some(line) = paired(&results.daemon_starts, &results.bare_starts) {
        writeln!(out, "fp run start through the daemon: {line}")?;
    }
    let agent_ratios = paired_ratios(&results.agent_daemon, &results.agent_bare);
    if let Some(line) = paired(&results.agent_daemon, &results.agent_bare) {
        writeln!(out, "Claude Code's first model request through the daemon: {line}")?;
    }

    // Each goal's median ratio, and how well the rounds pin it down.
    let goal = |name: &str, ratios: &[f64], limit: f64| -> String {
        let interval = match median_interval(ratios) {
            Some((lo, hi)) => format!("; 95% interval of the median {lo:.3}-{hi:.3}"),
            None => String::new(),
        };
        match median(ratios) {
            Some(v) if v <= limit => {
                format!("goal {name} <= {limit:.2}x: met ({v:.3}x{interval})\n")
            }
            Some(v) => format!(
                "goal {name} <= {limit:.2}x: NOT met ({v:.3}x, {:+.1}% over{interval})\n",
                (v / limit - 1.0) * 100.0
            ),
            None => format!("goal {name}: not measured\n"),
        }
    };
    for &table::Goal { name, phase, to, limit, workloads } in &GOALS {
        if !(measured(phase) && measured(to)) {
            continue;
        }
        for workload in workloads {
            out +=
                &goal(&format!("{name} {workload}"), &ratios(results, workload, phase, to), limit);
        }
    }
    if !agent_ratios.is_empty() {
        out += &goal("claude-code-first-request/alone", &agent_ratios, table::AGENT_START_LIMIT);
    }
    Ok(out)
}

/// Per round both have, `fp` / `bare`.
fn paired_ratios(fp: &BTreeMap<u32, u64>, bare: &BTreeMap<u32, u64>) -> Vec<f64> {
    fp.iter()
        .filter_map(|(round, &ns)| Some(ns as f64 / *bare.get(round).filter(|&&b| b > 0)? as f64))
        .collect()
}

/// `fp`'s times against `bare`'s, rounds paired: "F s [lo-hi], the command alone B s: R x
/// [lo-hi] over N rounds"; None if no round has both.
fn paired(fp: &BTreeMap<u32, u64>, bare: &BTreeMap<u32, u64>) -> Option<String> {
    let seconds = |times: &BTreeMap<u32, u64>| -> Vec<f64> {
        times.values().map(|&ns| ns as f64 / 1e9).collect()
    };
    let ratios = paired_ratios(fp, bare);
    let (m, lo, hi) = spread(&seconds(fp))?;
    let (alone, ..) = spread(&seconds(bare))?;
    let (ratio, rlo, rhi) = spread(&ratios)?;
    Some(format!(
        "{m:.3} s [{lo:.3}-{hi:.3}], the command alone {alone:.3} s: {ratio:.2}x \
         [{rlo:.2}-{rhi:.2}] over {} rounds",
        ratios.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn the_medians_interval_takes_order_statistics_by_the_binomial() {
        let samples: Vec<f64> = (1..=15).map(f64::from).collect();
        // n = 15: P(X <= 3) = 1.76%, P(X <= 4) = 5.9%: the 4th smallest and the 4th largest.
        assert_eq!(median_interval(&samples), Some((4.0, 12.0)));
        // n = 6: P(X = 0) = 1.6%: the extremes.
        assert_eq!(median_interval(&samples[..6]), Some((1.0, 6.0)));
        assert_eq!(median_interval(&samples[..5]), None);
        assert_eq!(median_interval(&[]), None);
    }

    #[test]
    fn report_shows_per_round_ratios_and_the_inside_stats() {
        let mut output = String::from(
            "console noise\nHOOK noop noop_file_open 100 10 5\nHOOK noop-cgroup \
             noop_cgroup_file_open 200 10 5\nHOOK outside fp_file_open 300 10 \
             240314\nHOOK outside+inside fp_file_open 3300 20 240314\nSTART 1 6000000000\n\
             HOOK noop-fmod-ret noop_fmod_ret_file_open 400 10 2\n\
             START 2 5000000000\nSTART 3 5500000000\nSTART-BARE 1 100000000\n\
             START-DAEMON 1 900000000\nSTART-BARE 2 200000000\nSTART-DAEMON 2 1000000000\n\
             AGENT-BARE 1 7000000000\nAGENT-DAEMON 1 7300000000\n",
        );
        for (round, base) in [(1, 100), (2, 200), (3, 100)] {
            for (phase, factor) in
                [("baseline", 1.0), ("noop", 1.0), ("outside", 1.01), ("inside", 1.2)]
                    .into_iter()
                    .chain([("inside-1000", 1.2), ("inside-10000", 1.32), ("landlock", 1.1)])
                    .chain([("noop-cgroup", 1.1), ("noop-fmod-ret", 1.02)])
                    .chain([("outside-prompt", 1.01), ("inside-prompt", 1.5)])
                    .chain([("outside-fmod-ret", 1.03), ("inside-fmod-ret", 1.2)])
            {
                let v = (base as f64 * factor) as u64;
                for workload in always_measured() {
                    output += &format!("BENCH {phase} {workload} {round} {v}\n");
                }
            }
        }
        let results = parse(&output, &PHASES).unwrap();
        let table = report("6.12", false, &results, &PHASES).unwrap();
        assert!(table.contains("3 interleaved rounds"), "{table}");
        let daemon = "through the daemon: 0.950 s [0.900-1.000], the command alone 0.150 s: 7.00x \
                      [5.00-9.00] over 2 rounds";
        assert!(table.contains(daemon), "{table}");
        let agent = "first model request through the daemon: 7.300 s [7.300-7.300], the command \
                     alone 7.000 s: 1.04x [1.04-1.04] over 1 rounds";
        assert!(table.contains(agent), "{table}");
        assert!(table.contains("goal claude-code-first-request/alone <= 1.10x: met (1.043x"));
        assert!(table.contains("1.200x [1.20-1.20]"), "{table}");
        assert!(table.contains("inside     300 ("), "{table}");
        assert!(table.contains("noop      10 (    10)"), "{table}");
        assert!(table.contains("noop-cgroup      20 (    10)"), "{table}");
        assert!(table.contains("noop_fmod_ret_file_open     noop-fmod-ret      40 (    10)"));
        assert!(table.contains("inside/noop-cgroup"), "{table}");
        assert!(table.contains("1.091x [1.09-1.09]"), "{table}");
        assert!(table.contains("goal outside/noop open+close <= 1.01x: met"), "{table}");
        assert!(table.contains("goal inside/landlock open+close <= 1.00x: NOT met"), "{table}");
        assert!(table.contains("goal inside/baseline open+close <= 1.25x: met"), "{table}");
        assert!(
            table.contains("goal flat inside-10000/inside open+close <= 1.05x: NOT met (1.100x")
        );
        assert!(table.contains("goal outside-prompt/outside open+close <= 1.02x: met"), "{table}");
        let fmod_ret = "goal outside-fmod-ret/noop-fmod-ret open+close <= 1.02x: met (1.010x";
        assert!(table.contains(fmod_ret), "{table}");
        assert!(table.contains("goal inside-fmod-ret/inside open+close <= 1.00x: met"), "{table}");
        assert!(table.contains("fmod-ret outside/noop"), "{table}");
        assert!(table.contains(&format!("{:<24} {:>7}", "fp_file_open", 240314)), "{table}");
        let verified = table.split("instructions the verifier").nth(1).unwrap();
        assert!(!verified.contains("noop_file_open"), "{table}");
        assert!(table.contains("5.50 s [5.00-6.00] over 3 rounds"), "{table}");
    }

    #[test]
    fn the_guest_scripts_are_filled_in() {
        use std::path::Path;
        // An `@X@` left over (the scripts hold other `@`s: `bench@localhost`).
        let placeholder = |script: &str| {
            script.match_indices('@').find_map(|(i, _)| {
                let rest = &script[i + 1..];
                let name = &rest[..rest.find(|c: char| !c.is_ascii_uppercase() && c != '_')?];
                (!name.is_empty() && rest[name.len()..].starts_with('@')).then(|| name.to_string())
            })
        };
        let (fp, load) = (Path::new("/usr/bin/fp"), Path::new("/opt/it's here/fp-bench-load"));
        let kernel =
            script(fp, load, Some(Path::new("/cache/claude")), true, 3, &["baseline", "noop"]);
        let compare = compare::script(load, Path::new("/old/fp"), fp, 2);
        for script in [&kernel, &compare] {
            assert_eq!(placeholder(script), None, "{script}");
            assert_eq!(script.matches(CMD_TIME).count(), 1, "{script}");
            assert!(script.contains("LOAD='/opt/it'\\''s here/fp-bench-load'"), "{script}");
        }
        assert!(kernel.contains("ITERATIONS=10000 ROUNDS=3 PHASES=\"baseline noop\""), "{kernel}");
        assert!(compare.contains("while [ $r -le 2 ]; do"), "{compare}");
    }

    #[test]
    fn a_garbled_or_missing_measurement_is_an_error() {
        assert!(parse("BENCH baseline stat 1 many\n", &PHASES).is_err());
        assert!(
            parse("BENCH baseline stat 1 5\n", &PHASES).is_err(),
            "the other phases are missing"
        );
    }

    #[test]
    fn a_run_of_some_phases_reports_their_columns_and_goals_only() {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: KernelBenchArgs,
        }
        let cli =
            Cli::try_parse_from(["bench", "--phases", "outside-prompt,noop,outside"]).unwrap();
        let phases = cli.args.phases();
        assert_eq!(phases, ["baseline", "noop", "outside", "outside-prompt"]);
        assert!(Cli::try_parse_from(["bench", "--phases", "outsid"]).is_err());
        assert_eq!(Cli::try_parse_from(["bench"]).unwrap().args.phases(), PHASES);

        let mut output = String::new();
        for phase in &phases {
            for workload in always_measured() {
                output += &format!("BENCH {phase} {workload} 1 100\n");
            }
        }
        let results = parse(&output, &phases).unwrap();
        let table = report("6.12", false, &results, &phases).unwrap();
        assert!(table.contains("outside/noop"), "{table}");
        assert!(!table.contains("landlock"), "{table}");
        assert!(table.contains("goal outside/noop open+close <= 1.01x: met"), "{table}");
        assert!(table.contains("goal outside-prompt/outside tar-x: not measured"), "{table}");
        assert!(!table.contains("goal inside"), "{table}");
    }
}
