//! The one decision of every hook but renames and links: walk, evaluate, apply grants and the
//! prompt broker, settle, report; and its adapters for the hooks' argument shapes.
use aya_ebpf::helpers::{bpf_ktime_get_boot_ns, generated::bpf_loop};
use core::ffi::c_void;
use fp_common::{
    kernel::{
        GrantValue, Hook, KernelOp, MAX_WALK, PATH_MAX, Reason, SESSION_AUDIT_ONLY,
        SESSION_FULL_AUDIT, SESSION_LINKS_PENDING, SessionInfo, after_grant,
    },
    policy::{NO_RULE, Op, TableVerdict},
};

use crate::{
    cache::{self, Fill},
    created, dirs,
    kernel::{EACCES, OFF_PATH_MNT, file_path, load, off, path_parts, several_links},
    outcome::{Outcome, by_identity},
    prompt::{broker_alive, grant, mark_pending},
    report::{Report, report},
    session::{Session, count, unreadable},
    state::{
        SCRATCH, Scratch, outcome_of,
        walk::{NO_MOUNT, RESOLVED, Walk, start_walk},
    },
    tables::{evaluate, tables_exist},
    walk::walk_step,
    writers,
};

/// Resolves the file [`set_file`] left in the walk (`vfsmount`, `dentry`; `file` is its proof)
/// to its path from the root of the mount tree (not the task's root: chroot does not change it),
/// offering every dentry's inode-table entry on the way, then evaluates the path against the
/// session's tables with the decision core, for all three ops at once. Leaves the walk's results
/// in `s.walk` for the event. With [`NO_MOUNT`] only inode identity decides: a path relative to
/// a filesystem root must never be matched against rules written from the system root.
///
/// The outcomes are in `s.outcomes` (read them with [`outcome_of`]), the ops they allow in
/// `s.allowed`.
///
/// A call of [`fp_check`], which the verifier checks once per program as a global function
/// (whatever the callers' states), rather than once per state reaching each call site.
///
/// `named`: [`dirs::name::read_name`] read the name for the directory cache ([`crate::dirs`]), whose
/// directory entry may then stand for the walk (not for renames and links, whose walks serve
/// more than the decision).
#[inline(always)]
pub(crate) fn check(s: *mut Scratch, file: FileSet, named: bool) {
    let FileSet(()) = file;
    // SAFETY: this CPU's scratch value.
    unsafe {
        let w = &raw mut (*s).walk;
        let in_dir = named && dirs::fp_dir_resolve() == 0;
        (*w).in_dir = in_dir as u64;
        if fp_check() != 0 {
            (*s).outcomes = [Outcome::UNRESOLVED; 3];
            (*s).allowed = (0, 0);
        }
    }
}

/// [`check`] as a global BPF function, on the arguments in the scratch value's walk: verified
/// on its own, so it costs the verifier the same in every program, once (kept global by
/// `--export` at link time, see fp-agent's build.rs). Nonzero without a scratch value.
///
/// Also leaves the ops the outcomes allow in `s.allowed` ([`cache::allowed_ops`]): built bit by
/// bit, a set of ops is a different constant on each of the verifier's paths; read back from
/// the scratch value, it is one unknown number, and the rest of the decision is verified once
/// rather than once per set.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn fp_check() -> i32 {
    let Some(s) = SCRATCH.get_ptr_mut(0) else {
        return 1;
    };
    walk_and_evaluate(s);
    // SAFETY: this CPU's scratch value.
    unsafe { (*s).allowed = cache::allowed_ops(s) };
    0
}

/// [`fp_check`]'s walk and evaluation: the outcomes into `s.outcomes`.
#[inline(always)]
fn walk_and_evaluate(s: *mut Scratch) {
    // `s` stays a raw pointer, not `&mut`: bpf_loop's callback writes the scratch value behind
    // the compiler's back, so a `&mut` (noalias) would let it reuse values from before the loop.
    // SAFETY: this CPU's scratch value; every access goes through the raw pointer.
    unsafe {
        // Field by field: a struct literal is built on the stack first, and the BPF stack is
        // small (512 bytes for a program and the subprograms it calls).
        let w = &raw mut (*s).walk;
        let tables = core::ptr::read_volatile(&(*w).tables);
        let vfsmount = core::ptr::read_volatile(&(*w).vfsmount);
        let in_dir = core::ptr::read_volatile(&(*w).in_dir) != 0;
        if !in_dir {
            start_walk(w);
            (*s).path[PATH_MAX] = 0;
            // The callback finds its state in the scratch map itself.
            bpf_loop(MAX_WALK as u32, walk_step as *mut c_void, core::ptr::null_mut(), 0);
        }
        let out = &raw mut (*s).outcomes;
        let state = core::ptr::read_volatile(&(*s).walk.state);
        if state != RESOLVED {
            *out = [Outcome::UNRESOLVED; 3];
            return;
        }
        let pos = core::ptr::read_volatile(&(*s).walk.pos) as usize;
        if pos == PATH_MAX {
            (*s).path[PATH_MAX - 1] = b'/'; // the root itself
            (*s).walk.pos = (PATH_MAX - 1) as u64;
        }
        let hit = &raw const (*s).walk.hit;
        if vfsmount == NO_MOUNT {
            for op in Op::ALL {
                *op.of_mut(&mut *out) = by_identity(&op.of(&*hit));
            }
            return;
        }
        evaluate(s, tables, &*hit, in_dir);
        let eval = &(*s).eval;
        for op in Op::ALL {
            let (decision, hit) = (eval.decision(op), op.of(&*hit));
            let reason = if hit.rank != 0 && op.of(&eval.best) == hit {
                Reason::InodeRule
            } else if decision.rule_id == NO_RULE {
                Reason::Default
            } else {
                Reason::PathRule
            };
            *op.of_mut(&mut *out) =
                Outcome { verdict: decision.verdict, reason, rule_id: decision.rule_id };
        }
    }
}

/// What [`check`] takes to show that its file was set in the walk: only [`set_file`] makes one.
pub(crate) struct FileSet(());

/// Sets the file a decision is about in the walk `w`, with the session's tables and the devices of
/// their inode-table entries (`info`). The arguments go through the scratch value:
/// a global function takes scalars only, and a hook's dentry argument is a typed pointer to the
/// verifier.
#[inline(always)]
pub(crate) unsafe fn set_file(
    w: *mut Walk,
    info: &SessionInfo,
    vfsmount: u64,
    dentry: u64,
) -> FileSet {
    // SAFETY: the caller's scratch value.
    unsafe {
        (*w).tables = info.tables;
        (*w).inode_devices = info.inode_devices;
        (*w).vfsmount = vfsmount;
        (*w).dentry = dentry;
    }
    FileSet(())
}

/// A decision on this CPU's scratch value (see [`Scratch`]), from its begin to its drop, which
/// ends it.
pub(crate) struct Decision {
    s: *mut Scratch,
    /// The scratch's generation as the decision began, which every later check compares: 0 (a
    /// value it never holds while a decision runs) when another decision on this CPU was in
    /// progress then, preempted in the middle, and may write the scratch again at any moment.
    pub(crate) generation: u64,
}

impl Decision {
    #[inline(always)]
    pub(crate) fn begin(s: *mut Scratch) -> Self {
        // SAFETY: this CPU's scratch value.
        let now = unsafe { writers::begin(&raw mut (*s).generation) };
        Decision { s, generation: if writers::alone(now) { now } else { 0 } }
    }
}

impl Drop for Decision {
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: as in `begin`.
        unsafe { writers::end(&raw mut (*self.s).generation) };
    }
}

/// Ends a decision: the outcome, unless something interfered with it ([`interference`]).
#[inline(always)]
pub(crate) fn settle(
    session: &Session,
    s: *mut Scratch,
    generation: u64,
    outcome: Outcome,
) -> Outcome {
    interference(session, s, generation, outcome).unwrap_or(outcome)
}

/// What the outcome of the decision `generation` becomes if something interfered with it: a
/// reload (or a restarted agent's takeover) switched the session to other tables meanwhile
/// ([`under_replaced_tables`]), or another decision on this CPU reused the scratch (fails
/// closed).
#[inline(always)]
fn interference(
    session: &Session,
    s: *mut Scratch,
    generation: u64,
    outcome: Outcome,
) -> Option<Outcome> {
    if session.tables_now() != session.info.tables {
        count(session.id, |c| unsafe { &raw mut (*c).raced_reload });
        return Some(under_replaced_tables(session.info.tables, outcome));
    }
    // SAFETY: this CPU's scratch value.
    if unsafe { core::ptr::read_volatile(&(*s).generation) } != generation {
        return Some(Outcome::UNRESOLVED);
    }
    None
}

/// The outcome of a decision during which a reload (or an agent's takeover) switched its session
/// to other tables. fp-agent removes the replaced tables only after the switch, their header
/// first: while the header of the tables the decision read is still there, nothing of them was
/// removed before its reads, and its verdict stands, made under the policy in force when it
/// began (an allowed open is not refused because a reload ran beside it); its rule belongs to
/// the replaced policy, so the outcome names the reload instead. Without the header it may
/// have read them half removed, and is denied (redoing it would double the code the verifier
/// walks in every program).
#[inline(always)]
fn under_replaced_tables(tables: u64, outcome: Outcome) -> Outcome {
    match tables_exist(tables) {
        true => Outcome { verdict: outcome.verdict, ..Outcome::RELOADED },
        false => Outcome::RELOADED,
    }
}

/// An op's outcome after a remembered grant of the session (opens and execs only).
#[inline(always)]
fn granted(outcome: Outcome, grant: Option<&GrantValue>, op: Op, now: u64) -> Outcome {
    let verdict = after_grant(outcome.verdict, grant, op, now);
    if verdict == outcome.verdict {
        return outcome;
    }
    Outcome { verdict, reason: Reason::Granted, rule_id: outcome.rule_id }
}

/// Whether ops a cache allows (`allowed`, [`Op::bit`]s) answer a decision of `op` (and a
/// write, if `and_write`) without the walk: not in a full-audit session, which reports allows too,
/// with their path, nor while the session's hardlinks are being recorded (a cached write to a file
/// with several links would bypass their check; the complete tables come with a new tables id,
/// which no entry cached meanwhile matches).
#[inline(always)]
pub(crate) fn answered(session: &Session, op: KernelOp, and_write: bool, allowed: u64) -> bool {
    let needs = op.policy_op().bit() as u64 | if and_write { Op::Write.bit() as u64 } else { 0 };
    session.info.flags & (SESSION_FULL_AUDIT | SESSION_LINKS_PENDING) == 0
        && allowed & needs == needs
}

/// The one decision of every hook but renames and links: may the current task, in `session`, do
/// `op` (and, if `and_write`, also write: an open for reading and writing) to (`vfsmount`,
/// `dentry`)? Returns 0 or -EACCES. The strictest verdict of the ops decides. Prompt and Defer
/// verdicts deny (with their verdict in the event) until a userspace broker answers them; a
/// prompt of an open a remembered grant covers is allowed.
#[inline(always)]
pub(crate) fn decide(
    session: &Session,
    hook: Hook,
    op: KernelOp,
    and_write: bool,
    vfsmount: u64,
    dentry: u64,
) -> i32 {
    let Some(s) = SCRATCH.get_ptr_mut(0) else {
        return -EACCES; // fail closed: no scratch space means no check
    };
    let (first, second) = (op.policy_op(), Op::Write);
    // A name being created is a negative dentry, which the cache never keeps: no lookup (its slot
    // would be a page touched for nothing).
    let creates = matches!(hook, Hook::PathMknod | Hook::PathMkdir | Hook::PathSymlink);
    if !creates
        && answered(
            session,
            op,
            and_write,
            cache::allowed(s, session.info.tables, vfsmount, dentry),
        )
    {
        return 0;
    }
    let decision = Decision::begin(s);
    let generation = decision.generation;
    // Inode hooks only read the cache: their entries come from the walks of opens (see cache).
    let seqs = if vfsmount == NO_MOUNT { None } else { cache::sequences() };
    // SAFETY: this CPU's scratch value.
    let file = unsafe { set_file(&raw mut (*s).walk, &session.info, vfsmount, dentry) };
    let named = seqs.is_some_and(|seqs| dirs::name::read_name(s, vfsmount, dentry, seqs));
    if named && unmatched_in_dir(session, s, generation, (hook, op, and_write)) {
        return 0;
    }
    check(s, file, named);
    let mut outcome = outcome_of(s, first);
    let mut other = outcome_of(s, second);
    if session.info.flags & SESSION_LINKS_PENDING != 0 && several_links(dentry) {
        if first == Op::Write {
            outcome = outcome.links_pending();
        }
        if and_write {
            other = other.links_pending();
        }
    }
    // SAFETY: this CPU's scratch value, written by `check` (as an unknown number: see fp_check).
    let allowed_ops = unsafe { core::ptr::read_volatile(&(*s).allowed) };
    let cacheable = cache::cacheable(s, allowed_ops);
    // A remembered grant answers a prompt of an open or exec here, per op: no pending entry, and
    // no broker needed (fanotify still asks the broker, which answers from its own grants).
    // Looked up before the generation check, which also covers this use of the scratch.
    let held_by_broker = matches!(hook, Hook::FileOpen | Hook::BprmCheckSecurity);
    let prompts = outcome.verdict == TableVerdict::Prompt
        || (and_write && other.verdict == TableVerdict::Prompt);
    if held_by_broker && prompts {
        // SAFETY: a helper call without arguments.
        let now = unsafe { bpf_ktime_get_boot_ns() };
        let grant = grant(session.id, s);
        outcome = granted(outcome, grant.as_ref(), first, now);
        other = granted(other, grant.as_ref(), second, now);
    }
    let mut reported = op;
    if and_write && other.verdict.strictness() > outcome.verdict.strictness() {
        (outcome, reported) = (other, KernelOp::Write);
    }
    // Read back from the scratch value: one unknown outcome to the verifier, which otherwise
    // follows the rest of the decision once per combination of grants and ops that led here.
    // SAFETY: this CPU's scratch value.
    let (outcome, reported) = unsafe {
        core::ptr::write_volatile(&raw mut (*s).decided, (outcome, reported));
        core::ptr::read_volatile(&raw const (*s).decided)
    };
    let interfered = interference(session, s, generation, outcome);
    // What an intact decision leaves for later ones: the sequences its walk ran under.
    let intact = seqs.filter(|_| interfered.is_none());
    if let Some(seqs) = intact {
        if let Some(fill) = cacheable {
            let _ = cache::fill(s, fill, session.info.tables, vfsmount, dentry, seqs);
        }
        dirs::fill(generation, seqs);
    }
    // A name being created is a negative dentry, which the cache never keeps: the open that
    // creates it takes this decision from the creation slot instead.
    if hook == Hook::PathMknod {
        created::remember(generation, intact, allowed_ops);
    }
    let outcome = interfered.unwrap_or(outcome);
    // Opens (and execs) with a prompt or defer verdict are the broker's to answer while it lives:
    // fanotify holds them. The open's file is marked pending until the broker answers.
    let brokered = matches!(outcome.verdict, TableVerdict::Prompt | TableVerdict::Defer)
        && held_by_broker
        && broker_alive();
    if brokered && (hook != Hook::FileOpen || mark_pending(session.id, s)) {
        return 0;
    }
    let refused = outcome.verdict != TableVerdict::Allow;
    let enforced = refused && session.info.flags & SESSION_AUDIT_ONLY == 0;
    let full_audit =
        session.info.flags & SESSION_FULL_AUDIT != 0 && !matches!(reported, KernelOp::Read);
    if refused || full_audit {
        report(session, &outcome, &Report::new(hook, reported, enforced));
    }
    if enforced { -EACCES } else { 0 }
}

/// Whether the directory cache's verdict for unmatched names ([`crate::dirs`]) allows the
/// decision `generation` on the name [`dirs::name::read_name`] read (in the file the walk is set to):
/// what it allows then goes where the decision's allows would (the creation slot for a name being
/// created, the verdict cache for a file), and nothing is reported, as for any cached allow.
#[inline(always)]
fn unmatched_in_dir(
    session: &Session,
    s: *mut Scratch,
    generation: u64,
    (hook, op, and_write): (Hook, KernelOp, bool),
) -> bool {
    let (allowed, local) = dirs::unmatched::unmatched();
    if !answered(session, op, and_write, allowed)
        || interference(session, s, generation, Outcome::ALLOWED).is_some()
    {
        return false;
    }
    // SAFETY: this CPU's scratch value, as `dirs::name::read_name` left it.
    let (seqs, inode) = unsafe {
        (
            core::ptr::read_volatile(&raw const (*s).name.seqs),
            core::ptr::read_volatile(&raw const (*s).name.inode),
        )
    };
    if hook == Hook::PathMknod {
        created::remember(generation, Some(seqs), (allowed, local));
    } else if inode != 0 {
        // SAFETY: as above.
        let (tables, vfsmount, dentry) = unsafe {
            let w = &raw const (*s).walk;
            ((*w).tables, (*w).vfsmount, (*w).dentry)
        };
        let _ = cache::fill(s, Fill { inode, allowed, local }, tables, vfsmount, dentry, seqs);
    }
    true
}

/// `decide` for the inode hooks, which get a dentry but no mount: a write decided by identity.
#[inline(always)]
pub(crate) fn decide_inode(session: &Session, hook: Hook, dentry: u64) -> i32 {
    decide(session, hook, KernelOp::Write, false, NO_MOUNT, dentry)
}

/// `decide` for a `struct path *` (BTF-typed: a hook's argument, or within one, see
/// [`load`]); `and_write`: the operation also writes (see [`decide`]).
#[inline(always)]
pub(crate) fn decide_path(
    session: &Session,
    hook: Hook,
    op: KernelOp,
    and_write: bool,
    path: u64,
) -> i32 {
    let (mnt, dentry) = path_parts(path);
    if mnt == 0 || dentry == 0 {
        return unreadable(session);
    }
    decide(session, hook, op, and_write, mnt, dentry)
}

/// `decide` for a dentry in the directory `dir` (a BTF-typed `struct path *`): the name being
/// created, removed or linked.
#[inline(always)]
pub(crate) fn decide_in_dir(
    session: &Session,
    hook: Hook,
    op: KernelOp,
    dir: u64,
    dentry: u64,
) -> i32 {
    match load::<u64>(dir, off(&OFF_PATH_MNT)) {
        0 => unreadable(session),
        mnt => decide(session, hook, op, false, mnt, dentry),
    }
}

/// `decide` for a BTF-typed `struct file *`.
#[inline(always)]
pub(crate) fn decide_file(
    session: &Session,
    hook: Hook,
    op: KernelOp,
    and_write: bool,
    file: u64,
) -> i32 {
    decide_path(session, hook, op, and_write, file_path(file))
}
