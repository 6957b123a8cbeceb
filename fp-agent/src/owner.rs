//! A process named in the name of something it made (a pin directory, a cgroup), by pid and
//! start time: `<prefix><pid>-<start>`, the start time in clock ticks since boot (field 22 of
//! `/proc/<pid>/stat`). A reused pid does not come back with the start time of the process that
//! had it before within a boot, and neither pins nor cgroups outlive one.
use std::io;

use anyhow::Context as _;

/// The process a name names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    pub pid: u32,
    /// In clock ticks since boot; `None` in the names older fp versions gave (`run-<pid>`).
    pub start: Option<u64>,
}

impl Owner {
    /// This process.
    pub fn current() -> anyhow::Result<Self> {
        let pid = std::process::id();
        let (_, start) = stat(pid).with_context(|| format!("reading /proc/{pid}/stat"))?;
        Ok(Self { pid, start: Some(start) })
    }

    /// Its name after `prefix`.
    pub fn name(&self, prefix: &str) -> String {
        match self.start {
            Some(start) => format!("{prefix}{}-{start}", self.pid),
            None => format!("{prefix}{}", self.pid),
        }
    }

    /// The owner `name` names after `prefix`, if it is such a name (`<prefix><pid>` too, the
    /// names of older fp versions).
    pub fn parse(prefix: &str, name: &str) -> Option<Self> {
        let rest = name.strip_prefix(prefix)?;
        let (pid, start) = match rest.split_once('-') {
            Some((pid, start)) => (pid, Some(number(start)?)),
            None => (rest, None),
        };
        Some(Self { pid: u32::try_from(number(pid)?).ok()?, start })
    }

    /// Whether it still runs: its pid names a process started when it was, not a zombie. A name
    /// without a start time is alive while any process has its pid. What cannot be read counts
    /// as alive.
    pub fn alive(&self) -> bool {
        match stat(self.pid) {
            Err(e) => e.kind() != io::ErrorKind::NotFound,
            Ok((state, start)) => {
                self.start.is_none_or(|s| s == start) && !matches!(state, 'Z' | 'X')
            }
        }
    }
}

/// Removes the empty directories in `dir` named after `prefix` by an owner that is gone (the
/// cgroups such owners made and could not remove, having been killed); what fails stays.
pub fn remove_dead(dir: &std::path::Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let owner = name.to_str().and_then(|n| Owner::parse(prefix, n));
        if owner.is_some_and(|o| !o.alive()) {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// Decimal digits only (no sign, no spaces), as fp writes them.
fn number(text: &str) -> Option<u64> {
    text.bytes().all(|b| b.is_ascii_digit()).then(|| text.parse().ok()).flatten()
}

/// The state and start time of process `pid`.
fn stat(pid: u32) -> io::Result<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    parse_stat(&text).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, text))
}

/// The state (field 3) and start time (field 22) of a `/proc/<pid>/stat` line. The command name
/// (field 2, in parentheses) may hold spaces and parentheses: the fields after it follow the last
/// `)`.
fn parse_stat(text: &str) -> Option<(char, u64)> {
    let (_, after) = text.rsplit_once(')')?;
    let mut fields = after.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let start = fields.nth(22 - 4)?.parse().ok()?;
    Some((state, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let owner = Owner { pid: 812, start: Some(4711) };
        assert_eq!(owner.name("run-"), "run-812-4711");
        assert_eq!(Owner::parse("run-", "run-812-4711"), Some(owner));
        assert_eq!(Owner::parse("run-", "run-812"), Some(Owner { pid: 812, start: None }));
        assert_eq!(Owner::parse("fp-probe-", "fp-probe-812-4711"), Some(owner));
        assert_eq!(Owner::parse("fp-probe-", "run-812-4711"), None);
        for other in
            ["run-", "run-x", "run-812-", "run-812-x", "run--1", "run-+1", "v2", "run-1-2-3"]
        {
            assert_eq!(Owner::parse("run-", other), None, "{other}");
        }
        assert_eq!(Owner::parse("run-", "run-99999999999"), None, "not a pid");
    }

    #[test]
    fn stat_lines_parse_whatever_the_command_name() {
        let tail = "S 1 812 812 0 -1 4194560 123 0 0 0 5 6 0 0 20 0 1 0 4711 12345 67 \
                    18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        for comm in ["fp", "a b", "a) (b", "))", "(", ") S 1 2 3"] {
            let line = format!("812 ({comm}) {tail}\n");
            assert_eq!(parse_stat(&line), Some(('S', 4711)), "{line}");
        }
        assert_eq!(parse_stat("812 (fp) Z 1 2"), None, "too short");
        assert_eq!(parse_stat("812 fp S"), None, "no command name");
    }

    #[test]
    fn this_process_is_alive_and_a_reused_pid_is_not_it() {
        let me = Owner::current().unwrap();
        assert_eq!(me.pid, std::process::id());
        assert!(me.alive());
        assert!(Owner { start: None, ..me }.alive());
        let start = me.start.unwrap();
        assert!(!Owner { start: Some(start + 1), ..me }.alive(), "another start time");
        // pid_max is at most 2^22: no process has this pid.
        assert!(!Owner { pid: 1 << 23, start: None }.alive());
    }
}
