//! What a run measures: the recorded series, wait and time-to-first-token histograms, per-day
//! figures, and the nodes' GPU-seconds (their causes: waterfall.rs).

use super::events::Kind;
use super::{Point, Sim};
use crate::sim::classes::Class;
use crate::sim::stats::{spread_over_days, DayStats};

impl Sim<'_> {
    pub(super) fn on_sample(&mut self) {
        let boundary = (self.now / self.cfg.step_s).round() as usize;
        let waiting = self.queue.len() as u32;
        let running = self.active_total as u32;
        if self.waiting_at_boundary.len() <= boundary {
            self.waiting_at_boundary.resize(boundary + 1, 0);
            self.running_at_boundary.resize(boundary + 1, 0);
            self.serving_at_boundary.resize(boundary + 1, 0);
        }
        let serving = self.serving_count();
        self.waiting_at_boundary[boundary] = waiting;
        self.running_at_boundary[boundary] = running;
        self.serving_at_boundary[boundary] = serving;
        self.draw_scrape_loss(boundary);
        self.result.peak_replicas = self.result.peak_replicas.max(self.replica_count());
        let nodes = &self.cluster.nodes;
        self.cluster.live_nodes.retain(|&i| nodes[i].alive);
        let point = Point {
            t: self.now,
            ready_gpus: self.ready_gpus(),
            serving_replicas: serving,
            balloons: self.balloon_count(),
            waiting,
            replicas: self.replica_count(),
            pending: self.pending_inference,
            cold_starts: self.cold_starts_so_far,
        };
        self.result.series.push(point);
        let next = self.now + self.cfg.step_s;
        self.push(next, Kind::Sample);
    }

    /// Charges a node's GPU-seconds from `launched` to now: to the total from the scoring start,
    /// to the days from the end of the burn-in.
    pub(super) fn charge_gpus(&mut self, launched: f64, gpus: f64) {
        let from = launched.max(self.cfg.score_from_s);
        self.result.scored.gpu.total += gpus * (self.now - from).max(0.0);
        spread_over_days(
            &mut self.result.days,
            launched,
            self.now,
            self.cfg.burn_in_s,
            gpus,
        );
    }

    /// One node cold start now: in the series' running count, and on today's stats (training
    /// days too; not in the burn-in), so a knob can be chosen for fewest cold starts on the
    /// training days.
    pub(super) fn count_node_cold_start(&mut self) {
        self.cold_starts_so_far += 1;
        if self.now < self.cfg.burn_in_s {
            return;
        }
        self.day_at(self.now).cold_starts += 1;
    }

    /// One replica cold start now, on today's stats (training days too; not in the burn-in), so
    /// a goal on replica cold starts can choose its point on the training days.
    pub(super) fn count_replica_cold_start(&mut self) {
        if self.now >= self.cfg.burn_in_s {
            self.day_at(self.now).replica_cold_starts += 1;
        }
    }

    /// The stats of the day `t` falls on (days before it added empty).
    fn day_at(&mut self, t: f64) -> &mut DayStats {
        let day = (t / crate::sim::stats::DAY_S) as usize;
        if self.result.days.len() <= day {
            self.result.days.resize(day + 1, DayStats::default());
        }
        &mut self.result.days[day]
    }

    /// One request's wait, once it takes a slot.
    pub(super) fn record_wait(&mut self, arrival: f64, wait: f64, prefill_s: f64, class: Class) {
        if arrival < self.cfg.burn_in_s {
            return;
        }
        let delayed = wait > self.cfg.slo_wait_s;
        if delayed {
            let split = self.cfg.classes.is_some().then_some(class);
            self.residual_delayed(arrival, split);
        }
        let day = self.day_at(arrival);
        day.requests += 1;
        day.delayed += u64::from(delayed);
        if arrival < self.cfg.score_from_s {
            return;
        }
        let scored = &mut self.result.scored;
        scored.requests += 1;
        scored.delayed += u64::from(delayed);
        scored.waits.record(wait);
        scored.ttft.record(wait + prefill_s);
        if let Some(c) = scored.classes.get_mut(class as usize) {
            c.requests += 1;
            c.delayed += u64::from(delayed);
            c.waits.record(wait);
        }
    }
}
