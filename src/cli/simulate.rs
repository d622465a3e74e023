//! `prewarm simulate`: every policy on a request trace or a built-in scenario, compared.
//! Each model parameter is a flag; its help gives the default's source (see docs/simulator.md).

use std::path::PathBuf;

use clap::Args;

use crate::core::spec::{BandByHour, ForecasterChoice, ScaleDownDelay};
use crate::sim::checks::positive;
use crate::sim::run::{self, Output};
use crate::sim::scenario::ScenarioKind;
use crate::sim::setup::{
    self, BenchValues, CapacityType, ConsolidationPolicy, ModelValues, PolicyName, PrewarmValues,
    Setup, SetupValues,
};
use crate::sim::startup_profile::StartupProfile;
use crate::sim::workload::{self, Asked, Workload};

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
    /// Split the workload's clients into this many models that share one NodePool (each its
    /// own deployment and HPA) and compare the policies that can use a pool (docs/simulator.md,
    /// "Several models on one NodePool"). Needs an input that knows its clients (ServeGen).
    #[arg(long)]
    pub models: Option<usize>,
    /// Write the workload's arrival rate per minute as a rate CSV (t_seconds,rate_per_s) to
    /// this file and simulate nothing (the input of tools/weigh-forecasters).
    #[arg(long, conflicts_with = "all_shipped")]
    pub rates_out: Option<PathBuf>,
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
    /// The price of one delayed request (USD): every knob is then chosen on the training days
    /// for the least cost, delayed requests at this price plus GPU-hours at the instance's,
    /// instead of the fewest GPU-hours that meet --slo-fraction. prewarm's knob is its quantile,
    /// so this is the cost-aware quantile, chosen per target on its training days.
    #[arg(long)]
    pub delayed_request_cost: Option<f64>,
    /// Policies to run (comma-separated; the default leaves out scheduled-floor, hpa-target and
    /// prewarm-floor).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = PolicyName::DEFAULT.to_vec())]
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
    /// A client (ServeGen client file, superposed copy) is batch-like when the request-weighted
    /// CV of its inter-arrival times per 600 s window, on the training days, exceeds this
    /// (docs/simulator.md, "Client classes": chosen on servegen-m-large's training days).
    #[arg(long, default_value_t = crate::sim::classes::DEFAULT_BATCH_CV)]
    pub batch_cv: f64,
    /// ...or when its clump size (most requests in one second of a 600 s window over the
    /// window's mean rate per second, at least 1) exceeds this.
    #[arg(long, default_value_t = crate::sim::classes::DEFAULT_BATCH_CLUMP)]
    pub batch_clump: f64,
    /// The simulated world: `exact` (pulls, loads and the metric store as prewarm is told) or
    /// `rough` (drawn pulls and loads; docs/simulator.md, "The rough world").
    #[arg(long, value_enum, default_value = "exact")]
    pub world: crate::sim::engine::WorldName,
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
    /// Karpenter's instance type: g5.xlarge, g5.12xlarge, g5.48xlarge or p4d.24xlarge
    /// (us-east-1 prices).
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
    /// A published startup profile: sets the instance types, --gpus-per-replica, --slots, the
    /// prefill and decode speeds and the lead time's parts (--node-launch + --image-pull +
    /// --model-load), so the lead time is their sum: small-1gpu 487 s, llama70b-8gpu 850 s
    /// (sources in docs/simulator.md). The flags it sets cannot be given with it; --lead-time
    /// rescales its parts as it does the flags'.
    #[arg(long, value_enum, conflicts_with_all = [
        "instance_type", "ca_instance_type", "gpus_per_replica", "slots",
        "prefill_tokens_per_s", "decode_tokens_per_s", "node_launch", "image_pull", "model_load",
    ])]
    pub startup_profile: Option<StartupProfile>,
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
    /// Karpenter closes a batch of pending pods once none came for this long
    /// (BATCH_IDLE_DURATION default 1 s).
    #[arg(long, default_value_t = 1.0)]
    pub batch: f64,
    /// ...or this long after its first pod (BATCH_MAX_DURATION default 10 s).
    #[arg(long, default_value_t = 10.0)]
    pub batch_max: f64,
    /// Karpenter consolidateAfter: a node is consolidated after this long without a pod event
    /// (infra/k8s/nodepool-gpu.yaml: 10m).
    #[arg(long, default_value_t = 600.0)]
    pub consolidate_after: f64,
    /// Karpenter consolidationPolicy (infra/k8s/nodepool-gpu.yaml: WhenEmptyOrUnderutilized).
    #[arg(long, value_enum, default_value = "when-empty-or-underutilized")]
    pub consolidation_policy: ConsolidationPolicy,
    /// Karpenter disruption budget: nodes disrupted at once (infra/k8s/nodepool-gpu.yaml: 1).
    #[arg(long, default_value_t = 1)]
    pub disruption_budget: u32,
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
    /// HPA tolerance: no change while |metric / target - 1| is at most this
    /// (--horizontal-pod-autoscaler-tolerance default 0.1).
    #[arg(long, default_value_t = 0.1)]
    pub hpa_tolerance: f64,
    /// Seconds from a scrape until the HPA's metric query can see it (metric store and metrics
    /// adapter). Assumption: 15 s, about half a 30-s scrape interval plus the adapter's query.
    #[arg(long, default_value_t = 15.0)]
    pub hpa_metrics_lag: f64,
    /// HPA scale-up stabilization window (autoscaling/v2 default 0 s).
    #[arg(long, default_value_t = 0.0)]
    pub hpa_scale_up_window: f64,
    /// HPA scale-down stabilization window (autoscaling/v2 default 300 s).
    #[arg(long, default_value_t = 300.0)]
    pub hpa_scale_down_window: f64,
    /// HPA scale-up policy in pods per period (autoscaling/v2 default 4).
    #[arg(long, default_value_t = 4)]
    pub hpa_scale_up_pods: u32,
    /// HPA scale-up policy in percent of the replicas at the period's start (autoscaling/v2
    /// default 100; the larger of the two policies wins).
    #[arg(long, default_value_t = 100.0)]
    pub hpa_scale_up_percent: f64,
    /// HPA scale-down policy in percent per period (autoscaling/v2 default 100).
    #[arg(long, default_value_t = 100.0)]
    pub hpa_scale_down_percent: f64,
    /// periodSeconds of the HPA's scaling policies (autoscaling/v2 default 15 s).
    #[arg(long, default_value_t = 15.0)]
    pub hpa_policy_period: f64,
    /// HPA minReplicas.
    #[arg(long, default_value_t = 1)]
    pub min_replicas: u32,
    /// HPA maxReplicas (burst-180 needs 180; a queue-driven HPA overshoots without a cap).
    #[arg(long, default_value_t = 200)]
    pub max_replicas: u32,
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
    /// SCALE_DOWN_DELAY_SECONDS: seconds, or `lead` for one lead time (the learned horizon).
    #[arg(long, default_value = "300")]
    pub scale_down_delay: ScaleDownDelay,
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
    /// BAND_BY_HOUR: the lead-time band whole-day (off), per hour of day (day) or of week
    /// (week), or the narrowest of the three out of sample at each calibration (auto).
    #[arg(long, default_value = "auto", value_parser = parse_band_by_hour)]
    pub band_by_hour: BandByHour,
    /// FORECASTER: the blend of the trend and the seasons only (blend), or per target the blend
    /// or the profile of peaks per lead-wide slot of the day, narrowest out of sample at each
    /// calibration (auto).
    #[arg(long, default_value = "auto", value_parser = parse_forecaster)]
    pub forecaster: ForecasterChoice,
    /// BAND_HISTORY_SECONDS: the history the band (and `auto`'s choice of forecaster) is
    /// calibrated on, 1 to 7 days.
    #[arg(long, default_value_t = 86_400.0)]
    pub band_history: f64,
    /// The simulated target names no HPA: prewarm sizes with Erlang C on the queue metrics
    /// instead of in the replicas the (simulated) HPA will want.
    #[arg(long)]
    pub queue_sizing: bool,
    /// LEAD_TIME_SECONDS as prewarm is told it (default: the true lead time, --node-launch +
    /// --image-pull + --model-load). While learning, only the fallback until every phase is
    /// learned; give a wrong value to see learning correct it.
    #[arg(long)]
    pub lead_time_hint: Option<f64>,
    /// prewarm does not learn its lead time from the simulated node boots, pulls and loads:
    /// LEAD_TIME_SECONDS (--lead-time-hint) stands for the whole run.
    #[arg(long)]
    pub no_lead_learning: bool,
    /// The quantile of each learned phase (node boot, image pull, model load) whose sum is the
    /// learned lead time (the Lambda's: core::lead::HORIZON_QUANTILE).
    #[arg(long, default_value_t = crate::core::lead::HORIZON_QUANTILE)]
    pub lead_quantile: f64,
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
        setup::build(&self.values(), lead_time)
    }

    /// The output flags as plain values.
    pub fn output(&self) -> Output {
        Output {
            json: self.json,
            plot: self.plot.clone(),
            plot_dir: self.plot_dir.clone(),
            series_dir: self.series_dir.clone(),
        }
    }

    /// The flags as plain values.
    pub fn values(&self) -> SetupValues {
        let m = &self.model;
        let p = &self.prewarm;
        let b = &self.bench;
        let mut values = SetupValues {
            model: ModelValues {
                prefill_tokens_per_s: m.prefill_tokens_per_s,
                decode_tokens_per_s: m.decode_tokens_per_s,
                slots: m.slots,
                gpus_per_replica: m.gpus_per_replica,
                instance_type: m.instance_type.clone(),
                capacity_type: m.capacity_type,
                spot_price_ratio: m.spot_price_ratio,
                node_launch: m.node_launch,
                image_pull: m.image_pull,
                model_load: m.model_load,
                no_prepull: m.no_prepull,
                batch: m.batch,
                batch_max: m.batch_max,
                consolidate_after: m.consolidate_after,
                consolidation_policy: m.consolidation_policy,
                disruption_budget: m.disruption_budget,
                ca_instance_type: m.ca_instance_type.clone(),
                ca_node_launch: m.ca_node_launch,
                ca_scale_down_unneeded: m.ca_scale_down_unneeded,
                hpa_target_utilization: m.hpa_target_utilization,
                hpa_sync: m.hpa_sync,
                hpa_scale_down_window: m.hpa_scale_down_window,
                hpa_scale_up_pods: m.hpa_scale_up_pods,
                hpa_scale_up_percent: m.hpa_scale_up_percent,
                hpa_tolerance: m.hpa_tolerance,
                hpa_metrics_lag: m.hpa_metrics_lag,
                hpa_scale_up_window: m.hpa_scale_up_window,
                hpa_scale_down_percent: m.hpa_scale_down_percent,
                hpa_policy_period: m.hpa_policy_period,
                min_replicas: m.min_replicas,
                max_replicas: m.max_replicas,
            },
            prewarm: PrewarmValues {
                tick: p.tick,
                window: p.window,
                step: p.step,
                error_quantile: p.error_quantile,
                target_wait: p.target_wait,
                scale_down_delay: p.scale_down_delay,
                cooldown: p.cooldown,
                stale_after: p.stale_after,
                ewma_alpha: p.ewma_alpha,
                trend_beta: p.trend_beta,
                trend_damping: p.trend_damping,
                replica_concurrency: p.replica_concurrency,
                min_spare: p.min_spare,
                max_spare: p.max_spare,
                next_step_spare: p.next_step_spare,
                max_step_up: p.max_step_up,
                max_step_down: p.max_step_down,
                freeze_consolidation: p.freeze_consolidation,
                band_by_hour: p.band_by_hour,
                forecaster: p.forecaster,
                band_history: p.band_history,
                queue_sizing: p.queue_sizing,
                lead_time_hint: p.lead_time_hint,
                learn_lead_time: !p.no_lead_learning,
                lead_quantile: p.lead_quantile,
            },
            bench: BenchValues {
                train_days: b.train_days,
                burn_in: b.burn_in,
                ingestion_lag: b.ingestion_lag,
                launch_p99_ratio: b.launch_p99_ratio,
                constant_launch: b.constant_launch,
                ice_probability: b.ice_probability,
                ice_retry: b.ice_retry,
                threads: b.threads,
                batch_cv: b.batch_cv,
                batch_clump: b.batch_clump,
                world: b.world,
            },
            slo_wait: self.slo_wait,
            slo_fraction: self.slo_fraction,
            delayed_request_cost: self.delayed_request_cost,
            policies: self.policies.clone(),
            buffer_max: self.buffer_max,
        };
        if let Some(profile) = m.startup_profile {
            profile.apply(&mut values.model);
        }
        values
    }
}

/// One setup per lead time, with the seed of the launch draws (--launch-seed, else --seed).
pub fn setups(args: &SimulateArgs) -> crate::Result<Vec<Setup>> {
    let mut out = Vec::new();
    for lead in args.common.lead_times() {
        let mut setup = args.common.setup(lead)?;
        setup.seed = args.launch_seed.unwrap_or(args.seed);
        setup.models = args.models;
        out.push(setup);
    }
    Ok(out)
}

/// The workloads `args` names, for `setup` (a scenario's requests come from --seed only).
pub fn workloads(args: &SimulateArgs, setup: &Setup) -> crate::Result<Vec<Workload>> {
    positive("--speed", args.speed)?;
    positive("--scale", args.scale)?;
    args.workload.validate()?;
    let asked = Asked {
        trace: args.trace.as_deref(),
        scenario: args.scenario,
        all_shipped: if args.all_shipped {
            Some(
                args.trace_dir
                    .as_deref()
                    .expect("clap requires --trace-dir"),
            )
        } else {
            None
        },
        seed: args.seed,
        speed: args.speed,
        scale: args.scale,
        input_tokens: args.scenario_input_tokens,
        output_tokens: args.scenario_output_tokens,
        days: args.workload.days,
        superpose: args.workload.superpose,
        rate_scale: args.workload.rate_scale,
    };
    workload::workloads(&asked, &setup.model, |path: PathBuf| {
        args.workload.for_path(
            &path,
            args.speed,
            args.scale,
            args.seed,
            args.trace_dir.as_deref(),
        )
    })
}

pub fn run(args: SimulateArgs) -> crate::Result<()> {
    if args.models == Some(0) {
        return Err(crate::sim::checks::config_error("--models", "at least 1"));
    }
    if let Some(path) = &args.rates_out {
        return write_rates(&args, path);
    }
    let mut jobs = Vec::new();
    for setup in setups(&args)? {
        for workload in workloads(&args, &setup)? {
            jobs.push((workload, setup.clone()));
        }
    }
    run_jobs(&args.common, jobs)
}

/// `--rates-out`: the workload's requests binned per minute, written as a rate CSV.
fn write_rates(args: &SimulateArgs, path: &std::path::Path) -> crate::Result<()> {
    use crate::sim::checks::config_error;
    let setup = args.common.setup(None)?;
    // One file, so one workload: clap keeps --all-shipped out, the rest name one input.
    let [workload]: [Workload; 1] = workloads(args, &setup)?
        .try_into()
        .map_err(|_| config_error("--rates-out", "writes one workload's rates"))?;
    let (requests, slot) = workload
        .requests(&setup.model)
        .map_err(|e| config_error("--trace", e.to_string()))?;
    let csv = workload::rate_series::csv_of_arrivals(requests.map(|r| r.arrival), 60.0);
    workload::requests::check(&slot).map_err(|e| config_error("--trace", e.to_string()))?;
    std::fs::write(path, csv)
        .map_err(|e| config_error("--rates-out", format!("{}: {e}", path.display())))
}

/// Runs the comparisons with the output the flags ask for.
pub fn run_jobs(common: &CommonArgs, jobs: Vec<(Workload, Setup)>) -> crate::Result<()> {
    run::run_jobs(&common.output(), jobs)
}

/// `--forecaster`: the values FORECASTER takes.
fn parse_forecaster(raw: &str) -> Result<ForecasterChoice, String> {
    ForecasterChoice::parse(raw).ok_or_else(|| format!("expected blend or auto, got {raw:?}"))
}

/// `--band-by-hour`: the values BAND_BY_HOUR takes.
fn parse_band_by_hour(raw: &str) -> Result<BandByHour, String> {
    BandByHour::parse(raw).ok_or_else(|| format!("expected off, day, week or auto, got {raw:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{PolicySpec, TargetSpec};
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
            // `prewarm` is the warm-nodes policy: its target turns the HPA floor off
            // (`prewarm-floor` keeps the Lambda's default, on).
            "hpa": {"namespace": "inference", "name": "llm", "raiseMinReplicas": false}
        }]);
        let target: Vec<TargetSpec> = serde_json::from_value(json).unwrap();
        assert_eq!(setup.prewarm_target, target[0]);
        // --queue-sizing: the target names no HPA (Erlang C sizing on the queue metrics).
        let setup = parse(&["--queue-sizing"]).common.setup(None).unwrap();
        assert_eq!(setup.prewarm_target.hpa, None);
    }

    #[test]
    fn the_ingestion_lag_is_one_value_for_the_store_and_the_policy() {
        // The default --ingestion-lag (30 s) is the Lambda's INGESTION_LAG_SECONDS default; a
        // local Prometheus (0) reaches the policy too, and the run's store lag is read from it.
        let setup = parse(&[]).common.setup(None).unwrap();
        assert_eq!(setup.prewarm_policy.ingestion_lag_s, 30.0);
        let setup = parse(&["--ingestion-lag", "0"]).common.setup(None).unwrap();
        assert_eq!(setup.prewarm_policy.ingestion_lag_s, 0.0);
        let err = parse(&["--ingestion-lag=-1"])
            .common
            .setup(None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--ingestion-lag"), "{err}");
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
    fn a_startup_profile_makes_the_lead_time_the_sum_of_its_parts() {
        // llama70b-8gpu: 90 s node boot + 540 s image and weights + 220 s model load = 850 s,
        // on p4d.24xlarge with all 8 GPUs per replica (prewarm's target is told the same).
        let setup = parse(&["--startup-profile", "llama70b-8gpu"])
            .common
            .setup(None)
            .unwrap();
        assert_eq!(setup.lead_time_s(), 850.0);
        assert_eq!(setup.prewarm_policy.lead_time_s, 850.0);
        assert_eq!(setup.karpenter.instance.name, "p4d.24xlarge");
        assert_eq!(setup.cluster_autoscaler.instance.name, "p4d.24xlarge");
        assert_eq!(setup.prewarm_target.gpus_per_replica, 8);
        // small-1gpu: 75 + 330 + 82 = 487 s.
        let setup = parse(&["--startup-profile", "small-1gpu"])
            .common
            .setup(None)
            .unwrap();
        assert_eq!(setup.lead_time_s(), 487.0);
        assert_eq!(setup.karpenter.instance.name, "g5.xlarge");
        // --lead-time 425 is half of 850: each part halves (45, 270, 110), and Cluster
        // Autoscaler's 252 s with Karpenter's launch (126).
        let setup = parse(&["--startup-profile", "llama70b-8gpu", "--lead-time", "425"])
            .common
            .setup(Some(425.0))
            .unwrap();
        assert!((setup.karpenter.node_launch_s - 45.0).abs() < 1e-9);
        assert!((setup.model.image_pull_s - 270.0).abs() < 1e-9);
        assert!((setup.model.model_load_s - 110.0).abs() < 1e-9);
        assert!((setup.cluster_autoscaler.node_launch_s - 126.0).abs() < 1e-9);
    }

    #[test]
    fn a_startup_profile_refuses_the_flags_it_sets() {
        for (flag, value) in [
            ("--node-launch", "30"),
            ("--image-pull", "60"),
            ("--model-load", "10"),
            ("--instance-type", "g5.xlarge"),
            ("--ca-instance-type", "g5.48xlarge"),
            ("--gpus-per-replica", "1"),
            ("--slots", "8"),
            ("--prefill-tokens-per-s", "4000"),
            ("--decode-tokens-per-s", "40"),
        ] {
            let argv = [
                "prewarm",
                "--scenario",
                "bursty",
                "--startup-profile",
                "small-1gpu",
                flag,
                value,
            ];
            let error = Wrapper::try_parse_from(argv).err().expect(flag).to_string();
            assert!(
                error.contains("--startup-profile") && error.contains(flag),
                "{flag}: {error}"
            );
        }
        // A flag the profile leaves alone combines with it.
        let setup = parse(&["--startup-profile", "small-1gpu", "--no-prepull"])
            .common
            .setup(None)
            .unwrap();
        assert!(!setup.model.prepull);
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
