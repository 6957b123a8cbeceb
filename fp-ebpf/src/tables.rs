//! A session's compiled tables in the maps, as the decision core (fp_common::policy) reads them,
//! and the evaluation of the resolved path against them.
use aya_ebpf::{
    helpers::generated::{bpf_loop, bpf_probe_read_kernel},
    macros::map,
    maps::{HashMap, LpmTrie, lpm_trie::Key},
};
use core::ffi::c_void;
use fp_common::{
    kernel::PATH_MAX,
    policy::{
        InodeKey, InodeValue, Lookup, MAX_NAME, MAX_PREFIX, MAX_STEPS, NameKey, NameKind,
        NameValue, OpEntry, PathBytes, PrefixKeyData, PrefixValue, RuleTables, ScopeKey,
        ScopeValue, TableHeader, Unreadable,
    },
};

use crate::state::{SCRATCH, Scratch};

/// The compiled tables (fp_common::policy), keyed by tables id: two sets per session while a
/// reload swaps them.
#[map]
pub(crate) static HEADERS: HashMap<u64, TableHeader> = HashMap::with_max_entries(2048, 0);

#[map]
pub(crate) static PREFIXES: LpmTrie<PrefixKeyData, PrefixValue> =
    LpmTrie::with_max_entries(65536, 1); // BPF_F_NO_PREALLOC

#[map]
pub(crate) static NAMES: HashMap<NameKey, NameValue> = HashMap::with_max_entries(16384, 0);

#[map]
pub(crate) static SCOPES: HashMap<ScopeKey, ScopeValue> = HashMap::with_max_entries(4096, 0);

#[map]
pub(crate) static INODES: HashMap<InodeKey, InodeValue> = HashMap::with_max_entries(65536, 0);

/// Directories with a rule anchored at or below them, as exact `dir\0` keys by tables id: a
/// directory moved from or to one is refused (fp_common::refer).
#[map]
pub(crate) static INTERIOR: LpmTrie<PrefixKeyData, u8> = LpmTrie::with_max_entries(65536, 1); // BPF_F_NO_PREALLOC

/// The resolved path in the scratch buffer, `path[pos..end]`, read with masked indexes.
pub(crate) struct ScratchPath {
    buf: *const u8,
    start: usize,
    len: usize,
}

impl ScratchPath {
    #[inline(always)]
    pub(crate) fn of(s: *const Scratch) -> Self {
        // `len` unmasked from a second volatile read: were it provably at most PATH_MAX, LLVM
        // would drop the masks in `at` as redundant after `i < len`, and older verifiers learn no
        // bound from comparing two unknown registers. The masks alone keep every read in bounds.
        // SAFETY: this CPU's scratch value.
        let (start, pos, end) = unsafe {
            (
                core::ptr::read_volatile(&(*s).walk.pos),
                core::ptr::read_volatile(&(*s).walk.pos),
                core::ptr::read_volatile(&(*s).walk.end),
            )
        };
        let start = start as usize & (PATH_MAX - 1);
        let len = end.wrapping_sub(pos) as usize;
        // SAFETY: as above.
        let buf = unsafe { (*s).path.as_ptr() };
        ScratchPath { buf, start, len }
    }
}

impl ScratchPath {
    /// `len` bytes of the scratch buffer from `start` (a name copied there), read with masked
    /// indexes.
    #[inline(always)]
    pub(crate) fn within(s: *const Scratch, start: usize, len: usize) -> Self {
        // SAFETY: this CPU's scratch value.
        let buf = unsafe { (*s).path.as_ptr() };
        ScratchPath { buf, start: start & (PATH_MAX - 1), len }
    }
}

impl PathBytes for ScratchPath {
    #[inline(always)]
    fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    fn at(&self, i: usize) -> u8 {
        // SAFETY: the mask keeps the index inside the 2 * PATH_MAX buffer.
        unsafe { *self.buf.add((self.start + i) & (2 * PATH_MAX - 1)) }
    }

    /// From the two aligned words the 8 bytes lie in: two loads and shifts, where 8 byte loads
    /// would cost 8 masked loads (LLVM splits an unaligned word load on BPF).
    #[inline(always)]
    fn word(&self, i: usize) -> u64 {
        let at = self.start + i;
        // Below 2 * PATH_MAX - 8 (start < PATH_MAX, i < MAX_PREFIX): the masks change nothing
        // and keep both words inside the buffer for the verifier.
        let low = at & (2 * PATH_MAX - 1) & !7;
        let high = (at + 8) & (2 * PATH_MAX - 1) & !7;
        let shift = (at & 7) * 8;
        // SAFETY: aligned (the buffer is, see the assertion below) and inside the buffer.
        let (low, high) =
            unsafe { (*(self.buf.add(low) as *const u64), *(self.buf.add(high) as *const u64)) };
        // `high << (64 - shift)` in two shifts: one by 64 would be undefined.
        (low >> shift) | ((high << 1) << (63 - shift))
    }
}

// `ScratchPath::word`'s aligned loads.
const _: () = assert!(core::mem::offset_of!(Scratch, path) % 8 == 0);

/// The LPM key of `path` (its first [`MAX_PREFIX`] bytes) under `id`, in the scratch value.
/// Exact entries are stored with their NUL, so the key covers the path's NUL too.
#[inline(always)]
pub(crate) fn prefix_key<'a>(
    s: *mut Scratch,
    id: u64,
    path: &ScratchPath,
) -> Option<&'a Key<PrefixKeyData>> {
    let bytes = core::cmp::min(path.len + 1, MAX_PREFIX);
    // SAFETY: this CPU's scratch value; the helper checks the source range.
    unsafe {
        let key = &mut (*s).prefix_key;
        key.prefix_len = ((8 + bytes) * 8) as u32;
        key.data.id = id;
        let src = path.buf.add(path.start) as *const c_void;
        let dst = key.data.path.as_mut_ptr() as *mut c_void;
        if bpf_probe_read_kernel(dst, MAX_PREFIX as u32, src) != 0 {
            return None;
        }
        Some(&*key)
    }
}

/// The header of the tables `tables` for the directory cache's name checks (crate::dirs), which
/// answer most creations: this CPU's copy in the scratch value, made by the first check under
/// these tables here, so that a check looks up `HEADERS` (a hash lookup, ~150 instructions) only
/// when this CPU's decisions move to other tables. (The evaluation keeps its own lookups: its
/// code is shared with userspace, and reading the copy there changed how LLVM spills an index
/// that 6.1's verifier then cannot bound.) Sound because a tables id is never reused and its
/// header never changes while the tables exist (installed last, removed first by fp-agent's
/// `install_tables`/`remove_tables`, only after the session points at other tables, which
/// [`crate::decide::settle`] notices); a decision that another one on this CPU preempted may read
/// a copy being replaced, which its generation says, as for every scratch field.
#[inline(always)]
pub(crate) fn header<'a>(s: *mut Scratch, tables: u64) -> Option<&'a TableHeader> {
    // SAFETY: this CPU's scratch value; a copy out of the map value by the helper (a plain copy of
    // this size goes through the stack), checked before the copy is marked as these tables'.
    unsafe {
        if tables == 0 || core::ptr::read_volatile(&raw const (*s).header_tables) != tables {
            let found = HEADERS.get_ptr(&tables)?;
            core::ptr::write_volatile(&raw mut (*s).header_tables, 0);
            let size = core::mem::size_of::<TableHeader>() as u32;
            let copy = &raw mut (*s).header;
            if bpf_probe_read_kernel(copy as *mut c_void, size, found as *const c_void) != 0 {
                return None;
            }
            core::ptr::write_volatile(&raw mut (*s).header_tables, tables);
        }
        Some(&(*s).header)
    }
}

/// Whether the tables `tables` are still installed: their header is, which fp-agent removes
/// first and writes last.
#[inline(always)]
pub(crate) fn tables_exist(tables: u64) -> bool {
    // SAFETY: only tested for presence.
    unsafe { HEADERS.get(&tables) }.is_some()
}

/// [`Scratch::lpm_state`] and the directory cache's copy of it: what the LPM lookup of a path
/// found (in `lpm` beside it), or that it has not been looked up.
pub(crate) const LPM_UNKNOWN: u64 = 0;
pub(crate) const LPM_NONE: u64 = 1;
pub(crate) const LPM_FOUND: u64 = 2;

/// One session's tables in the maps, as the decision core reads them.
struct MapTables {
    id: u64,
    s: *mut Scratch,
    /// The path was resolved from its directory's entry (crate::dirs), which may know the
    /// longest match of every name in the directory.
    in_dir: bool,
}

impl RuleTables for MapTables {
    type Path = ScratchPath;

    #[inline(always)]
    fn header(&self) -> Option<&TableHeader> {
        // SAFETY: a read of the map value.
        unsafe { HEADERS.get(&self.id) }
    }

    #[inline(always)]
    fn longest_prefix(&self, path: &ScratchPath) -> Lookup<'_, PrefixValue> {
        let s = self.s;
        if self.in_dir {
            // SAFETY: this CPU's scratch value; `dir` is the entry `dirs::resolve` checked.
            let known = unsafe { core::ptr::read_volatile(&(*s).dir.lpm_state) };
            if known != LPM_UNKNOWN {
                // SAFETY: as above.
                return Ok((known == LPM_FOUND).then_some(unsafe { &(*s).dir.lpm }));
            }
        }
        let key = prefix_key(s, self.id, path).ok_or(Unreadable)?;
        let found = PREFIXES.get(key);
        // Kept for the directory cache's fill (crate::dirs::fp_dir_fill).
        // SAFETY: this CPU's scratch value.
        unsafe {
            (*s).lpm_state = match found {
                Some(value) => {
                    (*s).lpm = *value;
                    LPM_FOUND
                }
                None => LPM_NONE,
            };
        }
        Ok(found)
    }

    #[inline(always)]
    fn name(
        &self,
        kind: NameKind,
        path: &ScratchPath,
        start: usize,
        len: usize,
    ) -> Lookup<'_, NameValue> {
        // SAFETY: this CPU's scratch value.
        let key = unsafe { &mut (*self.s).name_key };
        key.tables_id = self.id;
        key.kind = kind as u8;
        key.len = len as u8;
        key._pad = [0; 6];
        // The name's bytes in one copy, then what lies past `len` cleared a word at a time: a
        // byte loop costs 64 masked steps per lookup, and a decision makes one lookup per
        // directory component and per final-component shape.
        let at = (path.start + start) & (2 * PATH_MAX - 1);
        // SAFETY: the helper checks the source range; the destination is the key's name.
        let copied = unsafe {
            bpf_probe_read_kernel(
                key.name.as_mut_ptr() as *mut c_void,
                MAX_NAME as u32,
                path.buf.add(at) as *const c_void,
            )
        };
        if copied != 0 {
            return Err(Unreadable);
        }
        let words = key.name.as_mut_ptr() as *mut u64;
        for w in 0..MAX_NAME / 8 {
            // Bytes of this word inside the name (0..=8), kept by a mask of as many low bytes
            // (two shifts: one by 64 would be undefined). Arithmetic, not a branch per word,
            // which would give the verifier a state per possible `len`.
            let inside = (len as u64).saturating_sub(8 * w as u64).min(8);
            let keep = ((1u64 << (4 * inside)) << (4 * inside)).wrapping_sub(1);
            // SAFETY: w < MAX_NAME / 8, and the name is 8-byte aligned in the key.
            unsafe { *words.add(w) &= keep };
        }
        // SAFETY: a read of the map value.
        Ok(unsafe { NAMES.get(&*key) })
    }

    #[inline(always)]
    fn scope(&self, scope_id: u16) -> Option<&ScopeValue> {
        let key = ScopeKey { tables_id: self.id, scope_id, _pad: [0; 6] };
        // SAFETY: a read of the map value.
        unsafe { SCOPES.get(&key) }
    }
}

/// bpf_loop callback: one step of the policy evaluation (fp_common::policy::Evaluation) on the
/// resolved path; 1 once it is done.
extern "C" fn eval_step(_index: u64, _ctx: *mut c_void) -> i64 {
    let Some(s) = SCRATCH.get_ptr_mut(0) else {
        return 1;
    };
    // SAFETY: this CPU's scratch value; the tables only write the key fields, not `eval`.
    unsafe {
        let id = core::ptr::read_volatile(&(*s).walk.tables);
        let tables = MapTables { id, s, in_dir: false };
        let path = ScratchPath::of(s);
        if (*s).eval.step(&tables, &path) { 1 } else { 0 }
    }
}

/// Runs the decision core on the path in the scratch buffer, seeded with inode-table hits; the
/// result is `s.eval` (read in place: an Evaluation is too large to copy onto the BPF stack).
/// `in_dir`: the path was resolved from its directory's entry (crate::dirs), whose context
/// stands for the scan of the directories (and its longest match, if it has one, for the LPM
/// lookup).
#[inline(always)]
pub(crate) fn evaluate(s: *mut Scratch, tables: u64, seed: &[OpEntry; 3], in_dir: bool) {
    // SAFETY: this CPU's scratch value, through the raw pointer (see `check`).
    unsafe {
        (*s).lpm_state = LPM_UNKNOWN;
        let map_tables = MapTables { id: tables, s, in_dir };
        (*s).eval.restart(&map_tables, &ScratchPath::of(s), seed);
        if in_dir {
            (*s).eval.resume_below(&(*s).dir.context);
        }
        bpf_loop(MAX_STEPS as u32, eval_step as *mut c_void, core::ptr::null_mut(), 0);
    }
}
