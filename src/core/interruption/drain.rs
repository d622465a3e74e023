//! The drain's state machine. [`plan_drain`] plans one step of a node's drain from what the node
//! and its pods look like now, the notice and the clock: a claim (whose drain this is, whether
//! this delivery carries it on, and the phase the step starts in), then the function of that
//! phase, each of whose returns names the phase the step leaves the drain in (`Step::wait`,
//! `Step::end`, `end_undrained`). Like Karpenter's disruption controller, planning and execution
//! are separate: this only decides; the executor in `adapters::kube::drain` carries the commands
//! out, and the next check plans again from what it then observes. Every command is idempotent,
//! so re-planning after a partial step is safe.
//!
//! | From | Event | To | Commands | Table |
//! |---|---|---|---|---|
//! | — | a notice for an unclaimed node | waiting | record the state, cordon, taint (`prewarm.io/draining=<kind>:NoSchedule`), request the placeholder, wait | `claim_of_a_node` |
//! | any | the notice is ignored (`ACTIONS`), or a rebalance within an hour of the node's false alarm | — | `Ignored`, `CoolingDown` | `claim_of_a_node` |
//! | active | the same notice again, more than 1 s before the check its last step planned; a message the handler scheduled after the drain is drained; or AWS's copy after it ended (drained, prewarmed) with nothing to do (a straggler is evicted, the first end's time kept) | unchanged | `Duplicate` (the planned check, however soon after the step, and any message the handler scheduled while it is active, carry the drain on) | `deliveries_of_the_owners_notice` |
//! | owner's | a newer update of the same Health event (later `time`) / an older one | unchanged | takes the update's deadline and end / `Superseded` | `deliveries_of_the_owners_notice` |
//! | any | another notice, later or equal deadline, owner alive | unchanged | `Superseded` | `another_notice` |
//! | any | another notice with an earlier deadline, or the owner silent > 4 × recheck + 60 s (from its planned check less one recheck when backed off) | adopted | keeps what was done, and the earlier of the two deadlines and ends | `another_notice` |
//! | owner's | the notice closed (Health `closed`) | un-drained | `Undrain` (the closing update remembered on the node: deliveries issued no later do nothing), `ReleaseReplacement`; another's drain: `Superseded`; a node it never drained: `NothingToUndo` | `closed_notice` |
//! | waiting | check, not ready, before the deadline | waiting | the placeholder made again when missing (a real pod preempted it; the executor makes its room again too), wait | `waiting_to_waiting` |
//! | waiting / evicting | no milestone (claim, placeholder asked for or ready, eviction started) for 10 min | unchanged | checks back off: a quarter of the time stalled, at most 15 min; still at the deadline, a pod's due time, the end of a wait | `waiting_to_waiting` |
//! | waiting | the drain's own placeholder Running on a Ready node elsewhere, the deadline (end − budget), the end of a deadline-less wait (30 min), or `evict-now` | evicting | `HandOver` (the placeholder only: a surge stays raised), then evict tier 1 | `waiting_to_evicting` |
//! | waiting | a pod's end − its grace period | evicting | evict that pod only; the placeholder is asked for the others (and only them) until it runs or the deadline comes | `waiting_to_evicting` |
//! | waiting | the deadline or the end of the wait, the placeholder never ran (or none can be made) | evicting | as above, and the Event `DrainWithoutReplacement` saying why (once) | `waiting_to_evicting` |
//! | waiting | `cordon-prewarm`, ready, no deadline | prewarmed | `Prewarmed`: the pods keep serving | `cordon_prewarm` |
//! | waiting (`cordon-prewarm`) | 30 min after the claim (or the notice, if later), no notice with a deadline came | un-drained | `Undrain` (the notice remembered as closed, so a queued copy does nothing; a rebalance's is a false alarm), `ReleaseReplacement` | `cordon_prewarm` |
//! | evicting | pods left | evicting | evict tier 1, then tier 2 (critical pods); refused ones again at every check; from the deadline, with `DELETE_PAST_PDB_AT_DEADLINE`, delete if a budget refuses; grace cut to the seconds left past the end | `evicting_to_evicting` |
//! | evicting (`DRAIN_SURGE`) | a step that evicts a Deployment's pods, replacement ready, before the deadline | unchanged | `Surge` per such workload (raise by its `k` pods on the node, or renew), before the evictions; the evictions of a workload whose surge pods are not Ready yet move into its `Surge`, held until they are or the pod is due (`surge_step::plan_surges`, after this planner) | `surge_step_tests` |
//! | evicting | nothing evictable left (DaemonSet, mirror, finished pods and pods stuck 60 s past their deletion do not count) | drained | `ReleaseReplacement` (the placeholder and the surges), `Drained` (the executor's Event `DrainFinished`), no continuation | `evicting_to_drained` |
//! | evicting | pods still there 10 min after the later of the announced end (or the end of the wait) and the start of eviction: a budget that never allows their eviction, a node not reclaimed | un-drained | the Event `DrainAbandoned` saying why, `Undrain` (the notice remembered as closed), `ReleaseReplacement` | `evicting_to_undrained` |
//!
//! The tick's part (reservation collection, resume-drain messages, the survivor's un-drain) and the
//! executor's (the node gone mid-drain) are in docs/interruption.md. The tables are in
//! `drain_tests/` (`claim.rs`, `waiting.rs`, `evicting.rs`).
//!
//! Why the rules are as they are:
//! - Ready means this drain's *own* placeholder runs elsewhere: capacity no other drain counts.
//!   A drain with pods that request room waits for one: GPU pods always (where no placeholder
//!   can be made, until their deadline), CPU/memory-only pods where a placeholder can be made
//!   (their requests may fit no other node; the placeholder finds out, and makes Karpenter launch
//!   one while they still serve). Where none can be made, CPU/memory-only pods go at once:
//!   nothing would come of waiting, and Karpenter gets the whole notice as lead time. Pods with
//!   no requests fit anywhere (`cpu_pods_wait_for_a_placeholder_only_where_one_can_be_made`).
//! - DaemonSet and mirror pods are left alone (they die with the node and would only come back).
//!   Pods annotated `karpenter.sh/do-not-disrupt` are evicted only at the deadline: their owners
//!   asked not to be moved for convenience, and make-before-break is a convenience, but at the
//!   deadline the instance goes away regardless and an eviction (which still honours budgets and
//!   grace periods) is kinder than a power-off. A notice without a deadline leaves them.
//! - The hand-over deletes the placeholder in the step that starts evicting everyone, right
//!   before the evictions, so the evicted pods' successors land in the room it held.

use std::ops::ControlFlow;

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

/// Plans one step of the drain of `node` for `notice` at `now`.
pub fn plan_drain(
    node: &NodeView,
    pods: &[PodView],
    notice: &Notice,
    now: f64,
    settings: &DrainSettings,
) -> DrainStep {
    let mut state = match claim(node, notice, now, settings) {
        ControlFlow::Continue(state) => state,
        ControlFlow::Break(step) => return step,
    };
    let step = Step::observe(node, pods, notice, now, settings, &state);
    if step.ready && state.replacement_ready_at.is_none() {
        state.replacement_ready_at = Some(now);
    }
    match state.phase {
        Phase::WaitingForReplacement | Phase::Prewarmed => waiting(state, step),
        Phase::Evicting | Phase::Drained => evicting(state, step),
    }
}

/// The claim: whose drain this is and whether this delivery carries it on. `Break`: the step
/// ends here. `Continue`: the drain's record with this notice's part in it, stamped with this
/// step, in the phase its times say.
fn claim(
    node: &NodeView,
    notice: &Notice,
    now: f64,
    settings: &DrainSettings,
) -> ControlFlow<DrainStep, DrainState> {
    let ends = |state: Option<&DrainState>, f: Finish| {
        ControlFlow::Break(DrainStep::finish(vec![], state.cloned(), f))
    };
    let superseded = |s: &DrainState| {
        let by_event = s.event_id.clone();
        ends(Some(s), Finish::Superseded { by_event })
    };
    if notice.status == NoticeStatus::Closed {
        return ControlFlow::Break(plan_undrain(node, notice, now));
    }
    // A delivery of a notice that has since been closed (its continuation, an older update).
    if let Some((id, closed_at)) = &node.closed_event {
        if *id == notice.event_id && notice.time <= *closed_at {
            return ends(node.state.as_ref(), Finish::NothingToUndo);
        }
    }
    if settings.actions.for_kind(notice.kind) == Action::Ignore {
        return ends(node.state.as_ref(), Finish::Ignored);
    }
    // A new rebalance for a node whose last one was a false alarm within the hour: no flapping.
    if let Some(until) = cooling_down_until(node, notice, now) {
        return ends(None, Finish::CoolingDown { until });
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
            return superseded(s)
        }
        Some(s) if s.event_id == notice.event_id && duplicate(s, notice, now) => {
            return ends(Some(s), Finish::Duplicate)
        }
        Some(s) if s.event_id == notice.event_id => s.clone(),
        Some(s) if !supersedes(deadline, s.deadline) && owner_alive(s, now, settings) => {
            return superseded(s)
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
    // The phase the drain's times say: one that started evicting evicts (a drained drain stepped
    // again, by a re-delivery or an adoption, evicts what came back); one that did not waits.
    if state.evicting_since.is_some() {
        state.phase = Phase::Evicting;
    } else if state.phase != Phase::Prewarmed {
        state.phase = Phase::WaitingForReplacement;
    }
    ControlFlow::Continue(state)
}

/// A delivery of the drain's own notice that another message carries on. AWS's (or SQS's)
/// delivery well before the check the last step planned: that check carries the drain on (the
/// planned check itself, however soon after the last step, e.g. a deadline 5 s later, is not a
/// duplicate). A message the handler scheduled (the retry of a step that failed after recording
/// its check, the continuation after a failed release) is the one carrying an active drain; it
/// is a duplicate only once the drain is drained (a second chain of continuations, once an SQS
/// double delivery let one start), so a finished drain is never stepped again by its own chain.
fn duplicate(s: &DrainState, notice: &Notice, now: f64) -> bool {
    if notice.scheduled {
        s.phase == Phase::Drained
    } else {
        !matches!(s.phase, Phase::Drained | Phase::Prewarmed)
            && s.next_check_at.is_some_and(|t| now < t - CHECK_EARLY_S)
    }
}

/// Waiting for the replacement (or prewarmed, cordon-prewarm's wait for a notice with a
/// deadline): evicting starts when the replacement is ready, at the deadline or the end of the
/// wait, when a pod is due by its grace period, or at once when told to; until then the
/// placeholder is kept asked for.
fn waiting(mut state: DrainState, mut step: Step) -> DrainStep {
    // cordon-prewarm without a deadline only prepares: if no notice with a deadline took over
    // within the wait (a rebalance that never became a spot warning), the cordon expires, whether
    // or not its replacement ever became ready. (Prewarmed drains are expired by the tick.)
    if step.action == Action::CordonPrewarm && step.waited_too_long {
        return end_undrained(&state, step.notice, vec![], step.now);
    }
    // A pod whose grace period would outlast the instance must start going earlier than the
    // others: the instance's end minus its grace period.
    let any_due = step.holding.iter().any(|p| step.due(p));
    let start_evicting = match step.action {
        Action::EvictNow => true,
        Action::Drain => step.ready || step.past_deadline || step.waited_too_long || any_due,
        Action::CordonPrewarm => step.past_deadline || any_due,
        Action::Ignore => unreachable!("the claim ends ignored notices"),
    };
    if start_evicting {
        state.evicting_since = Some(step.now);
        return evicting(state, step);
    }
    step.request_placeholder(&mut state, false);
    let next_check = step.next_check(&mut state);
    let prewarmed = step.action == Action::CordonPrewarm && step.ready;
    if prewarmed && step.deadline.is_none() {
        return step.end(state, Phase::Prewarmed, Finish::Prewarmed);
    }
    let phase = if prewarmed {
        Phase::Prewarmed
    } else {
        Phase::WaitingForReplacement
    };
    step.wait(state, phase, next_check)
}

/// Evicting, tier by tier: every pod once the replacement was ready, at the deadline or the end
/// of the wait, or when told to; before that only the pods due by their own grace period. Over
/// when nothing evictable is left, or given up (un-drained) when pods outstay the instance.
fn evicting(mut state: DrainState, mut step: Step) -> DrainStep {
    let everyone = match step.action {
        Action::EvictNow => true,
        Action::Drain => {
            state.replacement_ready_at.is_some() || step.past_deadline || step.waited_too_long
        }
        Action::CordonPrewarm => step.past_deadline,
        Action::Ignore => unreachable!("the claim ends ignored notices"),
    };
    step.request_placeholder(&mut state, everyone);
    let next_check = step.next_check(&mut state);
    // do-not-disrupt pods count only once the deadline has passed; with no deadline they stay.
    let in_scope: Vec<&PodView> = step
        .holding
        .iter()
        .copied()
        .filter(|p| !p.do_not_disrupt || step.past_deadline)
        .collect();
    let protected_waiting = step.holding.len() - in_scope.len();
    // Evicting everyone with no warm capacity (none can be made, or the placeholder never ran)
    // because the deadline or the end of the wait came: said once, at the first step past it.
    let previous_step = step
        .node
        .state
        .as_ref()
        .filter(|s| s.event_id == state.event_id)
        .and_then(|s| s.last_step_at);
    if everyone
        && step.needs_placeholder
        && state.replacement_ready_at.is_none()
        && (step.past_deadline || step.waited_too_long)
        && previous_step.is_none_or(|t| t < step.forced_at(&state))
    {
        let why = without_replacement(step.node.replacement, &state, step.deadline);
        step.commands.push(why);
    }
    if in_scope.is_empty() && (protected_waiting == 0 || step.deadline.is_none()) {
        return step.end(state, Phase::Drained, Finish::Drained);
    }
    // Pods still here `SURVIVOR_GRACE_S` after the instance's announced end (or the end of a
    // deadline-less wait) on a node that is still there: a budget that never allows their
    // eviction, or a node that was not reclaimed after all. Checking on would cycle for ever;
    // the drain ends, the node is un-drained (as the tick does with a survivor), and an Event
    // says why.
    if step.give_up_at(&state).is_some_and(|t| step.now >= t) {
        let announce = abandoned(&state, in_scope.len(), step.forced_at(&state));
        return end_undrained(&state, step.notice, vec![announce], step.now);
    }
    let delete_if_blocked = step.settings.delete_past_pdb && step.past_deadline;
    let (deadline, end, now) = (step.deadline, step.end, step.now);
    let evictions = pods_to_evict(&in_scope, everyone, deadline, end, now, delete_if_blocked);
    // Hand-over: the placeholder goes in the same step, right before the evictions it stands in
    // for. Only the placeholder: the drain's surges stay raised until the drain ends
    // (`ReleaseReplacement`), or the surge pods raised for these very evictions would be given
    // back in the step that raised them.
    if everyone
        && !matches!(
            step.node.replacement,
            ReplacementSeen::Absent | ReplacementSeen::NoTarget
        )
    {
        step.commands.push(Command::HandOver);
    }
    step.commands.extend(evictions);
    step.wait(state, Phase::Evicting, next_check)
}

/// What one step sees, worked out once from the node, its pods and the claimed record, and the
/// commands it has planned so far.
struct Step<'a> {
    node: &'a NodeView,
    notice: &'a Notice,
    settings: &'a DrainSettings,
    action: Action,
    now: f64,
    /// From the drain's own record: a re-delivery recomputes nothing from the body.
    deadline: Option<f64>,
    end: Option<f64>,
    holding: Vec<&'a PodView>,
    needs_placeholder: bool,
    ready: bool,
    past_deadline: bool,
    waited_too_long: bool,
    commands: Vec<Command>,
}

impl<'a> Step<'a> {
    fn observe(
        node: &'a NodeView,
        pods: &'a [PodView],
        notice: &'a Notice,
        now: f64,
        settings: &'a DrainSettings,
        state: &DrainState,
    ) -> Step<'a> {
        let mut commands = Vec::new();
        if !node.unschedulable {
            commands.push(Command::Cordon);
        }
        if !node.tainted {
            commands.push(Command::Taint { kind: state.kind });
        }
        let holding = holding_pods(pods, now);
        // Ready: see the module comment (which drains wait for a placeholder).
        let to_move = holding.iter().filter(|p| !p.terminating());
        let gpus_to_move: u32 = to_move.clone().map(|p| p.gpus).sum();
        let room_to_move = to_move.clone().any(|p| p.requests_room);
        let needs_placeholder =
            gpus_to_move > 0 || (room_to_move && node.replacement != ReplacementSeen::NoTarget);
        let deadline = state.deadline;
        Step {
            node,
            notice,
            settings,
            action: settings.actions.for_kind(notice.kind),
            now,
            deadline,
            end: state.instance_end,
            holding,
            needs_placeholder,
            ready: !needs_placeholder || node.replacement == ReplacementSeen::Running,
            past_deadline: deadline.is_some_and(|d| now >= d),
            waited_too_long: deadline.is_none() && now >= no_deadline_wait_end(state),
            commands,
        }
    }

    /// Due by its own grace period (or the deadline) in this step.
    fn due(&self, p: &PodView) -> bool {
        pod_due(p, self.deadline, self.end, self.now)
    }

    /// Until everyone goes (that step needs none: the evicted pods ask for their own room), the
    /// placeholder is (re)made whenever it is missing: the first step, after a real pod preempted
    /// it (it has the balloon priority), and while only pods due by their long grace period are
    /// going. It stands for the pods still to move that this step does not evict by their own
    /// due time: an evicted pod's successor is a pending pod that asks for its own room, and a
    /// placeholder counting it too would be a second pending pod for the same room (at a
    /// NodePool's cap it might never run, and the others would go without a surge).
    fn request_placeholder(&mut self, state: &mut DrainState, everyone: bool) {
        let stands_for: Vec<&PodView> = self
            .holding
            .iter()
            .filter(|p| !p.terminating() && !self.due(p))
            .copied()
            .collect();
        if self.needs_placeholder
            && matches!(
                self.node.replacement,
                ReplacementSeen::Absent | ReplacementSeen::NoTarget
            )
            && !everyone
            && stands_for.iter().any(|p| p.requests_room)
        {
            let gpus = stands_for.iter().map(|p| p.gpus).sum();
            self.commands.push(Command::RequestReplacement {
                gpus,
                pods: stands_for.iter().map(|p| p.pod.clone()).collect(),
            });
            state.replacement_requested_at.get_or_insert(self.now);
            state.replacement_gpus = gpus;
        }
    }

    /// Past this time everyone goes, whatever the replacement.
    fn forced_at(&self, state: &DrainState) -> f64 {
        self.deadline.unwrap_or(no_deadline_wait_end(state))
    }

    /// A drain still evicting `SURVIVOR_GRACE_S` after the end (or `forced_at` without one), and
    /// after it started evicting (a notice that came late or a window already open gets its ten
    /// minutes too), could not finish: it ends.
    fn give_up_at(&self, state: &DrainState) -> Option<f64> {
        let after = self.end.unwrap_or(self.forced_at(state));
        state
            .evicting_since
            .map(|since| after.max(since) + SURVIVOR_GRACE_S)
    }

    /// The next check, recorded: after `recheck_s` (longer for a drain stalled for a while), or
    /// earlier at the deadline, a pod's own due time, `forced_at` or `give_up_at`.
    fn next_check(&self, state: &mut DrainState) -> f64 {
        let mut wake_points: Vec<f64> = self.deadline.into_iter().collect();
        wake_points.extend(
            self.holding
                .iter()
                .filter_map(|p| pod_due_at(p, self.deadline, self.end)),
        );
        wake_points.push(self.forced_at(state));
        wake_points.extend(self.give_up_at(state));
        let soon = self.now + check_gap(self.now - last_milestone(state), self.settings.recheck_s);
        let next = wake_points
            .into_iter()
            .filter(|&t| t > self.now && t < soon)
            .fold(soon, f64::min);
        state.next_check_at = Some(next);
        next
    }

    /// The step's commands, the state in `phase` first (so concurrent duplicates see the claim),
    /// and a check at `at`.
    fn wait(mut self, mut state: DrainState, phase: Phase, at: f64) -> DrainStep {
        state.phase = phase;
        self.commands.push(Command::WaitUntil { at });
        self.recorded(state, None)
    }

    /// The drain's end in `phase` (drained: the placeholder and surges given back). SQS and
    /// EventBridge deliver at least once: a copy of the notice that finds the drain already
    /// ended so, with nothing to do (no straggler, cordon and taint still there), is a
    /// `Duplicate`, so the end happens once. One that had work keeps the first end's time
    /// (`finished_at`, which the drain's figures count to); a new owner's claim clears it.
    fn end(mut self, mut state: DrainState, phase: Phase, f: Finish) -> DrainStep {
        let before = self.node.state.as_ref();
        let ended = before.is_some_and(|s| s.event_id == state.event_id && s.phase == phase);
        if ended && self.commands.is_empty() {
            return DrainStep::finish(vec![], before.cloned(), Finish::Duplicate);
        }
        state.phase = phase;
        state.finished_at.get_or_insert(self.now);
        state.next_check_at = None;
        if phase == Phase::Drained {
            self.commands.push(Command::ReleaseReplacement);
        }
        self.finish(state, f)
    }

    /// The step's commands, the state first, and the end of the message.
    fn finish(self, state: DrainState, f: Finish) -> DrainStep {
        self.recorded(state, Some(f))
    }

    fn recorded(self, state: DrainState, f: Option<Finish>) -> DrainStep {
        let mut commands = vec![Command::RecordState {
            state: state.clone(),
        }];
        commands.extend(self.commands);
        commands.extend(f.map(Command::Done));
        DrainStep {
            commands,
            state: Some(state),
        }
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

/// A closed notice: undo what this notice's drain did. A drain owned by another notice is left
/// alone; a node this notice never touched has nothing to undo. (The tick closes a survivor's
/// drain this way: a rebalance's is remembered as a false alarm.)
fn plan_undrain(node: &NodeView, notice: &Notice, now: f64) -> DrainStep {
    match &node.state {
        Some(s) if s.event_id == notice.event_id => end_undrained(s, notice, vec![], now),
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

/// The Event of a drain that gives up with `left` pods still on the node, saying why.
fn abandoned(s: &DrainState, left: usize, forced_at: f64) -> Command {
    let past = match s.instance_end {
        Some(e) => format!("the instance's announced end {}", format_time(e)),
        None => format!(
            "the end of the wait for a replacement {}",
            format_time(forced_at)
        ),
    };
    Command::Announce {
        reason: EVENT_ABANDONED.into(),
        note: format!(
            "{left} pod(s) still on the node {SURVIVOR_GRACE_S} s past {past} and the start of eviction: a PodDisruptionBudget that never allowed their eviction, or a node that was not reclaimed; the drain of {} notice {} ends and the node is un-drained",
            s.kind, s.event_id,
        ),
    }
}

#[cfg(test)]
#[path = "drain_tests/mod.rs"]
mod tests;
