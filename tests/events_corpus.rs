//! Replays the committed fuzz corpus (fuzz/corpus, minimised by `make fuzz`) and every input that
//! once crashed a fuzz target (fuzz/regressions) through the parsing, on stable Rust: no panic,
//! and the classification invariants of fuzz/invariants.rs hold for each.

use std::path::Path;

#[path = "../fuzz/invariants.rs"]
mod invariants;

fn files(dir: &str) -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        // The targets skip bytes that are not UTF-8 (no SQS body or JSON file is), as here.
        if let Ok(text) = String::from_utf8(bytes) {
            out.push((path.display().to_string(), text));
        }
    }
    out
}

fn replay(dir: &str, check: fn(&str)) -> usize {
    let inputs = files(dir);
    for (name, text) in &inputs {
        let outcome = std::panic::catch_unwind(|| check(text));
        assert!(
            outcome.is_ok(),
            "{name} breaks an invariant (see the panic above)"
        );
    }
    inputs.len()
}

#[test]
fn sqs_record_corpus_holds_the_invariants() {
    let n = replay("fuzz/corpus/sqs_record", invariants::check_body);
    assert!(
        n >= 20,
        "only {n} corpus files: is fuzz/corpus/sqs_record there?"
    );
}

#[test]
fn event_document_corpus_holds_the_invariants() {
    let n = replay("fuzz/corpus/event_document", invariants::check_document);
    assert!(
        n >= 20,
        "only {n} corpus files: is fuzz/corpus/event_document there?"
    );
}

#[test]
fn past_crashes_stay_fixed() {
    replay("fuzz/regressions/sqs_record", invariants::check_body);
    replay(
        "fuzz/regressions/event_document",
        invariants::check_document,
    );
}
