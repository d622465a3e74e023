//! One target, one tick: observe, skip when another invocation acted, decide (pure core), then
//! write the headroom object, the NodePool (limits, budgets) and the HPA floor unless DRY_RUN.

use super::lead::{self, LeadStart};
use super::observe::{calibration_history, observe};
use super::{TargetReport, TickDeps};
use crate::adapters::kube::headroom::{self, ApplyOutcome, HeadroomRead};
use crate::adapters::kube::nodepool::limits::LimitsIntent;
use crate::adapters::kube::nodepool::{self, NodePoolView};
use crate::adapters::kube::{headroom::annotations, hpa, nodepool::limits_room};
use crate::core::lease::LeaseOutcome;
use crate::core::policy::residual;
use crate::core::{self, HeadroomKind, Observation, Plan, TargetSpec};

/// The NodePool's consolidation change this tick: freeze/restore as planned when the target
/// opts in; otherwise only ever undo a freeze that is still on (the option was turned off).
pub fn freeze_intent(target: &TargetSpec, plan: &Plan, pool: &NodePoolView) -> Option<bool> {
    if target.freeze_consolidation {
        plan.freeze_consolidation
    } else if pool.consolidation_frozen() {
        Some(false)
    } else {
        None
    }
}

/// One target, one tick, looking ahead by the horizon learned so far (`leads`, None when
/// LEARN_LEAD_TIMES is off). Never panics on bad input; errors end up in the report.
pub async fn tick_target(
    deps: &TickDeps,
    client: &kube::Client,
    target: &TargetSpec,
    leads: Option<&LeadStart>,
    now: f64,
    dry_run: bool,
) -> TargetReport {
    let horizon = lead::horizon_for(leads, target, &deps.config.policy, now);
    let policy = &horizon.applied_to(&deps.config.policy);
    let report = TargetReport {
        at: Some(annotations::format_time(now)),
        lead: Some(horizon),
        ..TargetReport::new(&target.name, dry_run)
    };
    let (pool, read, (observation, pods)) = futures::join!(
        nodepool::read_node_pool(client, &target.node_pool),
        headroom::read_headroom(client, target),
        observe(deps, client, target, policy, now)
    );
    // Learned for the next tick's horizon, whatever this one does.
    let learned = match (leads, &pods) {
        (Some(leads), Some(pods)) => lead::pod_samples(client, target, pods, &leads.book).await,
        _ => Vec::new(),
    };
    let mut report = TargetReport {
        pending_pods: observation.pending_pods,
        serving_replicas: observation.serving_replicas,
        metrics_problem: observation.problem.clone(),
        learned,
        ..report
    };
    // Without both objects nothing is written: the error names the missing one.
    let pool = match pool {
        Ok(p) => p,
        Err(e) => return report.failed(&e),
    };
    let read: HeadroomRead = match read {
        Ok(r) => r,
        Err(e) => return keep_room(client, target, &pool, now, dry_run, report.failed(&e)).await,
    };
    report.size_before = Some(read.parsed.size);
    if annotations::acted_recently(read.state().last_tick, now, policy.tick_s) {
        report.skipped = Some(format!(
            "another invocation acted on {} at {}",
            read.object.display,
            annotations::format_time(read.state().last_tick.unwrap_or_default())
        ));
        return report;
    }
    let mut state = read.state().clone();
    state.consolidation_frozen = pool.consolidation_frozen();
    // The calibration this environment computed is fresher than the object's under DRY_RUN
    // (nothing is written there): deciding with it keeps a dry run from re-reading days of
    // history every tick.
    let cache = deps.calibrations.get(&target.name);
    let on_object = state.calibration.take();
    let (history, read_outcome) =
        calibration_history(deps, target, &cache, on_object.as_ref(), policy, now).await;
    state.calibration = cache.freshest(on_object.as_ref());
    let observation = Observation {
        calibration_history: history,
        ..observation
    };
    let plan = core::decide(&observation, target, policy, &state, now);
    // The training rise of the calibration this tick decided with (or just computed).
    let rise = plan
        .next_state
        .calibration
        .as_ref()
        .or(state.calibration.as_ref())
        .and_then(|c| c.rise);
    report.residual = residual::tick_verdict(
        &observation.arrival_rate,
        &observation.waiting,
        policy.lead_time_s,
        residual::SLO_WAIT_S,
        rise,
    );
    deps.calibrations.put(
        &target.name,
        cache.after_tick(
            policy,
            read_outcome,
            plan.next_state.calibration.as_ref(),
            now,
        ),
    );
    report.plan = Some(plan.clone());

    let outcome = match headroom::apply_plan(client, &read, &plan, now, dry_run).await {
        Ok(o) => o,
        Err(e) => return keep_room(client, target, &pool, now, dry_run, report.failed(&e)).await,
    };
    report.size_after = Some(match outcome {
        ApplyOutcome::Written { after, .. } | ApplyOutcome::DryRun { after, .. } => after,
        ApplyOutcome::Unchanged | ApplyOutcome::Conflict => read.parsed.size,
    });
    report.headroom = Some(outcome.as_str().into());
    if outcome == ApplyOutcome::Conflict {
        report.skipped = Some(format!(
            "{} changed since it was read (409): left to the next tick",
            read.object.display
        ));
        return report;
    }

    // A static NodePool that is also the headroom object has a new resourceVersion now.
    let pool = if matches!(target.headroom, HeadroomKind::NodePoolReplicas)
        && matches!(outcome, ApplyOutcome::Written { .. })
    {
        match nodepool::read_node_pool(client, &target.node_pool).await {
            Ok(p) => p,
            Err(e) => return report.failed(&e),
        }
    } else {
        pool
    };
    let freeze = freeze_intent(target, &plan, &pool);
    let limits = limits_intent(client, target, now).await;
    match nodepool::apply_node_pool(client, &pool, &limits, freeze, dry_run).await {
        Ok(o) => report.node_pool = Some(o.as_str().into()),
        Err(e) => return report.failed(&e),
    }
    if let Some(r) = target.hpa.as_ref() {
        // A target whose raiseMinReplicas was turned off gets a raise still on its HPA given
        // back (nothing is written when there is none): no lease is left to outlive the option.
        // A drain's surge on the same floor stays, whatever the intent (`plan_beside_surge`).
        let intent = if r.raise_min_replicas {
            floor_intent(&plan)
        } else {
            hpa::floor::FloorIntent::Restore
        };
        let lease_s = policy.floor_lease_s();
        let outcome = hpa::floor::apply_floor(client, r, intent, now, lease_s, dry_run).await;
        // An unchanged floor is reported only when the option is on; a change or an error always.
        if r.raise_min_replicas || !matches!(outcome, Ok(LeaseOutcome::Unchanged)) {
            report.hpa_floor = Some(match outcome {
                Ok(outcome) => outcome.to_string(),
                Err(e) => format!("error: {e}"),
            });
        }
    }
    report
}

/// The NodePool's limits this tick: the target's cap (or the user's own limits) with room for
/// the replacements of the pool's draining nodes (`adapters::kube::nodepool::limits_room`). When the nodes
/// cannot be read the limits are left as they are: a room in use is never taken away on missing
/// data, and a cap change waits for the next tick.
async fn limits_intent(client: &kube::Client, target: &TargetSpec, now: f64) -> LimitsIntent {
    match limits_room::pool_nodes(client, &target.node_pool).await {
        Ok(nodes) => LimitsIntent::Room {
            cap: target.limits.clone(),
            nodes,
            now,
        },
        Err(e) => {
            tracing::warn!(target = %target.name, error = %e,
                "nodes of the NodePool not read: its limits are left as they are this tick");
            LimitsIntent::Leave
        }
    }
}

/// The NodePool's room for its draining nodes on a tick whose headroom could not be read or
/// written: the room does not depend on the headroom, and a drain whose own write failed may be
/// waiting for it. The limits only (no plan decided consolidation); the pool as read at the
/// tick's start, its nodes listed now (after it, as `limits_room::sync_room` explains).
async fn keep_room(
    client: &kube::Client,
    target: &TargetSpec,
    pool: &NodePoolView,
    now: f64,
    dry_run: bool,
    mut report: TargetReport,
) -> TargetReport {
    let limits = limits_intent(client, target, now).await;
    report.node_pool = Some(
        match nodepool::apply_node_pool(client, pool, &limits, None, dry_run).await {
            Ok(o) => o.as_str().into(),
            Err(e) => format!("error: {e}"),
        },
    );
    report
}

/// The HPA floor this tick: the replicas forecast for the horizon within the rails (the plan's
/// `hpa::floor`), or hold as is when failing static (never lowered on missing data; the lease
/// is renewed).
pub fn floor_intent(plan: &Plan) -> hpa::floor::FloorIntent {
    match (plan.action, plan.hpa_floor) {
        (core::Action::FailStatic, _) | (_, None) => hpa::floor::FloorIntent::Hold,
        (_, Some(floor)) => hpa::floor::FloorIntent::AtLeast(floor),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use serde_json::Value;

    fn target(freeze: bool) -> TargetSpec {
        serde_json::from_value(serde_json::json!({
            "name": "llama", "nodePool": "gpu", "maxSpare": 8, "freezeConsolidation": freeze,
            "headroom": {"kind": "balloon", "namespace": "prewarm", "name": "balloon-gpu"}
        }))
        .unwrap()
    }

    pub(in crate::handlers::tick) fn plan(freeze: Option<bool>) -> Plan {
        Plan {
            target: "llama".into(),
            action: core::Action::None,
            current_spare: 0,
            desired_spare: 0,
            freeze_consolidation: freeze,
            forecast: Default::default(),
            reasons: vec![],
            hpa_floor: None,
            next_state: Default::default(),
        }
    }

    fn pool(frozen: bool) -> NodePoolView {
        NodePoolView {
            name: "gpu".into(),
            resource_version: "1".into(),
            annotations: if frozen {
                [(nodepool::SAVED_BUDGETS.to_string(), "[]".to_string())].into()
            } else {
                Default::default()
            },
            spec: Value::Null,
        }
    }

    /// The floor's whole pure path, from the HPA as read to the patch: prewarm raised the HPA
    /// from the user's 2 to 6 (lease live), and demand has fallen to 0. The HPA wants 0
    /// replicas, clamped to the user's 2 (not to prewarm's 6, which would renew the raise
    /// forever): the floor plan gives the 2 back and drops the lease.
    #[test]
    fn a_forecast_that_falls_gives_a_raised_floor_back_to_the_user() {
        use crate::core::policy::observation::Sample;
        use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
        const NOW: f64 = 1_795_953_600.0; // 2026-11-29T12:00:00Z
        let raised: HorizontalPodAutoscaler = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "llama", "namespace": "ml", "annotations": {
                hpa::floor::USER_MIN: "2", hpa::floor::RAISED_MIN: "6",
                hpa::floor::LEASE_UNTIL: "2026-11-29T12:03:00.000Z"}},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "llama"},
                     "minReplicas": 6, "maxReplicas": 10,
                     "metrics": [{"type": "Pods", "pods": {
                         "metric": {"name": "vllm:num_requests_running"},
                         "target": {"type": "AverageValue", "averageValue": "1"}}}]},
            "status": {"currentReplicas": 6, "desiredReplicas": 6}
        }))
        .unwrap();
        let view = hpa::floor::floor_view(&raised);
        let observed = Observation {
            arrival_rate: (0..8)
                .map(|i| Sample::new(NOW - 15.0 * f64::from(7 - i), 0.0))
                .collect(),
            serving_replicas: Some(6),
            hpa: Some(hpa::with_users_floor(hpa::hpa_status(&raised, None), &view)),
            ..Observation::default()
        };
        let target: TargetSpec = serde_json::from_value(serde_json::json!({
            "name": "llama", "nodePool": "gpu", "maxSpare": 8,
            "headroom": {"kind": "balloon", "namespace": "prewarm", "name": "balloon-gpu"},
            "hpa": {"namespace": "ml", "name": "llama", "raiseMinReplicas": true}
        }))
        .unwrap();
        let policy = core::PolicySpec::default();
        let plan = core::decide(&observed, &target, &policy, &Default::default(), NOW);
        assert_eq!(plan.hpa_floor, Some(2), "{plan:#?}");
        let patch = hpa::floor::plan_floor(&view, floor_intent(&plan), NOW, 300.0).unwrap();
        assert_eq!(patch.min_replicas, Some(2));
        assert_eq!(patch.outcome, LeaseOutcome::Restored);
    }

    #[test]
    fn consolidation_is_frozen_only_for_targets_that_opt_in_and_always_restorable() {
        let cases = [
            (true, Some(true), false, Some(true)),
            (true, Some(false), true, Some(false)),
            (true, None, true, None),
            (false, Some(true), false, None),
            (false, None, true, Some(false)),
            (false, None, false, None),
        ];
        for (opt_in, planned, frozen, expected) in cases {
            assert_eq!(
                freeze_intent(&target(opt_in), &plan(planned), &pool(frozen)),
                expected,
                "opt_in={opt_in} planned={planned:?} frozen={frozen}"
            );
        }
    }
}
