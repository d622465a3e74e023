//! Walks of drains that never strand capacity: a pod whose grace period outlasts the warning
//! starts eviction at once (and is not in the placeholder of that step: its successor asks for
//! its own room), yet the node's other pods keep their replacement placeholder (asked for
//! whenever it is missing, never deleted) until it runs or the deadline passes; and the drain's
//! surges are given back when the drain ends, not in the hand-over step. Steps follow one
//! another here (the executor's and the cluster's part played by `left_by` and `pods_after`), so
//! these are walks beside the tables rather than rows.

use super::*;

/// 120 s spot warning less the 30 s eviction budget.
const DEADLINE: f64 = T0 + 90.0;

/// One vLLM pod with a 300 s grace period (due before the notice: 120 - 300 s) and two pods
/// that go at the hand-over or the deadline.
fn vllm_node_pods() -> Vec<PodView> {
    vec![
        with_grace(pod("vllm-slow", 2), 300.0),
        pod("llama-0", 3),
        pod("llama-1", 3),
    ]
}

fn evicted(step: &DrainStep) -> Vec<String> {
    step.evictions().map(|p| p.name.clone()).collect()
}

fn requested(step: &DrainStep) -> Option<u32> {
    step.commands.iter().find_map(|c| match c {
        Command::RequestReplacement { gpus, .. } => Some(*gpus),
        _ => None,
    })
}

/// The step deletes the placeholder (hand-over or the drain's end).
fn deletes_placeholder(step: &DrainStep) -> bool {
    step.commands
        .iter()
        .any(|c| matches!(c, Command::HandOver | Command::ReleaseReplacement))
}

/// The node as the executor leaves it after `step`, with the placeholder now `seen`.
fn left_by(step: &DrainStep, seen: ReplacementSeen) -> NodeView {
    NodeView {
        unschedulable: true,
        tainted: true,
        state: step.state.clone(),
        ..node(seen)
    }
}

/// Pods as the cluster leaves them after `step`: evicted pods terminate for their grace period
/// (or the one the step cut it to) and are gone once it is over, at `now`.
fn pods_after(pods: &[PodView], step: &DrainStep, at: f64, now: f64) -> Vec<PodView> {
    pods.iter()
        .cloned()
        .map(|mut p| {
            for c in &step.commands {
                if let Command::Evict { pod, grace_s, .. } = c {
                    if pod == &p.pod && p.deletion_at.is_none() {
                        p.deletion_at = Some(at + grace_s.map_or(p.grace_s, |g| g as f64));
                    }
                }
            }
            p
        })
        .filter(|p| p.deletion_at.is_none_or(|d| now < d))
        .collect()
}

/// Steps every 15 s from T0+1 with the placeholder seen as `seen(now)` (the executor's
/// request makes one where it was missing). Until it runs or the deadline passes, every step
/// asks for the placeholder when it is missing and none deletes it; the slow pod goes at the
/// first step. Returns the steps with their times.
fn walk(seen: impl Fn(f64) -> ReplacementSeen, until: f64) -> Vec<(f64, DrainStep)> {
    let n = notice(SpotInterruption);
    let mut view = node(Absent);
    let mut pods = vllm_node_pods();
    let mut steps: Vec<(f64, DrainStep)> = Vec::new();
    let mut now = T0 + 1.0;
    while now <= until {
        if let Some((at, last)) = steps.last() {
            pods = pods_after(&pods, last, *at, now);
            view = left_by(last, seen(now));
        }
        let step = plan_drain(&view, &pods, &n, now, &DrainSettings::default());
        steps.push((now, step));
        now += 15.0;
    }
    steps
}

#[test]
fn a_300_s_grace_pod_keeps_the_placeholder_asked_for_until_it_runs() {
    // Made at the first step; a real pod preempts it at T0+31 (absent at that check); made again;
    // Pending until T0+61, Running from T0+76.
    let seen = |now: f64| match now - T0 {
        t if t < 31.0 => Pending,
        t if t < 32.0 => Absent,
        t if t < 76.0 => Pending,
        _ => Running,
    };
    let steps = walk(seen, T0 + 76.0);
    let times: Vec<f64> = steps.iter().map(|(t, _)| t - T0).collect();
    assert_eq!(times, [1.0, 16.0, 31.0, 46.0, 61.0, 76.0]);

    // T0+1: the slow pod is due (its 300 s grace outlasts the 120 s warning) and goes at once,
    // with its grace cut to the 119 s the instance has left; the placeholder is asked for the
    // other pods (3 + 3 GPUs: the slow pod's successor asks for its own room).
    let (_, first) = &steps[0];
    assert_eq!(evicted(first), ["vllm-slow"]);
    assert_eq!(requested(first), Some(6));
    assert!(!deletes_placeholder(first));
    let s = first.state.as_ref().unwrap();
    assert_eq!(s.evicting_since, Some(T0 + 1.0));
    assert_eq!(s.phase, Phase::Evicting);

    // T0+16 .. T0+61: evicting (the slow pod terminating), the placeholder is never deleted and
    // is asked for again when a real pod preempted it (T0+31: 3 + 3 GPUs of the pods still to
    // move); nothing else is evicted before it runs.
    for (now, step) in &steps[1..5] {
        let at = now - T0;
        assert!(!deletes_placeholder(step), "T0+{at}: {:?}", step.commands);
        assert!(evicted(step).is_empty(), "T0+{at}: {:?}", step.commands);
        let expected = (at == 31.0).then_some(6);
        assert_eq!(requested(step), expected, "T0+{at}: {:?}", step.commands);
        assert_eq!(step.state.as_ref().unwrap().replacement_ready_at, None);
    }

    // T0+76, before the deadline (T0+90): Running. Hand-over (the placeholder, right before the
    // evictions it stands in for), and the two other pods go onto warm capacity.
    let (_, ready) = &steps[5];
    assert_eq!(requested(ready), None);
    assert!(ready.commands.contains(&Command::HandOver));
    assert_eq!(evicted(ready), ["llama-0", "llama-1"]);
    assert_eq!(
        ready.state.as_ref().unwrap().replacement_ready_at,
        Some(T0 + 76.0)
    );
}

#[test]
fn a_300_s_grace_pod_keeps_the_placeholder_until_the_deadline_when_it_never_runs() {
    // Never runs; preempted at T0+46 and made again.
    let seen = |now: f64| {
        if (46.0..47.0).contains(&(now - T0)) {
            Absent
        } else {
            Pending
        }
    };
    let steps = walk(seen, DEADLINE);
    // Checks every 15 s up to T0+76; the deadline's own check follows.
    let times: Vec<f64> = steps.iter().map(|(t, _)| t - T0).collect();
    assert_eq!(times, [1.0, 16.0, 31.0, 46.0, 61.0, 76.0]);
    for (now, step) in &steps {
        let at = now - T0;
        let expected = (at == 1.0 || at == 46.0).then_some(6);
        assert_eq!(requested(step), expected, "T0+{at}: {:?}", step.commands);
        assert!(!deletes_placeholder(step), "T0+{at}: {:?}", step.commands);
        let others: Vec<String> = evicted(step)
            .into_iter()
            .filter(|p| p != "vllm-slow")
            .collect();
        assert!(others.is_empty(), "T0+{at}: {:?}", step.commands);
    }
    // At the deadline the others go, without a placeholder to wait for: none is asked for.
    let n = notice(SpotInterruption);
    let (at, last) = steps.last().unwrap();
    let pods = pods_after(&vllm_node_pods(), &steps[0].1, T0 + 1.0, DEADLINE);
    let pods = pods_after(&pods, last, *at, DEADLINE);
    let deadline_step = plan_drain(
        &left_by(last, Pending),
        &pods,
        &n,
        DEADLINE,
        &DrainSettings::default(),
    );
    assert_eq!(requested(&deadline_step), None);
    assert_eq!(evicted(&deadline_step), ["llama-0", "llama-1"]);
}

/// The surge gate raises a workload by one replica per pod the step evicts; the drain's surges
/// are given back by the command that ends the drain (`ReleaseReplacement`). The hand-over step
/// deletes the placeholder only, so the surge it raised for its own evictions stays until the
/// drain is over: drained, or un-drained (a closed notice).
#[test]
fn the_surge_is_given_back_when_the_drain_ends_not_at_the_hand_over() {
    let n = notice(SpotInterruption);
    let pods = vec![
        with_grace(pod("llama-0", 4), 30.0),
        with_grace(pod("llama-1", 4), 30.0),
    ];
    let first = plan_drain(
        &node(Absent),
        &pods,
        &n,
        T0 + 1.0,
        &DrainSettings::default(),
    );
    assert_eq!(requested(&first), Some(8));
    // T0+16: the placeholder runs: hand-over and both pods evicted; the surges stay raised.
    let hand_over = plan_drain(
        &left_by(&first, Running),
        &pods,
        &n,
        T0 + 16.0,
        &DrainSettings::default(),
    );
    assert_eq!(evicted(&hand_over), ["llama-0", "llama-1"]);
    let i = |c: &Command| hand_over.commands.iter().position(|x| x == c);
    assert!(
        i(&Command::HandOver)
            < hand_over
                .commands
                .iter()
                .position(|c| matches!(c, Command::Evict { .. })),
        "the placeholder goes right before the evictions: {:?}",
        hand_over.commands
    );
    assert!(i(&Command::HandOver).is_some());
    assert!(
        !hand_over.commands.contains(&Command::ReleaseReplacement),
        "the hand-over gives the surge back: {:?}",
        hand_over.commands
    );
    // T0+31: the pods terminate (their 30 s grace); nothing is given back yet.
    let terminating = pods_after(&pods, &hand_over, T0 + 16.0, T0 + 31.0);
    assert_eq!(terminating.len(), 2);
    let waiting = plan_drain(
        &left_by(&hand_over, Absent),
        &terminating,
        &n,
        T0 + 31.0,
        &DrainSettings::default(),
    );
    assert!(!waiting.commands.contains(&Command::ReleaseReplacement));
    assert!(matches!(waiting.last(), Command::WaitUntil { .. }));
    // T0+46: all gone: drained, and the surges (with any placeholder) are given back.
    let gone = pods_after(&terminating, &waiting, T0 + 31.0, T0 + 46.0);
    assert!(gone.is_empty());
    let done = plan_drain(
        &left_by(&waiting, Absent),
        &gone,
        &n,
        T0 + 46.0,
        &DrainSettings::default(),
    );
    assert_eq!(done.last(), &Command::Done(Finish::Drained));
    assert!(done.commands.contains(&Command::ReleaseReplacement));
    // A notice closed mid-drain (after the hand-over): un-drained, surges given back.
    let closed = Notice {
        status: NoticeStatus::Closed,
        time: T0 + 40.0,
        ..n.clone()
    };
    let undone = plan_drain(
        &left_by(&waiting, Absent),
        &terminating,
        &closed,
        T0 + 40.0,
        &DrainSettings::default(),
    );
    assert_eq!(undone.last(), &Command::Done(Finish::Undrained));
    assert!(undone.commands.contains(&Command::ReleaseReplacement));
}

/// A pod due in a step (its grace period outlasts the time left) is evicted in that step, and its
/// controller's successor is a pending pod that asks for its own room: the placeholder made in
/// that step stands for the node's other pods only, or a second pending pod would ask for the
/// same room (at a NodePool's cap it may then never run). Each row is a first step (no drain
/// yet, no placeholder) of the 120 s spot warning at T0 (end T0+120, deadline T0+90); a pod is
/// due at min(deadline, end − its grace), by hand in the row.
#[test]
fn a_pod_due_in_the_step_is_not_in_that_steps_placeholder() {
    type Row = (
        &'static str,
        Vec<PodView>,
        f64,
        Option<u32>,
        Vec<&'static str>,
    );
    let grace_100 = || {
        vec![
            with_grace(pod("vllm-100", 2), 100.0),
            pod("llama-0", 3),
            pod("llama-1", 3),
        ]
    };
    let rows: Vec<Row> = vec![
        (
            "300 s grace, due at T0-180: evicted; the placeholder for the others, 3 + 3",
            vllm_node_pods(),
            T0 + 1.0,
            Some(6),
            vec!["vllm-slow"],
        ),
        (
            "the due pod alone: evicted, no placeholder (nothing else to stand for)",
            vec![with_grace(pod("vllm-slow", 2), 300.0)],
            T0 + 1.0,
            None,
            vec!["vllm-slow"],
        ),
        (
            "100 s grace, due at T0+20, not at T0+1: in the placeholder, 2 + 3 + 3",
            grace_100(),
            T0 + 1.0,
            Some(8),
            vec![],
        ),
        (
            "claimed late, at T0+21: the 100 s pod is due and left out, 3 + 3",
            grace_100(),
            T0 + 21.0,
            Some(6),
            vec!["vllm-100"],
        ),
    ];
    for (situation, pods, now, placeholder_gpus, evicts) in rows {
        let step = plan_drain(
            &node(Absent),
            &pods,
            &notice(SpotInterruption),
            now,
            &DrainSettings::default(),
        );
        assert_eq!(
            requested(&step),
            placeholder_gpus,
            "{situation}: {:?}",
            step.commands
        );
        assert_eq!(evicted(&step), evicts, "{situation}");
    }
}
