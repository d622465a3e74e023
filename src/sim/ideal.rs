//! The ideal-packing lower bound ("ideal" in reports): capacity appears the instant a request needs it and
//! disappears the instant it does not. No request waits; replicas are packed perfectly
//! (`ceil(in-flight / slots)`) and nodes too (`ceil(replica GPUs / GPUs per node)`), so nothing
//! any real policy does can use fewer node-GPU-seconds while serving every request at arrival.

// The setups and shapes live in the leaf both bounds build on; re-exported for the callers.
use super::bound::CurveBound;
pub use super::bound::{Setups, Shape};
use super::engine::Request;
use super::wait_bound::{Shifted, WaitBound};

#[derive(Clone, Debug, Default, PartialEq)]
pub struct IdealResult {
    pub requests: u64,
    /// Requests arriving from `from_s` on.
    pub scored_requests: u64,
    /// Node GPU-seconds (whole nodes are paid for).
    pub gpu_seconds: f64,
    /// GPU-seconds of replicas with a request in flight.
    pub busy_gpu_seconds: f64,
    pub node_seconds: f64,
    /// The true lower bound's node GPU-seconds (`super::bound`): `gpu_seconds` plus what the
    /// setups cost at least.
    pub lower_bound_gpu_seconds: f64,
    /// The same bound when each request may wait up to the SLO's wait (`super::wait_bound`).
    pub slo_bound_gpu_seconds: f64,
    /// GPU-seconds of the requests' work alone (slot-seconds over slots, times a replica's
    /// GPUs): what serving takes however the requests are packed.
    pub work_gpu_seconds: f64,
    /// Most replicas needed at once.
    pub peak_replicas: u32,
    /// Most replicas needed at once, per day from t = 0 (knob grids use the training days').
    pub peak_replicas_by_day: Vec<u32>,
    /// Most replicas needed at once, per hour from t = 0 (every hour an interval touches): what
    /// the scheduled floor learns from its training hours (knob_grid.rs `scheduled_peaks`).
    pub peak_replicas_by_hour: Vec<u32>,
    /// Mean replica GPUs needed in each step (for the plot's demand line).
    pub demand_gpus_per_step: Vec<f64>,
    /// Arrivals per second in each step.
    pub rate_per_step: Vec<f64>,
    pub end_s: f64,
}

impl IdealResult {
    /// The most replicas needed at once on the training days (every day without them), at
    /// least 1: the scale of the knob grids.
    pub fn training_peak(&self, train_days: Option<u32>) -> u32 {
        let days = &self.peak_replicas_by_day;
        let until = train_days
            .map_or(days.len(), |d| d as usize)
            .min(days.len());
        days[..until].iter().copied().max().unwrap_or(0).max(1)
    }
}

const HOUR_S: f64 = 3600.0;

/// The bound over `requests`; GPU-seconds count from `from_s` on (the scored part).
pub fn run(
    requests: impl Iterator<Item = Request>,
    from_s: f64,
    slots: u32,
    gpus_per_replica: u32,
    gpus_per_node: u32,
    step_s: f64,
    setups: Setups,
) -> IdealResult {
    let shape = Shape {
        slots,
        gpus_per_replica,
        gpus_per_node,
    };
    let mut out = IdealResult::default();
    let mut ideal = Shifted::new(0.0);
    let mut bound = CurveBound::new(shape, setups, from_s);
    let mut wait_bound =
        (setups.slo_wait_s > 0.0).then(|| WaitBound::new(setups.slo_wait_s, shape, setups, from_s));
    let mut last_t = 0.0;
    let mut demand_acc: Vec<f64> = Vec::new();

    // The peaks and the demand line over [last_t, t) at the current allocation.
    let advance =
        |t: f64, replicas: u32, last_t: &mut f64, out: &mut IdealResult, acc: &mut Vec<f64>| {
            if t <= *last_t {
                return;
            }
            out.peak_replicas = out.peak_replicas.max(replicas);
            let day = (*last_t / super::stats::DAY_S) as usize;
            if out.peak_replicas_by_day.len() <= day {
                out.peak_replicas_by_day.resize(day + 1, 0);
            }
            out.peak_replicas_by_day[day] = out.peak_replicas_by_day[day].max(replicas);
            // [last_t, t) touches hours floor(last_t / H) up to the one before t (t itself is
            // not in the interval).
            let first = (*last_t / HOUR_S) as usize;
            let last = ((t / HOUR_S).ceil() as usize).saturating_sub(1).max(first);
            if out.peak_replicas_by_hour.len() <= last {
                out.peak_replicas_by_hour.resize(last + 1, 0);
            }
            for peak in &mut out.peak_replicas_by_hour[first..=last] {
                *peak = (*peak).max(replicas);
            }
            // Spread replica-GPU-seconds over the steps the interval touches.
            let mut a = *last_t;
            while a < t {
                let step = (a / step_s) as usize;
                let b = t.min((step + 1) as f64 * step_s);
                if acc.len() <= step {
                    acc.resize(step + 1, 0.0);
                }
                acc[step] += (replicas * gpus_per_replica) as f64 * (b - a);
                if b <= a {
                    break;
                }
                a = b;
            }
            *last_t = t;
        };
    let follow = |until: f64,
                  ideal: &mut Shifted,
                  bound: &mut CurveBound,
                  out: &mut IdealResult,
                  last_t: &mut f64,
                  acc: &mut Vec<f64>| {
        let mut before = ideal.in_flight;
        while let Some((t, n)) = ideal.next_change(until) {
            advance(t, bound.units(before).0, last_t, out, acc);
            bound.set(t, n);
            before = n;
        }
    };

    for r in requests {
        ideal.add(r.arrival, r.service_s);
        follow(
            r.arrival,
            &mut ideal,
            &mut bound,
            &mut out,
            &mut last_t,
            &mut demand_acc,
        );
        if let Some(w) = &mut wait_bound {
            w.add(r.arrival, r.service_s);
        }
        out.requests += 1;
        if r.arrival >= from_s {
            out.scored_requests += 1;
        }
        let step = (r.arrival / step_s) as usize;
        if out.rate_per_step.len() <= step {
            out.rate_per_step.resize(step + 1, 0.0);
        }
        out.rate_per_step[step] += 1.0 / step_s;
    }
    follow(
        f64::INFINITY,
        &mut ideal,
        &mut bound,
        &mut out,
        &mut last_t,
        &mut demand_acc,
    );
    out.end_s = last_t;
    out.gpu_seconds = bound.node_gpu_seconds;
    out.busy_gpu_seconds = bound.replica_gpu_seconds;
    out.node_seconds = bound.node_seconds;
    out.work_gpu_seconds = bound.slot_seconds / f64::from(slots) * f64::from(gpus_per_replica);
    out.lower_bound_gpu_seconds = bound.gpu_seconds();
    out.slo_bound_gpu_seconds = match wait_bound {
        Some(w) => w.finish(shape, setups, from_s, bound.slot_seconds),
        None => out.lower_bound_gpu_seconds,
    };
    out.demand_gpus_per_step = demand_acc.into_iter().map(|v| v / step_s).collect();
    out
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A request (shared with wait_bound.rs's tests).
    pub(in crate::sim) fn req(arrival: f64, service_s: f64) -> Request {
        Request {
            arrival,
            service_s,
            prefill_s: 0.0,
            client: 0,
        }
    }

    #[test]
    fn one_slot_replicas_pay_exactly_the_service_time() {
        // Two overlapping requests [0,4) and [1,3): 2 replicas on [1,3), 1 otherwise.
        let r = run(
            [req(0.0, 4.0), req(1.0, 2.0)].into_iter(),
            0.0,
            1,
            1,
            1,
            1.0,
            Setups::default(),
        );
        assert_eq!(r.gpu_seconds, 6.0);
        assert_eq!(r.busy_gpu_seconds, 6.0);
        assert_eq!(r.peak_replicas, 2);
        assert_eq!(r.end_s, 4.0);
    }

    #[test]
    fn whole_nodes_are_paid_for() {
        // One 1-GPU replica on a 4-GPU node for 10 s: 40 node-GPU-seconds, 10 busy.
        let r = run(
            [req(0.0, 10.0)].into_iter(),
            0.0,
            8,
            1,
            4,
            5.0,
            Setups::default(),
        );
        assert_eq!(r.gpu_seconds, 40.0);
        assert_eq!(r.busy_gpu_seconds, 10.0);
        assert_eq!(r.demand_gpus_per_step, vec![1.0, 1.0]);
    }

    #[test]
    fn hourly_peaks_count_every_hour_a_request_is_in_flight() {
        // One request [1800, 9000) alone: hours 0, 1 and 2 need 1 replica. A second one
        // [3600, 3700) overlaps it in hour 1 only: 2 there. Nothing in flight in hour 3 and
        // after, and the end at 9000 (hour 2) touches no hour beyond.
        let r = run(
            [req(1800.0, 7200.0), req(3600.0, 100.0)].into_iter(),
            0.0,
            1,
            1,
            1,
            60.0,
            Setups::default(),
        );
        assert_eq!(r.peak_replicas_by_hour, vec![1, 2, 1]);
        // An interval ending exactly on an hour boundary does not touch the next hour.
        let r = run(
            [req(0.0, 3600.0)].into_iter(),
            0.0,
            1,
            1,
            1,
            60.0,
            Setups::default(),
        );
        assert_eq!(r.peak_replicas_by_hour, vec![1]);
    }

    #[test]
    fn slots_pack_requests() {
        // Three concurrent requests, two slots per replica: two replicas for 2 s.
        let reqs = [req(0.0, 2.0), req(0.0, 2.0), req(0.0, 2.0)];
        let r = run(reqs.into_iter(), 0.0, 2, 1, 1, 1.0, Setups::default());
        assert_eq!(r.gpu_seconds, 4.0);
        assert_eq!(r.lower_bound_gpu_seconds, 4.0);
    }

    #[test]
    fn the_lower_bound_adds_the_setups_a_clairvoyant_still_pays() {
        // One-slot, 1-GPU replicas on 2-GPU nodes. Requests [0,100) and [50,60), then [200,210)
        // after a long gap. Replicas: 1 on [0,50), 2 on [50,60), 1 on [60,100), 0, 1 on
        // [200,210). Nodes: 1 on [0,100) and [200,210).
        // Node level (setup 40 s, 2 GPUs): on-time 110 s x 2 = 220; layer 1 is on at t=0 (warm,
        // free) and comes back after a 100 s gap: min(100, 40) = 40 s x 2 GPUs = 80. Total 300.
        // Replica level (setup 30 s, 1 GPU): busy 120; layer 2 first on at 50: 30; layer 1
        // back at 200 after 100 s: 30. Total 180. The node level is the larger.
        let reqs = [req(0.0, 100.0), req(50.0, 10.0), req(200.0, 10.0)];
        let setups = Setups {
            replica_s: 30.0,
            node_s: 40.0,
            ..Setups::default()
        };
        let r = run(reqs.into_iter(), 0.0, 1, 1, 2, 10.0, setups);
        assert_eq!(r.gpu_seconds, 220.0);
        assert_eq!(r.lower_bound_gpu_seconds, 300.0);
        // The replica level counts too: with a node setup of 0 (1-GPU nodes) only the model
        // loads are left, 120 + 30 + 30.
        let setups = Setups {
            replica_s: 30.0,
            node_s: 0.0,
            ..Setups::default()
        };
        let r = run(reqs.into_iter(), 0.0, 1, 1, 1, 10.0, setups);
        assert_eq!(r.lower_bound_gpu_seconds, 180.0);
    }
}
