//! The struct offsets fp resolves from the running kernel's BTF equal what bpftool reports for the
//! same kernel (an independent reading of the same BTF).
use std::collections::HashMap;

use fp_tests::{fp, place, stderr};

struct Type {
    kind: String,
    name: String,
    /// TYPEDEF/CONST/VOLATILE/...: the referenced type.
    type_id: u32,
    members: Vec<(String, u32, u32)>,
}

/// Parses `bpftool btf dump file /sys/kernel/btf/vmlinux format raw`.
fn bpftool_types() -> HashMap<u32, Type> {
    let out = std::process::Command::new("bpftool")
        .args(["btf", "dump", "file", "/sys/kernel/btf/vmlinux", "format", "raw"])
        .output()
        .expect("bpftool");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut types = HashMap::new();
    let mut current: Option<u32> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix('[') {
            // [12] STRUCT 'file' size=232 vlen=20   or   [5] TYPEDEF 'u32' type_id=6
            let (id, rest) = rest.split_once("] ").unwrap();
            let mut words = rest.split(' ');
            let kind = words.next().unwrap().to_owned();
            let name = words.next().unwrap_or("").trim_matches('\'').to_owned();
            let type_id = field(rest, "type_id=").unwrap_or(0);
            let id: u32 = id.parse().unwrap();
            types.insert(id, Type { kind, name, type_id, members: Vec::new() });
            current = Some(id);
        } else if let (Some(id), Some(member)) = (current, line.strip_prefix('\t')) {
            // 'f_path' type_id=123 bits_offset=512
            if let (Some(t), Some(bits)) =
                (field(member, "type_id="), field(member, "bits_offset="))
            {
                let name = member.split('\'').nth(1).unwrap_or("").to_owned();
                types.get_mut(&id).unwrap().members.push((name, t, bits));
            }
        }
    }
    types
}

fn field(text: &str, key: &str) -> Option<u32> {
    let at = text.find(key)? + key.len();
    text[at..].split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// Bit offset of `name` in type `id`, looking into anonymous members.
fn find(types: &HashMap<u32, Type>, id: u32, name: &str) -> Option<u32> {
    let t = &types[&id];
    for (m, ty, bits) in &t.members {
        if m == name {
            return Some(*bits);
        }
        if m == "(anon)" {
            let mut inner = *ty;
            while !matches!(types[&inner].kind.as_str(), "STRUCT" | "UNION") {
                inner = types[&inner].type_id;
            }
            if let Some(b) = find(types, inner, name) {
                return Some(bits + b);
            }
        }
    }
    None
}

#[test]
fn resolved_offsets_match_bpftool() {
    place();
    let out = fp().args(["kernel", "offsets", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let types = bpftool_types();
    let offsets = report["offsets"].as_array().unwrap();
    assert!(offsets.len() >= 15, "{report}");
    for o in offsets {
        let (strukt, member) = (o["strukt"].as_str().unwrap(), o["field"].as_str().unwrap());
        let Some(offset) = o["offset"].as_u64() else {
            // An optional field the kernel lacks (fp_common::kernel::OPTIONAL_FIELDS).
            let id = types.iter().find(|(_, t)| t.kind == "STRUCT" && t.name == strukt);
            assert!(
                id.is_none_or(|(id, _)| find(&types, *id, member).is_none()),
                "fp says {strukt}.{member} is absent, bpftool has it"
            );
            continue;
        };
        let id = types
            .iter()
            .find(|(_, t)| t.kind == "STRUCT" && t.name == strukt && !t.members.is_empty())
            .map(|(id, _)| *id)
            .unwrap_or_else(|| panic!("bpftool has no struct {strukt}"));
        let bits =
            find(&types, id, member).unwrap_or_else(|| panic!("bpftool: no {strukt}.{member}"));
        assert_eq!(offset, u64::from(bits / 8), "{strukt}.{member} on {}", report["kernel"]);
    }
}
