//! Policy errors: each names the file, line and column and says what was expected.
use std::fmt;
use std::path::{Path, PathBuf};

/// Where something was written: a file position, or a built-in list of fp.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
pub enum Source {
    File { file: PathBuf, line: usize, col: usize },
    Builtin { builtin: String },
}

impl Source {
    /// The position of byte `offset` of `text`, read from `file` (1-based line and column).
    pub fn at(file: &Path, text: &str, offset: usize) -> Source {
        Lines::new(text).source(file, offset)
    }
}

/// Where the lines of a text start, to name many positions in it (one per rule of a policy
/// file) without reading the text up to each again.
pub struct Lines<'a> {
    text: &'a str,
    /// The byte offset of each line's first byte, and whether the line is ASCII (its columns
    /// are then its bytes).
    starts: Vec<(usize, bool)>,
}

impl<'a> Lines<'a> {
    pub fn new(text: &'a str) -> Self {
        let mut starts = Vec::new();
        let mut start = 0;
        for line in text.split('\n') {
            starts.push((start, line.is_ascii()));
            start += line.len() + 1;
        }
        Lines { text, starts }
    }

    /// [`Source::at`] `offset` of the text.
    pub fn source(&self, file: &Path, offset: usize) -> Source {
        let offset = offset.min(self.text.len());
        let line = self.starts.partition_point(|&(start, _)| start <= offset).max(1);
        let (start, ascii) = self.starts[line - 1];
        let col = match ascii {
            true => offset - start,
            false => self.text.get(start..offset).map_or(0, |b| b.chars().count()),
        } + 1;
        Source::File { file: file.to_path_buf(), line, col }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::File { file, line, col } => write!(f, "{}:{line}:{col}", file.display()),
            Source::Builtin { builtin } => write!(f, "<builtin {builtin}>"),
        }
    }
}

/// What kind of mistake; tests and callers match on it, humans read the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    Io,
    Syntax,
    UnknownKey,
    WrongType,
    BadValue,
    InvalidGlob,
    RelativePath,
    DotDot,
    MixedSchemas,
    MissingWorkspace,
    UnknownUser,
    NoPolicy,
    Limit,
    /// A rule the kernel's tables cannot decide exactly (docs/policy.md, "Kernel tables").
    Undecidable,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyError {
    pub kind: ErrorKind,
    pub source: Option<Source>,
    pub message: String,
    /// What would have been accepted, or a suggestion.
    pub help: Option<String>,
}

impl PolicyError {
    pub fn new(kind: ErrorKind, source: Option<Source>, message: impl Into<String>) -> Self {
        PolicyError { kind, source, message: message.into(), help: None }
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(source) = &self.source {
            write!(f, "{source}: ")?;
        }
        write!(f, "error: {}", self.message)?;
        if let Some(help) = &self.help {
            write!(f, "\n  help: {help}")?;
        }
        Ok(())
    }
}

impl std::error::Error for PolicyError {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every byte offset gets the line and column of the text read up to it.
    #[test]
    fn positions_are_those_of_the_text_up_to_them() {
        let file = Path::new("p.toml");
        for text in ["", "a", "a\n", "ab\ncd\n\nxyz", "é\nxé y\n\"ü\" = 1\n", "\n\n"] {
            let lines = Lines::new(text);
            for offset in 0..=text.len() + 1 {
                let before = text.get(..offset.min(text.len())).unwrap_or(text);
                let line = before.matches('\n').count() + 1;
                let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
                if text.is_char_boundary(offset.min(text.len())) {
                    let expected = Source::File { file: file.into(), line, col };
                    assert_eq!(lines.source(file, offset), expected, "{text:?} at {offset}");
                }
            }
        }
    }
}
