//! One target, one tick, in three phases: observe (every read the decision needs, at once),
//! plan (`core::policy::decide::plan_target`, pure), then execute the commands: the headroom
//! object, the NodePool (limits, budgets) and the HPA floor, unless DRY_RUN.

use super::lead::{self, LeadStart};
use super::observe::{calibration_history, observe};
use super::{TargetReport, TickDeps};
use crate::adapters::kube::headroom::{self, ApplyOutcome, HeadroomRead};
use crate::adapters::kube::lead_times::Learned;
use crate::adapters::kube::nodepool::limits::LimitsIntent;
use crate::adapters::kube::nodepool::{self, NodePoolView};
use crate::adapters::kube::{headroom::annotations, hpa, nodepool::limits_room};
use crate::core::lease::LeaseOutcome;
use crate::core::policy::calibration_cache::{CalibrationCache, ReadOutcome};
use crate::core::policy::decide::{
    acted_recently, plan_target, TargetActs, TargetCommands, TargetSeen,
};
use crate::core::{HeadroomKind, Observation, Plan, PolicySpec, TargetSpec};
use crate::error::Result;

/// The NodePool's consolidation change this tick: freeze/restore as planned when the target
/// opts in; otherwise only ever undo a freeze that is still on (the option was turned off).
/// Asked of the pool as it is right before its patch.
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
    let seen = observe_target(deps, client, target, leads, policy, now).await;
    let mut report = TargetReport {
        at: Some(annotations::format_time(now)),
        lead: Some(horizon),
        pending_pods: seen.observation.pending_pods,
        serving_replicas: seen.observation.serving_replicas,
        metrics_problem: seen.observation.problem.clone(),
        learned: seen.learned,
        ..TargetReport::new(&target.name, dry_run)
    };
    // Without both objects nothing is written: the error names the missing one.
    let pool = match seen.pool {
        Ok(p) => p,
        Err(e) => return report.failed(&e),
    };
    let read = match seen.read {
        Ok(r) => r,
        Err(e) => return keep_room(client, target, &pool, now, dry_run, report.failed(&e)).await,
    };
    report.size_before = Some(read.parsed.size);
    let planned = TargetSeen {
        observation: seen.observation,
        state: read.state().clone(),
        pool_frozen: pool.consolidation_frozen(),
        calibrations: seen.calibrations,
        calibration_read: seen.calibration_read,
    };
    match plan_target(planned, target, policy, now) {
        TargetCommands::Skip { acted_at } => {
            report.skipped = Some(format!(
                "another invocation acted on {} at {}",
                read.object.display,
                annotations::format_time(acted_at)
            ));
            report
        }
        TargetCommands::Act(acts) => {
            deps.calibrations
                .put(&target.name, acts.calibrations.clone());
            execute(client, target, pool, &read, *acts, now, report).await
        }
    }
}

/// Every read one target's tick decides on: its NodePool, its headroom object and the
/// observation at once, then what needs one of them (the pulls and loads of the pods listed,
/// for the lead times; the calibration history, when due and the tick is not left to another
/// invocation).
struct Seen {
    pool: Result<NodePoolView>,
    read: Result<HeadroomRead>,
    /// With the calibration history when it was read.
    observation: Observation,
    calibration_read: ReadOutcome,
    /// This environment's calibration cache, as the history read was planned on.
    calibrations: CalibrationCache,
    learned: Vec<Learned>,
}

async fn observe_target(
    deps: &TickDeps,
    client: &kube::Client,
    target: &TargetSpec,
    leads: Option<&LeadStart>,
    policy: &PolicySpec,
    now: f64,
) -> Seen {
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
    let mut seen = Seen {
        pool,
        read,
        observation,
        calibration_read: ReadOutcome::NotRead,
        calibrations: deps.calibrations.get(&target.name),
        learned,
    };
    // The history is read after the headroom object (whose calibration may make it not due),
    // and only for a tick that will decide.
    if let (Ok(_), Ok(read)) = (&seen.pool, &seen.read) {
        if !acted_recently(read.state().last_tick, now, policy.tick_s) {
            let on_object = read.state().calibration.as_ref();
            let (history, outcome) =
                calibration_history(deps, target, &seen.calibrations, on_object, policy, now).await;
            seen.observation.calibration_history = history;
            seen.calibration_read = outcome;
        }
    }
    seen
}

/// Carries out the commands of a target that acts: the headroom plan, then the NodePool's
/// limits and budgets, then the HPA floor. A headroom write that fails keeps the NodePool's
/// room only; one refused for a newer version (409) leaves the rest to the next tick. Written
/// only unless the report's DRY_RUN.
async fn execute(
    client: &kube::Client,
    target: &TargetSpec,
    pool: NodePoolView,
    read: &HeadroomRead,
    acts: TargetActs,
    now: f64,
    mut report: TargetReport,
) -> TargetReport {
    let dry_run = report.dry_run;
    let TargetActs {
        plan,
        residual,
        floor,
        ..
    } = acts;
    report.residual = residual;
    report.plan = Some(plan.clone());
    let outcome = match headroom::apply_plan(client, read, &plan, now, dry_run).await {
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
    if let (Some(r), Some(floor)) = (target.hpa.as_ref(), floor) {
        let outcome =
            hpa::floor::apply_floor(client, r, floor.intent, now, floor.lease_s, dry_run).await;
        if floor.report_unchanged || !matches!(outcome, Ok(LeaseOutcome::Unchanged)) {
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

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::core::{self, policy::decide::floor_intent};
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
        let patch = core::floor::plan_floor(&view, floor_intent(&plan), NOW, 300.0).unwrap();
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
