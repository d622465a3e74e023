//! How long one node launch takes: a draw around the provisioner's launch time, and the chance
//! that EC2 answers "insufficient capacity" so the launch starts over.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, LogNormal};

/// Who draws a launch: each has its own family of streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// The provisioner's n-th launch of a run.
    Provisioner,
    /// The node hints' n-th early launch.
    NodeHints,
    /// The image pull of the run's n-th node (world.rs).
    Pull,
    /// The model load of the run's n-th inference pod (world.rs).
    Load,
    /// Whether the metric store lost the n-th scrape (world.rs).
    Scrape,
}

/// The random stream of one launch, keyed by the run's seed, who launches and the launch's
/// ordinal: common random numbers. Two policies run with the same seed see the same draw for
/// their n-th launch whatever else they did, so a difference between them is the policy's,
/// not the dice's (one extra launch no longer shifts every later draw).
pub fn draw_stream(seed: u64, who: Stream, ordinal: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let family = match who {
        Stream::Provisioner => 0,
        Stream::NodeHints => 1u64 << 63,
        Stream::Pull => 1u64 << 62,
        Stream::Load => 3u64 << 62,
        Stream::Scrape => 1u64 << 61,
    };
    rng.set_stream(family | ordinal);
    rng
}

/// The distribution of node launch times (the median is `Provisioner::node_launch_s`).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct LaunchModel {
    /// p99 / median of the launch time; 1 makes every launch take exactly the median.
    pub p99_over_median: f64,
    /// Probability that one launch attempt fails with InsufficientInstanceCapacity.
    pub ice_probability: f64,
    /// Seconds a failed attempt costs before the next attempt starts.
    pub ice_retry_s: f64,
}

impl LaunchModel {
    /// Every launch takes exactly the median, and none fails.
    pub const CONSTANT: LaunchModel = LaunchModel {
        p99_over_median: 1.0,
        ice_probability: 0.0,
        ice_retry_s: 0.0,
    };

    /// Seconds from launch to Ready: failed attempts (each `ice_retry_s`) then one lognormal
    /// draw with median `median_s` and `p99 = p99_over_median * median` (sigma = ln(ratio) /
    /// z_0.99, z_0.99 = 2.3263).
    pub fn sample(&self, median_s: f64, rng: &mut impl Rng) -> f64 {
        let mut delay = 0.0;
        // At most 10 failures in a row: the probability flag is checked to be below 1.
        for _ in 0..10 {
            if self.ice_probability > 0.0 && rng.random::<f64>() < self.ice_probability {
                delay += self.ice_retry_s;
            } else {
                break;
            }
        }
        if self.p99_over_median <= 1.0 || median_s <= 0.0 {
            return delay + median_s;
        }
        let sigma = self.p99_over_median.ln() / 2.326_347_874;
        let draw = LogNormal::new(median_s.ln(), sigma)
            .expect("finite mean and positive sigma")
            .sample(rng);
        delay + draw
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn lognormal_median_and_p99_are_where_the_flags_put_them() {
        let model = LaunchModel {
            p99_over_median: 2.0,
            ice_probability: 0.0,
            ice_retry_s: 0.0,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut v: Vec<f64> = (0..20_000).map(|_| model.sample(40.0, &mut rng)).collect();
        v.sort_by(f64::total_cmp);
        let median = v[10_000];
        let p99 = v[19_800];
        assert!((median - 40.0).abs() < 1.0, "median {median}");
        assert!((p99 / 40.0 - 2.0).abs() < 0.1, "p99 {p99}");
    }

    #[test]
    fn the_nth_launch_draws_the_same_whatever_came_before() {
        let model = LaunchModel {
            p99_over_median: 2.0,
            ice_probability: 0.2,
            ice_retry_s: 30.0,
        };
        let nth = |seed, who, n| model.sample(40.0, &mut draw_stream(seed, who, n));
        // The same key, the same draw; another ordinal, seed or launcher, another draw.
        assert_eq!(
            nth(1, Stream::Provisioner, 5),
            nth(1, Stream::Provisioner, 5)
        );
        assert_ne!(
            nth(1, Stream::Provisioner, 5),
            nth(1, Stream::Provisioner, 6)
        );
        assert_ne!(
            nth(1, Stream::Provisioner, 5),
            nth(2, Stream::Provisioner, 5)
        );
        assert_ne!(nth(1, Stream::Provisioner, 5), nth(1, Stream::NodeHints, 5));
        // Draws by ordinal still follow the distribution: the median of 20,000 ordinals.
        let model = LaunchModel {
            ice_probability: 0.0,
            ..model
        };
        let mut v: Vec<f64> = (0..20_000)
            .map(|n| model.sample(40.0, &mut draw_stream(7, Stream::Provisioner, n)))
            .collect();
        v.sort_by(f64::total_cmp);
        assert!((v[10_000] - 40.0).abs() < 1.0, "median {}", v[10_000]);
    }

    #[test]
    fn insufficient_capacity_adds_retries() {
        let always_once = LaunchModel {
            p99_over_median: 1.0,
            ice_probability: 0.5,
            ice_retry_s: 10.0,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let draws: Vec<f64> = (0..10_000)
            .map(|_| always_once.sample(40.0, &mut rng))
            .collect();
        // Every draw is 40 s plus whole retries; with p = 0.5 the mean number of failures is 1.
        assert!(draws.iter().all(|d| ((d - 40.0) / 10.0).fract() == 0.0));
        let mean_retries = draws.iter().map(|d| (d - 40.0) / 10.0).sum::<f64>() / 10_000.0;
        assert!((mean_retries - 1.0).abs() < 0.05, "{mean_retries}");
        assert_eq!(LaunchModel::CONSTANT.sample(41.0, &mut rng), 41.0);
    }
}
