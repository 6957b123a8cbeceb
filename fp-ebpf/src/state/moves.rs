//! The names of a move, as crate::moves keeps them while it walks each.

/// Both names of a move (index 0 the source, 1 the target), filled in by
/// [`crate::moves::decide_move`] and read by [`crate::moves::fp_move_side`]. Plain integers only
/// (see [`crate::state::walk::Walk`]).
#[repr(C)]
pub(crate) struct MoveNames {
    pub(crate) tables: u64,
    /// A directory moves: both names need the context below them.
    pub(crate) dirs: u64,
    pub(crate) exists: [u64; 2],
    pub(crate) dir: [u64; 2],
    /// The source's identity, for the event (the walk's is the target's by then).
    pub(crate) ino: u64,
    pub(crate) dev: u64,
}
