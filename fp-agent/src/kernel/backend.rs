//! How fp's programs enter the kernel's security checks: its two backends. With the BPF LSM
//! active they run from the LSM framework's `bpf_lsm_<hook>` stubs (per cgroup where fp attaches
//! them so). Without it (the stock boot of most distributions), fmod_ret programs on the
//! `security_<hook>` functions, which call every LSM's hook, run the same decisions from another
//! entry (`third_party/aya` carries aya's fmod_ret support).
pub use fp_common::kernel::Backend;

/// The environment variable in which an operator chooses the backend: `bpf_lsm` or `fmod_ret`.
pub const BACKEND_ENV: &str = "FP_BACKEND";

/// The backend this process enforces with, and why.
#[derive(Clone, Debug)]
pub struct Chosen {
    pub backend: Backend,
    pub why: String,
}

/// The backend this process enforces with, decided once: the one `FP_BACKEND` names, else the
/// BPF LSM where the kernel's active LSM list has `bpf`, else fmod_ret. An `FP_BACKEND` naming
/// no backend is an error, not a fallback.
pub fn chosen() -> anyhow::Result<&'static Chosen> {
    static CHOSEN: std::sync::OnceLock<Result<Chosen, String>> = std::sync::OnceLock::new();
    let chosen = CHOSEN.get_or_init(|| {
        choose(std::env::var(BACKEND_ENV).ok().as_deref(), active_lsms().as_deref())
    });
    chosen.as_ref().map_err(|e| anyhow::anyhow!("{e}"))
}

/// [`chosen`]'s rule, from `FP_BACKEND`'s value and the active LSM list (None: unreadable).
fn choose(requested: Option<&str>, active: Option<&str>) -> Result<Chosen, String> {
    if let Some(name) = requested.filter(|n| !n.is_empty()) {
        let backend = Backend::from_name(name).ok_or_else(|| {
            format!("{BACKEND_ENV}={name}: expected `bpf_lsm` or `fmod_ret` (or unset, to choose)")
        })?;
        return Ok(Chosen { backend, why: format!("{BACKEND_ENV}={name}") });
    }
    Ok(match active {
        Some(list) if list.split(',').any(|l| l == "bpf") => Chosen {
            backend: Backend::BpfLsm,
            why: format!("`bpf` is in the active LSM list ({list})"),
        },
        Some(list) => Chosen {
            backend: Backend::FModRet,
            why: format!("`bpf` is not in the active LSM list ({list})"),
        },
        None => Chosen {
            backend: Backend::FModRet,
            why: "the active LSM list is unreadable (/sys/kernel/security/lsm)".to_owned(),
        },
    })
}

/// The kernel's active LSM list, where securityfs shows it.
pub fn active_lsms() -> Option<String> {
    let list = std::fs::read_to_string("/sys/kernel/security/lsm").ok()?;
    Some(list.trim().to_owned())
}

/// The kernel function that calls `hook`'s LSM chain: where an fmod_ret program for it attaches
/// (an fentry program where the function returns nothing). `security_<hook>`, but for the one
/// hook the kernel names otherwise.
pub fn security_function(hook: &str) -> String {
    match hook {
        "bprm_check_security" => "security_bprm_check".to_owned(),
        _ => format!("security_{hook}"),
    }
}

/// What the running kernel offers fmod_ret programs on the `security_*` functions, as
/// `fp kernel probe` reports it (whichever backend enforces).
#[derive(Clone, Debug, serde::Serialize)]
pub struct FModRetFacts {
    /// Whether a pass-through fmod_ret program attached to `security_file_open` (and was
    /// detached again).
    pub attaches: bool,
    /// Why it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// It did not because the function has as many programs as the kernel allows, held by other
    /// tools (`error` says so).
    #[serde(skip)]
    pub full: bool,
    /// The `security_*` functions of the hooks fp needs that this kernel's BTF lacks (the
    /// `security_path_*` ones on kernels built without CONFIG_SECURITY_PATH).
    pub missing: Vec<String>,
    /// The functions whose parameters differ from their hook's, which a program on them must
    /// read otherwise.
    pub other_arguments: Vec<OtherArguments>,
    /// `kernel.ftrace_enabled`: at 0 the kernel runs no fmod_ret (nor fentry) program, though they
    /// stay attached (None: unreadable).
    pub ftrace_enabled: Option<bool>,
    /// Whether the kernel may preempt a task inside a program: where it may, a program entered
    /// meanwhile on the same CPU is skipped, and fmod_ret does not enforce (super::preemption).
    pub preemption: super::PreemptionFact,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct OtherArguments {
    pub function: String,
    pub parameters: Vec<String>,
    pub hook_parameters: Vec<String>,
}

/// The functions' part of [`FModRetFacts`]: each of `hooks` (the LSM hooks fp attaches here)
/// against its `security_*` function in `btf`; (missing, other arguments).
pub fn compare_functions(
    btf: &super::btf::Btf,
    hooks: &[&str],
) -> (Vec<String>, Vec<OtherArguments>) {
    let names = |params: Vec<&[u8]>| -> Vec<String> {
        params.iter().map(|p| String::from_utf8_lossy(p).into_owned()).collect()
    };
    let (mut missing, mut other) = (Vec::new(), Vec::new());
    for hook in hooks {
        let function = security_function(hook);
        let hook_parameters = btf.func_params(&format!("bpf_lsm_{hook}")).map(names);
        match (btf.func_params(&function).map(names), hook_parameters) {
            (None, _) => missing.push(function),
            (Some(parameters), Some(hook_parameters)) if parameters != hook_parameters => {
                other.push(OtherArguments { function, parameters, hook_parameters })
            }
            _ => {}
        }
    }
    missing.dedup();
    other.dedup();
    (missing, other)
}

/// `kernel.ftrace_enabled`, if readable.
pub fn ftrace_enabled() -> Option<bool> {
    let value = std::fs::read_to_string("/proc/sys/kernel/ftrace_enabled").ok()?;
    Some(value.trim() != "0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backend_is_the_operators_choice_else_the_bpf_lsm_where_active() {
        let active = Some("lockdown,capability,landlock,yama,apparmor,bpf");
        let stock = Some("lockdown,capability,landlock,yama,apparmor");
        assert_eq!(choose(None, active).unwrap().backend, Backend::BpfLsm);
        assert_eq!(choose(None, stock).unwrap().backend, Backend::FModRet);
        assert!(choose(None, stock).unwrap().why.contains("not in the active LSM list"));
        assert_eq!(choose(None, None).unwrap().backend, Backend::FModRet);
        assert_eq!(choose(Some(""), active).unwrap().backend, Backend::BpfLsm);
        let asked = choose(Some("fmod_ret"), active).unwrap();
        assert_eq!((asked.backend, asked.why.as_str()), (Backend::FModRet, "FP_BACKEND=fmod_ret"));
        assert_eq!(choose(Some("bpf_lsm"), stock).unwrap().backend, Backend::BpfLsm);
        let wrong = choose(Some("kprobe"), active).unwrap_err();
        assert!(wrong.contains("FP_BACKEND=kprobe: expected `bpf_lsm` or `fmod_ret`"), "{wrong}");
    }
}
