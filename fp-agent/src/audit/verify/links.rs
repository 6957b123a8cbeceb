//! Step 4, a broken link: telling a modified, deleted, inserted, reordered or duplicated record
//! apart, and where the damage starts.
use std::borrow::Cow;

use super::super::chain::Hash;
use super::lines::{lines, peek};
use super::{ProblemClass, Seen, WINDOW, Walk};

impl Walk<'_> {
    /// Up to [`WINDOW`] lines after the current one, in walk order (into the following segments),
    /// up to the first that is not a whole record line: `(stored hash, prev)`.
    fn look_ahead(&self, index: usize, rest: &[u8]) -> Vec<(Hash, Hash)> {
        let mut ahead = Vec::new();
        let mut data = Cow::Borrowed(rest);
        let mut next = index + 1;
        loop {
            for (_, line, terminated) in lines(&data) {
                if ahead.len() == WINDOW {
                    return ahead;
                }
                match peek(line, terminated) {
                    Some(entry) => ahead.push(entry),
                    None => return ahead,
                }
            }
            let Some(path) = self.segments.get(next) else { return ahead };
            let Ok(read) = std::fs::read(path) else { return ahead };
            data = Cow::Owned(read);
            next += 1;
        }
    }

    /// Names a broken link (this line's prev is not the previous record's hash) and where the
    /// damage starts: `(class, the earlier record where it starts if not this line, detail)`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn classify_break(
        &self,
        index: usize,
        data: &[u8],
        offset: usize,
        line: &[u8],
        seq: u64,
        prev: Hash,
        claimed: Hash,
    ) -> (ProblemClass, Option<Seen>, String) {
        let expected = self.expected_seq;
        if self.recent.iter().any(|seen| seen.hash == claimed) {
            return (
                ProblemClass::SeqGapOrDuplicate,
                None,
                format!("duplicate of the record with seq {seq}"),
            );
        }
        if let Some(i) = self.recent.iter().rposition(|seen| seen.hash == prev) {
            let count = self.recent.len() - i - 1;
            return (
                ProblemClass::InsertedRecord,
                Some(self.recent[i + 1]),
                format!("{count} record(s) not in the chain before seq {seq}"),
            );
        }
        let ahead = self.look_ahead(index, &data[offset + line.len() + 1..]);
        if ahead.iter().any(|(hash, _)| *hash == prev) {
            return (
                ProblemClass::ReorderedRecords,
                None,
                format!("seq {seq} appears before its predecessor"),
            );
        }
        if ahead.first().is_some_and(|(_, next_prev)| *next_prev == self.head) {
            return (
                ProblemClass::InsertedRecord,
                None,
                format!("record claiming seq {seq} is not in the chain"),
            );
        }
        if seq > expected {
            return (
                ProblemClass::DeletedRecord,
                None,
                format!(
                    "{} record(s) missing before seq {seq} (expected {expected})",
                    seq - expected,
                ),
            );
        }
        match self.recent.back() {
            Some(&last) => (
                ProblemClass::ModifiedRecord,
                Some(last),
                format!(
                    "record seq {} was rewritten: its successor links to another hash",
                    last.seq
                ),
            ),
            None => (
                ProblemClass::ModifiedRecord,
                None,
                "the first record does not link to where the walk starts".into(),
            ),
        }
    }
}
