//! Rule globs: expansion of `<workspace>` and `~`, lexical normalization, validation, the shape
//! the kernel tables can hold, and specificity.
//!
//! Glob syntax is globset's with `*` never crossing `/`: `*` any bytes but `/`, `?` one byte but
//! `/`, `[...]` a class, `{a,b}` alternatives, `\x` a literal `x`, and `**` as a whole component
//! only (`**/x`, `/a/**`, `/a/**/x`). Matching is case-sensitive and byte-exact.
use std::path::{Path, PathBuf};

use fp_common::policy::{MAX_NAME, NameKind};
use globset::{Glob, GlobBuilder};

use super::error::ErrorKind;

/// What a glob expands `<workspace>` and `~` to.
#[derive(Clone, Copy, Debug)]
pub struct Expansion<'a> {
    pub workspace: Option<&'a Path>,
    pub home: &'a Path,
}

/// A problem with one glob; the caller adds where it was written.
pub type GlobError = (ErrorKind, String, String);

const WORKSPACE: &str = "<workspace>";

/// Expands, normalizes and validates `text` into the glob the evaluators use.
pub fn prepare(text: &str, ctx: Expansion<'_>) -> Result<String, GlobError> {
    let expanded = expand(text, ctx)?;
    let glob = normalize(&expanded)?;
    build(&glob).map_err(|e| {
        (
            ErrorKind::InvalidGlob,
            format!("invalid glob \"{text}\": {}", e.kind()),
            "see the glob rules in docs/policy.md".to_string(),
        )
    })?;
    Ok(glob)
}

/// The one way fp builds a glob matcher, so validation and matching agree.
pub fn build(glob: &str) -> Result<Glob, globset::Error> {
    GlobBuilder::new(glob).literal_separator(true).backslash_escape(true).build()
}

/// Escapes `literal` so it matches itself (expanded paths may contain glob characters).
pub fn escape(literal: &str) -> String {
    let mut out = String::with_capacity(literal.len());
    for c in literal.chars() {
        if matches!(c, '\\' | '*' | '?' | '[' | ']' | '{' | '}') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn expand(text: &str, ctx: Expansion<'_>) -> Result<String, GlobError> {
    let relative = || {
        (
            ErrorKind::RelativePath,
            format!("relative rule path \"{text}\""),
            "rule paths start with /, ~/, <workspace>/ or **/".to_string(),
        )
    };
    let (base, rest) = if let Some(rest) = text.strip_prefix(WORKSPACE) {
        let Some(ws) = ctx.workspace else {
            return Err((
                ErrorKind::MissingWorkspace,
                format!("\"{text}\" uses <workspace> but the session has no workspace"),
                "pass --workspace DIR (a non-empty absolute path)".to_string(),
            ));
        };
        (Some(ws), rest)
    } else if let Some(rest) = text.strip_prefix('~') {
        (Some(ctx.home), rest)
    } else {
        (None, text)
    };
    if text.contains(WORKSPACE) && !text.starts_with(WORKSPACE) {
        return Err((
            ErrorKind::BadValue,
            format!("\"{text}\": <workspace> may only start a rule path"),
            "write <workspace>/...".to_string(),
        ));
    }
    match base {
        Some(dir) => {
            if !(rest.is_empty() || rest.starts_with('/')) {
                return Err((
                    ErrorKind::BadValue,
                    format!(
                        "\"{text}\": expected / after {}",
                        if text.starts_with('~') { "~" } else { WORKSPACE }
                    ),
                    "~user is not supported; write ~/... or <workspace>/...".to_string(),
                ));
            }
            let Some(dir) = dir.to_str() else {
                return Err((
                    ErrorKind::BadValue,
                    format!("\"{text}\": {} is not UTF-8", dir.display()),
                    "rule paths are UTF-8".to_string(),
                ));
            };
            if !dir.starts_with('/') {
                return Err(relative());
            }
            Ok(format!("{}{rest}", escape(dir)))
        }
        None if text.starts_with('/') => Ok(text.to_string()),
        None if text == "**" || text.starts_with("**/") => Ok(text.to_string()),
        None => Err(relative()),
    }
}

/// Drops empty and `.` components and a trailing `/`; `..` is an error (rules name paths the
/// kernel sees, which never contain it).
fn normalize(glob: &str) -> Result<String, GlobError> {
    let absolute = glob.starts_with('/');
    let mut parts = Vec::new();
    for comp in glob.split('/') {
        match comp {
            "" | "." => {}
            ".." => {
                return Err((
                    ErrorKind::DotDot,
                    format!("\"{glob}\" contains a `..` component"),
                    "write the path without `..`".to_string(),
                ));
            }
            c if c.contains("**") && c != "**" => {
                return Err((
                    ErrorKind::InvalidGlob,
                    format!("\"{glob}\": `**` must be a whole path component, found \"{c}\""),
                    "write **/name, dir/** or a/**/b; use * within a component".to_string(),
                ));
            }
            c => parts.push(c),
        }
    }
    let joined = parts.join("/");
    Ok(if absolute { format!("/{joined}") } else { joined })
}

/// One component of a glob, as the kernel tables see it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Component {
    Literal(Vec<u8>),
    /// `**`
    Any,
    /// `*lit`
    Suffix(Vec<u8>),
    /// `lit*`
    Prefix(Vec<u8>),
    /// Anything else with a wildcard.
    Pattern,
}

fn component(text: &str) -> Component {
    if text == "**" {
        return Component::Any;
    }
    let mut literal = Vec::new();
    let mut stars = Vec::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e) => literal.extend_from_slice(e.encode_utf8(&mut [0; 4]).as_bytes()),
                None => return Component::Pattern,
            },
            '*' => stars.push(literal.len()),
            '?' | '[' | ']' | '{' | '}' => return Component::Pattern,
            c => literal.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    match stars.as_slice() {
        [] => Component::Literal(literal),
        [0] if !literal.is_empty() => Component::Suffix(literal),
        [at] if *at == literal.len() && !literal.is_empty() => Component::Prefix(literal),
        _ => Component::Pattern,
    }
}

/// Where a glob's matches live, in the terms of the kernel tables. Directory byte strings are
/// absolute without a trailing `/` (the root is empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Exactly this path.
    Exact(Vec<u8>),
    /// Every path strictly below this directory.
    Subtree(Vec<u8>),
    /// A component named `name` (of `kind`) at or below `scope` (right in it if
    /// `children_only`). Not `exact`: every match has such a component, but not every path with
    /// one matches (the kernel defers on it).
    Name { scope: Vec<u8>, kind: NameKind, name: Vec<u8>, exact: bool, children_only: bool },
    /// The kernel cannot match it: everything below this directory defers to userspace.
    Defer(Vec<u8>),
}

/// The shape of a prepared glob.
pub fn shape(glob: &str) -> Shape {
    let comps: Vec<Component> = glob.split('/').filter(|c| !c.is_empty()).map(component).collect();
    let mut dir = Vec::new();
    let mut i = 0;
    if glob.starts_with('/') {
        while let Some(Component::Literal(l)) = comps.get(i) {
            dir.push(b'/');
            dir.extend_from_slice(l);
            i += 1;
        }
    }
    let rest = &comps[i..];
    let named = |kind, name: &Vec<u8>, exact: bool, children_only: bool| {
        if name.len() > MAX_NAME {
            Shape::Defer(dir.clone())
        } else {
            Shape::Name { scope: dir.clone(), kind, name: name.clone(), exact, children_only }
        }
    };
    let name = |kind, name: &Vec<u8>, exact: bool| named(kind, name, exact, false);
    match rest {
        [] => Shape::Exact(if dir.is_empty() { b"/".to_vec() } else { dir }),
        [Component::Any] => Shape::Subtree(dir),
        // `dir/*suffix`, `dir/prefix*`: the final component right in the literal directory (a
        // `*` never crosses a `/`).
        [Component::Suffix(s)] if glob.starts_with('/') => named(NameKind::Suffix, s, true, true),
        [Component::Prefix(p)] if glob.starts_with('/') => named(NameKind::Prefix, p, true, true),
        // `dir/*suffix/**`, `dir/prefix*/**`: below a directory right in the literal one.
        [Component::Suffix(s), Component::Any] if glob.starts_with('/') => {
            named(NameKind::DirSuffix, s, true, true)
        }
        [Component::Prefix(p), Component::Any] if glob.starts_with('/') => {
            named(NameKind::DirPrefix, p, true, true)
        }
        [Component::Any, Component::Literal(n)] => name(NameKind::Basename, n, true),
        [Component::Any, Component::Literal(n), Component::Any] => name(NameKind::Dirname, n, true),
        [Component::Any, Component::Suffix(s)] => name(NameKind::Suffix, s, true),
        [Component::Any, Component::Prefix(p)] => name(NameKind::Prefix, p, true),
        [Component::Any, Component::Suffix(s), Component::Any] => {
            name(NameKind::DirSuffix, s, true)
        }
        [Component::Any, Component::Prefix(p), Component::Any] => {
            name(NameKind::DirPrefix, p, true)
        }
        // Not decidable, but every match ends in (or passes through) a known component: defer
        // only where that component occurs.
        [.., Component::Literal(n)] => name(NameKind::Basename, n, false),
        [.., Component::Suffix(s)] => name(NameKind::Suffix, s, false),
        [.., Component::Prefix(p)] => name(NameKind::Prefix, p, false),
        [.., Component::Literal(n), Component::Any] => name(NameKind::Dirname, n, false),
        [.., Component::Suffix(s), Component::Any] => name(NameKind::DirSuffix, s, false),
        [.., Component::Prefix(p), Component::Any] => name(NameKind::DirPrefix, p, false),
        _ => Shape::Defer(dir),
    }
}

/// Whether the kernel's tables decide every match of the prepared `glob` by its shape (a rule may
/// still pass one of their limits: docs/policy.md, "Limits").
pub fn decidable(glob: &str) -> bool {
    !matches!(shape(glob), Shape::Defer(_) | Shape::Name { exact: false, .. })
}

/// A decidable form of a rule the kernel cannot decide, matching every path it matches and more:
/// (`text`, as written, and `glob`, prepared) with each `*` component before the last as `**`
/// (`/opt/*/cache/**` -> `/opt/**/cache/**`), else its literal directory's whole tree
/// (`/tmp/claude-*/x*y` -> `/tmp/**`). None when neither is decidable or there is no directory.
pub fn wider_decidable(text: &str, glob: &str) -> Option<String> {
    let deepen = |g: &str| {
        let comps: Vec<&str> = g.split('/').collect();
        let last = comps.len().saturating_sub(1);
        let out: Vec<&str> = comps
            .iter()
            .enumerate()
            .map(|(i, c)| if i < last && *c == "*" { "**" } else { c })
            .collect();
        out.join("/")
    };
    if deepen(glob) != glob && decidable(&deepen(glob)) {
        return Some(deepen(text));
    }
    let wild = |c: &str| c.contains(['*', '?', '[', '{']);
    let literal: Vec<&str> = text.split('/').take_while(|c| !wild(c)).collect();
    let tree = format!("{}/**", literal.join("/"));
    let literal_glob: Vec<&str> = glob.split('/').take_while(|c| !wild(c)).collect();
    let tree_glob = format!("{}/**", literal_glob.join("/"));
    (!literal.join("").is_empty() && tree != text && decidable(&tree_glob)).then_some(tree)
}

/// Specificity of a glob: (class, literal bytes), compared in that order.
///
/// Class: 3 = no wildcard at all (one exact path); 2 = the final component is literal (`**/.env`,
/// `/a/**/b`); 1 = the final component is partly a wildcard (`**/*.pem`, `/a/b*`); 0 = the final
/// component is `**` (a subtree). Literal bytes: the bytes a matching path must contain verbatim,
/// i.e. every byte of the glob outside `*`, `?`, `[...]` and `{...}`, an escaped byte counting once.
pub fn specificity(glob: &str) -> (u32, u32) {
    let last = glob.rsplit('/').next().unwrap_or("");
    let class = if matches!(shape(glob), Shape::Exact(_)) {
        3
    } else {
        match component(last) {
            Component::Literal(_) => 2,
            Component::Any => 0,
            _ => 1,
        }
    };
    (class, literal_bytes(glob))
}

fn literal_bytes(glob: &str) -> u32 {
    let mut count = 0u32;
    let mut depth = 0u32;
    let mut bytes = glob.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'\\' => {
                bytes.next();
                count += u32::from(depth == 0);
            }
            b'[' | b'{' => depth += 1,
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'*' | b'?' => {}
            _ => count += u32::from(depth == 0),
        }
    }
    count
}

/// Most directory entries one resolution of a session's file entries reads (`sockets`,
/// `block_devices`): the session starts in bounded time whatever the globs.
pub const MAX_SCANNED: usize = 100_000;

/// The paths an absolute glob without `**` matches, one component at a time: a component
/// without glob characters is taken as it is, one with them is matched against its directory's
/// entries (`budget` of them at most, over every call; [`MAX_SCANNED`] for a session's).
pub fn matching_paths(pattern: &str, budget: &mut usize) -> Vec<PathBuf> {
    let mut found = vec![PathBuf::from("/")];
    for component in pattern.split('/').filter(|c| !c.is_empty()) {
        let literal = !component.contains(['*', '?', '[', '{', '\\']);
        let matcher = match literal {
            true => None,
            false => match build(component) {
                Ok(g) => Some(g.compile_matcher()),
                Err(_) => return Vec::new(),
            },
        };
        let mut next = Vec::new();
        for dir in &found {
            let Some(matcher) = &matcher else {
                next.push(dir.join(component));
                continue;
            };
            let Ok(entries) = std::fs::read_dir(dir) else { continue };
            for entry in entries.flatten() {
                if *budget == 0 {
                    return next;
                }
                *budget -= 1;
                if matcher.is_match(entry.file_name()) {
                    next.push(entry.path());
                }
            }
        }
        next.sort();
        found = next;
    }
    found
}
