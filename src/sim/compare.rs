//! One comparison: every selected policy on the same request stream, the oracle and ideal bounds,
//! and the search for the smallest fixed buffer that meets the SLO.

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use serde::Serialize;

use crate::core::{PolicySpec, TargetSpec};

use super::engine::{self, Headroom, Point, Replicas, Request, RunConfig, RunResult, WarmStart};
use super::history::{self, HistoryRow};
use super::model::{Model, Provisioner};
use super::oracle::{self, OracleResult};
use super::report::{self, PolicyReport};
use super::scenario::{self, Scenario};
use super::trace::{self, TraceError, TraceRecord};
use super::workload::{self, rate_series::RateSeries, servegen::ServeGen};

/// Where requests come from.
#[derive(Clone, Debug)]
pub enum Source {
    Trace(PathBuf),
    Scenario(Scenario),
    /// A metrics history (backtest): every request gets the same service time.
    History {
        rows: Vec<HistoryRow>,
        service_s: f64,
    },
    /// A rate series (a rate CSV, or a metric source's history): renewal arrivals, sampled tokens.
    Rates(Arc<RateSeries>),
    /// A ServeGen client directory: per-client renewal arrivals merged, sampled tokens.
    ServeGen(Arc<ServeGen>),
}

/// A request source with its transforms.
#[derive(Clone, Debug)]
pub struct Workload {
    pub name: String,
    pub source: Source,
    pub speed: f64,
    pub scale: f64,
    pub seed: u64,
    /// Copies of a request trace, each shifted by a seeded random offset (1: the trace as is).
    pub superpose: u32,
    /// Multiplies every rate of a rate input.
    pub rate_scale: f64,
    /// The request trace rate inputs take token lengths from.
    pub tokens_from: Option<PathBuf>,
}

type Records = Box<dyn Iterator<Item = Result<TraceRecord, TraceError>>>;
type Requests = Box<dyn Iterator<Item = Request>>;
/// Where a stream puts the read error that ended it.
type ErrorSlot = Rc<RefCell<Option<TraceError>>>;

impl Workload {
    /// A fresh stream of the workload's requests; read errors end the stream and are kept in
    /// the returned slot (checked after the run).
    fn requests(&self, model: &Model) -> Result<(Requests, ErrorSlot), TraceError> {
        let slot = Rc::new(RefCell::new(None));
        if let Source::History { rows, service_s } = &self.source {
            let speed = self.speed;
            let reqs = history::requests(rows, *service_s)
                .into_iter()
                .map(move |r| Request {
                    arrival: r.arrival / speed,
                    ..r
                });
            return Ok((Box::new(reqs), slot));
        }
        let records: Records = match &self.source {
            Source::Trace(path) if self.superpose <= 1 => Box::new(trace::open(path)?),
            Source::Scenario(s) => Box::new(s.records().map(Ok)),
            Source::History { .. } => unreachable!("handled above"),
            _ => workload::records(self)?,
        };
        let errors = slot.clone();
        let ok = records.map_while(move |r| match r {
            Ok(r) => Some(r),
            Err(e) => {
                *errors.borrow_mut() = Some(e);
                None
            }
        });
        let model = model.clone();
        let reqs =
            scenario::transform(ok, self.speed, self.scale, self.seed).map(move |r| Request {
                arrival: r.t,
                service_s: model.service_time(r.input_tokens, r.output_tokens),
            });
        Ok((Box::new(reqs), slot))
    }
}

fn check(slot: &ErrorSlot) -> Result<(), TraceError> {
    match slot.borrow_mut().take() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The policies a comparison can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyName {
    Reactive,
    ClusterAutoscaler,
    StaticPeak,
    Buffer,
    Prewarm,
    Oracle,
    Ideal,
}

impl PolicyName {
    pub const ALL: [PolicyName; 7] = [
        PolicyName::Reactive,
        PolicyName::ClusterAutoscaler,
        PolicyName::StaticPeak,
        PolicyName::Buffer,
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
    /// Karpenter (reactive, buffer, prewarm).
    pub karpenter: Provisioner,
    /// Cluster Autoscaler node groups.
    pub cluster_autoscaler: Provisioner,
    pub prewarm_policy: PolicySpec,
    pub prewarm_target: TargetSpec,
    pub slo_wait_s: f64,
    /// Largest fraction of requests delayed by missing capacity that still meets the SLO.
    pub slo_fraction: f64,
    pub policies: Vec<PolicyName>,
    /// Upper end of the buffer search; default: the ideal packing's peak replicas.
    pub buffer_max: Option<u32>,
    /// Unix time of t = 0.
    pub base_epoch: f64,
}

impl Setup {
    pub fn lead_time_s(&self) -> f64 {
        self.karpenter.node_launch_s + self.model.image_pull_s + self.model.model_load_s
    }
}

/// The result of a comparison, ready for the table, JSON and the plot.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub workload: String,
    pub lead_time_s: f64,
    pub slo_wait_s: f64,
    pub slo_fraction: f64,
    pub rows: Vec<PolicyReport>,
    /// (N, delayed fraction) of every buffer size tried.
    pub buffer_search: Vec<(u32, f64)>,
    /// Seconds of simulated time.
    pub duration_s: f64,
    #[serde(skip)]
    pub plot: PlotData,
}

/// Time series for the plot, on the step grid.
#[derive(Clone, Debug, Default)]
pub struct PlotData {
    pub step_s: f64,
    pub rate: Vec<f64>,
    pub demand_gpus: Vec<f64>,
    pub policies: Vec<(String, Vec<Point>)>,
}

/// The steady state before t = 0 and the ideal-packing bound, from one pass over the requests.
fn first_pass(
    workload: &Workload,
    setup: &Setup,
    step_s: f64,
) -> Result<(OracleResult, WarmStart), TraceError> {
    const WARM_WINDOW_S: f64 = 300.0;
    let (reqs, slot) = workload.requests(&setup.model)?;
    let mut count = 0u64;
    let mut service_sum = 0.0;
    let mut last = 0.0f64;
    let reqs = reqs.inspect(|r| {
        if r.arrival < WARM_WINDOW_S {
            count += 1;
            service_sum += r.service_s;
            last = last.max(r.arrival);
        }
    });
    let m = &setup.model;
    let oracle = oracle::run(
        reqs,
        m.slots_per_replica,
        m.gpus_per_replica,
        setup.karpenter.instance.gpus,
        step_s,
    );
    check(&slot)?;
    if oracle.requests == 0 {
        return Err(TraceError::Format {
            path: workload.name.clone(),
            message: "no requests".into(),
        });
    }
    let span = if oracle.end_s < WARM_WINDOW_S {
        last.max(step_s)
    } else {
        WARM_WINDOW_S
    };
    let rate = count as f64 / span;
    let service_s = if count > 0 {
        service_sum / count as f64
    } else {
        1.0
    };
    let running = service_sum / span;
    let warm = WarmStart {
        replicas: m
            .hpa
            .raw_desired(running.ceil() as u64, m.slots_per_replica),
        rate,
        service_s,
        running,
    };
    Ok((oracle, warm))
}

/// Runs one comparison. `progress` is called once per request simulated.
pub fn compare(
    workload: &Workload,
    setup: &Setup,
    progress: &mut dyn FnMut(),
) -> Result<Comparison, TraceError> {
    let step_s = setup.prewarm_policy.step_s;
    let (ideal, warm) = first_pass(workload, setup, step_s)?;
    let base = RunConfig {
        model: setup.model.clone(),
        provisioner: setup.karpenter.clone(),
        replicas: Replicas::Hpa,
        headroom: Headroom::None,
        warm,
        slo_wait_s: setup.slo_wait_s,
        step_s,
        base_epoch: setup.base_epoch,
    };
    let run = |cfg: &RunConfig, progress: &mut dyn FnMut()| -> Result<RunResult, TraceError> {
        let (reqs, slot) = workload.requests(&setup.model)?;
        let result = engine::run(cfg, reqs, progress);
        check(&slot)?;
        Ok(result)
    };
    // Capacity with perfect foresight: the same replica controller, but a node (with its
    // images) is there the instant a pod needs one and gone the instant it is empty. Replicas
    // still load their model. Always run: every ratio is against it.
    let mut oracle_cfg = RunConfig {
        provisioner: Provisioner {
            node_launch_s: 0.0,
            batch_s: 0.0,
            empty_after_s: 0.0,
            ..setup.karpenter.clone()
        },
        ..base.clone()
    };
    oracle_cfg.model.image_pull_s = 0.0;
    let oracle = run(&oracle_cfg, progress)?;
    let oracle_gpu_hours = oracle.gpu_seconds / 3600.0;

    let mut rows = Vec::new();
    let mut plot = PlotData {
        step_s,
        rate: ideal.rate_per_step.clone(),
        demand_gpus: ideal.demand_gpus_per_step.clone(),
        policies: Vec::new(),
    };
    let mut buffer_search = Vec::new();
    let mut duration_s = ideal.end_s;
    for &policy in &setup.policies {
        let (detail, result) = match policy {
            PolicyName::Ideal => {
                let mut row = PolicyReport::from_ideal(&ideal, setup.karpenter.usd_per_node_hour());
                row.gpu_hours_vs_oracle = row.gpu_hours / oracle_gpu_hours;
                rows.push(row);
                continue;
            }
            PolicyName::Oracle => ("nodes exactly when needed".to_string(), oracle.clone()),
            PolicyName::Reactive => ("Karpenter alone".to_string(), run(&base, progress)?),
            PolicyName::ClusterAutoscaler => {
                let cfg = RunConfig {
                    provisioner: setup.cluster_autoscaler.clone(),
                    ..base.clone()
                };
                (
                    format!(
                        "{}, {:.0}s",
                        cfg.provisioner.instance.name, cfg.provisioner.node_launch_s
                    ),
                    run(&cfg, progress)?,
                )
            }
            PolicyName::StaticPeak => {
                let peak = ideal.peak_replicas.max(1);
                let cfg = RunConfig {
                    replicas: Replicas::Static(peak),
                    ..base.clone()
                };
                (format!("{peak} replicas"), run(&cfg, progress)?)
            }
            PolicyName::Buffer => {
                let (n, result, tried) =
                    search_buffer(&base, setup, ideal.peak_replicas, &oracle, &mut |cfg| {
                        run(cfg, progress)
                    })?;
                buffer_search = tried;
                let detail = if result.0 {
                    format!("N={n} (smallest meeting SLO)")
                } else {
                    format!("N={n} (none tried met SLO)")
                };
                (detail, result.1)
            }
            PolicyName::Prewarm => {
                let cfg = RunConfig {
                    headroom: Headroom::Prewarm {
                        policy: setup.prewarm_policy.clone(),
                        target: Box::new(setup.prewarm_target.clone()),
                    },
                    ..base.clone()
                };
                let r = run(&cfg, progress)?;
                (format!("{} decisions", r.decisions), r)
            }
        };
        duration_s = duration_s.max(result.end_s);
        plot.policies
            .push((policy.label().to_string(), result.series.clone()));
        rows.push(PolicyReport::from_run(
            policy.label(),
            detail,
            result,
            &oracle,
            setup.slo_wait_s,
            setup.slo_fraction,
        ));
    }
    Ok(Comparison {
        workload: workload.name.clone(),
        lead_time_s: setup.lead_time_s(),
        slo_wait_s: setup.slo_wait_s,
        slo_fraction: setup.slo_fraction,
        rows,
        buffer_search,
        duration_s,
        plot,
    })
}

type BufferOutcome = (u32, (bool, RunResult), Vec<(u32, f64)>);

/// The smallest N of spare balloon replicas with a delayed fraction within the SLO, by
/// bisection (more spare never delays more requests, up to simulation noise). The upper end
/// starts at the ideal packing's peak replicas and doubles (up to 4 times) if even that fails.
fn search_buffer(
    base: &RunConfig,
    setup: &Setup,
    peak: u32,
    oracle: &RunResult,
    run: &mut dyn FnMut(&RunConfig) -> Result<RunResult, TraceError>,
) -> Result<BufferOutcome, TraceError> {
    let mut tried = Vec::new();
    let mut attempt =
        |n: u32, tried: &mut Vec<(u32, f64)>| -> Result<(bool, RunResult), TraceError> {
            let cfg = RunConfig {
                headroom: Headroom::Fixed(n),
                ..base.clone()
            };
            let r = run(&cfg)?;
            let fraction = report::delayed_by_capacity(&r.waits, &oracle.waits, setup.slo_wait_s);
            tried.push((n, fraction));
            Ok((fraction <= setup.slo_fraction, r))
        };
    let mut hi = setup.buffer_max.unwrap_or(peak).max(1);
    let mut best = attempt(hi, &mut tried)?;
    let mut doublings = 0;
    while !best.0 && doublings < 4 && setup.buffer_max.is_none() {
        hi *= 2;
        doublings += 1;
        best = attempt(hi, &mut tried)?;
    }
    if !best.0 {
        return Ok((hi, best, tried));
    }
    // Invariant: hi meets the SLO; lo - 1 does not (or lo = 0).
    let mut lo = 0;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let outcome = attempt(mid, &mut tried)?;
        if outcome.0 {
            hi = mid;
            best = outcome;
        } else {
            lo = mid + 1;
        }
    }
    Ok((hi, best, tried))
}
