//! The lists every session gets, whatever its policy: the safety floor, fp's self-protection and
//! the runtime base. They are compiled in; docs/policy.md lists them.

/// How a floor entry restricts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloorKind {
    /// No read, write or delete.
    Secret,
    /// Read is left to the policy; write and delete are denied.
    ReadOnly,
}

/// A named safety-floor entry; the operator's config can lift it by name (`floor_exceptions`).
pub struct FloorEntry {
    pub name: &'static str,
    pub kind: FloorKind,
    pub globs: &'static [&'static str],
}

const fn secret(name: &'static str, globs: &'static [&'static str]) -> FloorEntry {
    FloorEntry { name, kind: FloorKind::Secret, globs }
}

const fn read_only(name: &'static str, globs: &'static [&'static str]) -> FloorEntry {
    FloorEntry { name, kind: FloorKind::ReadOnly, globs }
}

/// Credentials are denied outright; configuration that changes how the user's or the system's
/// programs behave is read-only. Credential directories match at any depth (every user's home).
pub const SAFETY_FLOOR: &[FloorEntry] = &[
    secret("ssh", &["**/.ssh", "**/.ssh/**"]),
    secret("aws", &["**/.aws", "**/.aws/**"]),
    secret("gnupg", &["**/.gnupg", "**/.gnupg/**"]),
    secret("kube", &["**/.kube", "**/.kube/**"]),
    secret("docker", &["**/.docker", "**/.docker/**"]),
    secret("password-store", &["**/.password-store", "**/.password-store/**"]),
    secret("azure", &["**/.azure", "**/.azure/**"]),
    secret("gcloud", &["~/.config/gcloud", "~/.config/gcloud/**"]),
    secret("1password", &["~/.config/op", "~/.config/op/**"]),
    secret("shadow", &["/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-"]),
    secret("sudoers", &["/etc/sudoers", "/etc/sudoers.d", "/etc/sudoers.d/**"]),
    secret("root-home", &["/root", "/root/**"]),
    secret("ssh-keys", &["**/id_rsa", "**/id_dsa", "**/id_ecdsa", "**/id_ed25519"]),
    secret(
        "key-files",
        &["**/*.pem", "**/*.key", "**/*.p12", "**/*.pfx", "**/*.keystore", "**/*.jks", "**/*.asc"],
    ),
    secret("env-files", &["**/.env", "**/.env.*"]),
    secret(
        "credential-files",
        &[
            "**/credentials.json",
            "**/secrets.yaml",
            "**/secrets.yml",
            "**/secrets.json",
            "**/token.json",
            "**/service-account.json",
            "**/.pgpass",
            "**/.my.cnf",
            "**/.netrc",
            "**/.git-credentials",
        ],
    ),
    read_only(
        "shell-rc",
        &[
            "**/.bashrc",
            "**/.bash_profile",
            "**/.bash_login",
            "**/.bash_logout",
            "**/.profile",
            "**/.zshrc",
            "**/.zshenv",
            "**/.zprofile",
            "**/.zlogin",
            "**/.inputrc",
            "**/.vimrc",
        ],
    ),
    read_only(
        "vcs-config",
        &[
            "**/.gitconfig",
            "~/.config/git",
            "~/.config/git/**",
            "**/.hgrc",
            "**/.npmrc",
            "**/.yarnrc",
            "**/.yarnrc.yml",
            "**/pip.conf",
            "~/.cargo/config",
            "~/.cargo/config.toml",
        ],
    ),
    read_only(
        "system-files",
        &[
            "/etc/hosts",
            "/etc/passwd",
            "/etc/group",
            "/etc/fstab",
            "/etc/resolv.conf",
            "/etc/crontab",
            "/etc/environment",
        ],
    ),
    read_only(
        "system-dirs",
        &[
            "/etc/cron.d/**",
            "/etc/cron.hourly/**",
            "/etc/cron.daily/**",
            "/etc/cron.weekly/**",
            "/etc/cron.monthly/**",
            "/var/spool/cron/**",
            "/etc/systemd/**",
            "/etc/init.d/**",
            "/etc/apt/**",
            "/etc/yum.repos.d/**",
        ],
    ),
];

/// fp's own directories: configuration and policies, state, audit logs, runtime, BPF pins, and
/// the cgroup filesystem that confines sessions. Never writable by a session.
pub const FP_DIRS: &[&str] =
    &["/etc/fp", "/var/lib/fp", "/var/log/fp", "/run/fp", "/sys/fs/bpf", "/sys/fs/cgroup"];

/// fp's secrets (audit signing keys). Never readable by a session either.
pub const FP_SECRET_DIRS: &[&str] = &["/etc/fp/keys", "/var/lib/fp/keys"];

/// `base = "system"`: readable so that any program can start (loader, libraries, locale,
/// timezone, name service, certificates, terminal data, its own /proc entries, devices).
pub const RUNTIME_READ: &[&str] = &[
    "/usr/**",
    "/bin/**",
    "/sbin/**",
    "/lib/**",
    "/lib32/**",
    "/lib64/**",
    "/libx32/**",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d/**",
    "/etc/ld.so.preload",
    "/etc/locale.alias",
    "/etc/locale.conf",
    "/etc/default/locale",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/host.conf",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/ssl/**",
    "/etc/ca-certificates/**",
    "/etc/alternatives/**",
    "/etc/terminfo/**",
    "/etc/inputrc",
    "/etc/bash.bashrc",
    "/etc/profile",
    // The directory itself too: `bash -l` lists it to source what it holds.
    "/etc/profile.d",
    "/etc/profile.d/**",
    "/etc/environment",
    "/etc/gitconfig",
    "~/.gitconfig",
    "~/.config/git/**",
    "/etc/mime.types",
    "/etc/os-release",
    // Harmless probes of runtimes (node, Bun, the agent CLIs): the host's id and kernel, how it
    // overcommits and maps memory, its huge pages, how many files one user may watch.
    "/etc/machine-id",
    "/proc/version",
    "/proc/sys/vm/overcommit_memory",
    "/proc/sys/vm/mmap_min_addr",
    "/proc/sys/fs/inotify/max_user_watches",
    "/sys/kernel/mm/transparent_hugepage/enabled",
    "/sys/kernel/mm/transparent_hugepage/hpage_pmd_size",
    "/proc/self/**",
    "/proc/thread-self/**",
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/stat",
    "/proc/filesystems",
    "/sys/devices/system/cpu/**",
    "/dev/random",
    "/dev/urandom",
    // A shell on a pty reads its directory (ttyname(3) looks for its name there).
    "/dev/pts",
];

/// `base = "system"`: readable and writable (the null devices, the terminal, ptys).
pub const RUNTIME_READ_WRITE: &[&str] =
    &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts/**"];

/// The runtime base's entries in the user's home (`~/.gitconfig`, ...) that a safety floor makes
/// unreadable for a session, e.g. every one of them when `~` is `/root` (floor `root-home`), so
/// that `fp run` can say so before the command starts (git then fails to read its configuration).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UnreadableBase {
    /// The entries as written.
    pub entries: Vec<String>,
    /// The floors that remove them.
    pub floors: Vec<String>,
}

impl UnreadableBase {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use crate::policy::{EffectivePolicy, LoadOptions};

    fn deny_policy(user: &str) -> EffectivePolicy {
        let options = LoadOptions { user: Some(user.into()), ..LoadOptions::default() };
        EffectivePolicy::from_deny_paths(&["/srv/secrets".into()], &options).unwrap()
    }

    /// Running as root, `~` is `/root`, which the `root-home` floor makes unreadable: the base's
    /// git configuration goes with it, and `fp run` says so.
    #[test]
    fn the_root_home_floor_removes_the_base_entries_in_roots_home() {
        let unreadable = deny_policy("root").unreadable_base();
        assert_eq!(unreadable.entries, ["~/.gitconfig", "~/.config/git"]);
        assert_eq!(unreadable.floors, ["safety floor root-home"]);
    }

    #[test]
    fn a_home_outside_the_floors_keeps_the_base() {
        assert!(deny_policy("nobody").unreadable_base().is_empty());
    }
}
