//! A dedicated agent user, as the shipped profiles expect one (docs/policy.md, "Profiles").
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Place, place, stderr};

/// `fpagent` (uid and gid 6000), its home a fresh directory under /run: not under /tmp, which the
/// profiles open. The VM's root is the host's, shared read-only, so the user is added by
/// mounting copies of /etc/passwd and /etc/group over them, in the VM only; dropping it unmounts
/// them (and what [`AgentUser::install`] mounted) and removes the home.
pub struct AgentUser {
    dir: PathBuf,
    pub home: PathBuf,
    mounts: Vec<PathBuf>,
}

impl AgentUser {
    pub const NAME: &str = "fpagent";
    pub const UID: u32 = 6000;

    pub fn new() -> Self {
        assert!(matches!(place(), Place::Vm), "the agent user is added in the test VM only");
        let dir = PathBuf::from(format!("/run/fp-test-agent-{}", std::process::id()));
        let home = dir.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let mut user = AgentUser { dir, home, mounts: Vec::new() };
        user.own(&user.home.clone());
        let (uid, name) = (Self::UID, Self::NAME);
        let passwd =
            format!("{name}:x:{uid}:{uid}:fp test agent:{}:/bin/bash\n", user.home.display());
        for (file, line) in [("/etc/passwd", passwd), ("/etc/group", format!("{name}:x:{uid}:\n"))]
        {
            let copy = user.dir.join(Path::new(file).file_name().unwrap());
            std::fs::write(&copy, std::fs::read_to_string(file).unwrap() + &line).unwrap();
            user.mount(&["--bind"], &copy, Path::new(file));
        }
        user
    }

    /// `rel` in the home (and its parents), owned by the user, with `content`.
    pub fn file(&self, rel: &str, content: &str) -> PathBuf {
        let path = self.home.join(rel);
        let mut dir = self.home.clone();
        for part in Path::new(rel).parent().unwrap().components() {
            dir.push(part);
            std::fs::create_dir_all(&dir).unwrap();
            self.own(&dir);
        }
        std::fs::write(&path, content).unwrap();
        self.own(&path);
        path
    }

    /// `source` (a directory or a file) mounted read-only at `rel` in the home: a toolchain or a
    /// program installed there.
    pub fn install(&mut self, source: &Path, rel: &str) {
        let target = self.home.join(rel);
        if source.is_dir() {
            std::fs::create_dir_all(&target).unwrap();
        } else {
            self.file(rel, "");
        }
        self.mount(&["--bind", "-o", "ro"], source, &target);
    }

    /// Claude Code from `cached`, its directory in the test VM's cache ([`crate::agent_cli`]),
    /// installed as npm installs it under the user's own prefix (`npm install -g --prefix
    /// ~/.local`): `~/.local/bin/claude`.
    pub fn install_claude_code(&mut self, cli: &Path) {
        self.install(&cli.join("node_modules"), ".local/lib/node_modules");
        let binary = "../lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe";
        self.symlink(".local/bin/claude", binary.as_ref());
    }

    /// A symlink at `rel` in the home (its parents made) to `target`.
    pub fn symlink(&self, rel: &str, target: &Path) {
        let path = self.file(rel, "");
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(target, &path).unwrap();
        std::os::unix::fs::lchown(&path, Some(Self::UID), Some(Self::UID)).unwrap();
    }

    /// Makes `path` the user's.
    pub fn own(&self, path: &Path) {
        std::os::unix::fs::chown(path, Some(Self::UID), Some(Self::UID)).unwrap();
    }

    fn mount(&mut self, options: &[&str], source: &Path, target: &Path) {
        let out = Command::new("mount").args(options).arg(source).arg(target).output().unwrap();
        assert!(out.status.success(), "mount {}: {}", target.display(), stderr(&out));
        self.mounts.push(target.to_owned());
    }
}

impl Default for AgentUser {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for AgentUser {
    fn drop(&mut self) {
        for target in self.mounts.iter().rev() {
            let _ = Command::new("umount").arg(target).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
