//! The drain planner's vocabulary: what a step sees (the node and pod views, the placeholder as
//! observed), how it is tuned (`DrainSettings`), and what it decides (`Command`, `Finish`,
//! `DrainStep`). Kept apart from the planning itself so that the planner's helpers (pods,
//! replacement, reservation) and the executor name these types without importing each other.

use serde::Serialize;

use super::actions::ActionTable;
use super::notice::NoticeKind;
use super::state::DrainState;

/// A notice without a deadline (rebalance) waits this long (from the notice) for its
/// replacement at most, then
/// evicts anyway: the node is at elevated risk and the capacity has been asked for. Without a
/// bound, a replacement that never comes would keep the message cycling until its retention.
pub const NO_DEADLINE_MAX_WAIT_S: f64 = 1800.0;

/// When a drain without a deadline stops waiting: `NO_DEADLINE_MAX_WAIT_S` after the later of
/// the (bounded) notice time and the claim. Counted from the claim as well because the
/// replacement was only asked for then: a notice that reached prewarm hours late (EventBridge
/// retries for up to a day), or one dated in 1970 (bounded to a day before SQS received it),
/// still gets its full wait instead of being evicted at once with no warm capacity.
pub fn no_deadline_wait_end(state: &DrainState) -> f64 {
    state.notice_time.max(state.started_at) + NO_DEADLINE_MAX_WAIT_S
}

/// A node still there this long after the end its notice announced survived it (a reboot
/// maintenance, a cancelled reclaim): the tick un-drains it, and a drain that cannot finish there
/// (pods a budget keeps) ends then instead of checking for ever.
pub const SURVIVOR_GRACE_S: f64 = 600.0;

/// A drain that has reached no milestone (claim, replacement asked for or ready, eviction
/// started) for this long checks less and less often: no spot warning lasts this long, so only
/// drains that wait for weeks (a Health window) or cannot progress back off.
pub const BACKOFF_AFTER_S: f64 = 600.0;
/// The longest gap between two checks of a drain: SQS's largest DelaySeconds.
pub const MAX_CHECK_GAP_S: f64 = 900.0;

/// The Event reason on the node when a drain evicts everyone without warm capacity.
pub const EVENT_WITHOUT_REPLACEMENT: &str = "DrainWithoutReplacement";
/// The Event reason on the node when a drain that cannot finish ends.
pub const EVENT_ABANDONED: &str = "DrainAbandoned";

/// A check that arrives up to this long before the time its step planned is that check (SQS
/// delays are whole seconds, rounded up; clocks of two invocations differ by milliseconds); one
/// earlier than that is a duplicate delivery.
pub const CHECK_EARLY_S: f64 = 1.0;

/// The settings of drain planning (from `InterruptionSettings`).
#[derive(Clone, Debug, PartialEq)]
pub struct DrainSettings {
    pub actions: ActionTable,
    /// EVICTION_BUDGET_SECONDS: eviction starts this long before the instance goes.
    pub eviction_budget_s: f64,
    /// RECHECK_SECONDS: time between two checks of a drain in progress.
    pub recheck_s: f64,
    /// DELETE_PAST_PDB_AT_DEADLINE (opt-in, default off): from the eviction deadline on, a pod
    /// whose eviction a PodDisruptionBudget refuses is deleted instead (UID precondition, grace
    /// cut to what is left). Off, PDBs always hold and such a pod dies with the instance.
    pub delete_past_pdb: bool,
}

impl DrainSettings {
    /// How long a drain in progress may go without a step before its owner counts as gone: four
    /// missed checks plus a minute (a crashed invocation's message comes back after the queue's
    /// visibility timeout, 30 s in the template).
    pub fn owner_stale_s(&self) -> f64 {
        4.0 * self.recheck_s + 60.0
    }
}

impl Default for DrainSettings {
    fn default() -> Self {
        DrainSettings {
            actions: ActionTable::default(),
            eviction_budget_s: 30.0,
            recheck_s: 15.0,
            delete_past_pdb: false,
        }
    }
}

/// What planning needs to know about the node.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeView {
    pub name: String,
    pub unschedulable: bool,
    /// The node carries the `prewarm.io/draining` taint already.
    pub tainted: bool,
    /// Allocatable GPUs of the node.
    pub gpus: u32,
    /// The drain state read from the node's annotations (None: not draining, or unreadable).
    pub state: Option<DrainState>,
    /// This drain's own replacement placeholder. The replacement is ready when it is Running on
    /// a Ready node other than this one (or when there is nothing to move).
    pub replacement: ReplacementSeen,
    /// The last notice that closed (un-drained) this node's drain, and the time of its closing
    /// update (`prewarm.io/closed-event`): earlier deliveries of that notice still in the
    /// queue (continuations, older updates) must not drain the node again.
    pub closed_event: Option<(String, f64)>,
    /// When a drain of a rebalance recommendation last ended with the node still there (a false
    /// alarm: `prewarm.io/rebalance-false-alarm-at`): a new rebalance within
    /// `false_alarm::REBALANCE_COOL_DOWN_S` does not drain the node again.
    pub false_alarm_at: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum PodOwner {
    DaemonSet,
    /// A static pod mirrored by the kubelet: the API cannot evict it for real.
    Mirror,
    Other,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for PodRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What planning needs to know about a pod on the node.
#[derive(Clone, Debug, PartialEq)]
pub struct PodView {
    pub pod: PodRef,
    /// The pod's UID: evictions carry it as a precondition, so a pod recreated under the same
    /// name (a StatefulSet's) is never evicted by mistake.
    pub uid: Option<String>,
    pub owner: PodOwner,
    /// system-node-critical / system-cluster-critical (or priority >= 2e9): evicted last.
    pub critical: bool,
    /// `karpenter.sh/do-not-disrupt: "true"`.
    pub do_not_disrupt: bool,
    /// The pod's deletionTimestamp (seconds since the epoch): it is on its way out, and its grace
    /// period ends then. None: not terminating.
    pub deletion_at: Option<f64>,
    /// Succeeded or Failed: holds nothing.
    pub finished: bool,
    /// GPUs the pod requests.
    pub gpus: u32,
    /// The pod requests some resource (CPU, memory, GPUs...): it needs room on another node.
    /// A pod without requests fits anywhere the scheduler lets it.
    pub requests_room: bool,
    /// terminationGracePeriodSeconds (Kubernetes' default 30 when unset).
    pub grace_s: f64,
}

impl PodView {
    pub fn terminating(&self) -> bool {
        self.deletion_at.is_some()
    }

    /// The tests' pod: one GPU, no owner that matters, nothing that protects it, uid
    /// `uid-NAME`; a test changes what its row needs with `..PodView::test(..)`.
    #[cfg(test)]
    pub(crate) fn test(namespace: &str, name: &str, grace_s: f64) -> Self {
        PodView {
            pod: PodRef {
                namespace: namespace.into(),
                name: name.into(),
            },
            uid: Some(format!("uid-{name}")),
            owner: PodOwner::Other,
            critical: false,
            do_not_disrupt: false,
            deletion_at: None,
            finished: false,
            gpus: 1,
            requests_room: true,
            grace_s,
        }
    }
}

/// Why a drain step finishes the message.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "finish", rename_all = "kebab-case")]
pub enum Finish {
    /// Nothing evictable left on the node.
    Drained,
    /// cordon-prewarm: replacement ready, pods left serving. The node stays cordoned with its
    /// replacement reserved until a notice with a deadline comes or the reservation expires (the tick
    /// then un-drains it).
    Prewarmed,
    /// `ACTIONS` says to ignore this kind.
    Ignored,
    /// Another notice with an earlier (or the same) deadline already owns the node's drain, and
    /// its owner is alive.
    Superseded { by_event: String },
    /// Another delivery of this same notice stepped the drain and planned a check that has not
    /// come yet (`DrainState::next_check_at`): that check carries it on, so this delivery ends
    /// (duplicate deliveries collapse instead of multiplying); or a delivery that finds the drain
    /// already ended (drained, prewarmed) with nothing left to do.
    Duplicate,
    /// The notice is closed (a Health maintenance cancelled or over) or the node survived: the
    /// cordon, taint, drain state and replacement were removed.
    Undrained,
    /// A closed notice for a node this notice never drained: nothing to undo.
    NothingToUndo,
    /// A rebalance recommendation for a node whose last rebalance drain was a false alarm less
    /// than `false_alarm::REBALANCE_COOL_DOWN_S` ago: not acted on (a spot warning still drains).
    CoolingDown { until: f64 },
    /// A resume-drain message (the tick's) found nothing for it to do: the drain's owner is
    /// alive again, or only a reservation was left to give back.
    Moot { reason: String },
}

/// One command for the executor.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "command", rename_all = "kebab-case")]
pub enum Command {
    /// Write the drain state annotations (first, so concurrent duplicates see the claim).
    RecordState {
        state: DrainState,
    },
    Cordon,
    Taint {
        kind: NoticeKind,
    },
    /// Make sure this drain's replacement placeholder exists, shaped like `pods` (the pods
    /// still to move that this step does not evict; `gpus`: their GPUs, for the record); a
    /// no-op when it is there.
    RequestReplacement {
        gpus: u32,
        pods: Vec<PodRef>,
    },
    /// Evict through the Eviction API (PodDisruptionBudgets hold). `grace_s`: the grace period
    /// cut to the seconds the instance has left, when the pod's own is longer; `uid`: the
    /// precondition that it is still the pod that was observed. `delete_if_blocked`: past the
    /// deadline with DELETE_PAST_PDB_AT_DEADLINE on, a 429 from a PodDisruptionBudget is followed
    /// by a delete with the same precondition and grace.
    Evict {
        pod: PodRef,
        tier: u8,
        uid: Option<String>,
        grace_s: Option<i64>,
        delete_if_blocked: bool,
    },
    /// Raise Deployment `namespace/deployment` by `k` for this drain (through its HPA's floor
    /// when one targets it; `surge_step`), or renew the raise. `held`: the step's evictions of
    /// its pods, held back until the surge pods are Ready, carried out in the surge's place only
    /// if it cannot be written (a surge that could not be raised is no reason to wait).
    Surge {
        namespace: String,
        deployment: String,
        k: u32,
        held: Vec<Command>,
    },
    /// Give back drain `drain`'s share of the surge of Deployment `namespace/deployment` (the
    /// user's value back exactly when no drain holds one any more; `surge_step::plan_releases`).
    ReleaseSurge {
        namespace: String,
        deployment: String,
        drain: String,
    },
    /// Hand-over: delete this drain's placeholder (only), right before the evictions it stands
    /// in for, so the evicted pods' successors (and the surge's pods) land in the room it held.
    /// The drain's surges stay raised: they are given back when the drain ends
    /// (`ReleaseSurge`). A no-op when the placeholder is gone.
    HandOver,
    /// The drain is over (drained) or un-drained (closed, expired, abandoned): delete its
    /// placeholder (a no-op when there is none). Its surges are given back by the
    /// `ReleaseSurge` commands right before this one.
    ReleaseReplacement,
    /// Remove the taint and the drain state, and the cordon when prewarm set it (`uncordon`;
    /// a cordon that was there before the claim is someone else's and stays): the node serves
    /// again. `closed_by`: the closing notice (event id, its time), remembered on the node.
    /// `false_alarm_at`: the drain was a rebalance's and the node stayed: this time is remembered
    /// on the node (the cool-down of `false_alarm`).
    Undrain {
        uncordon: bool,
        closed_by: Option<(String, f64)>,
        false_alarm_at: Option<f64>,
    },
    /// Record a warning Event on the node: `reason` (one of the `EVENT_*` reasons) and why.
    Announce {
        reason: String,
        note: String,
    },
    /// Work remains: look again at this time (the message's next visibility).
    WaitUntil {
        at: f64,
    },
    /// The message is finished.
    Done(Finish),
}

/// The commands of one step; the last is always `WaitUntil` or `Done`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DrainStep {
    pub commands: Vec<Command>,
    /// The node's drain state after this step (None when the step does not own the node).
    pub state: Option<DrainState>,
}

impl DrainStep {
    pub fn last(&self) -> &Command {
        self.commands
            .last()
            .expect("a step always ends in WaitUntil or Done")
    }

    pub fn evictions(&self) -> impl Iterator<Item = &PodRef> {
        self.commands.iter().filter_map(|c| match c {
            Command::Evict { pod, .. } => Some(pod),
            _ => None,
        })
    }

    pub(super) fn finish(
        commands: Vec<Command>,
        state: Option<DrainState>,
        f: Finish,
    ) -> DrainStep {
        let mut commands = commands;
        commands.push(Command::Done(f));
        DrainStep { commands, state }
    }
}

/// The drain's own placeholder, as observed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReplacementSeen {
    /// No placeholder of this drain exists (never made, handed over, or preempted by a real pod).
    Absent,
    /// The placeholder exists but is not Running on a Ready node other than the draining one
    /// (Pending while Karpenter provisions, or bound somewhere not Ready yet).
    Pending,
    /// Running on a Ready node other than the draining node: capacity for the drain's pods is
    /// there, held by this drain alone.
    Running,
    /// None exists and none can be made: no prewarm target with a balloon namespace manages the
    /// node's NodePool (no namespace and no permission to make one in; a `nodePoolReplicas`
    /// target's static pool, or a pool prewarm does not manage).
    NoTarget,
}
