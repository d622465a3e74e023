//! One rolling window of durations: bounded in count and age, each object learned once.

use serde::{Deserialize, Serialize};

/// Samples one window keeps: the newest win. 64 × three phases × a few pools and targets stays
/// far below a ConfigMap's 1 MiB.
pub const MAX_SAMPLES: usize = 64;
/// Samples older than this are forgotten, so a new AMI or image shows within a week.
pub const MAX_AGE_S: f64 = 7.0 * 86_400.0;
/// A duration past this is no cold start (a pod stuck on a quota, a node that never joined): it
/// would stretch the horizon of every later forecast, so it is not learned.
pub const MAX_PHASE_S: f64 = 3_600.0;

/// One measured duration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LeadSample {
    /// The object measured (a NodeClaim's name, a pod's uid): each is learned once.
    pub id: String,
    /// When the phase ended (Unix seconds).
    pub at: f64,
    pub seconds: f64,
}

/// A rolling window of one phase's durations in one scope, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LeadHistory {
    pub samples: Vec<LeadSample>,
}

impl LeadHistory {
    /// Adds `sample` unless its object is known, it is not a duration in 0..=[`MAX_PHASE_S`], or
    /// it ended before the oldest kept sample of a full window (already forgotten once). Drops
    /// what is older than [`MAX_AGE_S`] at `now` and the oldest past [`MAX_SAMPLES`].
    pub fn learn(&mut self, sample: LeadSample, now: f64) -> bool {
        let valid = sample.seconds.is_finite()
            && (0.0..=MAX_PHASE_S).contains(&sample.seconds)
            && sample.at.is_finite();
        let known = self.samples.iter().any(|s| s.id == sample.id);
        let forgotten = self.samples.len() >= MAX_SAMPLES
            && self.samples.first().is_some_and(|s| sample.at < s.at);
        let too_old = now - sample.at > MAX_AGE_S;
        self.samples.retain(|s| now - s.at <= MAX_AGE_S);
        if !valid || known || forgotten || too_old {
            return false;
        }
        let at = self.samples.partition_point(|s| s.at <= sample.at);
        self.samples.insert(at, sample);
        if self.samples.len() > MAX_SAMPLES {
            let extra = self.samples.len() - MAX_SAMPLES;
            self.samples.drain(..extra);
        }
        true
    }

    /// The samples younger than [`MAX_AGE_S`] at `now`.
    pub fn live(&self, now: f64) -> impl Iterator<Item = &LeadSample> {
        self.samples.iter().filter(move |s| now - s.at <= MAX_AGE_S)
    }

    /// The `q` quantile (nearest rank, so it is a duration that happened) of the live samples,
    /// when there are at least [`super::MIN_SAMPLES`].
    pub fn quantile(&self, q: f64, now: f64) -> Option<f64> {
        let mut seconds: Vec<f64> = self.live(now).map(|s| s.seconds).collect();
        if seconds.len() < super::MIN_SAMPLES {
            return None;
        }
        let rank = (q.clamp(0.0, 1.0) * seconds.len() as f64).ceil() as usize;
        let len = seconds.len();
        // Under `total_cmp` equal values are the same bits, so the selected value is the sorted one.
        Some(
            *seconds
                .select_nth_unstable_by(rank.clamp(1, len) - 1, f64::total_cmp)
                .1,
        )
    }
}
