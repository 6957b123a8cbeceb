//! `fp policy`: check, explain and compile policies.
//!
//! Exit codes: 0 ok, 1 policy error (bad input), 2 usage error.
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::json;

use fp_common::refer::{MoveKind, MoveVerdict};

use super::explain_op::ExplainOp;
use crate::exit;
use crate::policy::{
    Decision, EffectivePolicy, LoadOptions, Name, Op, OpenFloor, PolicyError, Verdict,
    normalize_path,
};

#[derive(clap::Subcommand)]
pub enum Command {
    /// Print the effective layered policy (floors included) of each FILE, with warnings.
    Check {
        #[command(flatten)]
        session: Session,
        /// Report as JSON.
        #[arg(long)]
        json: bool,
        /// Per-agent policy files, each checked layered over the config [default: with
        /// `--profile`, the profile alone].
        #[arg(required_unless_present = "profile")]
        files: Vec<PathBuf>,
    },
    /// Decide PATHs for an op: verdict, deciding rule, and whether the kernel decides it. With
    /// `--op rename|exchange|link`: decide moving the content of the first PATH to the second.
    /// With `--op connect`: whether a session may use the unix socket at each PATH (or @NAME, an
    /// abstract one) when a process outside the session serves it. With `--op perf`: whether a
    /// session may open each kind of perf event (user, cpu-wide, kernel, tracepoint).
    Explain {
        /// The per-agent policy file.
        #[arg(long, required_unless_present = "profile")]
        policy: Option<PathBuf>,
        #[command(flatten)]
        session: Session,
        #[arg(long, value_enum)]
        op: ExplainOp,
        /// Report as JSON, one object per path and line.
        #[arg(long)]
        json: bool,
        /// The paths to decide.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Compile the policy to the kernel tables.
    Compile {
        /// The per-agent policy file.
        #[arg(long, required_unless_present = "profile")]
        policy: Option<PathBuf>,
        #[command(flatten)]
        session: Session,
        /// Dump the tables as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// What the policy is compiled for (also used by `fp audit replay --policy`).
#[derive(clap::Args)]
pub struct Session {
    /// The operator's config.toml (its [file_policy] is the global layer).
    #[arg(long)]
    config: Option<PathBuf>,
    /// The session's workspace (what <workspace> expands to) [default: the current directory].
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// The user the session runs as (what ~ expands to); default: the caller.
    #[arg(long)]
    user: Option<String>,
    /// A shipped profile layered under the policy's rules, as `fp run --profile` layers it.
    #[arg(long, value_name = "NAME")]
    profile: Option<String>,
}

pub fn main(cmd: Command) -> ExitCode {
    let result = match cmd {
        Command::Check { session, json, files } => check(&session, json, &files),
        Command::Explain { policy, session, op, json, paths } => {
            let policy = policy.as_deref();
            match op {
                ExplainOp::File(op) => explain(policy, &session, op, json, &paths),
                ExplainOp::Move(kind) => explain_move(policy, &session, kind, json, &paths),
                ExplainOp::Connect => explain_connect(policy, &session, json, &paths),
                ExplainOp::Perf => explain_perf(policy, &session, json, &paths),
            }
        }
        Command::Compile { policy, session, json } => compile(policy.as_deref(), &session, json),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Policy(e)) => {
            eprintln!("{e}");
            ExitCode::from(exit::POLICY_ERROR)
        }
        Err(Failure::Usage(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(exit::USAGE_ERROR)
        }
        Err(Failure::Reported) => ExitCode::from(exit::POLICY_ERROR),
    }
}

enum Failure {
    Policy(PolicyError),
    Usage(String),
    /// Policy errors already reported, one per file (`check` goes on past a bad file).
    Reported,
}

impl From<PolicyError> for Failure {
    fn from(e: PolicyError) -> Self {
        Failure::Policy(e)
    }
}

fn absolute(path: &Path) -> Result<PathBuf, Failure> {
    std::path::absolute(path)
        .map_err(|e| Failure::Usage(format!("cannot resolve {}: {e}", path.display())))
}

impl Session {
    /// How a report names what it loaded: the policy file, with the profile under it.
    fn shown(&self, policy: Option<&Path>) -> String {
        match (policy, &self.profile) {
            (Some(file), None) => file.display().to_string(),
            (Some(file), Some(profile)) => format!("{} (profile {profile})", file.display()),
            (None, Some(profile)) => format!("profile {profile}"),
            (None, None) => "no policy".to_owned(),
        }
    }

    /// What `<workspace>` expands to: `--workspace`, else the current directory (as `fp run`).
    fn workspace(&self) -> Result<PathBuf, Failure> {
        match &self.workspace {
            Some(w) => Ok(w.clone()),
            None => std::env::current_dir()
                .map_err(|e| Failure::Usage(format!("the current directory: {e}"))),
        }
    }
}

/// Loads a policy for `fp audit replay --policy`: `<workspace>` defaults to the current directory.
pub fn load_for_replay(policy: &Path, session: &Session) -> anyhow::Result<EffectivePolicy> {
    let loaded =
        session.workspace().and_then(|workspace| load(Some(policy), session, Some(workspace)));
    loaded.map_err(|e| match e {
        Failure::Policy(e) => anyhow::anyhow!("{e}"),
        Failure::Usage(m) => anyhow::anyhow!("{m}"),
        Failure::Reported => anyhow::anyhow!("the policy has errors"),
    })
}

fn load(
    policy: Option<&Path>,
    session: &Session,
    workspace: Option<PathBuf>,
) -> Result<EffectivePolicy, Failure> {
    let options = LoadOptions {
        policy_files: policy.map(absolute).transpose()?.into_iter().collect(),
        profile: session.profile.clone(),
        config_file: session.config.as_deref().map(absolute).transpose()?,
        workspace: workspace.as_deref().map(absolute).transpose()?,
        user: session.user.clone(),
        ..LoadOptions::default()
    };
    Ok(EffectivePolicy::load(&options)?)
}

/// Checks every file, a bad one included: each error is reported where its file's report would
/// be, and the exit is a policy error if any file had one.
fn check(session: &Session, json: bool, files: &[PathBuf]) -> Result<(), Failure> {
    let mut failed = false;
    let checked: Vec<Option<&Path>> = match files {
        [] => vec![None],
        files => files.iter().map(|f| Some(f.as_path())).collect(),
    };
    for policy_file in checked {
        let file = session.shown(policy_file);
        let mut warnings = Vec::new();
        let workspace = match &session.workspace {
            Some(ws) => ws.clone(),
            None => {
                let cwd = absolute(Path::new("."))?;
                warnings.push(format!(
                    "no --workspace: <workspace> is checked as the current directory {}",
                    cwd.display()
                ));
                cwd
            }
        };
        let policy = match load(policy_file, session, Some(workspace.clone())) {
            Ok(policy) => policy,
            Err(Failure::Policy(e)) => {
                failed = true;
                match json {
                    true => println!(
                        "{}",
                        json!({"file": policy_file, "profile": session.profile, "error": e.to_string()})
                    ),
                    false => eprintln!("{e}"),
                }
                continue;
            }
            Err(other) => return Err(other),
        };
        for e in policy.floor_exceptions() {
            warnings.push(format!("safety floor entry \"{}\" lifted by {}", e.value, e.source));
        }
        warnings.extend(crate::policy::warnings(&policy, &absolute(&workspace)?));
        for s in policy.sockets() {
            if s.peers().is_empty() {
                warnings.push(format!(
                    "sockets entry \"{}\" ({}) names no socket file now: a session starting now reaches none through it",
                    s.text, s.source
                ));
            }
        }
        for d in policy.block_devices() {
            if d.devices().is_empty() {
                warnings.push(format!(
                    "block_devices entry \"{}\" ({}) names no block device now: a session starting now opens none through it",
                    d.text, d.source
                ));
            }
        }
        if json {
            let devices = |d: &crate::policy::DeviceRule| -> Vec<serde_json::Value> {
                d.devices().iter().map(|v| json!({"path": v.path, "device": v.number()})).collect()
            };
            let report = json!({
                "file": policy_file,
                "profile": session.profile,
                "schema": policy.schema(),
                "base": policy.base(),
                "hash": hex(&policy.hash()),
                "defaults": defaults_json(&policy),
                "rules": policy.rules(),
                "floor_exceptions": policy.floor_exceptions().iter().map(|e| json!({"name": e.value, "source": e.source})).collect::<Vec<_>>(),
                "sockets": policy.sockets(),
                "block_devices": policy.block_devices().iter().map(|d| json!({"text": d.text, "pattern": d.pattern, "source": d.source, "devices": devices(d)})).collect::<Vec<_>>(),
                "kernel_interfaces": policy.kernel_interfaces().iter().map(|i| json!({"name": i.interface.name(), "source": i.source, "opens": i.interface.opens()})).collect::<Vec<_>>(),
                "warnings": warnings,
            });
            println!("{report}");
        } else {
            print_check(&file, &policy, &warnings);
        }
    }
    if failed { Err(Failure::Reported) } else { Ok(()) }
}

fn defaults_json(policy: &EffectivePolicy) -> serde_json::Value {
    let d = policy.defaults();
    serde_json::Value::Object(
        Op::ALL.iter().map(|op| (op.name().into(), json!(op.of(&d)))).collect(),
    )
}

fn verdict_name(v: Verdict) -> &'static str {
    match v {
        Verdict::Allow => "allow",
        Verdict::Prompt => "prompt",
        Verdict::Deny => "deny",
    }
}

fn print_check(file: &str, policy: &EffectivePolicy, warnings: &[String]) {
    let schema = policy.schema().map_or("none", |s| match s {
        crate::policy::Schema::V1 => "v1",
        crate::policy::Schema::V2 => "v2",
    });
    let d = policy.defaults();
    println!("{file}: ok");
    let base = match policy.base() {
        crate::policy::Base::System => "system",
        crate::policy::Base::None => "none",
    };
    println!("  schema {schema}, base {base}, hash {}", hex(&policy.hash()));
    println!(
        "  defaults: read {}, write {}, delete {}",
        verdict_name(d[0]),
        verdict_name(d[1]),
        verdict_name(d[2])
    );
    println!("  rules, strongest layer first ({}):", policy.rules().len());
    for rule in policy.rules() {
        let verdicts: Vec<String> = Op::ALL
            .iter()
            .filter_map(|op| {
                rule.verdicts[op.index()].map(|v| format!("{} {}", op.name(), verdict_name(v)))
            })
            .collect();
        println!(
            "    #{:<4} {:<40} {:<34} {} ({})",
            rule.id,
            rule.glob,
            verdicts.join(", "),
            rule.tier,
            rule.source
        );
    }
    if !policy.sockets().is_empty() {
        println!("  sockets served from outside the session it may use:");
        for s in policy.sockets() {
            println!("    {:<46} ({})", s.pattern, s.source);
        }
    }
    if !policy.block_devices().is_empty() {
        println!("  block devices it may open past the floor (then by its rules):");
        for d in policy.block_devices() {
            let now: Vec<String> = d
                .devices()
                .iter()
                .map(|v| format!("{} {}", v.path.display(), v.number()))
                .collect();
            let now = if now.is_empty() { "none now".to_owned() } else { now.join(", ") };
            println!("    {:<46} ({}): {now}", d.pattern, d.source);
        }
    }
    for i in policy.kernel_interfaces() {
        println!(
            "  kernel interface {} ({}): {}",
            i.interface.name(),
            i.source,
            i.interface.opens()
        );
    }
    for w in warnings {
        println!("  warning: {w}");
    }
}

fn explain(
    policy_file: Option<&Path>,
    session: &Session,
    op: Op,
    json: bool,
    paths: &[PathBuf],
) -> Result<(), Failure> {
    let policy = load(policy_file, session, Some(session.workspace()?))?;
    let cgroup2 = crate::session::Cgroup2::find().ok();
    for path in paths {
        let normalized = normalized(path)?;
        let decision = policy.decide(&normalized, op);
        let shown = String::from_utf8_lossy(&normalized).into_owned();
        let floor = policy.open_floor(path, op);
        let pending = links_pending(&policy, path, op, decision.verdict);
        let own_cgroups = own_cgroups(cgroup2.as_ref(), &normalized, op, decision.verdict);
        if json {
            let mut answer = explain_json(&policy, &shown, op, &decision);
            if let Some(links) = pending {
                answer["refused_while_listing_hardlinks"] = json!({"links": links});
            }
            if let Some(nsdelegate) = own_cgroups {
                answer["own_cgroups_exception"] = json!({"nsdelegate": nsdelegate});
            }
            match &floor {
                Some(OpenFloor::Refused { what }) => {
                    answer["verdict"] = json!(Verdict::Deny);
                    answer["rule"] = json!(null);
                    answer["tier"] = json!("session boundary");
                    answer["kernel"] = json!(crate::policy::KernelDisposition::Exact);
                    answer["floor"] = json!(what);
                }
                Some(OpenFloor::Named { device, entry }) => {
                    answer["block_device"] = json!(device);
                    answer["block_devices_entry"] = json!(entry.text);
                }
                None => {}
            }
            println!("{answer}");
            continue;
        }
        if let Some(OpenFloor::Refused { what }) = &floor {
            println!("{shown}: {} deny by the session boundary: {what}; kernel: exact", op.name());
            continue;
        }
        let rule = decision.rule.and_then(|r| policy.rule(r));
        let why = match rule {
            Some(r) => format!("rule \"{}\" ({}, {})", r.text, r.tier, r.source),
            None => format!("default for {}", op.name()),
        };
        let lifted = match &floor {
            Some(OpenFloor::Named { device, entry }) => {
                format!(" (block device {device}, named by block_devices \"{}\")", entry.text)
            }
            _ => String::new(),
        };
        println!(
            "{shown}: {} {} by {why}{lifted}; kernel: {}",
            op.name(),
            verdict_name(decision.verdict),
            match decision.kernel {
                crate::policy::KernelDisposition::Exact => "exact",
                crate::policy::KernelDisposition::Defer => "defer",
            }
        );
        if let Some(nsdelegate) = own_cgroups {
            let here = if nsdelegate {
                "it is here"
            } else {
                "it is not here: the exception does not apply"
            };
            println!(
                "  but a session's own cgroups, below its cgroup (which it sees at the cgroup \
                 mount), are written, made and removed where cgroup2 is mounted nsdelegate \
                 ({here}; docs/threat-model.md, Sub-cgroups)"
            );
        }
        if let Some(links) = pending {
            println!(
                "  but refused in a session's first seconds: it has {links} links, and writes to \
                 such files wait until the read-only trees are listed for hardlinks \
                 (hardlinks-pending; docs/policy.md, Kernel tables)"
            );
        }
    }
    Ok(())
}

/// Whether `cgroup2` (this host's) is mounted `nsdelegate`, when `path` (normalized) is a file
/// on it the policy forbids `op` on: a session's own cgroups are the exception (fp-ebpf's
/// `cgroups`).
fn own_cgroups(
    cgroup2: Option<&crate::session::Cgroup2>,
    path: &[u8],
    op: Op,
    verdict: Verdict,
) -> Option<bool> {
    let cgroup2 = cgroup2.filter(|_| op != Op::Read && verdict == Verdict::Deny)?;
    let below = Path::new(std::ffi::OsStr::from_bytes(path)).starts_with(&cgroup2.mount);
    below.then_some(cgroup2.nsdelegate)
}

/// The links of the file at `path` when the kernel refuses the write `explain` allows while a
/// session's read-only trees are listed for hardlinks (crate::kernel::tables): a file other
/// than a directory with more than one link, under a policy with such trees.
fn links_pending(policy: &EffectivePolicy, path: &Path, op: Op, verdict: Verdict) -> Option<u64> {
    use std::os::unix::fs::MetadataExt as _;
    if op != Op::Write || verdict != Verdict::Allow {
        return None;
    }
    let md = std::fs::metadata(path).ok().filter(|md| !md.is_dir() && md.nlink() > 1)?;
    crate::kernel::tables::listed_later(policy.tables()).next().map(|_| md.nlink())
}

/// `explain --op perf KIND...`: whether a session may open a perf event of each kind. Counting a
/// process's user space always passes the floor; the other kinds only with `kernel_interfaces =
/// ["perf"]` (fp-ebpf's `floor`). Which processes a session may count stays the process
/// boundary's, and the kernel's own checks (perf_event_paranoid, capabilities) come first.
fn explain_perf(
    policy_file: Option<&Path>,
    session: &Session,
    json: bool,
    kinds: &[PathBuf],
) -> Result<(), Failure> {
    use crate::policy::KernelInterface;
    const KINDS: [(&str, bool); 4] =
        [("user", false), ("cpu-wide", true), ("kernel", true), ("tracepoint", true)];
    let policy = load(policy_file, session, Some(session.workspace()?))?;
    let switch = policy.interface(KernelInterface::Perf);
    for kind in kinds {
        let kind = kind.to_string_lossy();
        let Some(&(_, floored)) = KINDS.iter().find(|(k, _)| *k == kind) else {
            let names: Vec<&str> = KINDS.iter().map(|(k, _)| *k).collect();
            return Err(Failure::Usage(format!(
                "unknown perf event kind \"{kind}\" (kinds: {})",
                names.join(", ")
            )));
        };
        let (verdict, why) = match (floored, switch) {
            (false, _) => ("allow", "a process's user-space counters pass the floor".to_owned()),
            (true, Some(i)) => {
                ("allow", format!("by kernel_interfaces entry \"perf\" ({})", i.source))
            }
            (true, None) => (
                "deny",
                "by the session boundary: kernel_interfaces does not switch perf on".to_owned(),
            ),
        };
        if json {
            let entry = switch.filter(|_| floored).map(|i| i.source.to_string());
            println!(
                "{}",
                json!({"op": "perf", "kind": kind, "verdict": verdict, "source": entry, "kernel": "exact"})
            );
        } else {
            println!("perf event, {kind}: {verdict} {why}; kernel: exact");
        }
    }
    Ok(())
}

fn normalized(path: &Path) -> Result<Vec<u8>, Failure> {
    let abs = absolute(path)?;
    normalize_path(abs.as_os_str().as_bytes())
        .ok_or_else(|| Failure::Usage(format!("{} is not absolute", path.display())))
}

/// `explain --op rename|exchange|link SRC DST`: the kernel's answer to the move, with the
/// errno it gives and why. Whether each name exists and is a directory is read from the
/// filesystem (a name that does not exist is a new name; the source must exist to be moved,
/// but is decided as a file when it does not).
fn explain_move(
    policy_file: Option<&Path>,
    session: &Session,
    kind: MoveKind,
    json: bool,
    paths: &[PathBuf],
) -> Result<(), Failure> {
    let [src, dst] = paths else {
        return Err(Failure::Usage(format!("--op {} takes two paths, SRC and DST", kind.name())));
    };
    let policy = load(policy_file, session, Some(session.workspace()?))?;
    let (src_path, dst_path) = (normalized(src)?, normalized(dst)?);
    fn name<'a>(path: &Path, bytes: &'a [u8]) -> Name<'a> {
        let md = std::fs::metadata(path).ok();
        Name { path: bytes, exists: md.is_some(), dir: md.is_some_and(|m| m.is_dir()) }
    }
    let (s, d) = (name(src, &src_path), name(dst, &dst_path));
    let sides = policy.move_sides(kind, s, d);
    let verdict = fp_common::refer::decide(kind, &sides[0], &sides[1]);
    let dirs = sides[0].dir || (kind == MoveKind::Exchange && sides[1].dir);
    let (shown_src, shown_dst) =
        (String::from_utf8_lossy(&src_path), String::from_utf8_lossy(&dst_path));
    let verdicts = |i: usize| -> serde_json::Map<String, serde_json::Value> {
        Op::ALL
            .iter()
            .map(|op| (op.name().to_string(), json!(op.of(&sides[i].node).name())))
            .collect()
    };
    let (answer, errno, why) = match verdict {
        MoveVerdict::Allow => {
            ("allow", None, "the content gains no access under its new name".to_string())
        }
        MoveVerdict::Denied { op, target } => (
            "deny",
            Some("EACCES"),
            format!(
                "{} of {} is denied",
                op.name(),
                if target { "the target" } else { "the source" }
            ),
        ),
        MoveVerdict::Refused { op } => (
            "deny",
            Some("EXDEV"),
            format!(
                "refer: the {} would gain {} (or a prompt, defer or directory context cannot be \
                 proven equal); mv falls back to copy and unlink",
                if dirs { "tree" } else { "content" },
                op.name()
            ),
        ),
    };
    if json {
        println!(
            "{}",
            json!({
                "op": kind.name(),
                "path": shown_src,
                "target": shown_dst,
                "verdict": answer,
                "errno": errno,
                "reason": why,
                "directory": dirs,
                "target_exists": d.exists,
                "source_verdicts": verdicts(0),
                "target_verdicts": verdicts(1),
            })
        );
    } else {
        let errno = errno.map(|e| format!(" ({e})")).unwrap_or_default();
        println!("{shown_src} -> {shown_dst}: {} {answer}{errno}: {why}", kind.name());
    }
    Ok(())
}

/// `explain --op connect PATH|@NAME...`: whether a session may connect or send to the socket
/// when its server is outside the session (one inside is always reachable). The kernel knows a
/// path socket by the file each `sockets` entry names when the session starts, so the answer is
/// the entry that names the socket file at PATH now.
fn explain_connect(
    policy_file: Option<&Path>,
    session: &Session,
    json: bool,
    addresses: &[PathBuf],
) -> Result<(), Failure> {
    use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
    let policy = load(policy_file, session, Some(session.workspace()?))?;
    for address in addresses {
        let text = address.to_string_lossy();
        let (shown, entry, note) = match text.strip_prefix('@') {
            Some(_) => (text.to_string(), policy.sockets().iter().find(|s| s.names(&text)), None),
            None => {
                let shown = String::from_utf8_lossy(&normalized(address)?).into_owned();
                let file = std::fs::metadata(address).ok().filter(|m| m.file_type().is_socket());
                let entry = file.as_ref().and_then(|md| {
                    policy.socket_entry(md.ino(), crate::policy::kernel_dev(md.dev()))
                });
                let note = file.is_none().then_some("no socket is bound there now");
                (shown, entry, note)
            }
        };
        let verdict = if entry.is_some() { "allow" } else { "deny" };
        let why = match entry {
            Some(s) => format!("by sockets entry \"{}\" ({})", s.text, s.source),
            None => "no sockets entry names it".to_owned(),
        };
        if json {
            println!(
                "{}",
                json!({
                    "path": shown,
                    "op": "connect",
                    "verdict": verdict,
                    "served_from_inside": "allow",
                    "entry": entry.map(|s| &s.text),
                    "source": entry.map(|s| s.source.to_string()),
                    "note": note,
                    "kernel": "exact",
                })
            );
        } else {
            let note = note.map(|n| format!("; {n}")).unwrap_or_default();
            println!(
                "{shown}: connect {verdict} when served from outside the session ({why}{note}); \
                 served from inside: allow; kernel: exact"
            );
        }
    }
    Ok(())
}

fn explain_json(policy: &EffectivePolicy, path: &str, op: Op, d: &Decision) -> serde_json::Value {
    let rule = d.rule.and_then(|r| policy.rule(r));
    json!({
        "path": path,
        "op": op.name(),
        "verdict": d.verdict,
        "rule": rule.map(|r| &r.text),
        "glob": rule.map(|r| &r.glob),
        "tier": rule.map_or("default", |r| r.tier.as_str()),
        "layer": rule.map(|r| r.layer),
        "source": rule.map(|r| r.source.to_string()),
        "rule_id": rule.map(|r| r.id),
        "kernel": d.kernel,
    })
}

fn compile(policy_file: Option<&Path>, session: &Session, json: bool) -> Result<(), Failure> {
    let policy = load(policy_file, session, Some(session.workspace()?))?;
    let tables = policy.compile()?;
    if json {
        let rules: Vec<_> = policy
            .rules()
            .iter()
            .map(|r| json!({"id": r.id, "text": r.text, "glob": r.glob, "tier": r.tier, "source": r.source.to_string()}))
            .collect();
        println!(
            "{}",
            json!({"hash": hex(&policy.hash()), "rules": rules, "tables": tables.to_json()})
        );
    } else {
        println!(
            "{}: {} rules -> {} prefix entries, {} name entries, {} scopes; hash {}",
            session.shown(policy_file),
            policy.rules().len(),
            tables.prefixes().count(),
            tables.names().count(),
            tables.scopes().len().saturating_sub(1),
            hex(&policy.hash())
        );
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_cgroupfs_writes_name_the_own_cgroups_exception() {
        let cgroup2 = crate::session::Cgroup2 {
            mount: "/sys/fs/cgroup".into(),
            root: "/".into(),
            nsdelegate: true,
        };
        let at =
            |path: &str, op, verdict| own_cgroups(Some(&cgroup2), path.as_bytes(), op, verdict);
        assert_eq!(at("/sys/fs/cgroup/sub/memory.max", Op::Write, Verdict::Deny), Some(true));
        assert_eq!(at("/sys/fs/cgroup/sub", Op::Delete, Verdict::Deny), Some(true));
        assert_eq!(at("/sys/fs/cgroup/sub/memory.max", Op::Read, Verdict::Deny), None);
        assert_eq!(at("/sys/fs/cgroup/sub/memory.max", Op::Write, Verdict::Allow), None);
        assert_eq!(at("/sys/fs/cgroupfoo", Op::Write, Verdict::Deny), None);
        assert_eq!(own_cgroups(None, b"/sys/fs/cgroup/x", Op::Write, Verdict::Deny), None);
    }
}
