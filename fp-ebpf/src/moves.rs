//! Renames and links: both names walked by one bpf_loop callback, and the REFER rule of
//! fp_common::refer on them.
use aya_ebpf::helpers::generated::{bpf_loop, bpf_probe_read_kernel};
use core::ffi::c_void;
use fp_common::{
    kernel::{
        EVENT_EXCHANGE, EVENT_MOVE_DIR, EVENT_TARGET_EXISTS, Hook, Op, PATH_MAX, Reason,
        SESSION_AUDIT_ONLY, SESSION_FULL_AUDIT,
    },
    policy::{MAX_PREFIX, Op as PolicyOp, TableVerdict},
    refer::{self, Below, MoveKind, MoveSide, MoveVerdict},
};

use crate::{
    decide::{Outcome, begin, check, outcome_of, settle},
    kernel::{EACCES, EXDEV, dentry_kind},
    maps::{INTERIOR, SCRATCH, Scratch},
    report::{MoveEvent, Report, report},
    session::{Session, unreadable},
    tables::{ScratchPath, evaluate, prefix_key},
    walk::RESOLVED,
};

/// Both names of a move (index 0 the source, 1 the target), filled in by [`decide_move`] and
/// walked by [`move_side_step`]. Plain integers only (see [`Walk`]).
#[repr(C)]
pub(crate) struct MoveNames {
    tables: u64,
    /// A directory moves: both names need the context below them.
    dirs: u64,
    mnt: [u64; 2],
    dentry: [u64; 2],
    exists: [u64; 2],
    dir: [u64; 2],
    /// Set by the walk: the name was resolved.
    resolved: [u64; 2],
    /// The source's identity, for the event (the walk's is the target's by then).
    ino: u64,
    dev: u64,
}

/// bpf_loop callback over the two names of a move: the code that walks and evaluates one name is
/// then verified once, not once per name (it is most of the load time of path_rename and
/// path_link).
extern "C" fn move_side_step(index: u64, _ctx: *mut c_void) -> i64 {
    let Some(s) = SCRATCH.get_ptr_mut(0) else {
        return 1;
    };
    let side = (index & 1) as usize;
    // SAFETY: this CPU's scratch value, through the raw pointer (see `check`).
    unsafe {
        let names = &raw mut (*s).mv;
        let at = ((*names).tables, (*names).mnt[side], (*names).dentry[side]);
        let how = ((*names).exists[side] != 0, (*names).dir[side] != 0, (*names).dirs != 0);
        (*names).resolved[side] = move_side(s, side, at, how) as u64;
        if side == 0 {
            save_source(s);
            (*names).ino = core::ptr::read_volatile(&(*s).walk.ino);
            (*names).dev = core::ptr::read_volatile(&(*s).walk.dev);
        }
    }
    0
}

/// One name of a move (`side` 0 the source, 1 the target), walked and evaluated once for all
/// ops (plus the context below it when a directory moves), into `s.sides[side]` and
/// `s.side_outcomes[side]`; leaves its path in the scratch buffer. False: it cannot be resolved.
#[inline(always)]
fn move_side(
    s: *mut Scratch,
    side: usize,
    (tables, vfsmount, dentry): (u64, u64, u64),
    (exists, dir, dirs): (bool, bool, bool),
) -> bool {
    check(s, tables, vfsmount, dentry);
    let outcomes = [
        outcome_of(s, PolicyOp::Read),
        outcome_of(s, PolicyOp::Write),
        outcome_of(s, PolicyOp::Delete),
    ];
    if outcomes[0].reason == Reason::Unresolved || side > 1 {
        return false;
    }
    let node = [outcomes[0].verdict, outcomes[1].verdict, outcomes[2].verdict];
    // SAFETY: this CPU's scratch value; side < 2.
    unsafe {
        (*s).side_outcomes[side] = outcomes;
        (*s).sides[side] = MoveSide { node, exists, dir, below: Below::UNKNOWN };
        if dirs {
            below(s, tables);
            let eval = &(*s).eval;
            let mut context = [(0u32, TableVerdict::Deny); 3];
            for op in PolicyOp::ALL {
                let best = op.of(&eval.best);
                *op.of_mut(&mut context) = (best.rank, TableVerdict::from_u8(best.verdict));
            }
            let anchored = (*s).anchored != 0 || !eval.done();
            (*s).sides[side].below = Below { context, prefix_id: eval.prefix_id, anchored };
        }
    }
    true
}

/// Evaluates what decides everything below the directory whose path `check` left in the buffer
/// (`path/`, seeded with the subtree identities on the way) into `s.eval`, and whether a rule is
/// anchored at or below it into `s.anchored`.
#[inline(always)]
fn below(s: *mut Scratch, tables: u64) {
    // SAFETY: this CPU's scratch value, through the raw pointer (see `check`).
    unsafe {
        let len = PATH_MAX as u64 - core::ptr::read_volatile(&(*s).walk.pos);
        // The root never moves; a key too long cannot be looked up: both count as anchored.
        let anchored = len <= 1
            || len as usize + 1 > MAX_PREFIX
            || prefix_key(s, tables, &ScratchPath::of(s)).is_none_or(|k| INTERIOR.get(k).is_some());
        (*s).anchored = anchored as u64;
        (*s).path[PATH_MAX] = b'/';
        (*s).path[PATH_MAX + 1] = 0;
        (*s).walk.end = PATH_MAX as u64 + 1;
        let seed = core::ptr::read_volatile(&(*s).walk.below);
        evaluate(s, tables, &seed);
        (*s).path[PATH_MAX] = 0;
        (*s).walk.end = PATH_MAX as u64;
    }
}

/// Saves the path `check` left in the buffer as a move's source, for the event.
#[inline(always)]
fn save_source(s: *mut Scratch) {
    // SAFETY: this CPU's scratch value; the copy reads `path[start..start + PATH_MAX]`, inside
    // the 2 * PATH_MAX buffer.
    unsafe {
        let start = core::ptr::read_volatile(&(*s).walk.pos) as usize & (PATH_MAX - 1);
        let src = ((*s).path.as_ptr() as usize + start) as *const c_void;
        let dst = (*s).other.as_mut_ptr() as *mut c_void;
        let ok = bpf_probe_read_kernel(dst, PATH_MAX as u32, src) == 0;
        let resolved = core::ptr::read_volatile(&(*s).walk.state) == RESOLVED;
        (*s).other_len = if ok && resolved { (PATH_MAX - start) as u64 } else { 0 };
    }
}

/// A rename or link by a task in `session`: the REFER rule of fp_common::refer on both names, each walked once.
/// Returns 0, -EACCES (an access the move needs is denied, or a name cannot be resolved) or
/// -EXDEV (the content would gain access under its new name).
#[inline(always)]
pub(crate) fn decide_move(
    session: &Session,
    hook: Hook,
    kind: MoveKind,
    src: (u64, u64),
    dst: (u64, u64),
) -> i32 {
    let Some(s) = SCRATCH.get_ptr_mut(0) else {
        return -EACCES;
    };
    let generation = begin(s);
    let tables = session.info.tables;
    let (Ok((_, src_dir)), Ok((dst_inode, dst_dir))) = (dentry_kind(src.1), dentry_kind(dst.1))
    else {
        return unreadable(session);
    };
    let dirs = src_dir || (kind == MoveKind::Exchange && dst_dir);
    let exists = dst_inode != 0;
    // SAFETY: this CPU's scratch value, through the raw pointer (see `check`).
    let (source, target, ino, dev) = unsafe {
        let names = &raw mut (*s).mv;
        (*names).tables = tables;
        (*names).dirs = dirs as u64;
        (*names).mnt = [src.0, dst.0];
        (*names).dentry = [src.1, dst.1];
        (*names).exists = [1, exists as u64];
        (*names).dir = [src_dir as u64, dst_dir as u64];
        (*names).resolved = [0, 0];
        bpf_loop(2, move_side_step as *mut c_void, core::ptr::null_mut(), 0);
        let resolved = core::ptr::read_volatile(&(*names).resolved);
        let identity =
            (core::ptr::read_volatile(&(*names).ino), core::ptr::read_volatile(&(*names).dev));
        (resolved[0] != 0, resolved[1] != 0, identity.0, identity.1)
    };
    let (errno, op, outcome) = if source && target {
        // SAFETY: this CPU's scratch value, filled by move_side.
        let (a, b) = unsafe { (&(*s).sides[0], &(*s).sides[1]) };
        match refer::decide(kind, a, b) {
            MoveVerdict::Allow => (0, Op::Write, Outcome::ALLOWED),
            MoveVerdict::Denied { op, target } => {
                // SAFETY: as above.
                let outcome = op.of(unsafe { &(*s).side_outcomes[target as usize] });
                (EACCES, Op::of_policy(op), outcome)
            }
            MoveVerdict::Refused { op } => (EXDEV, Op::of_policy(op), Outcome::REFER),
        }
    } else {
        (EACCES, Op::Write, Outcome::UNRESOLVED)
    };
    let outcome = settle(session, s, generation, outcome);
    let errno = match outcome.reason {
        Reason::Reloaded | Reason::Unresolved => EACCES,
        _ => errno,
    };
    let refused = outcome.verdict != TableVerdict::Allow;
    let enforced = refused && session.info.flags & SESSION_AUDIT_ONLY == 0;
    if refused || session.info.flags & SESSION_FULL_AUDIT != 0 {
        let flags = if dirs { EVENT_MOVE_DIR } else { 0 }
            | if exists { EVENT_TARGET_EXISTS } else { 0 }
            | if kind == MoveKind::Exchange { EVENT_EXCHANGE } else { 0 };
        let mv = Some(MoveEvent { flags, ino, dev });
        report(session, &outcome, &Report { hook, op, denied: enforced, mv });
    }
    if enforced { -errno } else { 0 }
}
