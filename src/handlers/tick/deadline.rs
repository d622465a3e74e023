//! How long a tick may take. Each target's tick runs within TARGET_TIMEOUT_SECONDS: a hung API
//! server or metric source fails that target's tick, never the others' or the invocation's. A
//! tick starts only while that much time is still left before the invocation's deadline.

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
            let e = Error::Kube {
                operation: "tick".into(),
                object: format!("target {target}"),
                message: format!(
                    "did not finish within TARGET_TIMEOUT_SECONDS ({limit_s} s): a metric source \
                     or the API server is not answering; the next tick tries again"
                ),
                retryable: true,
            };
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

#[cfg(test)]
mod tests {
    use super::*;

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
