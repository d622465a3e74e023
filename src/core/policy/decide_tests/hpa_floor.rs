//! decide()'s HPA floor (`Plan::hpa_floor`, for `hpa.raiseMinReplicas`): the replicas the HPA
//! will want at the horizon within the rails a spare has (maxSpare, maxStepUp, the GPU cap less
//! the replacement reserve), and the user's value once the forecast asks for no more.

use super::*;

/// An HPA on one request in the system per replica (1 s per request: it wants ⌈rate⌉), its
/// range `min..=50`, 5 replicas ready; flat 5 req/s (level 5, trend 0) and a cached lead-time
/// band of `band` req/s: the HPA wants 5 now and ⌈5 + band⌉ at the horizon.
fn floor_case(min: u32, band: f64) -> (Observation, HeadroomState) {
    let observed = Observation {
        hpa: Some(HpaStatus {
            min_replicas: min,
            current_replicas: 5,
            desired_replicas: 5,
            ..hpa(HpaMetric::InSystemPerReplica {
                target_average: 1.0,
            })
        }),
        ..observe(&[5.0; 8], Some(5))
    };
    let prior = HeadroomState {
        calibration: Some(calibrated(band, 0.5)),
        ..prior(0)
    };
    (observed, prior)
}

/// `observed` with `waiting` and `running` requests at the last two scrapes (up to NOW).
fn queued(observed: Observation, waiting: f64, running: f64) -> Observation {
    Observation {
        waiting: series_ending(NOW, &[waiting; 2]),
        running: series_ending(NOW, &[running; 2]),
        ..observed
    }
}

#[test]
fn the_hpa_floor_is_the_horizon_within_the_rails() {
    let steps = |up: u32, max_spare: u32| TargetSpec {
        max_step_up: up,
        max_spare,
        ..test_target()
    };
    // (name, target, observation, prior, the floor) - each worked out by hand below.
    type FloorRow = (
        &'static str,
        TargetSpec,
        Observation,
        HeadroomState,
        Option<u32>,
    );
    let (flat2, band2) = floor_case(1, 2.0);
    let (flat10, band10) = floor_case(1, 10.0);
    let reserved = HeadroomState {
        spare: 3,
        replacement_reserved: 3,
        ..band10.clone()
    };
    let idle = Observation {
        hpa: Some(HpaStatus {
            min_replicas: 2,
            current_replicas: 8,
            desired_replicas: 8,
            ..hpa(HpaMetric::InSystemPerReplica {
                target_average: 1.0,
            })
        }),
        ..observe(&[0.0; 8], Some(8))
    };
    let rows: Vec<FloorRow> = vec![
        // Rate 5 + 2 = 7: the HPA wants 7; 7 ≤ 5 + maxSpare 20 and ≤ 5 in place + maxStepUp 4.
        ("no rail binds", test_target(), flat2, band2, Some(7)),
        // 5 + 10 = 15 wanted; 5 in place + maxStepUp 4 = 9.
        (
            "at most maxStepUp above the replicas in place",
            test_target(),
            flat10.clone(),
            band10.clone(),
            Some(9),
        ),
        // 15 wanted; 5 wanted now + maxSpare 3 = 8 (steps 20: 25 does not bind).
        (
            "at most maxSpare above what the HPA wants now",
            steps(20, 3),
            flat10.clone(),
            band10.clone(),
            Some(8),
        ),
        // 15 wanted; gpuCap 22 / 2 GPUs per replica = 11 replicas, less the reserve 3 = 8.
        (
            "never past the GPU cap less the replacement reserve",
            TargetSpec {
                gpu_cap: Some(22),
                gpus_per_replica: 2,
                ..steps(20, 20)
            },
            flat10.clone(),
            reserved,
            Some(8),
        ),
        // Demand fell to 0 after a raise to 8: the HPA wants 0, clamped to the user's 2 (what
        // the adapter reports while prewarm holds the raise), so the floor is the user's 2.
        (
            "a forecast that fell gives the user's value back",
            test_target(),
            idle,
            prior(0),
            Some(2),
        ),
        // The queue says the HPA asks for more than the forecast now: 5 ready (in place),
        // 40 waiting + running over the last samples at 1 per replica, so it asks ⌈40 / 1⌉ =
        // 40 (within its max 50). The forecast's floor 9 (above) is above the 5 in place, so
        // the HPA, below its minReplicas, would set 9 and read no metric at that sync
        // (Kubernetes' reconcileAutoscaler), instead of scaling towards 40 itself: a floor
        // raised above the replicas in place is at least the HPA's own ask, 40.
        (
            "a raised floor never holds the HPA below its own ask from the queue",
            test_target(),
            queued(flat10, 35.0, 5.0),
            band10.clone(),
            Some(40),
        ),
        // The same queue with no band: the HPA wants ⌈5⌉ = 5 at the horizon, the 5 in place:
        // the floor is not raised above them, so the HPA's own scale-up reads its metric and
        // the floor stays 5 (lifting it to the ask would only hold replicas against the
        // HPA's scale-down later).
        (
            "a floor not above the replicas in place leaves the HPA's scale-up to the HPA",
            test_target(),
            queued(floor_case(1, 0.0).0, 35.0, 5.0),
            floor_case(1, 0.0).1,
            Some(5),
        ),
        // Failing static: no floor, the lease is held as it is.
        (
            "failing static holds",
            test_target(),
            observe(&[], Some(5)),
            prior(0),
            None,
        ),
    ];
    for (name, target, observed, prior, want) in rows {
        let plan = decide(&observed, &target, &test_policy(), &prior, NOW);
        assert_eq!(plan.hpa_floor, want, "{name}; plan {plan:#?}");
    }
}
