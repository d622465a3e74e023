//! Which pods hold a drain up and which to evict in a step, against the clock: tiers, the
//! instance's end minus each pod's grace period, and pods stuck in Terminating.

use super::model::{Command, PodOwner, PodView};

/// A pod still terminating this long after its deletionTimestamp (which already includes its
/// grace period) is stuck — a dead kubelet, a finalizer nobody removes — and no longer holds the
/// drain. Karpenter's termination controller uses the same minute (`IsStuckTerminating`).
pub const STUCK_TERMINATING_S: f64 = 60.0;

/// Whether `p` is stuck in Terminating at `now`.
pub fn stuck_terminating(p: &PodView, now: f64) -> bool {
    p.deletion_at.is_some_and(|d| now > d + STUCK_TERMINATING_S)
}

/// Pods that hold the drain up: everything but DaemonSet, mirror, finished and stuck pods.
pub fn holding_pods(pods: &[PodView], now: f64) -> Vec<&PodView> {
    pods.iter()
        .filter(|p| p.owner == PodOwner::Other && !p.finished && !stuck_terminating(p, now))
        .collect()
}

/// When `p` must start going at the latest: the eviction deadline, or earlier the instance's end
/// minus the pod's own grace period (so the grace period ends before the power does).
/// `karpenter.sh/do-not-disrupt` pods wait for the deadline itself. None: no deadline.
pub fn pod_due_at(p: &PodView, deadline: Option<f64>, end: Option<f64>) -> Option<f64> {
    let by_grace = end.filter(|_| !p.do_not_disrupt).map(|e| e - p.grace_s);
    match (deadline, by_grace) {
        (Some(d), Some(g)) => Some(d.min(g)),
        (d, g) => d.or(g),
    }
}

/// Whether `p` (not yet terminating) is due at `now`.
pub fn pod_due(p: &PodView, deadline: Option<f64>, end: Option<f64>, now: f64) -> bool {
    !p.terminating() && pod_due_at(p, deadline, end).is_some_and(|t| now >= t)
}

/// The grace period to evict `p` with at `now`: the seconds the instance has left when the
/// pod's own grace period is longer (the power-off would cut it anyway; at least 1 s, since 0
/// would delete the pod object before the kubelet stops it), else the pod's own (None).
pub fn grace_for(p: &PodView, end: Option<f64>, now: f64) -> Option<i64> {
    let left = (end? - now).floor().max(1.0);
    (p.grace_s > left).then_some(left as i64)
}

/// The evictions of one step. With `everyone`, tier 1 (ordinary pods) until it is gone
/// entirely, then tier 2 (critical pods); pods due by the clock go whatever their tier (and are
/// the only ones without `everyone`). Pods already terminating are waited for, not evicted again.
/// `delete_if_blocked`: a budget's refusal is followed by a delete (`Command::Evict`).
pub fn pods_to_evict(
    in_scope: &[&PodView],
    everyone: bool,
    deadline: Option<f64>,
    end: Option<f64>,
    now: f64,
    delete_if_blocked: bool,
) -> Vec<Command> {
    let tier_one_left = in_scope.iter().any(|p| !p.critical);
    let mut evict: Vec<&PodView> = in_scope
        .iter()
        .copied()
        .filter(|p| !p.terminating())
        .filter(|p| (everyone && p.critical != tier_one_left) || pod_due(p, deadline, end, now))
        .collect();
    evict.sort_by(|a, b| a.pod.cmp(&b.pod));
    evict
        .into_iter()
        .map(|p| Command::Evict {
            pod: p.pod.clone(),
            tier: if p.critical { 2 } else { 1 },
            uid: p.uid.clone(),
            grace_s: grace_for(p, end, now),
            delete_if_blocked,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, grace_s: f64) -> PodView {
        PodView::test("ns", name, grace_s)
    }

    #[test]
    fn stuck_terminating_is_a_minute_past_the_deletion_timestamp() {
        let mut p = pod("a", 30.0);
        // (deletionTimestamp, now, stuck)
        let cases = [
            (None, 1_000.0, false),
            (Some(1_000.0), 1_000.0, false),
            (Some(1_000.0), 1_060.0, false),
            (Some(1_000.0), 1_060.5, true),
        ];
        for (del, now, expected) in cases {
            p.deletion_at = del;
            assert_eq!(stuck_terminating(&p, now), expected, "{del:?} {now}");
            assert_eq!(
                holding_pods(std::slice::from_ref(&p), now).len(),
                usize::from(!expected)
            );
        }
    }

    #[test]
    fn a_pod_is_due_at_the_deadline_or_the_end_minus_its_grace_whichever_is_first() {
        // Instance end 1120, eviction deadline 1090 (30 s budget).
        let (deadline, end) = (Some(1_090.0), Some(1_120.0));
        let mut dnd = pod("dnd", 300.0);
        dnd.do_not_disrupt = true;
        let cases = [
            (pod("short", 10.0), Some(1_090.0)), // 1120-10 = 1110 > 1090
            (pod("long", 100.0), Some(1_020.0)), // 1120-100
            (pod("longer", 600.0), Some(520.0)), // already due at the notice
            (dnd, Some(1_090.0)),                // do-not-disrupt: the deadline only
        ];
        for (p, expected) in cases {
            assert_eq!(pod_due_at(&p, deadline, end), expected, "{}", p.pod);
        }
        assert_eq!(pod_due_at(&pod("r", 30.0), None, None), None);
    }

    #[test]
    fn the_grace_period_is_cut_to_the_seconds_left_only_when_longer() {
        let end = Some(1_120.0);
        let cases = [
            (pod("a", 30.0), 1_080.0, None),     // 40 s left, 30 s grace: its own
            (pod("b", 60.0), 1_080.0, Some(40)), // 40 s left
            (pod("c", 60.0), 1_100.4, Some(19)), // 19.6 s left, whole seconds down
            (pod("d", 30.0), 1_130.0, Some(1)),  // past the end: at least 1 s
        ];
        for (p, now, expected) in cases {
            assert_eq!(grace_for(&p, end, now), expected, "{} at {now}", p.pod);
        }
        assert_eq!(grace_for(&pod("e", 600.0), None, 1_000.0), None);
    }

    #[test]
    fn tiers_hold_until_a_critical_pod_is_due_by_its_grace() {
        let ordinary = pod("app", 30.0);
        let mut critical = pod("agent", 30.0);
        critical.critical = true;
        let mut slow_critical = pod("slow-agent", 200.0);
        slow_critical.critical = true;
        let pods = [&ordinary, &critical, &slow_critical];
        let names = |cs: Vec<Command>| -> Vec<String> {
            cs.into_iter()
                .map(|c| match c {
                    Command::Evict { pod, tier, .. } => format!("{}:{tier}", pod.name),
                    other => panic!("{other:?}"),
                })
                .collect()
        };
        // (pods, everyone, now, expected) with deadline 1090 and end 1120.
        let cases: [(&[&PodView], bool, f64, &[&str]); 4] = [
            // Before 1120-200 = 920, only tier 1 goes.
            (&pods, true, 900.0, &["app:1"]),
            // From 920 the slow critical pod is due too, tier 2 or not.
            (&pods, true, 920.0, &["app:1", "slow-agent:2"]),
            // Not everyone yet (no replacement, before the deadline): only the due pod.
            (&pods, false, 920.0, &["slow-agent:2"]),
            // With tier 1 gone, every critical pod.
            (
                &[&critical, &slow_critical],
                true,
                900.0,
                &["agent:2", "slow-agent:2"],
            ),
        ];
        for (in_scope, everyone, now, expected) in cases {
            let got = names(pods_to_evict(
                in_scope,
                everyone,
                Some(1_090.0),
                Some(1_120.0),
                now,
                false,
            ));
            assert_eq!(got, expected, "everyone={everyone} now={now}");
        }
    }
}
