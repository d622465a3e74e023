//! The world the simulated cluster lives in where it departs from what prewarm is told or can
//! measure. The exact world (the default) is the one prewarm's settings describe: every image
//! pull and model load takes the configured time, the metric store shows each scrape exactly
//! INGESTION_LAG_SECONDS late and keeps every scrape, a request's service time does not depend
//! on how full its replica's batch is, and the HPA scales on the requests in the system per
//! replica (the metric prewarm's `HpaStatus` reads). The rough world (`--world rough`) draws
//! each node's image pull and each replica's model load from a lognormal around the
//! configured medians; its metric store shows scrapes later than prewarm is told and loses a
//! share of them; a request takes longer the fuller its batch; the HPA scales on the batch size
//! (running requests per replica); Cluster Autoscaler also drains nodes under half used
//! (ca_scale_down.rs) and Karpenter deletes several underutilised nodes in one command
//! (disruption.rs).
//! Its parameters and their sources are in docs/simulator.md ("The rough world").

use serde::Serialize;

use rand::Rng;

use super::launch::{draw_stream, LaunchModel, Stream};
use super::Sim;

/// Which world a run lives in (`--world`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorldName {
    Exact,
    Rough,
}

/// How the simulated world differs from what prewarm assumes; `World::EXACT` differs in nothing.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct World {
    pub name: WorldName,
    /// p99 / median of a node's image pull (lognormal, median `Model::image_pull_s`); 1: every
    /// pull takes the median.
    pub pull_p99_over_median: f64,
    /// p99 / median of a replica's model load (median `Model::model_load_s`); 1: the median.
    pub load_p99_over_median: f64,
    /// Seconds the metric store shows a scrape later than INGESTION_LAG_SECONDS says.
    pub extra_ingestion_lag_s: f64,
    /// Share of scrapes the store never gets (each scrape's own draw).
    pub scrape_loss: f64,
    /// A request's service time with the replica's batch full, over a lone request's: a
    /// request starting as the a-th in its replica's batch takes `1 + (this - 1)(a - 1) /
    /// (slots - 1)` times its own service time. 1: the batch does not matter.
    pub full_batch_slowdown: f64,
    /// The HPA scales on the batch size (running requests per replica, as vLLM's
    /// `num_requests_running`), which does not see the queue, instead of the requests in the
    /// system per replica (the metric prewarm's `HpaStatus` reads).
    pub hpa_on_batch_size: bool,
    /// Cluster Autoscaler's `--scale-down-gpu-utilization-threshold` (GPUs requested / allocatable):
    /// a node under it whose pods fit elsewhere is drained after `--scale-down-unneeded-time`
    /// (ca_scale_down.rs). 0: Cluster Autoscaler removes empty nodes only.
    pub ca_utilization_threshold: f64,
    /// Karpenter's multi-node consolidation: one command deletes several underutilised nodes,
    /// up to the disruption budget, whose pods fit on the rest (disruption.rs). Off: one node
    /// per command.
    pub multi_node_consolidation: bool,
}

impl World {
    pub const EXACT: World = World {
        name: WorldName::Exact,
        pull_p99_over_median: 1.0,
        load_p99_over_median: 1.0,
        extra_ingestion_lag_s: 0.0,
        scrape_loss: 0.0,
        full_batch_slowdown: 1.0,
        hpa_on_batch_size: false,
        ca_utilization_threshold: 0.0,
        multi_node_consolidation: false,
    };

    pub const ROUGH: World = World {
        name: WorldName::Rough,
        pull_p99_over_median: 2.5,
        load_p99_over_median: 2.0,
        extra_ingestion_lag_s: 30.0,
        scrape_loss: 0.02,
        full_batch_slowdown: 1.21,
        hpa_on_batch_size: true,
        ca_utilization_threshold: 0.5,
        multi_node_consolidation: true,
    };

    pub fn named(name: WorldName) -> World {
        match name {
            WorldName::Exact => World::EXACT,
            WorldName::Rough => World::ROUGH,
        }
    }

    /// For `skip_serializing_if`: the exact world's reports stay as they were.
    pub fn is_exact(&self) -> bool {
        self.name == WorldName::Exact
    }
}

/// A lognormal draw with this median and p99 / median (no capacity errors): the launch model's.
fn draw(median_s: f64, p99_over_median: f64, seed: u64, who: Stream, ordinal: u64) -> f64 {
    if p99_over_median <= 1.0 {
        return median_s;
    }
    let spread = LaunchModel {
        p99_over_median,
        ..LaunchModel::CONSTANT
    };
    spread.sample(median_s, &mut draw_stream(seed, who, ordinal))
}

impl Sim<'_> {
    /// The image pull of node `node` (each node's own draw, the same for every policy that
    /// launches an n-th node: common random numbers).
    pub(super) fn image_pull_s(&self, node: usize) -> f64 {
        let w = &self.cfg.world;
        let median = self.cfg.model.image_pull_s;
        draw(
            median,
            w.pull_p99_over_median,
            self.cfg.seed,
            Stream::Pull,
            node as u64,
        )
    }

    /// The model load of inference pod `pod` (its own draw, keyed by its ordinal).
    pub(super) fn model_load_s(&self, pod: usize) -> f64 {
        let w = &self.cfg.world;
        let median = self.cfg.model.model_load_s;
        draw(
            median,
            w.load_p99_over_median,
            self.cfg.seed,
            Stream::Load,
            pod as u64,
        )
    }
}

impl Sim<'_> {
    /// Draws whether the store lost scrape `b` (only in a world that loses any).
    pub(super) fn draw_scrape_loss(&mut self, b: usize) {
        let loss = self.cfg.world.scrape_loss;
        if loss <= 0.0 {
            return;
        }
        if self.lost_scrapes.len() <= b {
            self.lost_scrapes.resize(b + 1, false);
        }
        let u: f64 = draw_stream(self.cfg.seed, Stream::Scrape, b as u64).random();
        self.lost_scrapes[b] = u < loss;
    }

    /// Whether the store holds scrape `b`'s samples (a range vector holds only these).
    pub(super) fn kept(&self, b: usize) -> bool {
        !self.lost_scrapes.get(b).copied().unwrap_or(false)
    }

    /// The scrape whose sample an instant query at scrape `b` gets: `b`, or when the store lost
    /// it the newest kept one before it (Prometheus' lookback returns the last sample; a few
    /// lost scrapes in a row stay well inside its 5 minutes). `b` itself if none was kept.
    pub(super) fn stored_scrape(&self, b: usize) -> usize {
        (0..=b).rev().find(|&k| self.kept(k)).unwrap_or(b)
    }

    /// The factor on the service time of a request that starts as the `batch`-th in its
    /// replica's batch (`World::full_batch_slowdown`). It is fixed when the request starts.
    pub(super) fn batch_slowdown(&self, batch: u32) -> f64 {
        let full = self.cfg.world.full_batch_slowdown;
        let slots = self.slots();
        if full == 1.0 || slots <= 1 {
            return 1.0;
        }
        1.0 + (full - 1.0) * f64::from(batch.saturating_sub(1)) / f64::from(slots - 1)
    }
}
