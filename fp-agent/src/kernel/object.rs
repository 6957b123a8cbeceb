//! The BPF objects this binary embeds (fp's programs, and the benchmark's pass-through ones), and
//! fp's object as the verifier gets it on kernels where the programs read the sequence counters
//! with one load each (its `bpf_rdonly_cast` calls made kfunc calls).
use anyhow::{Context as _, anyhow, bail};
use fp_common::kernel::RDONLY_CAST_CALL;

use super::{btf, offsets::rdonly_cast_ids};

/// The BPF object built from fp-ebpf by build.rs.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/fp"));

/// The embedded BPF object, or an error if this binary was built with `FP_EBPF_STUB=1`.
pub fn object() -> anyhow::Result<&'static [u8]> {
    if cfg!(fp_ebpf_stub) || OBJECT.is_empty() {
        bail!(
            "this fp was built with FP_EBPF_STUB=1 and carries no BPF programs; rebuild without it"
        );
    }
    Ok(OBJECT)
}

/// fp-ebpf's pass-through programs (`fp-noop`), for the benchmark's `noop` phase only.
pub(super) static NOOP_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/fp-noop"));

/// The object as the kernel's verifier gets it where the programs can read the sequence
/// counters with one load each (see `fp_common::kernel::SEQCOUNT_BTF_ID`).
pub(super) struct SeqReads {
    /// The object with its `bpf_rdonly_cast` calls made.
    pub(super) object: &'static [u8],
    /// `fp_common::kernel::SEQCOUNT_BTF_ID`'s value.
    pub(super) seqcount_btf_id: u32,
}

/// [`SeqReads`] on this kernel, or None where it has no [`RDONLY_CAST`] (6.1), or no `struct
/// seqcount` that starts with its `sequence`, or where this build carries no programs: the
/// programs then read the counters with a helper call each.
pub(super) fn seq_reads(btf: &btf::Btf) -> anyhow::Result<Option<SeqReads>> {
    let Some((kfunc, seqcount)) = rdonly_cast_ids(btf).filter(|_| !OBJECT.is_empty()) else {
        return Ok(None);
    };
    let (object, made) = with_kfunc_calls(OBJECT, kfunc)?;
    Ok((made > 0).then_some(SeqReads { object, seqcount_btf_id: seqcount }))
}

/// A copy of `object` with every helper call numbered [`RDONLY_CAST_CALL`] in its code made a
/// call of the kernel function whose BTF id is `kfunc` (the toolchain cannot emit kfunc calls),
/// and how many it made. Aligned as the embedded object (the ELF reader wants its headers
/// aligned), and kept for the process: it is built once, by [`prepared`].
fn with_kfunc_calls(object: &[u8], kfunc: u32) -> anyhow::Result<(&'static [u8], usize)> {
    use object::{Object as _, ObjectSection as _, SectionKind};
    /// `src_reg` of a call of a kernel function (`BPF_PSEUDO_KFUNC_CALL`) in a call's register
    /// byte (`dst_reg` in the low nibble, `src_reg` in the high one).
    const KFUNC_CALL_REGS: u8 = 2 << 4;
    let words = Box::leak(vec![0u64; object.len().div_ceil(8)].into_boxed_slice());
    // SAFETY: the leaked u64s as bytes: every byte pattern is valid and the length lies within
    // the allocation, which lives as long as the process.
    let copy: &'static mut [u8] =
        unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast(), object.len()) };
    copy.copy_from_slice(object);
    let file = object::File::parse(object).context("parsing the BPF object")?;
    let mut made = 0;
    for section in file.sections().filter(|s| s.kind() == SectionKind::Text) {
        let Some((start, size)) = section.file_range() else { continue };
        let code = usize::try_from(start)
            .ok()
            .zip(usize::try_from(start + size).ok())
            .and_then(|(start, end)| copy.get_mut(start..end))
            .ok_or_else(|| anyhow!("BPF object section {:?} out of bounds", section.name()))?;
        for insn in code.chunks_exact_mut(8) {
            // BPF_JMP | BPF_CALL with no registers: a helper call, its number in the last 4 bytes.
            if insn[..2] == [0x85, 0] && insn[4..] == RDONLY_CAST_CALL.to_le_bytes() {
                insn[1] = KFUNC_CALL_REGS;
                insn[4..].copy_from_slice(&kfunc.to_le_bytes());
                made += 1;
            }
        }
    }
    Ok((copy, made))
}

#[cfg(test)]
mod tests {
    use fp_common::kernel::{
        Backend, Hook, KERNEL_FIELDS, OPTIONAL_FIELDS, SEQ_COUNTERS, SESSION_CGROUP_LEVEL, maps,
        programs,
    };

    use super::*;

    /// The pass-through object's per-cgroup twins sit on exactly the hooks fp attaches per
    /// cgroup, so that the benchmark's `noop-cgroup` phase measures fp's design's floor.
    #[test]
    #[cfg_attr(fp_ebpf_stub, ignore = "built with FP_EBPF_STUB=1")]
    fn noop_object_mirrors_the_per_cgroup_hooks() {
        let (fp, noop) = (object().unwrap(), NOOP_OBJECT);
        let (fp, noop) = (String::from_utf8_lossy(fp), String::from_utf8_lossy(noop));
        for hook in Hook::ALL {
            let section = format!("lsm_cgroup/{}", hook.name());
            assert_eq!(fp.contains(&section), noop.contains(&section), "{section}");
        }
    }

    /// Each hook has a pass-through twin on the `security_*` function the loader attaches it to,
    /// so that the benchmark's `noop-fmod-ret` phase covers every hook fp attaches.
    #[test]
    #[cfg_attr(fp_ebpf_stub, ignore = "built with FP_EBPF_STUB=1")]
    fn noop_object_has_a_twin_on_each_hooks_security_function() {
        let noop = String::from_utf8_lossy(NOOP_OBJECT);
        for hook in Hook::ALL {
            let function = crate::kernel::backend::security_function(hook.name());
            let (fmod_ret, fentry) = (format!("fmod_ret/{function}"), format!("fentry/{function}"));
            assert!(noop.contains(&fmod_ret) || noop.contains(&fentry), "{function}");
        }
    }

    /// Every call of `bpf_rdonly_cast` the programs make by number becomes a kfunc call of the
    /// given id, nothing else in the object changes, and the object still parses as aya reads it.
    #[test]
    #[cfg_attr(fp_ebpf_stub, ignore = "built with FP_EBPF_STUB=1")]
    fn kfunc_calls_replace_every_numbered_call_and_nothing_else() {
        let built = object().unwrap();
        let call = |regs: u8, imm: i32| {
            let mut insn = vec![0x85, regs, 0, 0];
            insn.extend_from_slice(&imm.to_le_bytes());
            insn
        };
        let count = |object: &[u8], insn: &[u8]| {
            object.chunks_exact(8).filter(|chunk| *chunk == insn).count()
        };
        let (numbered, kfunc) = (call(0, RDONLY_CAST_CALL), call(2 << 4, 0x1234_5678));
        let before = count(built, &numbered);
        assert!(before > 0, "the programs read the sequence counters through the kfunc");
        let (made, calls) = with_kfunc_calls(built, 0x1234_5678).unwrap();
        assert_eq!((calls, count(made, &numbered), count(made, &kfunc)), (before, 0, before));
        let changed = built.chunks_exact(8).zip(made.chunks_exact(8)).filter(|(a, b)| a != b);
        assert_eq!(changed.count(), before);
        aya_obj::Object::parse(made).expect("the object with its kfunc calls parses");
    }

    /// The real build embeds a real BPF object: an ELF file with fp's LSM program sections.
    #[test]
    #[cfg_attr(fp_ebpf_stub, ignore = "built with FP_EBPF_STUB=1")]
    fn embedded_object_is_real() {
        let obj = object().expect("a real BPF object is embedded");
        assert_eq!(&obj[..4], b"\x7fELF");
        let text = String::from_utf8_lossy(obj);
        for hook in Hook::ALL {
            let (section, cgroup) =
                (format!("lsm/{}", hook.name()), format!("lsm_cgroup/{}", hook.name()));
            assert!(
                text.contains(&section) || text.contains(&cgroup),
                "object lacks section {section}"
            );
            // The enforcer attaches its per-cgroup programs as the checks of pending files.
            let hold = crate::kernel::HOLD_HOOKS.contains(&hook.name());
            assert_eq!(text.contains(&cgroup), hold, "{cgroup}: per cgroup only for HOLD_HOOKS");
        }
        assert!(text.contains("license"));
        for f in KERNEL_FIELDS.iter().chain(OPTIONAL_FIELDS) {
            assert!(text.contains(f.global), "object lacks the global {}", f.global);
        }
        assert!(text.contains(SESSION_CGROUP_LEVEL), "object lacks {SESSION_CGROUP_LEVEL}");
        for c in SEQ_COUNTERS {
            assert!(text.contains(c.global), "object lacks the global {}", c.global);
        }
    }

    /// The embedded object, parsed as aya parses it to load it.
    fn parsed_object() -> aya_obj::Object {
        let obj = object().expect("a real BPF object is embedded");
        aya_obj::Object::parse(obj).expect("the embedded BPF object parses")
    }

    /// The object's maps are exactly the ones userspace names (fp_common::kernel::maps): the
    /// `#[map]` statics of fp-ebpf cannot take their names from those consts, so a renamed,
    /// added or removed map shows here rather than when a session fails to start.
    #[test]
    #[cfg_attr(fp_ebpf_stub, ignore = "built with FP_EBPF_STUB=1")]
    fn object_maps_are_the_named_ones() {
        use aya_obj::EbpfSectionKind;
        let obj = parsed_object();
        // Not the .rodata/.bss/.data sections aya also lists as maps: the globals are checked
        // by `embedded_object_is_real`.
        let mut found: Vec<&str> = obj
            .maps
            .iter()
            .filter(|(_, m)| {
                matches!(m.section_kind(), EbpfSectionKind::Maps | EbpfSectionKind::BtfMaps)
            })
            .map(|(name, _)| name.as_str())
            .collect();
        found.sort_unstable();
        let mut named: Vec<&str> = maps::PINNED.iter().chain(&maps::UNPINNED).copied().collect();
        named.sort_unstable();
        assert_eq!(found, named, "the maps of fp-ebpf/src/maps.rs against fp_common::kernel::maps");
    }

    /// The object's programs are exactly those userspace attaches by name: one per hook, backend
    /// and kernel prototype ([`Hook::program`]) and the probes.
    #[test]
    #[cfg_attr(fp_ebpf_stub, ignore = "built with FP_EBPF_STUB=1")]
    fn object_programs_are_the_named_ones() {
        let obj = parsed_object();
        let mut found: Vec<&str> = obj.programs.keys().map(String::as_str).collect();
        found.sort_unstable();
        let mut named: Vec<&str> = Hook::ALL
            .iter()
            .flat_map(|h| Backend::ALL.map(|backend| h.program(backend, &[])))
            // Its function takes a namespace first on every kernel fp supports.
            .filter(|p| *p != "fp_fmod_ret_inode_setattr")
            .collect();
        named.extend([
            programs::INODE_SETATTR_IDMAP,
            programs::FMOD_RET_INODE_SETATTR_IDMAP,
            programs::BPF_KERNEL,
            programs::FMOD_RET_BPF_KERNEL,
            programs::PERF_EVENT_OPEN_TYPE,
            programs::FMOD_RET_PERF_EVENT_OPEN_TYPE,
            programs::PROBE,
            programs::PROBE_CGROUP,
            programs::PROBE_FMOD_RET,
        ]);
        named.sort_unstable();
        assert_eq!(found, named, "the programs of fp-ebpf/src/hooks against fp_common");
    }
}
