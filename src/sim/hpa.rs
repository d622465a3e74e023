//! The simulated HorizontalPodAutoscaler's arithmetic (autoscaling/v2, a Pods metric): from what
//! the controller reads at one sync to the replicas it sets. Changes when the simulated HPA is
//! made to follow Kubernetes more closely. The engine (engine/controllers.rs) gathers what the
//! controller would read; prewarm's own sizing (core/policy/hpa_sizing.rs) is separate code on
//! purpose: prewarm has to predict this controller from what it can see, not share its formula.
//!
//! Sources (kubernetes/kubernetes, pkg/controller/podautoscaler/):
//! - replica_calculator.go, `calcPlainMetricReplicas` and `groupPods`: which pods count and how a
//!   missing or not-yet-running pod's metric is filled in, and the tolerance;
//! - horizontal.go, `stabilizeRecommendationWithBehaviors`,
//!   `convertDesiredReplicasWithBehaviorRate`, `calculateScaleUpLimitWithScalingRules` and
//!   `calculateScaleDownLimitWithBehaviors`: stabilisation windows and rate policies.

use std::collections::VecDeque;

use super::model::Hpa;

/// What the controller reads at one sync about the target's pods (those being deleted left out,
/// as `groupPods` skips pods with a deletion timestamp).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PodsReading {
    /// Mean of the metric over the pods that have a sample (requests in the system per pod).
    pub mean: f64,
    /// Running pods with a sample: `readyPodCount`.
    pub with_metric: u32,
    /// Running pods without a sample yet (loading the model, or Ready after the newest visible
    /// scrape): `missingPods`.
    pub missing: u32,
    /// Pods in phase Pending (unscheduled, waiting for their node or the image): ignored, but
    /// counted at 0 on a scale-up.
    pub pending: u32,
}

/// The replica calculator: the replicas the metric asks for, before behaviour and limits.
/// `current` is the scale target's spec.replicas, `target` the metric's averageValue.
pub fn recommend(r: PodsReading, current: u32, target: f64, tolerance: f64) -> u32 {
    let ratio = r.mean / target;
    let rebalance_pending = r.pending > 0 && ratio > 1.0;
    if !rebalance_pending && r.missing == 0 {
        if (1.0 - ratio).abs() <= tolerance {
            return current;
        }
        return (ratio * f64::from(r.with_metric)).ceil() as u32;
    }
    let mut sum = r.mean * f64::from(r.with_metric);
    let mut pods = r.with_metric;
    if r.missing > 0 {
        // On a scale-down a missing pod counts as at the target, on a scale-up as idle: both
        // damp the move.
        if ratio < 1.0 {
            sum += target * f64::from(r.missing);
        }
        pods += r.missing;
    }
    if rebalance_pending {
        pods += r.pending;
    }
    let new_ratio = sum / f64::from(pods) / target;
    let flips = (ratio < 1.0 && new_ratio > 1.0) || (ratio > 1.0 && new_ratio < 1.0);
    if (1.0 - new_ratio).abs() <= tolerance || flips {
        return current;
    }
    (new_ratio * f64::from(pods)).ceil() as u32
}

/// From zero replicas no pod reports a Pods metric; only an Object or External metric (the
/// queue's total, as KEDA exports it) can scale up, and Kubernetes then asks for
/// `ceil(total / target)` with no tolerance (replica_calculator.go,
/// `getUsageRatioReplicaCount` with currentReplicas 0). The simulator takes that path for a
/// `--min-replicas 0` fleet at zero.
pub fn recommend_from_zero(total: f64, target: f64) -> u32 {
    (total / target).ceil() as u32
}

/// The replicas the controller sets at `now` for the calculator's `desired`. Its memory between
/// syncs: `recommendations` (time, the calculator's replicas) and `events` (time, signed change
/// it made), both updated here. In order: the stabilisation windows (the lowest recommendation of the scale-up window, the
/// highest of the scale-down window, both including this one), then the rate policies over
/// `policy_period_s` (autoscaling/v2 defaults: up max(4 pods, 100 %) per 15 s, down 100 % per
/// 15 s), then minReplicas and maxReplicas.
pub fn normalise(
    hpa: &Hpa,
    recommendations: &mut VecDeque<(f64, u32)>,
    events: &mut VecDeque<(f64, i64)>,
    now: f64,
    current: u32,
    desired: u32,
) -> u32 {
    let longest = hpa.scale_down_window_s.max(hpa.scale_up_window_s);
    // Kubernetes keeps recommendations newer than the cutoff (time.After: strictly newer).
    let in_window = |t: f64, window: f64| t > now - window;
    let (mut up, mut down) = (desired, desired);
    for &(t, d) in recommendations.iter() {
        if in_window(t, hpa.scale_up_window_s) {
            up = up.min(d);
        }
        if in_window(t, hpa.scale_down_window_s) {
            down = down.max(d);
        }
    }
    recommendations.push_back((now, desired));
    while recommendations
        .front()
        .is_some_and(|&(t, _)| !in_window(t, longest))
    {
        recommendations.pop_front();
    }
    let stabilised = current.max(up).min(down);

    // Replicas at the start of the policy period: what was added in it taken off, what was
    // removed put back.
    let period = hpa.policy_period_s;
    while events.front().is_some_and(|&(t, _)| !in_window(t, period)) {
        events.pop_front();
    }
    let changed: i64 = events.iter().map(|&(_, c)| c).sum();
    let start = (i64::from(current) - changed).max(0) as f64;
    let mut set = stabilised;
    if stabilised > current {
        let by_pods = start + f64::from(hpa.scale_up_pods);
        let by_percent = (start * (1.0 + hpa.scale_up_percent / 100.0)).ceil();
        let limit = (by_pods.max(by_percent) as u32).max(current);
        set = set.min(limit.min(hpa.max_replicas));
    } else if stabilised < current {
        // Go truncates the percent policy's product toward zero.
        let limit = ((start * (1.0 - hpa.scale_down_percent / 100.0)).max(0.0) as u32).min(current);
        set = set.max(limit.max(hpa.min_replicas));
    }
    let set = set.clamp(hpa.min_replicas, hpa.max_replicas);
    if set != current {
        events.push_back((now, i64::from(set) - i64::from(current)));
    }
    set
}

#[cfg(test)]
mod tests;
