//! `sockets`: the unix sockets served from outside a session that its processes may connect and
//! send to (docs/policy.md, "Sockets served from outside"). A socket whose server runs inside the
//! session is never asked about; one served from outside is refused unless an entry here names
//! it (fp-ebpf's `unix`). An entry is `@name`, an abstract socket's exact name, or a path glob
//! of socket files (`~` and `<workspace>` expanded, `*`, `?`, `[...]` and `{a,b}` within one
//! component); a session reaches the sockets its entries name when it starts (or reloads), by
//! the identity of each file, whatever name leads to it.
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

use super::glob::{self, Expansion};
use super::{ErrorKind, PolicyError, Source, Spanned};

/// Longest abstract name after its `@`: a `sun_path` holds 108 bytes, the first a NUL.
const MAX_ABSTRACT: usize = fp_common::kernel::UNIX_NAME_MAX - 1;

/// Most sockets one resolution of a session's entries names.
const MAX_SOCKETS: usize = 1024;

/// One `sockets` entry, expanded.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SocketRule {
    /// As written.
    pub text: String,
    /// `@name`, or an absolute path glob.
    pub pattern: String,
    pub source: Source,
}

/// A socket an entry named when the session's policy was installed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Peer {
    /// A socket file, by its identity (`dev` as the kernel encodes it).
    File { path: PathBuf, ino: u64, dev: u32 },
    /// An abstract socket's name, without the leading NUL.
    Abstract(Vec<u8>),
}

impl SocketRule {
    /// The sockets this entry names now (see [`resolve`]).
    pub fn peers(&self) -> Vec<Peer> {
        resolve(std::slice::from_ref(self))
    }

    /// Whether the rule names the socket at `address`: `@name` for an abstract socket, else the
    /// path of a socket file.
    pub fn names(&self, address: &str) -> bool {
        match (self.pattern.strip_prefix('@'), address.strip_prefix('@')) {
            (Some(name), Some(asked)) => name == asked,
            (None, None) => glob::build(&self.pattern)
                .is_ok_and(|g| g.compile_matcher().is_match(Path::new(address))),
            _ => false,
        }
    }
}

/// The `sockets` entries expanded and checked; an error names the entry's position.
pub fn build(
    entries: &[Spanned<String>],
    expansion: Expansion<'_>,
) -> Result<Vec<SocketRule>, PolicyError> {
    entries
        .iter()
        .map(|e| {
            let error = |kind, message: String, help: &str| {
                PolicyError::new(kind, Some(e.source.clone()), message).with_help(help.to_string())
            };
            let pattern = match e.value.strip_prefix('@') {
                Some(name) if name.is_empty() || name.len() > MAX_ABSTRACT => {
                    return Err(error(
                        ErrorKind::BadValue,
                        format!("abstract socket name \"{}\" is empty or too long", e.value),
                        "an abstract name is 1 to 107 bytes after its @",
                    ));
                }
                Some(_) => e.value.clone(),
                None => {
                    let pattern =
                        glob::prepare(&e.value, expansion).map_err(|(kind, message, help)| {
                            PolicyError::new(kind, Some(e.source.clone()), message).with_help(help)
                        })?;
                    if pattern.contains("**") {
                        return Err(error(
                            ErrorKind::InvalidGlob,
                            format!("socket entry \"{}\" has **", e.value),
                            "a socket entry names socket files: globs match within one component",
                        ));
                    }
                    pattern
                }
            };
            Ok(SocketRule { text: e.value.clone(), pattern, source: e.source.clone() })
        })
        .collect()
}

/// The sockets `rules` name now: each abstract name, and each socket file an entry's glob
/// matches (a name that leads elsewhere, a symlink such as `/dev/log`, is followed). Entries that
/// name no socket now name none for the session; the scan stops at [`glob::MAX_SCANNED`] directory
/// entries and [`MAX_SOCKETS`] sockets.
pub fn resolve(rules: &[SocketRule]) -> Vec<Peer> {
    let mut peers = Vec::new();
    let mut budget = glob::MAX_SCANNED;
    for rule in rules {
        if let Some(name) = rule.pattern.strip_prefix('@') {
            peers.push(Peer::Abstract(name.as_bytes().to_vec()));
            continue;
        }
        for path in glob::matching_paths(&rule.pattern, &mut budget) {
            let Ok(md) = std::fs::metadata(&path) else { continue };
            if md.file_type().is_socket() {
                let dev = super::kernel_dev(md.dev());
                peers.push(Peer::File { path, ino: md.ino(), dev });
            }
        }
    }
    peers.dedup();
    peers.truncate(MAX_SOCKETS);
    peers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(entries: &[&str]) -> Result<Vec<SocketRule>, PolicyError> {
        let source = Source::Builtin { builtin: "test".into() };
        let entries: Vec<_> = entries
            .iter()
            .map(|e| Spanned { value: e.to_string(), source: source.clone() })
            .collect();
        let home = Path::new("/home/u");
        build(&entries, Expansion { workspace: Some(Path::new("/ws")), home })
    }

    #[test]
    fn entries_expand_and_bad_ones_name_why() {
        let r =
            rules(&["@/tmp/.X11-unix/X0", "~/.ssh/agent.sock", "<workspace>/s/*.sock"]).unwrap();
        let patterns: Vec<&str> = r.iter().map(|r| r.pattern.as_str()).collect();
        assert_eq!(patterns, ["@/tmp/.X11-unix/X0", "/home/u/.ssh/agent.sock", "/ws/s/*.sock"]);
        assert_eq!(rules(&["/run/**"]).unwrap_err().kind, ErrorKind::InvalidGlob);
        assert_eq!(rules(&["run/docker.sock"]).unwrap_err().kind, ErrorKind::RelativePath);
        assert_eq!(rules(&["@"]).unwrap_err().kind, ErrorKind::BadValue);
        assert_eq!(
            rules(&[&format!("@{}", "x".repeat(108))]).unwrap_err().kind,
            ErrorKind::BadValue
        );
    }

    #[test]
    fn rules_name_addresses_of_their_kind() {
        let r = rules(&["@agent", "/tmp/ssh-*/agent.*"]).unwrap();
        assert!(r[0].names("@agent") && !r[0].names("@agent2") && !r[0].names("/agent"));
        assert!(r[1].names("/tmp/ssh-AbC/agent.42"));
        assert!(!r[1].names("/tmp/ssh-AbC/x/agent.42") && !r[1].names("@/tmp/ssh-a/agent.1"));
    }

    #[test]
    fn resolution_finds_socket_files_by_glob_and_through_symlinks() {
        let dir = std::env::temp_dir().join(format!("fp-sockets-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("ssh-a")).unwrap();
        let sock = dir.join("ssh-a/agent.7");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        std::fs::write(dir.join("ssh-a/agent.txt"), "not a socket").unwrap();
        std::os::unix::fs::symlink(&sock, dir.join("log")).unwrap();
        let d = dir.display();
        let r = rules(&[&format!("{d}/ssh-*/agent.*"), &format!("{d}/log"), "@x"]).unwrap();
        let peers = resolve(&r);
        let md = std::fs::metadata(&sock).unwrap();
        let file = Peer::File {
            path: sock.clone(),
            ino: md.ino(),
            dev: crate::policy::kernel_dev(md.dev()),
        };
        assert_eq!(peers[0], file);
        assert!(matches!(&peers[1], Peer::File { ino, .. } if *ino == md.ino()));
        assert_eq!(peers[2], Peer::Abstract(b"x".to_vec()));
        assert_eq!(peers.len(), 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
