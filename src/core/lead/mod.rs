//! Lead times learned from the cluster: how long a cold start takes, phase by phase, measured on
//! the objects that went through it, and the horizon the forecast looks ahead by.
//!
//! A cold start is three phases, each learned where it varies:
//! - [`Phase::NodeBoot`], per NodePool: a NodeClaim's creation to its `Initialized` condition
//!   (launch, registration, the node's own start-up);
//! - [`Phase::ImagePull`], per target: the pod's scheduling to its container's start (the pull,
//!   refined by the kubelet's `Pulled` event where one is seen);
//! - [`Phase::ModelLoad`], per target: the container's start to the pod's `Ready` (the server
//!   loading its weights).
//!
//! Each (phase, scope) keeps a bounded rolling window of samples ([`LeadHistory`]); the horizon is
//! the sum of the phases' upper quantiles ([`horizon`]). The sum of quantiles is at least the
//! quantile of the sum, so the horizon errs long, which costs GPU-time, never a late replica.
//! Until every phase has [`MIN_SAMPLES`], the horizon is the configured `LEAD_TIME_SECONDS`
//! and [`Horizon::fallback`] says why.
//!
//! Pure: the adapters turn NodeClaims, pods and events into [`LeadSample`]s and store the
//! [`LeadBook`]; the simulator feeds it from its own node and replica events.

mod history;

pub use history::{LeadHistory, LeadSample};

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Samples a phase needs before its quantile is believed.
pub const MIN_SAMPLES: usize = 3;

/// The quantile of each phase's window the horizon sums. Fixed, not ERROR_QUANTILE: that one
/// prices forecast errors (and may be set low when GPUs are dear), while a horizon too short
/// makes every forecast late whatever the price; the sum of upper quantiles already errs long,
/// so the 0.9 of each phase (the slowest of a window under 10 samples) is enough.
pub const HORIZON_QUANTILE: f64 = 0.9;

/// A phase of a cold start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    NodeBoot,
    ImagePull,
    ModelLoad,
}

impl Phase {
    pub const ALL: [Phase; 3] = [Phase::NodeBoot, Phase::ImagePull, Phase::ModelLoad];

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::NodeBoot => "node-boot",
            Phase::ImagePull => "image-pull",
            Phase::ModelLoad => "model-load",
        }
    }

    /// Node boots vary by NodePool (instance types, AMI); pulls and loads by target (image, model).
    pub fn scoped_by_pool(self) -> bool {
        matches!(self, Phase::NodeBoot)
    }
}

/// Every rolling window learned, keyed by [`LeadBook::key`] (`"node-boot/<pool>"`,
/// `"model-load/<target>"`): one map so it serialises as one flat JSON object (a ConfigMap's
/// data, one entry per key).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LeadBook {
    pub windows: BTreeMap<String, LeadHistory>,
}

impl LeadBook {
    pub fn key(phase: Phase, scope: &str) -> String {
        format!("{}/{scope}", phase.as_str())
    }

    pub fn window(&self, phase: Phase, scope: &str) -> Option<&LeadHistory> {
        self.windows.get(&Self::key(phase, scope))
    }

    /// Learns `sample` for `phase` in `scope`; false when it was known already or is not a
    /// duration (see [`LeadHistory::learn`]).
    pub fn learn(&mut self, phase: Phase, scope: &str, sample: LeadSample, now: f64) -> bool {
        self.windows
            .entry(Self::key(phase, scope))
            .or_default()
            .learn(sample, now)
    }

    /// Learns every sample of `learned`; true when any was new.
    pub fn learn_all(&mut self, learned: &[Learned], now: f64) -> bool {
        let mut new = false;
        for l in learned {
            new |= self.learn(l.phase, &l.scope, l.sample.clone(), now);
        }
        new
    }

    /// Learns every sample of `from`; true when any was new.
    pub fn merge(&mut self, from: &LeadBook, now: f64) -> bool {
        let mut new = false;
        for (key, window) in &from.windows {
            let into = self.windows.entry(key.clone()).or_default();
            for sample in &window.samples {
                new |= into.learn(sample.clone(), now);
            }
        }
        new
    }
}

/// A sample and where it goes in the book.
#[derive(Clone, Debug, PartialEq)]
pub struct Learned {
    pub phase: Phase,
    /// The NodePool (node boot) or the target (pull, load).
    pub scope: String,
    pub sample: LeadSample,
}

/// The book after a tick: what the execution environment keeps, and what goes back to the
/// store.
#[derive(Clone, Debug, PartialEq)]
pub struct BookAfter {
    /// The book the tick started with and what its targets learned.
    pub keep: LeadBook,
    /// The stored book with `keep` merged in, when the store lacks any of it; None when it
    /// lacks nothing, or when there is no store to write (not read, or DRY_RUN).
    pub write: Option<LeadBook>,
}

/// The book after a tick that started with `book` and whose targets `learned`, given the
/// store's book as read (`stored`, None when nothing is to be written).
pub fn book_after_tick(
    mut book: LeadBook,
    learned: &[Learned],
    stored: Option<&LeadBook>,
    now: f64,
) -> BookAfter {
    book.learn_all(learned, now);
    let write = stored.and_then(|stored| {
        let mut on_object = stored.clone();
        on_object.merge(&book, now).then_some(on_object)
    });
    BookAfter { keep: book, write }
}

/// What one phase contributes to a horizon.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseLead {
    pub phase: Phase,
    /// The NodePool (node boot) or target (pull, load) it was learned in.
    pub scope: String,
    /// Samples in the window (within [`MAX_AGE_S`]).
    pub samples: usize,
    /// The window's upper quantile, when it has [`MIN_SAMPLES`].
    pub seconds: Option<f64>,
}

/// The lead time a target's forecast looks ahead by.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Horizon {
    /// Seconds ahead: the learned phases' sum rounded up to whole steps, or the fallback.
    pub seconds: f64,
    /// What each phase contributed.
    pub phases: Vec<PhaseLead>,
    /// Why the configured lead time stands in for the learned one; None when learned.
    pub fallback: Option<String>,
}

impl Horizon {
    pub fn learned(&self) -> bool {
        self.fallback.is_none()
    }
}

/// The horizon for a target served in `pool`: the sum of each phase's `quantile` over its window,
/// rounded up to a whole number of `step_s` (so the band calibrated for it stays valid across
/// ticks that learn a second more or less), or `fallback_s` while a phase has fewer than
/// [`MIN_SAMPLES`] samples younger than [`MAX_AGE_S`].
pub fn horizon(
    book: &LeadBook,
    pool: &str,
    target: &str,
    quantile: f64,
    fallback_s: f64,
    step_s: f64,
    now: f64,
) -> Horizon {
    let phases: Vec<PhaseLead> = Phase::ALL
        .iter()
        .map(|&phase| {
            let scope = if phase.scoped_by_pool() { pool } else { target };
            let window = book.window(phase, scope);
            PhaseLead {
                phase,
                scope: scope.to_string(),
                samples: window.map_or(0, |w| w.live(now).count()),
                seconds: window.and_then(|w| w.quantile(quantile, now)),
            }
        })
        .collect();
    let short: Vec<String> = phases
        .iter()
        .filter(|p| p.seconds.is_none())
        .map(|p| {
            format!(
                "{} in {} has {} of {MIN_SAMPLES} samples",
                p.phase.as_str(),
                p.scope,
                p.samples
            )
        })
        .collect();
    if !short.is_empty() {
        return Horizon {
            seconds: fallback_s,
            phases,
            fallback: Some(format!(
                "LEAD_TIME_SECONDS ({fallback_s:.0} s) until every phase is learned: {}",
                short.join("; ")
            )),
        };
    }
    let sum: f64 = phases.iter().filter_map(|p| p.seconds).sum();
    let step = if step_s > 0.0 { step_s } else { 1.0 };
    Horizon {
        // Less a millionth of a step first: parts that add up to a whole number of steps in
        // exact arithmetic (30.3 + 117.9 + 31.8) must not round up a whole step on float noise.
        seconds: ((sum / step - 1e-6).ceil() * step).max(step),
        phases,
        fallback: None,
    }
}

/// The horizon `book` gives `target` (its NodePool's boots, its own pulls and loads) with
/// `policy`'s LEAD_TIME_SECONDS as the fallback and its step: what the tick and the simulator
/// both decide with.
pub fn target_horizon(
    book: &LeadBook,
    target: &crate::spec::TargetSpec,
    policy: &crate::spec::PolicySpec,
    quantile: f64,
    now: f64,
) -> Horizon {
    horizon(
        book,
        &target.node_pool,
        &target.name,
        quantile,
        policy.lead_time_s,
        policy.step_s,
        now,
    )
}

impl Horizon {
    /// `policy` with this horizon as its lead time.
    pub fn applied_to(&self, policy: &crate::spec::PolicySpec) -> crate::spec::PolicySpec {
        crate::spec::PolicySpec {
            lead_time_s: self.seconds,
            ..policy.clone()
        }
    }
}

#[cfg(test)]
mod tests;
