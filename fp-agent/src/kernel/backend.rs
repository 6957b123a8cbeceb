//! How fp's programs enter the kernel's security checks. With the BPF LSM active they run from
//! the LSM framework's `bpf_lsm_<hook>` stubs (per cgroup where fp attaches them so). Without it
//! (the stock boot of most distributions), fmod_ret programs on the `security_<hook>` functions,
//! which call every LSM's hook, can run them instead: the same decisions, another entry
//! (issue 54; `third_party/aya` carries aya's fmod_ret support).

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
/// `fp kernel probe` reports it. fp does not enforce through them yet: this is what such a
/// backend could count on here.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FModRetFacts {
    /// Whether a pass-through fmod_ret program attached to `security_file_open` (and was
    /// detached again).
    pub attaches: bool,
    /// Why it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The `security_*` functions of hooks fp attaches that this kernel's BTF lacks (the
    /// `security_path_*` ones on kernels built without CONFIG_SECURITY_PATH).
    pub missing: Vec<String>,
    /// The functions whose parameters differ from their hook's, which a program on them must
    /// read otherwise.
    pub other_arguments: Vec<OtherArguments>,
    /// `kernel.ftrace_enabled`: at 0 the kernel runs no fmod_ret (nor fentry) program, though they
    /// stay attached (None: unreadable).
    pub ftrace_enabled: Option<bool>,
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
