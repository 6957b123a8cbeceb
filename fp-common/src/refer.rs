//! Renames and links: an operation that makes existing content reachable under another name is
//! allowed only if the content gains no access there (Landlock's `LANDLOCK_ACCESS_FS_REFER` rule,
//! applied to fp's per-op verdicts). fp's rules look at names, so this holds for every rename and
//! link, within one directory too (`c.secret` -> `c.txt`).
//!
//! One definition for the BPF programs (`path_rename`, `path_link`), `fp policy explain --op
//! rename|link` and `fp audit replay`: each side of the move is evaluated once for all three ops
//! ([`crate::policy::Evaluation`]), and [`decide`] turns the two sides into a verdict.
//!
//! The rule, for a move of content from name A to name B:
//! 1. the accesses the move itself needs are allowed: rename: delete at A, write at B, and the
//!    delete of the file B named if it exists (it is gone afterwards); exchange: delete and write
//!    at both; link: write at B. A denial there is [`MoveVerdict::Denied`] (EACCES);
//! 2. for every op, the content does not gain at B what it did not have at A: an op allowed at A
//!    may be anything at B; an op denied at A must be denied at B. Prompt and defer verdicts have
//!    no place in a move (there is no permission event to hold a rename, and a remembered grant
//!    at B could answer a prompt that A's prompt never had), so they refuse it;
//! 3. a directory moves every path below it: the kernel cannot compare every relative path, so it
//!    allows a directory move only where everything below A and below B is decided alike:
//!    neither directory has a rule anchored at or below it, both see the same longest LPM entry
//!    (hence the same entries and name scopes above them), and the context of each (its LPM
//!    entry, its own components as directory names, the identities of the directories above it)
//!    gives the same rank and verdict for every op, none of them a prompt or a defer.
//!
//! Everything else is [`MoveVerdict::Refused`], answered with EXDEV as Landlock does, so that
//! `mv` and friends fall back to copy and unlink, each step decided on its own.
use crate::policy::{Op, TableVerdict};

pub use crate::op::MoveKind;

/// What decides everything below a directory, from the evaluation of `dir/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Below {
    /// Best rank and verdict per op of the context evaluation.
    pub context: [(u32, TableVerdict); 3],
    /// [`crate::policy::PrefixValue::id`] of the longest LPM match of `dir/`.
    pub prefix_id: u32,
    /// A rule is anchored at or below the directory, or the kernel cannot tell (a path too long
    /// for a key, or a context not evaluated).
    pub anchored: bool,
}

impl Below {
    /// What is known below a name whose context was not evaluated: nothing, so a directory moved
    /// to or from it is refused. (A plain value, not an Option: BPF map values carry no Rust
    /// enums with data.)
    pub const UNKNOWN: Below =
        Below { context: [(0, TableVerdict::Deny); 3], prefix_id: 0, anchored: true };
}

/// One name of a move, as the tables see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoveSide {
    /// Verdict per op (indexed by [`Op`]) of the name itself.
    pub node: [TableVerdict; 3],
    /// The name exists (always for a source; for a rename's target: it is replaced).
    pub exists: bool,
    /// The content under this name is a directory.
    pub dir: bool,
    /// The context below this name as a directory; needed when a directory moves to or from it
    /// ([`Below::UNKNOWN`] when not evaluated).
    pub below: Below,
}

/// The answer for a move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoveVerdict {
    Allow,
    /// An access the move itself needs is denied (EACCES): `op` on the source (`target` false) or
    /// the target name.
    Denied {
        op: Op,
        target: bool,
    },
    /// The content would gain access under its new name, or a prompt or defer verdict is
    /// involved (EXDEV). `op` is the first op that decided it.
    Refused {
        op: Op,
    },
}

/// The accesses a move itself needs, in the order they are reported: (op, on the target).
fn required(kind: MoveKind, target_exists: bool) -> &'static [(Op, bool)] {
    match (kind, target_exists) {
        (MoveKind::Rename, false) => &[(Op::Delete, false), (Op::Write, true)],
        (MoveKind::Rename, true) => &[(Op::Delete, false), (Op::Write, true), (Op::Delete, true)],
        (MoveKind::Exchange, _) => {
            &[(Op::Delete, false), (Op::Delete, true), (Op::Write, true), (Op::Write, false)]
        }
        (MoveKind::Link, _) => &[(Op::Write, true)],
    }
}

/// Whether content that gets `from` for an op at its old name may get `to` at its new one.
fn no_gain(from: TableVerdict, to: TableVerdict) -> bool {
    matches!((from, to), (TableVerdict::Allow, _) | (TableVerdict::Deny, TableVerdict::Deny))
}

/// Whether everything below `from` is decided at least as strictly below `to`.
fn subtree_no_gain(a: &Below, b: &Below) -> Option<Op> {
    if a.anchored || b.anchored || a.prefix_id != b.prefix_id {
        return Some(Op::Read);
    }
    for op in Op::ALL {
        let (x, y) = (op.of(&a.context), op.of(&b.context));
        let decided = matches!(x.1, TableVerdict::Allow | TableVerdict::Deny);
        if x != y || !decided {
            return Some(op);
        }
    }
    None
}

/// The first op the content under `from` would gain at the name `to` (itself, or for a
/// directory, anything below it).
fn gain(from: &MoveSide, to: &MoveSide) -> Option<Op> {
    for op in Op::ALL {
        if !no_gain(op.of(&from.node), op.of(&to.node)) {
            return Some(op);
        }
    }
    if from.dir { subtree_no_gain(&from.below, &to.below) } else { None }
}

/// Decides a move of `src`'s content to the name `dst` (see the module documentation).
pub fn decide(kind: MoveKind, src: &MoveSide, dst: &MoveSide) -> MoveVerdict {
    let side = |target: bool| if target { dst } else { src };
    let needed = required(kind, dst.exists);
    for &(op, target) in needed {
        if op.of(&side(target).node) == TableVerdict::Deny {
            return MoveVerdict::Denied { op, target };
        }
    }
    for &(op, target) in needed {
        if op.of(&side(target).node) != TableVerdict::Allow {
            return MoveVerdict::Refused { op };
        }
    }
    // Plain calls, not a list of (from, to) references: the BPF verifier loses the type of
    // pointers kept in stack arrays.
    if let Some(op) = gain(src, dst) {
        return MoveVerdict::Refused { op };
    }
    if kind == MoveKind::Exchange
        && let Some(op) = gain(dst, src)
    {
        return MoveVerdict::Refused { op };
    }
    MoveVerdict::Allow
}

#[cfg(test)]
mod tests {
    use super::*;
    use TableVerdict::{Allow as A, Defer as F, Deny as D, Prompt as P};

    fn file(node: [TableVerdict; 3]) -> MoveSide {
        MoveSide { node, exists: true, dir: false, below: Below::UNKNOWN }
    }

    fn new_name(node: [TableVerdict; 3]) -> MoveSide {
        MoveSide { exists: false, ..file(node) }
    }

    fn dir(node: [TableVerdict; 3], below: Below) -> MoveSide {
        MoveSide { node, exists: true, dir: true, below }
    }

    fn below(id: u32, verdicts: [TableVerdict; 3]) -> Below {
        Below { context: verdicts.map(|v| (7, v)), prefix_id: id, anchored: false }
    }

    #[test]
    fn a_read_denied_file_renamed_to_a_readable_name_is_refused() {
        let secret = file([D, A, A]);
        assert_eq!(
            decide(MoveKind::Rename, &secret, &new_name([A, A, A])),
            MoveVerdict::Refused { op: Op::Read }
        );
        assert_eq!(decide(MoveKind::Rename, &secret, &new_name([D, A, A])), MoveVerdict::Allow);
        assert_eq!(
            decide(MoveKind::Link, &secret, &new_name([A, A, A])),
            MoveVerdict::Refused { op: Op::Read }
        );
    }

    #[test]
    fn the_accesses_a_move_needs_are_checked_first_in_a_fixed_order() {
        let open = file([A, A, A]);
        assert_eq!(
            decide(MoveKind::Rename, &open, &file([A, A, D])),
            MoveVerdict::Denied { op: Op::Delete, target: true },
            "replacing a file whose delete is denied"
        );
        assert_eq!(
            decide(MoveKind::Rename, &file([A, A, D]), &new_name([A, A, A])),
            MoveVerdict::Denied { op: Op::Delete, target: false }
        );
        assert_eq!(
            decide(MoveKind::Exchange, &open, &file([D, D, D])),
            MoveVerdict::Denied { op: Op::Delete, target: true }
        );
        assert_eq!(
            decide(MoveKind::Link, &open, &new_name([A, D, A])),
            MoveVerdict::Denied { op: Op::Write, target: true }
        );
        assert_eq!(
            decide(MoveKind::Rename, &open, &new_name([A, P, A])),
            MoveVerdict::Refused { op: Op::Write },
            "a prompt cannot hold a rename"
        );
    }

    #[test]
    fn write_denied_content_cannot_be_moved_out_and_exchange_checks_both_ways() {
        assert_eq!(
            decide(MoveKind::Rename, &file([A, D, A]), &new_name([A, A, A])),
            MoveVerdict::Refused { op: Op::Write }
        );
        assert_eq!(
            decide(MoveKind::Exchange, &file([A, A, A]), &file([D, A, A])),
            MoveVerdict::Refused { op: Op::Read },
            "the other file's content comes to the readable name"
        );
        assert_eq!(
            decide(MoveKind::Exchange, &file([D, A, A]), &file([D, A, A])),
            MoveVerdict::Allow
        );
        assert_eq!(
            decide(MoveKind::Rename, &file([P, A, A]), &new_name([P, A, A])),
            MoveVerdict::Refused { op: Op::Read }
        );
        assert_eq!(
            decide(MoveKind::Rename, &file([F, A, A]), &new_name([D, A, A])),
            MoveVerdict::Refused { op: Op::Read }
        );
        assert_eq!(
            decide(MoveKind::Rename, &file([A, A, A]), &new_name([D, A, D])),
            MoveVerdict::Allow
        );
    }

    #[test]
    fn directories_move_only_between_places_decided_alike() {
        let ws = below(3, [A, A, A]);
        let src = dir([A, A, A], ws);
        assert_eq!(
            decide(MoveKind::Rename, &src, &MoveSide { exists: false, ..src }),
            MoveVerdict::Allow
        );
        let other_entry = MoveSide { below: below(4, [A, A, A]), exists: false, ..src };
        assert_eq!(
            decide(MoveKind::Rename, &src, &other_entry),
            MoveVerdict::Refused { op: Op::Read }
        );
        let anchored = MoveSide { below: Below { anchored: true, ..ws }, ..src };
        assert_eq!(
            decide(MoveKind::Rename, &anchored, &MoveSide { exists: false, ..src }),
            MoveVerdict::Refused { op: Op::Read }
        );
        let stricter_name = MoveSide { below: below(3, [D, A, A]), exists: false, ..src };
        assert_eq!(
            decide(MoveKind::Rename, &src, &stricter_name),
            MoveVerdict::Refused { op: Op::Read },
            "contexts must be equal: a stricter one could still be outranked differently below"
        );
        let prompt = dir([A, A, A], below(3, [P, A, A]));
        assert_eq!(
            decide(MoveKind::Rename, &prompt, &MoveSide { exists: false, ..prompt }),
            MoveVerdict::Refused { op: Op::Read }
        );
        let missing = MoveSide { below: Below::UNKNOWN, exists: false, ..src };
        assert_eq!(decide(MoveKind::Rename, &src, &missing), MoveVerdict::Refused { op: Op::Read });
    }
}
