//! What a run measures, kept in constant memory: waits in a fixed log-spaced histogram (never an
//! array of every request), GPU-seconds by what they were spent on, and per-day figures.

use serde::Serialize;

/// Buckets per decade of the wait histograms: adjacent edges differ by 10^(1/50) = 4.7 %.
const PER_DECADE: usize = 50;
/// The first edge: waits below 1 ms count as no wait.
const FIRST_EDGE_S: f64 = 1e-3;
/// Decades above the first edge: 1 ms to 10^5 s (27.8 h). Longer waits go to the last bucket.
const DECADES: usize = 8;
const BUCKETS: usize = 1 + PER_DECADE * DECADES;

/// Counts of values in fixed log-spaced buckets: bucket 0 holds [0, 1 ms), bucket i >= 1 holds
/// [1 ms * 10^((i-1)/50), 1 ms * 10^(i/50)).
#[derive(Clone, Debug, PartialEq)]
pub struct LogHistogram {
    counts: Vec<u64>,
    total: u64,
    max: f64,
}

impl Default for LogHistogram {
    fn default() -> Self {
        LogHistogram {
            counts: vec![0; BUCKETS],
            total: 0,
            max: 0.0,
        }
    }
}

impl LogHistogram {
    fn bucket(v: f64) -> usize {
        if v.is_nan() || v < FIRST_EDGE_S {
            return 0;
        }
        let i = 1 + ((v / FIRST_EDGE_S).log10() * PER_DECADE as f64).floor() as usize;
        i.min(BUCKETS - 1)
    }

    /// Upper edge of bucket `i` (0 for bucket 0: "no wait").
    fn upper(i: usize) -> f64 {
        if i == 0 {
            0.0
        } else {
            FIRST_EDGE_S * 10f64.powf(i as f64 / PER_DECADE as f64)
        }
    }

    pub fn record(&mut self, v: f64) {
        self.counts[Self::bucket(v)] += 1;
        self.total += 1;
        if v > self.max {
            self.max = v;
        }
    }

    pub fn max(&self) -> f64 {
        self.max
    }

    /// The upper edge of the bucket holding the nearest-rank `q` quantile (at most 4.7 % above
    /// the true value, never below it; 0 when that value is under 1 ms), capped at the maximum.
    pub fn quantile(&self, q: f64) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::upper(i).min(self.max);
            }
        }
        self.max
    }

    /// Adds `other`'s counts (a pool's models into the pool's one histogram).
    pub fn merge(&mut self, other: &LogHistogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
        self.max = self.max.max(other.max);
    }
}

/// A run's GPU-seconds: `total` from the nodes' lifetimes, `busy` while a replica has a request
/// in flight (whole replicas, as the idle figure has always counted them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct GpuSplit {
    pub total: f64,
    pub busy: f64,
}

impl GpuSplit {
    pub fn hours(self) -> GpuSplit {
        GpuSplit {
            total: self.total / 3600.0,
            busy: self.busy / 3600.0,
        }
    }
}

/// A run's GPU-seconds by cause, attributed at every instant (docs/simulator.md, "Where the
/// GPU-hours go"): the parts add up to the nodes' GPU-seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Waterfall {
    /// Slots busy with requests: a replica's GPUs times the share of its slots in use.
    pub serving: f64,
    /// Idle slots of the serving replicas the HPA itself wants.
    pub target_headroom: f64,
    /// Idle slots of serving replicas above what the HPA wants (a raised floor, a static fleet).
    pub warm_excess: f64,
    /// Idle slots of replicas the HPA removed, still finishing their requests.
    pub draining: f64,
    /// Replicas on a Ready node pulling their image or loading their model.
    pub loading: f64,
    /// Nodes launched but not yet Ready, whatever is bound to them.
    pub node_boot: f64,
    /// Balloon pods holding warm capacity on Ready nodes.
    pub balloons: f64,
    /// Ready nodes' GPUs nothing is placed on (consolidation delay, fragments).
    pub empty: f64,
}

impl Waterfall {
    /// The parts, named, in the order the table and the plot show them.
    pub fn parts(&self) -> [(&'static str, f64); 8] {
        [
            ("serving", self.serving),
            ("target headroom", self.target_headroom),
            ("warm excess", self.warm_excess),
            ("draining", self.draining),
            ("loading", self.loading),
            ("node boot", self.node_boot),
            ("balloons", self.balloons),
            ("empty", self.empty),
        ]
    }

    pub fn sum(&self) -> f64 {
        self.parts().iter().map(|(_, v)| v).sum()
    }

    /// Every part but serving, as a share of the sum (0 for an empty run).
    pub fn idle_share(&self) -> f64 {
        let sum = self.sum();
        if sum > 0.0 {
            1.0 - self.serving / sum
        } else {
            0.0
        }
    }

    /// `other`'s parts added to these (a pool's deployments: each holds its own replicas, the
    /// nodes' parts are the first's).
    pub fn add(&mut self, other: &Waterfall) {
        *self = self.zip(other, |a, b| a + b);
    }

    /// Each part times `k` (GPU-seconds to GPU-hours: 1 / 3600).
    pub fn scaled(self, k: f64) -> Waterfall {
        self.zip(&self, |a, _| a * k)
    }

    /// `f` of each part and `other`'s.
    fn zip(&self, other: &Waterfall, f: impl Fn(f64, f64) -> f64) -> Waterfall {
        Waterfall {
            serving: f(self.serving, other.serving),
            target_headroom: f(self.target_headroom, other.target_headroom),
            warm_excess: f(self.warm_excess, other.warm_excess),
            draining: f(self.draining, other.draining),
            loading: f(self.loading, other.loading),
            node_boot: f(self.node_boot, other.node_boot),
            balloons: f(self.balloons, other.balloons),
            empty: f(self.empty, other.empty),
        }
    }
}

/// One day of a run (days count from t = 0; the burn-in is left out).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct DayStats {
    pub requests: u64,
    pub delayed: u64,
    pub gpu_seconds: f64,
    /// Node cold starts: inference pods bound this day to a node whose launch or image pull
    /// they had to wait for (counted on the day of the binding; the burn-in left out).
    pub cold_starts: u64,
    /// Replica cold starts: replicas that finished loading while requests queued for them
    /// (counted on the day they became ready; the burn-in left out).
    pub replica_cold_starts: u64,
}

impl DayStats {
    /// Adds `other`'s counts and GPU-seconds to these.
    pub fn add(&mut self, other: &DayStats) {
        self.requests += other.requests;
        self.delayed += other.delayed;
        self.gpu_seconds += other.gpu_seconds;
        self.cold_starts += other.cold_starts;
        self.replica_cold_starts += other.replica_cold_starts;
    }

    pub fn delayed_fraction(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.delayed as f64 / self.requests as f64
        }
    }
}

pub const DAY_S: f64 = 86_400.0;

/// Adds `value * seconds` of the interval [a, b) to the days it covers, from `from` on.
pub fn spread_over_days(days: &mut Vec<DayStats>, a: f64, b: f64, from: f64, per_s: f64) {
    let mut a = a.max(from);
    while a < b {
        let day = (a / DAY_S).floor() as usize;
        let end = b.min((day + 1) as f64 * DAY_S);
        if days.len() <= day {
            days.resize(day + 1, DayStats::default());
        }
        days[day].gpu_seconds += per_s * (end - a);
        a = end;
    }
}

/// The 95 % confidence interval of the mean of `values` (Student's t; None under two values).
pub fn interval95(values: &[f64]) -> Option<(f64, f64)> {
    let n = values.len();
    if n < 2 {
        return None;
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    // Two-sided 97.5 % quantiles of Student's t for 1..=30 degrees of freedom; 1.96 beyond.
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    let t = T.get(n - 2).copied().unwrap_or(1.96);
    let half = t * (var / n as f64).sqrt();
    Some((mean - half, mean + half))
}

/// 95 % interval of the share of `true` in `hits` by the moving-block bootstrap: `resamples`
/// series of the same length are glued from blocks of `block` consecutive outcomes starting at
/// uniformly drawn positions (a fixed seed: the same input gives the same interval), and the
/// 2.5 % and 97.5 % quantiles of their shares are returned. Consecutive outcomes are not
/// independent (a band that misses a burst misses it for every decision whose lead time
/// covers the burst), so resampling single outcomes would give too narrow an interval;
/// blocks keep that dependence within them. None with fewer than two blocks of outcomes.
pub fn block_bootstrap95(hits: &[bool], block: usize, resamples: usize) -> Option<(f64, f64)> {
    use rand::{Rng, SeedableRng};
    let n = hits.len();
    let block = block.max(1);
    if n < 2 * block || resamples == 0 {
        return None;
    }
    // Prefix sums: the hits of any block in O(1).
    let mut prefix = Vec::with_capacity(n + 1);
    prefix.push(0u32);
    for &h in hits {
        prefix.push(prefix.last().copied().unwrap_or(0) + u32::from(h));
    }
    let blocks = n.div_ceil(block);
    let starts = n - block + 1;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0x5eed);
    let mut shares: Vec<f64> = (0..resamples)
        .map(|_| {
            let covered: u64 = (0..blocks)
                .map(|_| {
                    let s = rng.random_range(0..starts);
                    u64::from(prefix[s + block] - prefix[s])
                })
                .sum();
            covered as f64 / (blocks * block) as f64
        })
        .collect();
    shares.sort_by(f64::total_cmp);
    let at = |q: f64| shares[((q * (resamples - 1) as f64).round() as usize).min(resamples - 1)];
    Some((at(0.025), at(0.975)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pools_waterfall_is_its_deployments_added_part_by_part() {
        let one = Waterfall {
            serving: 1.0,
            target_headroom: 2.0,
            warm_excess: 3.0,
            draining: 4.0,
            loading: 5.0,
            node_boot: 6.0,
            balloons: 7.0,
            empty: 8.0,
        };
        let mut pool = one;
        pool.add(&one.scaled(10.0));
        // Each part 11 times the first's: 11, 22, ... 88.
        assert_eq!(pool, one.scaled(11.0));
    }

    #[test]
    fn block_bootstrap_interval() {
        // All covered or none covered: every resample has the same share.
        assert_eq!(block_bootstrap95(&[true; 100], 10, 200), Some((1.0, 1.0)));
        assert_eq!(block_bootstrap95(&[false; 100], 10, 200), Some((0.0, 0.0)));
        // Fewer than two blocks: no interval.
        assert_eq!(block_bootstrap95(&[true; 19], 10, 200), None);
        assert_eq!(block_bootstrap95(&[], 10, 200), None);
        // Half covered, in long runs (50 hits then 50 misses, blocks of 10): the interval
        // holds 0.5 and is wider than the independent-outcomes interval of the same data
        // (binomial: 0.5 ± 1.96·√(0.25/100) = ±0.098), because a block is all hits or all
        // misses except the few that straddle the switch (10 blocks of 10 per resample,
        // so the share moves in steps of about 0.1 and its spread is ±1.96·√(0.25/10)).
        let runs: Vec<bool> = (0..100).map(|i| i < 50).collect();
        let (lo, hi) = block_bootstrap95(&runs, 10, 2000).unwrap();
        assert!(lo < 0.5 && hi > 0.5, "{lo} {hi}");
        assert!(hi - lo > 2.0 * 0.098, "{lo} {hi}");
        // Alternating outcomes: every block of 10 holds exactly 5 hits, so no spread at all.
        let alternating: Vec<bool> = (0..100).map(|i| i % 2 == 0).collect();
        assert_eq!(block_bootstrap95(&alternating, 10, 500), Some((0.5, 0.5)));
    }

    #[test]
    fn histogram_quantiles_are_upper_bucket_edges() {
        let mut h = LogHistogram::default();
        // 98 requests without a wait, one of 2 s, one of 100 s.
        for _ in 0..98 {
            h.record(0.0);
        }
        h.record(2.0);
        h.record(100.0);
        assert_eq!(h.quantile(0.5), 0.0);
        // Rank 99 is the 2 s wait: its bucket's upper edge lies in [2, 2 * 1.047].
        let p99 = h.quantile(0.99);
        assert!((2.0..=2.0 * 1.047).contains(&p99), "{p99}");
        // The top quantile is capped at the largest value seen.
        assert_eq!(h.quantile(1.0), 100.0);
        assert_eq!(h.total, 100);
    }

    #[test]
    fn gpu_seconds_are_cut_at_midnight_and_after_the_burn_in() {
        let mut days = Vec::new();
        // 2 GPUs from 23:00 on day 0 to 01:00 on day 1, burn-in until 23:30.
        spread_over_days(&mut days, 82_800.0, 90_000.0, 84_600.0, 2.0);
        assert_eq!(days[0].gpu_seconds, 2.0 * 1_800.0);
        assert_eq!(days[1].gpu_seconds, 2.0 * 3_600.0);
    }

    #[test]
    fn interval_of_three_days() {
        // Mean 2, sample sd 1, n 3: half-width 4.303 / sqrt(3).
        let (lo, hi) = interval95(&[1.0, 2.0, 3.0]).unwrap();
        let half = 4.303 / 3f64.sqrt();
        assert!((lo - (2.0 - half)).abs() < 1e-9 && (hi - (2.0 + half)).abs() < 1e-9);
        assert_eq!(interval95(&[1.0]), None);
    }
}
