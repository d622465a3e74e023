//! The drain planner's tables, one per transition of the table in `drain.rs`, with a fixed
//! clock: a situation per row, and what the step plans (its commands, and entries of the record
//! it keeps) worked out by hand from the rules there, never computed by the planner. Rows that
//! start from "the node as step X left it" take X's record as planned, as a next delivery would.
//! This file holds the fixtures and the runner; the rows live by phase in `claim`, `waiting` and
//! `evicting`, and walks of several steps (grace periods, surges) in `grace`.

use super::*;
use crate::interruption::{ActionTable, NoticeKind, PodOwner};
use NoticeKind::{
    CapacityBlock, CapacityReservation, Rebalance, ScheduledChange, SpotInterruption, StateChange,
};
use ReplacementSeen::{Absent, NoTarget, Pending, Running};

/// Every notice's time: 2026-11-29T12:00:00Z. A spot warning's deadline is T0+90 (120 s warning
/// less the 30 s budget), its end T0+120; a scheduled change's window starts a day later.
const T0: f64 = 1_795_953_600.0;

fn notice(kind: NoticeKind) -> Notice {
    Notice {
        instance_ids: vec!["i-0abc".into()],
        instance_state: (kind == StateChange).then(|| "stopping".into()),
        window_start: (kind == ScheduledChange).then_some(T0 + 86_400.0),
        ..Notice::new("ev-1", kind, T0)
    }
}

fn from(event_id: &str, kind: NoticeKind) -> Notice {
    Notice {
        event_id: event_id.into(),
        ..notice(kind)
    }
}

fn closed(kind: NoticeKind) -> Notice {
    Notice {
        status: NoticeStatus::Closed,
        ..notice(kind)
    }
}

/// A pod; only GPU pods request anything (CPU pods: `cpu_pod`).
fn pod(name: &str, gpus: u32) -> PodView {
    PodView {
        uid: None,
        gpus,
        requests_room: gpus > 0,
        ..PodView::test("inference", name, 0.0)
    }
}

/// A pod that requests CPU and memory but no GPU.
fn cpu_pod(name: &str) -> PodView {
    PodView {
        requests_room: true,
        ..pod(name, 0)
    }
}

fn with_grace(p: PodView, grace_s: f64) -> PodView {
    PodView { grace_s, ..p }
}

fn terminating(p: PodView, deletion_at: f64) -> PodView {
    PodView {
        deletion_at: Some(T0 + deletion_at),
        ..p
    }
}

/// A DaemonSet's, a mirror, a critical and a finished pod, named so.
fn node_pods() -> [PodView; 4] {
    let (mut ds, mut mirror, mut critical, mut done) = (
        pod("node-exporter", 0),
        pod("static-proxy", 0),
        pod("gpu-operator", 0),
        pod("job-1", 0),
    );
    ds.owner = PodOwner::DaemonSet;
    mirror.owner = PodOwner::Mirror;
    critical.critical = true;
    done.finished = true;
    [ds, mirror, critical, done]
}

fn do_not_disrupt(name: &str) -> PodView {
    PodView {
        do_not_disrupt: true,
        ..pod(name, 4)
    }
}

fn acting(actions: &str) -> DrainSettings {
    DrainSettings {
        actions: ActionTable::parse(actions).unwrap(),
        ..DrainSettings::default() // budget 30 s, recheck 15 s
    }
}

/// The draining node: 8 GPUs, not cordoned or tainted, no drain state.
fn node(replacement: ReplacementSeen) -> NodeView {
    NodeView {
        name: "gpu-node-a".into(),
        unschedulable: false,
        tainted: false,
        gpus: 8,
        state: None,
        replacement,
        closed_event: None,
        false_alarm_at: None,
    }
}

/// A node cordoned, tainted and claimed by `ev-1` of `kind` at T0+1, its placeholder asked for
/// then; evicting since T0+`evicting_since` if given.
fn claimed(
    replacement: ReplacementSeen,
    kind: NoticeKind,
    evicting_since: Option<f64>,
) -> NodeView {
    claimed_with(replacement, kind, evicting_since, |_| ())
}

/// `claimed`, its record changed by `edit`.
fn claimed_with(
    replacement: ReplacementSeen,
    kind: NoticeKind,
    evicting_since: Option<f64>,
    edit: impl FnOnce(&mut DrainState),
) -> NodeView {
    let n = notice(kind);
    let phase = match evicting_since {
        Some(_) => Phase::Evicting,
        None => Phase::WaitingForReplacement,
    };
    let mut state = DrainState {
        event_id: "ev-1".into(),
        notice_time: T0,
        deadline: eviction_deadline(&n, 30.0),
        evicting_since: evicting_since.map(|t| T0 + t),
        instance_end: instance_end(&n),
        ..DrainState::test(kind, phase, T0 + 1.0)
    };
    edit(&mut state);
    NodeView {
        unschedulable: true,
        tainted: true,
        state: Some(state),
        ..node(replacement)
    }
}

/// The node as the step of `notice` at T0+`at` left `before` (cordoned, tainted, its record),
/// its placeholder now `seen`.
fn after(
    before: &NodeView,
    pods: &[PodView],
    notice: &Notice,
    at: f64,
    seen: ReplacementSeen,
) -> NodeView {
    let step = plan_drain(before, pods, notice, T0 + at, &DrainSettings::default());
    NodeView {
        unschedulable: true,
        tainted: true,
        state: step.state,
        ..node(seen)
    }
}

/// One step, by default of spot warning `ev-1` on a node it claimed at +1 whose placeholder is
/// pending, with one 4-GPU pod, and what it must plan.
struct Row {
    what: &'static str,
    node: NodeView,
    pods: Vec<PodView>,
    notice: Notice,
    settings: DrainSettings,
    /// Seconds after T0.
    at: f64,
    /// Every command, in order, `; `-separated (`show`).
    commands: &'static str,
    /// `, `-separated entries the step's record must have (`record`); the rest is not checked.
    record: &'static str,
}

impl Default for Row {
    fn default() -> Row {
        Row {
            what: "",
            node: claimed(Pending, SpotInterruption, None),
            pods: vec![pod("llama-0", 4)],
            notice: notice(SpotInterruption),
            settings: DrainSettings::default(),
            at: 0.0,
            commands: "",
            record: "",
        }
    }
}

fn check(rows: Vec<Row>) {
    for r in rows {
        let step = plan_drain(&r.node, &r.pods, &r.notice, T0 + r.at, &r.settings);
        assert_eq!(show(&step).join("; "), r.commands, "{}", r.what);
        let kept = record(step.state.as_ref());
        for entry in r.record.split(", ").filter(|e| !e.is_empty()) {
            assert!(
                kept.iter().any(|k| k == entry),
                "{}: {entry} not in {kept:?}",
                r.what
            );
        }
    }
}

/// A time as seconds after T0.
fn at(t: f64) -> String {
    format!("+{}", t - T0).replace("+-", "-")
}

fn show(step: &DrainStep) -> Vec<String> {
    let some = |s: Option<String>| s.unwrap_or_default();
    step.commands
        .iter()
        .map(|c| match c {
            Command::RecordState { state } => format!("record {}", state.phase.as_str()),
            Command::Cordon => "cordon".into(),
            Command::Taint { .. } => "taint".into(),
            Command::RequestReplacement { gpus, pods } => {
                let names: Vec<&str> = pods.iter().map(|p| p.name.as_str()).collect();
                format!("request {gpus} for {}", names.join(","))
            }
            Command::HandOver => "hand-over".into(),
            Command::ReleaseReplacement => "release".into(),
            // Added after the planner (`surge_step`): never in a planned step.
            Command::Surge { deployment, k, .. } => format!("surge {deployment} by {k}"),
            Command::ReleaseSurge { deployment, .. } => format!("release surge {deployment}"),
            Command::Evict {
                pod,
                tier,
                uid,
                grace_s,
                delete_if_blocked,
            } => [
                format!("evict {}", pod.name),
                some((*tier != 1).then(|| format!(" tier {tier}"))),
                some(uid.as_ref().map(|u| format!(" uid {u}"))),
                some(grace_s.map(|g| format!(" grace {g}"))),
                some(delete_if_blocked.then(|| " or delete".into())),
            ]
            .concat(),
            Command::Undrain {
                uncordon,
                closed_by,
                false_alarm_at,
            } => [
                "undrain".into(),
                some(uncordon.then(|| " uncordon".into())),
                some(
                    closed_by
                        .as_ref()
                        .map(|(id, t)| format!(" closed by {id} at {}", at(*t))),
                ),
                some(false_alarm_at.map(|t| format!(" false alarm at {}", at(t)))),
            ]
            .concat(),
            Command::Announce { reason, .. } => reason.clone(),
            Command::WaitUntil { at: t } => format!("wait {}", at(*t)),
            Command::Done(Finish::Superseded { by_event }) => format!("superseded by {by_event}"),
            Command::Done(f) => format!("{f:?}"),
        })
        .collect()
}

/// The record's entries ("none" without one), times as seconds after T0 ("-": none).
fn record(s: Option<&DrainState>) -> Vec<String> {
    let Some(s) = s else {
        return vec!["none".into()];
    };
    let time = |t: Option<f64>| t.map_or("-".into(), at);
    vec![
        format!("owner {}", s.event_id),
        format!("notice {}", at(s.notice_time)),
        format!("event time {}", time(s.event_time)),
        format!("deadline {}", time(s.deadline)),
        format!("end {}", time(s.instance_end)),
        format!("started {}", at(s.started_at)),
        format!("requested {}", time(s.replacement_requested_at)),
        format!("ready {}", time(s.replacement_ready_at)),
        format!("evicting {}", time(s.evicting_since)),
        format!("finished {}", time(s.finished_at)),
        format!("last step {}", time(s.last_step_at)),
        format!("next check {}", time(s.next_check_at)),
        format!("user cordoned {}", s.user_cordoned),
    ]
}

mod claim;
mod evicting;
mod grace;
mod waiting;
