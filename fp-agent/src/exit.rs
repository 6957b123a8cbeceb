//! Every exit code of the `fp` command, in one table. They are contracts (scripts, systemd's
//! `RestartPreventExitStatus`, `approval_command` callers): README.md lists them per command, and
//! docs/audit.md, docs/policy.md, docs/api.md, docs/prompt.md and docs/operations.md repeat the
//! ones of their commands. Change none without changing those.
//!
//! | code | meaning | commands |
//! |---|---|---|
//! | 0 | done; the log is intact | every command |
//! | 1 | the daemon refused the request | `sessions`, `status`, `approvals`, `approve`, `deny` |
//! | 1 | a policy error | `policy check / explain / compile` |
//! | 1 | tamper evidence | `audit verify`, `audit replay` (refusing to replay) |
//! | 1 | BPF LSM programs do not load here | `kernel probe` |
//! | 2 | a usage error | `policy check / explain / compile` |
//! | 2 | the log cannot be verified; any other failure | `audit` (every subcommand) |
//! | 2 | a kernel field or the kernel's BTF is missing | `kernel offsets` |
//! | 3 | no daemon is running | `sessions`, `status`, `approvals`, `approve`, `deny` |
//! | 3 | intact with warnings | `audit verify` |
//! | 78 | a bad config (EX_CONFIG: systemd does not restart it) | `daemon` |
//! | 125 | fp itself failed (for `run`: nothing was run) | `run`, `daemon`, and the daemon's clients |
//! | 127 | the command cannot be started | `run` |
//! | 128 + N | the command was killed by signal N | `run` (else: the command's own status) |

/// Done (and for `fp audit verify`: intact, no warnings).
pub const OK: u8 = 0;

/// The daemon answered with an error about the request (unknown id, already decided, not
/// allowed, a bad request).
pub const REFUSED: u8 = 1;
/// No daemon answers on the socket (it is absent or refuses connections).
pub const NO_DAEMON: u8 = 3;

/// `fp policy`: the policy does not load (the message has file:line:col and what was expected).
pub const POLICY_ERROR: u8 = 1;
/// `fp policy`: bad flags or arguments.
pub const USAGE_ERROR: u8 = 2;

/// `fp audit verify`: the log verifies, no warnings.
pub const INTACT: u8 = OK;
/// `fp audit verify`: tamper evidence; `fp audit replay` refuses such a log without `--force`.
pub const TAMPER: u8 = 1;
/// `fp audit verify`: the log cannot be verified; every other `fp audit` failure.
pub const CANNOT_VERIFY: u8 = 2;
/// `fp audit verify`: intact with warnings.
pub const WARNINGS: u8 = 3;

/// `fp kernel probe`: the chosen backend's programs do not load and attach here.
pub const NO_BACKEND: u8 = 1;
/// `fp kernel offsets`: a field the programs read, or the kernel's BTF, is missing.
pub const MISSING_FIELD: u8 = 2;

/// `fp daemon`: a bad config file (EX_CONFIG, sysexits.h; packaging/fp.service lists it in
/// RestartPreventExitStatus).
pub const BAD_CONFIG: u8 = 78;

/// fp itself failed, as opposed to the command it runs or the daemon's answer.
pub const FP_ERROR: u8 = 125;
/// `fp run`: the command cannot be started.
pub const CANNOT_START: u8 = 127;
/// `fp run`: the command was killed by a signal; its number is added.
pub const SIGNALED: u8 = 128;
