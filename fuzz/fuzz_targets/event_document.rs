//! A whole file as `prewarm explain --event` reads it (an SQS event or one bare EventBridge
//! event): parsing and explaining never panic and agree record by record.
#![no_main]

use libfuzzer_sys::fuzz_target;

// Each target uses part of the shared checks.
#[allow(dead_code)]
#[path = "../invariants.rs"]
mod invariants;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        invariants::check_document(text);
    }
});
