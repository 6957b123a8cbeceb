//! The daemon's config file (docs/configuration.md): `[daemon]`, `[sessions]`, `[audit]` and
//! `[approval]`, next to the `[file_policy]` global policy layer the policy loader reads from the
//! same file. Mistakes are reported as file:line:col like policy errors.
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::audit::{OnFull, SpaceLeft, WriterConfig};
use crate::policy::{ErrorKind, FileKind, PolicyError, Source, parse_str};
use crate::session::Cgroup2;
use crate::session::Mode;

pub const DEFAULT_PATH: &str = "/etc/fp/config.toml";
/// Where the daemon listens unless `[daemon] socket` says otherwise.
pub const DEFAULT_SOCKET: &str = "/run/fp/fp.sock";

/// The parsed config, with defaults filled in and names (group) resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The file read, or `None` for the built-in defaults.
    pub file: Option<PathBuf>,
    pub socket: PathBuf,
    /// Besides root, members of this group may use the socket.
    pub socket_group: Option<Group>,
    /// The bpffs directory holding fp's pinned programs, maps and links.
    pub pin_dir: PathBuf,
    /// The cgroup v2 directory sessions are created in; `None`: `<cgroup2 mount>/fp`.
    pub cgroup_parent: Option<PathBuf>,
    pub sessions: Sessions,
    pub audit: Audit,
    pub approval: Approval,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub name: String,
    pub gid: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Sessions {
    /// The policy of a session whose request names none.
    pub default_policy: Option<PathBuf>,
    /// The operator config layered under every session's policy; `None`: the daemon's config file.
    pub policy_config: Option<PathBuf>,
    pub default_mode: Mode,
    pub full_audit: bool,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions {
            default_policy: None,
            policy_config: None,
            default_mode: Mode::Enforce,
            full_audit: false,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Audit {
    pub log: PathBuf,
    /// The ed25519 private key signing checkpoints (`fp audit keygen`).
    pub key: PathBuf,
    pub rotate_bytes: u64,
    pub rotate_age_secs: u64,
    pub checkpoint_every_records: u64,
    pub checkpoint_every_secs: u64,
    /// Free space on the log's filesystem under which the daemon warns: bytes (`"512MiB"`) or a
    /// percentage of the filesystem (`"5%"`, the default).
    pub space_left: SpaceLeft,
    /// What the sessions do while the log cannot be written: `"refuse"` (the default: they go
    /// on, new ones are refused) or `"freeze"` (they are frozen until it can).
    pub on_full: OnFull,
}

impl Default for Audit {
    fn default() -> Self {
        Audit {
            log: "/var/log/fp/audit.log".into(),
            key: "/etc/fp/audit.key".into(),
            rotate_bytes: 256 << 20,
            rotate_age_secs: 24 * 3600,
            checkpoint_every_records: 10_000,
            checkpoint_every_secs: 60,
            space_left: SpaceLeft::default(),
            on_full: OnFull::default(),
        }
    }
}

impl Audit {
    /// The audit writer's settings from this section: every `[audit]` key takes effect here.
    pub fn writer_config(&self, signer: crate::audit::checkpoint::SignerKey) -> WriterConfig {
        WriterConfig {
            rotate_bytes: self.rotate_bytes,
            rotate_age: Duration::from_secs(self.rotate_age_secs),
            checkpoint_every_records: self.checkpoint_every_records,
            checkpoint_every: Duration::from_secs(self.checkpoint_every_secs),
            space_left: self.space_left,
            on_full: self.on_full,
            ..WriterConfig::new(self.log.clone(), signer)
        }
    }
}

/// The prompt tier: who is asked, and for how long, before a prompt decision falls back to deny.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Approval {
    pub timeout_secs: u64,
    /// argv of the program asked to approve; `None`: the daemon waits for an answer on its
    /// socket (`fp approve`, `fp deny`), and `fp run` without a daemon asks on its terminal
    /// (denying at once when it has none).
    pub command: Option<Vec<String>>,
}

impl Default for Approval {
    fn default() -> Self {
        Approval { timeout_secs: 60, command: None }
    }
}

impl Default for Config {
    fn default() -> Self {
        let file = FileSections::default();
        Config {
            file: None,
            socket: file.daemon.socket.into_inner(),
            socket_group: None,
            pin_dir: file.daemon.pin_dir.into_inner(),
            cgroup_parent: None,
            sessions: Sessions::default(),
            audit: Audit::default(),
            approval: Approval::default(),
        }
    }
}

/// The file as written; positions are kept where a value is checked after parsing.
#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct FileSections {
    daemon: DaemonSection,
    sessions: Sessions,
    audit: Audit,
    approval: Approval,
    /// Read by the policy loader (docs/policy.md); checked by `parse_str` here.
    #[serde(rename = "file_policy")]
    _file_policy: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(default, deny_unknown_fields)]
struct DaemonSection {
    socket: Spanned<PathBuf>,
    socket_group: Option<Spanned<String>>,
    pin_dir: Spanned<PathBuf>,
    cgroup_parent: Option<Spanned<PathBuf>>,
}

impl Default for DaemonSection {
    fn default() -> Self {
        DaemonSection {
            socket: Spanned::new(0..0, DEFAULT_SOCKET.into()),
            socket_group: None,
            pin_dir: Spanned::new(0..0, "/sys/fs/bpf/fp".into()),
            cgroup_parent: None,
        }
    }
}

/// The workspace [`check_file_policy`] builds `<workspace>` rules with: a session's is its own.
const CHECK_WORKSPACE: &str = "/nonexistent/fp-check-workspace";

/// Builds the `[file_policy]` of the config at `path` as every session inherits it (globs
/// expanded, floor exceptions and rule limits checked, tables compiled): a mistake the parser
/// cannot see (a relative path, a bad glob, an unknown floor) stops the daemon at its start and
/// `fp daemon --check`, with its file:line, instead of refusing every session later. A config
/// without rules (each session brings its policy) is built under a placeholder session policy,
/// so that what it does set (`floor_exceptions`) is checked too.
pub fn check_file_policy(path: &Path) -> Result<(), PolicyError> {
    let mut options = crate::policy::LoadOptions {
        config_file: Some(path.to_path_buf()),
        workspace: Some(PathBuf::from(CHECK_WORKSPACE)),
        ..Default::default()
    };
    match crate::policy::EffectivePolicy::load(&options) {
        Err(e) if e.kind == ErrorKind::NoPolicy => {
            options.policy_text = Some("[file_policy]\ndefault = \"deny\"\n".into());
            crate::policy::EffectivePolicy::load(&options).map(drop)
        }
        built => built.map(drop),
    }
}

impl Config {
    /// Reads `path`; every error names the file, line and column.
    pub fn load(path: &Path) -> Result<Config, PolicyError> {
        let text = crate::input::read_text(path, crate::input::POLICY_MAX).map_err(|e| {
            PolicyError::new(ErrorKind::Io, None, format!("cannot read {}: {e}", path.display()))
        })?;
        Config::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Config, PolicyError> {
        // The policy parser reports TOML syntax and [file_policy] mistakes; a bad global layer
        // must stop the daemon at start, not fail every session later.
        parse_str(path, text, FileKind::Config)?;
        let file: FileSections = toml::from_str(text).map_err(|e| {
            let source = e.span().map(|s| Source::at(path, text, s.start));
            let message = e.message().trim_end();
            let kind = if message.starts_with("unknown field") {
                ErrorKind::UnknownKey
            } else if message.starts_with("invalid type") {
                ErrorKind::WrongType
            } else {
                ErrorKind::BadValue
            };
            PolicyError::new(kind, source, message.to_owned())
        })?;
        let at = |span: std::ops::Range<usize>| Some(Source::at(path, text, span.start));
        let absolute = |value: &Spanned<PathBuf>, key: &str| {
            if value.get_ref().is_absolute() {
                Ok(value.get_ref().clone())
            } else {
                Err(PolicyError::new(
                    ErrorKind::RelativePath,
                    at(value.span()),
                    format!("`{key}` must be an absolute path"),
                ))
            }
        };
        let daemon = &file.daemon;
        let socket = absolute(&daemon.socket, "socket")?;
        let pin_dir = absolute(&daemon.pin_dir, "pin_dir")?;
        let cgroup_parent =
            daemon.cgroup_parent.as_ref().map(|p| absolute(p, "cgroup_parent")).transpose()?;
        let socket_group = daemon
            .socket_group
            .as_ref()
            .map(|name| {
                let group = nix::unistd::Group::from_name(name.get_ref()).ok().flatten();
                let gid = group.map(|g| g.gid.as_raw()).ok_or_else(|| {
                    PolicyError::new(
                        ErrorKind::BadValue,
                        at(name.span()),
                        format!("no group named \"{}\" on this host", name.get_ref()),
                    )
                    .with_help("create it (groupadd --system fp) or remove `socket_group`")
                })?;
                Ok(Group { name: name.get_ref().clone(), gid })
            })
            .transpose()?;
        if file.approval.command.as_ref().is_some_and(Vec::is_empty) {
            return Err(PolicyError::new(
                ErrorKind::BadValue,
                None,
                format!("{}: [approval] `command` is empty", path.display()),
            )
            .with_help("give the program and its arguments, or remove `command`"));
        }
        Ok(Config {
            file: Some(path.to_path_buf()),
            socket,
            socket_group,
            pin_dir,
            cgroup_parent,
            sessions: file.sessions,
            audit: file.audit,
            approval: file.approval,
        })
    }

    /// The directory session cgroups are created in: `cgroup_parent`, else `<cgroup2 mount>/fp`.
    pub fn sessions_parent(&self, hierarchy: &Cgroup2) -> PathBuf {
        self.cgroup_parent.clone().unwrap_or_else(|| hierarchy.mount.join("fp"))
    }

    /// Where the daemon saves its sessions for a restarted daemon to take over: `state/` next to
    /// the socket (on /run, so a reboot, which ends every session, clears it).
    pub fn state_dir(&self) -> PathBuf {
        self.socket.parent().unwrap_or(Path::new("/")).join("state")
    }

    /// The single-instance lock file, next to the socket.
    pub fn lock_path(&self) -> PathBuf {
        let mut name = self.socket.as_os_str().to_owned();
        name.push(".lock");
        name.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, PolicyError> {
        Config::parse(Path::new("/etc/fp/config.toml"), text)
    }

    #[test]
    fn an_empty_file_is_the_defaults() {
        let config = parse("").unwrap();
        assert_eq!(config.file.as_deref(), Some(Path::new("/etc/fp/config.toml")));
        assert_eq!(Config { file: None, ..config }, Config::default());
        assert_eq!(Config::default().socket, Path::new("/run/fp/fp.sock"));
        assert_eq!(Config::default().lock_path(), Path::new("/run/fp/fp.sock.lock"));
        let hybrid =
            Cgroup2 { mount: "/sys/fs/cgroup/unified".into(), root: "/".into(), nsdelegate: false };
        let parent = Config::default().sessions_parent(&hybrid);
        assert_eq!(parent, Path::new("/sys/fs/cgroup/unified/fp"));
    }

    #[test]
    fn the_shipped_config_parses() {
        let text = include_str!("../../packaging/config.toml");
        let config = parse(text).unwrap();
        assert_eq!(config.sessions.default_mode, Mode::Enforce);
        assert!(config.socket_group.is_none(), "groups differ per host: the default is commented");
    }

    /// packaging/config.toml says "the values shown are the defaults", and what each key it
    /// leaves commented out means when unset: every such claim is checked against the code.
    #[test]
    fn the_shipped_config_states_the_code_defaults() {
        let text = include_str!("../../packaging/config.toml");
        assert!(text.contains("the values shown are the defaults"));
        let shipped = parse(text).unwrap();
        let defaults = Config::default();
        assert_eq!(Config { file: None, ..shipped }, defaults, "a value shown is not the default");
        // Trailing size notes, e.g. `rotate_bytes = 268435456   # 256 MiB`.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            if let Some((value, note)) = line.split_once('=').and_then(|(_, v)| v.split_once('#'))
                && let Some(mib) = note.trim().strip_suffix(" MiB")
            {
                let mib: u64 = mib.parse().unwrap();
                assert_eq!(value.trim().parse::<u64>().unwrap(), mib << 20, "{line}");
            }
        }
        let hierarchy =
            Cgroup2 { mount: "/sys/fs/cgroup".into(), root: "/".into(), nsdelegate: false };
        // Each key left unset: what its comment says that means, and whether the code agrees.
        let claims: [(&str, &str, bool); 5] = [
            ("socket_group", "Unset: root only.", defaults.socket_group.is_none()),
            (
                "cgroup_parent",
                "Default: <cgroup2 mount>/fp",
                defaults.sessions_parent(&hierarchy) == Path::new("/sys/fs/cgroup/fp"),
            ),
            (
                "default_policy",
                "Unset: such requests are refused.",
                defaults.sessions.default_policy.is_none(),
            ),
            (
                "policy_config",
                "Unset: this file (its [file_policy]).",
                defaults.sessions.policy_config.is_none(),
            ),
            (
                "command",
                "Unset: the daemon waits for an answer on its socket (fp approve, fp deny) until \
                 timeout_secs.",
                defaults.approval.command.is_none(),
            ),
        ];
        // The commented-out keys of the daemon's sections ([file_policy] is an example).
        let daemon_part = text.split("# [file_policy]").next().unwrap();
        let lines: Vec<&str> = daemon_part.lines().collect();
        let mut seen = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            let Some((key, _)) = line.strip_prefix("# ").and_then(|l| l.split_once(" = ")) else {
                continue;
            };
            let (_, claim, holds) = claims
                .iter()
                .find(|(k, ..)| *k == key)
                .unwrap_or_else(|| panic!("no claim checked for the commented key `{key}`"));
            // The comment block above the key.
            let above: Vec<&str> = lines[..i]
                .iter()
                .rev()
                .take_while(|l| l.starts_with("# ") && !l.contains(" = "))
                .map(|l| l.trim_start_matches("# "))
                .collect();
            let comment = above.into_iter().rev().collect::<Vec<_>>().join(" ");
            assert!(comment.contains(claim), "`{key}`: {comment:?} should say {claim:?}");
            assert!(holds, "`{key}`: the code's default is not {claim:?}");
            seen.push(key);
        }
        assert_eq!(seen.len(), claims.len(), "claims for keys not in the file: {seen:?}");
    }

    /// The docs give the socket's default as the code has it.
    #[test]
    fn the_docs_name_the_default_socket() {
        let configuration = include_str!("../../docs/configuration.md");
        let prompt = include_str!("../../docs/prompt.md");
        assert!(configuration.contains(&format!("| `socket` | `\"{DEFAULT_SOCKET}\"` |")));
        assert!(prompt.contains(&format!("`--socket PATH` [default `{DEFAULT_SOCKET}`")));
        assert!(!prompt.contains("control.sock"), "an old socket path in docs/prompt.md");
    }

    /// The complete example of docs/configuration.md sets every key.
    #[test]
    fn every_key_is_read() {
        let doc = include_str!("../../docs/configuration.md");
        let (_, example) = doc.split_once("## A complete example\n\n```toml\n").unwrap();
        let (text, _) = example.split_once("```").unwrap();
        let c = parse(text).unwrap();
        assert_eq!(c.socket_group, Some(Group { name: "root".into(), gid: 0 }));
        assert_eq!(c.cgroup_parent.as_deref(), Some(Path::new("/sys/fs/cgroup/fp")));
        assert_eq!(
            c.sessions.default_policy.as_deref(),
            Some(Path::new("/etc/fp/policies/default.toml"))
        );
        assert_eq!(c.sessions.policy_config.as_deref(), Some(Path::new("/etc/fp/global.toml")));
        assert_eq!(c.sessions.default_mode, Mode::Audit);
        assert!(c.sessions.full_audit);
        let audit = &c.audit;
        assert_eq!((audit.rotate_bytes, audit.rotate_age_secs), (1 << 20, 3600));
        assert_eq!((audit.checkpoint_every_records, audit.checkpoint_every_secs), (1000, 30));
        assert_eq!(audit.space_left, SpaceLeft::Bytes(256 << 20));
        assert_eq!(c.approval.timeout_secs, 30);
        assert_eq!(c.approval.command.as_deref().unwrap()[1], "--notify");
    }

    /// A writer started the way the daemon starts it, from a config with `audit` keys set.
    struct Log {
        dir: tempfile::TempDir,
        handle: crate::audit::AuditHandle,
        writer: crate::audit::AuditWriter,
    }

    impl Log {
        fn start(audit: &str) -> Self {
            let dir = tempfile::tempdir().unwrap();
            let log = dir.path().join("audit.log");
            let text = format!("[audit]\nlog = \"{}\"\n{audit}", log.display());
            let config = parse(&text).unwrap();
            let signer = crate::audit::checkpoint::SignerKey::generate("fp-test").unwrap();
            let (handle, writer) = crate::audit::start(config.audit.writer_config(signer)).unwrap();
            Log { dir, handle, writer }
        }

        /// One record of about 500 bytes, written to the file before this returns.
        fn write(&self, n: usize) {
            let event = crate::audit::Event::SessionStart(crate::audit::SessionStart {
                session: format!("s{n}"),
                command: vec!["x".repeat(400)],
                ..Default::default()
            });
            assert!(self.handle.record_written(event, Duration::from_secs(10)));
        }

        fn active(&self) -> PathBuf {
            self.dir.path().join("audit.log")
        }

        fn rotated(&self) -> Vec<PathBuf> {
            crate::audit::segments::rotated_segments(&self.active()).unwrap()
        }

        /// Checkpoint records in every segment so far.
        fn checkpoints(&self) -> usize {
            let mut files = self.rotated();
            files.push(self.active());
            files
                .iter()
                .map(|f| std::fs::read_to_string(f).unwrap())
                .map(|t| t.matches("\"kind\":\"checkpoint\"").count())
                .sum()
        }

        fn close(self) {
            self.writer.shutdown().unwrap();
        }
    }

    #[test]
    fn audit_rotate_bytes_takes_effect() {
        let log = Log::start("rotate_bytes = 16384\n");
        for n in 0..100 {
            log.write(n);
        }
        let rotated = log.rotated();
        assert!(rotated.len() >= 2, "about 50 KB in 16 KiB segments: {rotated:?}");
        for segment in &rotated {
            let len = std::fs::metadata(segment).unwrap().len();
            assert!(len < 16384 + 2048, "{} is {len} bytes", segment.display());
        }
        log.close();
    }

    #[test]
    fn audit_rotate_age_secs_takes_effect() {
        let log = Log::start("rotate_age_secs = 1\n");
        log.write(0);
        assert!(log.rotated().is_empty());
        std::thread::sleep(Duration::from_millis(1500));
        log.write(1);
        assert!(!log.rotated().is_empty(), "a segment older than 1 s is rotated");
        log.close();
    }

    #[test]
    fn audit_checkpoint_every_records_takes_effect() {
        let log = Log::start("checkpoint_every_records = 4\n");
        for n in 0..12 {
            log.write(n);
        }
        assert_eq!(log.checkpoints(), 3, "a checkpoint every 4 records, not after 60 s");
        log.close();
    }

    #[test]
    fn audit_checkpoint_every_secs_takes_effect() {
        let log = Log::start("checkpoint_every_secs = 1\n");
        log.write(0);
        assert_eq!(log.checkpoints(), 0);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while log.checkpoints() == 0 {
            assert!(std::time::Instant::now() < deadline, "no checkpoint after 1 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        log.close();
    }

    /// The daemon's writer settings are the `[audit]` section's, key by key.
    #[test]
    fn audit_keys_reach_the_writer_config() {
        let c = parse(
            "[audit]\nrotate_bytes = 1000\nrotate_age_secs = 20\ncheckpoint_every_records = 30\n\
             checkpoint_every_secs = 40\nspace_left = \"10%\"\non_full = \"freeze\"\n",
        )
        .unwrap();
        let w = c.audit.writer_config(crate::audit::checkpoint::SignerKey::generate("t").unwrap());
        assert_eq!(w.path, Path::new("/var/log/fp/audit.log"));
        assert_eq!((w.rotate_bytes, w.rotate_age), (1000, Duration::from_secs(20)));
        assert_eq!(w.checkpoint_every_records, 30);
        assert_eq!(w.checkpoint_every, Duration::from_secs(40));
        assert_eq!(w.space_left, SpaceLeft::Percent(10));
        assert_eq!(w.on_full, OnFull::Freeze);
    }

    #[test]
    fn mistakes_are_reported_at_their_position() {
        let e = parse("[daemon]\nsockt = \"/x\"\n").unwrap_err();
        assert_eq!(e.kind, ErrorKind::UnknownKey);
        assert!(
            e.to_string().starts_with("/etc/fp/config.toml:2:1: error: unknown field `sockt`"),
            "{e}"
        );

        let e = parse("[audit]\nrotate_bytes = \"big\"\n").unwrap_err();
        assert_eq!(e.kind, ErrorKind::WrongType);
        assert!(e.to_string().starts_with("/etc/fp/config.toml:2:16:"), "{e}");

        let e = parse("[audit]\nspace_left = \"5 MB\"\n").unwrap_err();
        assert!(e.to_string().starts_with("/etc/fp/config.toml:2:14:"), "{e}");
        assert!(e.to_string().contains("expected bytes"), "{e}");

        let e = parse("[audit]\non_full = \"halt\"\n").unwrap_err();
        assert!(e.to_string().starts_with("/etc/fp/config.toml:2:11:"), "{e}");
        assert!(e.to_string().contains("expected `refuse` or `freeze`"), "{e}");

        let e = parse("[sessions]\ndefault_mode = \"block\"\n").unwrap_err();
        assert_eq!(e.kind, ErrorKind::BadValue);
        assert!(e.to_string().contains(":2:16:"), "{e}");

        let e = parse("[daemon]\nsocket = \"fp.sock\"\n").unwrap_err();
        assert_eq!(e.kind, ErrorKind::RelativePath);
        assert!(e.to_string().starts_with("/etc/fp/config.toml:2:10:"), "{e}");

        let e = parse("[daemon]\nsocket_group = \"no-such-group-fp\"\n").unwrap_err();
        assert!(e.to_string().starts_with("/etc/fp/config.toml:2:16: error: no group"), "{e}");

        let e = parse("[daemon\n").unwrap_err();
        assert_eq!(e.kind, ErrorKind::Syntax);

        let e = parse("[file_policy]\ndefault = \"maybe\"\n").unwrap_err();
        assert_eq!(e.kind, ErrorKind::BadValue);

        let e = parse("[approval]\ncommand = []\n").unwrap_err();
        assert!(e.to_string().contains("`command` is empty"), "{e}");

        let e = parse("[telemetry]\n").unwrap_err();
        assert_eq!(e.kind, ErrorKind::UnknownKey);
        assert!(e.to_string().contains("expected one of"), "{e}");
    }
}
