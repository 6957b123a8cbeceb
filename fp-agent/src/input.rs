//! Files a user names (policies, configs, keys, checkpoints), read with a bound: `/dev/zero` or a
//! log given where a key belongs is refused after `limit` bytes with an error that says so,
//! never read until memory runs out.
use std::io::Read as _;
use std::path::Path;

/// Policy and config files: far more than any policy within the rule limit needs.
pub const POLICY_MAX: u64 = 4 << 20;
/// Key and checkpoint files, a few hundred bytes each.
pub const KEY_MAX: u64 = 64 << 10;

/// The bytes of `path`, or an error (`InvalidData`) once it holds more than `limit`.
pub fn read_bounded(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let mut data = Vec::new();
    std::fs::File::open(path)?.take(limit + 1).read_to_end(&mut data)?;
    if data.len() as u64 > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than the limit of {limit} bytes"),
        ));
    }
    Ok(data)
}

/// [`read_bounded`] as UTF-8 text; not text is `InvalidData` naming the first byte that is not.
pub fn read_text(path: &Path, limit: u64) -> std::io::Result<String> {
    String::from_utf8(read_bounded(path, limit)?).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not UTF-8 at byte {at}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stop_at_the_limit_and_name_it() {
        let e = read_bounded(Path::new("/dev/zero"), 1000).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert_eq!(e.to_string(), "larger than the limit of 1000 bytes");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"ok\n\xff").unwrap();
        assert_eq!(read_bounded(&file, 4).unwrap(), b"ok\n\xff");
        assert_eq!(read_text(&file, 4).unwrap_err().to_string(), "not UTF-8 at byte 3");
    }
}
