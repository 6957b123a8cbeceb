//! Checkpoint keys and C2SP signed notes (docs/audit-format.md, "Checkpoints").
//!
//! Key files use the signed-note text encodings: the verifier key is
//! `<name>+<hex key hash>+<base64(0x01 || public key)>`, the signer key is the same with a
//! `PRIVATE+KEY+` prefix and the 32-byte Ed25519 seed. The key hash is the first 4 bytes of
//! SHA-256(name || 0x0A || 0x01 || public key).
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow, bail};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};

use super::chain::Hash;

/// Signature type byte for Ed25519 in signed notes.
const ALG_ED25519: u8 = 0x01;
/// The em dash and space that open every signature line.
const SIG_PREFIX: &str = "\u{2014} ";
const PRIVATE_PREFIX: &str = "PRIVATE+KEY+";

/// The public half: what verification needs.
#[derive(Clone, Debug)]
pub struct VerifierKey {
    pub name: String,
    pub key: VerifyingKey,
}

/// The signing half, held by the writer.
#[derive(Clone)]
pub struct SignerKey {
    pub name: String,
    key: SigningKey,
}

fn key_hash(name: &str, public: &VerifyingKey) -> [u8; 4] {
    let mut hasher = Sha256::new();
    hasher.update(name.as_bytes());
    hasher.update([b'\n', ALG_ED25519]);
    hasher.update(public.as_bytes());
    let digest = hasher.finalize();
    [digest[0], digest[1], digest[2], digest[3]]
}

fn check_name(name: &str) -> anyhow::Result<()> {
    if !super::schema::valid_key_name(name) {
        bail!("key name {name:?} must be non-empty printable ASCII without '+' or spaces");
    }
    Ok(())
}

impl VerifierKey {
    /// `<name>+<8 hex>`: the key id recorded in `log-open` records.
    pub fn key_id(&self) -> String {
        format!("{}+{}", self.name, hex::encode(key_hash(&self.name, &self.key)))
    }

    pub fn encode(&self) -> String {
        let mut blob = vec![ALG_ED25519];
        blob.extend_from_slice(self.key.as_bytes());
        format!("{}+{}", self.key_id(), BASE64.encode(blob))
    }

    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let (name, hash, blob) = parse_key_text(text.trim())?;
        let key = VerifyingKey::from_bytes(&blob).context("not a valid Ed25519 public key")?;
        let parsed = VerifierKey { name: name.to_owned(), key };
        check_hash(hash, &parsed)?;
        Ok(parsed)
    }

    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = crate::input::read_text(path, crate::input::KEY_MAX)
            .with_context(|| format!("reading public key {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("public key {}", path.display()))
    }
}

/// Splits `<name>+<hex>+<base64>` and decodes the Ed25519 blob.
fn parse_key_text(text: &str) -> anyhow::Result<(&str, &str, [u8; 32])> {
    // Base64 may itself contain '+', so only the first two split.
    let mut parts = text.splitn(3, '+');
    let (Some(name), Some(hash), Some(blob)) = (parts.next(), parts.next(), parts.next()) else {
        bail!("expected <name>+<key hash hex>+<base64 key>");
    };
    check_name(name)?;
    if hash.len() != 8 {
        bail!("key hash must be 8 hex digits, got {hash:?}");
    }
    let blob = BASE64.decode(blob).context("key is not valid base64")?;
    match blob.split_first() {
        Some((&ALG_ED25519, key)) if key.len() == 32 => {
            Ok((name, hash, key.try_into().expect("32 bytes")))
        }
        _ => bail!("key must be 0x01 followed by 32 Ed25519 bytes"),
    }
}

fn check_hash(hash: &str, key: &VerifierKey) -> anyhow::Result<()> {
    if hash != hex::encode(key_hash(&key.name, &key.key)) {
        bail!("key hash does not match the key (expected {})", key.key_id());
    }
    Ok(())
}

impl SignerKey {
    pub fn generate(name: &str) -> anyhow::Result<Self> {
        check_name(name)?;
        let mut seed = [0u8; 32];
        getrandom::getrandom(&mut seed).map_err(|e| anyhow!("getrandom: {e}"))?;
        Ok(SignerKey { name: name.to_owned(), key: SigningKey::from_bytes(&seed) })
    }

    pub fn verifier(&self) -> VerifierKey {
        VerifierKey { name: self.name.clone(), key: self.key.verifying_key() }
    }

    pub fn encode(&self) -> String {
        let mut blob = vec![ALG_ED25519];
        blob.extend_from_slice(&self.key.to_bytes());
        format!("{PRIVATE_PREFIX}{}+{}", self.verifier().key_id(), BASE64.encode(blob))
    }

    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let rest = text
            .trim()
            .strip_prefix(PRIVATE_PREFIX)
            .ok_or_else(|| anyhow!("a private key starts with {PRIVATE_PREFIX}"))?;
        let (name, hash, seed) = parse_key_text(rest)?;
        let signer = SignerKey { name: name.to_owned(), key: SigningKey::from_bytes(&seed) };
        check_hash(hash, &signer.verifier())?;
        Ok(signer)
    }

    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = crate::input::read_text(path, crate::input::KEY_MAX)
            .with_context(|| format!("reading private key {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("private key {}", path.display()))
    }

    /// The signed note for a checkpoint of `size` records with head `root`.
    pub fn sign_checkpoint(&self, origin: &str, size: u64, root: &Hash) -> String {
        let body = checkpoint_body(origin, size, root);
        let signature = self.key.sign(body.as_bytes());
        let mut blob = key_hash(&self.name, &self.key.verifying_key()).to_vec();
        blob.extend_from_slice(&signature.to_bytes());
        format!("{body}\n{SIG_PREFIX}{} {}\n", self.name, BASE64.encode(blob))
    }
}

/// The origin line of every checkpoint of the log `log_id`.
pub fn origin(log_id: &str) -> String {
    format!("fp.audit/{log_id}")
}

fn checkpoint_body(origin: &str, size: u64, root: &Hash) -> String {
    format!("{origin}\n{size}\n{}\n", BASE64.encode(root))
}

/// A checkpoint note's content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointNote {
    pub origin: String,
    pub size: u64,
    pub root: Hash,
}

/// Why a note was not accepted.
#[derive(Debug, PartialEq, Eq)]
pub enum NoteError {
    Malformed(String),
    MissingSignature,
    BadSignature,
}

impl std::fmt::Display for NoteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoteError::Malformed(why) => write!(f, "malformed checkpoint note: {why}"),
            NoteError::MissingSignature => f.write_str("no signature by the given key"),
            NoteError::BadSignature => f.write_str("signature does not verify"),
        }
    }
}

/// One signature line of a note: the key name and the decoded blob (key hash || signature).
pub struct SignatureLine<'a> {
    pub name: &'a str,
    pub blob: Vec<u8>,
}

/// Parses a note's text without checking signatures: `(note, signed body, signature lines)`.
///
/// The text is the body — origin, size, root, then any extension lines, each ending in `\n` —
/// an empty line, and one or more signature lines `— <name> <base64>\n`. The size is decimal
/// without leading zeros; all base64 is canonical, padded standard base64.
pub fn parse_note(note: &str) -> Result<(CheckpointNote, &str, Vec<SignatureLine<'_>>), NoteError> {
    let malformed = |why: &str| NoteError::Malformed(why.to_owned());
    let split = note.find("\n\n").ok_or_else(|| malformed("no blank line before signatures"))?;
    let (body, signatures) = (&note[..split + 1], &note[split + 2..]);
    let mut lines = body[..body.len() - 1].split('\n');
    let (Some(origin), Some(size), Some(root)) = (lines.next(), lines.next(), lines.next()) else {
        return Err(malformed("expected origin, size and root hash lines"));
    };
    if origin.is_empty() {
        return Err(malformed("empty origin line"));
    }
    let decimal = !size.is_empty()
        && size.bytes().all(|d| d.is_ascii_digit())
        && (size == "0" || !size.starts_with('0'));
    let size = size
        .parse()
        .ok()
        .filter(|_| decimal)
        .ok_or_else(|| malformed("size is not a decimal number without leading zeros"))?;
    let root: Hash = super::schema::canonical_base64(root)
        .and_then(|r| r.try_into().ok())
        .ok_or_else(|| malformed("root is not canonical base64 of 32 bytes"))?;
    let Some(signatures) = signatures.strip_suffix('\n') else {
        return Err(malformed("the note does not end with a newline"));
    };
    let mut parsed = Vec::new();
    for line in signatures.split('\n') {
        let signature = line
            .strip_prefix(SIG_PREFIX)
            .and_then(|rest| rest.split_once(' '))
            .and_then(|(name, blob)| {
                let blob = super::schema::canonical_base64(blob)?;
                (super::schema::valid_key_name(name) && blob.len() >= 4)
                    .then_some(SignatureLine { name, blob })
            })
            .ok_or_else(|| NoteError::Malformed(format!("bad signature line {line:?}")))?;
        parsed.push(signature);
    }
    Ok((CheckpointNote { origin: origin.to_owned(), size, root }, body, parsed))
}

/// Parses a note and checks that `key` signed it: at least one signature line names the key
/// (name, and a 68-byte blob starting with the key hash) and verifies.
pub fn verify_note(note: &str, key: &VerifierKey) -> Result<CheckpointNote, NoteError> {
    let (parsed, body, signatures) = parse_note(note)?;
    let wanted = key_hash(&key.name, &key.key);
    let mut found = false;
    for SignatureLine { name, blob } in signatures {
        if name != key.name || blob.len() != 68 || blob[..4] != wanted {
            continue;
        }
        found = true;
        let signature = Signature::from_bytes(blob[4..].try_into().expect("64 bytes"));
        if key.key.verify_strict(body.as_bytes(), &signature).is_ok() {
            return Ok(parsed);
        }
    }
    Err(if found { NoteError::BadSignature } else { NoteError::MissingSignature })
}

/// The note in what a checkpoint sink holds: the note itself (the sink file), or a syslog line
/// `... fp-audit checkpoint <note with each newline shown as " | ">` (the last such line when
/// there are several).
pub fn note_from_sink(text: &str) -> std::borrow::Cow<'_, str> {
    const MARKER: &str = "fp-audit checkpoint ";
    let Some(line) = text.lines().rev().find(|l| l.contains(MARKER)) else {
        return text.into();
    };
    let flat = &line[line.find(MARKER).expect("found") + MARKER.len()..];
    let flat = flat.trim_end();
    let flat = flat.strip_suffix(" |").unwrap_or(flat);
    let mut note = flat.replace(" | ", "\n").replace(" |", "\n");
    note.push('\n');
    note.into()
}

/// Writes `contents` to `path` atomically: a temporary file with `mode` in the same directory,
/// fsynced, renamed over `path`, then the directory fsynced.
pub fn write_atomic(path: &Path, contents: &[u8], mode: u32) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().ok_or_else(|| anyhow!("{} has no file name", path.display()))?;
    let tmp = dir.join(format!(".{}.tmp{}", name.to_string_lossy(), std::process::id()));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)
            .with_context(|| format!("creating {}", tmp.display()))?;
        file.write_all(contents)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
        std::fs::File::open(&dir)?.sync_all()?;
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// `fp audit keygen`: writes `<prefix>.key` (0600) and `<prefix>.pub` (0644), creating the
/// prefix's directory (0755, as `install -D`) when it does not exist, refusing to overwrite an
/// existing key unless `force`.
pub fn keygen(name: &str, prefix: &Path, force: bool) -> anyhow::Result<(PathBuf, PathBuf)> {
    if prefix.as_os_str().as_encoded_bytes().ends_with(b"/") || prefix.is_dir() {
        bail!(
            "{} is a directory: keygen takes a prefix, e.g. {}/audit (for audit.key and audit.pub)",
            prefix.display(),
            prefix.display().to_string().trim_end_matches('/')
        );
    }
    if let Some(dir) = prefix.parent().filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .with_context(|| format!("creating the key's directory {}", dir.display()))?;
    }
    let private = PathBuf::from(format!("{}.key", prefix.display()));
    let public = PathBuf::from(format!("{}.pub", prefix.display()));
    for path in [&private, &public] {
        if !force && path.exists() {
            bail!("{} exists; pass --force to replace it", path.display());
        }
    }
    let signer = SignerKey::generate(name)?;
    write_atomic(&private, format!("{}\n", signer.encode()).as_bytes(), 0o600)?;
    write_atomic(&public, format!("{}\n", signer.verifier().encode()).as_bytes(), 0o644)?;
    Ok((private, public))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_notes_verify() {
        let signer = SignerKey::generate("fp-test").unwrap();
        let again = SignerKey::parse(&signer.encode()).unwrap();
        let verifier = VerifierKey::parse(&again.verifier().encode()).unwrap();
        assert_eq!(verifier.key_id(), signer.verifier().key_id());
        let note = signer.sign_checkpoint("fp.audit/x", 42, &[7; 32]);
        let parsed = verify_note(&note, &verifier).unwrap();
        assert_eq!(parsed, CheckpointNote { origin: "fp.audit/x".into(), size: 42, root: [7; 32] });
        let other = SignerKey::generate("fp-test").unwrap().verifier();
        assert_eq!(verify_note(&note, &other), Err(NoteError::MissingSignature));
        let forged = note.replace("\n42\n", "\n43\n");
        assert_eq!(verify_note(&forged, &verifier), Err(NoteError::BadSignature));
    }

    /// The README's quick start runs keygen before anything made /etc/fp.
    #[test]
    fn keygen_makes_the_prefix_directory_and_refuses_a_directory_as_prefix() {
        let tmp = tempfile::tempdir().unwrap();
        let prefix = tmp.path().join("etc/fp/audit");
        let (private, public) = keygen("fp-test", &prefix, false).unwrap();
        assert!(private.is_file() && public.is_file());
        let err = keygen("fp-test", &prefix, false).unwrap_err().to_string();
        assert!(err.contains("exists; pass --force"), "{err}");
        for dir in [tmp.path().join("etc/fp"), tmp.path().join("etc/fp/")] {
            let err = keygen("fp-test", &dir, false).unwrap_err().to_string();
            assert!(err.contains("is a directory: keygen takes a prefix"), "{err}");
        }
    }

    #[test]
    fn key_with_wrong_hash_is_rejected() {
        let encoded = SignerKey::generate("fp-test").unwrap().verifier().encode();
        let mut parts: Vec<&str> = encoded.split('+').collect();
        parts[1] = "00000000";
        assert!(VerifierKey::parse(&parts.join("+")).is_err());
    }
}
