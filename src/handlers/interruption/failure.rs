//! What becomes of a record whose step failed (the cluster unreachable, an apiserver call that
//! failed or hung past the record's time, throttling).
//!
//! Keeping the message (a batch item failure) would spend the queue's `maxReceiveCount` on an
//! outage: at the shipped 30 s visibility and 5 receives a claimed drain would reach the DLQ
//! after about 75 s of apiserver trouble, and a notice whose first delivery failed would be lost
//! with no state on its node for the tick to find. So a failure that trying again can mend is
//! carried on like a claimed drain: a new message (the same body, its continuation attributes,
//! a failure count and when the failures began) delayed by a backoff, and the message it got is
//! acknowledged.
//!
//! - A claimed drain (a continuation: attempt > 0) continues so for as long as its failures
//!   last, its attempt counting on towards `MAX_ATTEMPTS` like any continuation.
//! - Work not claimed yet (a notice's first delivery, a fanned-out instance, the tick's
//!   resume-drain message) continues so for `UNCLAIMED_RETRY_WINDOW_S` after its first failure,
//!   then falls back to keeping its message: after `maxReceiveCount` receives it is in the DLQ,
//!   to be looked at, rather than retried for ever.
//! - A failure that trying again cannot mend (a rejected request, a missing setting) keeps its
//!   message and counts towards `maxReceiveCount`, as before.

use super::continuation::{
    delay_seconds, visibility_seconds, Continuation, Settlement, MAX_ATTEMPTS,
};
use crate::core::interruption::retry::{retry_in_s, Due};

/// How long work not yet claimed on its node is retried by message after its first failure:
/// half an hour, three times the ten minutes an apiserver outage or a control-plane upgrade may
/// take. Past it, its retries count towards `maxReceiveCount`.
pub const UNCLAIMED_RETRY_WINDOW_S: f64 = 1_800.0;
/// How to settle a record whose step failed, from whether trying again can help, the
/// continuation the record came with, the clock and what its notice says about time.
pub fn after_failure(
    retryable: bool,
    came_with: &Continuation,
    now: f64,
    recheck_s: f64,
    due: Due,
) -> Settlement {
    // The message kept, looked at again at the next check: receive-counted.
    let keep = Settlement::Retry {
        visibility_s: visibility_seconds(now + recheck_s, now),
    };
    if !retryable {
        return keep;
    }
    let claimed = came_with.attempt > 0;
    // A time in the future (a clock step, a hand-made attribute) counts as now, so the window
    // always ends.
    let since = came_with.failing_since.map_or(now, |t| t.min(now));
    if !claimed && now - since >= UNCLAIMED_RETRY_WINDOW_S {
        return keep;
    }
    let attempt = if claimed {
        came_with.attempt.saturating_add(1)
    } else {
        came_with.attempt
    };
    if attempt > MAX_ATTEMPTS {
        return Settlement::Fail;
    }
    let failures = came_with.failures.saturating_add(1);
    Settlement::Send {
        continuations: vec![(
            Continuation {
                attempt,
                failures,
                failing_since: Some(since),
                ..came_with.clone()
            },
            delay_seconds(now + retry_in_s(recheck_s, failures, due, now), now),
        )],
        // Not sent (SQS itself failing): keep this message instead, as before.
        on_failure: Box::new(keep),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: f64 = 1_700_000_000.0;
    const RECHECK: f64 = 15.0;

    fn came(attempt: u32, failures: u32, failing_since: Option<f64>) -> Continuation {
        Continuation {
            attempt,
            instance: Some("i-1".into()),
            fanout_after: None,
            failures,
            failing_since,
        }
    }

    fn send(c: Continuation, delay_s: i32) -> Settlement {
        Settlement::Send {
            continuations: vec![(c, delay_s)],
            on_failure: Box::new(Settlement::Retry { visibility_s: 15 }),
        }
    }

    #[test]
    fn failed_steps_continue_by_message_within_their_bounds() {
        let keep = Settlement::Retry { visibility_s: 15 };
        // (what, retryable, came with, expected)
        let cases: Vec<(&str, bool, Continuation, Settlement)> = vec![
            (
                "claimed drain, first failure: next attempt in one recheck",
                true,
                came(4, 0, None),
                send(came(5, 1, Some(NOW)), 15),
            ),
            (
                "claimed drain, third failure: the wait doubled twice, to the cap",
                true,
                came(6, 2, Some(NOW - 45.0)),
                send(came(7, 3, Some(NOW - 45.0)), 60),
            ),
            (
                "claimed drain failing for an hour: still by message (bounded by its attempts)",
                true,
                came(100, 60, Some(NOW - 3_600.0)),
                send(came(101, 61, Some(NOW - 3_600.0)), 60),
            ),
            (
                "first delivery of a notice, first failure: by message, not yet claimed",
                true,
                came(0, 0, None),
                send(came(0, 1, Some(NOW)), 15),
            ),
            (
                "first delivery failing for 10 minutes: still by message",
                true,
                came(0, 12, Some(NOW - 600.0)),
                send(came(0, 13, Some(NOW - 600.0)), 60),
            ),
            (
                "first delivery failing for 30 minutes: receive-counted, towards the DLQ",
                true,
                came(0, 40, Some(NOW - UNCLAIMED_RETRY_WINDOW_S)),
                keep.clone(),
            ),
            (
                "failures said to begin in the future count from now",
                true,
                came(0, 3, Some(NOW + 86_400.0)),
                send(came(0, 4, Some(NOW)), 60),
            ),
            (
                "claimed drain, a rejected request: receive-counted",
                false,
                came(4, 0, None),
                keep.clone(),
            ),
            (
                "first delivery, a rejected request: receive-counted",
                false,
                came(0, 0, None),
                keep.clone(),
            ),
            (
                "claimed drain past its attempts: to the DLQ",
                true,
                came(MAX_ATTEMPTS, 0, None),
                Settlement::Fail,
            ),
        ];
        for (what, retryable, came_with, expected) in cases {
            assert_eq!(
                after_failure(retryable, &came_with, NOW, RECHECK, Due::default()),
                expected,
                "{what}"
            );
        }
    }
}
