//! One comparison: every selected policy on the same request stream, each policy with a knob
//! swept over its grid (knob_grid.rs) and reported at the point chosen on the training days, the
//! clairvoyant node hints, and the ideal-packing bound; of one model, or of several on one
//! NodePool (`--models`, pool_bench.rs runs each job on the pool). Runs are independent and use
//! every core.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::{Arc, OnceLock};

use serde::Serialize;

use super::classes::{Classifier, ClientClasses};
use super::engine::{self, Point, Request, RunConfig, StreamSteps, WarmStart, World};
use super::ideal::IdealResult;
use super::jobs::{self, base_config, job_config, warm_and_ideal, Job};
use super::knob_grid;
use super::parallel;
use super::pool_bench::{self, SplitFigures};
use super::report::{ClassReport, PolicyReport, RunContext, TrainingTotals};
use super::setup::{PolicyName, Setup};
use super::stats::DAY_S;
use super::trace::TraceError;
use super::workload::{requests::check, Workload};

/// One point of a frontier: a knob value and what it cost and delayed on the scored days.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FrontierPoint {
    pub knob: f64,
    /// prewarm: how spare is released after a burst (swept with the knob; knob_grid.rs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub release: Option<knob_grid::Release>,
    /// scheduled-floor: the table's slots, hours of the day or of the week (part of its knob).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slots: Option<knob_grid::Slots>,
    pub gpu_hours: f64,
    /// Those GPU-hours by cause: what each point holds past need (a slow release's warm excess,
    /// balloons) is read here for every point, not only the chosen one.
    pub waterfall: super::stats::Waterfall,
    pub delayed_fraction: f64,
    /// The longest wait on the scored days (0: no request waited; the lower bound's level).
    pub max_wait_s: f64,
    /// Node cold starts on the scored days.
    pub cold_starts: u64,
    /// Replica cold starts (requests queued while it loaded) on the scored days.
    pub replica_cold_starts: u64,
    /// The same point on the training days (None without `--train-days`): what scripts/goals.py
    /// chooses its G3 point on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub training: Option<TrainingTotals>,
    /// The scored figures per client class (empty: the workload has one class).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassReport>,
    /// A pool's prewarm-split (`--models`, pool_bench.rs): how it split the pool's spare.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split: Option<SplitFigures>,
}

/// The result of a comparison, ready for the table, JSON and the plots.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub workload: String,
    pub lead_time_s: f64,
    pub slo_wait_s: f64,
    pub slo_fraction: f64,
    /// Days the knobs were chosen on (None: chosen on the scored days themselves, in hindsight).
    pub train_days: Option<u32>,
    /// Scores count requests arriving from here (burn-in or end of training), seconds.
    pub scored_from_s: f64,
    pub rows: Vec<PolicyReport>,
    /// Per policy with a knob: every grid point on the scored days.
    pub frontiers: BTreeMap<String, Vec<FrontierPoint>>,
    /// Per policy with a knob: what the knob sets.
    pub knobs: BTreeMap<String, String>,
    /// The ideal packing's peak replicas on the training days (the grids' scale).
    pub training_peak_replicas: u32,
    /// The clients and their classes, for inputs that know their clients (the rows then report
    /// per class too).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub classes: Option<ClientClasses>,
    /// Seconds of simulated time.
    pub duration_s: f64,
    /// The world the runs lived in; left out for the exact world.
    #[serde(skip_serializing_if = "World::is_exact")]
    pub world: World,
    /// `--models`: the pool's models (pool_bench.rs); None: one model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<PoolReport>,
    #[serde(skip)]
    pub plot: PlotData,
}

/// What a pool's comparison adds (its `frontiers` hold every policy's points, Karpenter alone's
/// too).
#[derive(Clone, Debug, Serialize)]
pub struct PoolReport {
    /// Each model's requests on the training days.
    pub model_load: Vec<u64>,
    /// Per policy, Karpenter alone first: the index of the point chosen on the training days.
    pub chosen: Vec<(String, usize)>,
}

/// Time series for the plot, on the step grid.
#[derive(Clone, Debug, Default)]
pub struct PlotData {
    pub step_s: f64,
    pub rate: Vec<f64>,
    pub demand_gpus: Vec<f64>,
    pub policies: Vec<(String, Vec<Point>)>,
}

/// Workloads up to this many requests are generated once and kept in memory (32 bytes each)
/// for all runs; longer ones are generated again by every run.
const KEEP_MAX_REQUESTS: usize = 20_000_000;

/// What the first pass learns.
struct FirstPass {
    ideal: IdealResult,
    warm: WarmStart,
    /// The requests themselves, when there are at most `KEEP_MAX_REQUESTS`.
    kept: Option<Arc<Vec<Request>>>,
    /// The clients classified on the training days (inputs that know their clients).
    classes: Option<ClientClasses>,
    /// The residual's steps of the request stream, shared by every run.
    stream: Arc<StreamSteps>,
}

/// The steady state before t = 0 and the ideal-packing bound, from one pass over the requests.
fn first_pass(workload: &Workload, setup: &Setup, from_s: f64) -> Result<FirstPass, TraceError> {
    let (reqs, slot) = workload.requests(&setup.model)?;
    // Clients are classified on the training days only (every day, in hindsight, without them).
    let until_s = setup.train_days.map_or(f64::INFINITY, |d| d as f64 * DAY_S);
    let mut classifier = workload.clients().map(|n| Classifier::new(n, until_s));
    let mut kept = Some(Vec::new());
    let mut stream = StreamSteps::new(setup.prewarm_policy.step_s);
    let reqs = reqs.inspect(|r| {
        stream.observe(r.arrival, r.service_s);
        if let Some(c) = &mut classifier {
            c.observe(r.client, r.arrival);
        }
        if let Some(v) = &mut kept {
            if v.len() < KEEP_MAX_REQUESTS {
                v.push(*r);
            } else {
                kept = None;
            }
        }
    });
    let (packing, warm) = warm_and_ideal(reqs, setup, from_s);
    check(&slot)?;
    if packing.requests == 0 {
        return Err(TraceError::Format {
            path: workload.name.clone(),
            message: "no requests".into(),
        });
    }
    let classes = classifier.map(|c| ClientClasses {
        thresholds: setup.classes,
        on: match setup.train_days {
            Some(d) => format!("days 0-{}", d - 1),
            None => "every day, in hindsight".to_string(),
        },
        clients: c.finish(&setup.classes),
    });
    Ok(FirstPass {
        ideal: packing,
        warm,
        kept: kept.map(Arc::new),
        classes,
        stream: Arc::new(stream),
    })
}

/// Runs one comparison. `progress` is called with batches of simulated requests.
pub fn compare(
    workload: &Workload,
    setup: &Setup,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Comparison, TraceError> {
    let step_s = setup.prewarm_policy.step_s;
    let score_from_s = knob_grid::score_from(setup.burn_in_s, setup.train_days);
    let FirstPass {
        ideal,
        warm,
        kept,
        classes,
        stream,
    } = first_pass(workload, setup, score_from_s)?;
    let days = ideal.end_s / DAY_S;
    if let Some(d) = setup.train_days {
        if days < d as f64 + 1.0 {
            return Err(TraceError::Format {
                path: workload.name.clone(),
                message: format!(
                    "--train-days {d} needs at least {} days of requests; this one lasts {days:.2}",
                    d + 1
                ),
            });
        }
    }
    if score_from_s >= ideal.end_s {
        return Err(TraceError::Format {
            path: workload.name.clone(),
            message: format!(
                "the burn-in ({:.0} s) covers the whole workload ({:.0} s): nothing to score (give a shorter --burn-in, e.g. 900 for a 1-hour trace)",
                setup.burn_in_s, ideal.end_s
            ),
        });
    }
    // `--models`: the clients split into models on one NodePool, whose training peaks add up
    // to the pool's (pool_bench.rs).
    let pool = setup
        .models
        .map(|models| pool_bench::first_pass(workload, setup, models, kept.clone()))
        .transpose()?;
    let peak = pool
        .as_ref()
        .map_or(ideal.training_peak(setup.train_days), |p| {
            p.peaks.iter().sum()
        });
    let fit_days = knob_grid::floor_fit_days(setup.train_days);
    let floor_peaks =
        |slots| knob_grid::scheduled_peaks(&ideal.peak_replicas_by_hour, fit_days, slots);
    let classes_of = classes.as_ref().map(|c| Arc::new(c.of_client()));
    let base = RunConfig {
        stream_steps: Some(stream),
        ..base_config(setup, warm, classes_of)
    };

    let policies = match &pool {
        Some(_) => pool_bench::policies(&setup.policies),
        None => setup.policies.clone(),
    };
    let variants_of = |policy| {
        let mut variants = knob_grid::variants(policy, setup.train_days, ideal.end_s);
        // A pool runs prewarm's slow release only.
        if pool.is_some() {
            variants.truncate(1);
        }
        variants
    };
    let jobs = jobs::list(&policies, setup, peak, &variants_of);
    let demand: OnceLock<Option<Arc<Vec<f64>>>> = OnceLock::new();
    let results = parallel::map(&jobs, setup.threads, |&job| {
        if let Some(pool) = &pool {
            return Ok(pool_bench::run(job, setup, pool, progress));
        }
        let mut cfg = job_config(job, &base, setup, &floor_peaks);
        if let Job::NodeHints = job {
            let Some(times) = parallel::wait_for(&demand) else {
                return Err(TraceError::Format {
                    path: workload.name.clone(),
                    message: "the reactive pass failed".into(),
                });
            };
            cfg.prelaunch = Some(times);
        }
        let (reqs, slot): (Box<dyn Iterator<Item = Request>>, _) = match &kept {
            Some(v) => (Box::new(v.iter().copied()), Rc::new(RefCell::new(None))),
            None => match workload.requests(&setup.model) {
                Ok(v) => v,
                Err(e) => {
                    let _ = demand.set(None);
                    return Err(e);
                }
            },
        };
        let result = engine::run(&cfg, reqs, parallel::batched(progress));
        let checked = check(&slot);
        if let Job::Reactive = job {
            let _ = demand.set(
                checked
                    .is_ok()
                    .then(|| Arc::new(result.node_demand_times.clone())),
            );
        }
        checked.map(|_| (result, None))
    });
    let mut runs = Vec::with_capacity(jobs.len());
    for r in results {
        runs.push(r?);
    }
    let ctx = RunContext {
        slo_wait_s: setup.slo_wait_s,
        slo_fraction: setup.slo_fraction,
        score_from_s,
        train_days: setup.train_days,
        bound_gpu_hours: ideal.lower_bound_gpu_seconds / 3600.0,
        slo_bound_gpu_hours: ideal.slo_bound_gpu_seconds / 3600.0,
        usd_per_gpu_hour: setup.usd_per_gpu_hour(),
        scored_s: (ideal.end_s - score_from_s).max(0.0),
        lead_time_s: setup.lead_time_s(),
    };
    let tuned = match setup.train_days {
        Some(d) => format!("chosen on days 0-{}", d - 1),
        None => "tuned in hindsight on the scored days".to_string(),
    };

    let mut rows = Vec::new();
    let mut frontiers = BTreeMap::new();
    let mut knob_names = BTreeMap::new();
    let mut chosen_points = Vec::new();
    let mut plot = PlotData {
        step_s,
        rate: ideal.rate_per_step.clone(),
        demand_gpus: ideal.demand_gpus_per_step.clone(),
        policies: Vec::new(),
    };
    let mut duration_s = ideal.end_s;
    for &policy in &policies {
        match policy {
            PolicyName::Ideal => rows.push(PolicyReport::from_ideal(&ideal, &ctx)),
            PolicyName::LowerBound => rows.push(PolicyReport::from_lower_bound(&ideal, &ctx)),
            PolicyName::SloBound => rows.push(PolicyReport::from_slo_bound(&ideal, &ctx)),
            _ => {}
        }
        let of: Vec<usize> = (0..jobs.len())
            .filter(|&i| jobs[i].policy_knob().0 == policy)
            .collect();
        if of.is_empty() {
            continue;
        }
        let days: Vec<&[_]> = of.iter().map(|&i| runs[i].0.days.as_slice()).collect();
        let chosen = knob_grid::chosen(policy, &days, setup);
        let swept = variants_of(policy).len() > 1;
        let knob_name = knob_grid::knob_name(policy);
        // A pool reports every policy as points, Karpenter alone's too.
        if knob_name.is_some() || pool.is_some() {
            let points = of.iter().map(|&i| {
                let (run, split) = &runs[i];
                let row = PolicyReport::from_run("", String::new(), run, &ctx);
                let (knob, variant) = match jobs[i] {
                    Job::Point { knob, variant, .. } => (knob, Some(variant)),
                    _ => (0.0, None),
                };
                FrontierPoint {
                    knob,
                    release: match variant {
                        Some(knob_grid::Variant::Release(r)) if swept => Some(r),
                        _ => None,
                    },
                    slots: match variant {
                        Some(knob_grid::Variant::Slots(s)) => Some(s),
                        _ => None,
                    },
                    gpu_hours: row.gpu_hours,
                    waterfall: row.waterfall,
                    delayed_fraction: row.delayed_fraction,
                    max_wait_s: row.max_wait_s,
                    cold_starts: row.cold_starts,
                    replica_cold_starts: row.replica_cold_starts,
                    // A pool's points have their training figures without training days too.
                    training: row.training.or_else(|| {
                        pool.is_some()
                            .then(|| TrainingTotals::over(&run.days, None))
                    }),
                    classes: row.classes,
                    split: *split,
                }
            });
            frontiers.insert(policy.label().to_string(), points.collect());
        }
        chosen_points.push((policy.label().to_string(), chosen));
        let detail = match policy {
            PolicyName::NodeHints => "nodes one lead time before the HPA needs them".to_string(),
            PolicyName::Reactive => "Karpenter alone".to_string(),
            PolicyName::ClusterAutoscaler => format!(
                "{}, {:.0}s",
                setup.cluster_autoscaler.instance.name, setup.cluster_autoscaler.node_launch_s
            ),
            _ => {
                let name = knob_name.expect("policy with a knob");
                let Job::Point { knob, variant, .. } = jobs[of[chosen]] else {
                    unreachable!("a policy with a knob runs points")
                };
                knob_names.insert(policy.label().to_string(), name.to_string());
                let variant = match variant {
                    knob_grid::Variant::Release(r) if swept => format!(", release {}", r.label()),
                    knob_grid::Variant::Slots(s) => format!(", {}", s.label()),
                    _ => String::new(),
                };
                let tuned = match (policy, setup.train_days) {
                    (PolicyName::ScheduledFloor, Some(d)) if d >= 2 => {
                        format!("fitted on the days before day {}, chosen on it", d - 1)
                    }
                    _ => tuned.clone(),
                };
                format!("{name}={knob}{variant} ({tuned})")
            }
        };
        let run = &runs[of[chosen]].0;
        duration_s = duration_s.max(run.end_s);
        plot.policies
            .push((policy.label().to_string(), thin(&run.series, 4000)));
        rows.push(PolicyReport::from_run(policy.label(), detail, run, &ctx));
    }
    Ok(Comparison {
        workload: workload.name.clone(),
        lead_time_s: setup.lead_time_s(),
        slo_wait_s: setup.slo_wait_s,
        slo_fraction: setup.slo_fraction,
        train_days: setup.train_days,
        scored_from_s: score_from_s,
        rows,
        frontiers,
        knobs: knob_names,
        training_peak_replicas: peak,
        classes,
        duration_s,
        world: setup.world,
        pool: pool.map(|p| PoolReport {
            model_load: p.model_load,
            chosen: chosen_points,
        }),
        plot,
    })
}

/// At most about `max` points of a series (every k-th), so long runs plot quickly.
fn thin(series: &[Point], max: usize) -> Vec<Point> {
    let k = series.len().div_ceil(max).max(1);
    series.iter().step_by(k).copied().collect()
}
