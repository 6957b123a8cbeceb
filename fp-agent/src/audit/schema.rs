//! What a record line must look like as JSON, checked without trusting serde's leniency
//! (docs/audit-format.md, "Record lines" and "Record kinds"): every object of the line has each
//! member name once, at any depth; integers are JSON numbers without fraction or exponent in the
//! member's range; every member a kind defines is present with its type.
use std::borrow::Cow;
use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// A parsed JSON value that keeps member order and borrows strings where it can.
#[derive(Debug)]
pub enum Json<'a> {
    Null,
    Bool(bool),
    /// A non-negative integer (no fraction, no exponent) that fits 64 bits.
    UInt(u64),
    /// A negative integer that fits 64 bits.
    Int(i64),
    /// Any other number (fraction, exponent, or out of the 64-bit range).
    Float,
    Str(Cow<'a, str>),
    Array(Vec<Json<'a>>),
    Object(Vec<(Cow<'a, str>, Json<'a>)>),
}

impl<'a> Json<'a> {
    pub fn get(&self, name: &str) -> Option<&Json<'a>> {
        match self {
            Json::Object(members) => members.iter().find(|(k, _)| k == name).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Json::UInt(n) => Some(*n),
            _ => None,
        }
    }
}

struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

impl<'de> Deserialize<'de> for Json<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct JsonVisitor;
        impl<'de> Visitor<'de> for JsonVisitor {
            type Value = Json<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Json::Null)
            }
            fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
                Ok(Json::Bool(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
                Ok(Json::UInt(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
                Ok(if v >= 0 { Json::UInt(v as u64) } else { Json::Int(v) })
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Json::Float)
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Json::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Json::Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Json::Str(Cow::Owned(v)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Json::Array(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members: Vec<(Cow<'de, str>, Json<'de>)> = Vec::new();
                while let Some(Key(key)) = map.next_key()? {
                    if members.iter().any(|(k, _)| *k == key) {
                        return Err(de::Error::custom(format!("duplicate member {key:?}")));
                    }
                    let value = map.next_value()?;
                    members.push((key, value));
                }
                Ok(Json::Object(members))
            }
        }
        deserializer.deserialize_any(JsonVisitor)
    }
}

/// The type of a record member.
#[derive(Clone, Copy)]
enum Type {
    U64,
    U32,
    I32,
    Str,
    /// A string, or `{"b64": <canonical padded standard base64>}` for bytes that are not UTF-8.
    Path,
    StrArray,
    Bool,
    /// 64 lowercase hex digits.
    Hex64,
    /// 32 lowercase hex digits.
    LogId,
    /// `<name>+<8 lowercase hex>`.
    KeyId,
    OneOf(&'static [&'static str]),
}

const OPS: &[&str] = &super::Op::NAMES;
const DECISIONS: &[&str] =
    &["allow", "deny", "prompt-approved", "prompt-denied", "prompt-timed-out"];
const ORPHAN_OUTCOMES: &[&str] = &super::OrphanOutcome::NAMES;
const BACKENDS: &[&str] = &["bpf_lsm", "fmod_ret"];

/// Members every record has (besides `hash`, checked by the chain).
const COMMON: &[(&str, Type)] = &[
    ("v", Type::U64),
    ("seq", Type::U64),
    ("kind", Type::Str),
    ("time", Type::Str),
    ("mono_ns", Type::U64),
    ("boot_id", Type::Str),
    ("host", Type::Str),
    ("prev", Type::Hex64),
    ("hash", Type::Hex64),
];

/// `(name, type, required)` of the members a kind adds.
fn kind_members(kind: &str) -> Option<&'static [(&'static str, Type, bool)]> {
    use Type::*;
    Some(match kind {
        "decision" => &[
            ("session", Str, true),
            ("agent", Str, true),
            ("cgroup", U64, true),
            ("pid", U32, true),
            ("tgid", U32, true),
            ("uid", U32, true),
            ("gid", U32, true),
            ("comm", Str, true),
            ("exe", Path, true),
            ("op", OneOf(OPS), true),
            ("hook", Str, true),
            ("path", Path, true),
            ("target_path", Path, false),
            ("directory", Bool, false),
            ("target_exists", Bool, false),
            ("target_pid", U32, false),
            ("target_cgroup", U64, false),
            ("interface", Str, false),
            ("device", Str, false),
            ("dev", U64, true),
            ("ino", U64, true),
            ("decision", OneOf(DECISIONS), true),
            ("rule", Str, true),
            ("rule_source", Str, true),
            ("policy_hash", Str, true),
            ("approver", Str, false),
            ("reason", Str, false),
        ],
        "session-start" => &[
            ("session", Str, true),
            ("agent", Str, true),
            ("cgroup", U64, true),
            ("pid", U32, true),
            ("uid", U32, true),
            ("policy_hash", Str, true),
            ("floor_exceptions", StrArray, true),
            ("backend", OneOf(BACKENDS), false),
            ("command", StrArray, true),
        ],
        "session-end" => &[
            ("session", Str, true),
            ("agent", Str, true),
            ("exit_code", I32, false),
            ("reason", Str, true),
        ],
        "session-adopt" => &[
            ("session", Str, true),
            ("agent", Str, true),
            ("cgroup", U64, true),
            ("pids", U32, true),
            ("policy_hash", Str, true),
        ],
        "orphan-cleanup" => &[
            ("session", Str, true),
            ("pid", U32, true),
            ("cgroup", U64, false),
            ("pids", U32, true),
            ("outcome", OneOf(ORPHAN_OUTCOMES), true),
            ("reason", Str, false),
        ],
        "session-freeze" => &[
            ("sessions", StrArray, true),
            ("state", OneOf(&["frozen", "thawed"]), true),
            ("reason", Str, true),
        ],
        "enforcement" => &[
            ("backend", OneOf(BACKENDS), true),
            ("state", OneOf(&["off", "on"]), true),
            ("reason", Str, true),
        ],
        "policy-reload" => &[
            ("session", Str, false),
            ("old_policy_hash", Str, true),
            ("policy_hash", Str, true),
            ("source", Str, true),
        ],
        "loss" => &[("count", U64, true), ("at", Str, true)],
        "log-open" => &[
            ("log_id", LogId, true),
            ("key_id", KeyId, true),
            ("segment", U64, true),
            ("writer", Str, true),
        ],
        "daemon-restart" => &[("key_id", KeyId, true), ("writer", Str, true)],
        "recovery" => {
            &[("torn_file", Str, true), ("torn_size", U64, true), ("torn_sha256", Hex64, true)]
        }
        "checkpoint" => &[("size", U64, true), ("root", Hex64, true), ("note", Str, true)],
        _ => return None,
    })
}

fn lower_hex(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Whether `text` is canonical padded standard base64 (decoding and re-encoding gives it back).
pub fn canonical_base64(text: &str) -> Option<Vec<u8>> {
    let bytes = BASE64.decode(text).ok()?;
    (BASE64.encode(&bytes) == text).then_some(bytes)
}

/// Whether `text` is a key id `<name>+<8 lowercase hex>` with a valid key name.
pub fn is_key_id(text: &str) -> bool {
    text.split_once('+').is_some_and(|(name, hash)| valid_key_name(name) && lower_hex(hash, 8))
}

/// Key names: non-empty printable ASCII without `+` or spaces.
pub fn valid_key_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic() && b != b'+')
}

fn has_type(value: &Json, ty: Type) -> bool {
    match ty {
        Type::U64 => matches!(value, Json::UInt(_)),
        Type::U32 => matches!(value, Json::UInt(n) if *n <= u32::MAX as u64),
        Type::I32 => match value {
            Json::UInt(n) => *n <= i32::MAX as u64,
            Json::Int(n) => *n >= i32::MIN as i64,
            _ => false,
        },
        Type::Str => matches!(value, Json::Str(_)),
        Type::Path => match value {
            Json::Str(_) => true,
            Json::Object(members) => matches!(
                members.as_slice(),
                [(k, Json::Str(b64))] if k == "b64" && canonical_base64(b64).is_some()
            ),
            _ => false,
        },
        Type::StrArray => {
            matches!(value, Json::Array(items) if items.iter().all(|i| matches!(i, Json::Str(_))))
        }
        Type::Bool => matches!(value, Json::Bool(_)),
        Type::Hex64 => value.as_str().is_some_and(|s| lower_hex(s, 64)),
        Type::LogId => value.as_str().is_some_and(|s| lower_hex(s, 32)),
        Type::KeyId => value.as_str().is_some_and(is_key_id),
        Type::OneOf(values) => value.as_str().is_some_and(|s| values.contains(&s)),
    }
}

/// The common members of a record, checked.
pub struct Common<'a> {
    pub v: u64,
    pub seq: u64,
    pub kind: &'a str,
    pub time: &'a str,
    pub prev: &'a str,
}

/// Parses a whole line (without `\n`) strictly and checks the members every record has.
pub fn parse_line(line: &[u8]) -> Result<Json<'_>, String> {
    let value: Json = serde_json::from_slice(line).map_err(|e| e.to_string())?;
    if !matches!(value, Json::Object(_)) {
        return Err("not a JSON object".into());
    }
    Ok(value)
}

/// Checks the common members of a parsed line.
pub fn common<'j>(value: &'j Json) -> Result<Common<'j>, String> {
    for (name, ty) in COMMON {
        match value.get(name) {
            None => return Err(format!("no member {name:?}")),
            Some(v) if !has_type(v, *ty) => {
                return Err(format!("member {name:?} has a wrong type"));
            }
            Some(_) => {}
        }
    }
    let str_of = |name| value.get(name).and_then(Json::as_str).expect("checked");
    let u64_of = |name| value.get(name).and_then(Json::as_u64).expect("checked");
    Ok(Common {
        v: u64_of("v"),
        seq: u64_of("seq"),
        kind: str_of("kind"),
        time: str_of("time"),
        prev: str_of("prev"),
    })
}

/// Checks the members of the record's kind. `Ok(false)`: a kind this format does not define.
pub fn kind(value: &Json, kind: &str) -> Result<bool, String> {
    let Some(members) = kind_members(kind) else { return Ok(false) };
    for (name, ty, required) in members {
        match value.get(name) {
            None if *required => return Err(format!("{kind} record without {name:?}")),
            None => {}
            Some(v) if !has_type(v, *ty) => {
                return Err(format!("{kind} record: member {name:?} has a wrong type"));
            }
            Some(_) => {}
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_at_any_depth_and_non_integers_are_rejected() {
        assert!(parse_line(br#"{"a":1,"a":2}"#).is_err());
        assert!(parse_line(br#"{"p":{"b64":"AA==","b64":"AA=="}}"#).is_err());
        let value = parse_line(br#"{"n":1.0,"m":-3,"big":18446744073709551616}"#).unwrap();
        assert!(matches!(value.get("n"), Some(Json::Float)));
        assert!(matches!(value.get("m"), Some(Json::Int(-3))));
        assert!(matches!(value.get("big"), Some(Json::Float)));
        assert!(parse_line(b"[1]").is_err());
    }

    #[test]
    fn paths_need_canonical_base64() {
        assert!(has_type(&parse_line(br#"{"b64":"/w=="}"#).unwrap(), Type::Path));
        assert!(!has_type(&parse_line(br#"{"b64":"/x=="}"#).unwrap(), Type::Path));
        assert!(!has_type(&parse_line(br#"{"b64":"/w"}"#).unwrap(), Type::Path));
        assert!(!has_type(&parse_line(br#"{"b64":"/w==","x":1}"#).unwrap(), Type::Path));
    }

    /// The record fp writes for a dead `fp run`'s leftovers has the members its kind defines.
    #[test]
    fn orphan_cleanup_records_match_their_kind() {
        use super::super::{Body, OrphanCleanup, OrphanOutcome};
        for (cgroup, outcome, reason) in [
            (Some(7), OrphanOutcome::Removed, None),
            (None, OrphanOutcome::Kept, Some("its pins could not be read".to_owned())),
        ] {
            let body = Body::OrphanCleanup(OrphanCleanup {
                session: "run-812-4711".into(),
                pid: 812,
                cgroup,
                pids: 0,
                outcome,
                reason,
            });
            let json = serde_json::to_vec(&body).unwrap();
            let value = parse_line(&json).unwrap();
            assert_eq!(
                kind(&value, "orphan-cleanup"),
                Ok(true),
                "{}",
                String::from_utf8_lossy(&json)
            );
            assert_eq!(value.get("outcome").and_then(Json::as_str), Some(outcome.as_str()));
        }
    }
}
