//! Whether the running kernel may preempt a task in the middle of a BPF program, which the
//! fmod_ret backend cannot allow. The kernel runs a tracing program (fmod_ret, fentry) at most
//! once per CPU at a time: one entered while another task, preempted inside it, holds that CPU's
//! count is skipped (`__bpf_prog_enter_recur`, counted as a recursion miss), and a skipped
//! fmod_ret program lets the function run as if it had allowed. Where tasks are preempted only
//! at the points kernel code chooses (`none`, `voluntary`), no BPF program is left halfway; where
//! they are preempted anywhere (`full`, `lazy`, `rt`), a session could open a file its policy
//! denies while another of its tasks sits preempted in fp's program on the same CPU. BPF LSM
//! programs have no such count.
use serde::Serialize;

/// How the kernel preempts tasks running kernel code: the mode of `preempt=` (or the build's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Preemption {
    None,
    Voluntary,
    Full,
    Lazy,
    Rt,
}

impl Preemption {
    pub fn name(self) -> &'static str {
        match self {
            Preemption::None => "none",
            Preemption::Voluntary => "voluntary",
            Preemption::Full => "full",
            Preemption::Lazy => "lazy",
            Preemption::Rt => "rt",
        }
    }

    /// Whether a task may be preempted inside a BPF program.
    pub fn inside_programs(self) -> bool {
        matches!(self, Preemption::Full | Preemption::Lazy | Preemption::Rt)
    }

    fn parse(name: &str) -> Option<Self> {
        [Self::None, Self::Voluntary, Self::Full, Self::Lazy, Self::Rt]
            .into_iter()
            .find(|m| m.name() == name)
    }
}

/// The running kernel's preemption mode and where fp read it (`model` None: it could not tell,
/// and `source` says why).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PreemptionFact {
    pub model: Option<Preemption>,
    pub source: String,
}

impl PreemptionFact {
    /// Why fp cannot enforce through fmod_ret under this mode, if it cannot: the kernel may
    /// preempt a task inside a program, or fp cannot tell.
    pub fn refusal(&self) -> Option<String> {
        match self.model {
            Some(model) if model.inside_programs() => Some(format!(
                "fp cannot enforce through fmod_ret on this kernel: it preempts tasks anywhere in \
                 kernel code (preemption mode `{}`, from {}), and the kernel skips an fmod_ret \
                 program entered on a CPU where another task sits preempted inside it, which \
                 lets the operation through; boot with preempt=voluntary, or enforce through the \
                 BPF LSM (boot with lsm=...,bpf)",
                model.name(),
                self.source
            )),
            Some(_) => None,
            None => Some(format!(
                "fp cannot enforce through fmod_ret on this kernel: fp must know that the kernel \
                 never preempts a task inside a BPF program, and {}; mount debugfs (mount -t \
                 debugfs debugfs /sys/kernel/debug) or boot with preempt=voluntary",
                self.source
            )),
        }
    }
}

/// Where a kernel built with PREEMPT_DYNAMIC shows its mode while it runs (debugfs; unreadable
/// under lockdown).
const DEBUGFS: &str = "/sys/kernel/debug/sched/preempt";

/// The running kernel's [`PreemptionFact`].
pub fn preemption() -> PreemptionFact {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let config = format!("/boot/config-{}", release.trim());
    let read = |path: &str| std::fs::read_to_string(path).ok();
    fact(Sources {
        debugfs: read(DEBUGFS).as_deref(),
        version: &read("/proc/sys/kernel/version").unwrap_or_default(),
        cmdline: &read("/proc/cmdline").unwrap_or_default(),
        config: read(&config).as_deref().map(|text| (config.as_str(), text)),
    })
}

/// The mode in force in debugfs's line of them (`sched/preempt`, switchable at run time): the one
/// in parentheses, as in "none (voluntary) full".
pub fn debugfs_mode(line: &str) -> Option<&str> {
    Some(line.split_once('(')?.1.split_once(')')?.0)
}

/// What [`preemption`] reads: debugfs's mode line, the kernel's version string (`uname -v`),
/// its command line, and its build configuration (path, text).
struct Sources<'a> {
    debugfs: Option<&'a str>,
    version: &'a str,
    cmdline: &'a str,
    config: Option<(&'a str, &'a str)>,
}

fn fact(sources: Sources) -> PreemptionFact {
    let found = |model, source: &str| PreemptionFact { model: Some(model), source: source.into() };
    if let Some(model) = sources.debugfs.and_then(debugfs_mode).and_then(Preemption::parse) {
        return found(model, DEBUGFS);
    }
    let flags: Vec<&str> = sources.version.split_whitespace().collect();
    let version = "/proc/sys/kernel/version";
    if flags.contains(&"PREEMPT_RT") {
        return found(Preemption::Rt, version);
    }
    if flags.contains(&"PREEMPT_LAZY") {
        return found(Preemption::Lazy, version);
    }
    if flags.contains(&"PREEMPT") {
        return found(Preemption::Full, version);
    }
    if !flags.contains(&"PREEMPT_DYNAMIC") {
        // Built without kernel preemption: `none` or `voluntary`, alike here.
        return found(Preemption::Voluntary, version);
    }
    // PREEMPT_DYNAMIC: the command line's mode, else the build's default.
    let chosen = sources.cmdline.split_whitespace().rev().find_map(|w| w.strip_prefix("preempt="));
    if let Some(model) = chosen.and_then(Preemption::parse) {
        return found(model, "/proc/cmdline");
    }
    if let Some((path, text)) = sources.config {
        let default = [
            ("CONFIG_PREEMPT_NONE=y", Preemption::None),
            ("CONFIG_PREEMPT_VOLUNTARY=y", Preemption::Voluntary),
            ("CONFIG_PREEMPT=y", Preemption::Full),
            ("CONFIG_PREEMPT_LAZY=y", Preemption::Lazy),
        ];
        if let Some((_, model)) =
            default.into_iter().find(|(line, _)| text.lines().any(|l| l.trim() == *line))
        {
            return found(model, path);
        }
    }
    PreemptionFact {
        model: None,
        source: format!(
            "the kernel chooses its preemption mode at boot (PREEMPT_DYNAMIC) and fp cannot read \
             it: {DEBUGFS} is not readable (debugfs not mounted, or lockdown), the command line \
             has no preempt=, and the build configuration (/boot/config-<release>) is missing"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(sources: Sources) -> Option<Preemption> {
        fact(sources).model
    }

    const DEBIAN: &str = "#1 SMP PREEMPT_DYNAMIC Debian 6.12.57-1 (2025-11-05)";

    #[test]
    fn debugfs_says_the_mode_in_force() {
        let s = |line| Sources { debugfs: Some(line), version: DEBIAN, cmdline: "", config: None };
        assert_eq!(model(s("none (voluntary) full\n")), Some(Preemption::Voluntary));
        assert_eq!(model(s("none voluntary (full)\n")), Some(Preemption::Full));
        assert_eq!(model(s("none voluntary full (lazy)\n")), Some(Preemption::Lazy));
        assert_eq!(fact(s("(none) voluntary full")).source, DEBUGFS);
    }

    #[test]
    fn a_build_without_dynamic_preemption_says_it_in_its_version() {
        let s = |version| Sources { debugfs: None, version, cmdline: "", config: None };
        assert_eq!(model(s("#1 SMP PREEMPT_RT Fri Jan 1")), Some(Preemption::Rt));
        assert_eq!(model(s("#1 SMP PREEMPT Arch")), Some(Preemption::Full));
        assert_eq!(model(s("#1 SMP PREEMPT_LAZY")), Some(Preemption::Lazy));
        assert_eq!(model(s("#1 SMP Debian 5.10")), Some(Preemption::Voluntary));
    }

    #[test]
    fn a_dynamic_build_takes_the_command_line_then_the_builds_default() {
        let config =
            "CONFIG_PREEMPT_BUILD=y\n# CONFIG_PREEMPT is not set\nCONFIG_PREEMPT_VOLUNTARY=y\n";
        let s = |cmdline, config| Sources { debugfs: None, version: DEBIAN, cmdline, config };
        let boot = Some(("/boot/config-6.12", config));
        assert_eq!(model(s("ro preempt=full quiet", boot)), Some(Preemption::Full));
        assert_eq!(model(s("preempt=full preempt=none", boot)), Some(Preemption::None));
        assert_eq!(model(s("ro quiet", boot)), Some(Preemption::Voluntary));
        assert_eq!(fact(s("ro", boot)).source, "/boot/config-6.12");
        let full = Some(("/boot/config-6.12", "CONFIG_PREEMPT=y\nCONFIG_PREEMPT_DYNAMIC=y\n"));
        assert_eq!(model(s("", full)), Some(Preemption::Full));
        let unknown = fact(s("ro", None));
        assert_eq!(unknown.model, None);
        assert!(unknown.source.contains("debugfs"), "{}", unknown.source);
    }

    #[test]
    fn only_modes_that_preempt_anywhere_reach_inside_programs() {
        let inside: Vec<&str> = [
            Preemption::None,
            Preemption::Voluntary,
            Preemption::Full,
            Preemption::Lazy,
            Preemption::Rt,
        ]
        .into_iter()
        .filter(|m| m.inside_programs())
        .map(Preemption::name)
        .collect();
        assert_eq!(inside, ["full", "lazy", "rt"]);
    }
}
