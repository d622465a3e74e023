//! When a drain's failed step is tried again (the cluster unreachable, an apiserver call that
//! failed or hung, throttling): a backoff that asks a struggling apiserver less often, bounded by
//! the times the drain must act by. The handler (`handlers::interruption::failure`) sends the
//! retry as a delayed message.

/// The longest wait between two failed steps: the recheck doubles per failure up to this (or
/// the recheck itself, when that is longer), so a throttled apiserver is asked less often but a
/// drain resumes within a minute of the apiserver's return.
pub const BACKOFF_CAP_S: f64 = 60.0;

/// What the notice a record carries says about time: its eviction deadline and the instance's
/// end ([`super::deadline`]); none for a resume-drain message (its node holds them).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Due {
    pub deadline: Option<f64>,
    pub end: Option<f64>,
}

/// Seconds to wait before the step after `failures` consecutive failed steps (1 for the first):
/// the recheck, doubled per further failure, at most `BACKOFF_CAP_S` (or the recheck).
pub fn backoff_s(recheck_s: f64, failures: u32) -> f64 {
    let doubled = recheck_s * 2f64.powi(failures.saturating_sub(1).min(16) as i32);
    doubled.min(BACKOFF_CAP_S.max(recheck_s))
}

/// How long before a time the drain must act by its retry is aimed: 2 s. An SQS delay is whole
/// seconds rounded up (up to 1 s late), and the delivery to the function and the step's first
/// apiserver calls take up to about another second on a healthy queue; so a retry aimed 2 s
/// early acts by that time rather than just after it.
pub const RETRY_MARGIN_S: f64 = 2.0;
/// The shortest wait between two tries: SQS delays are whole seconds.
const SHORTEST_RETRY_S: f64 = 1.0;

/// The wait before the next try. While the notice's times are ahead, the drain is as urgent as
/// its own checks: every recheck, and never later than `RETRY_MARGIN_S` before the next time it
/// must act by (its deadline, then the instance's end), so a throttled or briefly unreachable
/// apiserver never makes it miss either by a doubled wait. Past the instance's end every step
/// still owed is an eviction already late (its successor waits for it), so the wait stays one
/// recheck rather than doubling. Only without notice times (a resume message: its node holds
/// them; a notice without a deadline) does the backoff apply.
pub fn retry_in_s(recheck_s: f64, failures: u32, due: Due, now: f64) -> f64 {
    let Some(end) = due.end else {
        return backoff_s(recheck_s, failures);
    };
    match [due.deadline, Some(end)]
        .into_iter()
        .flatten()
        .find(|&t| now < t)
    {
        Some(act_by) => recheck_s
            .min(act_by - now - RETRY_MARGIN_S)
            .max(SHORTEST_RETRY_S),
        None => recheck_s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: f64 = 1_700_000_000.0;
    const RECHECK: f64 = 15.0;

    #[test]
    fn a_failed_steps_retry_lands_before_the_time_the_drain_must_act_by() {
        let due = |deadline: f64, end: f64| Due {
            deadline: Some(NOW + deadline),
            end: Some(NOW + end),
        };
        // (what, failures so far, due, expected seconds)
        let cases: Vec<(&str, u32, Due, f64)> = vec![
            (
                "deadline 20 s away: one recheck (15 < 20 − 2)",
                3,
                due(20.0, 50.0),
                15.0,
            ),
            (
                "deadline 6 s away: 2 s before it (6 − 2)",
                3,
                due(6.0, 36.0),
                4.0,
            ),
            (
                "deadline 1.5 s away: the shortest wait, 1 s",
                3,
                due(1.5, 31.5),
                1.0,
            ),
            (
                "past the deadline, end 29 s away: one recheck (15 < 27)",
                5,
                due(-1.0, 29.0),
                15.0,
            ),
            (
                "past the deadline, end 10 s away: 2 s before the end (10 − 2)",
                5,
                due(-20.0, 10.0),
                8.0,
            ),
            (
                "past the instance's end, third failure: one recheck, not doubled to 60",
                3,
                due(-60.0, -30.0),
                15.0,
            ),
            (
                "past the instance's end, sixtieth failure: one recheck",
                60,
                due(-600.0, -570.0),
                15.0,
            ),
            (
                "no notice times (a resume): the backoff, 15 · 2² = 60",
                3,
                Due::default(),
                60.0,
            ),
            (
                "no notice times, first failure: 15",
                1,
                Due::default(),
                15.0,
            ),
        ];
        for (what, failures, due, expected) in cases {
            assert_eq!(retry_in_s(RECHECK, failures, due, NOW), expected, "{what}");
        }
    }

    #[test]
    fn the_wait_doubles_to_a_cap() {
        // (recheck, failures, expected seconds)
        let cases = [
            (15.0, 1, 15.0),
            (15.0, 2, 30.0),
            (15.0, 3, 60.0),
            (15.0, 4, 60.0),
            (15.0, u32::MAX, 60.0),
            (2.0, 1, 2.0),
            (2.0, 5, 32.0),
            (2.0, 6, 60.0),
            // A recheck longer than the cap is never shortened.
            (120.0, 3, 120.0),
        ];
        for (recheck, failures, expected) in cases {
            assert_eq!(
                backoff_s(recheck, failures),
                expected,
                "{recheck} {failures}"
            );
        }
    }
}
