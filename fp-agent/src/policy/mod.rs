//! The policy language: parsing both schemas, layering, floors, the exact evaluator and the
//! compiler to kernel tables. docs/policy.md is the reference for the semantics.
//!
//! Every session's policy is one [`EffectivePolicy`]: an ordered list of [`Rule`]s (each with a
//! verdict and a rank per op) plus a default per op. The highest-ranked matching rule decides;
//! the exact evaluator ([`EffectivePolicy::decide`]) and the kernel tables
//! ([`fp_common::policy::evaluate`]) implement that one definition.
//!
//! Here: the effective policy and how it loads. Beside it: what a rule and a decision are
//! (`rule`), building a session's rules from the layers (`build`) and the paths it takes as input
//! (`paths`).
mod boundary;
mod build;
mod compile;
mod error;
mod exact;
mod floors;
mod glob;
mod layer;
mod lint;
mod moves;
mod parse;
mod paths;
mod profile;
mod rule;
mod sockets;

use std::path::{Path, PathBuf};

pub use boundary::{
    Device, DeviceRule, InterfaceRule, KernelInterface, OpenFloor, device_number, kernel_dev,
    parse_device_number,
};
pub use compile::{Anchor, KernelTables};
pub use error::{ErrorKind, PolicyError, Source};
use exact::ExactEvaluator;
pub use floors::{
    FP_DIRS, FP_SECRET_DIRS, FloorKind, RUNTIME_READ, RUNTIME_READ_WRITE, SAFETY_FLOOR,
    UnreadableBase,
};
pub use fp_common::policy::{Op, TableVerdict};
pub use layer::layer;
pub use lint::warnings;
pub use moves::Name;
pub use parse::{
    Base, FileKind, PolicyFields, Schema, Spanned, V1Default, V1Tier, V2Tier, parse_str,
};
pub use paths::normalize_path;
use paths::path_glob;
pub use profile::names as profiles;
pub use rule::{Decision, KernelDisposition, Layer, Rule, RuleRef, Verdict};
use sha2::Digest as _;
pub use sockets::{Peer, SocketRule};

/// Most rules (floors included) one session may have; more is a compile error.
pub const MAX_RULES: usize = 32768;
/// Longest glob after expansion.
pub const MAX_GLOB: usize = 4096;

/// What to load for a session.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// Per-agent policy files, layered over the config in order.
    pub policy_files: Vec<PathBuf>,
    /// A policy given as text (a control-socket client's), layered last; errors name it
    /// `<request>`.
    pub policy_text: Option<String>,
    /// The operator's config.toml (its `[file_policy]` is the global layer).
    pub config_file: Option<PathBuf>,
    /// `<workspace>`: a non-empty absolute directory.
    pub workspace: Option<PathBuf>,
    /// The user the session runs as (`~` is their home); None: the calling user.
    pub user: Option<String>,
    /// More paths a session may never write (audit log, key files named in the config).
    pub protected_paths: Vec<PathBuf>,
    /// More paths a session may never read or write (keys).
    pub secret_paths: Vec<PathBuf>,
    /// A shipped profile layered under the policy's rules (`--profile`); with no policy, the
    /// profile alone under `default = "deny"`.
    pub profile: Option<String>,
}

/// A session's policy: its rules and defaults (what is saved), and what is derived from them: the
/// exact evaluator and the kernel tables.
#[derive(Clone, Debug)]
pub struct EffectivePolicy {
    saved: SavedPolicy,
    exact: ExactEvaluator,
    tables: KernelTables,
}

/// The rules of an effective policy, already expanded, and its defaults: what a restarted daemon
/// reads back. [`EffectivePolicy::from_saved`] rebuilds the same policy (same hash, same tables).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct SavedPolicy {
    schema: Option<Schema>,
    defaults: [Verdict; 3],
    base: Base,
    rules: Vec<Rule>,
    floor_exceptions: Vec<Spanned<String>>,
    /// Saved before sockets were: none.
    #[serde(default)]
    sockets: Vec<SocketRule>,
    /// Saved before the floor's exceptions were: none.
    #[serde(default)]
    block_devices: Vec<DeviceRule>,
    #[serde(default)]
    kernel_interfaces: Vec<InterfaceRule>,
    /// The shipped profile layered under the rules, if any (its rules are among `rules`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    profile: Option<String>,
}

impl EffectivePolicy {
    /// Loads, layers, expands and compiles a session's policy. Nothing is applied on error.
    pub fn load(options: &LoadOptions) -> Result<EffectivePolicy, PolicyError> {
        let mut fields = match &options.config_file {
            Some(path) => parse::read_file(path, FileKind::Config)?,
            None => PolicyFields::default(),
        };
        for path in &options.policy_files {
            let overlay = parse::read_file(path, FileKind::Policy)?;
            fields = layer(&fields, &overlay)?.unwrap_or_default();
        }
        if let Some(text) = &options.policy_text {
            let overlay = parse_str(Path::new("<request>"), text, FileKind::Policy)?;
            fields = layer(&fields, &overlay)?.unwrap_or_default();
        }
        // The files the policy came from are never writable by the session.
        let mut protected = options.protected_paths.clone();
        for file in options.config_file.iter().chain(&options.policy_files) {
            protected.push(std::path::absolute(file).map_err(|e| {
                PolicyError::new(ErrorKind::Io, None, format!("{}: {e}", file.display()))
            })?);
        }
        let policy = Self::from_fields(
            &fields,
            &LoadOptions { protected_paths: protected, ..options.clone() },
        )?;
        policy.require_kernel_decided()?;
        Ok(policy)
    }

    /// Every rule decided exactly by the kernel's tables, or the first that is not, refused: the
    /// kernel would leave its paths to userspace, where nothing answers a create, rename or delete
    /// (they would all be refused), and `explain` could not say what the kernel does.
    pub fn require_kernel_decided(&self) -> Result<(), PolicyError> {
        let Some(&id) = self.tables.deferred_rules().first() else {
            return Ok(());
        };
        let rule = &self.saved.rules[id as usize];
        let forms = "the kernel decides exact paths, `dir/**`, `dir/name*`, `dir/*name`, \
                     `**/name`, `**/name/**`, `**/name*` and `**/*name`, each also within a literal \
                     `dir/**/` (docs/policy.md, \"Kernel tables\")";
        let (why, help) = if glob::decidable(&rule.glob) {
            (
                "it passes a limit of the kernel's tables",
                "docs/policy.md, \"Limits\", says which".to_string(),
            )
        } else {
            let help = match glob::wider_decidable(&rule.text, &rule.glob) {
                Some(wider) => format!(
                    "write \"{wider}\" instead (it matches more paths), or name the paths; {forms}"
                ),
                None => format!("name the paths instead; {forms}"),
            };
            ("the kernel's tables cannot match its wildcards", help)
        };
        Err(PolicyError::new(
            ErrorKind::Undecidable,
            Some(rule.source.clone()),
            format!(
                "rule \"{}\" is not decided exactly by the kernel: {why}, so a session would refuse \
                 every create, rename and delete it might match",
                rule.text
            ),
        )
        .with_help(help))
    }

    /// The policy of already parsed and layered fields (see [`parse_str`] and [`layer`]).
    pub fn from_fields(
        fields: &PolicyFields,
        options: &LoadOptions,
    ) -> Result<EffectivePolicy, PolicyError> {
        if fields.schema.is_none() && options.profile.is_none() {
            return Err(PolicyError::new(
                ErrorKind::NoPolicy,
                None,
                "no [file_policy] rules in the config or the policy files, and no profile",
            )
            .with_help(
                "fp never runs a session without a policy; write at least `default`, or name a \
                 profile",
            ));
        }
        Self::build(fields, options)
    }

    /// The policy of `fp run --deny PATH...`: everything allowed except these paths (and the
    /// floors).
    pub fn from_deny_paths(
        deny: &[PathBuf],
        options: &LoadOptions,
    ) -> Result<EffectivePolicy, PolicyError> {
        let source = Source::Builtin { builtin: "--deny".to_string() };
        let mut globs = Vec::new();
        for path in deny {
            let text = path_glob(path)?;
            globs.push(Spanned { value: format!("{text}/**"), source: source.clone() });
            globs.push(Spanned { value: text, source: source.clone() });
        }
        let fields = PolicyFields {
            schema: Some(Spanned { value: Schema::V1, source: source.clone() }),
            default: Some(Spanned { value: V1Default::Write, source }),
            v1_lists: [Some(globs), None, None, None],
            ..PolicyFields::default()
        };
        Self::build(&fields, options)
    }

    /// The policy of its rules and defaults: the exact evaluator and the kernel tables built
    /// from them.
    fn assemble(saved: SavedPolicy) -> Result<EffectivePolicy, PolicyError> {
        if saved.rules.len() > MAX_RULES {
            return Err(PolicyError::new(
                ErrorKind::Limit,
                None,
                format!("{} rules (floors included), the limit is {MAX_RULES}", saved.rules.len()),
            ));
        }
        let exact = ExactEvaluator::new(&saved.rules)?;
        let tables = compile::compile(&saved.rules, saved.defaults)?;
        Ok(EffectivePolicy { saved, exact, tables })
    }

    /// The shipped profile layered under its rules (`--profile`), if any.
    pub fn profile(&self) -> Option<&str> {
        self.saved.profile.as_deref()
    }

    /// The policy as saved across a daemon restart.
    pub fn saved(&self) -> SavedPolicy {
        self.saved.clone()
    }

    /// The policy `saved` was made from.
    pub fn from_saved(saved: SavedPolicy) -> Result<EffectivePolicy, PolicyError> {
        if let Some(r) = saved.rules.iter().enumerate().find(|(i, r)| r.id as usize != *i) {
            return Err(PolicyError::new(
                ErrorKind::BadValue,
                None,
                format!("saved policy: rule {} is out of order", r.0),
            ));
        }
        Self::assemble(saved)
    }

    /// The exact verdict for `path` (absolute, normalized) and `op`, with the deciding rule and
    /// whether the kernel decides it itself.
    pub fn decide(&self, path: &[u8], op: Op) -> Decision {
        let (verdict, rule) = match self.exact.decide(&self.saved.rules, path, op) {
            Some(rule) => {
                (rule.verdicts[op.index()].unwrap_or(Verdict::Deny), Some(RuleRef(rule.id)))
            }
            None => (self.saved.defaults[op.index()], None),
        };
        let kernel = match fp_common::policy::evaluate(&self.tables, path, op).verdict {
            TableVerdict::Defer => KernelDisposition::Defer,
            _ => KernelDisposition::Exact,
        };
        Decision { verdict, rule, kernel }
    }

    /// The kernel tables for this session.
    pub fn compile(&self) -> Result<KernelTables, PolicyError> {
        Ok(self.tables.clone())
    }

    /// The compiled tables, borrowed.
    pub fn tables(&self) -> &KernelTables {
        &self.tables
    }

    pub fn rule(&self, rule: RuleRef) -> Option<&Rule> {
        self.saved.rules.get(rule.0 as usize)
    }

    pub fn rules(&self) -> &[Rule] {
        &self.saved.rules
    }

    pub fn schema(&self) -> Option<Schema> {
        self.saved.schema
    }

    pub fn defaults(&self) -> [Verdict; 3] {
        self.saved.defaults
    }

    pub fn base(&self) -> Base {
        self.saved.base
    }

    /// Safety-floor entries the operator lifted, with where.
    pub fn floor_exceptions(&self) -> &[Spanned<String>] {
        &self.saved.floor_exceptions
    }

    /// The runtime base's entries in the user's home that a safety floor makes unreadable here.
    pub fn unreadable_base(&self) -> UnreadableBase {
        let mut unreadable = UnreadableBase::default();
        for rule in self.rules() {
            if rule.layer != Layer::RuntimeBase
                || !rule.text.starts_with('~')
                || rule.verdicts[Op::Read.index()] != Some(Verdict::Allow)
            {
                continue;
            }
            // A path the entry allows: itself, or one below it for `dir/**`.
            let (shown, path) = match rule.glob.strip_suffix("/**") {
                Some(dir) => (rule.text.trim_end_matches("/**"), format!("{dir}/config")),
                None => (rule.text.as_str(), rule.glob.clone()),
            };
            let decision = self.decide(path.as_bytes(), Op::Read);
            let Some(decider) = decision.rule.and_then(|r| self.rule(r)) else { continue };
            if decision.verdict == Verdict::Deny && decider.layer > Layer::Policy {
                if !unreadable.entries.iter().any(|e| e == shown) {
                    unreadable.entries.push(shown.to_owned());
                }
                if !unreadable.floors.contains(&decider.tier) {
                    unreadable.floors.push(decider.tier.clone());
                }
            }
        }
        unreadable
    }

    /// The unix sockets served from outside the session that it may use (`sockets`).
    pub fn sockets(&self) -> &[SocketRule] {
        &self.saved.sockets
    }

    /// The sockets [`Self::sockets`] name now (the kernel's `UNIX_PEERS` entries of the session).
    pub fn socket_peers(&self) -> Vec<Peer> {
        sockets::resolve(&self.saved.sockets)
    }

    /// The `sockets` entry that names the socket file `(ino, dev)` now (`dev` as the kernel
    /// encodes it), as the session's kernel entries are written.
    pub fn socket_entry(&self, ino: u64, dev: u32) -> Option<&SocketRule> {
        self.saved.sockets.iter().find(|s| {
            s.peers()
                .iter()
                .any(|p| matches!(p, Peer::File { ino: i, dev: d, .. } if (*i, *d) == (ino, dev)))
        })
    }

    /// The block devices its sessions may open past the boundary's floor (`block_devices`).
    pub fn block_devices(&self) -> &[DeviceRule] {
        &self.saved.block_devices
    }

    /// The devices [`Self::block_devices`] name now (the kernel's `BLOCK_DEVICES` entries of the
    /// session).
    pub fn devices(&self) -> Vec<Device> {
        boundary::resolve_devices(&self.saved.block_devices)
    }

    /// What the session boundary's floor says of opening `path` for `op` now, before the rules
    /// (None: the rules alone decide).
    pub fn open_floor(&self, path: &Path, op: Op) -> Option<OpenFloor<'_>> {
        boundary::open_floor(&self.saved.block_devices, path, op)
    }

    /// The `block_devices` entry that names the device `rdev` (the kernel's encoding) now.
    pub fn device_entry(&self, rdev: u32) -> Option<&DeviceRule> {
        boundary::naming(&self.saved.block_devices, rdev)
    }

    /// The kernel interfaces it switches on past the boundary's floor (`kernel_interfaces`).
    pub fn kernel_interfaces(&self) -> &[InterfaceRule] {
        &self.saved.kernel_interfaces
    }

    /// The entry that switches `interface` on, if any.
    pub fn interface(&self, interface: KernelInterface) -> Option<&InterfaceRule> {
        self.saved.kernel_interfaces.iter().find(|i| i.interface == interface)
    }

    /// The `SessionInfo::flags` its kernel interfaces set (`SESSION_POLICY_FLAGS`).
    pub fn session_flags(&self) -> u64 {
        self.saved.kernel_interfaces.iter().fold(0, |f, i| f | i.interface.session_flag())
    }

    /// sha256 of a canonical form of the effective policy (what audit records name).
    pub fn hash(&self) -> [u8; 32] {
        #[derive(serde::Serialize)]
        struct CanonicalRule<'a> {
            glob: &'a str,
            verdicts: [Option<Verdict>; 3],
            ranks: [u32; 3],
        }
        #[derive(serde::Serialize)]
        struct Canonical<'a> {
            defaults: [Verdict; 3],
            rules: Vec<CanonicalRule<'a>>,
            /// Absent without sockets: the hash of a policy without them stays what it was.
            #[serde(skip_serializing_if = "Vec::is_empty")]
            sockets: Vec<&'a str>,
            /// Likewise.
            #[serde(skip_serializing_if = "Vec::is_empty")]
            block_devices: Vec<&'a str>,
            #[serde(skip_serializing_if = "Vec::is_empty")]
            kernel_interfaces: Vec<&'static str>,
        }
        let rules = self
            .saved
            .rules
            .iter()
            .map(|r| CanonicalRule { glob: &r.glob, verdicts: r.verdicts, ranks: r.ranks })
            .collect();
        let sockets = self.saved.sockets.iter().map(|s| s.pattern.as_str()).collect();
        let block_devices = self.saved.block_devices.iter().map(|d| d.pattern.as_str()).collect();
        let kernel_interfaces =
            self.saved.kernel_interfaces.iter().map(|i| i.interface.name()).collect();
        let canonical = Canonical {
            defaults: self.saved.defaults,
            rules,
            sockets,
            block_devices,
            kernel_interfaces,
        };
        let bytes = serde_json::to_vec(&canonical).unwrap_or_default();
        sha2::Sha256::digest(&bytes).into()
    }
}
