//! decide()'s properties over random series, targets and prior states: the floor and ceiling,
//! failing static never lowers, the GPU cap, pending pods.

use super::*;
use proptest::prelude::*;

fn arb_rates() -> impl Strategy<Value = Vec<f64>> {
    proptest::collection::vec(prop_oneof![8 => 0.0f64..200.0, 1 => Just(f64::NAN)], 0..40)
}

prop_compose! {
    fn arb_case()(
        rates in arb_rates(),
        service in prop_oneof![Just(f64::NAN), 0.05f64..30.0],
        serving in proptest::option::of(0u32..300),
        pending in 0u32..20,
        spare in 0u32..60,
        reserved in 0u32..10,
        hold_spare in proptest::option::of((0u32..60, -400.0f64..400.0)),
        cooldown in proptest::option::of(-100.0f64..100.0),
        min in 0u32..10,
        extra in 0u32..30,
        up in 1u32..8,
        down in 0u32..8,
        concurrency in 1u32..16,
    ) -> (Observation, TargetSpec, HeadroomState) {
        let observed = Observation {
            arrival_rate: series_ending(NOW, &rates),
            service_time_s: series_ending(NOW, &[service]),
            serving_replicas: serving,
            pending_pods: pending,
            ..Observation::default()
        };
        let target = TargetSpec {
            min_spare: min,
            max_spare: min + extra,
            max_step_up: up,
            max_step_down: down,
            replica_concurrency: concurrency,
            ..test_target()
        };
        let prior = HeadroomState {
            spare: spare + reserved,
            replacement_reserved: reserved,
            hold: hold_spare.map(|(spare, dt)| Hold { spare, until: NOW + dt }),
            cooldown_until: cooldown.map(|dt| NOW + dt),
            ..HeadroomState::default()
        };
        (observed, target, prior)
    }
}

proptest! {
    #[test]
    fn desired_stays_within_floor_and_ceiling((observed, target, prior) in arb_case()) {
        let plan = decide(&observed, &target, &PolicySpec::default(), &prior, NOW);
        if plan.action != Action::FailStatic {
            let own = plan.desired_spare - prior.replacement_reserved;
            prop_assert!(own >= target.min_spare && own <= target.max_spare,
                "{own} outside [{}, {}]: {plan:?}", target.min_spare, target.max_spare);
        }
        prop_assert!(plan.desired_spare >= prior.replacement_reserved);
    }

    #[test]
    fn fail_static_never_lowers_spare(
        (observed, target, prior) in arb_case(),
        problem in proptest::option::of("[a-z ]{1,20}"),
        age in 0.0f64..1000.0,
    ) {
        let observed = Observation {
            problem,
            arrival_rate: observed.arrival_rate.iter()
                .map(|s| Sample::new(s.t - age, s.v)).collect(),
            ..observed
        };
        let plan = decide(&observed, &target, &PolicySpec::default(), &prior, NOW);
        if plan.action == Action::FailStatic {
            // Never lower; raised only to a floor (minSpare: arb_case has no schedules).
            prop_assert!(plan.desired_spare >= prior.spare, "{plan:?}");
            let own = prior.spare.saturating_sub(prior.replacement_reserved);
            if own >= target.min_spare {
                prop_assert_eq!(plan.desired_spare, prior.spare);
            }
        }
        let defaults = PolicySpec::default();
        let stale = age > defaults.stale_after_s + defaults.ingestion_lag_s;
        if observed.problem.is_some() || stale || observed.arrival_rate.is_empty() {
            prop_assert_eq!(plan.action, Action::FailStatic);
        }
    }

    #[test]
    fn never_above_the_gpu_cap(
        (observed, target, prior) in arb_case(),
        gpus in 1u32..8,
        cap in 8u32..200,
    ) {
        let target = TargetSpec { gpus_per_replica: gpus, gpu_cap: Some(cap), ..target };
        let plan = decide(&observed, &target, &PolicySpec::default(), &prior, NOW);
        if plan.action != Action::FailStatic {
            let own = plan.desired_spare - prior.replacement_reserved;
            let in_use = observed.serving_replicas.unwrap_or(plan.forecast.replicas_now)
                + observed.pending_pods;
            prop_assert!(own == 0 || (in_use + own) * gpus <= cap, "{plan:?}");
        }
    }

    #[test]
    fn pending_pods_release_only_what_they_take((observed, target, prior) in arb_case()) {
        // While pods are pending the spare never falls, unless the ceiling cuts it; while
        // the fast path acts it falls by at most the pods pending (they take the room of
        // the spare it ordered for them).
        let plan = decide(&observed, &target, &PolicySpec::default(), &prior, NOW);
        let ceiling_cut = prior.spare - prior.replacement_reserved > target.max_spare;
        let fast = plan.reasons.iter().any(|r| matches!(r, Reason::FastPath { .. }));
        if observed.pending_pods > 0 && !ceiling_cut {
            let released = if fast { observed.pending_pods } else { 0 };
            prop_assert!(plan.desired_spare + released >= prior.spare, "{plan:?}");
        }
    }
}
