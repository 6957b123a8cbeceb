//! Shipped profiles: the rules an agent CLI needs to work (its install, its state and config
//! files, its temp files), compiled in and layered under the policy's own rules
//! (docs/policy.md, "Profiles"). Each is schema v2 lists of one or more files in `profiles/`.
use std::path::PathBuf;

use super::error::{ErrorKind, PolicyError};
use super::parse::{FileKind, PolicyFields, parse_str};

const CODING_AGENT: (&str, &str) =
    ("coding-agent", include_str!("../../../profiles/coding-agent.toml"));
const CLAUDE_CODE: (&str, &str) =
    ("claude-code", include_str!("../../../profiles/claude-code.toml"));
const CODEX: (&str, &str) = ("codex", include_str!("../../../profiles/codex.toml"));
const GEMINI_CLI: (&str, &str) = ("gemini-cli", include_str!("../../../profiles/gemini-cli.toml"));

/// Each profile by name, and its files: an agent CLI's profile is the generic coding agent's
/// plus the CLI's own.
const PROFILES: &[(&str, &[(&str, &str)])] = &[
    ("claude-code", &[CODING_AGENT, CLAUDE_CODE]),
    ("codex", &[CODING_AGENT, CODEX]),
    ("coding-agent", &[CODING_AGENT]),
    ("gemini-cli", &[CODING_AGENT, GEMINI_CLI]),
];

/// The names of the shipped profiles.
pub fn names() -> impl Iterator<Item = &'static str> {
    PROFILES.iter().map(|(name, _)| *name)
}

/// The files of profile `name`, each parsed (its rules' sources read `<profile FILE>:LINE:COL`);
/// an unknown name is an error that lists the profiles.
pub fn files(name: &str) -> Result<Vec<PolicyFields>, PolicyError> {
    let Some((_, files)) = PROFILES.iter().find(|(n, _)| *n == name) else {
        return Err(PolicyError::new(ErrorKind::BadValue, None, format!("no profile \"{name}\""))
            .with_help(format!("the profiles are {}", names().collect::<Vec<_>>().join(", "))));
    };
    files
        .iter()
        .map(|(file, text)| {
            parse_str(&PathBuf::from(format!("<profile {file}>")), text, FileKind::Policy)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Schema;

    /// A profile only adds per-op rules: its defaults, base and boundary entries would change
    /// what the policy it is layered under says beyond the paths it names.
    #[test]
    fn profiles_are_rule_lists_of_schema_v2() {
        for name in names() {
            for fields in files(name).unwrap() {
                assert_eq!(fields.schema.as_ref().map(|s| s.value), Some(Schema::V2), "{name}");
                assert!(fields.v2_defaults.iter().all(Option::is_none), "{name}: defaults");
                assert!(fields.base.is_none() && fields.sockets.is_none(), "{name}");
                assert!(fields.block_devices.is_none() && fields.kernel_interfaces.is_none());
            }
        }
    }

    #[test]
    fn an_unknown_profile_lists_the_profiles() {
        let e = files("claude").unwrap_err();
        assert_eq!(e.kind, ErrorKind::BadValue);
        assert!(e.to_string().contains("claude-code, codex, coding-agent, gemini-cli"), "{e}");
    }
}
