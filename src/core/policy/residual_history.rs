//! The residual's series from a metric history (`prewarm explain --target`): the arrival rate,
//! the requests waiting and the requests running, as the tick's queries return them, put on
//! one grid of steps for [`super::residual::decompose`].
//!
//! What a metric history can and cannot say, per step `m` (samples at `start + m · step`; a
//! step without an arrival-rate sample has demand 0 and is never delayed):
//!
//! - delayed: the step's waiting requests would wait longer than the SLO wait by Little's law,
//!   `waiting / arrival rate > slo_wait_s` (a queue with no arrivals at all counts as delayed).
//!   Each delayed step counts once: the history knows how long the queue was, not which
//!   requests waited.
//! - capacity: `⌈running / concurrency⌉` loaded replicas. It is what a delayed step had: a
//!   request waits only when every slot is busy, so then the running requests fill the
//!   serving replicas. (On a step without a queue it undercounts idle replicas, which the
//!   decomposition never reads: it only classifies delayed steps.)
//! - need: `(waiting + running) / concurrency` replicas, to serve the queue at once.
//! - upper: none. The tick's forecasts are in its decision logs, not in the metric store, so a
//!   history cannot tell a lead miss: its delayed steps are forecastable or unforecastable.

use super::observation::Sample;

/// The series of [`super::residual::Series`], owned.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistorySeries {
    pub demand: Vec<f64>,
    pub upper: Vec<Option<f64>>,
    pub capacity: Vec<f64>,
    pub need: Vec<f64>,
    pub delayed: Vec<u64>,
}

/// The value of each step of the grid `start + m · step`, `m < n` (a sample belongs to the
/// step nearest its time; later samples of a step replace earlier ones).
fn on_grid(samples: &[Sample], start: f64, step: f64, n: usize) -> Vec<Option<f64>> {
    let mut out = vec![None; n];
    for s in samples {
        if !s.t.is_finite() || !s.v.is_finite() {
            continue;
        }
        let m = ((s.t - start) / step).round();
        if m >= 0.0 && (m as usize) < n {
            out[m as usize] = Some(s.v.max(0.0));
        }
    }
    out
}

/// The history's series over `n` steps of `step` seconds from `start` (see the module docs).
pub fn from_history(
    arrival_rate: &[Sample],
    waiting: &[Sample],
    running: &[Sample],
    grid: (f64, f64, usize),
    concurrency: u32,
    slo_wait_s: f64,
) -> HistorySeries {
    let (start, step, n) = grid;
    let slots = f64::from(concurrency.max(1));
    let rate = on_grid(arrival_rate, start, step, n);
    let waiting = on_grid(waiting, start, step, n);
    let running = on_grid(running, start, step, n);
    let mut out = HistorySeries {
        upper: vec![None; n],
        ..HistorySeries::default()
    };
    for m in 0..n {
        let (w, r) = (waiting[m].unwrap_or(0.0), running[m].unwrap_or(0.0));
        let demand = rate[m].unwrap_or(0.0);
        let delayed = rate[m].is_some() && w > 0.0 && (demand <= 0.0 || w / demand > slo_wait_s);
        out.demand.push(demand);
        out.capacity.push((r / slots - 1e-9).ceil().max(0.0));
        out.need.push((w + r) / slots);
        out.delayed.push(u64::from(delayed));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: f64 = 1_700_006_400.0;

    fn series(values: &[f64]) -> Vec<Sample> {
        Sample::grid(T0, 60.0, values)
    }

    /// Concurrency 4, SLO wait 10 s. (rate, waiting, running) per minute and what follows:
    /// 0: (2, 0, 3): no queue: not delayed; capacity ⌈3/4⌉ = 1, need 3/4.
    /// 1: (2, 10, 8): 10 / 2 = 5 s ≤ 10: not delayed; capacity 2, need 18/4 = 4.5.
    /// 2: (2, 30, 8): 30 / 2 = 15 s > 10: delayed; capacity 2, need 38/4 = 9.5.
    /// 3: (0, 5, 4): a queue and no arrivals: delayed; capacity 1, need 9/4.
    /// 4: no rate sample: demand 0, not delayed.
    #[test]
    fn a_history_by_hand() {
        let mut rate = series(&[2.0, 2.0, 2.0, 0.0]);
        // A sample off the grid by 10 s belongs to its nearest step; one outside is left out.
        rate[1].t += 10.0;
        rate.push(Sample::new(T0 - 600.0, 50.0));
        let waiting = series(&[0.0, 10.0, 30.0, 5.0, 40.0]);
        let running = series(&[3.0, 8.0, 8.0, 4.0, 8.0]);
        let h = from_history(&rate, &waiting, &running, (T0, 60.0, 5), 4, 10.0);
        assert_eq!(h.demand, vec![2.0, 2.0, 2.0, 0.0, 0.0]);
        assert_eq!(h.delayed, vec![0, 0, 1, 1, 0]);
        assert_eq!(h.capacity, vec![1.0, 2.0, 2.0, 1.0, 2.0]);
        assert_eq!(h.need, vec![0.75, 4.5, 9.5, 2.25, 12.0]);
        assert_eq!(h.upper, vec![None; 5]);
    }
}
