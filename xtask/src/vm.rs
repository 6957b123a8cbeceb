//! `cargo xtask vm`: runs a command as root in a QEMU VM booting a pinned Debian kernel.
//!
//! The guest's PID 1 (kernels.rs) mounts the host root read-only over 9p and switches root to it,
//! so the command sees the host's files, build output and current directory. Each run writes two
//! scripts into `target/fp-vm/runs/<pid>/`, shared as `/run/fp-vm` in the guest: `mounts.sh`
//! (host paths hidden by the guest's fresh /tmp and /run, writable shares) and `command.sh`
//! (environment, cwd, command).
use crate::cmd::shell_quote;
use crate::kernels::{self, PreparedKernel};
use crate::{cmd, paths};
use crate::{setup, step::Report};
use anyhow::{Context as _, Result, anyhow, bail};
use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The line PID 1 prints after the command, followed by its exit status.
const EXIT_MARKER: &str = "fp-vm: exit status ";
/// On the kernel command line, so a test can tell it runs in this VM.
const CMDLINE_MARKER: &str = "fp.vm=1";
/// A KVM probe boot that takes longer than this means KVM hangs here.
const KVM_PROBE_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(clap::Args)]
pub struct VmArgs {
    /// Which pinned kernel to boot.
    #[arg(long, default_value = "6.12")]
    kernel: String,
    /// Seconds after which QEMU is killed and the run fails.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// A host directory shared writable at the same path (repeatable); the rest of the host is read-only.
    #[arg(long = "rw", value_name = "DIR")]
    rw: Vec<PathBuf>,
    /// The command and its arguments, run as root in the host's current directory.
    #[arg(last = true, required = true)]
    command: Vec<String>,
    #[command(flatten)]
    clock: ClockArg,
}

/// `--instruction-clock`, for `vm`, `bench kernel` and `bench compare`.
#[derive(clap::Args)]
pub struct ClockArg {
    /// Time in instructions: the guest's clock counts the instructions it ran (QEMU icount, one
    /// vCPU, TCG), so the host's load does not move the figures; memory costs do not show.
    #[arg(long)]
    instruction_clock: bool,
}

impl ClockArg {
    pub fn clock(&self) -> GuestClock {
        if self.instruction_clock { GuestClock::Instructions } else { GuestClock::Host }
    }

    /// Says so before a report whose times are instructions.
    pub fn announce(&self) {
        if self.instruction_clock {
            println!(
                "\nxtask: the guest's clock counted instructions (one per ns, one vCPU): every ns \
                 and ms below is instructions ran, and memory costs do not show"
            );
        }
    }
}

pub fn main(args: VmArgs) -> Result<ExitCode> {
    setup::for_vm(Report::ChangesOnly)?;
    let kernel = kernels::ensure(kernels::find(&args.kernel)?, Report::ChangesOnly)?;
    let run = VmRun {
        timeout: Duration::from_secs(args.timeout),
        rw: args
            .rw
            .iter()
            .map(|dir| dir.canonicalize().with_context(|| format!("--rw {}", dir.display())))
            .collect::<Result<_>>()?,
        env: guest_env(),
        cwd: std::env::current_dir()?,
        command: args.command,
        cmdline: None,
        cpus: args.clock.clock().cpus(),
        clock: args.clock.clock(),
    };
    let finished = boot(&kernel, &run)?;
    Ok(ExitCode::from(u8::try_from(finished.exit_code).unwrap_or(u8::MAX)))
}

/// One command to run in a fresh VM.
pub struct VmRun {
    pub timeout: Duration,
    /// Absolute host directories shared writable at the same path.
    pub rw: Vec<PathBuf>,
    /// The command's whole environment.
    pub env: Vec<(String, String)>,
    /// Where the command starts (a host path; under the guest's fresh /tmp or /run it won't exist).
    pub cwd: PathBuf,
    pub command: Vec<String>,
    /// Added to the guest kernel's command line, before `$FP_VM_APPEND`.
    pub cmdline: Option<&'static str>,
    /// The guest's CPUs: [`CPUS`], or 1 for VMs that run side by side on the host's cores.
    pub cpus: u32,
    /// What the guest's clock counts.
    pub clock: GuestClock,
}

/// What the guest's clocks (`clock_gettime`, `bpf_stats`' run times) count.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum GuestClock {
    /// The host's time.
    Host,
    /// Instructions the guest ran, one per nanosecond (QEMU's `-icount shift=0,sleep=off`, TCG
    /// only): figures the host's load cannot move, blind to what memory costs. An idle guest's
    /// clock jumps to its next timer, so a command that waits is counted unevenly.
    Instructions,
}

impl GuestClock {
    /// The guest's CPUs for a VM that has the host to itself: one when counting instructions
    /// (the clock would count every CPU's).
    pub fn cpus(self) -> u32 {
        match self {
            GuestClock::Host => CPUS,
            GuestClock::Instructions => 1,
        }
    }
}

/// The guest's CPUs for a VM that has the host to itself.
pub const CPUS: u32 = 2;

/// A command that ran to the end in the VM.
pub struct Finished {
    pub exit_code: i32,
    /// The guest console output (also streamed to our stdout as it came).
    pub output: String,
}

/// The environment of a command in the VM: the host's PATH, HOME=/root, `FP_TEST_VM=1`, and the
/// host's RUST_BACKTRACE, RUST_LOG and FP_* variables.
pub fn guest_env() -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| {
            k.starts_with("FP_") || ["PATH", "RUST_BACKTRACE", "RUST_LOG"].contains(&k.as_str())
        })
        .filter(|(k, _)| k != "FP_TEST_NATIVE")
        .collect();
    env.push(("HOME".into(), "/root".into()));
    env.push(("FP_TEST_VM".into(), "1".into()));
    env
}

/// Boots `kernel`, runs the command and returns its exit code; fails if the VM cannot start, the
/// command's status never arrives, or the timeout passes (QEMU is killed in every case).
/// Under TCG, a guest that stops on a stale live-patching breakpoint ([`StalePatch`]) is booted
/// again, at most twice.
pub fn boot(kernel: &PreparedKernel, run: &VmRun) -> Result<Finished> {
    boot_echoing(kernel, run, Echo::On)
}

/// [`boot`], with the guest's output echoed as `echo` says (tagged when VMs run side by side).
pub fn boot_echoing(kernel: &PreparedKernel, run: &VmRun, echo: Echo) -> Result<Finished> {
    let accel = match run.clock {
        GuestClock::Host => accelerator(kernel)?,
        GuestClock::Instructions => "tcg",
    };
    let mut retries = 2;
    loop {
        match boot_with(kernel, run, accel, echo) {
            Err(e) if retries > 0 && accel == "tcg" && e.downcast_ref::<StalePatch>().is_some() => {
                retries -= 1;
                eprintln!(
                    "xtask: kernel {}: the guest kernel stopped on a breakpoint of its own live code \
                     patching (`{STALE_PATCH_OOPS}`), a race of QEMU's TCG emulation, not the \
                     command's doing; booting again",
                    kernel.name
                );
            }
            result => return result,
        }
    }
}

/// How the guest kernel reports a breakpoint that live code patching (`text_poke_bp`, for static
/// keys and BPF trampolines) had already replaced: under TCG a vCPU can still run its stale
/// translation of the patched code. Seen on 6.12, at boot (`sched_clock_cpu`, before PID 1 ran).
const STALE_PATCH_OOPS: &str = "Oops: int3";

/// A VM that stopped without the command's exit status because of [`STALE_PATCH_OOPS`].
#[derive(Debug)]
struct StalePatch(String);

impl std::fmt::Display for StalePatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StalePatch {}

/// Why a VM stopped without the command's exit status, with its last console lines.
fn stopped_early(kernel: &str, status: ExitStatus, output: &str) -> anyhow::Error {
    let lines: Vec<&str> = output.lines().collect();
    let tail = match lines.len() {
        0 => "no console output".to_owned(),
        n => format!("its last console lines:\n{}", lines[n.saturating_sub(30)..].join("\n")),
    };
    let message = format!(
        "kernel {kernel}: the VM stopped ({status}) without reporting the command's exit status; {tail}"
    );
    if output.contains(STALE_PATCH_OOPS) {
        return StalePatch(message).into();
    }
    anyhow!(message)
}

/// The guest kernel's command line with `append` added (e.g. `lsm=capability,yama` to boot
/// without BPF LSM; later parameters win).
fn kernel_cmdline(append: &[Option<&str>]) -> String {
    // loglevel=1: only emergencies reach the console, so a guest that panics says why.
    let mut cmdline =
        format!("console=ttyS0 quiet loglevel=1 panic=-1 rdinit=/init {CMDLINE_MARKER}");
    for extra in append.iter().flatten().map(|e| e.trim()).filter(|e| !e.is_empty()) {
        cmdline.push(' ');
        cmdline.push_str(extra);
    }
    cmdline
}

/// Whether a child's output is copied to our stdout as it arrives (it is always kept).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Echo {
    On,
    /// Each line after `[tag] `: the output of VMs that run at the same time.
    Tagged(&'static str),
    Off,
}

fn boot_with(kernel: &PreparedKernel, run: &VmRun, accel: &str, echo: Echo) -> Result<Finished> {
    let target = paths::target_dir()?;
    let runs = target.join("fp-vm/runs");
    remove_stale_runs(&runs);
    // `<pid>-<n>`: one xtask may boot several VMs at once (the kernel tests do).
    static BOOTS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = BOOTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let run_dir = runs.join(format!("{}-{n}", std::process::id()));
    std::fs::create_dir_all(&run_dir)?;
    // The command needs these even when they lie under the guest's fresh /tmp or /run.
    let keep = [paths::workspace_root(), target, run.cwd.clone()];
    write_run_scripts(&run_dir, run, &keep)?;

    let mut qemu = Command::new("qemu-system-x86_64");
    qemu.args([
        "-machine",
        "q35",
        "-accel",
        accel,
        "-cpu",
        if accel == "kvm" { "host" } else { "max" },
    ])
    .args(["-smp", &run.cpus.to_string()])
    .args(match run.clock {
        GuestClock::Host => &[][..],
        GuestClock::Instructions => &["-icount", "shift=0,sleep=off"],
    })
    .args(["-m", "2G", "-nodefaults", "-display", "none", "-serial", "stdio"])
    .arg("-no-reboot")
    .arg("-kernel")
    .arg(&kernel.vmlinux)
    .arg("-initrd")
    .arg(&kernel.initrd)
    .arg("-append")
    .arg(kernel_cmdline(&[run.cmdline, std::env::var("FP_VM_APPEND").ok().as_deref()]))
    .args(share("fproot", Path::new("/"), true))
    .args(share("fprun", &run_dir, true));
    for (i, dir) in run.rw.iter().enumerate() {
        qemu.args(share(&format!("fprw{i}"), dir, false));
    }
    let started = Instant::now();
    let result = stream(&mut qemu, run.timeout, echo);
    let _ = std::fs::remove_dir_all(&run_dir);
    let (status, output) = result.with_context(|| format!("kernel {}: VM", kernel.name))?;
    // The command's last output line may lack its newline, so the marker can end a line.
    let Some(exit_code) = output.lines().rev().find_map(|l| Some(l.rsplit_once(EXIT_MARKER)?.1))
    else {
        return Err(stopped_early(kernel.name, status, &output));
    };
    if echo != Echo::Off {
        eprintln!(
            "xtask: kernel {} VM finished in {:.1} s",
            kernel.name,
            started.elapsed().as_secs_f64()
        );
    }
    let exit_code = exit_code.trim().parse().context("exit status line")?;
    Ok(Finished { exit_code, output })
}

/// Removes the run directories of xtask processes that died without cleaning up (SIGKILL).
fn remove_stale_runs(runs: &Path) {
    let Ok(entries) = std::fs::read_dir(runs) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name.to_str().and_then(|n| n.split('-').next()?.parse::<u32>().ok());
        if pid.is_some_and(|pid| !Path::new("/proc").join(pid.to_string()).exists()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// QEMU arguments for a 9p share of `dir` with mount tag `tag`.
fn share(tag: &str, dir: &Path, readonly: bool) -> [String; 4] {
    let readonly = if readonly { ",readonly=on" } else { "" };
    // QEMU option values escape a comma by doubling it.
    let path = dir.display().to_string().replace(',', ",,");
    [
        "-fsdev".into(),
        format!("local,id={tag},path={path},security_model=none,multidevs=remap{readonly}"),
        "-device".into(),
        format!("virtio-9p-pci,fsdev={tag},mount_tag={tag}"),
    ]
}

fn write_run_scripts(run_dir: &Path, run: &VmRun, keep: &[PathBuf]) -> Result<()> {
    std::fs::write(run_dir.join("mounts.sh"), mounts_script(run, keep)?)?;
    std::fs::write(run_dir.join("command.sh"), command_script(run)?)?;
    Ok(())
}

/// Sourced by PID 1: binds the `keep` paths the guest's fresh /tmp and /run hide (outermost
/// first), then mounts the writable shares.
fn mounts_script(run: &VmRun, keep: &[PathBuf]) -> Result<String> {
    let mut mounts = String::new();
    let mut kept: Vec<&Path> = Vec::new();
    let mut hidden: Vec<&Path> = keep
        .iter()
        .map(PathBuf::as_path)
        .filter(|p| p.starts_with("/tmp") || p.starts_with("/run"))
        .collect();
    hidden.sort();
    for dir in hidden {
        if kept.iter().any(|k| dir.starts_with(k)) {
            continue;
        }
        let inside_host = shell_quote(&format!("/host{}", dir.display()));
        let host_view = shell_quote(&format!("/hostfs{}", dir.display()));
        mounts += &format!(
            "mkdir -p {inside_host} && mount --bind {host_view} {inside_host} || fail {}\n",
            shell_quote(&format!("cannot show {} in the VM", dir.display()))
        );
        kept.push(dir);
    }
    for (i, dir) in run.rw.iter().enumerate() {
        if !dir.is_dir() {
            bail!("--rw {}: not a directory", dir.display());
        }
        let host_path = shell_quote(&format!("/host{}", dir.display()));
        // mkdir: the directory may lie under the guest's fresh /tmp or /run.
        mounts += &format!(
            "mkdir -p {host_path} && mount -t 9p -o trans=virtio,version=9p2000.L,cache=mmap,msize=512000 fprw{i} {host_path} \
             || fail {}\n",
            shell_quote(&format!("cannot mount {} writable", dir.display()))
        );
    }
    Ok(mounts)
}

/// Run by the guest's shell in the host root: environment, working directory, command.
fn command_script(run: &VmRun) -> Result<String> {
    let mut script = String::new();
    for (key, value) in &run.env {
        script += &format!("export {key}={}\n", shell_quote(value));
    }
    let cwd = run.cwd.to_str().ok_or_else(|| anyhow!("{} is not UTF-8", run.cwd.display()))?;
    script += &format!("cd {} || exit 125\n", shell_quote(cwd));
    let argv: Vec<String> = run.command.iter().map(|a| shell_quote(a)).collect();
    script += &format!("exec {}\n", argv.join(" "));
    Ok(script)
}

/// Kills the child when dropped (error, panic), so it never outlives this run.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `command`, streaming its stdout line by line (to our stdout when echo is on) and keeping it;
/// kills it after `timeout`. Also used for native test runs.
pub fn stream(
    command: &mut Command,
    timeout: Duration,
    echo: Echo,
) -> Result<(ExitStatus, String)> {
    command.stdin(Stdio::null()).stdout(Stdio::piped());
    if echo == Echo::Off {
        command.stderr(Stdio::null());
    }
    // SAFETY: prctl is async-signal-safe; PR_SET_PDEATHSIG makes the kernel kill the child if we
    // die without running destructors (SIGKILL, abort), so it never outlives xtask.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = ChildGuard(
        command.spawn().with_context(|| format!("cannot start `{}`", cmd::describe(command)))?,
    );
    let stdout = child.0.stdout.take().ok_or_else(|| anyhow!("no stdout pipe"))?;
    let (lines_tx, lines_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = Vec::new();
        while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
            if lines_tx.send(String::from_utf8_lossy(&line).replace('\r', "")).is_err() {
                break;
            }
            line.clear();
        }
    });
    let deadline = Instant::now() + timeout;
    let mut output = String::new();
    let mut stdout = std::io::stdout();
    loop {
        match lines_rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) => {
                match echo {
                    Echo::On => {
                        let _ = stdout.write_all(line.as_bytes());
                    }
                    Echo::Tagged(tag) => {
                        // One write per line, so lines of VMs running at once never mix.
                        let _ = stdout.write_all(format!("[{tag}] {line}").as_bytes());
                    }
                    Echo::Off => {}
                }
                let _ = stdout.flush();
                output += &line;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                bail!("timed out after {} s and was killed", timeout.as_secs())
            }
        }
    }
    let status = child.0.wait()?;
    Ok((status, output))
}

/// `tcg`, or `kvm` where /dev/kvm opens and a probe boot proved it works (cached per host boot).
fn accelerator(kernel: &PreparedKernel) -> Result<&'static str> {
    if std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm").is_err() {
        return Ok("tcg");
    }
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")?;
    let cache = paths::vm_dir()?.join("kvm-probe");
    if let Ok(cached) = std::fs::read_to_string(&cache)
        && let Some((id, verdict)) = cached.split_once(' ')
        && id == boot_id.trim()
    {
        return Ok(if verdict.trim() == "kvm" { "kvm" } else { "tcg" });
    }
    eprintln!("xtask: /dev/kvm exists; probing whether a KVM boot works here");
    let probe = VmRun {
        timeout: KVM_PROBE_TIMEOUT,
        rw: Vec::new(),
        env: Vec::new(),
        cwd: PathBuf::from("/"),
        command: vec!["true".into()],
        cmdline: None,
        cpus: CPUS,
        clock: GuestClock::Host,
    };
    let works = boot_with(kernel, &probe, "kvm", Echo::Off).is_ok_and(|f| f.exit_code == 0);
    let verdict = if works { "kvm" } else { "tcg" };
    eprintln!("xtask: KVM probe boot {}; using {verdict}", if works { "worked" } else { "failed" });
    std::fs::write(&cache, format!("{} {verdict}\n", boot_id.trim()))?;
    Ok(verdict)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_and_fp_vm_append_extend_the_kernel_command_line() {
        let plain = kernel_cmdline(&[None, None]);
        assert!(plain.ends_with(CMDLINE_MARKER), "{plain}");
        assert_eq!(kernel_cmdline(&[None, Some(" ")]), plain);
        assert_eq!(
            kernel_cmdline(&[Some("lsm=capability,yama"), Some("nokaslr")]),
            format!("{plain} lsm=capability,yama nokaslr")
        );
    }

    #[test]
    fn a_stale_patching_breakpoint_is_told_from_other_early_stops() {
        use std::os::unix::process::ExitStatusExt as _;
        let status = ExitStatus::from_raw(0);
        let oops =
            "[    1.953485] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI\n[    1.96] Kernel panic";
        let stale = stopped_early("6.12", status, oops);
        assert!(stale.downcast_ref::<StalePatch>().is_some(), "{stale:#}");
        assert!(format!("{stale}").contains("its last console lines:\n[    1.953485] Oops"));
        let other =
            stopped_early("6.12", status, "[    2.0] Kernel panic - not syncing: Attempted");
        assert!(other.downcast_ref::<StalePatch>().is_none(), "{other:#}");
        assert!(format!("{}", stopped_early("6.1", status, "")).ends_with("no console output"));
    }

    fn run(rw: &[&str]) -> VmRun {
        VmRun {
            timeout: Duration::from_secs(1),
            rw: rw.iter().map(PathBuf::from).collect(),
            env: vec![("FP_X".into(), "a b'c".into())],
            cwd: PathBuf::from("/tmp/ws/tests"),
            command: vec!["echo".into(), "two words".into()],
            cmdline: None,
            cpus: CPUS,
            clock: GuestClock::Host,
        }
    }

    #[test]
    fn only_outermost_hidden_paths_are_bound_before_writable_shares() {
        let keep = ["/tmp/ws/target", "/work/ws", "/tmp/ws", "/tmp/ws/tests"].map(PathBuf::from);
        let script = mounts_script(&run(&["/"]), &keep).unwrap();
        let lines: Vec<&str> = script.lines().collect();
        assert_eq!(lines.len(), 2, "{script}");
        assert!(
            lines[0].starts_with("mkdir -p '/host/tmp/ws' && mount --bind '/hostfs/tmp/ws'"),
            "{script}"
        );
        assert!(lines[1].contains("fprw0 '/host/'"), "{script}");
    }

    #[test]
    fn a_writable_share_must_be_a_directory() {
        let err = mounts_script(&run(&["/proc/self/status"]), &[]).unwrap_err();
        assert!(err.to_string().contains("not a directory"), "{err}");
    }

    #[test]
    fn command_script_quotes_env_cwd_and_arguments() {
        assert_eq!(
            command_script(&run(&[])).unwrap(),
            "export FP_X='a b'\\''c'\ncd '/tmp/ws/tests' || exit 125\nexec 'echo' 'two words'\n"
        );
    }
}
