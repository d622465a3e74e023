//! `prewarm simulate`: every policy on a request trace or a built-in scenario, compared.
//! Each model parameter is a flag; its help gives the default's source (see docs/simulator.md).

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;

use crate::core::{HeadroomKind, PolicySpec, ServerKind, TargetSpec};
use crate::sim::compare::{compare, Comparison};
use crate::sim::engine::LaunchModel;
use crate::sim::model::{self, Hpa, Model, Provisioner};
use crate::sim::scenario::{Scenario, ScenarioKind};
use crate::sim::setup::{PolicyName, Setup};
use crate::sim::workload::{Source, Workload};
use crate::sim::{frontier_plot, plot, report};

use super::workload_args::WorkloadArgs;

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Request trace (Azure LLM inference CSV .csv, Mooncake JSONL .jsonl), rate series (CSV
    /// with the header t_seconds,rate_per_s[,cv]) or ServeGen client directory; by content.
    #[arg(long, conflicts_with_all = ["scenario", "all_shipped"])]
    pub trace: Option<PathBuf>,
    /// Built-in synthetic scenario instead of a trace.
    #[arg(long, value_enum, conflicts_with = "all_shipped")]
    pub scenario: Option<ScenarioKind>,
    /// Run the three shipped traces (from --trace-dir) and burst-180 (`make demo`).
    #[arg(long, alias = "demo", requires = "trace_dir")]
    pub all_shipped: bool,
    /// Directory holding AzureLLMInferenceTrace_{code,conv}.csv and mooncake_synthetic_trace.jsonl.
    #[arg(long)]
    pub trace_dir: Option<PathBuf>,
    /// Seed of the synthetic scenarios, of --scale's sampling, of the arrivals drawn from rate
    /// inputs and (unless --launch-seed) of the node launch draws.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Seed of the node launch draws (default: --seed). The same requests with other launch
    /// seeds show how much a comparison moves by chance (see docs/notebook/).
    #[arg(long)]
    pub launch_seed: Option<u64>,
    /// Time compression: 2 plays the trace twice as fast.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// Stress case only: clones every request (2 doubles each, at the same instant), keeping
    /// the trace's small-fleet burstiness. Grow a trace with --superpose instead.
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Prompt tokens of every scenario request.
    #[arg(long, default_value_t = 1000)]
    pub scenario_input_tokens: u32,
    /// Generated tokens of every scenario request.
    #[arg(long, default_value_t = 200)]
    pub scenario_output_tokens: u32,
    /// Workloads: --superpose, --rate-scale, --tokens-from, --days.
    #[command(flatten)]
    pub workload: WorkloadArgs,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Model, policy and output flags shared by `simulate` and `backtest`.
#[derive(Debug, Args)]
pub struct CommonArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub prewarm: PrewarmArgs,
    /// A request waiting longer than this (seconds) is delayed.
    #[arg(long, default_value_t = 10.0)]
    pub slo_wait: f64,
    /// The SLO: at most this fraction of requests delayed by missing capacity (0.001 = 0.1%).
    #[arg(long, default_value_t = 0.001)]
    pub slo_fraction: f64,
    /// Policies to run (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = PolicyName::ALL.to_vec())]
    pub policies: Vec<PolicyName>,
    /// Largest buffer N in the buffer's grid (default: half the training peak replicas).
    #[arg(long)]
    pub buffer_max: Option<u32>,
    #[command(flatten)]
    pub bench: BenchArgs,
    /// Print the comparison as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Write the plot of a single comparison to this SVG file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Write one SVG per comparison into this directory.
    #[arg(long, alias = "out-dir")]
    pub plot_dir: Option<PathBuf>,
    /// Write each comparison's time series (every step, every policy) as CSV into this directory.
    #[arg(long)]
    pub series_dir: Option<PathBuf>,
}

/// How a workload is scored and how much the simulated Lambda and cluster differ from an
/// idealised one (docs/simulator.md says where each default comes from).
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Choose every knob on the first D days and score the rest (the report covers the scored
    /// days only). Without it the knobs are chosen on the scored days: in hindsight.
    #[arg(long)]
    pub train_days: Option<u32>,
    /// Seconds at the start that are simulated but not scored: the metric history fills with
    /// the workload's own past.
    #[arg(long, default_value_t = 1800.0)]
    pub burn_in: f64,
    /// Seconds between a scrape and when a query sees it (AMP ingestion; 0 for a local
    /// Prometheus).
    #[arg(long, default_value_t = 30.0)]
    pub ingestion_lag: f64,
    /// p99 / median of the node launch time (lognormal around --node-launch); 1 = constant.
    #[arg(long, default_value_t = 2.0)]
    pub launch_p99_ratio: f64,
    /// Every node launch takes exactly --node-launch and never fails (same as
    /// --launch-p99-ratio 1 --ice-probability 0).
    #[arg(long)]
    pub constant_launch: bool,
    /// Probability that a launch attempt fails with InsufficientInstanceCapacity.
    #[arg(long, default_value_t = 0.02)]
    pub ice_probability: f64,
    /// Seconds a failed launch attempt costs before the next one starts.
    #[arg(long, default_value_t = 15.0)]
    pub ice_retry: f64,
    /// Worker threads (default: every core).
    #[arg(long)]
    pub threads: Option<usize>,
}

impl BenchArgs {
    fn launch(&self) -> crate::Result<LaunchModel> {
        if self.constant_launch {
            return Ok(LaunchModel::CONSTANT);
        }
        if !(self.launch_p99_ratio.is_finite() && self.launch_p99_ratio >= 1.0) {
            return Err(config_error("--launch-p99-ratio", "must be at least 1"));
        }
        if !(0.0..0.5).contains(&self.ice_probability) {
            return Err(config_error("--ice-probability", "must be in [0, 0.5)"));
        }
        non_negative("--ice-retry", self.ice_retry)?;
        Ok(LaunchModel {
            p99_over_median: self.launch_p99_ratio,
            ice_probability: self.ice_probability,
            ice_retry_s: self.ice_retry,
        })
    }
}

#[derive(Debug, Args)]
pub struct ModelArgs {
    /// Prompt tokens per second per request slot (prefill). Assumption: order of vLLM prefill
    /// for a 7-8B model on one A10G shared by the replica's slots.
    #[arg(long, default_value_t = 4000.0)]
    pub prefill_tokens_per_s: f64,
    /// Generated tokens per second per request slot (decode under continuous batching).
    /// Assumption: 7-8B fp16 on A10G at a batch of 8.
    #[arg(long, default_value_t = 40.0)]
    pub decode_tokens_per_s: f64,
    /// Requests one replica serves at once (TargetSpec replicaConcurrency default 8).
    #[arg(long, default_value_t = 8)]
    pub slots: u32,
    /// GPUs per inference replica (TargetSpec gpusPerReplica default 1).
    #[arg(long, default_value_t = 1)]
    pub gpus_per_replica: u32,
    /// Karpenter's instance type: g5.xlarge, g5.12xlarge or g5.48xlarge (us-east-1 prices).
    #[arg(long, default_value = "g5.12xlarge")]
    pub instance_type: String,
    /// Price nodes as on-demand or spot.
    #[arg(long, value_enum, default_value = "on-demand")]
    pub capacity_type: CapacityType,
    /// Spot price as a fraction of on-demand (assumption; spot prices vary by zone and hour).
    #[arg(long, default_value_t = 0.4)]
    pub spot_price_ratio: f64,
    /// Seconds from pending pod to Ready node with Karpenter (field report: 41 s).
    #[arg(long, default_value_t = 41.0)]
    pub node_launch: f64,
    /// Seconds to pull the image and weights on a fresh node (assumption: ~10 GB at ~100 MB/s).
    #[arg(long, default_value_t = 109.0)]
    pub image_pull: f64,
    /// Seconds to load weights from local disk and serve (assumption, vLLM 7-8B).
    #[arg(long, default_value_t = 30.0)]
    pub model_load: f64,
    /// Total lead time: rescales --node-launch, --image-pull and --model-load proportionally
    /// (the defaults add up to 180 s, LEAD_TIME_SECONDS' default).
    #[arg(long, conflicts_with = "lead_times")]
    pub lead_time: Option<f64>,
    /// Several lead times: one comparison each, e.g. 45,180,300.
    #[arg(long, value_delimiter = ',')]
    pub lead_times: Vec<f64>,
    /// Images and weights are not pre-pulled (no infra/k8s/prepull-daemonset): the first
    /// inference pod on a node pulls them, even on a warm node.
    #[arg(long)]
    pub no_prepull: bool,
    /// Karpenter batches pending pods this long (BATCH_IDLE_DURATION default 1 s).
    #[arg(long, default_value_t = 1.0)]
    pub batch: f64,
    /// Karpenter consolidateAfter for empty nodes (infra/k8s/nodepool-gpu.yaml: 10m).
    #[arg(long, default_value_t = 600.0)]
    pub consolidate_after: f64,
    /// Cluster Autoscaler's node group instance type (one large type).
    #[arg(long, default_value = "g5.48xlarge")]
    pub ca_instance_type: String,
    /// Seconds from pending pod to Ready node with Cluster Autoscaler (field report: 4.2 min
    /// for a burst of 180 pending inference pods).
    #[arg(long, default_value_t = 252.0)]
    pub ca_node_launch: f64,
    /// Cluster Autoscaler --scale-down-unneeded-time (default 10 min).
    #[arg(long, default_value_t = 600.0)]
    pub ca_scale_down_unneeded: f64,
    /// HPA target: requests in the system per replica slot (waiting+running / slots).
    #[arg(long, default_value_t = 0.7)]
    pub hpa_target_utilization: f64,
    /// HPA sync period (--horizontal-pod-autoscaler-sync-period default 15 s).
    #[arg(long, default_value_t = 15.0)]
    pub hpa_sync: f64,
    /// HPA scale-down stabilization window (autoscaling/v2 default 300 s).
    #[arg(long, default_value_t = 300.0)]
    pub hpa_scale_down_window: f64,
    /// HPA scale-up limit per sync in pods (autoscaling/v2 default 4).
    #[arg(long, default_value_t = 4)]
    pub hpa_scale_up_pods: u32,
    /// HPA scale-up limit per sync in percent of current replicas (autoscaling/v2 default 100).
    #[arg(long, default_value_t = 100.0)]
    pub hpa_scale_up_percent: f64,
    /// HPA minReplicas.
    #[arg(long, default_value_t = 1)]
    pub min_replicas: u32,
    /// HPA maxReplicas (burst-180 needs 180; a queue-driven HPA overshoots without a cap).
    #[arg(long, default_value_t = 200)]
    pub max_replicas: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CapacityType {
    OnDemand,
    Spot,
}

/// prewarm's own settings in the simulation: the Lambda's environment variables and the
/// TargetSpec fields, with the same defaults.
#[derive(Debug, Args)]
pub struct PrewarmArgs {
    /// TICK_SECONDS.
    #[arg(long, default_value_t = 15.0)]
    pub tick: f64,
    /// METRICS_WINDOW_SECONDS.
    #[arg(long, default_value_t = 900.0)]
    pub window: f64,
    /// METRICS_STEP_SECONDS (also the simulator's metric and plot resolution).
    #[arg(long, default_value_t = 15.0)]
    pub step: f64,
    /// ERROR_QUANTILE.
    #[arg(long, default_value_t = 0.9)]
    pub error_quantile: f64,
    /// TARGET_WAIT_SECONDS.
    #[arg(long, default_value_t = 2.0)]
    pub target_wait: f64,
    /// SCALE_DOWN_DELAY_SECONDS.
    #[arg(long, default_value_t = 300.0)]
    pub scale_down_delay: f64,
    /// COOLDOWN_SECONDS.
    #[arg(long, default_value_t = 60.0)]
    pub cooldown: f64,
    /// STALE_AFTER_SECONDS.
    #[arg(long, default_value_t = 120.0)]
    pub stale_after: f64,
    /// EWMA smoothing of the level.
    #[arg(long, default_value_t = 0.3)]
    pub ewma_alpha: f64,
    /// Smoothing of the trend.
    #[arg(long, default_value_t = 0.2)]
    pub trend_beta: f64,
    /// Damping of the trend per step.
    #[arg(long, default_value_t = 0.9)]
    pub trend_damping: f64,
    /// TargetSpec replicaConcurrency as prewarm is told it (default: --slots). Setting it to
    /// the load per replica the replica controller aims for (slots x HPA target utilisation)
    /// makes prewarm size replicas the way the HPA will create them.
    #[arg(long)]
    pub replica_concurrency: Option<u32>,
    /// TargetSpec minSpare.
    #[arg(long, default_value_t = 0)]
    pub min_spare: u32,
    /// TargetSpec maxSpare.
    #[arg(long, default_value_t = 256)]
    pub max_spare: u32,
    /// TargetSpec nextStepSpare: spare replicas for the HPA's next scale-out step while demand
    /// may grow (0: off).
    #[arg(long, default_value_t = 0)]
    pub next_step_spare: u32,
    /// TargetSpec maxStepUp.
    #[arg(long, default_value_t = 4)]
    pub max_step_up: u32,
    /// TargetSpec maxStepDown.
    #[arg(long, default_value_t = 1)]
    pub max_step_down: u32,
    /// TargetSpec freezeConsolidation (the simulator honours the freeze for empty nodes).
    #[arg(long)]
    pub freeze_consolidation: bool,
    /// BAND_BY_HOUR: one lead-time band per hour of day instead of one overall.
    #[arg(long)]
    pub band_by_hour: bool,
    /// The simulated target names no HPA: prewarm sizes with Erlang C on the queue metrics
    /// instead of in the replicas the (simulated) HPA will want.
    #[arg(long)]
    pub queue_sizing: bool,
}

fn config_error(var: &str, message: impl Into<String>) -> crate::Error {
    crate::Error::config(var, message)
}

fn positive(name: &str, v: f64) -> crate::Result<()> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(config_error(
            name,
            format!("must be a positive number, got {v}"),
        ))
    }
}

fn non_negative(name: &str, v: f64) -> crate::Result<()> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(config_error(name, format!("must be zero or more, got {v}")))
    }
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

impl CommonArgs {
    /// The lead times to compare at: the --lead-times list, --lead-time, or the flags' sum.
    pub fn lead_times(&self) -> Vec<Option<f64>> {
        if !self.model.lead_times.is_empty() {
            self.model.lead_times.iter().map(|&l| Some(l)).collect()
        } else {
            vec![self.model.lead_time]
        }
    }

    /// The validated setup for one lead time (None: the flags as given).
    pub fn setup(&self, lead_time: Option<f64>) -> crate::Result<Setup> {
        let m = &self.model;
        positive("--prefill-tokens-per-s", m.prefill_tokens_per_s)?;
        positive("--decode-tokens-per-s", m.decode_tokens_per_s)?;
        positive("--hpa-target-utilization", m.hpa_target_utilization)?;
        positive("--hpa-sync", m.hpa_sync)?;
        positive("--slo-wait", self.slo_wait)?;
        non_negative("--slo-fraction", self.slo_fraction)?;
        for (flag, v) in [
            ("--node-launch", m.node_launch),
            ("--image-pull", m.image_pull),
            ("--model-load", m.model_load),
            ("--batch", m.batch),
            ("--consolidate-after", m.consolidate_after),
            ("--ca-node-launch", m.ca_node_launch),
            ("--ca-scale-down-unneeded", m.ca_scale_down_unneeded),
            ("--hpa-scale-down-window", m.hpa_scale_down_window),
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
                sync_s: m.hpa_sync,
                scale_down_window_s: m.hpa_scale_down_window,
                scale_up_pods: m.hpa_scale_up_pods,
                scale_up_percent: m.hpa_scale_up_percent,
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
            empty_after_s: m.consolidate_after,
            price_factor,
        };
        let cluster_autoscaler = Provisioner {
            instance: ca_type,
            node_launch_s: ca_launch,
            batch_s: m.batch,
            empty_after_s: m.ca_scale_down_unneeded,
            price_factor,
        };
        let p = &self.prewarm;
        let prewarm_policy = PolicySpec {
            lead_time_s: launch + pull + load,
            tick_s: p.tick,
            window_s: p.window,
            step_s: p.step,
            error_quantile: p.error_quantile,
            target_wait_s: p.target_wait,
            scale_down_delay_s: p.scale_down_delay,
            cooldown_s: p.cooldown,
            stale_after_s: p.stale_after,
            ewma_alpha: p.ewma_alpha,
            trend_beta: p.trend_beta,
            trend_damping: p.trend_damping,
            band_by_hour: p.band_by_hour,
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
        };
        prewarm_target
            .validate()
            .map_err(|(var, message)| config_error(&var, message))?;
        let b = &self.bench;
        non_negative("--burn-in", b.burn_in)?;
        non_negative("--ingestion-lag", b.ingestion_lag)?;
        if b.train_days == Some(0) {
            return Err(config_error("--train-days", "must be at least 1"));
        }
        let threads = match b.threads {
            Some(0) => return Err(config_error("--threads", "must be at least 1")),
            Some(n) => n,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        Ok(Setup {
            launch: b.launch()?,
            seed: 1,
            ingestion_lag_s: b.ingestion_lag,
            burn_in_s: b.burn_in,
            train_days: b.train_days,
            threads,
            model,
            karpenter,
            cluster_autoscaler,
            prewarm_policy,
            prewarm_target,
            slo_wait_s: self.slo_wait,
            slo_fraction: self.slo_fraction,
            policies: self.policies.clone(),
            buffer_max: self.buffer_max,
            base_epoch: 1_700_000_000.0,
        })
    }
}

/// Requests per second that keep one pod at the HPA target with the scenario's requests.
fn rate_per_pod(setup: &Setup, input: u32, output: u32) -> f64 {
    let m = &setup.model;
    m.slots_per_replica as f64 * m.hpa.target_utilization / m.service_time(input, output)
}

/// The attribution the trace licences ask for, by file name.
pub fn attribution(workload: &str) -> &'static str {
    const SCENARIOS: [&str; 4] = ["burst-180", "diurnal", "bursty", "cron-bursts"];
    if workload.contains("servegen") {
        "Trace: ServeGen m-large (Apache-2.0), Xiang et al., \"ServeGen\", NSDI 2026 (Alibaba Cloud Model Studio); token lengths from the Azure LLM inference trace 2023 (CC-BY 4.0), Patel et al., \"Splitwise\", ISCA 2024."
    } else if workload.contains("AzureLLMInferenceTrace") {
        "Trace: Azure LLM inference trace 2023 (CC-BY 4.0), Patel et al., \"Splitwise\", ISCA 2024."
    } else if workload.contains("mooncake") {
        "Trace: Mooncake synthetic trace (Apache-2.0), Qin et al., \"Mooncake\", FAST 2025."
    } else if SCENARIOS.iter().any(|s| workload.starts_with(s)) {
        "Synthetic workload generated by prewarm simulate."
    } else {
        "Requests replayed from a metrics history or a user trace."
    }
}

/// The workloads `args` names, for `setup` (a scenario's requests come from --seed only).
pub fn workloads(args: &SimulateArgs, setup: &Setup) -> crate::Result<Vec<Workload>> {
    positive("--speed", args.speed)?;
    positive("--scale", args.scale)?;
    args.workload.validate()?;
    let multi_day =
        |kind: ScenarioKind| matches!(kind, ScenarioKind::Diurnal | ScenarioKind::CronBursts);
    let scenario = |kind: ScenarioKind| Workload {
        name: if multi_day(kind) {
            format!("{} {}d", kind.name(), args.workload.days)
        } else {
            kind.name().to_string()
        },
        source: Source::Scenario(Scenario {
            kind,
            seed: args.seed,
            rate_per_pod: rate_per_pod(
                setup,
                args.scenario_input_tokens,
                args.scenario_output_tokens,
            ),
            input_tokens: args.scenario_input_tokens,
            output_tokens: args.scenario_output_tokens,
            days: args.workload.days,
        }),
        speed: args.speed,
        scale: args.scale,
        seed: args.seed,
        superpose: 1,
        rate_scale: 1.0,
        tokens_from: None,
    };
    let trace = |path: PathBuf| {
        args.workload.for_path(
            &path,
            args.speed,
            args.scale,
            args.seed,
            args.trace_dir.as_deref(),
        )
    };
    if args.all_shipped {
        let dir = args
            .trace_dir
            .as_deref()
            .expect("clap requires --trace-dir");
        let mut out = Vec::new();
        for file in [
            "AzureLLMInferenceTrace_conv.csv",
            "AzureLLMInferenceTrace_code.csv",
            "mooncake_synthetic_trace.jsonl",
        ] {
            let path = dir.join(file);
            if !path.is_file() {
                return Err(config_error(
                    "--trace-dir",
                    format!("{} not found", path.display()),
                ));
            }
            out.push(trace(path)?);
        }
        out.push(scenario(ScenarioKind::Burst180));
        return Ok(out);
    }
    match (&args.trace, args.scenario) {
        (Some(path), None) => Ok(vec![trace(path.clone())?]),
        (None, Some(kind)) => {
            if args.workload.superpose > 1 || args.workload.rate_scale != 1.0 {
                return Err(config_error(
                    "--superpose",
                    "--superpose and --rate-scale apply to --trace inputs, not scenarios",
                ));
            }
            Ok(vec![scenario(kind)])
        }
        _ => Err(config_error(
            "--trace",
            "give --trace FILE, --scenario NAME or --all-shipped --trace-dir DIR",
        )),
    }
}

/// One setup per lead time, with the seed of the launch draws (--launch-seed, else --seed).
pub fn setups(args: &SimulateArgs) -> crate::Result<Vec<Setup>> {
    let mut out = Vec::new();
    for lead in args.common.lead_times() {
        let mut setup = args.common.setup(lead)?;
        setup.seed = args.launch_seed.unwrap_or(args.seed);
        out.push(setup);
    }
    Ok(out)
}

pub fn run(args: SimulateArgs) -> crate::Result<()> {
    let mut jobs = Vec::new();
    for setup in setups(&args)? {
        for workload in workloads(&args, &setup)? {
            jobs.push((workload, setup.clone()));
        }
    }
    run_jobs(&args.common, jobs)
}

/// Runs the comparisons, prints them and writes the plots.
pub fn run_jobs(common: &CommonArgs, jobs: Vec<(Workload, Setup)>) -> crate::Result<()> {
    if common.plot.is_some() && jobs.len() > 1 {
        return Err(config_error(
            "--plot",
            "several comparisons: use --plot-dir DIR instead",
        ));
    }
    for (flag, dir) in [
        ("--plot-dir", &common.plot_dir),
        ("--series-dir", &common.series_dir),
    ] {
        if let Some(dir) = dir {
            std::fs::create_dir_all(dir)
                .map_err(|e| config_error(flag, format!("{}: {e}", dir.display())))?;
        }
    }
    let bar =
        indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} {msg}: {human_pos} requests simulated ({per_sec})",
        )
        .expect("valid template"),
    );
    let mut results: Vec<Comparison> = Vec::new();
    for (workload, setup) in jobs {
        bar.set_message(format!(
            "{} (lead time {:.0} s)",
            workload.name,
            setup.lead_time_s()
        ));
        let started = Instant::now();
        let tick = |n: u64| bar.inc(n);
        let cmp = compare(&workload, &setup, &tick)
            .map_err(|e| config_error("--trace", e.to_string()))?;
        let elapsed = started.elapsed().as_secs_f64();
        if !common.json {
            bar.suspend(|| print_comparison(&cmp, &setup, elapsed));
        }
        let plot_path = match (&common.plot, &common.plot_dir) {
            (Some(p), _) => Some(p.clone()),
            (None, Some(dir)) => Some(dir.join(plot_name(&cmp))),
            (None, None) => None,
        };
        if let Some(dir) = &common.series_dir {
            let path = dir.join(plot_name(&cmp).replace(".svg", ".csv"));
            write_series(&cmp, &path)
                .map_err(|e| config_error("--series-dir", format!("{}: {e}", path.display())))?;
        }
        if let Some(path) = plot_path {
            // The frontier is the plot; the time series of the reported points goes beside it.
            let timeline = path.with_file_name(format!(
                "{}-timeline.svg",
                path.file_stem()
                    .map_or("plot".into(), |s| s.to_string_lossy())
            ));
            frontier_plot::write_svg(&cmp, &path, attribution(&cmp.workload))
                .map_err(|e| config_error("--plot", e))?;
            plot::write_svg(&cmp, &timeline, attribution(&cmp.workload))
                .map_err(|e| config_error("--plot", e))?;
            if !common.json {
                bar.suspend(|| {
                    println!(
                        "plots: {} (frontiers), {} (time series)\n",
                        path.display(),
                        timeline.display()
                    )
                });
            }
        }
        results.push(cmp);
    }
    bar.finish_and_clear();
    if common.json {
        let text = serde_json::to_string_pretty(&results).expect("comparison serialises");
        println!("{text}");
    }
    Ok(())
}

/// `policy,t,ready_gpus,serving_replicas,balloons,waiting,replicas,pending,cold_starts` for
/// every step of every policy (`cold_starts` cumulative from t = 0).
fn write_series(cmp: &Comparison, path: &Path) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(
        out,
        "policy,t,ready_gpus,serving_replicas,balloons,waiting,replicas,pending,cold_starts"
    )?;
    for (policy, series) in &cmp.plot.policies {
        for p in series {
            writeln!(
                out,
                "{policy},{},{},{},{},{},{},{},{}",
                p.t,
                p.ready_gpus,
                p.serving_replicas,
                p.balloons,
                p.waiting,
                p.replicas,
                p.pending,
                p.cold_starts
            )?;
        }
    }
    out.flush()
}

fn plot_name(cmp: &Comparison) -> String {
    // A plain file name loses its extension; a transformed one ("x.csv superposed x200")
    // becomes a slug, so two workloads of one trace get two files.
    let name = &cmp.workload;
    let plain = name
        .strip_suffix(".csv")
        .or_else(|| name.strip_suffix(".jsonl"));
    let stem: String = plain
        .unwrap_or(name)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("{stem}-lead{:.0}s.svg", cmp.lead_time_s)
}

fn print_comparison(cmp: &Comparison, setup: &Setup, elapsed: f64) {
    let requests = cmp.rows.first().map(|r| r.requests).unwrap_or(0);
    println!(
        "== {} - {:.1} h simulated, {} requests scored from t = {:.1} h; lead time {:.0} s (launch {:.0} + pull {:.0} + load {:.0}); SLO: wait <= {:.0} s for >= {:.2}% ==",
        cmp.workload,
        cmp.duration_s / 3600.0,
        requests,
        cmp.scored_from_s / 3600.0,
        cmp.lead_time_s,
        setup.karpenter.node_launch_s,
        setup.model.image_pull_s,
        setup.model.model_load_s,
        cmp.slo_wait_s,
        (1.0 - cmp.slo_fraction) * 100.0
    );
    match cmp.train_days {
        Some(d) => println!(
            "knobs chosen on days 0-{} (ideal peak {} replicas), scored on the rest",
            d - 1,
            cmp.training_peak_replicas
        ),
        None => println!(
            "knobs tuned IN HINDSIGHT on the scored requests themselves (use --train-days D for an honest split)"
        ),
    }
    print!("{}", report::table(&cmp.rows));
    for (policy, points) in &cmp.frontiers {
        let text: Vec<String> = points
            .iter()
            .map(|p| {
                format!(
                    "{}{}: {:.1} GPU-h {:.3}%",
                    p.knob,
                    p.release
                        .map_or(String::new(), |r| format!(" {}", r.label())),
                    p.gpu_hours,
                    p.delayed_fraction * 100.0
                )
            })
            .collect();
        println!(
            "frontier {policy} ({}): {}",
            cmp.knobs.get(policy).map_or("", String::as_str),
            text.join("; ")
        );
    }
    for r in cmp.rows.iter().filter(|r| r.days.len() >= 2) {
        if let (Some(d), Some(g)) = (r.delayed_fraction_ci95, r.gpu_hours_per_day_ci95) {
            println!(
                "{} over {} days: delayed {:.3}%..{:.3}% (95% interval of the daily mean), GPU-h/day {:.1}..{:.1}",
                r.policy,
                r.days.len(),
                d.0 * 100.0,
                d.1 * 100.0,
                g.0,
                g.1
            );
        }
    }
    if let Some(verdict) = verdict(cmp) {
        println!("{verdict}");
    }
    println!("{}", attribution(&cmp.workload));
    println!("simulated in {elapsed:.2} s\n");
}

/// prewarm against the SLO, the oracle and the cheapest buffer meeting the SLO.
pub fn verdict(cmp: &Comparison) -> Option<String> {
    let find = |name: &str| cmp.rows.iter().find(|r| r.policy == name);
    let prewarm = find("prewarm")?;
    let mut parts = vec![format!(
        "prewarm ({}): delayed {:.3}% ({} <= {:.2}%)",
        prewarm.detail,
        prewarm.delayed_fraction * 100.0,
        if prewarm.meets_slo { "meets" } else { "MISSES" },
        cmp.slo_fraction * 100.0
    )];
    if find("oracle").is_some() {
        parts.push(format!(
            "{:.2}x the clairvoyant oracle's GPU-h",
            prewarm.gpu_hours_vs_oracle
        ));
    }
    if let Some(buffer) = find("buffer").filter(|b| b.meets_slo) {
        let saving = 1.0 - prewarm.gpu_hours / buffer.gpu_hours;
        parts.push(format!(
            "{:.0}% {} GPU-h than the buffer at the SLO ({})",
            saving.abs() * 100.0,
            if saving >= 0.0 { "fewer" } else { "MORE" },
            buffer.detail
        ));
    }
    Some(parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: SimulateArgs,
    }

    fn parse(extra: &[&str]) -> SimulateArgs {
        let mut argv = vec!["prewarm", "--scenario", "bursty"];
        argv.extend_from_slice(extra);
        Wrapper::try_parse_from(argv).unwrap().args
    }

    #[test]
    fn prewarm_flag_defaults_are_the_lambdas_defaults() {
        let setup = parse(&[]).common.setup(None).unwrap();
        assert_eq!(setup.prewarm_policy, PolicySpec::default());
        let json = serde_json::json!([{
            "name": "simulated", "nodePool": "gpu",
            "headroom": {"kind": "balloon", "namespace": "prewarm", "name": "balloon-gpu"},
            "maxSpare": 256,
            "hpa": {"namespace": "inference", "name": "llm"}
        }]);
        let target: Vec<TargetSpec> = serde_json::from_value(json).unwrap();
        assert_eq!(setup.prewarm_target, target[0]);
        // --queue-sizing: the target names no HPA (Erlang C sizing on the queue metrics).
        let setup = parse(&["--queue-sizing"]).common.setup(None).unwrap();
        assert_eq!(setup.prewarm_target.hpa, None);
    }

    #[test]
    fn make_demo_spelling_is_accepted() {
        let args =
            Wrapper::try_parse_from(["prewarm", "--demo", "--trace-dir", "t", "--out-dir", "o"])
                .unwrap()
                .args;
        assert!(args.all_shipped);
        assert_eq!(args.common.plot_dir, Some(PathBuf::from("o")));
    }

    #[test]
    fn lead_time_rescales_every_part() {
        let setup = parse(&["--lead-time", "45"])
            .common
            .setup(Some(45.0))
            .unwrap();
        assert!((setup.lead_time_s() - 45.0).abs() < 1e-9);
        assert_eq!(setup.prewarm_policy.lead_time_s, setup.lead_time_s());
        assert!((setup.cluster_autoscaler.node_launch_s - 252.0 * 45.0 / 180.0).abs() < 1e-9);
    }

    #[test]
    fn bad_flags_name_the_flag() {
        let cases: [(&[&str], &str); 4] = [
            (&["--instance-type", "p9.huge"], "--instance-type"),
            (&["--slots", "0"], "--slots"),
            (
                &["--gpus-per-replica", "8", "--instance-type", "g5.12xlarge"],
                "--instance-type",
            ),
            (&["--tick", "0"], "TICK_SECONDS"),
        ];
        for (flags, name) in cases {
            let error = parse(flags).common.setup(None).unwrap_err().to_string();
            assert!(error.contains(name), "{flags:?}: {error}");
        }
    }
}
