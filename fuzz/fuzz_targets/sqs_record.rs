//! One SQS record around arbitrary bytes as its body (invalid UTF-8 is what SQS cannot carry, so
//! it is skipped): every body is exactly one of notice / ignored / poison, with the invariants of
//! fuzz/invariants.rs.
#![no_main]

use libfuzzer_sys::fuzz_target;

// Each target uses part of the shared checks.
#[allow(dead_code)]
#[path = "../invariants.rs"]
mod invariants;

fuzz_target!(|data: &[u8]| {
    if let Ok(body) = std::str::from_utf8(data) {
        invariants::check_body(body);
    }
});
