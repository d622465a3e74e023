//! What a comparison is asked to run besides the workload: the model, the two provisioners,
//! prewarm's spec, the SLO, the policies and the bench settings, and [`build`], which checks the
//! plain values a front end (the `simulate` and `backtest` flags) gives and turns them into a
//! [`Setup`]. Changes when a comparison gains a setting; the simulator's lower layers (knobs,
//! report) read these types, so they live below `compare`.

use serde::Serialize;

use crate::core::spec::ScaleDownDelay;
use crate::core::{PolicySpec, TargetSpec};

use crate::core::{HeadroomKind, ServerKind};

use super::checks::{config_error, non_negative, positive};
use super::engine::{LaunchModel, LeadTime, World, WorldName};
use super::model::{self, Hpa, Model, Provisioner};

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
    /// Clairvoyant node hints: the reactive run plus a node launched one lead time before each
    /// node the reactive run needed (was called "oracle"; it is not a bound).
    #[value(name = "node-hints", alias = "oracle")]
    #[serde(rename = "node-hints")]
    NodeHints,
    Ideal,
    /// The true lower bound (sim/bound.rs).
    LowerBound,
    /// The true lower bound when each request may wait up to the SLO's wait (sim/wait_bound.rs).
    SloBound,
    /// The HPA with a replica floor by hour (KEDA cron, scheduled scaling): knob_grid.rs.
    ScheduledFloor,
    /// The HPA with a lower target utilisation.
    HpaTarget,
    /// prewarm's decision applied as the HPA's floor (`hpa.raiseMinReplicas`), no balloons.
    PrewarmFloor,
    /// prewarm-floor's decisions with a pool's spare split between the floors and warm nodes
    /// (`--models`, sim/tier_split.rs); with one model it is prewarm-floor.
    PrewarmSplit,
}

impl PolicyName {
    /// Every policy but prewarm-split (a pool's: with one model it is prewarm-floor).
    pub const ALL: [PolicyName; 13] = [
        PolicyName::Reactive,
        PolicyName::ClusterAutoscaler,
        PolicyName::StaticPeak,
        PolicyName::Buffer,
        PolicyName::BufferPct,
        PolicyName::Prewarm,
        PolicyName::NodeHints,
        PolicyName::Ideal,
        PolicyName::LowerBound,
        PolicyName::SloBound,
        PolicyName::ScheduledFloor,
        PolicyName::HpaTarget,
        PolicyName::PrewarmFloor,
    ];

    /// What `--policies` runs when not given: `ALL` up to the lower bounds (the baselines after
    /// them are asked for by name).
    pub const DEFAULT: &'static [PolicyName] = PolicyName::ALL.split_at(10).0;

    pub fn label(self) -> &'static str {
        match self {
            PolicyName::Reactive => "reactive",
            PolicyName::ClusterAutoscaler => "cluster-autoscaler",
            PolicyName::StaticPeak => "static-peak",
            PolicyName::Buffer => "buffer",
            PolicyName::BufferPct => "buffer-pct",
            PolicyName::Prewarm => "prewarm",
            PolicyName::NodeHints => "node-hints",
            PolicyName::Ideal => "ideal",
            PolicyName::LowerBound => "lower-bound",
            PolicyName::SloBound => "slo-bound",
            PolicyName::ScheduledFloor => "scheduled-floor",
            PolicyName::HpaTarget => "hpa-target",
            PolicyName::PrewarmFloor => "prewarm-floor",
            PolicyName::PrewarmSplit => "prewarm-split",
        }
    }
}

/// Everything a comparison needs besides the workload.
#[derive(Clone, Debug)]
pub struct Setup {
    pub model: Model,
    /// Karpenter (reactive, buffers, prewarm, node hints).
    pub karpenter: Provisioner,
    /// Cluster Autoscaler node groups.
    pub cluster_autoscaler: Provisioner,
    pub prewarm_policy: PolicySpec,
    pub prewarm_target: TargetSpec,
    pub slo_wait_s: f64,
    /// Largest fraction of requests waiting longer than `slo_wait_s` that meets the SLO.
    pub slo_fraction: f64,
    /// With a price of a delayed request (USD), knobs are chosen on the training days for the
    /// least cost (`knob_grid::choose_by_cost`) instead of against `slo_fraction`.
    pub delayed_request_cost: Option<f64>,
    pub policies: Vec<PolicyName>,
    /// Cap on the buffer grid's N.
    pub buffer_max: Option<u32>,
    /// Unix time of t = 0.
    pub base_epoch: f64,
    pub launch: LaunchModel,
    /// Seed of the launch draws (every policy the same).
    pub seed: u64,
    pub burn_in_s: f64,
    /// Knobs are chosen on the first D days and the rest is scored.
    pub train_days: Option<u32>,
    /// When a client counts as batch-like (inputs that know their clients).
    pub classes: super::classes::Thresholds,
    /// Worker threads (runs are independent).
    pub threads: usize,
    /// Where prewarm's lead time comes from: `prewarm_policy.lead_time_s` (LEAD_TIME_SECONDS,
    /// `--lead-time-hint`) as configured, or learned from each run's own events with it as
    /// the fallback.
    pub prewarm_lead: LeadTime,
    /// Where the simulated cluster departs from what prewarm is told (`--world`).
    pub world: World,
    /// `--models K`: the workload's clients split into K models on one NodePool and the pool's
    /// policies compared (compare.rs, each run on the pool by pool_bench.rs); None: one model.
    pub models: Option<usize>,
}

impl Setup {
    /// Replicas one of Karpenter's nodes holds (at least 1).
    pub fn replicas_per_node(&self) -> u32 {
        (self.karpenter.instance.gpus / self.model.gpus_per_replica.max(1)).max(1)
    }

    /// What a GPU-hour of Karpenter's nodes costs.
    pub fn usd_per_gpu_hour(&self) -> f64 {
        self.karpenter.usd_per_node_hour() / self.karpenter.instance.gpus as f64
    }

    /// The true lead time of a cold start on a fresh node: the median launch, the pull and the
    /// load (what the simulated cluster takes, whatever prewarm is told).
    pub fn lead_time_s(&self) -> f64 {
        self.karpenter.node_launch_s + self.model.image_pull_s + self.model.model_load_s
    }

    /// What new capacity takes at least before it serves, for the true lower bounds: a model
    /// load for a replica; for a node the launch model's shortest usual launch (its 1st
    /// percentile: the lognormal's median / (p99 / median)), the image pull and the model load;
    /// and the SLO's wait, which the SLO bound lets each request wait.
    pub fn bound_setups(&self) -> super::ideal::Setups {
        let ratio = self.launch.p99_over_median.max(1.0);
        let shortest_launch_s = self.karpenter.node_launch_s / ratio;
        super::ideal::Setups {
            replica_s: self.model.model_load_s,
            node_s: shortest_launch_s + self.model.image_pull_s + self.model.model_load_s,
            slo_wait_s: self.slo_wait_s,
        }
    }
}

/// Karpenter's `consolidationPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ConsolidationPolicy {
    WhenEmpty,
    WhenEmptyOrUnderutilized,
}

/// How nodes are priced: on-demand, or spot at a fraction of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CapacityType {
    OnDemand,
    Spot,
}

/// The model values of a setup, named and meant as the flags of the same name
/// (`prewarm simulate --help`); the lead-time flags pick the `lead_time` argument of [`build`].
#[derive(Clone, Debug)]
pub struct ModelValues {
    pub prefill_tokens_per_s: f64,
    pub decode_tokens_per_s: f64,
    pub slots: u32,
    pub gpus_per_replica: u32,
    pub instance_type: String,
    pub capacity_type: CapacityType,
    pub spot_price_ratio: f64,
    pub node_launch: f64,
    pub image_pull: f64,
    pub model_load: f64,
    pub no_prepull: bool,
    pub batch: f64,
    pub batch_max: f64,
    pub consolidate_after: f64,
    pub consolidation_policy: ConsolidationPolicy,
    pub disruption_budget: u32,
    pub ca_instance_type: String,
    pub ca_node_launch: f64,
    pub ca_scale_down_unneeded: f64,
    pub hpa_target_utilization: f64,
    pub hpa_sync: f64,
    pub hpa_scale_down_window: f64,
    pub hpa_scale_up_pods: u32,
    pub hpa_scale_up_percent: f64,
    pub hpa_tolerance: f64,
    pub hpa_metrics_lag: f64,
    pub hpa_scale_up_window: f64,
    pub hpa_scale_down_percent: f64,
    pub hpa_policy_period: f64,
    pub min_replicas: u32,
    pub max_replicas: u32,
}

/// prewarm's own settings, named as their flags (the Lambda's variables and TargetSpec fields).
#[derive(Clone, Debug)]
pub struct PrewarmValues {
    pub tick: f64,
    pub window: f64,
    pub step: f64,
    pub error_quantile: f64,
    pub target_wait: f64,
    pub scale_down_delay: ScaleDownDelay,
    pub cooldown: f64,
    pub stale_after: f64,
    pub ewma_alpha: f64,
    pub trend_beta: f64,
    pub trend_damping: f64,
    pub replica_concurrency: Option<u32>,
    pub min_spare: u32,
    pub max_spare: u32,
    pub next_step_spare: u32,
    pub max_step_up: u32,
    pub max_step_down: u32,
    pub freeze_consolidation: bool,
    pub band_by_hour: crate::core::spec::BandByHour,
    pub forecaster: crate::core::spec::ForecasterChoice,
    /// BAND_HISTORY_SECONDS.
    pub band_history: f64,
    pub queue_sizing: bool,
    /// LEAD_TIME_SECONDS as prewarm is told it (None: the true lead time).
    pub lead_time_hint: Option<f64>,
    /// Learn the lead time from the run's events (else LEAD_TIME_SECONDS stands).
    pub learn_lead_time: bool,
    /// The quantile of each learned phase the horizon sums.
    pub lead_quantile: f64,
}

/// How a workload is scored and how the simulated Lambda and cluster differ from ideal ones.
#[derive(Clone, Debug)]
pub struct BenchValues {
    pub train_days: Option<u32>,
    pub burn_in: f64,
    pub ingestion_lag: f64,
    pub launch_p99_ratio: f64,
    pub constant_launch: bool,
    pub ice_probability: f64,
    pub ice_retry: f64,
    pub threads: Option<usize>,
    pub batch_cv: f64,
    pub batch_clump: f64,
    pub world: WorldName,
}

/// Everything [`build`] turns into a [`Setup`], as plain values.
#[derive(Clone, Debug)]
pub struct SetupValues {
    pub model: ModelValues,
    pub prewarm: PrewarmValues,
    pub bench: BenchValues,
    pub slo_wait: f64,
    pub slo_fraction: f64,
    pub delayed_request_cost: Option<f64>,
    pub policies: Vec<PolicyName>,
    pub buffer_max: Option<u32>,
}

/// The validated setup for one lead time (None: the values as given). Errors name the flag or
/// variable a user sets, the way `prewarm simulate` and `backtest` spell it.
pub fn build(v: &SetupValues, lead_time: Option<f64>) -> crate::Result<Setup> {
    let m = &v.model;
    positive("--prefill-tokens-per-s", m.prefill_tokens_per_s)?;
    positive("--decode-tokens-per-s", m.decode_tokens_per_s)?;
    positive("--hpa-target-utilization", m.hpa_target_utilization)?;
    positive("--hpa-sync", m.hpa_sync)?;
    positive("--hpa-policy-period", m.hpa_policy_period)?;
    positive("--slo-wait", v.slo_wait)?;
    non_negative("--slo-fraction", v.slo_fraction)?;
    if let Some(cost) = v.delayed_request_cost {
        positive("--delayed-request-cost", cost)?;
    }
    for (flag, v) in [
        ("--node-launch", m.node_launch),
        ("--image-pull", m.image_pull),
        ("--model-load", m.model_load),
        ("--batch", m.batch),
        ("--batch-max", m.batch_max),
        ("--consolidate-after", m.consolidate_after),
        ("--ca-node-launch", m.ca_node_launch),
        ("--ca-scale-down-unneeded", m.ca_scale_down_unneeded),
        ("--hpa-scale-down-window", m.hpa_scale_down_window),
        ("--hpa-scale-up-window", m.hpa_scale_up_window),
        ("--hpa-metrics-lag", m.hpa_metrics_lag),
        ("--hpa-tolerance", m.hpa_tolerance),
        ("--hpa-scale-down-percent", m.hpa_scale_down_percent),
    ] {
        non_negative(flag, v)?;
    }
    if m.slots == 0 {
        return Err(config_error("--slots", "must be at least 1"));
    }
    if m.min_replicas > m.max_replicas || m.max_replicas == 0 {
        return Err(config_error(
            "--max-replicas",
            "must be at least 1 and --min-replicas",
        ));
    }
    if m.hpa_scale_down_percent > 100.0 {
        return Err(config_error(
            "--hpa-scale-down-percent",
            "must be at most 100",
        ));
    }
    if !(m.spot_price_ratio > 0.0 && m.spot_price_ratio <= 1.0) {
        return Err(config_error("--spot-price-ratio", "must be in (0, 1]"));
    }
    let (launch, pull, load) = match lead_time {
        Some(total) => {
            positive("--lead-time", total)?;
            model::split_lead_time(total, m.node_launch, m.image_pull, m.model_load)
        }
        None => (m.node_launch, m.image_pull, m.model_load),
    };
    let karpenter_type = instance("--instance-type", &m.instance_type)?;
    let ca_type = instance("--ca-instance-type", &m.ca_instance_type)?;
    for (flag, t) in [
        ("--instance-type", &karpenter_type),
        ("--ca-instance-type", &ca_type),
    ] {
        if t.gpus < m.gpus_per_replica {
            return Err(config_error(
                flag,
                format!(
                    "{} has {} GPUs, fewer than --gpus-per-replica {}",
                    t.name, t.gpus, m.gpus_per_replica
                ),
            ));
        }
    }
    let price_factor = match m.capacity_type {
        CapacityType::OnDemand => 1.0,
        CapacityType::Spot => m.spot_price_ratio,
    };
    let model = Model {
        prefill_tokens_per_s: m.prefill_tokens_per_s,
        decode_tokens_per_s: m.decode_tokens_per_s,
        slots_per_replica: m.slots,
        gpus_per_replica: m.gpus_per_replica,
        image_pull_s: pull,
        model_load_s: load,
        prepull: !m.no_prepull,
        hpa: Hpa {
            target_utilization: m.hpa_target_utilization,
            wanted_utilization: m.hpa_target_utilization,
            sync_s: m.hpa_sync,
            tolerance: m.hpa_tolerance,
            metrics_lag_s: m.hpa_metrics_lag,
            scale_up_window_s: m.hpa_scale_up_window,
            scale_up_pods: m.hpa_scale_up_pods,
            scale_up_percent: m.hpa_scale_up_percent,
            scale_down_window_s: m.hpa_scale_down_window,
            scale_down_percent: m.hpa_scale_down_percent,
            policy_period_s: m.hpa_policy_period,
            min_replicas: m.min_replicas,
            max_replicas: m.max_replicas,
        },
    };
    // Cluster Autoscaler's 4.2 min is the whole stall of the field report: scale it with
    // the lead time the same way as Karpenter's launch.
    let ca_launch = match lead_time {
        Some(_) if m.node_launch > 0.0 => m.ca_node_launch * launch / m.node_launch,
        _ => m.ca_node_launch,
    };
    let karpenter = Provisioner {
        instance: karpenter_type,
        node_launch_s: launch,
        batch_s: m.batch,
        batch_max_s: m.batch_max,
        empty_after_s: m.consolidate_after,
        disruption: Some(model::Disruption {
            underutilized: m.consolidation_policy == ConsolidationPolicy::WhenEmptyOrUnderutilized,
            budget_nodes: m.disruption_budget,
        }),
        price_factor,
    };
    let cluster_autoscaler = Provisioner {
        instance: ca_type,
        node_launch_s: ca_launch,
        batch_s: m.batch,
        batch_max_s: m.batch,
        empty_after_s: m.ca_scale_down_unneeded,
        disruption: None,
        price_factor,
    };
    // Checked before the policy (which bounds INGESTION_LAG_SECONDS too) so a negative lag is
    // named as the flag.
    non_negative("--ingestion-lag", v.bench.ingestion_lag)?;
    let p = &v.prewarm;
    if let Some(hint) = p.lead_time_hint {
        positive("--lead-time-hint", hint)?;
    }
    if !(p.lead_quantile > 0.0 && p.lead_quantile <= 1.0) {
        return Err(config_error("--lead-quantile", "must be in (0, 1]"));
    }
    let prewarm_lead = if p.learn_lead_time {
        LeadTime::Learned {
            quantile: p.lead_quantile,
        }
    } else {
        LeadTime::Configured
    };
    let prewarm_policy = PolicySpec {
        // LEAD_TIME_SECONDS: the truth unless a hint says otherwise; with learning, only the
        // fallback until the run has learned every phase.
        lead_time_s: p.lead_time_hint.unwrap_or(launch + pull + load),
        tick_s: p.tick,
        window_s: p.window,
        step_s: p.step,
        error_quantile: p.error_quantile,
        target_wait_s: p.target_wait,
        scale_down_delay: p.scale_down_delay,
        cooldown_s: p.cooldown,
        stale_after_s: p.stale_after,
        ewma_alpha: p.ewma_alpha,
        trend_beta: p.trend_beta,
        trend_damping: p.trend_damping,
        band_by_hour: p.band_by_hour,
        forecaster: p.forecaster,
        band_history_s: p.band_history,
        // --ingestion-lag is both how late the simulated metric store shows a scrape (the
        // eyes, `RunConfig::ingestion_lag_s`, set from this field) and the Lambda's
        // INGESTION_LAG_SECONDS: one value.
        ingestion_lag_s: v.bench.ingestion_lag,
        ..PolicySpec::default()
    };
    prewarm_policy
        .validate()
        .map_err(|(var, message)| config_error(&var, message))?;
    let prewarm_target = TargetSpec {
        name: "simulated".into(),
        node_pool: "gpu".into(),
        headroom: HeadroomKind::Balloon {
            namespace: "prewarm".into(),
            name: "balloon-gpu".into(),
        },
        server: ServerKind::Vllm,
        selector: String::new(),
        queries: Default::default(),
        pod_namespace: None,
        pod_selector: None,
        gpus_per_replica: m.gpus_per_replica,
        replica_concurrency: p.replica_concurrency.unwrap_or(m.slots),
        min_spare: p.min_spare,
        max_spare: p.max_spare,
        max_step_up: p.max_step_up,
        max_step_down: p.max_step_down,
        gpu_cap: None,
        freeze_consolidation: p.freeze_consolidation,
        limits: None,
        // The simulated HPA scales on requests in the system per replica (the metric the
        // Lambda can predict), so the target names it unless told not to.
        hpa: (!p.queue_sizing).then(|| crate::core::spec::HpaRef {
            namespace: "inference".into(),
            name: "llm".into(),
            raise_min_replicas: false,
            in_system_metric: None,
        }),
        schedules: Vec::new(),
        next_step_spare: p.next_step_spare,
        delayed_request_cost: None,
    };
    prewarm_target
        .validate()
        .map_err(|(var, message)| config_error(&var, message))?;
    let b = &v.bench;
    non_negative("--burn-in", b.burn_in)?;
    positive("--batch-cv", b.batch_cv)?;
    positive("--batch-clump", b.batch_clump)?;
    if b.train_days == Some(0) {
        return Err(config_error("--train-days", "must be at least 1"));
    }
    let threads = match b.threads {
        Some(0) => return Err(config_error("--threads", "must be at least 1")),
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    Ok(Setup {
        launch: launch_model(b)?,
        seed: 1,
        burn_in_s: b.burn_in,
        train_days: b.train_days,
        classes: super::classes::Thresholds {
            batch_cv: b.batch_cv,
            batch_clump: b.batch_clump,
        },
        threads,
        prewarm_lead,
        world: World::named(b.world),
        model,
        karpenter,
        cluster_autoscaler,
        prewarm_policy,
        prewarm_target,
        slo_wait_s: v.slo_wait,
        slo_fraction: v.slo_fraction,
        delayed_request_cost: v.delayed_request_cost,
        policies: v.policies.clone(),
        buffer_max: v.buffer_max,
        base_epoch: 1_700_000_000.0,
        models: None,
    })
}

/// The launch model the bench values ask for.
fn launch_model(b: &BenchValues) -> crate::Result<LaunchModel> {
    if b.constant_launch {
        return Ok(LaunchModel::CONSTANT);
    }
    if !(b.launch_p99_ratio.is_finite() && b.launch_p99_ratio >= 1.0) {
        return Err(config_error("--launch-p99-ratio", "must be at least 1"));
    }
    if !(0.0..0.5).contains(&b.ice_probability) {
        return Err(config_error("--ice-probability", "must be in [0, 0.5)"));
    }
    non_negative("--ice-retry", b.ice_retry)?;
    Ok(LaunchModel {
        p99_over_median: b.launch_p99_ratio,
        ice_probability: b.ice_probability,
        ice_retry_s: b.ice_retry,
    })
}

fn instance(flag: &str, name: &str) -> crate::Result<model::InstanceType> {
    model::instance_type(name).cloned().ok_or_else(|| {
        let known: Vec<&str> = model::INSTANCE_TYPES.iter().map(|t| t.name).collect();
        config_error(
            flag,
            format!(
                "unknown instance type {name:?}; known: {}",
                known.join(", ")
            ),
        )
    })
}
