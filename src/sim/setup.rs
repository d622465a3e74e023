//! What a comparison is asked to run besides the workload: the model, the two provisioners,
//! prewarm's spec, the SLO, the policies and the bench settings. Changes when a comparison gains
//! a setting; the simulator's lower layers (knobs, report) read these types, so they live below
//! `compare`.

use serde::Serialize;

use crate::core::{PolicySpec, TargetSpec};

use super::engine::LaunchModel;
use super::model::{Model, Provisioner};

/// The policies a comparison can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyName {
    Reactive,
    ClusterAutoscaler,
    StaticPeak,
    Buffer,
    BufferPct,
    Prewarm,
    Oracle,
    Ideal,
}

impl PolicyName {
    pub const ALL: [PolicyName; 8] = [
        PolicyName::Reactive,
        PolicyName::ClusterAutoscaler,
        PolicyName::StaticPeak,
        PolicyName::Buffer,
        PolicyName::BufferPct,
        PolicyName::Prewarm,
        PolicyName::Oracle,
        PolicyName::Ideal,
    ];

    pub fn label(self) -> &'static str {
        match self {
            PolicyName::Reactive => "reactive",
            PolicyName::ClusterAutoscaler => "cluster-autoscaler",
            PolicyName::StaticPeak => "static-peak",
            PolicyName::Buffer => "buffer",
            PolicyName::BufferPct => "buffer-pct",
            PolicyName::Prewarm => "prewarm",
            PolicyName::Oracle => "oracle",
            PolicyName::Ideal => "ideal",
        }
    }
}

/// Everything a comparison needs besides the workload.
#[derive(Clone, Debug)]
pub struct Setup {
    pub model: Model,
    /// Karpenter (reactive, buffers, prewarm, oracle).
    pub karpenter: Provisioner,
    /// Cluster Autoscaler node groups.
    pub cluster_autoscaler: Provisioner,
    pub prewarm_policy: PolicySpec,
    pub prewarm_target: TargetSpec,
    pub slo_wait_s: f64,
    /// Largest fraction of requests waiting longer than `slo_wait_s` that meets the SLO.
    pub slo_fraction: f64,
    pub policies: Vec<PolicyName>,
    /// Cap on the buffer grid's N.
    pub buffer_max: Option<u32>,
    /// Unix time of t = 0.
    pub base_epoch: f64,
    pub launch: LaunchModel,
    /// Seed of the launch draws (every policy the same).
    pub seed: u64,
    pub ingestion_lag_s: f64,
    pub burn_in_s: f64,
    /// Knobs are chosen on the first D days and the rest is scored.
    pub train_days: Option<u32>,
    /// Worker threads (runs are independent).
    pub threads: usize,
}

impl Setup {
    pub fn lead_time_s(&self) -> f64 {
        self.karpenter.node_launch_s + self.model.image_pull_s + self.model.model_load_s
    }
}
