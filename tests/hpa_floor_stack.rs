//! The HPA floor's whole tick path against the stack's real kube-apiserver, as the
//! `prewarm-lambda` user: the HPA read back for sizing (`read_hpa_status`), `decide()`, the
//! floor intent and the lease write (`hpa::floor::apply_floor`). A raised floor must come back
//! down: while prewarm holds a raise, sizing takes the user's `minReplicas` saved on the HPA, so
//! a forecast that falls gives the user's value back within one lease; and a raise stays within
//! the target's rails (maxStepUp above the replicas in place, maxSpare, the GPU cap).
//!
//! Run: `. tests/stack/.run/env && cargo test --test hpa_floor_stack -- --include-ignored`

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::api::{Api, DeleteParams};
use prewarm::adapters::kube::headroom::annotations::parse_time;
use prewarm::adapters::kube::hpa::floor::{apply_floor, LEASE_UNTIL, RAISED_MIN, USER_MIN};
use prewarm::adapters::kube::hpa::read_hpa_status;
use prewarm::core::lease::LeaseOutcome;
use prewarm::core::{decide, HeadroomState, Observation, PolicySpec, Sample, TargetSpec};
use prewarm::handlers::tick::floor_intent;
use serde_json::json;

mod common;
use common::{as_user, hpa_on_running_requests, now, unique};

const LEASE_S: f64 = 300.0;

/// A flat arrival rate of `rate` req/s over the last two minutes, 1 s per request, `serving`
/// replicas ready, and the HPA as the tick reads it.
fn observed(
    rate: f64,
    serving: u32,
    t: f64,
    hpa: prewarm::core::policy::observation::HpaStatus,
) -> Observation {
    Observation {
        arrival_rate: (0..8)
            .map(|i| Sample::new(t - 15.0 * f64::from(7 - i), rate))
            .collect(),
        service_time_s: vec![Sample::new(t, 1.0)],
        serving_replicas: Some(serving),
        hpa: Some(hpa),
        ..Observation::default()
    }
}

/// One tick of the floor as the `prewarm-lambda` user at `t`: the HPA read for sizing, the
/// plan for a flat `rate` with `serving` replicas ready, the floor written. Returns the
/// `minReplicas` sizing read, the plan's floor and the lease's outcome.
async fn floor_tick(
    lambda: &kube::Client,
    target: &TargetSpec,
    policy: &PolicySpec,
    rate: f64,
    serving: u32,
    t: f64,
) -> (u32, Option<u32>, LeaseOutcome) {
    let r = target.hpa.as_ref().unwrap();
    let status = read_hpa_status(lambda, r).await.expect("HPA read");
    let min_read = status.min_replicas;
    let observed = observed(rate, serving, t, status);
    let plan = decide(&observed, target, policy, &HeadroomState::default(), t);
    let outcome = apply_floor(lambda, r, floor_intent(&plan), t, LEASE_S, false)
        .await
        .expect("the lambda user may patch HPAs");
    (min_read, plan.hpa_floor, outcome)
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_raised_floor_comes_back_to_the_users_value_within_one_lease() {
    let name = unique("floor-falls");
    let admin: Api<HorizontalPodAutoscaler> =
        Api::namespaced(as_user("KUBECONFIG").await, "prewarm");
    admin
        .create(&Default::default(), &hpa_on_running_requests(&name, "1"))
        .await
        .unwrap();
    let lambda = as_user("PREWARM_LAMBDA_KUBECONFIG").await;
    let target: TargetSpec = serde_json::from_value(json!({
        "name": name, "nodePool": "gpu", "maxSpare": 8, "maxStepUp": 4,
        "gpuCap": 16, "gpusPerReplica": 2,
        "headroom": {"kind": "balloon", "namespace": "prewarm", "name": "nothing"},
        "hpa": {"namespace": "prewarm", "name": name, "raiseMinReplicas": true}
    }))
    .unwrap();
    // No seasonal reads: the forecast is the trend alone.
    let policy = PolicySpec {
        seasons_s: vec![],
        ..PolicySpec::default()
    };
    let min_of = |h: &HorizontalPodAutoscaler| h.spec.as_ref().unwrap().min_replicas;
    let annotation = |h: &HorizontalPodAutoscaler, k: &str| {
        h.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(k).cloned())
    };
    let result = async {
        // Tick 1: 20 req/s flat with 2 replicas ready. The HPA wants 20, its maximum 9, now
        // and at the horizon; the rails hold the floor to 2 in place + maxStepUp 4 = 6
        // (maxSpare: 9 wanted now + 8 = 17; the GPU cap: 16 / 2 = 8 replicas): 2 -> 6.
        let t1 = now();
        let tick = floor_tick(&lambda, &target, &policy, 20.0, 2, t1).await;
        assert_eq!(tick, (2, Some(6), LeaseOutcome::Raised));
        let h = admin.get(&name).await.unwrap();
        assert_eq!(min_of(&h), Some(6));
        assert_eq!(annotation(&h, USER_MIN).as_deref(), Some("2"));
        assert_eq!(annotation(&h, RAISED_MIN).as_deref(), Some("6"));
        let lease_end = parse_time(&annotation(&h, LEASE_UNTIL).unwrap()).unwrap();

        // Tick 2, one tick later: demand fell to 0 with the 6 replicas still there. The HPA
        // is read with the user's 2 (prewarm holds the 6), so the floor is 2 and the user's
        // value comes back now, long before the lease would have run out.
        let t2 = t1 + 15.0;
        let tick = floor_tick(&lambda, &target, &policy, 0.0, 6, t2).await;
        assert_eq!(tick, (2, Some(2), LeaseOutcome::Restored));
        assert!(t2 < lease_end, "within one lease");
        let h = admin.get(&name).await.unwrap();
        assert_eq!(min_of(&h), Some(2));
        for key in [USER_MIN, RAISED_MIN, LEASE_UNTIL] {
            assert_eq!(annotation(&h, key), None, "{key}");
        }
    }
    .await;
    let _ = admin.delete(&name, &DeleteParams::default()).await;
    result
}
