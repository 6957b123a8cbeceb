//! Test logs for the rules of docs/audit-format.md, one (or a few) per rule, each with the exit
//! class and problem location the document prescribes. Both `fp audit verify --json` and the
//! independent implementation (tests/audit-independent/fpaudit.py) must agree with every one.
//!
//! The logs are written by fp's own writer and key, then edited byte for byte (and resealed or
//! re-signed where a vector needs an otherwise valid log). Set `FP_AUDIT_VECTORS_OUT=DIR` to keep
//! them, with `manifest.json`, in DIR.
#[path = "audit_support.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::Signer as _;
use fp_agent::audit::checkpoint::{self, SignerKey};
use fp_agent::audit::{Event, LogWriter, PolicyReload, SessionAdopt, SessionEnd, chain, segments};
use serde_json::{Value, json};
use support::*;

/// A log as files of lines (each with its `\n`, unless torn).
#[derive(Clone)]
struct Log {
    files: Vec<(String, Vec<Vec<u8>>)>,
}

struct Keys {
    signer: SignerKey,
    name: String,
    hash: [u8; 4],
    seed: [u8; 32],
}

impl Keys {
    /// A key whose public and private base64 both contain '+' (split on the first two only), and
    /// whose key hash has a hex letter (else its upper-case form is the same key line).
    fn new() -> Self {
        loop {
            let signer = SignerKey::generate("fp-vectors").unwrap();
            let private = signer.encode();
            let public = signer.verifier().encode();
            let b64 = |s: &str| s.splitn(3, '+').nth(2).unwrap().to_owned();
            let private_b64 = private.strip_prefix("PRIVATE+KEY+").unwrap().splitn(3, '+').nth(2);
            let hash_has_letter =
                public.split('+').nth(1).unwrap().bytes().any(|c| c.is_ascii_alphabetic());
            if !(b64(&public).contains('+')
                && private_b64.unwrap().contains('+')
                && hash_has_letter)
            {
                continue;
            }
            let seed: [u8; 32] =
                BASE64.decode(private_b64.unwrap()).unwrap()[1..].try_into().unwrap();
            let id = signer.verifier().key_id();
            let mut hash = [0; 4];
            hex::decode_to_slice(id.rsplit_once('+').unwrap().1, &mut hash).unwrap();
            return Keys { name: signer.name.clone(), signer, hash, seed };
        }
    }

    /// Signs any note body (C2SP signed note) with this key.
    fn sign(&self, body: &str) -> String {
        let key = ed25519_dalek::SigningKey::from_bytes(&self.seed);
        let mut blob = self.hash.to_vec();
        blob.extend_from_slice(&key.sign(body.as_bytes()).to_bytes());
        format!("\u{2014} {} {}\n", self.name, BASE64.encode(blob))
    }

    fn note(&self, body: &str) -> String {
        format!("{body}\n{}", self.sign(body))
    }
}

fn body(origin: &str, size: u64, root: &[u8; 32]) -> String {
    format!("{origin}\n{size}\n{}\n", BASE64.encode(root))
}

impl Log {
    fn read(active: &Path) -> Self {
        let files = segments::expand(&[active.to_path_buf()])
            .unwrap()
            .iter()
            .map(|p| (p.file_name().unwrap().to_str().unwrap().to_owned(), lines(p)))
            .collect();
        Log { files }
    }

    /// (file index, line index) of the n-th line of the whole log.
    fn locate(&self, n: usize) -> (usize, usize) {
        let mut n = n;
        for (f, (_, lines)) in self.files.iter().enumerate() {
            if n < lines.len() {
                return (f, n);
            }
            n -= lines.len();
        }
        panic!("no line {n}")
    }

    fn line(&self, n: usize) -> &Vec<u8> {
        let (f, l) = self.locate(n);
        &self.files[f].1[l]
    }

    fn line_mut(&mut self, n: usize) -> &mut Vec<u8> {
        let (f, l) = self.locate(n);
        &mut self.files[f].1[l]
    }

    fn len(&self) -> usize {
        self.files.iter().map(|(_, l)| l.len()).sum()
    }

    fn value(&self, n: usize) -> Value {
        serde_json::from_slice(self.line(n)).unwrap()
    }

    fn log_id(&self) -> String {
        self.value(0)["log_id"].as_str().unwrap().to_owned()
    }

    /// Replaces line `n`'s sealed part by `edit(S)` and reseals it (its prev unchanged).
    fn raw(&mut self, n: usize, edit: impl FnOnce(&str) -> String) -> &mut Self {
        let line = self.line(n).clone();
        let (sealed, _) = chain::split_line(line.strip_suffix(b"\n").unwrap()).unwrap();
        let mut out = edit(std::str::from_utf8(sealed).unwrap()).into_bytes();
        chain::seal_in_place(&mut out, 0);
        *self.line_mut(n) = out;
        self
    }

    /// Edits line `n`'s JSON and reseals it (its prev unchanged).
    fn edit(&mut self, n: usize, edit: impl FnOnce(&mut Value)) -> &mut Self {
        let line = self.line(n).clone();
        let prev: [u8; 32] = hex_hash(self.value(n)["prev"].as_str().unwrap());
        *self.line_mut(n) = reseal(&line, &prev, edit);
        self
    }

    /// Relinks every line from `from` on (and renumbers seqs when `renumber`), recomputing and
    /// re-signing checkpoints, so the log is valid again after an edit.
    fn rebuild(&mut self, from: usize, keys: &Keys, renumber: bool) -> &mut Self {
        let origin = checkpoint::origin(&self.log_id());
        for n in from..self.len() {
            let prev = if n == 0 { [0; 32] } else { line_hash(self.line(n - 1)) };
            let prev_seq = (n > 0).then(|| self.value(n - 1)["seq"].as_u64().unwrap());
            let line = self.line(n).clone();
            *self.line_mut(n) = reseal(&line, &prev, |v| {
                if renumber {
                    v["seq"] = prev_seq.map_or(0, |s| s + 1).into();
                }
                if v["kind"] == "checkpoint" {
                    let seq = v["seq"].as_u64().unwrap();
                    v["size"] = seq.into();
                    v["root"] = hex::encode(prev).into();
                    v["note"] = keys.note(&body(&origin, seq, &prev)).into();
                }
            });
        }
        self
    }

    fn offset(&self, file: &str, line: u64) -> u64 {
        let (_, lines) = self.files.iter().find(|(name, _)| name == file).unwrap();
        lines[..line as usize - 1].iter().map(|l| l.len() as u64).sum()
    }
}

fn hex_hash(text: &str) -> [u8; 32] {
    let mut hash = [0; 32];
    hex::decode_to_slice(text, &mut hash).unwrap();
    hash
}

struct Vector {
    name: &'static str,
    /// What the rule is, for the manifest.
    rule: &'static str,
    log: Log,
    /// Paths to verify (default: `audit.log`).
    paths: Vec<String>,
    /// Contents of the key file given as `--pubkey` (default: the vectors' key; None: none).
    pubkey: Option<String>,
    trusted: Option<String>,
    exit: u8,
    /// (class, file, 1-based line, seq).
    problem: Option<(&'static str, String, u64, u64)>,
}

fn vector(name: &'static str, rule: &'static str, log: &Log, exit: u8) -> Vector {
    Vector {
        name,
        rule,
        log: log.clone(),
        paths: vec!["audit.log".into()],
        pubkey: Some(String::new()),
        trusted: None,
        exit,
        problem: None,
    }
}

impl Vector {
    fn at(mut self, class: &'static str, file: &str, line: u64, seq: u64) -> Self {
        self.problem = Some((class, file.to_owned(), line, seq));
        self
    }
    fn with(mut self, edit: impl FnOnce(&mut Log)) -> Self {
        edit(&mut self.log);
        self
    }
    fn trusted(mut self, note: String) -> Self {
        self.trusted = Some(note);
        self
    }
    fn paths(mut self, paths: &[&str]) -> Self {
        self.paths = paths.iter().map(|p| p.to_string()).collect();
        self
    }
    fn pubkey(mut self, key: Option<String>) -> Self {
        self.pubkey = key;
        self
    }
}

/// One segment: log-open, session start, 3 decisions, checkpoint (seq 5), adopt, end, reload,
/// a decision, final checkpoint (seq 10). 11 lines.
fn single(dir: &Path, keys: &Keys) -> Log {
    let path = dir.join("single/audit.log");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut log = LogWriter::open(config(&path, &keys.signer)).unwrap();
    log.append(session_start());
    for i in 0..3 {
        log.append(decision(i));
    }
    log.checkpoint().unwrap();
    log.append(Event::SessionAdopt(SessionAdopt {
        session: "s0".into(),
        agent: "coder".into(),
        cgroup: 77,
        pids: 3,
        policy_hash: "sha256:ab".into(),
    }));
    log.append(Event::SessionEnd(SessionEnd {
        session: "s0".into(),
        agent: "coder".into(),
        exit_code: Some(-9),
        reason: "killed".into(),
    }));
    log.append(Event::PolicyReload(PolicyReload {
        session: None,
        old_policy_hash: "sha256:ab".into(),
        policy_hash: "sha256:cd".into(),
        source: "policy.toml".into(),
    }));
    log.append(decision(3));
    log.flush(true).unwrap();
    log.close().unwrap();
    Log::read(&path)
}

/// Three segments: [open, d, d, d, cp] [open, d, d, d, cp] [open, d, d, d, cp]; seqs 0..=14.
fn rotated(dir: &Path, keys: &Keys) -> Log {
    let path = dir.join("rotated/audit.log");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut log = LogWriter::open(config(&path, &keys.signer)).unwrap();
    for i in 0..9 {
        log.append(decision(i));
        if i % 3 == 2 && i < 8 {
            log.flush(true).unwrap();
            log.rotate().unwrap();
        }
    }
    log.flush(true).unwrap();
    log.close().unwrap();
    let log = Log::read(&path);
    assert_eq!(log.files.len(), 3);
    log
}

const SEG0: &str = "audit.log.00000000000000000000";
const SEG1: &str = "audit.log.00000000000000000005";
const ACTIVE: &str = "audit.log";

fn vectors(dir: &Path, keys: &Keys) -> Vec<Vector> {
    let s = single(dir, keys);
    let r = rotated(dir, keys);
    let last = s.len() - 1; // 10: the final checkpoint
    let origin = checkpoint::origin(&s.log_id());
    let final_note = s.value(last)["note"].as_str().unwrap().to_owned();
    let syslog = format!("fp-audit checkpoint {}", final_note.replace('\n', " | "));
    let cp_body = |log: &Log, n: usize| {
        let v = log.value(n);
        let origin = checkpoint::origin(&log.log_id());
        body(&origin, v["size"].as_u64().unwrap(), &hex_hash(v["root"].as_str().unwrap()))
    };
    let with_note = |n: usize, note: String| {
        move |log: &mut Log| {
            log.edit(n, |v| v["note"] = note.into());
        }
    };
    let good_body = cp_body(&s, last);
    let other_key = SignerKey::generate("fp-vectors").unwrap();
    vec![
        vector("intact", "an intact log, rich in kinds, key base64 holding '+'", &s, 0),
        vector("intact-rotated", "three segments, given as the active path", &r, 0),
        vector("explicit-order", "explicit segment files in any order", &r, 0)
            .paths(&[ACTIVE, SEG1, SEG0]),
        vector("no-pubkey", "no key: signatures unchecked, a warning", &s, 3).pubkey(None),
        vector("domain-without-newline", "H covers the 18 bytes and a newline", &s, 1)
            .with(|l| {
                let line = l.line(last).clone();
                let (sealed, _) = chain::split_line(line.strip_suffix(b"\n").unwrap()).unwrap();
                use sha2::Digest as _;
                let mut h = sha2::Sha256::new();
                h.update(b"fp-audit-v1 record");
                h.update(sealed);
                let mut out = sealed.to_vec();
                out.extend_from_slice(b",\"hash\":\"");
                out.extend_from_slice(hex::encode(h.finalize()).as_bytes());
                out.extend_from_slice(b"\"}\n");
                *l.line_mut(last) = out;
            })
            .at("modified-record", ACTIVE, 11, 10),
        vector("uppercase-hash", "the hash suffix is lowercase", &s, 1)
            .with(|l| {
                let line = l.line(last).clone();
                let n = line.len();
                let mut upper = line.clone();
                upper[n - 67..n - 3].make_ascii_uppercase();
                *l.line_mut(last) = upper;
            })
            .at("malformed-line", ACTIVE, 11, 10),
        vector("pubkey-wrong-hash", "the key hash must match the key", &s, 2)
            .pubkey(Some({
                let public = keys.signer.verifier().encode();
                let (name, rest) = public.split_once('+').unwrap();
                format!("{name}+00000000{}\n", &rest[8..])
            })),
        vector("pubkey-uppercase-hash", "the key hash is lowercase hex", &s, 2).pubkey(Some({
            let public = keys.signer.verifier().encode();
            let (name, rest) = public.split_once('+').unwrap();
            format!("{name}+{}{}\n", rest[..8].to_ascii_uppercase(), &rest[8..])
        })),
        vector("whitespace-in-s", "JSON whitespace inside S is allowed", &s, 0)
            .with(|l| {
                l.raw(last, |s| s.replacen("{\"v\":1,", "{ \"v\" : 1 ,", 1));
                l.raw(last, |s| s.replacen("\"seq\":", " \"seq\" :\t", 1));
            }),
        vector("duplicate-member", "a member name appears once", &s, 1)
            .with(|l| {
                l.raw(3, |s| s.replacen("\"comm\":\"bash\",", "\"comm\":\"bash\",\"comm\":\"sh\",", 1));
            })
            .at("malformed-line", ACTIVE, 4, 3),
        vector("duplicate-nested", "... also inside nested objects", &s, 1)
            .with(|l| {
                l.edit(3, |v| v["path"] = json!({"b64": "L3c="}));
                l.raw(3, |s| s.replacen("{\"b64\":\"L3c=\"}", "{\"b64\":\"L3c=\",\"b64\":\"L3c=\"}", 1));
            })
            .at("malformed-line", ACTIVE, 4, 3),
        vector("b64-path", "a path as canonical base64", &s, 0)
            .with(|l| {
                l.edit(3, |v| v["path"] = json!({"b64": "L3RtcC///m9kZA=="}));
                l.rebuild(4, keys, false);
            }),
        vector("b64-path-non-canonical", "base64 must be canonical", &s, 1)
            .with(|l| {
                l.edit(3, |v| v["path"] = json!({"b64": "L3RtcC///m9kZB=="}));
            })
            .at("malformed-line", ACTIVE, 4, 3),
        vector("float-integer", "1.0 is not an integer", &s, 1)
            .with(|l| {
                l.raw(3, |s| s.replacen("\"dev\":2049", "\"dev\":2049.0", 1));
            })
            .at("malformed-line", ACTIVE, 4, 3),
        vector("u32-out-of-range", "pid is u32", &s, 1)
            .with(|l| {
                l.edit(3, |v| v["pid"] = 4294967296u64.into());
            })
            .at("malformed-line", ACTIVE, 4, 3),
        vector("negative-u64", "counts are not negative", &s, 1)
            .with(|l| {
                l.edit(3, |v| v["ino"] = (-1).into());
            })
            .at("malformed-line", ACTIVE, 4, 3),
        vector("lone-surrogate", "strings are Unicode: no unpaired surrogate escape", &s, 1)
            .with(|l| {
                l.raw(3, |s| s.replacen("\"comm\":\"bash\"", "\"comm\":\"\\ud800\"", 1));
            })
            .at("malformed-line", ACTIVE, 4, 3),
        vector("escaped-surrogate-pair", "a valid escaped pair is fine", &s, 0)
            .with(|l| {
                l.raw(3, |s| s.replacen("\"comm\":\"bash\"", "\"comm\":\"\\ud83d\\ude00\"", 1));
                l.rebuild(4, keys, false);
            }),
        vector("negative-zero", "-0 is not an integer", &s, 1)
            .with(|l| {
                l.raw(3, |s| s.replacen("\"dev\":2049", "\"dev\":-0", 1));
            })
            .at("malformed-line", ACTIVE, 4, 3),
        vector("version-2", "v must be 1", &s, 1)
            .with(|l| {
                l.edit(3, |v| v["v"] = 2.into());
            })
            .at("malformed-line", ACTIVE, 4, 3),
        vector("version-float", "v is the integer 1, not 1.0", &s, 1)
            .with(|l| {
                l.raw(3, |s| s.replacen("\"v\":1,", "\"v\":1.0,", 1));
            })
            .at("malformed-line", ACTIVE, 4, 3),
        vector("time-unchecked", "time is a string, its form is not checked", &s, 0)
            .with(|l| {
                l.edit(3, |v| v["time"] = "yesterday".into());
                l.rebuild(4, keys, false);
            }),
        vector("time-not-string", "time is a string", &s, 1)
            .with(|l| {
                l.edit(3, |v| v["time"] = 5.into());
            })
            .at("malformed-line", ACTIVE, 4, 3),
        vector("checkpoint-without-note", "kind members are required", &s, 1)
            .with(|l| {
                l.edit(last, |v| {
                    v.as_object_mut().unwrap().remove("note");
                });
            })
            .at("malformed-line", ACTIVE, 11, 10),
        vector("log-open-without-log-id", "log-open needs log_id", &s, 1)
            .with(|l| {
                l.edit(0, |v| {
                    v.as_object_mut().unwrap().remove("log_id");
                });
            })
            .at("malformed-line", ACTIVE, 1, 0),
        vector("log-id-uppercase", "log_id is 32 lowercase hex", &s, 1)
            .with(|l| {
                l.edit(0, |v| {
                    let id = v["log_id"].as_str().unwrap().to_ascii_uppercase();
                    v["log_id"] = id.into();
                });
            })
            .at("malformed-line", ACTIVE, 1, 0),
        vector("unknown-kind", "an unknown kind is a warning", &s, 3).with(|l| {
            l.edit(3, |v| v["kind"] = "frobnicate".into());
            l.rebuild(4, keys, false);
        }),
        vector("adopt-pids-list", "session-adopt pids is a number", &s, 1)
            .with(|l| {
                l.edit(6, |v| v["pids"] = json!([1, 2, 3]));
            })
            .at("malformed-line", ACTIVE, 7, 6),
        vector("exit-code-string", "exit_code is i32", &s, 1)
            .with(|l| {
                l.edit(7, |v| v["exit_code"] = "-9".into());
            })
            .at("malformed-line", ACTIVE, 8, 7),
        vector("target-path", "rename records may name target_path", &s, 0).with(|l| {
            l.edit(3, |v| {
                v["op"] = "rename".into();
                v["target_path"] = "/work/new-name".into();
            });
            l.rebuild(4, keys, false);
        }),
        vector("target-path-mistyped", "target_path is a path", &s, 1)
            .with(|l| {
                l.edit(3, |v| v["target_path"] = 7.into());
            })
            .at("malformed-line", ACTIVE, 4, 3),
        vector("op-unknown", "op is one of the listed values", &s, 1)
            .with(|l| {
                l.edit(3, |v| v["op"] = "chmod".into());
            })
            .at("malformed-line", ACTIVE, 4, 3),
        vector("note-extension-line", "notes may carry extension lines", &s, 0)
            .with(with_note(last, keys.note(&format!("{good_body}extension\n")))),
        vector("note-unparsable", "a note without its blank line", &s, 1)
            .with(with_note(last, good_body.clone()))
            .at("malformed-line", ACTIVE, 11, 10),
        vector("note-size-leading-zero", "size has no leading zeros", &s, 1)
            .with(with_note(last, keys.note(&good_body.replacen("\n10\n", "\n010\n", 1))))
            .at("malformed-line", ACTIVE, 11, 10),
        vector("note-root-non-canonical", "the root is canonical base64", &s, 1)
            .with({
                let root = good_body.lines().nth(2).unwrap().to_owned();
                let mut chars: Vec<char> = root.chars().collect();
                // 32 bytes: 43 characters and '='; the 43rd carries 2 unused bits.
                let i = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
                    .find(chars[42])
                    .unwrap();
                chars[42] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
                    .chars()
                    .nth(i ^ 1)
                    .unwrap();
                let bad: String = chars.into_iter().collect();
                with_note(last, keys.note(&good_body.replacen(&root, &bad, 1)))
            })
            .at("malformed-line", ACTIVE, 11, 10),
        vector("note-second-signature-verifies", "one of several lines for the key verifies", &s, 0)
            .with(with_note(last, {
                let good = keys.sign(&good_body);
                let bad = keys.sign(&good_body.replacen("\n10\n", "\n11\n", 1));
                format!("{good_body}\n{bad}{good}")
            })),
        vector("note-bad-signature", "lines for the key, none verifies", &s, 1)
            .with(with_note(last, {
                let bad = keys.sign(&good_body.replacen("\n10\n", "\n11\n", 1));
                format!("{good_body}\n{bad}")
            }))
            .at("bad-signature", ACTIVE, 11, 10),
        vector("note-missing-signature", "no line for the key", &s, 1)
            .with(with_note(last, other_key.sign_checkpoint(&origin, 10, &hex_hash(s.value(last)["root"].as_str().unwrap()))))
            .at("missing-signature", ACTIVE, 11, 10),
        vector("note-other-origin", "the origin names the log's log_id", &s, 1)
            .with(with_note(last, keys.note(&good_body.replacen(&origin, "fp.audit/00000000000000000000000000000000", 1))))
            .at("fork", ACTIVE, 11, 10),
        vector("note-other-size", "the note's size is the record's", &s, 1)
            .with(with_note(last, keys.note(&good_body.replacen("\n10\n", "\n9\n", 1))))
            .at("fork", ACTIVE, 11, 10),
        vector("key-rotation", "a daemon-restart naming another key id warns", &s, 3).with(|l| {
            l.edit(8, |v| {
                *v = json!({"v": 1, "seq": 8, "kind": "daemon-restart", "key_id": "other+0123abcd",
                    "writer": "fp test", "time": v["time"], "mono_ns": v["mono_ns"],
                    "boot_id": v["boot_id"], "host": v["host"]});
            });
            l.rebuild(9, keys, false);
        }),
        vector("trusted-file", "the sink file: the note itself", &s, 0).trusted(final_note.clone()),
        vector("trusted-syslog", "a syslog line from the sink", &s, 0)
            .trusted(format!("Nov 21 11:43:00 host fp[123]: {}\n", syslog.trim_end())),
        vector("trusted-other-log", "a trusted checkpoint of another log", &s, 1)
            .trusted(keys.note(&body("fp.audit/00000000000000000000000000000000", 10, &[1; 32])))
            .at("fork", ACTIVE, 12, 11),
        vector("trusted-truncated", "a log shorter than the trusted checkpoint", &s, 1)
            .trusted(final_note.clone())
            .with(|l| {
                l.files[0].1.truncate(9);
            })
            .at("truncated", ACTIVE, 10, 9),
        vector("trusted-fork", "record size-1 differs from the trusted root", &s, 1)
            .trusted(keys.note(&body(&origin, 10, &[1; 32])))
            .at("fork", ACTIVE, 10, 9),
        vector("trusted-without-pubkey", "a trusted checkpoint needs --pubkey", &s, 2)
            .trusted(final_note.clone())
            .pubkey(None),
        vector("trusted-retired", "a trusted checkpoint in segments not given", &r, 1)
            .trusted(keys.note(&cp_body(&r, 4)))
            .with(|l| {
                l.files.remove(0);
            })
            .paths(&[SEG1, ACTIVE])
            .at("deleted-record", SEG1, 1, 5),
        vector("retired-start", "older segments retired: a warning", &r, 3)
            .with(|l| {
                l.files.remove(0);
            })
            .paths(&[SEG1, ACTIVE]),
        vector("trusted-torn-truncated", "a truncation under a torn tail is tamper", &s, 1)
            .trusted(final_note.clone())
            .with(|l| {
                l.files[0].1.truncate(9);
                l.files[0].1.push(b"{\"v\":1,\"se".to_vec());
            })
            .at("truncated", ACTIVE, 10, 9),
        vector("torn-tail", "a last line without newline", &s, 3)
            .with(|l| l.files[0].1.push(b"{\"v\":1,\"seq\":11,\"ki".to_vec()))
            .at("torn-tail", ACTIVE, 12, 11),
        vector("whole-corrupt-last-line", "a whole last line is not torn", &s, 1)
            .with(|l| *l.line_mut(last) = b"{\"v\":1,\"seq\":10,\"ki\n".to_vec())
            .at("malformed-line", ACTIVE, 11, 10),
        vector("recovery", "a recovery record warns", &s, 3).with(|l| {
            l.edit(8, |v| {
                *v = json!({"v": 1, "seq": 8, "kind": "recovery", "torn_file": "audit.log.1234.torn",
                    "torn_size": 20, "torn_sha256": "00".repeat(32), "time": v["time"],
                    "mono_ns": v["mono_ns"], "boot_id": v["boot_id"], "host": v["host"]});
            });
            l.rebuild(9, keys, false);
        }),
        vector("segment-without-log-open", "every segment starts with log-open", &s, 1)
            .with(|l| {
                let tail = l.files[0].1.split_off(6);
                l.files[0].0 = SEG0.into();
                l.files.push((ACTIVE.into(), tail));
            })
            .at("malformed-line", ACTIVE, 1, 6),
        vector("log-open-inside-segment", "log-open only starts a segment", &r, 1)
            .with(|l| {
                let (_, second) = l.files.remove(1);
                l.files[0].1.extend(second);
            })
            .paths(&[SEG0, ACTIVE])
            .at("malformed-line", SEG0, 6, 5),
        vector("segment-number-skips", "segment numbers go +1", &r, 1)
            .with(|l| {
                l.edit(5, |v| v["segment"] = 2.into());
                l.rebuild(6, keys, false);
            })
            .at("malformed-line", SEG1, 1, 5),
        vector("rotated-without-checkpoint", "rotated segments end in a checkpoint", &r, 1)
            .with(|l| {
                l.files[0].1.pop();
                l.rebuild(4, keys, true);
                l.files[1].0 = "audit.log.00000000000000000004".into();
            })
            .paths(&[SEG0, "audit.log.00000000000000000004", ACTIVE])
            .at("malformed-line", "audit.log.00000000000000000004", 1, 4),
        vector("rotated-name-mismatch", "a rotated name names its first seq", &r, 3)
            .with(|l| l.files[1].0 = "audit.log.00000000000000000003".into())
            .paths(&[SEG0, "audit.log.00000000000000000003", ACTIVE]),
        vector("empty-segment-file", "an empty file is skipped with a warning", &r, 3)
            .with(|l| l.files.insert(1, ("audit.log.00000000000000000001".into(), Vec::new()))),
        vector("active-absent", "no active segment after rotating: a warning", &r, 3).with(|l| {
            l.files.pop();
        }),
        vector("deleted-record", "a record cut out", &s, 1)
            .with(|l| {
                l.files[0].1.remove(3);
            })
            .at("deleted-record", ACTIVE, 4, 3),
        vector("missing-middle-segment", "a segment file gone", &r, 1)
            .with(|l| {
                l.files.remove(1);
            })
            .paths(&[SEG0, ACTIVE])
            .at("deleted-record", ACTIVE, 1, 5),
        vector("inserted-linked", "a forged record linked to its predecessor", &s, 1)
            .with(|l| {
                let prev = line_hash(l.line(2));
                let forged = reseal(l.line(3), &prev, |v| v["path"] = "/etc/shadow".into());
                l.files[0].1.insert(3, forged);
            })
            .at("inserted-record", ACTIVE, 4, 3),
        vector("inserted-unlinked", "a forged record the next line skips", &s, 1)
            .with(|l| {
                let forged = reseal(l.line(3), &[9; 32], |v| v["path"] = "/etc/shadow".into());
                l.files[0].1.insert(3, forged);
            })
            .at("inserted-record", ACTIVE, 4, 3),
        vector("reordered", "two records swapped", &s, 1)
            .with(|l| l.files[0].1.swap(2, 3))
            .at("reordered-records", ACTIVE, 3, 2),
        vector("reordered-across-segments", "a swap across a segment boundary", &r, 1)
            .with(|l| {
                let a = l.files[0].1.pop().unwrap();
                let b = std::mem::replace(&mut l.files[1].1[0], a);
                l.files[0].1.push(b);
            })
            .at("reordered-records", SEG0, 5, 4),
        vector("reinserted-old-record", "an old record re-inserted is a duplicate", &s, 1)
            .with(|l| {
                let old = l.line(2).clone();
                l.files[0].1.insert(5, old);
            })
            .at("seq-gap-or-duplicate", ACTIVE, 6, 5),
        vector("modified-resealed", "a record rewritten and resealed", &s, 1)
            .with(|l| {
                l.edit(3, |v| v["decision"] = "allow".into());
            })
            .at("modified-record", ACTIVE, 4, 3),
        vector("modified-resealed-segment-end", "located in the previous segment", &r, 1)
            .with(|l| {
                l.edit(4, |v| v["mono_ns"] = 1.into());
            })
            .at("modified-record", SEG0, 5, 4),
        vector("first-record-bad-prev", "the first record links to zeros", &s, 1)
            .with(|l| {
                let line = l.line(0).clone();
                *l.line_mut(0) = reseal(&line, &[7; 32], |_| {});
            })
            .at("modified-record", ACTIVE, 1, 0),
        vector("modified-bytes", "bytes changed under the hash", &s, 1)
            .with(|l| {
                let text = String::from_utf8(l.line(3).clone()).unwrap();
                *l.line_mut(3) = text.replacen("coder", "c0der", 1).into_bytes();
            })
            .at("modified-record", ACTIVE, 4, 3),
        vector("seq-gap-linked", "a linked chain whose seq jumps", &s, 1)
            .with(|l| {
                l.edit(3, |v| v["seq"] = 9.into());
                l.rebuild(4, keys, false);
            })
            .at("seq-gap-or-duplicate", ACTIVE, 4, 3),
        vector("loss", "a loss record warns", &s, 3).with(|l| {
            l.edit(8, |v| {
                *v = json!({"v": 1, "seq": 8, "kind": "loss", "count": 3, "at": "kernel-ringbuf",
                    "time": v["time"], "mono_ns": v["mono_ns"], "boot_id": v["boot_id"],
                    "host": v["host"]});
            });
            l.rebuild(9, keys, false);
        }),
        vector("unsealed-tail", "records after the last checkpoint warn", &s, 3)
            .with(|l| {
                l.files[0].1.truncate(9);
            }),
    ]
}

/// Writes every vector under `dir/<name>/` and the manifest; returns the manifest entries.
fn write_vectors(dir: &Path) -> Vec<Value> {
    let keys = Keys::new();
    let scratch = tempfile::tempdir().unwrap();
    let mut manifest = Vec::new();
    for v in vectors(scratch.path(), &keys) {
        let vdir = dir.join(v.name);
        std::fs::create_dir_all(&vdir).unwrap();
        for (name, lines) in &v.log.files {
            std::fs::write(vdir.join(name), lines.concat()).unwrap();
        }
        let pubkey = v.pubkey.as_ref().map(|key| {
            let text = if key.is_empty() {
                format!("{}\n", keys.signer.verifier().encode())
            } else {
                key.clone()
            };
            std::fs::write(vdir.join("key.pub"), text).unwrap();
            "key.pub"
        });
        let trusted = v.trusted.as_ref().map(|note| {
            std::fs::write(vdir.join("trusted"), note).unwrap();
            "trusted"
        });
        let problem = v.problem.as_ref().map(|(class, file, line, seq)| {
            json!({"class": class, "segment": file, "line": line,
                   "offset": v.log.offset(file, *line), "seq": seq})
        });
        manifest.push(json!({"name": v.name, "rule": v.rule, "paths": v.paths, "pubkey": pubkey,
            "trusted_checkpoint": trusted, "exit": v.exit, "problem": problem}));
    }
    let text = serde_json::to_string_pretty(&manifest).unwrap();
    std::fs::write(dir.join("manifest.json"), &text).unwrap();
    if let Some(out) = std::env::var_os("FP_AUDIT_VECTORS_OUT") {
        copy_dir(dir, Path::new(&out));
    }
    manifest
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Runs `cmd` (verify with the vector's options) in the vector's directory and checks the exit
/// class and problem against the manifest. Returns a description of the mismatch, if any.
fn check(dir: &Path, entry: &Value, base: Command, options_first: bool) -> Option<String> {
    let name = entry["name"].as_str().unwrap();
    let vdir = dir.join(name);
    let mut cmd = base;
    cmd.current_dir(&vdir);
    let mut options: Vec<String> = Vec::new();
    if let Some(key) = entry["pubkey"].as_str() {
        options.extend(["--pubkey".into(), key.into()]);
    }
    if let Some(note) = entry["trusted_checkpoint"].as_str() {
        options.extend(["--trusted-checkpoint".into(), note.into()]);
    }
    let paths: Vec<String> =
        entry["paths"].as_array().unwrap().iter().map(|p| p.as_str().unwrap().into()).collect();
    let _ = options_first;
    cmd.args(&options).args(&paths);
    let output = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let code = output.status.code();
    let want = entry["exit"].as_u64().unwrap() as i32;
    if code != Some(want) {
        return Some(format!(
            "{name}: exit {code:?}, want {want}\n{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    if want == 2 {
        return None;
    }
    let report: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{name}: output is not JSON ({e}): {stdout}"));
    let got = &report["problem"];
    let expected = &entry["problem"];
    let same = match (got.is_null(), expected.is_null()) {
        (true, true) => true,
        (false, false) => {
            let file = Path::new(got["segment"].as_str().unwrap_or_default())
                .file_name()
                .map(|n| n.to_string_lossy().into_owned());
            got["class"] == expected["class"]
                && file.as_deref() == expected["segment"].as_str()
                && got["line"] == expected["line"]
                && got["offset"] == expected["offset"]
                && got["seq"] == expected["seq"]
        }
        _ => false,
    };
    (!same).then(|| format!("{name}: problem {got}, want {expected}"))
}

fn run_all(base: impl Fn() -> Command) {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_vectors(dir.path());
    let failures: Vec<String> =
        manifest.iter().filter_map(|entry| check(dir.path(), entry, base(), true)).collect();
    assert!(
        failures.is_empty(),
        "{} of {} vectors failed:\n{}",
        failures.len(),
        manifest.len(),
        failures.join("\n")
    );
}

#[test]
fn fp_verify_agrees_with_every_vector() {
    run_all(|| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_fp"));
        cmd.args(["audit", "verify", "--json"]);
        cmd
    });
}

#[test]
fn independent_verifier_agrees_with_every_vector() {
    let script: PathBuf =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/audit-independent/fpaudit.py");
    run_all(|| {
        let mut cmd = Command::new("python3");
        cmd.arg(&script).arg("verify");
        cmd
    });
}
