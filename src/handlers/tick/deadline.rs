//! How long a tick may take. Each target's tick runs within TARGET_TIMEOUT_SECONDS: a hung API
//! server or metric source fails that target's tick, never the others' or the invocation's. A
//! tick starts only while that much time is still left before the invocation's deadline. A
//! scheduled invocation that Lambda delivers late (throttled) runs no tick at all.

use std::future::Future;
use std::time::Duration;

use super::TargetReport;
use crate::error::Error;

/// One target's `tick`, or once `limit_s` has passed, a failed report (a retryable timeout)
/// stamped `at`. Dropping the unfinished tick cancels its calls; every write it makes is
/// conditional on the version it read, so the next tick reads afresh and plans again.
pub async fn within(
    limit_s: f64,
    target: &str,
    dry_run: bool,
    at: Option<String>,
    tick: impl Future<Output = TargetReport>,
) -> TargetReport {
    match tokio::time::timeout(Duration::from_secs_f64(limit_s.max(0.0)), tick).await {
        Ok(report) => report,
        Err(_) => {
            let e = Error::kube(
                "tick",
                format!("target {target}"),
                format!(
                    "did not finish within TARGET_TIMEOUT_SECONDS ({limit_s} s): a metric source \
                     or the API server is not answering; the next tick tries again"
                ),
                true,
            );
            TargetReport {
                at,
                ..TargetReport::new(target, dry_run)
            }
            .failed(&e)
        }
    }
}

/// Whether a tick starting at `now` that may take `budget_s` ends by `deadline` (Unix seconds).
/// Asked on the clock before each tick after the first, not on the planned times: a tick that
/// overran leaves less time than the plan assumed.
pub fn fits_before(now: f64, budget_s: f64, deadline: f64) -> bool {
    now + budget_s <= deadline
}

/// A scheduled invocation delivered later than this after its scheduled time runs no tick: the
/// next minute's invocation is already due, and two late ones would only overlap. This is the
/// handler's own bound rather than Lambda's `MaximumEventAgeInSeconds`, because that one also
/// bounds the stack's custom resource requests, which must survive a throttled minute.
pub const LATEST_SCHEDULED_START_S: f64 = 60.0;

/// How late (seconds after its `time`) an EventBridge scheduled event arrives at `now`, or
/// `None` for any other payload (a custom resource request, a hand-made `{}`), which always runs.
pub fn scheduled_lateness(payload: &serde_json::Value, now: f64) -> Option<f64> {
    if payload.get("detail-type")?.as_str()? != "Scheduled Event" {
        return None;
    }
    let scheduled =
        crate::adapters::kube::headroom::annotations::parse_time(payload.get("time")?.as_str()?);
    scheduled.ok().map(|t| now - t)
}

/// Whether a scheduled invocation arriving `lateness_s` after its time is too late to tick.
pub fn too_late(lateness_s: Option<f64>) -> bool {
    lateness_s.is_some_and(|late| late > LATEST_SCHEDULED_START_S)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scheduled_event_runs_only_within_a_minute_of_its_time() {
        // 2026-11-29T12:00:00Z is 1_795_953_600 s since the epoch: 20,786 days from 1970-01-01
        // (56 years of 365 days = 20,440, 14 leap days, 332 days of 2026 before 29 November)
        // x 86,400 = 1,795,910,400, plus 12 h = 43,200.
        let at = 1_795_953_600.0;
        let scheduled = |time: &str| serde_json::json!({"detail-type": "Scheduled Event", "source": "aws.events", "time": time});
        let rows: &[(&str, serde_json::Value, f64, Option<f64>, bool)] = &[
            (
                "on time",
                scheduled("2026-11-29T12:00:00Z"),
                at + 0.4,
                Some(0.4),
                false,
            ),
            (
                "a minute late runs",
                scheduled("2026-11-29T12:00:00Z"),
                at + 60.0,
                Some(60.0),
                false,
            ),
            (
                "throttled past the minute",
                scheduled("2026-11-29T12:00:00Z"),
                at + 61.0,
                Some(61.0),
                true,
            ),
            (
                "days late",
                scheduled("2026-11-29T12:00:00Z"),
                at + 3.0 * 86_400.0,
                Some(259_200.0),
                true,
            ),
            // A clock a little behind EventBridge's: early is not late.
            (
                "early",
                scheduled("2026-11-29T12:00:00Z"),
                at - 2.0,
                Some(-2.0),
                false,
            ),
            (
                "no time",
                serde_json::json!({"detail-type": "Scheduled Event"}),
                at,
                None,
                false,
            ),
            (
                "a time that does not parse",
                scheduled("noon"),
                at,
                None,
                false,
            ),
            (
                "not scheduled",
                serde_json::json!({"RequestType": "Delete", "time": "1970-01-01T00:00:00Z"}),
                at,
                None,
                false,
            ),
            (
                "a hand-made invocation",
                serde_json::json!({}),
                at,
                None,
                false,
            ),
        ];
        for (name, payload, now, lateness, late) in rows {
            let got = scheduled_lateness(payload, *now);
            assert_eq!(got.map(|s| (s * 10.0).round() / 10.0), *lateness, "{name}");
            assert_eq!(too_late(got), *late, "{name}");
        }
    }

    #[tokio::test]
    async fn a_target_that_never_finishes_gets_a_timeout_and_one_that_does_its_report() {
        // A zero limit: the never-finishing tick is cut at the first check, with no wait.
        let hung = within(
            0.0,
            "llama",
            false,
            Some("2026-11-29T12:00:00.000Z".into()),
            std::future::pending::<TargetReport>(),
        )
        .await;
        let error = hung.error.as_deref().unwrap_or_default();
        assert!(error.contains("TARGET_TIMEOUT_SECONDS"), "{error}");
        assert_eq!(hung.retryable, Some(true));
        assert_eq!(hung.at.as_deref(), Some("2026-11-29T12:00:00.000Z"));
        assert_eq!(hung.action(), "error");
        // A tick that finishes is its own report.
        let done = TargetReport {
            skipped: Some("done".into()),
            ..TargetReport::new("llama", false)
        };
        let got = within(10.0, "llama", false, None, async { done.clone() }).await;
        assert_eq!((got.skipped, got.error), (Some("done".into()), None));
    }

    #[test]
    fn a_tick_starts_only_while_its_budget_fits_before_the_deadline() {
        // (now, budget, deadline, starts) - by hand: now + budget <= deadline.
        let rows = [
            (1_000.0, 10.0, 1_090.0, true),
            (1_080.0, 10.0, 1_090.0, true),
            (1_080.5, 10.0, 1_090.0, false),
            // A planned tick at 1 045 that starts at 1 085 after an overrun: no time left.
            (1_085.0, 10.0, 1_090.0, false),
            (1_000.0, 10.0, f64::INFINITY, true),
        ];
        for (now, budget, deadline, starts) in rows {
            assert_eq!(
                fits_before(now, budget, deadline),
                starts,
                "{now} {deadline}"
            );
        }
    }
}
