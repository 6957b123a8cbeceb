//! What the running kernel's BTF says the programs need: the struct offsets they read, the
//! addresses of the sequence counters the verdict cache checks, whether they can read those with
//! one load, and the kernel's names (release, lockdown reasons).
use anyhow::Context as _;
use fp_common::kernel::{
    KERNEL_FIELDS, OPTIONAL_FIELDS, RDONLY_CAST, SEQ_COUNTERS, SEQCOUNT, SEQCOUNT_SEQUENCE,
};

use super::btf;

/// A resolved kernel struct offset, passed to the programs as a read-only global.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Offset {
    pub global: &'static str,
    pub strukt: &'static str,
    pub field: &'static str,
    /// The field's byte offset; None for an [`OPTIONAL_FIELDS`] one the kernel lacks.
    pub offset: Option<u32>,
    /// What the global holds: the offset, or for an optional field the offset plus one (0: absent).
    #[serde(skip)]
    pub value: u32,
}

/// Resolves every field the programs read from the running kernel's BTF. Any field that cannot be
/// resolved stops the load, naming the field and the kernel; an [`OPTIONAL_FIELDS`] one the
/// kernel lacks is 0 (one it has, its offset plus one).
pub fn resolve_offsets(btf: &btf::Btf) -> anyhow::Result<Vec<Offset>> {
    let optional = OPTIONAL_FIELDS.iter().map(|f| {
        let offset = btf.member_offset(f.strukt, f.field).ok();
        let value = offset.map_or(0, |o| o + 1);
        Ok(Offset { global: f.global, strukt: f.strukt, field: f.field, offset, value })
    });
    KERNEL_FIELDS
        .iter()
        .map(|f| {
            let offset = btf.member_offset(f.strukt, f.field).with_context(|| {
                format!(
                    "cannot resolve struct {}.{} (global {}) on kernel {}",
                    f.strukt,
                    f.field,
                    f.global,
                    kernel_release()
                )
            })?;
            Ok(Offset {
                global: f.global,
                strukt: f.strukt,
                field: f.field,
                offset: Some(offset),
                value: offset,
            })
        })
        .chain(optional)
        .collect()
}

/// The addresses of the kernel's sequence counters the verdict cache checks its entries against
/// ([`SEQ_COUNTERS`], in order), or None when the kernel does not show them (no
/// `CONFIG_KALLSYMS_ALL`, or addresses hidden by `kptr_restrict`): the cache is then off and every
/// decision walks its path, which is slower and exactly as sound.
pub fn seq_counters(btf: &btf::Btf) -> Option<[u64; 2]> {
    let offset = btf.member_offset(SEQCOUNT_SEQUENCE.0, SEQCOUNT_SEQUENCE.1).ok()?;
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").ok()?;
    let mut found = [0u64; 2];
    for line in kallsyms.lines() {
        let mut fields = line.split_whitespace();
        let (Some(addr), Some(_kind), Some(name), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue; // module symbols carry a fourth field; these two are in vmlinux
        };
        if let Some(i) = SEQ_COUNTERS.iter().position(|c| c.symbol == name) {
            found[i] = u64::from_str_radix(addr, 16).ok()?;
        }
    }
    found.iter().all(|&a| a != 0).then(|| found.map(|a| a + u64::from(offset)))
}

/// The BTF ids of [`RDONLY_CAST`] and of `struct seqcount` if the programs can read the sequence
/// counters through it on this kernel (6.2 and later): it has both, and `sequence` lies first.
pub fn rdonly_cast_ids(btf: &btf::Btf) -> Option<(u32, u32)> {
    let kfunc = btf.type_id(btf::Kind::Func, RDONLY_CAST)?;
    let seqcount = btf.type_id(btf::Kind::Struct, SEQCOUNT.0)?;
    (btf.member_offset(SEQCOUNT.0, SEQCOUNT.1).ok() == Some(0)).then_some((kfunc, seqcount))
}

/// The running kernel's release (`uname -r`), for messages.
pub fn kernel_release() -> String {
    nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into())
}

/// The name of the running kernel's lockdown reason `what` (`enum lockdown_reason`, whose numbers
/// differ between kernels), `dev-mem` for `LOCKDOWN_DEV_MEM`; None without BTF or such a value.
pub fn lockdown_reason(what: u64) -> Option<String> {
    let name =
        btf::Btf::from_sys().ok()?.enumerator("lockdown_reason", u32::try_from(what).ok()?)?;
    let name = String::from_utf8_lossy(name);
    Some(name.strip_prefix("LOCKDOWN_").unwrap_or(&name).to_lowercase().replace('_', "-"))
}
