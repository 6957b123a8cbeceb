//! The lines of a segment, a look-ahead line's hashes, and the seq a segment's name claims.
use super::super::chain::{self, Hash};
use super::super::schema;

/// A look-ahead line that passes steps 1 and 3 (not step 2): its stored hash (not recomputed)
/// and its prev.
pub(super) fn peek(line: &[u8], terminated: bool) -> Option<(Hash, Hash)> {
    let (_, hash) = chain::split_line(line).filter(|_| terminated)?;
    let value = schema::parse_line(line).ok()?;
    let common = schema::common(&value).ok()?;
    if common.v != u64::from(super::super::record::FORMAT_VERSION) {
        return None;
    }
    schema::kind(&value, common.kind).ok()?;
    Some((hash, chain::parse_hex_hash(common.prev)?))
}

/// Lines of a segment with their byte offsets; the last one may lack its newline.
pub(super) fn lines(data: &[u8]) -> impl Iterator<Item = (usize, &[u8], bool)> {
    let mut offset = 0;
    std::iter::from_fn(move || {
        if offset >= data.len() {
            return None;
        }
        let start = offset;
        match data[start..].iter().position(|&b| b == b'\n') {
            Some(i) => {
                offset = start + i + 1;
                Some((start, &data[start..start + i], true))
            }
            None => {
                offset = data.len();
                Some((start, &data[start..], false))
            }
        }
    })
}

/// The seq a rotated segment's file name claims: `<base>.<20 digits>`.
pub(super) fn name_seq(path: &std::path::Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    let (_, digits) = name.rsplit_once('.')?;
    if digits.len() != 20 || !digits.bytes().all(|d| d.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}
