//! Stage: the fast path. The trend model and the band follow demand; a queue that is already
//! building says the HPA is about to scale out and will double its way up over several sync
//! periods while each new replica waits for a node. The fast path provisions, in one tick, the
//! spare for what the HPA will want at the end of that ramp.
//!
//! Trigger (Knative's panic mode is the anchor: it panics when the concurrency observed over a
//! 6 s window reaches 200 % of what the ready pods can take): the mean of waiting + running
//! requests over the last FAST_PATH_WINDOW_SECONDS (30 s: two samples of the 15 s grid; a
//! metric store has no 6 s resolution) is at least FAST_PATH_RATIO (2) times the ready slots
//! (ready replicas × replicaConcurrency), and requests are waiting. With no ready replica any
//! waiting request triggers it. "Within one tick" counts from when the sample is visible in the
//! metric store (AMP ingests with ~30 s lag): the window ends at the newest visible sample (one
//! newer than STALE_AFTER_SECONDS + INGESTION_LAG_SECONDS), not at the tick's clock, or a lag as long as the window would
//! leave it empty.
//!
//! End of the ramp: the requests in the system once served without queueing, the larger of
//! what is in the system now and arrival rate × service time (Little's law), divided by the
//! HPA's per-replica target when it has one (clamped to its range), by the slots of a replica
//! otherwise.

use super::hpa_sizing::hpa_replicas_for_in_system;
use super::observation::{HpaStatus, Observation, Sample};
use crate::spec::{PolicySpec, TargetSpec};

/// Why the fast path fired and what it wants.
#[derive(Clone, Debug, PartialEq)]
pub struct FastPath {
    /// Mean requests in the system over the window.
    pub in_system: f64,
    /// Slots of the ready replicas.
    pub ready_slots: f64,
    /// Replicas the HPA will want at the end of its ramp.
    pub replicas_wanted: u32,
}

fn window_mean(series: &[Sample], from: f64, to: f64) -> Option<f64> {
    let values: Vec<f64> = series
        .iter()
        .filter(|s| s.t.is_finite() && s.v.is_finite() && s.t > from && s.t <= to)
        .map(|s| s.v.max(0.0))
        .collect();
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// The requests waiting and in the system (waiting + running), each the mean over the window
/// that ends at the newest visible queue sample; None when the queue series are missing or
/// stale.
pub fn queue_now(observed: &Observation, policy: &PolicySpec, now: f64) -> Option<(f64, f64)> {
    // The window ends at the newest visible queue sample, not at `now`: a metric store shows a
    // sample only after its ingestion lag (AMP: ~30 s), which is as long as the window, so a
    // window ending at `now` would hold no sample and the fast path would never fire. A
    // newest sample older than STALE_AFTER_SECONDS + INGESTION_LAG_SECONDS (judged against
    // `now`, as `assess::fresh`) leaves it off.
    let newest = observed
        .waiting
        .iter()
        .filter(|s| s.t.is_finite() && s.v.is_finite() && s.t <= now)
        .map(|s| s.t)
        .fold(f64::NEG_INFINITY, f64::max);
    if newest < now - policy.stale_after_s - policy.ingestion_lag_s {
        return None;
    }
    let from = newest - policy.fast_path_window_s;
    let waiting = window_mean(&observed.waiting, from, newest)?;
    let running = window_mean(&observed.running, from, newest).unwrap_or(0.0);
    Some((waiting, waiting + running))
}

/// The fast path's verdict for this tick; None when it does not fire (or the queue series are
/// missing or stale: missing data leaves it off, so it can never hand spare to pending pods
/// through the rails on data it does not have).
pub fn fast_path(
    observed: &Observation,
    target: &TargetSpec,
    policy: &PolicySpec,
    ready: u32,
    arrival_rate: f64,
    service_time_s: f64,
    now: f64,
) -> Option<FastPath> {
    let (waiting, in_system) = queue_now(observed, policy, now)?;
    let slots = f64::from(target.replica_concurrency.max(1));
    let ready_slots = f64::from(ready) * slots;
    if waiting <= 0.0 || in_system < policy.fast_path_ratio * ready_slots {
        return None;
    }
    let settled = in_system.max(arrival_rate * service_time_s);
    let replicas_wanted = match observed.hpa.as_ref().map(|h| end_of_ramp(h, settled)) {
        Some(Ok(n)) => n,
        _ => ((settled / slots) - 1e-9).ceil().max(1.0) as u32,
    };
    Some(FastPath {
        in_system,
        ready_slots,
        replicas_wanted,
    })
}

fn end_of_ramp(hpa: &HpaStatus, in_system: f64) -> Result<u32, String> {
    hpa_replicas_for_in_system(hpa, in_system)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::observation::HpaMetric;
    use crate::spec::HeadroomKind;

    const NOW: f64 = 1_700_000_000.0;

    fn series(values: &[f64]) -> Vec<Sample> {
        let n = values.len();
        values
            .iter()
            .enumerate()
            .map(|(i, v)| Sample::new(NOW - 15.0 * (n - 1 - i) as f64, *v))
            .collect()
    }

    fn observe(waiting: &[f64], running: &[f64]) -> Observation {
        Observation {
            waiting: series(waiting),
            running: series(running),
            ..Observation::default()
        }
    }

    #[test]
    fn fast_path_table() {
        let target = TargetSpec {
            replica_concurrency: 4,
            ..TargetSpec::new("t", "gpu", HeadroomKind::NodePoolReplicas, 10)
        };
        let policy = PolicySpec::default(); // ratio 2, window 30 s: the last two samples
        let hpa = HpaStatus {
            min_replicas: 1,
            max_replicas: 6,
            current_replicas: 2,
            desired_replicas: 2,
            metric: HpaMetric::InSystemPerReplica {
                target_average: 3.0,
            },
        };
        // (name, observation, ready, rate, service, want)
        type Row = (
            &'static str,
            Observation,
            u32,
            f64,
            f64,
            Option<(f64, f64, u32)>,
        );
        let rows: Vec<Row> = vec![
            // 2 ready × 4 slots = 8; in system (8 + 8) = 16 = 2 × 8: fires. Settled
            // max(16, 1 × 4) = 16 → 16 / 4 slots = 4 replicas.
            (
                "at the threshold",
                observe(&[0.0, 8.0, 8.0], &[8.0, 8.0, 8.0]),
                2,
                1.0,
                4.0,
                Some((16.0, 8.0, 4)),
            ),
            // 15 < 16: does not fire. (The older sample of 100 is outside the 30 s window.)
            (
                "below",
                observe(&[100.0, 7.0, 7.0], &[8.0, 8.0, 8.0]),
                2,
                1.0,
                4.0,
                None,
            ),
            // Saturated but nothing waits: the HPA has no reason to scale out.
            (
                "no queue",
                observe(&[0.0, 0.0], &[20.0, 20.0]),
                2,
                1.0,
                4.0,
                None,
            ),
            // Little's law beats what is in the system now: 10 req/s × 4 s = 40 → 10.
            (
                "arrivals say more",
                observe(&[8.0, 8.0], &[8.0, 8.0]),
                2,
                10.0,
                4.0,
                Some((16.0, 8.0, 10)),
            ),
            // No ready replica: any waiting request fires; 1 in system → 1 replica.
            (
                "from zero",
                observe(&[1.0, 1.0], &[0.0, 0.0]),
                0,
                0.0,
                4.0,
                Some((1.0, 0.0, 1)),
            ),
            // Ingestion lag: the newest visible samples are 30 s old (AMP), the window is the
            // last two of them (NOW − 45, NOW − 30): (8 + 8) waiting + 8 running = 16 ≥ 2 × 8
            // fires as at the threshold. (The sample at NOW − 60 is outside that window.)
            (
                "30 s ingestion lag",
                Observation {
                    waiting: vec![
                        Sample::new(NOW - 60.0, 0.0),
                        Sample::new(NOW - 45.0, 8.0),
                        Sample::new(NOW - 30.0, 8.0),
                    ],
                    running: vec![
                        Sample::new(NOW - 60.0, 0.0),
                        Sample::new(NOW - 45.0, 8.0),
                        Sample::new(NOW - 30.0, 8.0),
                    ],
                    ..Observation::default()
                },
                2,
                1.0,
                4.0,
                Some((16.0, 8.0, 4)),
            ),
            // A newest sample at exactly STALE_AFTER_SECONDS + INGESTION_LAG_SECONDS (120 + 30
            // s) is still fresh: 50 waiting, no ready replica → fires, ⌈50 / 4⌉ = 13.
            (
                "newest at the stale bound",
                Observation {
                    waiting: vec![Sample::new(NOW - 150.0, 50.0)],
                    ..Observation::default()
                },
                0,
                0.0,
                4.0,
                Some((50.0, 0.0, 13)),
            ),
            // Stale queue samples (newest older than 120 + 30 s): off.
            (
                "stale",
                Observation {
                    waiting: vec![Sample::new(NOW - 151.0, 50.0)],
                    ..Observation::default()
                },
                0,
                0.0,
                4.0,
                None,
            ),
            ("missing", Observation::default(), 0, 0.0, 4.0, None),
        ];
        for (name, observed, ready, rate, service, want) in rows {
            let got = fast_path(&observed, &target, &policy, ready, rate, service, NOW)
                .map(|f| (f.in_system, f.ready_slots, f.replicas_wanted));
            assert_eq!(got, want, "{name}");
        }
        // With the HPA's own per-replica target (3): 16 in system → ⌈16/3⌉ = 6, its max.
        let with_hpa = Observation {
            hpa: Some(hpa.clone()),
            ..observe(&[8.0, 8.0], &[8.0, 8.0])
        };
        let got = fast_path(&with_hpa, &target, &policy, 2, 1.0, 4.0, NOW).unwrap();
        assert_eq!(got.replicas_wanted, 6);
        // 13 in system → ⌈13/3⌉ = 5, below its max.
        let with_hpa = Observation {
            hpa: Some(hpa),
            ..observe(&[5.0, 5.0], &[8.0, 8.0])
        };
        let target_one_slot = TargetSpec {
            replica_concurrency: 1,
            ..target.clone()
        };
        let got = fast_path(&with_hpa, &target_one_slot, &policy, 2, 1.0, 4.0, NOW).unwrap();
        assert_eq!(got.replicas_wanted, 5);
    }
}
