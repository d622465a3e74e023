//! CloudWatch's period arithmetic, apart from any call: which period a step is read at, which
//! periods are complete, how a period's statistics become a summed gauge, and which publish
//! intervals a step can be read at. Changes when CloudWatch's periods or statistics change, or
//! the contract with the publishers (how often each one puts a datapoint) does.
//!
//! The publishers' contract (CLOUDWATCH_PUBLISH_SECONDS, `P`): every pod or agent that exports a
//! target's numbers puts one datapoint of each metric every `P` seconds, all with the same
//! dimensions, high resolution (`StorageResolution=1`) when `P` is below a minute. CloudWatch
//! keeps one statistic set per metric and period, merging every publisher's datapoints; it does
//! not know how many publishers there are.

/// The publish intervals a user may declare: a datapoint every 1, 5, 10 or 30 s (high
/// resolution) or every 60 s (standard resolution). Each divides 60, so each divides every
/// 1-minute and 5-minute period the history is read at.
pub const PUBLISH_INTERVALS: [f64; 5] = [1.0, 5.0, 10.0, 30.0, 60.0];

/// CloudWatch periods: 1, 5, 10, 30 or a multiple of 60 seconds; the largest not above `step_s`.
pub fn period_for(step_s: f64) -> i32 {
    if step_s >= 60.0 {
        ((step_s / 60.0).floor() as i32) * 60
    } else {
        [30, 10, 5, 1]
            .into_iter()
            .find(|p| f64::from(*p) <= step_s)
            .unwrap_or(1)
    }
}

/// CloudWatch keeps sub-minute data 3 hours and 1-minute data 15 days (then 5-minute data 63
/// days): history a day or more back is read at one minute or coarser.
pub fn history_period(step_s: f64, age_s: f64) -> i32 {
    let floor = if age_s > 15.0 * 86_400.0 { 300 } else { 60 };
    period_for(step_s).max(floor)
}

/// Why `publish_s` cannot be read at `step_s`, if it cannot. The recent read's period
/// (`period_for(step_s)`) must hold a whole number of each publisher's datapoints: a 10 s period
/// of a metric published every 60 s is empty five times in six, and a sub-minute period of a
/// standard-resolution metric is always empty (CloudWatch keeps it per minute only). Both are
/// declared, not detected: an empty answer is also what a quiet target gives.
pub fn publish_interval_problem(publish_s: f64, step_s: f64) -> Option<String> {
    if !PUBLISH_INTERVALS.contains(&publish_s) {
        return Some(format!(
            "must be 1, 5, 10, 30 (high resolution) or 60 (standard resolution), got {publish_s}"
        ));
    }
    let period = f64::from(period_for(step_s));
    if period % publish_s != 0.0 {
        let resolution = if publish_s < 60.0 {
            ""
        } else {
            " (standard resolution)"
        };
        return Some(format!(
            "datapoints every {publish_s} s{resolution} cannot fill the {period} s periods \
             METRICS_STEP_SECONDS={step_s} is read at: publish every {period} s or less \
             (high resolution below 60), or set METRICS_STEP_SECONDS to at least {publish_s}"
        ));
    }
    None
}

/// The sum over all publishers of a gauge (requests waiting, requests running), as its mean over
/// one period, from the period's `Sum` statistic.
///
/// N publishers each put one datapoint every `publish_s`, so a period of `period_s` holds
/// k = period_s / publish_s datapoints of each, and CloudWatch's statistics over it are
///   Sum = Σ_publishers Σ_k g_i,k      SampleCount = N·k      Average = Sum / (N·k).
/// The summed gauge G = Σ_i g_i, averaged over the period's k instants, is Sum / k: what the
/// Prometheus source's `sum(...)` gives. `Average` would be G / N, low by the number of
/// publishers. Sum / k needs no N, only the declared interval; a publisher that skips a
/// datapoint lowers that period by its share, one that repeats one raises it.
pub fn summed_gauge(sum: f64, publish_s: f64, period_s: f64) -> f64 {
    sum * publish_s / period_s
}

/// The end of the newest period a read may include: `window_end` (a period boundary of the
/// window the caller asks), but never past the last boundary at or before `now - lag_s`. A
/// period ending later either has not ended yet (its `Sum` still grows) or ended within the
/// ingestion lag (some publishers' datapoints may still be on their way); either one would read
/// as a fall in demand.
pub fn last_complete_end(window_end: f64, now: f64, lag_s: f64, period_s: f64) -> f64 {
    let complete = ((now - lag_s) / period_s).floor() * period_s;
    window_end.min(complete)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_are_valid_cloudwatch_periods() {
        let cases = [
            (1.0, 1),
            (4.0, 1),
            (5.0, 5),
            (15.0, 10),
            (30.0, 30),
            (59.0, 30),
            (60.0, 60),
            (90.0, 60),
            (300.0, 300),
        ];
        for (step, want) in cases {
            assert_eq!(period_for(step), want, "step {step}");
        }
    }

    #[test]
    fn history_is_read_at_the_resolution_cloudwatch_still_keeps() {
        let day = 86_400.0;
        // (step, age of the window's start, period) - CloudWatch's retention by hand: 1-minute
        // data 15 days, then 5-minute data.
        let cases = [
            (15.0, 1_200.0, 60),
            (15.0, day, 60),
            (60.0, 7.0 * day, 60),
            (300.0, day, 300),
            (15.0, 15.0 * day, 60),
            (15.0, 15.0 * day + 1.0, 300),
            (600.0, 20.0 * day, 600),
        ];
        for (step, age, want) in cases {
            assert_eq!(history_period(step, age), want, "step {step} age {age}");
        }
    }

    #[test]
    fn a_gauge_is_summed_over_publishers_not_averaged() {
        // (Sum statistic, publish interval, period, summed gauge), each by hand:
        let cases = [
            // 2 pods, one datapoint each per 10 s period, 3 and 5 waiting: Sum 8, k = 1 -> 8
            // (Average would say 4).
            (8.0, 10.0, 10.0, 8.0),
            // the same 2 pods read at 60 s: 6 datapoints each, waiting 3 and 5 all along:
            // Sum = 6·3 + 6·5 = 48, k = 6 -> 8.
            (48.0, 10.0, 60.0, 8.0),
            // 10 pods publishing every 60 s (standard resolution), 2 running each, 5-minute
            // history period: k = 5, Sum = 10·5·2 = 100 -> 20.
            (100.0, 60.0, 300.0, 20.0),
            // 3 pods every 1 s, 10 s period, 1 running each: Sum 30, k = 10 -> 3.
            (30.0, 1.0, 10.0, 3.0),
        ];
        for (sum, publish, period, want) in cases {
            assert_eq!(
                summed_gauge(sum, publish, period),
                want,
                "sum {sum} publish {publish} period {period}"
            );
        }
    }

    #[test]
    fn only_periods_a_publisher_fills_are_accepted() {
        // (publish interval, step, accepted): the step's period by hand from period_for.
        let cases = [
            (10.0, 15.0, true),  // period 10: one datapoint each
            (5.0, 15.0, true),   // period 10: two each
            (1.0, 15.0, true),   // period 10: ten each
            (30.0, 15.0, false), // period 10: empty two periods in three
            (60.0, 15.0, false), // standard resolution at a 10 s period: always empty
            (60.0, 60.0, true),  // period 60
            (60.0, 90.0, true),  // period 60
            (30.0, 45.0, true),  // period 30
            (60.0, 45.0, false), // period 30
            (15.0, 60.0, false), // not an interval CloudWatch periods divide
            (0.0, 15.0, false),
        ];
        for (publish, step, accepted) in cases {
            let problem = publish_interval_problem(publish, step);
            assert_eq!(
                problem.is_none(),
                accepted,
                "publish {publish} step {step}: {problem:?}"
            );
        }
        let message = publish_interval_problem(60.0, 15.0).unwrap();
        assert!(message.contains("METRICS_STEP_SECONDS"), "{message}");
        assert!(message.contains("standard resolution"), "{message}");
    }

    #[test]
    fn reads_end_at_the_last_period_complete_one_lag_before_now() {
        // (window end, now, lag, period, end), by hand:
        let cases = [
            // the calibration window ends at now = 1000: rounded up to 1020, but 1000 - 30 =
            // 970 lies in [960, 1020), still filling: the read ends at 960.
            (1020.0, 1000.0, 30.0, 60.0, 960.0),
            // no lag: the period [960, 1020) holding now is still filling: 960.
            (1020.0, 1000.0, 0.0, 60.0, 960.0),
            // a boundary exactly at now - lag counts as complete: 1000 - 40 = 960.
            (1020.0, 1000.0, 40.0, 60.0, 960.0),
            // the recent window ends at now - lag = 970, 10 s periods: 970 itself.
            (970.0, 1000.0, 30.0, 10.0, 970.0),
            // a season a day back ends long before now - lag: the window's own end.
            (-85_380.0, 1000.0, 30.0, 60.0, -85_380.0),
        ];
        for (window_end, now, lag, period, want) in cases {
            assert_eq!(
                last_complete_end(window_end, now, lag, period),
                want,
                "window end {window_end} now {now} lag {lag} period {period}"
            );
        }
    }
}
