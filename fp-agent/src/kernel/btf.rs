//! A minimal reader of raw BTF (`/sys/kernel/btf/vmlinux`): just enough to find the byte offset of a
//! struct member, looking through anonymous struct/union members, the parameters of a function and
//! the names of an enum's values. aya's own BTF parser keeps member offsets private, so we read the
//! format ourselves (see the kernel's Documentation/bpf/btf.rst).
use anyhow::{Context as _, anyhow, bail, ensure};

const MAGIC: u16 = 0xeb9f;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_TYPE_TAG: u32 = 18;

/// The kinds of type [`Btf::type_id`] looks up.
#[derive(Clone, Copy)]
pub enum Kind {
    Func,
    Struct,
}

struct Type {
    name_off: u32,
    kind: u32,
    kind_flag: bool,
    /// For modifiers, typedefs and functions: the referenced type.
    type_ref: u32,
    /// Struct/union members, function prototype parameters (bit_offset 0), or an enum's
    /// values (bit_offset the value).
    members: Vec<Member>,
}

struct Member {
    name_off: u32,
    type_id: u32,
    bit_offset: u32,
}

/// Parsed BTF types (index = type id; id 0 is `void`).
pub struct Btf {
    types: Vec<Type>,
    strings: Vec<u8>,
}

impl Btf {
    /// The running kernel's BTF, parsed once per process (~0.4 s under TCG; it cannot change
    /// while the process runs).
    pub fn from_sys() -> anyhow::Result<&'static Self> {
        static PARSED: std::sync::OnceLock<Btf> = std::sync::OnceLock::new();
        if let Some(btf) = PARSED.get() {
            return Ok(btf);
        }
        let path = "/sys/kernel/btf/vmlinux";
        let data = std::fs::read(path).with_context(|| {
            format!("reading {path}: this kernel has no BTF (CONFIG_DEBUG_INFO_BTF)")
        })?;
        let btf = Self::parse(&data).with_context(|| format!("parsing {path}"))?;
        Ok(PARSED.get_or_init(|| btf))
    }

    pub fn parse(data: &[u8]) -> anyhow::Result<Self> {
        let u32_at = |off: usize| -> anyhow::Result<u32> {
            let b = data.get(off..off + 4).ok_or_else(|| anyhow!("truncated BTF at byte {off}"))?;
            Ok(u32::from_le_bytes(b.try_into().expect("4 bytes")))
        };
        ensure!(data.len() >= 24, "BTF shorter than its header");
        let magic = u16::from_le_bytes([data[0], data[1]]);
        ensure!(magic == MAGIC, "bad BTF magic {magic:#x} (big-endian BTF is not supported)");
        let hdr_len = u32_at(4)? as usize;
        let (type_off, type_len) = (u32_at(8)? as usize, u32_at(12)? as usize);
        let (str_off, str_len) = (u32_at(16)? as usize, u32_at(20)? as usize);
        let strings = data
            .get(hdr_len + str_off..hdr_len + str_off + str_len)
            .ok_or_else(|| anyhow!("BTF string section out of bounds"))?
            .to_vec();
        let mut types =
            vec![Type { name_off: 0, kind: 0, kind_flag: false, type_ref: 0, members: vec![] }];
        let (mut at, end) = (hdr_len + type_off, hdr_len + type_off + type_len);
        while at < end {
            let (name_off, info, size_or_type) = (u32_at(at)?, u32_at(at + 4)?, u32_at(at + 8)?);
            at += 12;
            let (vlen, kind, kind_flag) =
                ((info & 0xffff) as usize, (info >> 24) & 0x1f, info >> 31 == 1);
            let mut members = Vec::new();
            at += match kind {
                KIND_STRUCT | KIND_UNION => {
                    for i in 0..vlen {
                        let m = at + i * 12;
                        members.push(Member {
                            name_off: u32_at(m)?,
                            type_id: u32_at(m + 4)?,
                            bit_offset: u32_at(m + 8)?,
                        });
                    }
                    vlen * 12
                }
                KIND_FUNC_PROTO => {
                    for i in 0..vlen {
                        let p = at + i * 8;
                        members.push(Member {
                            name_off: u32_at(p)?,
                            type_id: u32_at(p + 4)?,
                            bit_offset: 0,
                        });
                    }
                    vlen * 8
                }
                KIND_ENUM => {
                    for i in 0..vlen {
                        let e = at + i * 8;
                        members.push(Member {
                            name_off: u32_at(e)?,
                            type_id: 0,
                            bit_offset: u32_at(e + 4)?,
                        });
                    }
                    vlen * 8
                }
                1 | 14 | 17 => 4,          // INT, VAR, DECL_TAG
                3 => 12,                   // ARRAY
                15 | 19 => vlen * 12,      // DATASEC, ENUM64
                2 | 7..=12 | 16 | 18 => 0, // PTR, FWD, TYPEDEF.., FUNC, FLOAT, TYPE_TAG
                k => bail!("unknown BTF kind {k} at byte {at}"),
            };
            types.push(Type { name_off, kind, kind_flag, type_ref: size_or_type, members });
        }
        Ok(Self { types, strings })
    }

    fn name(&self, off: u32) -> &[u8] {
        let rest = self.strings.get(off as usize..).unwrap_or_default();
        &rest[..rest.iter().position(|&b| b == 0).unwrap_or(rest.len())]
    }

    /// Skips typedefs and qualifiers.
    fn resolve(&self, mut id: u32) -> Option<&Type> {
        for _ in 0..32 {
            let t = self.types.get(id as usize)?;
            match t.kind {
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                    id = t.type_ref
                }
                _ => return Some(t),
            }
        }
        None
    }

    /// Byte offset of `field` in `struct strukt`; `field` may be dotted (`a.b`) to walk nested
    /// members. Anonymous struct/union members are searched transparently.
    pub fn member_offset(&self, strukt: &str, field: &str) -> anyhow::Result<u32> {
        let mut t = self
            .type_id(Kind::Struct, strukt)
            .and_then(|id| self.types.get(id as usize))
            .ok_or_else(|| anyhow!("struct {strukt} not found"))?;
        let mut total = 0u32;
        let mut parts = field.split('.').peekable();
        while let Some(part) = parts.next() {
            let (bits, type_id) = self
                .find_member(t, part.as_bytes(), 0)
                .ok_or_else(|| anyhow!("struct {strukt} has no member {field}"))?;
            ensure!(bits % 8 == 0, "{strukt}.{field} is a bitfield");
            total += bits / 8;
            if parts.peek().is_some() {
                t = self.resolve(type_id).ok_or_else(|| anyhow!("{strukt}.{part}: bad type"))?;
            }
        }
        Ok(total)
    }

    /// The type id of the function (a kfunc, say) or struct (one with members, not a forward
    /// declaration) named `name`, if the kernel has one.
    pub fn type_id(&self, kind: Kind, name: &str) -> Option<u32> {
        let kind = match kind {
            Kind::Func => KIND_FUNC,
            Kind::Struct => KIND_STRUCT,
        };
        let found = self.types.iter().position(|t| {
            t.kind == kind
                && !(kind == KIND_STRUCT && t.members.is_empty())
                && self.name(t.name_off) == name.as_bytes()
        })?;
        u32::try_from(found).ok()
    }

    /// Names of the parameters of function `func`, or None when the kernel has no such function.
    pub fn func_params(&self, func: &str) -> Option<Vec<&[u8]>> {
        let f = self.types.get(self.type_id(Kind::Func, func)? as usize)?;
        let proto = self.types.get(f.type_ref as usize).filter(|t| t.kind == KIND_FUNC_PROTO)?;
        Some(proto.members.iter().map(|p| self.name(p.name_off)).collect())
    }

    /// The name of the value `value` of `enum name` (a 32-bit one), if the kernel has both.
    pub fn enumerator(&self, name: &str, value: u32) -> Option<&[u8]> {
        let e = self
            .types
            .iter()
            .find(|t| t.kind == KIND_ENUM && self.name(t.name_off) == name.as_bytes())?;
        e.members.iter().find(|m| m.bit_offset == value).map(|m| self.name(m.name_off))
    }

    /// Bit offset and type id of `name` in `t`, searching anonymous members too.
    fn find_member(&self, t: &Type, name: &[u8], depth: u32) -> Option<(u32, u32)> {
        if depth > 8 {
            return None;
        }
        for m in &t.members {
            // With kind_flag the low 24 bits are the offset and the top 8 the bitfield size.
            let bits = if t.kind_flag { m.bit_offset & 0xff_ffff } else { m.bit_offset };
            if m.name_off != 0 {
                if self.name(m.name_off) == name {
                    return Some((bits, m.type_id));
                }
                continue;
            }
            let inner = self.resolve(m.type_id)?;
            if matches!(inner.kind, KIND_STRUCT | KIND_UNION)
                && let Some((b, id)) = self.find_member(inner, name, depth + 1)
            {
                return Some((bits + b, id));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds BTF with: int (1), struct inner { u32 hash; u32 len; } (2),
    /// union anon { struct inner; u64 hash_len; } (3), struct qstr { union anon; int *name; } (4)
    fn sample() -> Vec<u8> {
        let strings =
            b"\0int\0inner\0hash\0len\0qstr\0name\0hash_len\0f\0a\0b\0e\0E_ZERO\0E_TWO\0".to_vec();
        let off = |s: &str| {
            strings
                .windows(s.len() + 1)
                .position(|w| &w[..s.len()] == s.as_bytes() && w[s.len()] == 0)
                .unwrap() as u32
        };
        let mut t = Vec::new();
        let mut push = |v: &[u32]| v.iter().for_each(|x| t.extend_from_slice(&x.to_le_bytes()));
        push(&[off("int"), 1 << 24, 4, 32]); // 1: INT
        push(&[off("inner"), (4 << 24) | 2, 8, off("hash"), 1, 0, off("len"), 1, 32]); // 2
        push(&[0, (5 << 24) | 2, 8, 0, 2, 0, off("hash_len"), 1, 0]); // 3: anonymous union
        push(&[0, 2 << 24, 1]); // 5? no: 4: PTR to int
        push(&[off("qstr"), (4 << 24) | 2, 16, 0, 3, 0, off("name"), 4, 64]); // 5: qstr
        push(&[0, (13 << 24) | 2, 1, off("a"), 4, off("b"), 1]); // 6: int (int *a, int b)
        push(&[off("f"), 12 << 24, 6]); // 7: FUNC f
        push(&[off("e"), (6 << 24) | 2, 4, off("E_ZERO"), 0, off("E_TWO"), 2]); // 8: enum e
        let mut data = Vec::new();
        for x in
            [MAGIC as u32 | (1 << 16), 24, 0, t.len() as u32, t.len() as u32, strings.len() as u32]
        {
            data.extend_from_slice(&x.to_le_bytes());
        }
        data.extend_from_slice(&t);
        data.extend_from_slice(&strings);
        data
    }

    #[test]
    fn finds_members_through_anonymous_unions() {
        let btf = Btf::parse(&sample()).unwrap();
        assert_eq!(btf.member_offset("qstr", "len").unwrap(), 4);
        assert_eq!(btf.member_offset("qstr", "hash_len").unwrap(), 0);
        assert_eq!(btf.member_offset("qstr", "name").unwrap(), 8);
    }

    #[test]
    fn finds_function_parameters() {
        let btf = Btf::parse(&sample()).unwrap();
        assert_eq!(btf.func_params("f").unwrap(), [b"a".as_slice(), b"b".as_slice()]);
        assert!(btf.func_params("qstr").is_none());
        assert!(btf.func_params("nope").is_none());
    }

    #[test]
    fn finds_type_ids_by_kind_and_name() {
        let btf = Btf::parse(&sample()).unwrap();
        assert_eq!(btf.type_id(Kind::Func, "f"), Some(7));
        assert_eq!(btf.type_id(Kind::Struct, "qstr"), Some(5));
        assert_eq!(btf.type_id(Kind::Struct, "f"), None);
        assert_eq!(btf.type_id(Kind::Func, "qstr"), None);
        assert_eq!(btf.type_id(Kind::Func, "nope"), None);
    }

    #[test]
    fn missing_struct_and_member_are_named() {
        let btf = Btf::parse(&sample()).unwrap();
        assert_eq!(
            btf.member_offset("nope", "x").unwrap_err().to_string(),
            "struct nope not found"
        );
        assert_eq!(
            btf.member_offset("qstr", "nope").unwrap_err().to_string(),
            "struct qstr has no member nope"
        );
    }

    #[test]
    fn finds_enum_values_by_number() {
        let btf = Btf::parse(&sample()).unwrap();
        assert_eq!(btf.enumerator("e", 2), Some(b"E_TWO".as_slice()));
        assert_eq!(btf.enumerator("e", 0), Some(b"E_ZERO".as_slice()));
        assert_eq!(btf.enumerator("e", 1), None);
        assert_eq!(btf.enumerator("qstr", 0), None);
    }

    #[test]
    fn rejects_garbage() {
        assert!(Btf::parse(b"not btf at all, definitely not").is_err());
        assert!(Btf::parse(&sample()[..30]).is_err());
    }

    #[test]
    fn reads_this_hosts_btf_when_present() {
        if let Ok(btf) = Btf::from_sys() {
            assert!(btf.member_offset("file", "f_path").is_ok());
            assert!(btf.member_offset("qstr", "len").is_ok());
            assert_eq!(btf.func_params("bpf_lsm_path_unlink").unwrap().len(), 2);
            assert!(btf.type_id(Kind::Struct, "seqcount").is_some());
            assert_eq!(btf.enumerator("lockdown_reason", 0), Some(b"LOCKDOWN_NONE".as_slice()));
        }
    }
}
