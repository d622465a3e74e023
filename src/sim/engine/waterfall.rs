//! Where a run's GPU-seconds go (the waterfall, docs/simulator.md): what every GPU of every
//! live node is doing, integrated between events, so the parts add up to the nodes' GPU-seconds
//! by construction. Changes when a cause is added or attributed differently.
//!
//! Between two events only requests start and end (arrivals, completions), and only on serving
//! replicas, so the rates are taken once after every event that can move a pod or a node, and
//! the serving slots are read live (`Sim::active_total`). A node turning Ready has no event: a
//! booting node's GPUs are node boot until its Ready time, then what is bound to it.

use super::pods::Phase;
use super::{Cluster, Sim};

/// One deployment's replicas now.
#[derive(Clone, Copy, Debug, Default)]
struct Replicas {
    /// Serving and not draining.
    serving: u32,
    /// Draining (removed by the HPA, finishing their requests).
    draining: u32,
    /// Requests in flight on the draining ones.
    active_draining: u64,
    /// GPUs of replicas pulling or loading on Ready nodes.
    loading: f64,
}

/// A node still booting: when it is Ready, its GPUs, and the GPUs of replicas and of balloons
/// bound to it.
#[derive(Clone, Copy, Debug)]
struct Booting {
    ready_at: f64,
    gpus: f64,
    replicas: f64,
    balloons: f64,
}

/// What the GPUs are doing between two events.
#[derive(Clone, Debug, Default)]
pub(super) struct Rates {
    replicas: Vec<Replicas>,
    balloons: f64,
    empty: f64,
    booting: Vec<Booting>,
}

impl Rates {
    /// The rates of `cluster` and the deployments `sims` at `now`.
    pub(super) fn of(cluster: &Cluster, sims: &[Sim<'_>], now: f64) -> Rates {
        let mut rates = Rates::default();
        // (node, its entry in `booting`): few nodes boot at once, so a list is searched.
        let mut booting_index: Vec<(usize, usize)> = Vec::new();
        let gpr = sims.first().map_or(1, |s| s.gpr());
        for &i in &cluster.live_nodes {
            let n = &cluster.nodes[i];
            if !n.alive {
                continue;
            }
            let balloons = f64::from(n.balloons * gpr);
            if n.ready_at > now {
                booting_index.push((i, rates.booting.len()));
                rates.booting.push(Booting {
                    ready_at: n.ready_at,
                    gpus: f64::from(n.gpus),
                    replicas: 0.0,
                    balloons,
                });
            } else {
                rates.balloons += balloons;
                rates.empty += f64::from(n.gpus - n.used);
            }
        }
        for s in sims {
            let mut r = Replicas::default();
            let gpus = f64::from(s.gpr());
            for &p in &s.live_pods {
                let pod = &s.pods[p];
                match pod.phase {
                    Phase::Serving { .. } if pod.draining => {
                        r.draining += 1;
                        r.active_draining += u64::from(pod.active);
                    }
                    Phase::Serving { .. } => r.serving += 1,
                    Phase::Starting { node, .. } => {
                        match booting_index.iter().find(|&&(n, _)| n == node) {
                            Some(&(_, b)) => rates.booting[b].replicas += gpus,
                            None => r.loading += gpus,
                        }
                    }
                    Phase::Pending | Phase::Gone => {}
                }
            }
            rates.replicas.push(r);
        }
        rates
    }

    /// Adds the GPU-seconds of [a, b) to each deployment's waterfall (the nodes' parts to the
    /// first's), from its scoring start on.
    pub(super) fn accrue(&self, a: f64, b: f64, sims: &mut [Sim<'_>]) {
        for (s, r) in sims.iter_mut().zip(&self.replicas) {
            let dt = b - a.max(s.cfg.score_from_s);
            if dt <= 0.0 {
                continue;
            }
            let gpr = f64::from(s.gpr());
            let per_slot = gpr / f64::from(s.slots());
            let active = s.active_total as f64;
            let active_draining = r.active_draining as f64;
            // Serving replicas' idle slots: those above what the HPA wants are excess first
            // (a replica is a replica: which one idles is not told apart).
            let idle = f64::from(r.serving) * gpr - (active - active_draining) * per_slot;
            let excess = (f64::from(r.serving.saturating_sub(s.hpa_wants)) * gpr).min(idle);
            let w = &mut s.result.scored.waterfall;
            w.serving += active * per_slot * dt;
            w.target_headroom += (idle - excess) * dt;
            w.warm_excess += excess * dt;
            w.draining += (f64::from(r.draining) * gpr - active_draining * per_slot) * dt;
            w.loading += r.loading * dt;
        }
        let Some(first) = sims.first_mut() else {
            return;
        };
        let a = a.max(first.cfg.score_from_s);
        if b <= a {
            return;
        }
        let w = &mut first.result.scored.waterfall;
        w.balloons += self.balloons * (b - a);
        w.empty += self.empty * (b - a);
        for n in &self.booting {
            w.node_boot += n.gpus * (b.min(n.ready_at) - a).max(0.0);
            let ready = (b - a.max(n.ready_at)).max(0.0);
            w.loading += n.replicas * ready;
            w.balloons += n.balloons * ready;
            w.empty += (n.gpus - n.replicas - n.balloons) * ready;
        }
    }
}
