//! Drain planning: given what the node and its pods look like now, the notice and the clock,
//! which commands to run in this step. Like Karpenter's disruption controller, planning and
//! execution are separate: this function only decides; the executor in
//! `adapters::kube::drain` carries the commands out, and the next check plans again from what
//! it then observes. Every command is idempotent, so re-planning after a partial step is safe.
//!
//! Order of a drain (make before break):
//! 1. cordon and taint the node (`prewarm.io/draining=<kind>:NoSchedule`), record the state;
//! 2. request a replacement: a placeholder pod of this drain's own, shaped like the pods to move
//!    (`replacement`), made again if a real pod preempted it while the drain waits, and asked
//!    for until everyone goes (a pod whose long grace period makes it due early does not stop
//!    the others' replacement, and is not in the placeholder of the step that evicts it);
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
//!    evicted pods' successors then land in the room it held. The drain's surges (raised by the
//!    executor's surge gate for these evictions) stay raised.
//! 5. done when nothing evictable is left: the placeholder is deleted again (idempotently) and
//!    the drain's surges are given back. An un-drain (closed notice, expired prewarm, abandoned
//!    drain) gives both back too.

use super::actions::Action;
use super::deadline::{eviction_deadline, instance_end, issued_at};
use super::false_alarm::{cooling_down_until, false_alarm_at};
use super::model::{
    no_deadline_wait_end, Command, DrainSettings, DrainStep, Finish, NodeView, PodView,
    ReplacementSeen, BACKOFF_AFTER_S, CHECK_EARLY_S, EVENT_ABANDONED, EVENT_WITHOUT_REPLACEMENT,
    MAX_CHECK_GAP_S, NO_DEADLINE_MAX_WAIT_S, SURVIVOR_GRACE_S,
};
use super::notice::{Notice, NoticeStatus};
use super::pods::{holding_pods, pod_due, pod_due_at, pods_to_evict};
use super::state::format_time;
use super::state::{DrainState, Phase};

/// A notice takes a node over from the notice that owns its drain only when it must act sooner.
fn supersedes(new_deadline: Option<f64>, old_deadline: Option<f64>) -> bool {
    match (new_deadline, old_deadline) {
        (Some(new), Some(old)) => new < old,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// The earlier of two optional times (None: no such time, so the other one).
fn earliest(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
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
            // A backed-off drain's next check may be minutes away: its silence counts from when
            // that check was due, less one recheck (so from the last step when not backed off).
            let heard_at = s
                .next_check_at
                .map_or(last, |t| last.max(t - settings.recheck_s));
            now - heard_at < settings.owner_stale_s()
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
        return plan_undrain(node, notice, now);
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
    // A new rebalance for a node whose last one was a false alarm within the hour: no flapping.
    if let Some(until) = cooling_down_until(node, notice, now) {
        return DrainStep::finish(vec![], None, Finish::CoolingDown { until });
    }
    let deadline = eviction_deadline(notice, settings.eviction_budget_s);
    // What is recorded: the issued time bounded by SQS's SentTimestamp (the origin of waits), and
    // the envelope time as claimed (which tells one update of a Health event from another).
    let (issued, claimed) = (issued_at(notice), Some(notice.time));
    let recorded_claim = |s: &DrainState| s.event_time.unwrap_or(s.notice_time);

    let mut state = match &node.state {
        // A newer update of the same notice (AWS Health: same eventArn, later `time`; e.g. the
        // window moved): its times replace the recorded ones, whatever the last step was.
        Some(s) if s.event_id == notice.event_id && notice.time > recorded_claim(s) => DrainState {
            notice_time: issued,
            event_time: claimed,
            deadline,
            instance_end: instance_end(notice),
            ..s.clone()
        },
        // An older update (or its continuation) arriving after a newer one: the newer drives.
        Some(s) if s.event_id == notice.event_id && notice.time < recorded_claim(s) => {
            return DrainStep::finish(
                vec![],
                Some(s.clone()),
                Finish::Superseded {
                    by_event: s.event_id.clone(),
                },
            )
        }
        // The same notice delivered again well before the check its last step planned: that
        // check carries the drain on, so this delivery ends. The planned check itself (however
        // soon after the last step: a deadline 5 s later) is not a duplicate, nor is any message
        // the handler scheduled (the retry of a step that failed after recording its check, the
        // continuation after a failed release): it is the one carrying the drain.
        Some(s)
            if s.event_id == notice.event_id
                && !notice.scheduled
                && !matches!(s.phase, Phase::Drained | Phase::Prewarmed)
                && s.next_check_at.is_some_and(|t| now < t - CHECK_EARLY_S) =>
        {
            return DrainStep::finish(vec![], Some(s.clone()), Finish::Duplicate)
        }
        // This notice's drain is over and a message the handler scheduled comes late (a second
        // chain of continuations, once an SQS double delivery let one start): it ends here and
        // writes nothing, so a finished drain is never stepped again by its own chain.
        Some(s)
            if s.event_id == notice.event_id && notice.scheduled && s.phase == Phase::Drained =>
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
        // (cordon, replacement) and the earliest deadline and end of the two: a rebalance (no
        // deadline) adopting a silent spot warning's drain still evicts at the warning's deadline.
        Some(s) => DrainState {
            event_id: notice.event_id.clone(),
            kind: notice.kind,
            notice_time: issued,
            event_time: claimed,
            deadline: earliest(deadline, s.deadline),
            instance_end: earliest(instance_end(notice), s.instance_end),
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
            notice_time: issued,
            event_time: claimed,
            deadline,
            started_at: now,
            replacement_requested_at: None,
            replacement_ready_at: None,
            evicting_since: None,
            finished_at: None,
            replacement_gpus: 0,
            instance_end: instance_end(notice),
            last_step_at: None,
            next_check_at: None,
            // A cordon without prewarm's taint is someone else's (an operator's, a maintenance
            // tool's): remembered so that an un-drain leaves it.
            user_cordoned: node.unschedulable && !node.tainted,
            pods_moved: 0,
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
    let waited_too_long = deadline.is_none() && now >= no_deadline_wait_end(&state);
    // cordon-prewarm without a deadline only prepares: if no notice with a deadline took over
    // within the wait (a rebalance that never became a spot warning), the cordon expires, whether
    // or not its replacement ever became ready. (Prewarmed drains are expired by the tick.)
    if action == Action::CordonPrewarm && waited_too_long && state.evicting_since.is_none() {
        return end_undrained(&state, notice, vec![], now);
    }
    // A pod whose grace period would outlast the instance must start going earlier than the
    // others: the instance's end minus its grace period.
    let any_due = holding.iter().any(|p| pod_due(p, deadline, end, now));
    // The placeholder stands for the pods still to move that this step does not evict by their
    // own due time: an evicted pod's successor (its controller's) is a pending pod that asks for
    // its own room, and a placeholder counting it too would be a second pending pod for the same
    // room (at a NodePool's cap it might never run, and the others would go without a surge).
    let stands_for: Vec<&PodView> = to_move
        .clone()
        .filter(|p| !pod_due(p, deadline, end, now))
        .copied()
        .collect();

    let start_evicting = match action {
        Action::EvictNow => true,
        Action::Drain => ready || past_deadline || waited_too_long || any_due,
        Action::CordonPrewarm => past_deadline || any_due,
        Action::Ignore => unreachable!("handled above"),
    };
    if state.evicting_since.is_none() && start_evicting {
        state.evicting_since = Some(now);
    }
    // Every pod goes (tier by tier) once the replacement was ready, at the deadline, or when
    // told to; before that only pods due by their own grace period.
    let everyone = state.evicting_since.is_some()
        && match action {
            Action::EvictNow => true,
            Action::Drain => {
                state.replacement_ready_at.is_some() || past_deadline || waited_too_long
            }
            Action::CordonPrewarm => past_deadline,
            Action::Ignore => unreachable!("handled above"),
        };
    // Until everyone goes (that step needs none: the evicted pods ask for their own room), the
    // placeholder is (re)made whenever it is missing: the first step, after a real pod preempted
    // it (it has the balloon priority), and while only pods due by their long grace period are
    // going — the node's other pods still wait for warm capacity.
    if needs_placeholder
        && matches!(
            node.replacement,
            ReplacementSeen::Absent | ReplacementSeen::NoTarget
        )
        && !everyone
        && stands_for.iter().any(|p| p.requests_room)
    {
        let gpus = stands_for.iter().map(|p| p.gpus).sum();
        commands.push(Command::RequestReplacement {
            gpus,
            pods: stands_for.iter().map(|p| p.pod.clone()).collect(),
        });
        state.replacement_requested_at.get_or_insert(now);
        state.replacement_gpus = gpus;
    }

    // The next check: after `recheck_s` (longer for a drain stalled for a while), or earlier at
    // the deadline, a pod's own due time or the end of a deadline-less wait.
    let mut wake_points: Vec<f64> = deadline.into_iter().collect();
    wake_points.extend(holding.iter().filter_map(|p| pod_due_at(p, deadline, end)));
    // Past `forced_at` everyone goes whatever the replacement. A drain still evicting
    // `SURVIVOR_GRACE_S` after the end (or `forced_at` without one), and after it started
    // evicting (a notice that came late or a window already open gets its ten minutes too),
    // could not finish: it ends.
    let forced_at = deadline.unwrap_or(no_deadline_wait_end(&state));
    let give_up_at = state
        .evicting_since
        .map(|since| end.unwrap_or(forced_at).max(since) + SURVIVOR_GRACE_S);
    wake_points.push(forced_at);
    wake_points.extend(give_up_at);
    let next_check = {
        let soon = now + check_gap(now - last_milestone(&state), settings.recheck_s);
        wake_points
            .into_iter()
            .filter(|&t| t > now && t < soon)
            .fold(soon, f64::min)
    };
    state.next_check_at = Some(next_check);

    if state.evicting_since.is_none() {
        if action == Action::CordonPrewarm && ready && deadline.is_none() {
            state.phase = Phase::Prewarmed;
            state.finished_at = Some(now);
            state.next_check_at = None;
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
    // Evicting everyone with no warm capacity (none can be made, or the placeholder never ran)
    // because the deadline or the end of the wait came: said once, at the first step past it.
    let previous_step = node
        .state
        .as_ref()
        .filter(|s| s.event_id == state.event_id)
        .and_then(|s| s.last_step_at);
    if everyone
        && needs_placeholder
        && state.replacement_ready_at.is_none()
        && (past_deadline || waited_too_long)
        && previous_step.is_none_or(|t| t < forced_at)
    {
        commands.push(without_replacement(node.replacement, &state, deadline));
    }
    if in_scope.is_empty() && (protected_waiting == 0 || deadline.is_none()) {
        state.phase = Phase::Drained;
        state.finished_at = Some(now);
        state.next_check_at = None;
        commands.insert(
            0,
            Command::RecordState {
                state: state.clone(),
            },
        );
        commands.push(Command::ReleaseReplacement);
        return DrainStep::finish(commands, Some(state), Finish::Drained);
    }
    // Pods still here `SURVIVOR_GRACE_S` after the instance's announced end (or the end of a
    // deadline-less wait) on a node that is still there: a budget that never allows their
    // eviction, or a node that was not reclaimed after all. Checking on would cycle for ever;
    // the drain ends, the node is un-drained (as the tick does with a survivor), and an Event
    // says why.
    if give_up_at.is_some_and(|t| now >= t) {
        let past = match end {
            Some(e) => format!("the instance's announced end {}", format_time(e)),
            None => format!(
                "the end of the wait for a replacement {}",
                format_time(forced_at)
            ),
        };
        let note = format!(
            "{} pod(s) still on the node {SURVIVOR_GRACE_S} s past {past} and the start of eviction: a PodDisruptionBudget that never allowed their eviction, or a node that was not reclaimed; the drain of {} notice {} ends and the node is un-drained",
            in_scope.len(),
            state.kind,
            state.event_id,
        );
        let announce = Command::Announce {
            reason: EVENT_ABANDONED.into(),
            note,
        };
        return end_undrained(&state, notice, vec![announce], now);
    }

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
    // for, so the evicted pods' successors land in the room it held. Only the placeholder: the
    // drain's surges stay raised until the drain ends (`ReleaseReplacement`), or the surge pods
    // raised for these very evictions would be given back in the step that raised them.
    if everyone
        && !matches!(
            node.replacement,
            ReplacementSeen::Absent | ReplacementSeen::NoTarget
        )
    {
        commands.push(Command::HandOver);
    }
    commands.extend(evict);
    commands.push(Command::WaitUntil { at: next_check });
    DrainStep {
        commands,
        state: Some(state),
    }
}

/// Ends a drain that will not go on here: `first`, then the node un-drained (prewarm's cordon
/// lifted) and the placeholder released. The notice is remembered as closed, so deliveries of it
/// still in the queue (a duplicate, the at-least-once copy of this very message) do not drain
/// the node again; a rebalance's drain is remembered as a false alarm (`false_alarm`).
fn end_undrained(state: &DrainState, notice: &Notice, first: Vec<Command>, now: f64) -> DrainStep {
    let mut commands = first;
    commands.extend([
        Command::Undrain {
            uncordon: !state.user_cordoned,
            closed_by: Some((state.event_id.clone(), notice.time)),
            false_alarm_at: false_alarm_at(state, now),
        },
        Command::ReleaseReplacement,
    ]);
    DrainStep::finish(commands, None, Finish::Undrained)
}

/// The last milestone of a drain: its claim, the replacement asked for or ready, eviction started.
fn last_milestone(s: &DrainState) -> f64 {
    [
        s.replacement_requested_at,
        s.replacement_ready_at,
        s.evicting_since,
    ]
    .into_iter()
    .flatten()
    .fold(s.started_at, f64::max)
}

/// The gap to the next check of a drain that reached its last milestone `stalled_for` seconds
/// ago: `recheck_s` for `BACKOFF_AFTER_S`, then a quarter of the time stalled, at most
/// `MAX_CHECK_GAP_S` (a Health window weeks away is checked every 15 minutes, not 15 seconds).
fn check_gap(stalled_for: f64, recheck_s: f64) -> f64 {
    if stalled_for < BACKOFF_AFTER_S {
        recheck_s
    } else {
        (stalled_for / 4.0).clamp(recheck_s, MAX_CHECK_GAP_S.max(recheck_s))
    }
}

/// The Event of a drain that evicts everyone with no warm capacity, saying why.
fn without_replacement(seen: ReplacementSeen, s: &DrainState, deadline: Option<f64>) -> Command {
    let why = match seen {
        ReplacementSeen::NoTarget => {
            "no prewarm target manages this node's NodePool, so no replacement could be made"
                .to_string()
        }
        _ => format!(
            "its replacement placeholder (asked for at {}) never ran on a Ready node",
            s.replacement_requested_at.map_or("-".into(), format_time)
        ),
    };
    let when = match deadline {
        Some(d) => format!("the eviction deadline {}", format_time(d)),
        None => format!("the end of the {NO_DEADLINE_MAX_WAIT_S} s wait for a replacement"),
    };
    Command::Announce {
        reason: EVENT_WITHOUT_REPLACEMENT.into(),
        note: format!(
            "evicting without warm capacity at {when}: {why} (notice {}, {})",
            s.event_id, s.kind
        ),
    }
}

/// A closed notice: undo what this notice's drain did. A drain owned by another notice is left
/// alone; a node this notice never touched has nothing to undo. (The tick closes a survivor's
/// drain this way: a rebalance's is remembered as a false alarm.)
fn plan_undrain(node: &NodeView, notice: &Notice, now: f64) -> DrainStep {
    match &node.state {
        Some(s) if s.event_id == notice.event_id => DrainStep::finish(
            vec![
                Command::Undrain {
                    uncordon: !s.user_cordoned,
                    closed_by: Some((notice.event_id.clone(), notice.time)),
                    false_alarm_at: false_alarm_at(s, now),
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
