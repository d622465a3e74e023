//! Drain planning: given what the node and its pods look like now, the notice and the clock,
//! which commands to run in this step. Like Karpenter's disruption controller, planning and
//! execution are separate: this function only decides; the executor in
//! `adapters::kube::drain` carries the commands out, and the next check plans again from what
//! it then observes. Every command is idempotent, so re-planning after a partial step is safe.
//!
//! Order of a drain (make before break):
//! 1. cordon and taint the node (`prewarm.io/draining=<kind>:NoSchedule`), record the state;
//! 2. request a replacement: a placeholder pod of this drain's own, shaped like the pods to move
//!    (`replacement`), made again if a real pod preempted it while the drain waits;
//! 3. wait until that placeholder runs on a Ready node other than this one, or until the
//!    eviction deadline, whichever is first;
//! 4. evict in tiers: ordinary pods first, then critical pods (system priority classes) once the
//!    first tier is gone. DaemonSet and mirror pods are left alone (they die with the node and
//!    would only come back). Pods annotated `karpenter.sh/do-not-disrupt` are evicted only at
//!    the deadline: their owners asked not to be moved for convenience, and make-before-break is
//!    a convenience, but at the deadline the instance goes away regardless and an eviction (which
//!    still honours PodDisruptionBudgets and grace periods) is kinder than a power-off. A notice
//!    without a deadline (rebalance) leaves them where they are.
//!    The step that starts evicting everyone deletes the placeholder first (hand-over): the
//!    evicted pods' successors then land in the room it held.
//! 5. done when nothing evictable is left (the placeholder is deleted again, idempotently).

use super::actions::Action;
use super::deadline::{eviction_deadline, instance_end};
use super::model::{
    Command, DrainSettings, DrainStep, Finish, NodeView, PodView, ReplacementSeen,
    NO_DEADLINE_MAX_WAIT_S,
};
use super::notice::{Notice, NoticeStatus};
use super::pods::{holding_pods, pod_due, pod_due_at, pods_to_evict};
use super::state::{DrainState, Phase};

/// A notice takes a node over from the notice that owns its drain only when it must act sooner.
fn supersedes(new_deadline: Option<f64>, old_deadline: Option<f64>) -> bool {
    match (new_deadline, old_deadline) {
        (Some(new), Some(old)) => new < old,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// Whether the drain recorded in `s` still has a live owner at `now`. A drain that is over
/// (drained, prewarmed) needs none. An active one steps at least every `recheck_s`; a crashed
/// invocation's message comes back after the queue's visibility timeout. Silence for
/// `owner_stale_s` means the owner's message is gone (DLQ, deleted): the drain is orphaned.
pub fn owner_alive(s: &DrainState, now: f64, settings: &DrainSettings) -> bool {
    match s.phase {
        Phase::Drained | Phase::Prewarmed => true,
        Phase::WaitingForReplacement | Phase::Evicting => {
            let last = s.last_step_at.unwrap_or(s.started_at);
            now - last < settings.owner_stale_s()
        }
    }
}

/// Plans one step of the drain of `node` for `notice` at `now`.
pub fn plan_drain(
    node: &NodeView,
    pods: &[PodView],
    notice: &Notice,
    now: f64,
    settings: &DrainSettings,
) -> DrainStep {
    if notice.status == NoticeStatus::Closed {
        return plan_undrain(node, notice);
    }
    // A delivery of a notice that has since been closed (its continuation, an older update).
    if let Some((id, closed_at)) = &node.closed_event {
        if *id == notice.event_id && notice.time <= *closed_at {
            return DrainStep::finish(vec![], node.state.clone(), Finish::NothingToUndo);
        }
    }
    let action = settings.actions.for_kind(notice.kind);
    if action == Action::Ignore {
        return DrainStep::finish(vec![], node.state.clone(), Finish::Ignored);
    }
    let deadline = eviction_deadline(notice, settings.eviction_budget_s);

    let mut state = match &node.state {
        // A newer update of the same notice (AWS Health: same eventArn, later `time`; e.g. the
        // window moved): its times replace the recorded ones, whatever the last step was.
        Some(s) if s.event_id == notice.event_id && notice.time > s.notice_time => DrainState {
            notice_time: notice.time,
            deadline,
            instance_end: instance_end(notice),
            ..s.clone()
        },
        // An older update (or its continuation) arriving after a newer one: the newer drives.
        Some(s) if s.event_id == notice.event_id && notice.time < s.notice_time => {
            return DrainStep::finish(
                vec![],
                Some(s.clone()),
                Finish::Superseded {
                    by_event: s.event_id.clone(),
                },
            )
        }
        // The same notice delivered twice: the delivery that stepped moments ago carries it.
        Some(s)
            if s.event_id == notice.event_id
                && !matches!(s.phase, Phase::Drained | Phase::Prewarmed)
                && s.last_step_at
                    .is_some_and(|t| now >= t && now - t < settings.recheck_s / 2.0) =>
        {
            return DrainStep::finish(vec![], Some(s.clone()), Finish::Duplicate)
        }
        Some(s) if s.event_id == notice.event_id => s.clone(),
        Some(s) if !supersedes(deadline, s.deadline) && owner_alive(s, now, settings) => {
            return DrainStep::finish(
                vec![],
                Some(s.clone()),
                Finish::Superseded {
                    by_event: s.event_id.clone(),
                },
            )
        }
        // Taking over (an earlier deadline, or an owner gone silent) keeps what was done
        // (cordon, replacement) and moves the deadline to the new notice's.
        Some(s) => DrainState {
            event_id: notice.event_id.clone(),
            kind: notice.kind,
            notice_time: notice.time,
            deadline,
            instance_end: instance_end(notice),
            finished_at: None,
            phase: match s.phase {
                Phase::Drained | Phase::Prewarmed => Phase::WaitingForReplacement,
                p => p,
            },
            ..s.clone()
        },
        None => DrainState {
            event_id: notice.event_id.clone(),
            kind: notice.kind,
            phase: Phase::WaitingForReplacement,
            notice_time: notice.time,
            deadline,
            started_at: now,
            replacement_requested_at: None,
            replacement_ready_at: None,
            evicting_since: None,
            finished_at: None,
            replacement_gpus: 0,
            instance_end: instance_end(notice),
            last_step_at: None,
            // A cordon without prewarm's taint is someone else's (an operator's, a maintenance
            // tool's): remembered so that an un-drain leaves it.
            user_cordoned: node.unschedulable && !node.tainted,
        },
    };
    state.last_step_at = Some(now);
    // From here on the drain's own record rules: a re-delivery recomputes nothing from the body.
    let deadline = state.deadline;
    let end = state.instance_end;

    let mut commands = Vec::new();
    if !node.unschedulable {
        commands.push(Command::Cordon);
    }
    if !node.tainted {
        commands.push(Command::Taint { kind: state.kind });
    }

    let holding = holding_pods(pods, now);
    let to_move = holding.iter().filter(|p| !p.terminating());
    // Ready: this drain's own placeholder runs elsewhere — capacity no other drain counts. A
    // drain with pods that request room waits for one: GPU pods always (where no placeholder can
    // be made, until their deadline, as before), CPU/memory-only pods where a placeholder can be
    // made (their requests may fit no other node; the placeholder finds out, and makes Karpenter
    // launch one while they still serve). Where none can be made, CPU/memory-only pods go at once:
    // nothing would come of waiting, and Karpenter gets the whole notice as lead time. Pods with
    // no requests fit anywhere.
    let gpus_to_move: u32 = to_move.clone().map(|p| p.gpus).sum();
    let room_to_move = to_move.clone().any(|p| p.requests_room);
    let needs_placeholder =
        gpus_to_move > 0 || (room_to_move && node.replacement != ReplacementSeen::NoTarget);
    let ready = !needs_placeholder || node.replacement == ReplacementSeen::Running;
    if ready && state.replacement_ready_at.is_none() {
        state.replacement_ready_at = Some(now);
    }
    let past_deadline = deadline.is_some_and(|d| now >= d);
    let waited_too_long = deadline.is_none() && now >= state.notice_time + NO_DEADLINE_MAX_WAIT_S;
    // cordon-prewarm without a deadline only prepares: if no notice with a deadline took over
    // within the wait (a rebalance that never became a spot warning), the cordon expires, whether
    // or not its replacement ever became ready. (Prewarmed drains are expired by the tick.)
    if action == Action::CordonPrewarm && waited_too_long && state.evicting_since.is_none() {
        return DrainStep::finish(
            vec![
                Command::Undrain {
                    uncordon: !state.user_cordoned,
                    closed_by: None,
                },
                Command::ReleaseReplacement,
            ],
            None,
            Finish::Undrained,
        );
    }
    // A pod whose grace period would outlast the instance must start going earlier than the
    // others: the instance's end minus its grace period.
    let any_due = holding.iter().any(|p| pod_due(p, deadline, end, now));

    let start_evicting = match action {
        Action::EvictNow => true,
        Action::Drain => ready || past_deadline || waited_too_long || any_due,
        Action::CordonPrewarm => past_deadline || any_due,
        Action::Ignore => unreachable!("handled above"),
    };
    if state.evicting_since.is_none() && start_evicting {
        state.evicting_since = Some(now);
    }
    // Until eviction starts (a step that starts it needs none: the evicted pods ask for
    // their own room), the placeholder is (re)made whenever it is missing: the first step, or
    // after a real pod preempted it (it has the balloon priority).
    if needs_placeholder
        && matches!(
            node.replacement,
            ReplacementSeen::Absent | ReplacementSeen::NoTarget
        )
        && state.evicting_since.is_none()
    {
        commands.push(Command::RequestReplacement { gpus: gpus_to_move });
        state.replacement_requested_at.get_or_insert(now);
        state.replacement_gpus = gpus_to_move;
    }

    // The next check: after `recheck_s`, or earlier at the deadline or a pod's own due time.
    let mut wake_points: Vec<f64> = deadline.into_iter().collect();
    wake_points.extend(holding.iter().filter_map(|p| pod_due_at(p, deadline, end)));
    let next_check = {
        let soon = now + settings.recheck_s;
        wake_points
            .into_iter()
            .filter(|&t| t > now && t < soon)
            .fold(soon, f64::min)
    };

    if state.evicting_since.is_none() {
        if action == Action::CordonPrewarm && ready && deadline.is_none() {
            state.phase = Phase::Prewarmed;
            state.finished_at = Some(now);
            commands.insert(
                0,
                Command::RecordState {
                    state: state.clone(),
                },
            );
            return DrainStep::finish(commands, Some(state), Finish::Prewarmed);
        }
        state.phase = if action == Action::CordonPrewarm && ready {
            Phase::Prewarmed
        } else {
            Phase::WaitingForReplacement
        };
        commands.insert(
            0,
            Command::RecordState {
                state: state.clone(),
            },
        );
        commands.push(Command::WaitUntil { at: next_check });
        return DrainStep {
            commands,
            state: Some(state),
        };
    }

    // Evicting. do-not-disrupt pods count only once the deadline has passed; with no deadline
    // they stay (see the module comment).
    let in_scope: Vec<&PodView> = holding
        .iter()
        .copied()
        .filter(|p| !p.do_not_disrupt || past_deadline)
        .collect();
    let protected_waiting = holding.len() - in_scope.len();
    if in_scope.is_empty() && (protected_waiting == 0 || deadline.is_none()) {
        state.phase = Phase::Drained;
        state.finished_at = Some(now);
        commands.insert(
            0,
            Command::RecordState {
                state: state.clone(),
            },
        );
        commands.push(Command::ReleaseReplacement);
        return DrainStep::finish(commands, Some(state), Finish::Drained);
    }

    // Every pod goes (tier by tier) once the replacement was ready, at the deadline, or when
    // told to; before that only pods due by their own grace period.
    let everyone = match action {
        Action::EvictNow => true,
        Action::Drain => state.replacement_ready_at.is_some() || past_deadline || waited_too_long,
        Action::CordonPrewarm => past_deadline,
        Action::Ignore => unreachable!("handled above"),
    };
    let evict = pods_to_evict(&in_scope, everyone, deadline, end, now)
        .into_iter()
        .map(|c| match c {
            Command::Evict {
                pod,
                tier,
                uid,
                grace_s,
                ..
            } => Command::Evict {
                pod,
                tier,
                uid,
                grace_s,
                delete_if_blocked: settings.delete_past_pdb && past_deadline,
            },
            other => other,
        });
    state.phase = Phase::Evicting;
    commands.insert(
        0,
        Command::RecordState {
            state: state.clone(),
        },
    );
    // Hand-over: the placeholder goes in the same step, right before the evictions it stands in
    // for, so the evicted pods' successors land in the room it held.
    if everyone
        && !matches!(
            node.replacement,
            ReplacementSeen::Absent | ReplacementSeen::NoTarget
        )
    {
        commands.push(Command::ReleaseReplacement);
    }
    commands.extend(evict);
    commands.push(Command::WaitUntil { at: next_check });
    DrainStep {
        commands,
        state: Some(state),
    }
}

/// A closed notice: undo what this notice's drain did. A drain owned by another notice is left
/// alone; a node this notice never touched has nothing to undo.
fn plan_undrain(node: &NodeView, notice: &Notice) -> DrainStep {
    match &node.state {
        Some(s) if s.event_id == notice.event_id => DrainStep::finish(
            vec![
                Command::Undrain {
                    uncordon: !s.user_cordoned,
                    closed_by: Some((notice.event_id.clone(), notice.time)),
                },
                Command::ReleaseReplacement,
            ],
            None,
            Finish::Undrained,
        ),
        Some(s) => DrainStep::finish(
            vec![],
            Some(s.clone()),
            Finish::Superseded {
                by_event: s.event_id.clone(),
            },
        ),
        None => DrainStep::finish(vec![], None, Finish::NothingToUndo),
    }
}
