//! The hash chain: how a record line is sealed and how its seal is checked.
//!
//! A line is `S` followed by `,"hash":"<64 lowercase hex>"}` and `\n`, where `S` is a JSON object
//! without its closing brace that contains (among others) `"seq"` and `"prev"`. The hash is
//! SHA-256 over [`DOMAIN`] followed by the exact bytes of `S`, so the verifier never
//! re-serializes anything (docs/audit-format.md, "Chain").
use sha2::{Digest, Sha256};

/// Domain-separation prefix hashed before every record's sealed bytes.
pub const DOMAIN: &[u8] = b"fp-audit-v1 record\n";
/// The `prev` of the very first record of a log.
pub const GENESIS: Hash = [0; 32];
/// Bytes that follow the 64 hex digits of the hash at the end of a line (before `\n`).
const HASH_OPEN: &[u8] = b",\"hash\":\"";
const HASH_CLOSE: &[u8] = b"\"}";
/// Length of the hash suffix: `,"hash":"` + 64 hex + `"}`.
pub const SUFFIX_LEN: usize = HASH_OPEN.len() + 64 + HASH_CLOSE.len();

pub type Hash = [u8; 32];

/// The record hash of a line's sealed part.
pub fn seal_hash(sealed: &[u8]) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update(DOMAIN);
    hasher.update(sealed);
    hasher.finalize().into()
}

/// Completes the sealed part `out[start..]` (a JSON object missing its closing brace) into a line
/// ending in `\n`; returns the record hash.
pub fn seal_in_place(out: &mut Vec<u8>, start: usize) -> Hash {
    let hash = seal_hash(&out[start..]);
    out.extend_from_slice(HASH_OPEN);
    let start = out.len();
    out.resize(start + 64, 0);
    hex::encode_to_slice(hash, &mut out[start..]).expect("64 bytes fit 32 hex-encoded bytes");
    out.extend_from_slice(HASH_CLOSE);
    out.push(b'\n');
    hash
}

/// Splits a line (without its `\n`) into its sealed part and the hash it claims, or `None` when
/// the line does not end with a well-formed hash suffix.
pub fn split_line(line: &[u8]) -> Option<(&[u8], Hash)> {
    let cut = line.len().checked_sub(SUFFIX_LEN)?;
    let (sealed, suffix) = line.split_at(cut);
    let digits = suffix.strip_prefix(HASH_OPEN)?.strip_suffix(HASH_CLOSE)?;
    if digits.iter().any(|d| d.is_ascii_uppercase()) {
        return None;
    }
    let mut hash = [0; 32];
    hex::decode_to_slice(digits, &mut hash).ok()?;
    Some((sealed, hash))
}

/// Parses 64 lowercase hex digits.
pub fn parse_hex_hash(text: &str) -> Option<Hash> {
    if text.len() != 64 || text.bytes().any(|d| d.is_ascii_uppercase()) {
        return None;
    }
    let mut hash = [0; 32];
    hex::decode_to_slice(text, &mut hash).ok()?;
    Some(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_line_splits_back_to_its_parts() {
        let mut line = br#"{"seq":0,"prev":"00""#.to_vec();
        let hash = seal_in_place(&mut line, 0);
        assert_eq!(line.last(), Some(&b'\n'));
        let (sealed, claimed) = split_line(&line[..line.len() - 1]).unwrap();
        assert_eq!(sealed, br#"{"seq":0,"prev":"00""#);
        assert_eq!(claimed, hash);
        assert_eq!(seal_hash(sealed), hash);
        let text = std::str::from_utf8(&line).unwrap();
        let value: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(value["hash"], hex::encode(hash));
    }

    #[test]
    fn uppercase_or_short_suffix_is_rejected() {
        assert!(split_line(b"{}").is_none());
        let mut line = b"{\"a\":1".to_vec();
        seal_in_place(&mut line, 0);
        let upper = String::from_utf8(line).unwrap().trim_end().to_ascii_uppercase();
        assert!(split_line(upper.as_bytes()).is_none());
    }
}
