//! `cargo xtask test-kernel` and `cargo xtask test`.
//!
//! The privileged tests (crate fp-tests) are built on the host with the real BPF object, then one
//! VM per kernel runs every test executable; cargo never runs in the guest.
use crate::cmd::shell_quote;
use crate::kernels::{self, KERNELS};
use crate::vm::{self, Echo, VmRun};
use crate::{cmd, paths};
use crate::{setup, step::Report};
use anyhow::{Context as _, Result, anyhow, bail};
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// Before each test executable's output; followed by its path.
const BINARY_MARKER: &str = "fp-test-binary: ";
/// After each test executable; followed by its exit status.
const BINARY_EXIT_MARKER: &str = "fp-test-binary-exit: ";

/// How long one kernel's VM may run the whole suite: a quiet 2-core host needs ~15-20 min per
/// kernel, and a host three times slower (shared CI machines) must not fail the run (issue 16
/// item 7). A hung test still fails the run, only later.
const KERNEL_SUITE_TIMEOUT_SECS: u64 = 3600;

#[derive(clap::Args)]
pub struct TestKernelArgs {
    /// `6.1`, `6.12`, `native` (this host, where BPF LSM works) or `all` (every pinned kernel, plus
    /// native where `fp kernel probe` proves support).
    #[arg(long, default_value = "all")]
    kernel: String,
    /// Seconds after which one kernel's VM is killed and its run fails.
    #[arg(long, default_value_t = KERNEL_SUITE_TIMEOUT_SECS)]
    timeout: u64,
    /// Passed to every test executable (libtest filters and flags).
    #[arg(last = true)]
    filter: Vec<String>,
}

pub fn main(args: TestKernelArgs) -> Result<ExitCode> {
    setup::run(Report::ChangesOnly)?;
    let totals = kernel_tests(&args.kernel, Duration::from_secs(args.timeout), &args.filter)?;
    totals.print();
    Ok(totals.exit_code())
}

/// `cargo xtask test`: setup, the default members' tests with the real BPF object, then the kernel
/// tests on every kernel.
pub fn test_all() -> Result<ExitCode> {
    setup::run(Report::ChangesOnly)?;
    println!("xtask: cargo test (default members, real BPF object)");
    let unit_ok = Command::new("cargo")
        .arg("test")
        .current_dir(paths::workspace_root())
        .env_remove("FP_EBPF_STUB")
        .status()
        .context("cannot start cargo test")?
        .success();
    let totals = kernel_tests("all", Duration::from_secs(KERNEL_SUITE_TIMEOUT_SECS), &[])?;
    println!("unit-tests: {}", if unit_ok { "ok" } else { "FAILED" });
    totals.print();
    Ok(if unit_ok { totals.exit_code() } else { ExitCode::FAILURE })
}

/// Where the tests run.
enum Target {
    Vm(&'static kernels::KernelPin),
    Native,
}

impl Target {
    fn name(&self) -> &'static str {
        match self {
            Target::Vm(pin) => pin.name,
            Target::Native => "native",
        }
    }
}

/// A VM boot of each kernel besides its main one, after it: booted with `cmdline`, it runs the
/// test executable `own` (which runs nowhere else) and the suites `also` (which run in the main
/// boot too).
struct OtherBoot {
    cmdline: &'static str,
    own: &'static str,
    also: &'static [Suite],
}

/// A test executable of fp-tests, and which of its tests a boot runs: those whose names contain
/// one of `only`, or all of them when `only` is empty.
struct Suite {
    name: &'static str,
    only: &'static [&'static str],
}

impl Suite {
    const fn all(name: &'static str) -> Self {
        Suite { name, only: &[] }
    }
}

/// Without the BPF LSM, where fp enforces through its fmod_ret backend: the backend's own tests,
/// every escape suite, the prompt tier, the realistic workloads, reloads, and the tests of fp's
/// own protection and of its takeover of a killed daemon's sessions (the main boot runs them all
/// on the BPF LSM backend; docs/testing.md). Locked down for confidentiality (the kernel
/// then refuses BPF reads of its memory).
const OTHER_BOOTS: [OtherBoot; 2] = [
    OtherBoot {
        cmdline: "lsm=capability,yama",
        own: "no_bpf_lsm",
        also: &[
            Suite::all("escape_tiers"),
            Suite::all("escape_per_op"),
            Suite::all("escape_paths"),
            Suite::all("escape_ops"),
            Suite::all("escape_tools"),
            Suite::all("escape_boundary"),
            Suite::all("escape_floor"),
            Suite::all("prompt"),
            Suite::all("realistic"),
            Suite {
                name: "slice",
                only: &[
                    "sessions_cannot_reach_fp_itself_even_as_root",
                    "sessions_cannot_change_the_mount_table_even_as_root",
                    "enforcement_keeps_working_while_fp_is_paused",
                ],
            },
            Suite {
                name: "daemon",
                only: &["daemon_killed_under_load_keeps_enforcing_and_takes_its_sessions_over"],
            },
            Suite::all("reload"),
        ],
    },
    OtherBoot { cmdline: "lockdown=confidentiality", own: "locked_down", also: &[] },
];

/// Tests of fp's own userspace whose outcome does not depend on the kernel under them (the
/// daemon's protocol, socket and audit disk, the CLI's reporting, the agent CLIs under their
/// profiles, the cleanup after a killed run): each runs in the main boot of the kernel named
/// only, which keeps `cargo xtask test` within its hour (docs/testing.md). The kernels' other
/// tests run in both main boots.
const ONE_KERNEL: [(&str, Suite); 5] = [
    ("6.12", Suite::all("agents")),
    ("6.12", Suite::all("orphans")),
    (
        "6.12",
        Suite {
            name: "daemon",
            only: &[
                "daemon_refuses_pins_of_another_abi_version",
                "a_user_in_the_socket_group_runs_confined_sessions_through_the_daemon",
                "a_full_audit_disk_",
                "a_log_remounted_read_only_",
                "the_readme_quick_start_works_in_order",
            ],
        },
    ),
    (
        "6.12",
        Suite {
            name: "slice",
            only: &["exit_status_is_the_commands", "fp_run_unmounts_the_bpffs_it_mounted"],
        },
    ),
    (
        "6.1",
        Suite {
            name: "slice",
            only: &[
                "the_command_starts_in_its_workspace",
                "denials_are_reported_on_stderr_and_in_the_log",
            ],
        },
    ),
];

/// One VM boot (or the native run) and the test executables it runs.
struct Boot<'a> {
    target: &'a Target,
    tests: Vec<Executable>,
    cmdline: Option<&'static str>,
}

/// A test executable a boot runs, and the names of its tests that boot leaves out.
#[derive(Clone, Debug)]
struct Executable {
    name: String,
    path: PathBuf,
    skip: Vec<String>,
}

impl Executable {
    /// libtest's arguments: `filter`, then a `--skip` for each test left out.
    fn args<'a>(&'a self, filter: &'a [String]) -> impl Iterator<Item = &'a str> {
        let skip = self.skip.iter().flat_map(|name| ["--skip", name.as_str()]);
        filter.iter().map(String::as_str).chain(skip)
    }
}

impl Boot<'_> {
    fn name(&self) -> String {
        match self.cmdline {
            Some(cmdline) => format!("{} ({cmdline})", self.target.name()),
            None => self.target.name().to_owned(),
        }
    }
}

fn kernel_tests(kernel: &str, timeout: Duration, filter: &[String]) -> Result<Totals> {
    let built = build()?;
    let native = || native_supported(&built.fp_bin);
    let targets: Vec<Target> = match kernel {
        "all" => {
            let mut targets: Vec<Target> = KERNELS.iter().map(Target::Vm).collect();
            if native() {
                targets.push(Target::Native);
            } else {
                println!(
                    "xtask: native kernel tests skipped: `fp kernel probe` found no BPF LSM support here"
                );
            }
            targets
        }
        "native" if native() => vec![Target::Native],
        "native" => bail!("this host cannot load BPF LSM programs (`fp kernel probe` failed)"),
        name => vec![Target::Vm(kernels::find(name)?)],
    };
    // One lane per target: its boots run in order. The VMs' lanes run side by side, each VM with
    // one CPU (two VMs of two CPUs run slower together than one after the other: the figures are
    // in docs/testing.md); the native lane runs after them.
    let lanes: Vec<Vec<Boot>> = targets
        .iter()
        .map(|target| {
            let tests = built.main_boot(target);
            let mut lane = vec![Boot { target, tests, cmdline: None }];
            for other in &built.other_boots {
                let cmdline = Some(other.cmdline);
                match target {
                    Target::Vm(_) => {
                        let tests = std::iter::once(&other.own).chain(&other.also).cloned();
                        lane.push(Boot { target, tests: tests.collect(), cmdline })
                    }
                    Target::Native => println!(
                        "xtask: native: {} runs only in the VMs, which can boot with {}",
                        other.own.path.display(),
                        other.cmdline
                    ),
                }
            }
            lane
        })
        .collect();
    let (vm_lanes, native_lanes): (Vec<_>, Vec<_>) =
        lanes.into_iter().partition(|lane| matches!(lane[0].target, Target::Vm(_)));
    let side_by_side = vm_lanes.len() > 1;
    let run_lane = |lane: &Vec<Boot>| -> Result<Totals> {
        let mut totals = Totals::default();
        for boot in lane {
            totals.add(run_boot(boot, &built, timeout, filter, side_by_side)?);
        }
        Ok(totals)
    };
    let mut totals = Totals::default();
    let vm_totals = std::thread::scope(|scope| {
        let lanes: Vec<_> = vm_lanes.iter().map(|lane| scope.spawn(|| run_lane(lane))).collect();
        lanes
            .into_iter()
            .map(|lane| lane.join().expect("a kernel test lane panicked"))
            .collect::<Vec<_>>()
    });
    for lane in vm_totals {
        totals.add(lane?);
    }
    for lane in &native_lanes {
        totals.add(run_lane(lane)?);
    }
    Ok(totals)
}

/// Runs one boot's test executables and prints its outcome; `side_by_side`: other VMs run at
/// the same time (one CPU each, output tagged).
fn run_boot(
    boot: &Boot,
    built: &Built,
    timeout: Duration,
    filter: &[String],
    side_by_side: bool,
) -> Result<Totals> {
    let name = boot.name();
    let skipped: usize = boot.tests.iter().map(|t| t.skip.len()).sum();
    if (!filter.is_empty() || skipped > 0) && !any_test_matches(&boot.tests, filter)? {
        println!("xtask: kernel tests on {name}: no test matches the filter; not booted");
        return Ok(Totals::default());
    }
    println!("xtask: kernel tests on {name}: {} test executables", boot.tests.len());
    let command = vec!["/bin/sh".to_owned(), "-c".to_owned(), test_script(&boot.tests, filter)];
    let started = Instant::now();
    let output = match boot.target {
        Target::Vm(pin) => {
            let kernel = kernels::ensure(pin, Report::ChangesOnly)?;
            let mut env = vm::guest_env();
            env.push(("FP_BIN".into(), built.fp_bin.display().to_string()));
            let run = VmRun {
                timeout,
                rw: Vec::new(),
                env,
                cwd: built.tests_dir.clone(),
                command,
                cmdline: boot.cmdline,
                cpus: if side_by_side { 1 } else { vm::CPUS },
                clock: vm::GuestClock::Host,
            };
            let echo = if side_by_side { Echo::Tagged(pin.name) } else { Echo::On };
            vm::boot_echoing(&kernel, &run, echo).map(|finished| finished.output)
        }
        Target::Native => run_native(&command, built, timeout),
    };
    let result = match output {
        Ok(output) => judge(&output, boot.tests.len(), filter.is_empty().then_some(skipped)),
        Err(e) => KernelResult { problems: vec![format!("{e:#}")], ..KernelResult::default() },
    };
    println!(
        "kernel {name}: {} passed, {} failed, {} ignored, {} filtered out in {:.1} s",
        result.passed,
        result.failed,
        result.ignored,
        result.filtered_out,
        started.elapsed().as_secs_f64()
    );
    for problem in &result.problems {
        println!("kernel {name}: FAILED: {problem}");
    }
    Ok(Totals { passed: result.passed, failed: result.failed + result.problems.len() })
}

/// Whether libtest, given `filter`, would run any test of `tests` (asked on the host with
/// `--list`, which runs nothing).
fn any_test_matches(tests: &[Executable], filter: &[String]) -> Result<bool> {
    for test in tests {
        if !list_tests(&test.path, test.args(filter))?.is_empty() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The names of the tests libtest would run, given `args` (asked with `--list`, which runs
/// nothing).
fn list_tests<'a>(test: &Path, args: impl Iterator<Item = &'a str>) -> Result<Vec<String>> {
    let out = Command::new(test)
        .args(args)
        .args(["--list", "--format", "terse"])
        .output()
        .with_context(|| format!("cannot list the tests of {}", test.display()))?;
    if !out.status.success() {
        bail!("{} --list failed: {}", test.display(), String::from_utf8_lossy(&out.stderr));
    }
    let listed = String::from_utf8_lossy(&out.stdout);
    Ok(listed.lines().filter_map(|l| l.strip_suffix(": test")).map(str::to_owned).collect())
}

/// The tests of `names` that `suite` names (libtest's substring match, as `--skip` matches);
/// each name of its `only` must select one.
fn selected(suite: &Suite, names: &[String]) -> Result<Vec<String>> {
    if let Some(stale) = suite.only.iter().find(|only| !names.iter().any(|n| n.contains(*only))) {
        bail!("fp-tests' {} has no test named like {stale} (xtask/src/test_kernel.rs)", suite.name);
    }
    let named = |n: &&String| suite.only.is_empty() || suite.only.iter().any(|o| n.contains(o));
    Ok(names.iter().filter(named).cloned().collect())
}

/// `executable` with the tests of `skip` left out, checked: no test that still runs may contain
/// the name of one left out (libtest's `--skip` matches substrings: it would leave that out too).
fn leave_out(mut executable: Executable, names: &[String], skip: &[String]) -> Result<Executable> {
    for kept in names.iter().filter(|n| !skip.contains(n)) {
        if let Some(left_out) = skip.iter().find(|s| kept.contains(s.as_str())) {
            bail!("{}: `--skip {left_out}` would leave out {kept} too", executable.name);
        }
    }
    executable.skip.extend(skip.iter().cloned());
    Ok(executable)
}

/// The kernel tests' outcome over all kernels. Every problem that is not a failed test (the VM did
/// not start, a test was ignored, ...) also counts as one failure.
#[derive(Default)]
struct Totals {
    passed: usize,
    failed: usize,
}

impl Totals {
    fn add(&mut self, other: Totals) {
        self.passed += other.passed;
        self.failed += other.failed;
    }

    fn print(&self) {
        println!("kernel-tests: {} passed, {} failed", self.passed, self.failed);
    }

    fn exit_code(&self) -> ExitCode {
        if self.failed == 0 && self.passed > 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
    }
}

/// The host build: the fp binary and the privileged test executables (never the BPF stub).
struct Built {
    fp_bin: PathBuf,
    /// The main boots' test executables: all but [`OTHER_BOOTS`]' own.
    tests: Vec<Executable>,
    /// [`ONE_KERNEL`]: (kernel, executable, the names of its tests that run there only; None:
    /// all of them).
    one_kernel: Vec<(&'static str, String, Option<Vec<String>>)>,
    /// The executables of each of [`OTHER_BOOTS`].
    other_boots: Vec<OtherBootTests>,
    /// fp-tests' package directory: the tests run there, as under `cargo test`.
    tests_dir: PathBuf,
}

impl Built {
    /// What the main boot of `target` runs: every test executable, less the [`ONE_KERNEL`] tests
    /// of the other kernels (natively: all of them).
    fn main_boot(&self, target: &Target) -> Vec<Executable> {
        let kernel = match target {
            Target::Vm(pin) => pin.name,
            Target::Native => return self.tests.clone(),
        };
        let mut tests = Vec::new();
        'executables: for exe in &self.tests {
            let mut exe = exe.clone();
            let placed = self.one_kernel.iter().filter(|(k, e, _)| *k != kernel && *e == exe.name);
            for (_, _, elsewhere) in placed {
                match elsewhere {
                    None => continue 'executables,
                    Some(names) => exe.skip.extend(names.iter().cloned()),
                }
            }
            tests.push(exe);
        }
        tests
    }
}

/// One of [`OTHER_BOOTS`], its executables built.
struct OtherBootTests {
    cmdline: &'static str,
    own: Executable,
    also: Vec<Executable>,
}

/// Builds the `fp` binary with the real BPF object, as it ships (release): the demo and the
/// benchmarks run it.
pub fn build_fp() -> Result<PathBuf> {
    let args = ["build", "--release", "-p", "fp-agent", "--bin", "fp"];
    let fp = cargo_executables(&args, |a| a.target.name == "fp")?;
    fp.into_iter().next().ok_or_else(|| anyhow!("cargo built no `fp` executable"))
}

/// The kernel tests' build: one `cargo test --no-run` of the workspace, whose dev-profile `fp`
/// (built for fp-agent's own tests) and fp-tests' executables come out of the same dependency
/// build as `cargo test` of the default members. A `-p fp-tests` or `--release` build would
/// unify features differently and compile fp and its dependencies again (4-8 min on 2 cores).
/// The dev profile optimizes every dependency and fp's own crates (Cargo.toml), so this `fp` runs
/// about as fast as a release build under the VMs' TCG.
fn build() -> Result<Built> {
    println!("xtask: building fp and the privileged tests (real BPF object)");
    let args = ["test", "--workspace", "--exclude", "fp-ebpf", "--no-run"];
    let tests_dir = paths::workspace_root().join("tests");
    let (mut fp_bin, mut executables) = (None, Vec::new());
    for (artifact, exe) in cargo_artifacts(&args)? {
        if artifact.target.name == "fp" && !artifact.profile.test {
            fp_bin = Some(exe);
        } else if artifact.profile.test && artifact.target.src_path.starts_with(&tests_dir) {
            executables.push((artifact.target.name.clone(), exe));
        }
    }
    let fp_bin = fp_bin.ok_or_else(|| anyhow!("cargo built no `fp` executable"))?;
    let executable = |name: &str| {
        let path = executables
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, exe)| exe.clone())
            .ok_or_else(|| anyhow!("fp-tests has no test executable {name}"))?;
        anyhow::Ok(Executable { name: name.to_owned(), path, skip: Vec::new() })
    };
    // A suite of `OTHER_BOOTS` runs the tests it names; the others are left out.
    let suite = |suite: &Suite| {
        let exe = executable(suite.name)?;
        if suite.only.is_empty() {
            return Ok(exe);
        }
        let names = list_tests(&exe.path, std::iter::empty())?;
        let run = selected(suite, &names)?;
        let skip: Vec<String> = names.iter().filter(|n| !run.contains(n)).cloned().collect();
        leave_out(exe, &names, &skip)
    };
    let other_boots = OTHER_BOOTS
        .iter()
        .map(|boot| {
            Ok(OtherBootTests {
                cmdline: boot.cmdline,
                own: executable(boot.own)?,
                also: boot.also.iter().map(suite).collect::<Result<_>>()?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let one_kernel = ONE_KERNEL
        .iter()
        .map(|(kernel, suite)| {
            let exe = executable(suite.name)?;
            if suite.only.is_empty() {
                return Ok((*kernel, exe.name, None));
            }
            let names = list_tests(&exe.path, std::iter::empty())?;
            let there = selected(suite, &names)?;
            let exe = leave_out(exe, &names, &there)?;
            Ok((*kernel, exe.name, Some(there)))
        })
        .collect::<Result<Vec<_>>>()?;
    let tests: Vec<Executable> = executables
        .iter()
        .filter(|(name, _)| OTHER_BOOTS.iter().all(|boot| boot.own != name))
        .map(|(name, _)| executable(name))
        .collect::<Result<_>>()?;
    if tests.is_empty() {
        bail!("fp-tests has no test executables");
    }
    Ok(Built { fp_bin, tests, one_kernel, other_boots, tests_dir })
}

/// Runs cargo with JSON messages and returns the executables of the artifacts `wanted` selects.
pub fn cargo_executables(
    args: &[&str],
    wanted: impl Fn(&cargo_metadata::Artifact) -> bool,
) -> Result<Vec<PathBuf>> {
    let artifacts = cargo_artifacts(args)?;
    Ok(artifacts.into_iter().filter(|(a, _)| wanted(a)).map(|(_, exe)| exe).collect())
}

/// Runs cargo with JSON messages and returns every executable it built, with its artifact.
fn cargo_artifacts(args: &[&str]) -> Result<Vec<(cargo_metadata::Artifact, PathBuf)>> {
    let mut command = Command::new("cargo");
    command
        .args(args)
        .arg("--message-format=json-render-diagnostics")
        .current_dir(paths::workspace_root())
        .env_remove("FP_EBPF_STUB")
        .stdout(Stdio::piped());
    let mut child =
        command.spawn().with_context(|| format!("cannot start `{}`", cmd::describe(&command)))?;
    let stdout = child.stdout.take().ok_or_else(|| anyhow!("no stdout pipe"))?;
    let mut executables = Vec::new();
    for message in cargo_metadata::Message::parse_stream(BufReader::new(stdout)) {
        if let cargo_metadata::Message::CompilerArtifact(mut artifact) = message?
            && let Some(exe) = artifact.executable.take()
        {
            executables.push((artifact, exe.into_std_path_buf()));
        }
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("`{}` failed ({status})", cmd::describe(&command));
    }
    Ok(executables)
}

/// True when `fp kernel probe` proves BPF LSM programs load and attach on this host.
fn native_supported(fp_bin: &Path) -> bool {
    Command::new(fp_bin)
        .args(["kernel", "probe"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn run_native(command: &[String], built: &Built, timeout: Duration) -> Result<String> {
    let mut native = Command::new(&command[0]);
    native
        .args(&command[1..])
        .current_dir(&built.tests_dir)
        .env_remove("FP_TEST_VM")
        .env("FP_TEST_NATIVE", "1")
        .env("FP_BIN", &built.fp_bin);
    let (status, output) =
        vm::stream(&mut native, timeout, Echo::On).context("native kernel tests")?;
    if !status.success() {
        bail!("the native test script failed ({status})");
    }
    Ok(output)
}

/// A shell script that runs every test executable, framing each one's output with markers.
fn test_script(tests: &[Executable], filter: &[String]) -> String {
    let mut script = String::from("# Generated by cargo xtask test-kernel.\n");
    for test in tests {
        let args: String = test.args(filter).map(|a| format!(" {}", shell_quote(a))).collect();
        let test = shell_quote(&test.path.display().to_string());
        script +=
            &format!("echo {BINARY_MARKER}{test}\n{test}{args}\necho \"{BINARY_EXIT_MARKER}$?\"\n");
    }
    script
}

#[derive(Default, Debug)]
struct KernelResult {
    passed: usize,
    failed: usize,
    ignored: usize,
    filtered_out: usize,
    /// What went wrong besides failed tests.
    problems: Vec<String>,
}

/// Reads libtest's `test result:` lines per executable and names everything that is not a clean pass.
/// `left_out`: how many tests the boot's `--skip`s leave out (None: the command line's filter
/// leaves out any number).
fn judge(output: &str, expected_binaries: usize, left_out: Option<usize>) -> KernelResult {
    let mut result = KernelResult::default();
    let mut binaries = 0;
    let mut current: Option<(String, bool)> = None; // (executable, saw a result line)
    for line in output.lines() {
        // libtest colours its output on the guest's serial console.
        let line = &strip_ansi_colors(line);
        if let Some(binary) = line.strip_prefix(BINARY_MARKER) {
            binaries += 1;
            current = Some((binary.to_owned(), false));
        } else if let Some(status) = line.strip_prefix(BINARY_EXIT_MARKER) {
            let Some((binary, saw_result)) = current.take() else { continue };
            if status.trim() != "0" {
                result.problems.push(format!("{binary} exited with status {}", status.trim()));
            } else if !saw_result {
                result.problems.push(format!("{binary} printed no `test result:` line"));
            }
        } else if let Some(counts) = line.strip_prefix("test result: ") {
            if let Some((_, saw_result)) = current.as_mut() {
                *saw_result = true;
            }
            for part in counts.split(';') {
                let mut words = part.split_whitespace().skip_while(|w| w.ends_with('.'));
                let (Some(n), Some(what)) = (words.next(), words.next()) else { continue };
                let Ok(n) = n.parse::<usize>() else { continue };
                match what {
                    "passed" => result.passed += n,
                    "failed" => result.failed += n,
                    "ignored" => result.ignored += n,
                    "filtered" => result.filtered_out += n,
                    _ => {}
                }
            }
        }
    }
    if let Some((binary, _)) = current {
        result.problems.push(format!("{binary} did not finish"));
    }
    if binaries != expected_binaries {
        result.problems.push(format!("{binaries} of {expected_binaries} test executables ran"));
    }
    if result.ignored > 0 {
        result
            .problems
            .push(format!("{} tests ignored (every kernel test must run)", result.ignored));
    }
    if let Some(left_out) = left_out
        && result.filtered_out != left_out
    {
        result.problems.push(format!(
            "{} tests filtered out, {left_out} expected (xtask's own --skip)",
            result.filtered_out
        ));
    }
    if result.passed == 0 && result.failed == 0 {
        result.problems.push("no test ran".into());
    }
    result
}

/// Removes `ESC [ ... m` colour sequences.
fn strip_ansi_colors(line: &str) -> String {
    let mut plain = String::with_capacity(line.len());
    let mut rest = line;
    while let Some((before, after)) = rest.split_once("\x1b[") {
        plain += before;
        rest = after.split_once('m').map_or("", |(_, tail)| tail);
    }
    plain + rest
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every escape suite runs on the fmod_ret backend too.
    #[test]
    fn the_escape_suites_run_on_the_fmod_ret_backend() {
        let tests = std::fs::read_to_string(paths::workspace_root().join("tests/Cargo.toml"));
        let escape: Vec<String> = tests
            .unwrap()
            .lines()
            .filter_map(|l| l.strip_prefix("name = \"escape_"))
            .map(|rest| format!("escape_{}", rest.trim_end_matches('"')))
            .collect();
        assert!(escape.len() >= 7, "{escape:?}");
        let fmod_ret = &OTHER_BOOTS[0];
        assert_eq!(fmod_ret.cmdline, "lsm=capability,yama");
        for suite in escape.iter().map(String::as_str).chain(["prompt", "realistic"]) {
            let all = fmod_ret.also.iter().find(|s| s.name == suite).map(|s| s.only.is_empty());
            assert_eq!(all, Some(true), "{suite}");
        }
    }

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn a_suite_selects_the_tests_it_names() {
        let suite = Suite { name: "daemon", only: &["takes_over", "b_c"] };
        let tests = names(&["a_takes_over_x", "b_c", "other", "last"]);
        assert_eq!(selected(&suite, &tests).unwrap(), names(&["a_takes_over_x", "b_c"]));
        assert_eq!(selected(&Suite::all("x"), &tests).unwrap(), tests);
        let e = selected(&Suite { name: "daemon", only: &["gone"] }, &tests).unwrap_err();
        assert!(e.to_string().contains("no test named like gone"), "{e}");
    }

    fn exe(name: &str) -> Executable {
        Executable { name: name.into(), path: format!("/t/{name}").into(), skip: Vec::new() }
    }

    #[test]
    fn a_skip_that_would_leave_out_another_test_is_refused() {
        let tests = names(&["a_b", "b", "c"]);
        assert_eq!(leave_out(exe("s"), &tests, &names(&["c"])).unwrap().skip, names(&["c"]));
        // `--skip b` would leave out `a_b` as well.
        let e = leave_out(exe("s"), &tests, &names(&["b"])).unwrap_err().to_string();
        assert!(e.contains("would leave out a_b"), "{e}");
    }

    #[test]
    fn each_main_boot_leaves_out_the_other_kernels_one_kernel_tests() {
        let built = Built {
            fp_bin: "/t/fp".into(),
            tests: vec![exe("agents"), exe("daemon"), exe("slice")],
            one_kernel: vec![
                ("6.12", "agents".into(), None),
                ("6.12", "daemon".into(), Some(names(&["a_full_audit_disk"]))),
            ],
            other_boots: Vec::new(),
            tests_dir: "/t".into(),
        };
        let boot = |kernel: &str| {
            let tests = built.main_boot(&Target::Vm(kernels::find(kernel).unwrap()));
            tests.into_iter().map(|e| (e.name, e.skip)).collect::<Vec<_>>()
        };
        let none = Vec::new();
        let on_6_12 = [("agents".into(), none.clone()), ("daemon".into(), none.clone())];
        assert_eq!(boot("6.12")[..2], on_6_12);
        let on_6_1 = [("daemon".into(), names(&["a_full_audit_disk"])), ("slice".into(), none)];
        assert_eq!(boot("6.1"), on_6_1);
        assert_eq!(built.main_boot(&Target::Native).len(), 3);
    }

    #[test]
    fn one_kernel_tests_name_pinned_kernels() {
        for (kernel, _) in &ONE_KERNEL {
            assert!(KERNELS.iter().any(|k| k.name == *kernel), "{kernel}");
        }
    }

    #[test]
    fn the_script_passes_each_executables_skips_after_the_filter() {
        let exe = Executable { skip: names(&["x y"]), ..exe("a") };
        let script = test_script(&[exe], &names(&["f"]));
        assert!(script.contains("'/t/a' 'f' '--skip' 'x y'\n"), "{script}");
    }

    const CLEAN: &str = "fp-test-binary: /t/vm_smoke-1\n\nrunning 2 tests\ntest a ... ok\n\
        test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s\n\
        fp-test-binary-exit: 0\n";

    #[test]
    fn a_clean_run_has_no_problems() {
        let result = judge(CLEAN, 1, Some(0));
        assert_eq!((result.passed, result.failed), (2, 0));
        assert!(result.problems.is_empty(), "{:?}", result.problems);
    }

    #[test]
    fn ignored_and_filtered_tests_fail_the_run() {
        let output =
            CLEAN.replace("0 ignored", "1 ignored").replace("0 filtered out", "3 filtered out");
        let result = judge(&output, 1, Some(0));
        assert_eq!(result.problems.len(), 2, "{:?}", result.problems);
        // A filter given on the command line makes filtered-out tests expected; xtask's own
        // skips, exactly as many as they leave out.
        assert_eq!(judge(&output, 1, None).problems.len(), 1);
        assert_eq!(judge(&output, 1, Some(3)).problems.len(), 1);
    }

    #[test]
    fn a_crashed_or_missing_executable_is_a_problem() {
        let crashed = "fp-test-binary: /t/a\nrunning 1 test\nfp-test-binary-exit: 139\n";
        let result = judge(crashed, 2, Some(0));
        let problems = result.problems.join("\n");
        assert!(problems.contains("/t/a exited with status 139"), "{problems}");
        assert!(problems.contains("1 of 2 test executables ran"), "{problems}");
        assert!(problems.contains("no test ran"), "{problems}");
        assert!(judge("fp-test-binary: /t/a\n", 1, Some(0)).problems[0].contains("did not finish"));
    }

    #[test]
    fn coloured_result_lines_are_read() {
        let coloured = CLEAN.replace("ok. 2 passed", "\x1b[32mok\x1b[m. 2 passed");
        let result = judge(&coloured, 1, Some(0));
        assert_eq!(result.passed, 2);
        assert!(result.problems.is_empty(), "{:?}", result.problems);
    }

    #[test]
    fn failed_tests_are_counted() {
        let output = CLEAN.replace("ok. 2 passed; 0 failed", "FAILED. 1 passed; 1 failed");
        let output = output.replace("exit: 0", "exit: 101");
        let result = judge(&output, 1, Some(0));
        assert_eq!((result.passed, result.failed), (1, 1));
    }
}
