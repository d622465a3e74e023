//! What a message of the interruption queue carries besides its body (the continuation
//! attributes: attempt, instance, fan-out position, failures), and the settlement a record gets
//! (`queue::settle`, `failure::after_failure`): the shared vocabulary of both, so neither
//! imports the other's decisions.

use std::collections::HashMap;

use aws_lambda_events::event::sqs::SqsMessageAttribute;

/// Continuation attempt (0 on the notice's own delivery).
pub const ATTEMPT_ATTR: &str = "prewarm-attempt";
/// The one instance a fanned-out continuation is about.
pub const INSTANCE_ATTR: &str = "prewarm-instance";
/// Where a fan-out resumes: after this instance id (not a position: a reservation's instances
/// are listed afresh at each resume, and nodes may have left the list meanwhile).
pub const FANOUT_AFTER_ATTR: &str = "prewarm-fanout-after";
/// Consecutive failed steps this message stands for (`failure`: absent when the last step did
/// not fail).
pub const FAILURES_ATTR: &str = "prewarm-failures";
/// When those failed steps began (seconds since the epoch): bounds how long work not claimed yet
/// is retried by message.
pub const FAILING_SINCE_ATTR: &str = "prewarm-failing-since";
/// SQS allows at most 15 minutes of DelaySeconds.
pub const MAX_DELAY_S: i32 = 900;
/// SQS refuses visibility timeouts above 12 hours.
pub const MAX_VISIBILITY_S: f64 = 43_200.0;
/// Instances fanned out per invocation (SendMessageBatch takes 10 at a time: 5 calls).
pub const FANOUT_CHUNK: usize = 50;
/// A drain still continuing after this many continuations (a day at the default 15 s recheck)
/// has something wrong with it that no further check will mend: it goes to the DLQ to be looked
/// at, instead of cycling for ever.
pub const MAX_ATTEMPTS: u32 = 5_760;

/// What the continuation attributes of a message say.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Continuation {
    pub attempt: u32,
    pub instance: Option<String>,
    pub fanout_after: Option<String>,
    /// Consecutive failed steps before this delivery (0: the last step did not fail).
    pub failures: u32,
    /// When those failures began.
    pub failing_since: Option<f64>,
}

impl Continuation {
    /// Reads the attributes; missing or unreadable ones are the defaults (a first delivery).
    pub fn of(attributes: &HashMap<String, SqsMessageAttribute>) -> Continuation {
        let get = |k: &str| {
            attributes
                .get(k)
                .and_then(|a| a.string_value.as_deref())
                .map(str::trim)
        };
        Continuation {
            attempt: get(ATTEMPT_ATTR).and_then(|v| v.parse().ok()).unwrap_or(0),
            instance: get(INSTANCE_ATTR)
                .filter(|v| !v.is_empty())
                .map(str::to_string),
            fanout_after: get(FANOUT_AFTER_ATTR)
                .filter(|v| !v.is_empty())
                .map(str::to_string),
            failures: get(FAILURES_ATTR).and_then(|v| v.parse().ok()).unwrap_or(0),
            failing_since: get(FAILING_SINCE_ATTR)
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|t| t.is_finite()),
        }
    }

    /// Whether the handler scheduled this message itself: a drain's continuation, or the retry
    /// of a failed step. (A fanned-out instance's first message stands for AWS's notice.)
    pub fn scheduled(&self) -> bool {
        self.attempt > 0 || self.failures > 0
    }

    /// The attributes of a continuation (name, data type, value).
    pub fn attributes(&self) -> Vec<(&'static str, &'static str, String)> {
        let mut out = vec![(ATTEMPT_ATTR, "Number", self.attempt.to_string())];
        if let Some(i) = &self.instance {
            out.push((INSTANCE_ATTR, "String", i.clone()));
        }
        if let Some(f) = &self.fanout_after {
            out.push((FANOUT_AFTER_ATTR, "String", f.clone()));
        }
        if self.failures > 0 {
            out.push((FAILURES_ATTR, "Number", self.failures.to_string()));
        }
        if let Some(t) = self.failing_since {
            out.push((FAILING_SINCE_ATTR, "Number", format!("{t:.3}")));
        }
        out
    }
}

/// What the handler does with the message.
#[derive(Clone, Debug, PartialEq)]
pub enum Settlement {
    /// Acknowledge (not a batch item failure): SQS deletes it.
    Delete,
    /// Send these continuations, then acknowledge. If sending fails, fall back to `on_failure`.
    Send {
        continuations: Vec<(Continuation, i32)>,
        on_failure: Box<Settlement>,
    },
    /// Batch item failure with the visibility set to this many seconds.
    Retry { visibility_s: i32 },
    /// Batch item failure, visibility untouched: after maxReceiveCount the DLQ.
    Fail,
}

/// Seconds until `at`, as SQS takes them for a visibility (whole seconds, 0..=12 h).
pub fn visibility_seconds(at: f64, now: f64) -> i32 {
    (at - now).ceil().clamp(0.0, MAX_VISIBILITY_S) as i32
}

/// Seconds until `at` as a DelaySeconds (whole seconds, 0..=900). A check further away than 15
/// minutes is simply looked at after 15 (and planned again then).
pub fn delay_seconds(at: f64, now: f64) -> i32 {
    visibility_seconds(at, now).min(MAX_DELAY_S)
}
