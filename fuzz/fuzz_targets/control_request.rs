//! Arbitrary bytes as a control socket request line — any request of the one protocol: sessions,
//! status, subscribe and the prompt tier's approvals: the parser must never panic, and whatever
//! it accepts must survive a round trip through its own encoding.
//! Run: `FP_EBPF_STUB=1 cargo +nightly fuzz run control_request` (in fuzz/).
#![no_main]

use fp_agent::daemon::api::{parse_request, request_line};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(request) = parse_request(data) else { return };
    let line = request_line(&request);
    let again = parse_request(&line[..line.len() - 1]).expect("an encoded request parses");
    assert_eq!(again, request);
});
