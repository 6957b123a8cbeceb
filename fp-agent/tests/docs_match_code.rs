//! The docs name what the binary does: the daemon API's error codes (docs/api.md) are the
//! protocol's own, and the fields `fp policy explain --json` documents (docs/policy.md) are the
//! ones it prints.
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use fp_agent::daemon::api::ErrorCode;

fn doc(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs").join(name))
        .unwrap()
}

/// The backquoted names in `text`.
fn quoted(text: &str) -> BTreeSet<String> {
    text.split('`').skip(1).step_by(2).map(str::to_owned).collect()
}

#[test]
fn the_api_error_codes_are_the_protocols() {
    use ErrorCode::*;
    let all = [
        InvalidJson,
        LineTooLong,
        UnsupportedVersion,
        BadRequest,
        PermissionDenied,
        NotFound,
        InvalidPolicy,
        Unavailable,
        Internal,
        AlreadyDecided,
    ];
    // A new code fails to compile here until it is listed above (and then documented).
    let _every_code_listed = |code: ErrorCode| match code {
        InvalidJson | LineTooLong | UnsupportedVersion | BadRequest | PermissionDenied
        | NotFound | InvalidPolicy | Unavailable | Internal | AlreadyDecided => (),
    };
    let api = doc("api.md");
    let table = api.split("| code | meaning |").nth(1).expect("docs/api.md has the error table");
    let documented: BTreeSet<String> = table
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| quoted(l.split('|').nth(1)?).into_iter().next())
        .collect();
    let codes: BTreeSet<String> = all.iter().map(|c| c.as_str().to_owned()).collect();
    assert_eq!(documented, codes);
}

#[test]
fn explain_prints_the_documented_json_fields() {
    let policy = doc("policy.md");
    let from =
        policy.find("With `--json`, one\n  object per path and line:").expect("explain's fields");
    let sentence = &policy[from..from + policy[from..].find(".\n").unwrap()];
    // The field names, not the values some of them list in parentheses.
    let mut depth = 0;
    let outside: String = sentence
        .chars()
        .filter(|c| {
            depth += (*c == '(') as i32 - (*c == ')') as i32;
            depth == 0 && *c != ')'
        })
        .collect();
    let mut fields = quoted(&outside);
    fields.remove("--json");
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/coding-agent.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_fp"))
        .args(["policy", "explain", "--policy"])
        .arg(&examples)
        .args(["--workspace", "/tmp/ws", "--op", "read", "--json", "/tmp/ws/a", "/opt/x"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let printed: BTreeSet<String> = v.as_object().unwrap().keys().cloned().collect();
        assert_eq!(printed, fields, "{line}");
    }
}
