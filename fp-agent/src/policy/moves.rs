//! Renames and links under a session's policy: [`fp_common::refer`]'s rule, with each name
//! evaluated on the compiled tables exactly as the BPF programs evaluate it (one evaluation for
//! all three ops per name, plus the context below it when a directory moves).
use fp_common::{
    policy::{MAX_PATH, OpEntry, TableVerdict, evaluate_seeded},
    refer::{self, Below, MoveKind, MoveSide, MoveVerdict},
};

use super::EffectivePolicy;

/// One name of a move as the filesystem has it.
#[derive(Clone, Copy, Debug)]
pub struct Name<'a> {
    /// Absolute and normalized.
    pub path: &'a [u8],
    pub exists: bool,
    /// What the name holds is a directory.
    pub dir: bool,
}

impl EffectivePolicy {
    /// How the kernel sees one name of a move; `below` asks for the context below it as a
    /// directory.
    fn move_side(&self, name: Name<'_>, below: bool) -> MoveSide {
        let tables = self.tables();
        let none = [OpEntry::default(); 3];
        let node = evaluate_seeded(tables, name.path, &none).decisions().map(|d| d.verdict);
        let below = if !below {
            Below::UNKNOWN
        } else {
            let mut dir = name.path.to_vec();
            if dir.last() != Some(&b'/') {
                dir.push(b'/');
            }
            let anchored =
                name.path.len() <= 1 || dir.len() > MAX_PATH || tables.anchored(name.path);
            let e = evaluate_seeded(tables, dir.as_slice(), &none);
            let context = e.best.map(|b| (b.rank, TableVerdict::from_u8(b.verdict)));
            Below { context, prefix_id: e.prefix_id, anchored }
        };
        MoveSide { node, exists: name.exists, dir: name.dir, below }
    }

    /// Both names of a move as the kernel sees them: the contexts below them are evaluated when
    /// a directory moves (`src`'s content, or for an exchange either).
    pub fn move_sides(&self, kind: MoveKind, src: Name<'_>, dst: Name<'_>) -> [MoveSide; 2] {
        let dirs = src.dir || (kind == MoveKind::Exchange && dst.dir);
        [self.move_side(src, dirs), self.move_side(dst, dirs)]
    }

    /// The verdict on moving `src`'s content to `dst` (rename, exchange) or linking it there.
    pub fn decide_move(&self, kind: MoveKind, src: Name<'_>, dst: Name<'_>) -> MoveVerdict {
        let [a, b] = self.move_sides(kind, src, dst);
        refer::decide(kind, &a, &b)
    }
}
