//! The Lambda's eyes: the one place that builds the `Observation` the simulated prewarm gives
//! `crate::core::decide()`. It holds only what the built-in vLLM queries
//! (src/adapters/metrics/queries.rs) return from what the servers export, scraped every step:
//!
//! - waiting, running: `sum(vllm:num_requests_waiting|running)`, the gauges at each scrape;
//! - arrival rate: `sum(rate(vllm:request_success_total[1m]))` (completions, not arrivals) plus
//!   `clamp_min(sum(deriv(waiting[1m])) + sum(deriv(running[1m])), 0)`; `rate` is the counter's
//!   increase between the first and last scrape inside the window divided by their distance
//!   (what Prometheus' extrapolation gives with regular scrapes); `deriv` is the least-squares
//!   slope of the gauge scrapes inside the window;
//! - service time: `rate(e2e_request_latency_seconds_sum[2m]) / rate(..._count[2m])`, the mean
//!   end-to-end latency of the requests completed in the window, queueing included; no sample
//!   when none completed (0/0);
//! - pending pods: inference pods the scheduler calls Unschedulable: not bound to a Ready node
//!   (pods on a Ready node pulling images or loading the model are not counted);
//! - serving replicas: replicas Ready to serve.
//!
//! A scrape becomes visible `ingestion_lag_s` after it is taken. Samples start at t = 0: the
//! history before the trace is never made up (the burn-in keeps the first window out of the
//! scores).

use crate::core::{Observation, PolicySpec, Sample};

use super::pods::Phase;
use super::Sim;

/// Window of the built-in queries' `rate`/`deriv` of counters and gauges, seconds.
const RATE_WINDOW_S: f64 = 60.0;
/// Window of the built-in mean-latency query, seconds.
const LATENCY_WINDOW_S: f64 = 120.0;

impl Sim<'_> {
    /// Counts a completion (and its end-to-end latency) in the first scrape at or after `done`.
    pub(super) fn record_completion(&mut self, done: f64, latency_s: f64) {
        let b = (done / self.cfg.step_s - 1e-9).ceil().max(0.0) as usize;
        if self.completions_at.len() <= b {
            self.completions_at.resize(b + 1, 0);
            self.latency_sum_at.resize(b + 1, 0.0);
        }
        self.completions_at[b] += 1;
        self.latency_sum_at[b] += latency_s;
    }

    /// Inference pods not yet bound to a Ready node.
    fn unschedulable_pods(&self) -> u32 {
        let on_launching_node = self
            .live_pods
            .iter()
            .filter(|&&p| match self.pods[p].phase {
                Phase::Starting { node, .. } => self.nodes[node].ready_at > self.now,
                _ => false,
            })
            .count() as u32;
        self.pending_inference + on_launching_node
    }

    /// The metric history a tick fetches now: `window_s` of scrapes up to the newest one the
    /// ingestion lag lets a query see.
    pub(super) fn observation(&self, policy: &PolicySpec) -> Observation {
        let step = self.cfg.step_s;
        let base = self.cfg.base_epoch;
        let steps = (policy.window_s / step).round().max(1.0) as i64;
        let newest = ((self.now - self.cfg.ingestion_lag_s) / step + 1e-9).floor() as i64;
        let rate_scrapes = (RATE_WINDOW_S / step).round().max(2.0) as i64;
        let latency_scrapes = (LATENCY_WINDOW_S / step).round().max(2.0) as i64;
        let gauge = |b: usize| -> (f64, f64) {
            (
                *self.waiting_at_boundary.get(b).unwrap_or(&0) as f64,
                *self.running_at_boundary.get(b).unwrap_or(&0) as f64,
            )
        };
        let completions = |from: usize, to: usize| -> (f64, f64) {
            let mut n = 0u64;
            let mut sum = 0.0;
            for b in from..=to {
                n += *self.completions_at.get(b).unwrap_or(&0) as u64;
                sum += *self.latency_sum_at.get(b).unwrap_or(&0.0);
            }
            (n as f64, sum)
        };
        let mut obs = Observation {
            pending_pods: self.unschedulable_pods(),
            serving_replicas: Some(self.serving_count()),
            ..Observation::default()
        };
        for b in (newest - steps + 1).max(0)..=newest {
            let t = base + b as f64 * step;
            let bu = b as usize;
            let (waiting, running) = gauge(bu);
            obs.waiting.push(Sample::new(t, waiting));
            obs.running.push(Sample::new(t, running));
            // Scrapes inside (t - window, t]: need two for a rate.
            let first = (b - rate_scrapes + 1).max(0) as usize;
            if first < bu {
                let (done, _) = completions(first + 1, bu);
                let rate = done / ((bu - first) as f64 * step);
                let points: Vec<(f64, f64)> = (first..=bu)
                    .map(|k| {
                        let (w, r) = gauge(k);
                        (k as f64 * step, w + r)
                    })
                    .collect();
                let change = slope(&points).max(0.0);
                obs.arrival_rate.push(Sample::new(t, rate + change));
            }
            let first = (b - latency_scrapes + 1).max(0) as usize;
            if first < bu {
                let (done, latency) = completions(first + 1, bu);
                if done > 0.0 {
                    obs.service_time_s.push(Sample::new(t, latency / done));
                }
            }
        }
        obs
    }
}

/// Least-squares slope of the points (PromQL `deriv`).
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let cov: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let var: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if var > 0.0 {
        cov / var
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{config, step_to};
    use super::super::{Request, Sim};
    use crate::core::PolicySpec;

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12)
    }

    #[test]
    fn the_observation_is_what_the_queries_return_after_the_ingestion_lag() {
        // One replica with 8 slots. A arrives at 1 for 10 s (done 11), B at 2 for 20 s (done
        // 22), C at 16 for 100 s. Scrapes every 15 s; at t = 61 with a 30 s lag the newest
        // visible scrape is t = 30, and a 60 s window holds the scrapes at 0, 15 and 30.
        let mut cfg = config();
        cfg.ingestion_lag_s = 30.0;
        let mut sim = Sim::new(&cfg);
        sim.warm_start();
        let reqs = [(1.0, 10.0), (2.0, 20.0), (16.0, 100.0)].map(|(arrival, service_s)| Request {
            arrival,
            service_s,
            prefill_s: 0.0,
        });
        step_to(&mut sim, &reqs, 61.0);
        let policy = PolicySpec {
            window_s: 60.0,
            ..PolicySpec::default()
        };
        let obs = sim.observation(&policy);
        let base = cfg.base_epoch;
        let at = |s: &[crate::core::Sample]| -> Vec<f64> { s.iter().map(|x| x.t - base).collect() };
        let v = |s: &[crate::core::Sample]| -> Vec<f64> { s.iter().map(|x| x.v).collect() };
        // Gauges at 0, 15, 30: running 0, then B and C... at 15 only B (A done, C not yet).
        assert_eq!(at(&obs.running), vec![0.0, 15.0, 30.0]);
        assert_eq!(v(&obs.running), vec![0.0, 1.0, 1.0]);
        assert_eq!(v(&obs.waiting), vec![0.0, 0.0, 0.0]);
        // Arrival rate at 15: 1 completion in (0, 15] / 15 s, plus deriv of (0, 1) over 15 s.
        // At 30: 2 completions / 30 s, plus the least-squares slope of (0, 1, 1) = 15 / 450.
        assert_eq!(at(&obs.arrival_rate), vec![15.0, 30.0]);
        assert!(close(
            &v(&obs.arrival_rate),
            &[1.0 / 15.0 + 1.0 / 15.0, 2.0 / 30.0 + 1.0 / 30.0]
        ));
        // Mean end-to-end latency of what completed: A's 10 s, then A and B's (10 + 20) / 2.
        assert_eq!(v(&obs.service_time_s), vec![10.0, 15.0]);
        assert_eq!(obs.serving_replicas, Some(1));
        assert_eq!(obs.pending_pods, 0);
    }
}
