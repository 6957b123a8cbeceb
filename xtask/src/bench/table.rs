//! The kernel bench as data: its phases, its workloads, the columns comparing two phases and the
//! goals, which the guest script's assembly, the parser and the report read. The guest script
//! (guest/kernel.sh) runs the phases and measures the workloads; the tests check that it and
//! these tables name the same ones. What each phase and workload measures: docs/performance.md;
//! adding a workload: docs/testing.md.

/// The phases of every round, in the order they run (and their columns in the report).
pub(super) const PHASES: [&str; 13] = [
    // No BPF LSM program loaded: the report's phase columns are ratios to it (it runs first).
    "baseline",
    // A pass-through program on every hook fp attaches, attached globally.
    "noop",
    // `noop` with the hooks fp attaches per cgroup attached per cgroup too, measured in a cgroup
    // below the one they are attached to (the kernel runs a cgroup's and its ancestors' programs
    // alike): the floor of fp's design inside a session.
    "noop-cgroup",
    // A pass-through fmod_ret program (fentry where the function returns nothing) on the kernel's
    // `security_*` function of every hook fp attaches: the floor of the backend for kernels
    // without the BPF LSM.
    "noop-fmod-ret",
    // Outside a session, while one runs (fp's programs attached).
    "outside",
    // Inside a session under the base policy plus 1 generated rule.
    "inside",
    // Inside a session under the base policy plus N generated rules.
    "inside-1000",
    "inside-10000",
    // Under a Landlock ruleset of the base policy's shape.
    "landlock",
    // Outside and inside a session whose policy adds a prompt rule (`<workspace>/secrets/**`,
    // which no workload touches) to the base policy plus 1.
    "outside-prompt",
    "inside-prompt",
    // Outside and inside a session of the base policy plus 1 on fp's fmod_ret backend
    // (`FP_BACKEND=fmod_ret`): its programs on the kernel's `security_*` functions, for every
    // task.
    "outside-fmod-ret",
    "inside-fmod-ret",
];

/// The unit a workload is reported in.
#[derive(Clone, Copy)]
pub(super) enum Unit {
    /// Nanoseconds per operation of a loop of `fp-bench-load`.
    NsPerOp,
    /// Milliseconds per run of a whole command (`timed` in the guest script).
    Ms,
}

impl Unit {
    /// Its label in the report.
    pub(super) fn label(self) -> &'static str {
        match self {
            Unit::NsPerOp => "ns/op",
            Unit::Ms => "ms",
        }
    }

    /// The factor from the guest's ns to it.
    pub(super) fn scale(self) -> f64 {
        match self {
            Unit::NsPerOp => 1.0,
            Unit::Ms => 1e-6,
        }
    }
}

/// A workload: the guest prints `BENCH <phase> <name> <round> <ns>` for it.
pub(super) struct Workload {
    pub(super) name: &'static str,
    pub(super) unit: Unit,
    /// Whether every phase must report it (a missing figure fails the run): the loops of
    /// fp-bench-load (`| out` in the script), which leave a hole rather than an exit status when
    /// they fail in their pipeline. `git-status` and `build` need git and cc in the guest.
    pub(super) always: bool,
}

/// The workloads, in the report's row order.
pub(super) const WORKLOADS: [Workload; 12] = [
    Workload { name: "open-d2", unit: Unit::NsPerOp, always: true },
    Workload { name: "open+close", unit: Unit::NsPerOp, always: true },
    Workload { name: "open-d8", unit: Unit::NsPerOp, always: true },
    Workload { name: "stat", unit: Unit::NsPerOp, always: true },
    Workload { name: "churn", unit: Unit::NsPerOp, always: true },
    Workload { name: "log-send", unit: Unit::NsPerOp, always: true },
    Workload { name: "connect", unit: Unit::NsPerOp, always: true },
    Workload { name: "tar-x", unit: Unit::Ms, always: false },
    Workload { name: "find+cat", unit: Unit::Ms, always: false },
    Workload { name: "procs", unit: Unit::Ms, always: false },
    Workload { name: "git-status", unit: Unit::Ms, always: false },
    Workload { name: "build", unit: Unit::Ms, always: false },
];

/// The names of the workloads every phase must report.
pub(super) fn always_measured() -> impl Iterator<Item = &'static str> {
    WORKLOADS.iter().filter(|w| w.always).map(|w| w.name)
}

/// A column of the report besides the phases': the ratio of `phase` to `to` per round, shown
/// when the run measured both.
pub(super) struct Compared {
    pub(super) phase: &'static str,
    pub(super) to: &'static str,
    pub(super) title: &'static str,
}

/// The comparing columns, in the report's order after the phases'.
pub(super) const COMPARED: [Compared; 5] = [
    Compared { phase: "outside", to: "noop", title: "outside/noop" },
    Compared { phase: "outside-fmod-ret", to: "noop-fmod-ret", title: "fmod-ret outside/noop" },
    Compared { phase: "inside", to: "noop-cgroup", title: "inside/noop-cgroup" },
    Compared { phase: "inside", to: "landlock", title: "inside/landlock" },
    Compared { phase: "inside-10000", to: "inside", title: "10000/1 rules" },
];

/// A goal: the median over the rounds of `phase` / `to` on each of `workloads` is at most
/// `limit`. The report prints `goal <name> <workload> <= <limit>x: met|NOT met (...)` per
/// workload when the run measured both phases.
pub(super) struct Goal {
    pub(super) name: &'static str,
    pub(super) phase: &'static str,
    pub(super) to: &'static str,
    pub(super) limit: f64,
    pub(super) workloads: &'static [&'static str],
}

/// The open workloads, where issue 14 sets most goals.
const OPENS: &[&str] = &["open-d2", "open+close", "open-d8"];

/// Issue 14's, 15's and 54's goals, in the report's order.
pub(super) const GOALS: [Goal; 9] = [
    Goal { name: "outside/noop", phase: "outside", to: "noop", limit: 1.01, workloads: OPENS },
    Goal { name: "inside/landlock", phase: "inside", to: "landlock", limit: 1.0, workloads: OPENS },
    Goal {
        name: "inside/baseline",
        phase: "inside",
        to: "baseline",
        limit: 1.25,
        workloads: OPENS,
    },
    Goal {
        name: "flat inside-10000/inside",
        phase: "inside-10000",
        to: "inside",
        limit: 1.05,
        workloads: OPENS,
    },
    Goal {
        name: "inside/noop",
        phase: "inside",
        to: "noop",
        limit: 1.10,
        workloads: &["tar-x", "find+cat", "build"],
    },
    Goal {
        name: "outside-prompt/outside",
        phase: "outside-prompt",
        to: "outside",
        limit: 1.02,
        workloads: &["open+close", "tar-x", "build"],
    },
    Goal {
        name: "inside-prompt/inside",
        phase: "inside-prompt",
        to: "inside",
        limit: 1.10,
        workloads: &["tar-x", "build"],
    },
    // The fmod_ret backend: outsiders pay its no-op floor (every task runs its programs) and
    // sessions no more than on the BPF LSM.
    Goal {
        name: "outside-fmod-ret/noop-fmod-ret",
        phase: "outside-fmod-ret",
        to: "noop-fmod-ret",
        limit: 1.02,
        workloads: OPENS,
    },
    Goal {
        name: "inside-fmod-ret/inside",
        phase: "inside-fmod-ret",
        to: "inside",
        limit: 1.0,
        workloads: OPENS,
    },
];

/// Issue 53's goal: an agent CLI's time to its first model request, started through the daemon
/// under its profile, is at most this many times its time alone.
pub(super) const AGENT_START_LIMIT: f64 = 1.10;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The workloads the kernel bench's guest script measures: `| out $1 NAME $2` after a loop of
    /// fp-bench-load, `timed $1 $2 NAME '...'` around a command.
    fn workloads_in_script() -> Vec<&'static str> {
        super::super::SCRIPT
            .lines()
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                match fields.as_slice() {
                    [.., "|", "out", "$1", name, "$2"] | ["timed", "$1", "$2", name, ..] => {
                        Some(*name)
                    }
                    _ => None,
                }
            })
            .collect()
    }

    /// The phases the kernel bench's guest script runs: the words after `has` (the guards of
    /// `--phases`) and after `measure.sh`, `inside-$n` once per value of the `for n in` loop
    /// around it, a `${3:-PHASE}` as its default.
    fn phases_in_script() -> BTreeSet<String> {
        let mut phases = BTreeSet::new();
        let mut loop_values: Vec<&str> = Vec::new();
        for line in super::super::SCRIPT.lines() {
            if let Some(values) = line.trim().strip_prefix("for n in ") {
                loop_values = values.trim_end_matches("; do").split(' ').collect();
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            for pair in words.windows(2) {
                if pair[0] != "has" && !pair[0].ends_with("/measure.sh") {
                    continue;
                }
                let word = pair[1].trim_end_matches([';', '}']);
                let name = word.strip_prefix("${3:-").unwrap_or(word);
                if let Some(prefix) = name.strip_suffix("$n") {
                    phases.extend(loop_values.iter().map(|n| format!("{prefix}{n}")));
                } else if name.starts_with(|c: char| c.is_ascii_lowercase()) {
                    phases.insert(name.to_string());
                }
            }
        }
        phases
    }

    #[test]
    fn the_table_and_the_guest_script_name_the_same_workloads() {
        let table: BTreeSet<&str> = WORKLOADS.iter().map(|w| w.name).collect();
        let script = workloads_in_script();
        assert_eq!(table.len(), WORKLOADS.len(), "a workload has two rows");
        assert_eq!(script.len(), table.len(), "guest/kernel.sh measures a workload twice");
        assert_eq!(table, script.into_iter().collect(), "guest/kernel.sh against WORKLOADS");
    }

    #[test]
    fn the_table_and_the_guest_script_name_the_same_phases() {
        let mut script = phases_in_script();
        assert!(script.remove("warm-up"), "guest/kernel.sh's untimed pass");
        let table: BTreeSet<String> = PHASES.iter().map(|p| p.to_string()).collect();
        assert_eq!(table.len(), PHASES.len(), "a phase is listed twice");
        assert_eq!(table, script, "guest/kernel.sh against PHASES");
    }

    #[test]
    fn columns_and_goals_name_phases_and_workloads_of_the_table() {
        let workload = |name: &str| WORKLOADS.iter().any(|w| w.name == name);
        for c in &COMPARED {
            assert!(PHASES.contains(&c.phase) && PHASES.contains(&c.to), "{}", c.title);
        }
        for g in &GOALS {
            assert!(PHASES.contains(&g.phase) && PHASES.contains(&g.to), "{}", g.name);
            assert!(g.workloads.iter().all(|w| workload(w)), "{}", g.name);
        }
        assert_eq!(PHASES[0], "baseline", "the report's ratios are to the first phase");
    }
}
