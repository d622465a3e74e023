//! The controllers: the HPA-like replica controller and the headroom controller (balloons).

use crate::core::{decide, Plan, PolicySpec, TargetSpec};

use super::events::Kind;
use super::pods::Phase;
use super::{Headroom, Sim};

impl Sim<'_> {
    pub(super) fn on_hpa(&mut self) {
        let hpa = &self.cfg.model.hpa;
        let in_system = self.queue.len() as u64 + self.active_total;
        let raw = hpa.raw_desired(in_system, self.slots());
        let window = hpa.scale_down_window_s;
        self.hpa_window.push_back((self.now, raw));
        while self
            .hpa_window
            .front()
            .is_some_and(|&(t, _)| t <= self.now - window)
        {
            self.hpa_window.pop_front();
        }
        let current = self.replica_count();
        if raw > current {
            let by_percent = (current as f64 * hpa.scale_up_percent / 100.0).ceil() as u32;
            let limit = hpa.scale_up_pods.max(by_percent);
            let target = raw.min(current + limit);
            for _ in current..target {
                self.new_pod();
            }
            self.schedule();
        } else {
            let stabilized = self.hpa_window.iter().map(|&(_, d)| d).max().unwrap_or(raw);
            if stabilized < current {
                self.scale_down(current - stabilized);
            }
        }
        self.compact_live_pods();
        let next = self.now + hpa.sync_s;
        self.push(next, Kind::Hpa);
    }

    /// Removes `count` replicas: pending ones first, then starting, then the least busy.
    pub(super) fn scale_down(&mut self, count: u32) {
        let mut candidates: Vec<(u8, u32, usize)> = self
            .live_pods
            .iter()
            .filter_map(|&p| {
                let pod = &self.pods[p];
                if pod.draining {
                    return None;
                }
                match pod.phase {
                    Phase::Pending => Some((0, 0, p)),
                    Phase::Starting { .. } => Some((1, 0, p)),
                    Phase::Serving { .. } => Some((2, pod.active, p)),
                    Phase::Gone => None,
                }
            })
            .collect();
        // Newest first within a class (a ReplicaSet removes the youngest pods).
        candidates.sort_by(|a, b| {
            (a.0, a.1, std::cmp::Reverse(a.2)).cmp(&(b.0, b.1, std::cmp::Reverse(b.2)))
        });
        for &(_, _, pod) in candidates.iter().take(count as usize) {
            self.remove_pod(pod);
        }
    }

    pub(super) fn balloon_count(&self) -> u32 {
        self.pending_balloons
            + self
                .live_nodes
                .iter()
                .map(|&i| &self.nodes[i])
                .filter(|n| n.alive)
                .map(|n| n.balloons)
                .sum::<u32>()
    }

    /// Scales the balloon Deployment to `target` pods.
    pub(super) fn set_balloons(&mut self, target: u32) {
        let current = self.balloon_count();
        if target > current {
            self.pending_balloons += target - current;
            self.schedule();
            return;
        }
        let mut remove = current - target;
        let from_pending = remove.min(self.pending_balloons);
        self.pending_balloons -= from_pending;
        remove -= from_pending;
        if remove == 0 {
            return;
        }
        // Take balloons from the emptiest nodes first so whole nodes can be consolidated;
        // launching nodes before Ready ones.
        let mut order: Vec<usize> = self
            .live_nodes
            .iter()
            .copied()
            .filter(|&i| self.nodes[i].alive && self.nodes[i].balloons > 0)
            .collect();
        order.sort_by_key(|&i| {
            let n = &self.nodes[i];
            (n.ready_at <= self.now, n.used - n.balloons * self.gpr())
        });
        let gpr = self.gpr();
        for i in order {
            if remove == 0 {
                break;
            }
            let take = remove.min(self.nodes[i].balloons);
            self.nodes[i].balloons -= take;
            self.nodes[i].used -= take * gpr;
            remove -= take;
            self.check_empty(i);
        }
    }

    /// One call of the Lambda's `decide()` on what its eyes see now (counted).
    pub(super) fn prewarm_decision(&mut self, policy: &PolicySpec, target: &TargetSpec) -> Plan {
        let obs = self.observation(policy, target);
        self.result.decisions += 1;
        let plan = decide(
            &obs,
            target,
            policy,
            &self.headroom_state,
            self.cfg.base_epoch + self.now,
        );
        self.result.band.tick_s = policy.tick_s;
        self.record_band(&plan.forecast);
        plan
    }

    pub(super) fn on_tick(&mut self) {
        let (policy, target) = match &self.cfg.headroom {
            Headroom::Prewarm { policy, target } => (policy, target),
            Headroom::Percent { percent, tick_s } => {
                let want = super::percent_of(self.serving_count(), *percent);
                self.set_balloons(want);
                let next = self.now + tick_s;
                self.push(next, Kind::Tick);
                return;
            }
            Headroom::None | Headroom::Fixed(_) => return,
        };
        let plan = self.prewarm_decision(policy, target);
        if plan.changes_size() {
            self.result.headroom_changes += 1;
        }
        // What the Lambda does: size the object to the plan, persist next_state on it, and read
        // the object's size back as `spare` next time.
        self.set_balloons(plan.desired_spare);
        if let Some(freeze) = plan.freeze_consolidation {
            if target.freeze_consolidation {
                self.consolidation_frozen = freeze;
            }
        }
        self.headroom_state = plan.next_state;
        self.headroom_state.spare = self.balloon_count();
        let next = self.now + policy.tick_s;
        self.push(next, Kind::Tick);
    }
}
