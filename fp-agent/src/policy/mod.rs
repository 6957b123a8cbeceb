//! The policy language: parsing both schemas, layering, floors, the exact evaluator and the
//! compiler to kernel tables. docs/policy.md is the reference for the semantics.
//!
//! Every session's policy is one [`EffectivePolicy`]: an ordered list of [`Rule`]s (each with a
//! verdict and a rank per op) plus a default per op. The highest-ranked matching rule decides;
//! the exact evaluator ([`EffectivePolicy::decide`]) and the kernel tables
//! ([`fp_common::policy::evaluate`]) implement that one definition.
mod compile;
mod error;
mod exact;
mod floors;
mod glob;
mod layer;
mod moves;
mod parse;

use std::path::{Path, PathBuf};

pub use compile::KernelTables;
pub use error::{ErrorKind, PolicyError, Source};
use exact::ExactEvaluator;
pub use floors::{
    FP_DIRS, FP_SECRET_DIRS, FloorKind, RUNTIME_READ, RUNTIME_READ_WRITE, SAFETY_FLOOR,
};
pub use fp_common::policy::{Op, TableVerdict};
use glob::Expansion;
pub use layer::layer;
pub use moves::Name;
pub use parse::{
    Base, FileKind, PolicyFields, Schema, Spanned, V1Default, V1Tier, V2Tier, parse_str,
};
use sha2::Digest as _;

/// Most rules (floors included) one session may have; more is a compile error.
pub const MAX_RULES: usize = 32768;
/// Longest glob after expansion.
pub const MAX_GLOB: usize = 4096;

/// A user-facing verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Allow,
    Prompt,
    Deny,
}

impl Verdict {
    /// Low two bits of a rank: stricter wins a tie.
    fn strictness(self) -> u32 {
        match self {
            Verdict::Allow => 0,
            Verdict::Prompt => 1,
            Verdict::Deny => 2,
        }
    }

    pub fn table(self) -> TableVerdict {
        match self {
            Verdict::Allow => TableVerdict::Allow,
            Verdict::Prompt => TableVerdict::Prompt,
            Verdict::Deny => TableVerdict::Deny,
        }
    }
}

/// Which layer a rule comes from; a higher layer outranks every rule of a lower one.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Layer {
    /// What any program needs to start; decides only where no policy rule matches.
    RuntimeBase = 1,
    /// The operator's global `[file_policy]` layered with the per-agent overlay.
    Policy = 2,
    /// Credentials and system configuration.
    SafetyFloor = 3,
    /// fp's own files.
    SelfProtection = 4,
}

/// One rule of a session's effective policy.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Rule {
    /// Index in [`EffectivePolicy::rules`]; the kernel tables name rules by it.
    pub id: u32,
    /// As written (`<workspace>/secrets/**`).
    pub text: String,
    /// Expanded and normalized: what is matched.
    pub glob: String,
    /// The list it came from (`deny_paths`, `write.prompt`, `safety floor ssh`, ...).
    pub tier: String,
    pub layer: Layer,
    pub source: Source,
    /// Verdict per op (indexed by `Op`); None: the rule says nothing about that op.
    pub verdicts: [Option<Verdict>; 3],
    /// Rank per op: the highest-ranked matching rule decides.
    pub ranks: [u32; 3],
}

/// How the kernel handles a (path, op).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KernelDisposition {
    /// The tables give the exact verdict.
    Exact,
    /// The tables defer to userspace.
    Defer,
}

/// A rule by id; [`EffectivePolicy::rule`] gives its text, tier and source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RuleRef(pub u32);

/// The decision for one (path, op).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub verdict: Verdict,
    /// The deciding rule; None when the op's default decided.
    pub rule: Option<RuleRef>,
    pub kernel: KernelDisposition,
}

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
}

/// Where globs of one layer come from, for the rules built from them.
struct RuleBuilder<'a> {
    expansion: Expansion<'a>,
    rules: Vec<Rule>,
}

impl RuleBuilder<'_> {
    fn add(
        &mut self,
        text: &str,
        source: Source,
        tier: String,
        layer: Layer,
        tier_rank: u32,
        verdicts: [Option<Verdict>; 3],
    ) -> Result<(), PolicyError> {
        let glob = glob::prepare(text, self.expansion).map_err(|(kind, message, help)| {
            PolicyError::new(kind, Some(source.clone()), message).with_help(help)
        })?;
        if glob.len() > MAX_GLOB {
            return Err(PolicyError::new(
                ErrorKind::Limit,
                Some(source),
                format!(
                    "rule is {} bytes long after expansion, the limit is {MAX_GLOB}",
                    glob.len()
                ),
            ));
        }
        let (class, literal) = glob::specificity(&glob);
        let ranks = verdicts.map(|v| {
            v.map_or(0, |v| {
                (layer as u32) << 29
                    | tier_rank << 26
                    | class << 24
                    | literal.min(0x3f_ffff) << 2
                    | v.strictness()
            })
        });
        let id = self.rules.len() as u32;
        self.rules.push(Rule {
            id,
            text: text.to_string(),
            glob,
            tier,
            layer,
            source,
            verdicts,
            ranks,
        });
        Ok(())
    }

    fn builtin(
        &mut self,
        text: &str,
        name: &str,
        layer: Layer,
        verdicts: [Option<Verdict>; 3],
    ) -> Result<(), PolicyError> {
        let source = Source::Builtin { builtin: name.to_string() };
        self.add(text, source, name.to_string(), layer, 0, verdicts)
    }
}

const DENY_ALL: [Option<Verdict>; 3] = [Some(Verdict::Deny); 3];
const DENY_CHANGE: [Option<Verdict>; 3] = [None, Some(Verdict::Deny), Some(Verdict::Deny)];

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
        Self::from_fields(&fields, &LoadOptions { protected_paths: protected, ..options.clone() })
    }

    /// The policy of already parsed and layered fields (see [`parse_str`] and [`layer`]).
    pub fn from_fields(
        fields: &PolicyFields,
        options: &LoadOptions,
    ) -> Result<EffectivePolicy, PolicyError> {
        if fields.schema.is_none() {
            return Err(PolicyError::new(
                ErrorKind::NoPolicy,
                None,
                "no [file_policy] rules in the config or the policy files",
            )
            .with_help("fp never runs a session without a policy; write at least `default`"));
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

    fn build(fields: &PolicyFields, options: &LoadOptions) -> Result<EffectivePolicy, PolicyError> {
        let workspace = match &options.workspace {
            Some(ws) => Some(check_workspace(ws)?),
            None => None,
        };
        let home = home_of(options.user.as_deref())?;
        let mut b = RuleBuilder {
            expansion: Expansion { workspace: workspace.as_deref(), home: &home },
            rules: Vec::new(),
        };
        // Self-protection.
        for dir in FP_DIRS.iter().map(PathBuf::from).chain(options.protected_paths.iter().cloned())
        {
            let text = path_glob(&dir)?;
            b.builtin(&text, "self-protection", Layer::SelfProtection, DENY_CHANGE)?;
            b.builtin(
                &format!("{text}/**"),
                "self-protection",
                Layer::SelfProtection,
                DENY_CHANGE,
            )?;
        }
        for dir in
            FP_SECRET_DIRS.iter().map(PathBuf::from).chain(options.secret_paths.iter().cloned())
        {
            let text = path_glob(&dir)?;
            b.builtin(&text, "self-protection secrets", Layer::SelfProtection, DENY_ALL)?;
            let sub = format!("{text}/**");
            b.builtin(&sub, "self-protection secrets", Layer::SelfProtection, DENY_ALL)?;
        }
        // Safety floor, less the operator's named exceptions.
        let exceptions = fields.floor_exceptions.clone().unwrap_or_default();
        for e in &exceptions {
            if !SAFETY_FLOOR.iter().any(|f| f.name == e.value) {
                let names: Vec<&str> = SAFETY_FLOOR.iter().map(|f| f.name).collect();
                return Err(PolicyError::new(
                    ErrorKind::BadValue,
                    Some(e.source.clone()),
                    format!("unknown safety-floor entry \"{}\" in floor_exceptions", e.value),
                )
                .with_help(format!("floor entries: {}", names.join(", "))));
            }
        }
        for entry in SAFETY_FLOOR {
            if exceptions.iter().any(|e| e.value == entry.name) {
                continue;
            }
            let verdicts = match entry.kind {
                FloorKind::Secret => DENY_ALL,
                FloorKind::ReadOnly => DENY_CHANGE,
            };
            for g in entry.globs {
                b.builtin(
                    g,
                    &format!("safety floor {}", entry.name),
                    Layer::SafetyFloor,
                    verdicts,
                )?;
            }
        }
        // The policy itself.
        let (schema, defaults) = policy_rules(fields, &mut b)?;
        // Runtime base.
        let base = fields.base.as_ref().map_or(Base::System, |b| b.value);
        if base == Base::System {
            for g in RUNTIME_READ {
                b.builtin(
                    g,
                    "runtime base",
                    Layer::RuntimeBase,
                    [Some(Verdict::Allow), None, None],
                )?;
            }
            for g in RUNTIME_READ_WRITE {
                let verdicts = [Some(Verdict::Allow), Some(Verdict::Allow), None];
                b.builtin(g, "runtime base", Layer::RuntimeBase, verdicts)?;
            }
            // The workspace directory itself (`<workspace>/**` is what is below it): tools list
            // and open their working directory.
            if workspace.is_some() {
                let read = [Some(Verdict::Allow), None, None];
                b.builtin("<workspace>", "runtime base", Layer::RuntimeBase, read)?;
            }
        }
        Self::assemble(SavedPolicy {
            schema,
            defaults,
            base,
            rules: b.rules,
            floor_exceptions: exceptions,
        })
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
        }
        let rules = self
            .saved
            .rules
            .iter()
            .map(|r| CanonicalRule { glob: &r.glob, verdicts: r.verdicts, ranks: r.ranks })
            .collect();
        let canonical = Canonical { defaults: self.saved.defaults, rules };
        let bytes = serde_json::to_vec(&canonical).unwrap_or_default();
        sha2::Sha256::digest(&bytes).into()
    }
}

/// The policy's own rules, and its default per op.
fn policy_rules(
    fields: &PolicyFields,
    b: &mut RuleBuilder<'_>,
) -> Result<(Option<Schema>, [Verdict; 3]), PolicyError> {
    use Verdict::{Allow, Deny, Prompt};
    let schema = fields.schema.as_ref().map(|s| s.value);
    match schema {
        Some(Schema::V1) | None => {
            // v1 tiers, strictest first; delete counts as write.
            let tiers: [(V1Tier, u32, [Option<Verdict>; 3]); 4] = [
                (V1Tier::Deny, 4, [Some(Deny); 3]),
                (V1Tier::Prompt, 3, [Some(Prompt); 3]),
                (V1Tier::Read, 2, [Some(Allow), Some(Deny), Some(Deny)]),
                (V1Tier::Write, 1, [Some(Allow); 3]),
            ];
            for (tier, tier_rank, verdicts) in tiers {
                for g in fields.v1_lists[tier as usize].iter().flatten() {
                    b.add(
                        &g.value,
                        g.source.clone(),
                        tier.key().to_string(),
                        Layer::Policy,
                        tier_rank,
                        verdicts,
                    )?;
                }
            }
            let defaults = match fields.default.as_ref().map_or(V1Default::Deny, |d| d.value) {
                V1Default::Deny => [Deny; 3],
                V1Default::Prompt => [Prompt; 3],
                V1Default::Read => [Allow, Deny, Deny],
                V1Default::Write => [Allow; 3],
            };
            Ok((schema, defaults))
        }
        Some(Schema::V2) => {
            let mut defaults = [Deny; 3];
            for op in Op::ALL {
                let i = op.index();
                if let Some(d) = &fields.v2_defaults[i] {
                    defaults[i] = tier_verdict(d.value);
                }
                for tier in V2Tier::ALL {
                    let mut verdicts = [None; 3];
                    verdicts[i] = Some(tier_verdict(tier));
                    let name = format!("{}.{}", op.name(), tier.key());
                    for g in fields.v2_lists[i][tier as usize].iter().flatten() {
                        b.add(
                            &g.value,
                            g.source.clone(),
                            name.clone(),
                            Layer::Policy,
                            0,
                            verdicts,
                        )?;
                    }
                }
            }
            Ok((schema, defaults))
        }
    }
}

fn tier_verdict(tier: V2Tier) -> Verdict {
    match tier {
        V2Tier::Silent => Verdict::Allow,
        V2Tier::Prompt => Verdict::Prompt,
        V2Tier::Deny => Verdict::Deny,
    }
}

/// A literal absolute path as a rule glob: normalized lexically, glob characters escaped.
fn path_glob(path: &Path) -> Result<String, PolicyError> {
    let bad = |what: &str| {
        PolicyError::new(ErrorKind::BadValue, None, format!("{}: {what}", path.display()))
    };
    let normalized = normalize_path(path.as_os_str().as_bytes())
        .ok_or_else(|| bad("expected an absolute path"))?;
    let text = std::str::from_utf8(&normalized).map_err(|_| bad("not UTF-8"))?;
    Ok(glob::escape(text))
}

fn check_workspace(ws: &Path) -> Result<PathBuf, PolicyError> {
    let err = |message: String| {
        PolicyError::new(ErrorKind::MissingWorkspace, None, message)
            .with_help("the workspace is a non-empty absolute directory path")
    };
    if ws.as_os_str().is_empty() {
        return Err(err("empty workspace".to_string()));
    }
    let normalized = normalize_path(ws.as_os_str().as_encoded_bytes())
        .ok_or_else(|| err(format!("workspace {} is not absolute", ws.display())))?;
    if normalized == b"/" {
        return Err(err("the workspace cannot be /".to_string()));
    }
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(&normalized)))
}

use std::os::unix::ffi::OsStrExt as _;

/// Lexical normalization of an absolute path: drops empty and `.` components, resolves `..`
/// (at the root it stays at the root, as POSIX does). None if the path is not absolute.
pub fn normalize_path(path: &[u8]) -> Option<Vec<u8>> {
    if path.first() != Some(&b'/') {
        return None;
    }
    let mut parts: Vec<&[u8]> = Vec::new();
    for comp in path.split(|b| *b == b'/') {
        match comp {
            b"" | b"." => {}
            b".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    let mut out = Vec::with_capacity(path.len());
    for p in &parts {
        out.push(b'/');
        out.extend_from_slice(p);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    Some(out)
}

/// The home directory of `user` (None: the calling user) from the passwd database.
fn home_of(user: Option<&str>) -> Result<PathBuf, PolicyError> {
    let found = match user {
        Some(name) => nix::unistd::User::from_name(name),
        None => nix::unistd::User::from_uid(nix::unistd::getuid()),
    };
    match found {
        Ok(Some(u)) => Ok(u.dir),
        Ok(None) | Err(_) => Err(PolicyError::new(
            ErrorKind::UnknownUser,
            None,
            format!("user {} is not in the passwd database", user.unwrap_or("(caller)")),
        )
        .with_help("name an existing user with --user NAME")),
    }
}
