//! Reading `[file_policy]` out of a config or policy file, keeping every value's position.
//!
//! The TOML is parsed into a spanned tree so unknown keys and wrong types are reported at their
//! line and column, with a "did you mean" for near misses.
use std::path::Path;

use toml::de::{DeTable, DeValue};

use super::Op;
use super::error::{ErrorKind, Lines, PolicyError, Source};

/// A value and where it was written.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Spanned<T> {
    pub value: T,
    pub source: Source,
}

/// The two policy schemas. A file uses one of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Schema {
    /// `default` + `deny_paths`/`prompt_paths`/`read_paths`/`write_paths`.
    V1,
    /// `[file_policy.defaults]` + `[file_policy.read|write|delete]` with `silent`/`prompt`/`deny`.
    V2,
}

/// Schema v1 `default`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum V1Default {
    Deny,
    Prompt,
    Read,
    Write,
}

/// Schema v1 tiers, strictest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum V1Tier {
    Deny = 0,
    Prompt = 1,
    Read = 2,
    Write = 3,
}

impl V1Tier {
    pub const ALL: [V1Tier; 4] = [V1Tier::Deny, V1Tier::Prompt, V1Tier::Read, V1Tier::Write];

    pub fn key(self) -> &'static str {
        V1_LIST_KEYS[self as usize]
    }
}

/// Schema v2 tiers, loosest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum V2Tier {
    Silent = 0,
    Prompt = 1,
    Deny = 2,
}

impl V2Tier {
    pub const ALL: [V2Tier; 3] = [V2Tier::Silent, V2Tier::Prompt, V2Tier::Deny];

    pub fn key(self) -> &'static str {
        V2_TIER_KEYS[self as usize]
    }
}

/// `base`: whether the runtime base (what any program needs to start) is granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Base {
    System,
    None,
}

const V1_LIST_KEYS: [&str; 4] = ["deny_paths", "prompt_paths", "read_paths", "write_paths"];
const V1_KEYS: [&str; 5] = ["default", "deny_paths", "prompt_paths", "read_paths", "write_paths"];
const V2_KEYS: [&str; 4] = {
    let [read, write, delete] = Op::NAMES;
    ["defaults", read, write, delete]
};
/// `[file_policy.<op>]`: the ops' names.
const V2_OP_KEYS: [&str; 3] = Op::NAMES;
const V2_TIER_KEYS: [&str; 3] = ["silent", "prompt", "deny"];
const NEUTRAL_KEYS: [&str; 5] =
    ["base", "floor_exceptions", "sockets", "block_devices", "kernel_interfaces"];

pub type GlobList = Vec<Spanned<String>>;

/// The `[file_policy]` fields of one file. `None` means "not written" (inherit when layering).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicyFields {
    /// The schema and the first key that chose it.
    pub schema: Option<Spanned<Schema>>,
    pub default: Option<Spanned<V1Default>>,
    /// Indexed by [`V1Tier`].
    pub v1_lists: [Option<GlobList>; 4],
    /// Indexed by `Op`.
    pub v2_defaults: [Option<Spanned<V2Tier>>; 3],
    /// Indexed by `Op`, then [`V2Tier`].
    pub v2_lists: [[Option<GlobList>; 3]; 3],
    pub base: Option<Spanned<Base>>,
    /// Names of safety-floor entries the operator lifts (global config only).
    pub floor_exceptions: Option<GlobList>,
    /// The unix sockets served from outside the session that it may use (`@name` or a path).
    pub sockets: Option<GlobList>,
    /// The block devices its sessions may open past the boundary's floor (path globs).
    pub block_devices: Option<GlobList>,
    /// The kernel interfaces it switches on past the boundary's floor (`perf`).
    pub kernel_interfaces: Option<GlobList>,
}

/// Which kind of file is read: the operator's config (other tables are someone else's) or a
/// per-agent policy file (nothing but `[file_policy]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    Config,
    Policy,
}

/// Reads and parses `path`.
pub fn read_file(path: &Path, kind: FileKind) -> Result<PolicyFields, PolicyError> {
    let data = crate::input::read_bounded(path, crate::input::POLICY_MAX).map_err(|e| {
        PolicyError::new(ErrorKind::Io, None, format!("cannot read {}: {e}", path.display()))
    })?;
    let text = String::from_utf8(data).map_err(|e| {
        let valid = e.utf8_error().valid_up_to();
        let text = String::from_utf8_lossy(&e.as_bytes()[..valid]).into_owned();
        let source = Source::at(path, &text, valid);
        PolicyError::new(ErrorKind::Syntax, Some(source), "the file is not UTF-8 text")
    })?;
    parse_str(path, &text, kind)
}

/// Parses the text of `path`.
pub fn parse_str(path: &Path, text: &str, kind: FileKind) -> Result<PolicyFields, PolicyError> {
    let lines = Lines::new(text);
    let p = Parser { path, lines, entries: std::cell::Cell::new(0) };
    let root = DeTable::parse(text).map_err(|e| {
        let source = e.span().map(|s| p.source(s.start));
        let message = e.message().trim_end().to_string();
        PolicyError::new(ErrorKind::Syntax, source, format!("invalid TOML: {message}"))
    })?;
    let mut fields = PolicyFields::default();
    for (key, value) in root.get_ref() {
        if key.get_ref() == "file_policy" {
            let table = p.table(value, "[file_policy]")?;
            p.file_policy(table, kind, &mut fields)?;
        } else if kind == FileKind::Policy {
            return Err(p.unknown_key(
                key,
                &["file_policy"],
                "(a policy file holds only [file_policy])",
            ));
        }
    }
    Ok(fields)
}

struct Parser<'a> {
    path: &'a Path,
    lines: Lines<'a>,
    /// The list entries read so far.
    entries: std::cell::Cell<usize>,
}

type Key<'i> = toml::Spanned<toml::de::DeString<'i>>;
type Value<'i> = toml::Spanned<DeValue<'i>>;

impl Parser<'_> {
    fn source(&self, offset: usize) -> Source {
        self.lines.source(self.path, offset)
    }

    fn at<T>(&self, value: T, span: std::ops::Range<usize>) -> Spanned<T> {
        Spanned { value, source: self.source(span.start) }
    }

    fn file_policy(
        &self,
        table: &DeTable<'_>,
        kind: FileKind,
        fields: &mut PolicyFields,
    ) -> Result<(), PolicyError> {
        for (key, value) in table {
            let name = key.get_ref().as_ref();
            if V1_KEYS.contains(&name) {
                self.choose_schema(fields, Schema::V1, key)?;
            } else if V2_KEYS.contains(&name) {
                self.choose_schema(fields, Schema::V2, key)?;
            }
            match name {
                "default" => {
                    let v = self.choice(value, &["deny", "prompt", "read", "write"])?;
                    let d = [V1Default::Deny, V1Default::Prompt, V1Default::Read, V1Default::Write];
                    fields.default = Some(self.at(d[v], value.span()));
                }
                "deny_paths" | "prompt_paths" | "read_paths" | "write_paths" => {
                    let i = V1_LIST_KEYS.iter().position(|k| *k == name).unwrap_or(0);
                    fields.v1_lists[i] = Some(self.globs(value, name)?);
                }
                "defaults" => {
                    let t = self.table(value, "[file_policy.defaults]")?;
                    for (k, v) in t {
                        let Some(op) = V2_OP_KEYS.iter().position(|o| *o == k.get_ref()) else {
                            return Err(self.unknown_key(
                                k,
                                &V2_OP_KEYS,
                                "in [file_policy.defaults]",
                            ));
                        };
                        let tier = V2Tier::ALL[self.choice(v, &V2_TIER_KEYS)?];
                        fields.v2_defaults[op] = Some(self.at(tier, v.span()));
                    }
                }
                _ if V2_OP_KEYS.contains(&name) => {
                    let op = V2_OP_KEYS.iter().position(|o| *o == name).unwrap_or(0);
                    let t = self.table(value, &format!("[file_policy.{name}]"))?;
                    for (k, v) in t {
                        let Some(tier) = V2_TIER_KEYS.iter().position(|o| *o == k.get_ref()) else {
                            let context = format!("in [file_policy.{name}]");
                            return Err(self.unknown_key(k, &V2_TIER_KEYS, &context));
                        };
                        fields.v2_lists[op][tier] =
                            Some(self.globs(v, &format!("{name}.{}", k.get_ref()))?);
                    }
                }
                "base" => {
                    let v = self.choice(value, &["system", "none"])?;
                    fields.base = Some(self.at([Base::System, Base::None][v], value.span()));
                }
                "floor_exceptions" => {
                    if kind == FileKind::Policy {
                        return Err(PolicyError::new(
                            ErrorKind::UnknownKey,
                            Some(self.source(key.span().start)),
                            "`floor_exceptions` is accepted only in the operator's config file",
                        )
                        .with_help("a per-agent policy cannot loosen the safety floor"));
                    }
                    fields.floor_exceptions = Some(self.globs(value, name)?);
                }
                "sockets" => fields.sockets = Some(self.globs(value, name)?),
                "block_devices" => fields.block_devices = Some(self.globs(value, name)?),
                "kernel_interfaces" => fields.kernel_interfaces = Some(self.globs(value, name)?),
                _ => {
                    let known: Vec<&str> =
                        V1_KEYS.iter().chain(&V2_KEYS).chain(&NEUTRAL_KEYS).copied().collect();
                    return Err(self.unknown_key(key, &known, "in [file_policy]"));
                }
            }
        }
        Ok(())
    }

    fn choose_schema(
        &self,
        fields: &mut PolicyFields,
        schema: Schema,
        key: &Key<'_>,
    ) -> Result<(), PolicyError> {
        match &fields.schema {
            None => {
                fields.schema = Some(self.at(schema, key.span()));
                Ok(())
            }
            Some(first) if first.value == schema => Ok(()),
            Some(first) => Err(PolicyError::new(
                ErrorKind::MixedSchemas,
                Some(self.source(key.span().start)),
                format!(
                    "`{}` is a schema {} key but this file already uses schema {} (from {})",
                    key.get_ref(),
                    schema_name(schema),
                    schema_name(first.value),
                    first.source
                ),
            )
            .with_help(format!(
                "use one schema per file: v1 keys are {}; v2 keys are {}",
                V1_KEYS.join(", "),
                V2_KEYS.join(", ")
            ))),
        }
    }

    fn table<'t, 'i>(
        &self,
        value: &'t Value<'i>,
        what: &str,
    ) -> Result<&'t DeTable<'i>, PolicyError> {
        value.get_ref().as_table().ok_or_else(|| self.wrong_type(value, &format!("a table {what}")))
    }

    /// The index in `choices` of a string value.
    fn choice(&self, value: &Value<'_>, choices: &[&str]) -> Result<usize, PolicyError> {
        let expected = choices.iter().map(|c| format!("\"{c}\"")).collect::<Vec<_>>().join(" | ");
        let Some(s) = value.get_ref().as_str() else {
            return Err(self.wrong_type(value, &expected));
        };
        choices.iter().position(|c| *c == s).ok_or_else(|| {
            let mut e = PolicyError::new(
                ErrorKind::BadValue,
                Some(self.source(value.span().start)),
                format!("invalid value \"{s}\", expected {expected}"),
            );
            if let Some(near) = did_you_mean(s, choices) {
                e = e.with_help(format!("did you mean \"{near}\"?"));
            }
            e
        })
    }

    fn globs(&self, value: &Value<'_>, key: &str) -> Result<GlobList, PolicyError> {
        let expected = format!("an array of glob strings for `{key}`");
        let Some(array) = value.get_ref().as_array() else {
            return Err(self.wrong_type(value, &expected));
        };
        // Counted before any glob is built: a file of too many rules is refused at once.
        self.entries.set(self.entries.get() + array.len());
        if self.entries.get() > super::MAX_RULES {
            return Err(PolicyError::new(
                ErrorKind::Limit,
                Some(self.source(value.span().start)),
                format!(
                    "more than {} entries in this file by the end of `{key}`, the limit of a \
                     session's rules",
                    super::MAX_RULES
                ),
            ));
        }
        array
            .iter()
            .map(|item| match item.get_ref().as_str() {
                Some(s) => Ok(self.at(s.to_string(), item.span())),
                None => Err(self.wrong_type(item, &format!("a glob string in `{key}`"))),
            })
            .collect()
    }

    fn wrong_type(&self, value: &Value<'_>, expected: &str) -> PolicyError {
        PolicyError::new(
            ErrorKind::WrongType,
            Some(self.source(value.span().start)),
            format!("expected {expected}, found {}", value.get_ref().type_str()),
        )
    }

    fn unknown_key(&self, key: &Key<'_>, known: &[&str], context: &str) -> PolicyError {
        let name = key.get_ref();
        let mut e = PolicyError::new(
            ErrorKind::UnknownKey,
            Some(self.source(key.span().start)),
            format!("unknown key `{name}` {context}"),
        );
        e = match did_you_mean(name, known) {
            Some(near) => e.with_help(format!("did you mean `{near}`?")),
            None => e.with_help(format!("expected one of: {}", known.join(", "))),
        };
        e
    }
}

pub(crate) fn schema_name(schema: Schema) -> &'static str {
    match schema {
        Schema::V1 => "v1",
        Schema::V2 => "v2",
    }
}

/// The closest known word, if it is close enough to be a typo.
fn did_you_mean<'k>(word: &str, known: &[&'k str]) -> Option<&'k str> {
    known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(word, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}
