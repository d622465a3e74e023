//! Per-policy figures of a comparison, and their table form.

use std::fmt::Write as _;

use serde::Serialize;

use super::engine::RunResult;
use super::oracle::OracleResult;

/// One row of the comparison.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PolicyReport {
    pub policy: String,
    /// E.g. "N=7" for the buffer, "peak=12" for static-peak.
    pub detail: String,
    pub requests: u64,
    /// Fraction of requests delayed by missing capacity: they waited more than the SLO wait
    /// longer than in the oracle run (same replica controller, nodes exactly when needed).
    pub delayed_fraction: f64,
    /// Fraction that waited longer than the SLO for any reason (model load included).
    pub delayed_any_fraction: f64,
    pub p50_wait_s: f64,
    pub p99_wait_s: f64,
    pub max_wait_s: f64,
    pub gpu_hours: f64,
    pub idle_gpu_fraction: f64,
    pub cost_usd: f64,
    pub cold_starts: u64,
    pub nodes_launched: u64,
    /// GPU-hours divided by the oracle's.
    pub gpu_hours_vs_oracle: f64,
    pub meets_slo: bool,
}

/// Fraction of requests whose wait exceeds their wait in the oracle run by more than
/// `slo_wait_s` (both by arrival index, same request stream).
pub fn delayed_by_capacity(waits: &[f32], oracle_waits: &[f32], slo_wait_s: f64) -> f64 {
    if waits.is_empty() {
        return 0.0;
    }
    let delayed = waits
        .iter()
        .zip(oracle_waits)
        .filter(|(w, o)| (**w as f64) - (**o as f64) > slo_wait_s)
        .count();
    delayed as f64 / waits.len() as f64
}

/// Nearest-rank percentile: the smallest value with at least `q` of the values at or below it.
pub fn percentile(sorted: &[f32], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1] as f64
}

impl PolicyReport {
    pub fn from_run(
        policy: &str,
        detail: String,
        mut run: RunResult,
        oracle: &RunResult,
        slo_wait_s: f64,
        slo_fraction: f64,
    ) -> Self {
        let delayed_fraction = delayed_by_capacity(&run.waits, &oracle.waits, slo_wait_s);
        let oracle_gpu_hours = oracle.gpu_seconds / 3600.0;
        run.waits.sort_by(|a, b| a.total_cmp(b));
        let requests = run.requests.max(1) as f64;
        let gpu_hours = run.gpu_seconds / 3600.0;
        PolicyReport {
            policy: policy.to_string(),
            detail,
            requests: run.requests,
            delayed_fraction,
            delayed_any_fraction: run.delayed_any as f64 / requests,
            p50_wait_s: percentile(&run.waits, 0.50),
            p99_wait_s: percentile(&run.waits, 0.99),
            max_wait_s: run.waits.last().copied().unwrap_or(0.0) as f64,
            gpu_hours,
            idle_gpu_fraction: idle(run.busy_gpu_seconds, run.gpu_seconds),
            cost_usd: run.cost_usd,
            cold_starts: run.cold_starts,
            nodes_launched: run.nodes_launched,
            gpu_hours_vs_oracle: ratio(gpu_hours, oracle_gpu_hours),
            meets_slo: delayed_fraction <= slo_fraction,
        }
    }

    /// The ideal-packing bound (ratio to the oracle filled in by the caller).
    pub fn from_ideal(oracle: &OracleResult, usd_per_node_hour: f64) -> Self {
        let gpu_hours = oracle.gpu_seconds / 3600.0;
        PolicyReport {
            policy: "ideal".into(),
            detail: "perfect packing, no queue".into(),
            requests: oracle.requests,
            delayed_fraction: 0.0,
            delayed_any_fraction: 0.0,
            p50_wait_s: 0.0,
            p99_wait_s: 0.0,
            max_wait_s: 0.0,
            gpu_hours,
            idle_gpu_fraction: idle(oracle.busy_gpu_seconds, oracle.gpu_seconds),
            cost_usd: oracle.node_seconds / 3600.0 * usd_per_node_hour,
            cold_starts: 0,
            nodes_launched: 0,
            gpu_hours_vs_oracle: 1.0,
            meets_slo: true,
        }
    }
}

fn idle(busy: f64, total: f64) -> f64 {
    if total > 0.0 {
        (1.0 - busy / total).max(0.0)
    } else {
        0.0
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        f64::NAN
    }
}

/// The comparison as an aligned text table.
pub fn table(rows: &[PolicyReport]) -> String {
    let header = [
        "policy",
        "detail",
        "requests",
        "delayed",
        "delayed(any)",
        "p50 wait",
        "p99 wait",
        "GPU-h",
        "idle GPU",
        "cost $",
        "cold starts",
        "vs oracle",
    ];
    let cells: Vec<[String; 12]> = rows
        .iter()
        .map(|r| {
            [
                r.policy.clone(),
                r.detail.clone(),
                r.requests.to_string(),
                format!("{:.3}%", r.delayed_fraction * 100.0),
                format!("{:.2}%", r.delayed_any_fraction * 100.0),
                format!("{:.1}s", r.p50_wait_s),
                format!("{:.1}s", r.p99_wait_s),
                format!("{:.1}", r.gpu_hours),
                format!("{:.1}%", r.idle_gpu_fraction * 100.0),
                format!("{:.2}", r.cost_usd),
                r.cold_starts.to_string(),
                format!("{:.2}x", r.gpu_hours_vs_oracle),
            ]
        })
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row.iter()) {
            *w = (*w).max(c.len());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, row: &[&str]| {
        for (i, (c, w)) in row.iter().zip(&widths).enumerate() {
            if i < 2 {
                let _ = write!(out, "{c:<w$}  ");
            } else {
                let _ = write!(out, "{c:>w$}  ");
            }
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
    };
    line(&mut out, &header);
    for row in &cells {
        let row: Vec<&str> = row.iter().map(String::as_str).collect();
        line(&mut out, &row);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_delay_is_the_excess_over_the_oracle() {
        let oracle = [0.0, 30.0, 5.0, 0.0];
        let waits = [10.5, 35.0, 16.0, 10.0];
        // Excess: 10.5 (counts), 5 (model load in both), 11 (counts), 10 (not above 10).
        assert_eq!(delayed_by_capacity(&waits, &oracle, 10.0), 0.5);
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f32> = (1..=10).map(|i| i as f32).collect();
        // 50% of 10 values: rank 5; 99%: rank ceil(9.9) = 10.
        assert_eq!(percentile(&v, 0.5), 5.0);
        assert_eq!(percentile(&v, 0.99), 10.0);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }
}
