//! Properties of the drain planner over random nodes, pods and delivery orders: a small model of
//! the cluster (evictions, a placeholder that runs after a while or never, budgets that never
//! allow an eviction) and of the queue (the notice delivered more than once, every continuation
//! late by up to 5 s and sometimes delivered twice) drives `plan_drain` until no message is left.
//! Whatever happens, every drain ends within a bounded number of steps, once it has finished
//! no later delivery plans anything that touches the node or its pods, and its surges are given
//! back by the step that ends it and no other.

use std::collections::BTreeMap;

use prewarm::core::interruption::{
    plan_drain, Action, ActionTable, Command, DrainSettings, Finish, NodeView, Notice, NoticeKind,
    NoticeStatus, PodOwner, PodRef, PodView, ReplacementSeen,
};
use proptest::prelude::*;

const T0: f64 = 1_795_953_600.0;
/// Deliveries the model handles at most: a two-day Health window backed off to 15-minute checks
/// takes about 250 steps; ten times that is a drain that does not end.
const MAX_DELIVERIES: usize = 2_500;

/// One pod of the model and how the cluster treats it.
#[derive(Clone, Debug)]
struct ModelPod {
    view: PodView,
    /// A PodDisruptionBudget that never allows its eviction.
    blocked: bool,
}

fn arb_pod() -> impl Strategy<Value = ModelPod> {
    (
        0u32..=4,
        any::<bool>(),
        0u32..=400,
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.25),
    )
        .prop_map(|(gpus, cpu, grace, critical, dnd, blocked)| ModelPod {
            view: PodView {
                pod: PodRef {
                    namespace: "ns".into(),
                    name: String::new(),
                },
                uid: None,
                owner: PodOwner::Other,
                critical,
                do_not_disrupt: dnd,
                deletion_at: None,
                finished: false,
                gpus,
                requests_room: gpus > 0 || cpu,
                grace_s: f64::from(grace),
            },
            blocked,
        })
}

fn arb_kind() -> impl Strategy<Value = NoticeKind> {
    prop::sample::select(NoticeKind::ALL.to_vec())
}

/// The cluster and the queue, advanced one delivery at a time.
struct Model {
    node: NodeView,
    pods: Vec<ModelPod>,
    /// When the placeholder was made (None: there is none).
    placeholder_at: Option<f64>,
    /// Seconds from being made to running on a Ready node (None: it never runs; `no_target`:
    /// none can be made).
    runs_after: Option<f64>,
    no_target: bool,
    /// Deliveries still to come: time (ms) -> how many.
    queue: BTreeMap<i64, u32>,
    rng: u64,
}

impl Model {
    fn random(&mut self, below: u64) -> u64 {
        // xorshift: deterministic from the case's seed, so a failure replays.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng % below.max(1)
    }

    fn deliver_at(&mut self, t: f64) {
        *self.queue.entry((t * 1000.0).round() as i64).or_insert(0) += 1;
    }

    fn replacement(&self, now: f64) -> ReplacementSeen {
        match (self.no_target, self.placeholder_at, self.runs_after) {
            (true, _, _) => ReplacementSeen::NoTarget,
            (false, None, _) => ReplacementSeen::Absent,
            (false, Some(made), Some(after)) if now >= made + after => ReplacementSeen::Running,
            (false, Some(_), _) => ReplacementSeen::Pending,
        }
    }

    /// Carries out a step's commands as the executor and the cluster would.
    fn apply(
        &mut self,
        commands: &[Command],
        state: Option<&prewarm::core::interruption::DrainState>,
        now: f64,
    ) {
        for c in commands {
            match c {
                Command::RecordState { .. } => self.node.state = state.cloned(),
                Command::Cordon => self.node.unschedulable = true,
                Command::Taint { .. } => self.node.tainted = true,
                Command::RequestReplacement { .. } => {
                    if !self.no_target && self.placeholder_at.is_none() {
                        self.placeholder_at = Some(now);
                    }
                }
                Command::HandOver | Command::ReleaseReplacement => self.placeholder_at = None,
                Command::Evict {
                    pod,
                    grace_s,
                    delete_if_blocked,
                    ..
                } => {
                    let p = self
                        .pods
                        .iter_mut()
                        .find(|p| &p.view.pod == pod)
                        .expect("evicts a pod that is there");
                    assert!(p.view.deletion_at.is_none(), "{pod} evicted twice");
                    if !p.blocked || *delete_if_blocked {
                        let grace = grace_s.map_or(p.view.grace_s, |g| g as f64);
                        p.view.deletion_at = Some(now + grace);
                    }
                }
                Command::Undrain {
                    uncordon,
                    closed_by,
                    false_alarm_at,
                } => {
                    if false_alarm_at.is_some() {
                        self.node.false_alarm_at = *false_alarm_at;
                    }
                    self.node.state = None;
                    self.node.tainted = false;
                    if *uncordon {
                        self.node.unschedulable = false;
                    }
                    if closed_by.is_some() {
                        self.node.closed_event = closed_by.clone();
                    }
                }
                Command::Announce { .. }
                | Command::Surge { .. }
                | Command::ReleaseSurge { .. }
                | Command::WaitUntil { .. }
                | Command::Done(_) => {}
            }
        }
    }
}

/// A step touches the node or its pods (what a finished drain must never plan again).
fn touches(c: &Command) -> bool {
    matches!(
        c,
        Command::Cordon
            | Command::Taint { .. }
            | Command::RequestReplacement { .. }
            | Command::Evict { .. }
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_drain_ends_and_nothing_is_planned_after_it_finished(
        kind in arb_kind(),
        pods in prop::collection::vec(arb_pod(), 0..5),
        window_s in 0u32..172_800,
        runs_after in prop::option::weighted(0.7, 5u32..400),
        no_target in prop::bool::weighted(0.15),
        rebalance_prewarms in any::<bool>(),
        duplicates in prop::collection::vec(0u32..60_000, 0..4),
        seed in 1u64..u64::MAX,
    ) {
        let mut actions = ActionTable::default();
        if rebalance_prewarms {
            actions = ActionTable::parse("rebalance=cordon-prewarm").unwrap();
        }
        let settings = DrainSettings { actions, ..DrainSettings::default() };
        let notice = Notice {
            event_id: "ev-1".into(),
            kind,
            instance_ids: vec!["i-0123456789abcdef0".into()],
            time: T0,
            instance_state: (kind == NoticeKind::StateChange).then(|| "stopping".into()),
            window_start: (kind == NoticeKind::ScheduledChange).then_some(T0 + f64::from(window_s)),
            termination_time: None,
            reservation_id: None,
            reservation_end: None,
            status: NoticeStatus::Active,
            sent_time: Some(T0 + 1.0),
            scheduled: false,
        };
        let mut model = Model {
            node: NodeView {
                name: "node".into(),
                unschedulable: false,
                tainted: false,
                gpus: 8,
                state: None,
                replacement: ReplacementSeen::Absent,
                closed_event: None,
                false_alarm_at: None,
            },
            pods: pods
                .into_iter()
                .enumerate()
                .map(|(i, mut p)| {
                    p.view.pod.name = format!("pod-{i}");
                    p
                })
                .collect(),
            placeholder_at: None,
            runs_after: runs_after.map(f64::from),
            no_target,
            queue: BTreeMap::new(),
            rng: seed,
        };
        model.deliver_at(T0 + 1.5);
        for d in duplicates {
            model.deliver_at(T0 + 1.5 + f64::from(d) / 1000.0);
        }

        let mut deliveries = 0;
        let mut finished = false;
        while let Some((&ms, _)) = model.queue.iter().next() {
            let now = ms as f64 / 1000.0;
            let count = model.queue.get_mut(&ms).unwrap();
            *count -= 1;
            if *count == 0 {
                model.queue.remove(&ms);
            }
            deliveries += 1;
            prop_assert!(deliveries <= MAX_DELIVERIES, "the drain does not end: {deliveries} deliveries, now T0+{}", now - T0);
            // Pods whose grace period is over are gone.
            model.pods.retain(|p| p.view.deletion_at.is_none_or(|d| now < d));
            model.node.replacement = model.replacement(now);
            let views: Vec<PodView> = model.pods.iter().map(|p| p.view.clone()).collect();
            let step = plan_drain(&model.node, &views, &notice, now, &settings);

            let dones = step.commands.iter().filter(|c| matches!(c, Command::Done(_))).count();
            let waits = step.commands.iter().filter(|c| matches!(c, Command::WaitUntil { .. })).count();
            prop_assert_eq!(dones + waits, 1, "one end per step: {:?}", step.commands);
            prop_assert!(
                matches!(step.last(), Command::Done(_) | Command::WaitUntil { .. }),
                "the step's end is its last command: {:?}", step.commands
            );
            // The drain's surges (and its placeholder) are given back by the step that ends it,
            // and by no other: the hand-over deletes the placeholder only.
            let ends = matches!(step.last(), Command::Done(Finish::Drained | Finish::Undrained));
            prop_assert_eq!(
                step.commands.contains(&Command::ReleaseReplacement),
                ends,
                "surges given back at T0+{} by {:?}", now - T0, step.commands
            );
            if finished {
                prop_assert!(
                    !step.commands.iter().any(touches),
                    "planned after the drain finished, at T0+{}: {:?}", now - T0, step.commands
                );
            }
            model.apply(&step.commands, step.state.as_ref(), now);
            match step.last() {
                Command::WaitUntil { at } => {
                    prop_assert!(*at > now, "the next check is later than now");
                    // SQS: whole seconds, rounded up, and the poller's own lateness.
                    let late = (at - now).ceil() + model.random(5_000) as f64 / 1000.0;
                    model.deliver_at(now + late);
                    if model.random(10) == 0 {
                        // At-least-once: the continuation once more, a moment later.
                        let again = now + late + model.random(3_000) as f64 / 1000.0;
                        model.deliver_at(again);
                    }
                }
                Command::Done(Finish::Drained | Finish::Undrained | Finish::Prewarmed) => {
                    finished = true
                }
                Command::Done(_) => {}
                other => unreachable!("{other:?}"),
            }
        }
        prop_assert!(
            finished || kind_ignored(&settings, kind),
            "every message ended but the drain never finished"
        );
    }
}

fn kind_ignored(settings: &DrainSettings, kind: NoticeKind) -> bool {
    settings.actions.for_kind(kind) == Action::Ignore
}
