//! Renames and links: both names walked and evaluated by global BPF functions, and the REFER
//! rule of fp_common::refer on them.
use aya_ebpf::helpers::generated::bpf_probe_read_kernel;
use core::ffi::c_void;
use fp_common::{
    kernel::{
        EVENT_EXCHANGE, EVENT_MOVE_DIR, EVENT_TARGET_EXISTS, Hook, KernelOp, PATH_MAX, Reason,
        SESSION_AUDIT_ONLY, SESSION_FULL_AUDIT,
    },
    policy::{MAX_PREFIX, Op, TableVerdict},
    refer::{self, Below, MoveKind, MoveSide, MoveVerdict},
};

use crate::{
    decide::{Decision, check, set_file, settle},
    kernel::{EACCES, EXDEV, dentry_kind},
    outcome::Outcome,
    report::{MoveEvent, Report, report},
    session::{Session, unreadable},
    state::{SCRATCH, Scratch, outcome_of, walk::RESOLVED},
    tables::{INTERIOR, ScratchPath, evaluate, prefix_key},
};

/// What follows the walk of one name of a move (`side` 0 the source, 1 the target), whose
/// outcomes [`check`] left in the scratch value: into `s.sides[side]` and
/// `s.side_outcomes[side]`; the source's path and identity are saved for the event. A global BPF
/// function like `fp_check` (see fp-agent's build.rs): verified once, not once per name. Returns
/// 1 if the name was resolved.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn fp_move_side(side: u64) -> i32 {
    let Some(s) = SCRATCH.get_ptr_mut(0) else {
        return 0;
    };
    let side = (side & 1) as usize;
    // SAFETY: this CPU's scratch value, through the raw pointer (see `check`).
    unsafe {
        let names = &raw mut (*s).mv;
        if side == 0 {
            save_source(s);
            (*names).ino = core::ptr::read_volatile(&(*s).walk.ino);
            (*names).dev = core::ptr::read_volatile(&(*s).walk.dev);
        }
        let outcomes =
            [outcome_of(s, Op::Read), outcome_of(s, Op::Write), outcome_of(s, Op::Delete)];
        if outcomes[0].reason == Reason::Unresolved {
            return 0;
        }
        let node = [outcomes[0].verdict, outcomes[1].verdict, outcomes[2].verdict];
        let (exists, dir) = ((*names).exists[side] != 0, (*names).dir[side] != 0);
        (*s).side_outcomes[side] = outcomes;
        (*s).sides[side] = MoveSide { node, exists, dir, below: Below::UNKNOWN };
    }
    1
}

/// The context below one resolved name of a move whose path [`check`] left in the scratch
/// value, when a directory moves: into `s.sides[side].below`. Global, as [`fp_move_side`]
/// (apart from it: together their stack frames would exceed the BPF call chain's 512 bytes).
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn fp_move_below(side: u64) -> i32 {
    let Some(s) = SCRATCH.get_ptr_mut(0) else {
        return 0;
    };
    let side = (side & 1) as usize;
    // SAFETY: this CPU's scratch value, through the raw pointer (see `check`).
    unsafe {
        below(s, core::ptr::read_volatile(&(*s).mv.tables));
        let eval = &(*s).eval;
        let mut context = [(0u32, TableVerdict::Deny); 3];
        for op in Op::ALL {
            let best = op.of(&eval.best);
            *op.of_mut(&mut context) = (best.rank, TableVerdict::from_u8(best.verdict));
        }
        let anchored = (*s).anchored != 0 || !eval.done();
        (*s).sides[side].below = Below { context, prefix_id: eval.prefix_id, anchored };
    }
    0
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
        evaluate(s, tables, &seed, false);
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
    let decision = Decision::begin(s);
    let generation = decision.generation;
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
        (*names).exists = [1, exists as u64];
        (*names).dir = [src_dir as u64, dst_dir as u64];
        let mut resolved = [0; 2];
        for (side, (mnt, dentry)) in [src, dst].into_iter().enumerate() {
            let file = set_file(&raw mut (*s).walk, &session.info, mnt, dentry);
            check(s, file, false);
            resolved[side] = fp_move_side(side as u64);
            if resolved[side] != 0 && dirs {
                fp_move_below(side as u64);
            }
        }
        let identity =
            (core::ptr::read_volatile(&(*names).ino), core::ptr::read_volatile(&(*names).dev));
        (resolved[0] != 0, resolved[1] != 0, identity.0, identity.1)
    };
    let (errno, op, outcome) = if source && target {
        // SAFETY: this CPU's scratch value, filled by move_side.
        let (a, b) = unsafe { (&(*s).sides[0], &(*s).sides[1]) };
        match refer::decide(kind, a, b) {
            MoveVerdict::Allow => (0, KernelOp::Write, Outcome::ALLOWED),
            MoveVerdict::Denied { op, target } => {
                // SAFETY: as above.
                let outcome = op.of(unsafe { &(*s).side_outcomes[target as usize] });
                (EACCES, KernelOp::of_policy(op), outcome)
            }
            MoveVerdict::Refused { op } => (EXDEV, KernelOp::of_policy(op), Outcome::REFER),
        }
    } else {
        (EACCES, KernelOp::Write, Outcome::UNRESOLVED)
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
        report(session, &outcome, &Report { mv, ..Report::new(hook, op, enforced) });
    }
    if enforced { -errno } else { 0 }
}
