//! Paths as the policy takes them: lexical normalization, a literal path as a glob, the
//! workspace and a user's home.
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use super::glob;
use super::{ErrorKind, PolicyError};

/// A literal absolute path as a rule glob: normalized lexically, glob characters escaped.
pub(super) fn path_glob(path: &Path) -> Result<String, PolicyError> {
    let bad = |what: &str| {
        PolicyError::new(ErrorKind::BadValue, None, format!("{}: {what}", path.display()))
    };
    let normalized = normalize_path(path.as_os_str().as_bytes())
        .ok_or_else(|| bad("expected an absolute path"))?;
    let text = std::str::from_utf8(&normalized).map_err(|_| bad("not UTF-8"))?;
    Ok(glob::escape(text))
}

pub(super) fn check_workspace(ws: &Path) -> Result<PathBuf, PolicyError> {
    let err = |message: String| {
        PolicyError::new(ErrorKind::MissingWorkspace, None, message)
            .with_help("the workspace is a non-empty absolute directory path")
    };
    if ws.as_os_str().is_empty() {
        return Err(err("empty workspace".to_string()));
    }
    let normalized = normalize_path(ws.as_os_str().as_encoded_bytes())
        .ok_or_else(|| err(format!("workspace {} is not absolute", ws.display())))?;
    if normalized == b"/" {
        return Err(err("the workspace cannot be /".to_string()));
    }
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(&normalized)))
}

/// Lexical normalization of an absolute path: drops empty and `.` components, resolves `..`
/// (at the root it stays at the root, as POSIX does). None if the path is not absolute.
pub fn normalize_path(path: &[u8]) -> Option<Vec<u8>> {
    if path.first() != Some(&b'/') {
        return None;
    }
    let mut parts: Vec<&[u8]> = Vec::new();
    for comp in path.split(|b| *b == b'/') {
        match comp {
            b"" | b"." => {}
            b".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    let mut out = Vec::with_capacity(path.len());
    for p in &parts {
        out.push(b'/');
        out.extend_from_slice(p);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    Some(out)
}

/// The home directory of `user` (None: the calling user) from the passwd database.
pub(super) fn home_of(user: Option<&str>) -> Result<PathBuf, PolicyError> {
    let found = match user {
        Some(name) => nix::unistd::User::from_name(name),
        None => nix::unistd::User::from_uid(nix::unistd::getuid()),
    };
    match found {
        Ok(Some(u)) => Ok(u.dir),
        Ok(None) | Err(_) => Err(PolicyError::new(
            ErrorKind::UnknownUser,
            None,
            format!("user {} is not in the passwd database", user.unwrap_or("(caller)")),
        )
        .with_help("name an existing user with --user NAME")),
    }
}
