//! Check words: a hash over the words of a value that two sides copy without a lock (a cache
//! entry a program reads while another writes it, a map value userspace rewrites while programs
//! read it). A copy torn between two writes hashes to another word, but for a 2^-64 chance.

/// Where every check word's hash starts.
pub const SEED: u64 = 0x243f_6a88_85a3_08d3;

/// One step of a check word: `h` with `word` mixed in.
#[inline(always)]
pub fn mix(h: u64, word: u64) -> u64 {
    let h = (h ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^ (h >> 29)
}
