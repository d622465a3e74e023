//! `prewarm simulate --models K`: the workload's clients split into K models (deployments) that
//! share one NodePool: the split of the clients, the policies that can use the pool, and a job
//! of compare.rs run on every model. Changes when the split of the clients, the policies of a
//! pool or their knobs do.
//!
//! The clients go to the models by their request volume on the training days (the largest first,
//! each to the model with the fewest requests so far: every model gets a share of the load, and
//! the same workload always splits the same way). Each model is one deployment of the setup's
//! model with its own HPA; every policy runs on the same requests and launch draws, its knob
//! chosen on the training days (as one model's, on the pool's days) and reported on the scored
//! days:
//! - `reactive`: the HPAs and Karpenter alone;
//! - `static-peak`: a fixed fleet for the pool, the static grid's replicas on the pool's training
//!   peak (whole nodes), split between the models by their own training peaks;
//! - `hpa-target`: every model's HPA at a lower target utilisation;
//! - `buffer`: N warm balloons for the pool (N from the pool's training peak, as the buffer's);
//! - `prewarm-floor`: prewarm's HPA floor per model, each on its own forecast;
//! - `prewarm-split`: the same decisions, the pool's spare split by tier_split between the
//!   floors (central forecasts) and warm nodes (the pooled band).

use std::sync::Arc;

use serde::Serialize;

use super::engine::{self, Headroom, Request, RunConfig, RunResult, WarmStart};
use super::jobs::{self, Job};
use super::parallel;
use super::setup::{PolicyName, Setup};
use super::stats::{DayStats, DAY_S};
use super::trace::TraceError;
use super::workload::{requests::check, Workload};

/// The model each client goes to: clients by `load` (requests on the training days), the
/// largest first (the lower index on a tie), each to the model with the least load so far
/// (the lower index on a tie).
pub fn assign_clients(load: &[u64], models: usize) -> Vec<usize> {
    let models = models.max(1);
    let mut order: Vec<usize> = (0..load.len()).collect();
    order.sort_by_key(|&c| (std::cmp::Reverse(load[c]), c));
    let mut total = vec![0u64; models];
    let mut model_of = vec![0; load.len()];
    for c in order {
        let m = (0..models)
            .min_by_key(|&m| (total[m], m))
            .expect("one model");
        model_of[c] = m;
        total[m] += load[c];
    }
    model_of
}

/// The policies of `asked` a pool can run, Karpenter alone first (prewarm-floor brings
/// prewarm-split with it).
pub(super) fn policies(asked: &[PolicyName]) -> Vec<PolicyName> {
    use PolicyName::*;
    let mut out = vec![Reactive];
    for p in [StaticPeak, HpaTarget, Buffer, PrewarmFloor, PrewarmSplit] {
        if asked.contains(&p) || (p == PrewarmSplit && asked.contains(&PrewarmFloor)) {
            out.push(p);
        }
    }
    out
}

/// How prewarm-split divided a pool's spare: the share of its decisions that chose the split
/// tier, and the mean warm nodes they asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct SplitFigures {
    pub share: f64,
    pub mean_warm_nodes: f64,
}

/// What the first pass over the requests learns.
pub(super) struct FirstPass {
    requests: Arc<Vec<Request>>,
    model_of: Vec<usize>,
    /// Requests of each model on the training days.
    pub model_load: Vec<u64>,
    warm: Vec<WarmStart>,
    /// Each model's ideal-packing peak replicas on the training days.
    pub peaks: Vec<u32>,
}

/// The split of the clients, from the `kept` requests of compare's first pass (None: too many
/// to keep there, read again here: a pool's runs share one copy).
pub(super) fn first_pass(
    workload: &Workload,
    setup: &Setup,
    models: usize,
    kept: Option<Arc<Vec<Request>>>,
) -> Result<FirstPass, TraceError> {
    let requests = match kept {
        Some(kept) => kept,
        None => {
            let (reqs, slot) = workload.requests(&setup.model)?;
            let requests = Arc::new(reqs.collect::<Vec<_>>());
            check(&slot)?;
            requests
        }
    };
    let until_s = setup.train_days.map_or(f64::INFINITY, |d| d as f64 * DAY_S);
    let clients = requests
        .iter()
        .map(|r| r.client as usize + 1)
        .max()
        .unwrap_or(0);
    let mut load = vec![0u64; clients];
    for r in requests.iter().filter(|r| r.arrival < until_s) {
        load[r.client as usize] += 1;
    }
    if load.len() < models {
        return Err(TraceError::Format {
            path: workload.name.clone(),
            message: format!(
                "--models {models} needs at least as many clients; this input has {} (a ServeGen directory knows its clients)",
                load.len()
            ),
        });
    }
    let model_of = assign_clients(&load, models);
    let mut model_load = vec![0u64; models];
    for (c, &l) in load.iter().enumerate() {
        model_load[model_of[c]] += l;
    }
    let mut warm = Vec::with_capacity(models);
    let mut peaks = Vec::with_capacity(models);
    for model in 0..models {
        let mine = requests
            .iter()
            .copied()
            .filter(|r| model_of[r.client as usize] == model);
        let (ideal, w) = jobs::warm_and_ideal(mine, setup, 0.0);
        warm.push(w);
        peaks.push(ideal.training_peak(setup.train_days));
    }
    Ok(FirstPass {
        requests,
        model_of,
        model_load,
        warm,
        peaks,
    })
}

/// The deployments' configurations: compare's job of each model, a static fleet split between
/// them.
fn configs(job: Job, setup: &Setup, pass: &FirstPass) -> Vec<RunConfig> {
    let fleets = split_fleet(job.policy_knob().1 as u32, &pass.peaks);
    (0..pass.warm.len())
        .map(|m| {
            let mut one = job;
            if let Job::Point {
                policy: PolicyName::StaticPeak,
                knob,
                ..
            } = &mut one
            {
                *knob = fleets[m] as f64;
            }
            let base = jobs::base_config(setup, pass.warm[m], None);
            let mut cfg = jobs::job_config(one, &base, setup, &|_| Vec::new());
            match &mut cfg.headroom {
                // The pool's balloons, on the first deployment.
                Headroom::Fixed(_) if m > 0 => cfg.headroom = Headroom::None,
                Headroom::PrewarmFloor { target, .. } => {
                    target.name = format!("model-{m}");
                    // The tick refuses a consolidation freeze on a NodePool several targets share.
                    target.freeze_consolidation = false;
                }
                _ => {}
            }
            cfg
        })
        .collect()
}

/// Runs `job` on every model of the pool: their figures added up as one run's (its days the
/// pool's), and prewarm-split's split of the pool's spare.
pub(super) fn run(
    job: Job,
    setup: &Setup,
    pass: &FirstPass,
    progress: &(dyn Fn(u64) + Sync),
) -> (RunResult, Option<SplitFigures>) {
    // prewarm-split: the same decisions as prewarm-floor's, the pool's spare split.
    let split = job.policy_knob().0 == PolicyName::PrewarmSplit;
    let r = engine::run_pool(
        &configs(job, setup, pass),
        split,
        &pass.model_of,
        pass.requests.iter().copied(),
        parallel::batched(progress),
    );
    let ticks = r.split_ticks.max(1) as f64;
    let figures = split.then(|| SplitFigures {
        share: r.split_chosen as f64 / ticks,
        mean_warm_nodes: r.warm_nodes_sum as f64 / ticks,
    });
    let days = r.models.iter().map(|m| m.days.len()).max().unwrap_or(0);
    let mut pool = RunResult {
        days: vec![DayStats::default(); days],
        ..RunResult::default()
    };
    // The pool has no client classes (`configs`): those figures stay empty.
    for m in &r.models {
        for (d, s) in pool.days.iter_mut().zip(&m.days) {
            d.add(s);
        }
        let (s, t) = (&mut pool.scored, &m.scored);
        pool.requests += m.requests;
        pool.end_s = pool.end_s.max(m.end_s);
        s.requests += t.requests;
        s.delayed += t.delayed;
        s.waits.merge(&t.waits);
        s.ttft.merge(&t.ttft);
        s.gpu.total += t.gpu.total;
        s.gpu.busy += t.gpu.busy;
        s.waterfall.add(&t.waterfall);
        s.cold_starts += t.cold_starts;
        s.replica_cold_starts += t.replica_cold_starts;
        s.nodes_launched += t.nodes_launched;
    }
    (pool, figures)
}

/// A static fleet of `total` replicas split between the models in proportion to their training
/// `peaks`: each its share rounded down, the replicas left over one each to the largest
/// fractions (the lower index on a tie). The pool's nodes hold any model's replicas, so the
/// total, at whole nodes, is what is paid for.
pub fn split_fleet(total: u32, peaks: &[u32]) -> Vec<u32> {
    let sum = peaks.iter().map(|&p| u64::from(p)).sum::<u64>().max(1);
    let exact: Vec<u64> = peaks
        .iter()
        .map(|&p| u64::from(total) * u64::from(p))
        .collect();
    let mut fleets: Vec<u32> = exact.iter().map(|&e| (e / sum) as u32).collect();
    let mut order: Vec<usize> = (0..peaks.len()).collect();
    order.sort_by_key(|&m| (std::cmp::Reverse(exact[m] % sum), m));
    let left = total.saturating_sub(fleets.iter().sum());
    for &m in order.iter().cycle().take(left as usize) {
        fleets[m] += 1;
    }
    fleets
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_go_to_the_least_loaded_model_the_largest_first() {
        // Loads 5, 9, 1, 7, 3, 0 into 2 models, the largest first: 9 -> m0 (tie: lower index),
        // 7 -> m1, 5 -> m1 (7 < 9), 3 -> m0 (9 < 12), 1 -> m0 (12 = 12: lower index),
        // 0 -> m1 (12 < 13).
        assert_eq!(
            assign_clients(&[5, 9, 1, 7, 3, 0], 2),
            vec![1, 0, 0, 1, 0, 1]
        );
        // One model: everything on it; more models than clients: one client each.
        assert_eq!(assign_clients(&[4, 2], 1), vec![0, 0]);
        assert_eq!(assign_clients(&[4, 2], 3), vec![0, 1]);
        assert_eq!(assign_clients(&[], 3), Vec::<usize>::new());
    }

    #[test]
    fn a_static_fleet_is_split_by_the_models_peaks_and_keeps_its_whole_nodes() {
        // (pool replicas, each model's training peak, each model's fleet), worked by hand:
        let rows: [(u32, &[u32], &[u32]); 5] = [
            // 12 x 8/12 = 8, 12 x 4/12 = 4: exact.
            (12, &[8, 4], &[8, 4]),
            // 8 x 5/7 = 5.71, 8 x 2/7 = 2.29: 5 + 2 = 7, the one left to 0.71 -> 6, 2.
            (8, &[5, 2], &[6, 2]),
            // 4 x 1/3 each = 1.33: 1 + 1 + 1, the one left to the tie's lower index.
            (4, &[3, 3, 3], &[2, 1, 1]),
            // 4 x 9/10 = 3.6, 4 x 1/10 = 0.4: 3 + 0, the one left to 0.6 -> 4, 0.
            (4, &[9, 1], &[4, 0]),
            // No training peak at all: nothing to split by, the fleet still lands somewhere.
            (4, &[0, 0], &[2, 2]),
        ];
        for (total, peaks, want) in rows {
            assert_eq!(split_fleet(total, peaks), want, "{total} over {peaks:?}");
            assert_eq!(split_fleet(total, peaks).iter().sum::<u32>(), total);
        }
    }
}
