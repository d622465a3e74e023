//! `prewarm explain --event FILE --cluster-state STATE.json --at TIME [--steps N]`: a drain
//! replayed offline. Each step is planned by the handler's own planner (`plan_drain`, with the
//! handler's settings) from what the handler's own shaping functions make of STATE, printed
//! (commands, phase, next check, why), then applied to STATE (`replay_state`), and the clock
//! moves to the check the step planned. One reason to change: how a replayed step is run and
//! told.

use serde_json::{json, Value};

use super::replay_state::{Applied, ClusterState};
use crate::adapters::events::{parse_event_document, InstanceIdRule, Parsed};
use crate::adapters::kube::drain::replacement::DrainContext;
use crate::adapters::kube::shape::placeholder::PlaceholderSettings;
use crate::core::interruption::state::format_time;
use crate::core::interruption::surge_step::{plan_releases, plan_surges};
use crate::core::interruption::{
    plan_drain, Command, DrainSettings, DrainStep, Finish, NodeView, Notice, ReplacementSeen,
};
use crate::core::TargetSpec;

/// What a replay is run with: the handler's settings and targets.
pub struct ReplaySettings<'a> {
    pub drain: &'a DrainSettings,
    pub placeholder: &'a PlaceholderSettings,
    pub targets: &'a [TargetSpec],
    pub rule: InstanceIdRule,
    /// DRAIN_SURGE: each step surges the Deployments it evicts from (`replay_surge`).
    pub surge: bool,
}

/// The replay of the drain of the first notice in `event` naming an instance with a node in
/// `state`: the step at `at`, then up to `checks` further checks at their planned times. One
/// JSON object per step.
pub fn replay(
    event: &str,
    mut state: ClusterState,
    at: f64,
    checks: u32,
    settings: &ReplaySettings,
) -> Result<Vec<Value>, String> {
    let notices: Vec<Notice> = parse_event_document(event, settings.rule)
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter_map(|(_, parsed)| match parsed {
            Parsed::Notice(n) => Some(n),
            _ => None,
        })
        .collect();
    let (notice, instance, node_name) = notices
        .iter()
        .find_map(|n| {
            state.instances_of_notice(n).into_iter().find_map(|i| {
                let node = state.node_of(&i)?.metadata.name.clone().unwrap_or_default();
                Some((n, i, node))
            })
        })
        .ok_or(
            "no notice of the event names an instance (or a capacity reservation) with a node in STATE (matched by spec.providerID, or by the reservation label)",
        )?;
    let mut lines = Vec::new();
    let mut now = at;
    for number in 1..=checks + 1 {
        let context = DrainContext {
            drain_id: &instance,
            now,
            event_id: &notice.event_id,
            targets: settings.targets,
            placeholder: settings.placeholder,
        };
        let observed = state.observe(&node_name, &instance, settings.targets);
        let mut step = plan_drain(
            &observed.view,
            &observed.pod_views,
            notice,
            now,
            settings.drain,
        );
        // The surges, as the handler's step adds them: with DRAIN_SURGE on, and at the drain's
        // end whatever DRAIN_SURGE says now.
        if settings.surge {
            let workloads = state.workloads(&observed, settings.targets);
            plan_surges(&mut step, &observed.pod_views, &workloads, &instance, now);
        }
        plan_releases(&mut step, &state.surged(settings.targets), &instance);
        let applied = state.apply(&observed, &step, &context);
        let next_check = match step.last() {
            Command::WaitUntil { at } => Some(*at),
            _ => None,
        };
        lines.push(json!({
            "step": number,
            "at": format_time(now),
            "node": node_name,
            "instance": instance,
            "replacement_seen": observed.view.replacement,
            // The handler logs this and plans as if the node had no drain record.
            "drain_annotations_unreadable": observed.state_error,
            "phase": step.state.as_ref().map(|s| s.phase.as_str()),
            "commands": step.commands.iter().map(command_text).collect::<Vec<_>>(),
            "next_check": next_check.map(format_time),
            "why": why(&observed.view, &step, now, settings.surge),
            "applied": applied_json(&applied),
        }));
        match next_check {
            Some(t) => now = t,
            None => break,
        }
    }
    Ok(lines)
}

/// A command in one line, for people.
pub fn command_text(c: &Command) -> String {
    match c {
        Command::RecordState { state } => format!("record-state {}", state.phase.as_str()),
        Command::Cordon => "cordon".into(),
        Command::Taint { kind } => format!("taint prewarm.io/draining={kind}:NoSchedule"),
        Command::RequestReplacement { gpus, .. } => format!("request-replacement gpus={gpus}"),
        Command::Evict {
            pod,
            tier,
            grace_s,
            delete_if_blocked,
            ..
        } => format!(
            "evict {pod} tier={tier}{}{}",
            grace_s.map_or(String::new(), |g| format!(" grace={g}s")),
            if *delete_if_blocked {
                " delete-if-blocked"
            } else {
                ""
            }
        ),
        Command::Surge {
            namespace,
            deployment,
            k,
            held,
        } => format!("surge {namespace}/{deployment} k={k} held={}", held.len()),
        Command::ReleaseSurge {
            namespace,
            deployment,
            drain,
        } => format!("release-surge {namespace}/{deployment} drain={drain}"),
        Command::HandOver => "hand-over".into(),
        Command::ReleaseReplacement => "release-replacement".into(),
        Command::Undrain { uncordon, .. } => format!("undrain uncordon={uncordon}"),
        Command::Announce { reason, .. } => format!("announce {reason}"),
        Command::WaitUntil { at } => format!("wait-until {}", format_time(*at)),
        Command::Done(f) => format!("done {}", finish_text(f)),
    }
}

fn finish_text(f: &Finish) -> String {
    serde_json::to_value(f)
        .ok()
        .and_then(|v| v.get("finish").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_default()
}

/// Why the step decided what it did, from what it saw and the clock, in one sentence.
pub fn why(seen: &NodeView, step: &DrainStep, now: f64, surge: bool) -> String {
    let Some(state) = step.state.as_ref() else {
        let finish = match step.last() {
            Command::Done(f) => finish_text(f),
            _ => String::new(),
        };
        return format!("this notice does not hold the node's drain: {finish}");
    };
    let mut parts = Vec::new();
    if seen
        .state
        .as_ref()
        .is_none_or(|s| s.event_id != state.event_id)
    {
        parts.push(format!(
            "{} notice {} claims the node (eviction deadline {})",
            state.kind,
            state.event_id,
            state.deadline.map_or("none".into(), format_time)
        ));
    }
    parts.push(
        match seen.replacement {
            ReplacementSeen::Running => {
                "this drain's placeholder runs on a Ready node elsewhere: the replacement is ready"
            }
            ReplacementSeen::Pending => "this drain's placeholder is not running on a Ready node elsewhere yet",
            ReplacementSeen::Absent => "this drain has no placeholder",
            ReplacementSeen::NoTarget => {
                "no target with a balloon namespace manages the node's NodePool: no placeholder can be made"
            }
        }
        .to_string(),
    );
    let evicts = step.evictions().count();
    let past_deadline = state.deadline.is_some_and(|d| now >= d);
    if evicts > 0 {
        let because = if past_deadline {
            "the eviction deadline has come"
        } else if state.replacement_ready_at.is_some() {
            "the replacement was ready"
        } else {
            "a pod's grace period outlasts the time left (its due time: the instance's end minus its grace)"
        };
        parts.push(format!("{evicts} pod(s) evicted because {because}"));
        if surge && !past_deadline && state.replacement_ready_at.is_some() {
            parts.push(
                "with DRAIN_SURGE on, the function first raises each Deployment by its pods here and holds their evictions until the surge pods are Ready or the pod is due (surge pods never turn Ready offline)"
                    .into(),
            );
        }
    }
    match step.last() {
        Command::WaitUntil { at } => {
            let when = if state.deadline == Some(*at) {
                "the eviction deadline"
            } else {
                "the next recheck or a pod's due time, whichever is first"
            };
            parts.push(format!("next check at {} ({when})", format_time(*at)));
        }
        Command::Done(f) => parts.push(format!("the drain ends: {}", finish_text(f))),
        _ => {}
    }
    parts.join("; ")
}

fn applied_json(a: &Applied) -> Value {
    json!({
        "evicted": a.evicted,
        "blocked": a.blocked,
        "deleted_past_pdb": a.deleted_past_pdb,
        "placeholder": a.placeholder,
        "placeholder_requests": a.placeholder_requests,
        "released": a.released,
        "surges": a.surges,
    })
}
