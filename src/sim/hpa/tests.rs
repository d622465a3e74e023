//! The HPA's arithmetic on hand-worked cases (targets and means chosen so every ratio is exact in
//! binary floating point).

use super::*;

fn reading(mean: f64, with_metric: u32, missing: u32, pending: u32) -> PodsReading {
    PodsReading {
        mean,
        with_metric,
        missing,
        pending,
    }
}

#[test]
fn a_ratio_within_the_tolerance_changes_nothing() {
    // Target 5 per pod, 4 pods at 5.4: ratio 1.08, |1 - 1.08| <= 0.1, the HPA keeps 4 (a plain
    // ceil(4 x 5.4 / 5) would say 5).
    assert_eq!(recommend(reading(5.4, 4, 0, 0), 4, 5.0, 0.1), 4);
    // At 6 per pod: ratio 1.2, ceil(1.2 x 4) = ceil(4.8) = 5.
    assert_eq!(recommend(reading(6.0, 4, 0, 0), 4, 5.0, 0.1), 5);
    // No tolerance: 5.4 gives ceil(1.08 x 4) = ceil(4.32) = 5.
    assert_eq!(recommend(reading(5.4, 4, 0, 0), 4, 5.0, 0.0), 5);
}

#[test]
fn pending_pods_count_as_idle_on_a_scale_up() {
    // 4 running pods at 4.5 against a target of 4 (ratio 1.125), 4 more pods Pending (spec
    // replicas 8). On a scale-up the pending pods count at 0: 18 over 8 pods = 2.25, ratio
    // 0.5625 < 1: the direction would flip, so the HPA keeps 8.
    assert_eq!(recommend(reading(4.5, 4, 0, 4), 8, 4.0, 0.1), 8);
    // Without pending pods: ceil(1.125 x 4) = 5.
    assert_eq!(recommend(reading(4.5, 4, 0, 0), 4, 4.0, 0.1), 5);
    // On a scale-down pending pods are left out: 4 pods at 2 (ratio 0.5) ask ceil(0.5 x 4) = 2.
    assert_eq!(recommend(reading(2.0, 4, 0, 4), 8, 4.0, 0.1), 2);
}

#[test]
fn missing_pods_damp_both_directions() {
    // Scale-down: 4 pods at 2 (ratio 0.5) and 4 loading without a sample, counted at the target
    // 4: (8 + 16) / 8 pods = 3, ratio 0.75, ceil(0.75 x 8) = 6 (not ceil(8 / 4) = 2).
    assert_eq!(recommend(reading(2.0, 4, 4, 0), 8, 4.0, 0.1), 6);
    // Scale-up: 2 pods at 10 (ratio 2.5), 2 missing counted at 0: 20 / 4 pods = 5, ratio 1.25,
    // ceil(1.25 x 4) = 5.
    assert_eq!(recommend(reading(10.0, 2, 2, 0), 4, 4.0, 0.1), 5);
    // Scale-up damped into the tolerance: 2 pods at 8.4 (ratio 2.1), 2 missing at 0: 16.8 / 4 =
    // 4.2, ratio 1.05: keep 4.
    assert_eq!(recommend(reading(8.4, 2, 2, 0), 4, 4.0, 0.1), 4);
}

fn hpa() -> Hpa {
    Hpa::kubernetes_defaults(0.5, 1, 10)
}

#[test]
fn scale_up_is_limited_per_policy_period() {
    let hpa = hpa();
    let (mut recs, mut events) = (VecDeque::new(), VecDeque::new());
    // From 3 wanting 20: max(3 + 4 pods, ceil(3 x 2) = 6) = 7.
    assert_eq!(normalise(&hpa, &mut recs, &mut events, 0.0, 3, 20), 7);
    // 5 s later the +4 at 0 is still in the 15-s period: it started at 3, limit 7 again.
    assert_eq!(normalise(&hpa, &mut recs, &mut events, 5.0, 7, 20), 7);
    // At 15 the event at 0 has left the period (strictly newer than 15 - 15 only): from 7,
    // max(11, 14) = 14, capped at maxReplicas 10.
    assert_eq!(normalise(&hpa, &mut recs, &mut events, 15.0, 7, 20), 10);
}

#[test]
fn scale_down_waits_for_the_highest_wish_of_its_window() {
    let hpa = hpa();
    let (mut recs, mut events) = (VecDeque::new(), VecDeque::new());
    recs.push_back((0.0, 8));
    // At 100 the calculator wants 3, but 8 (at 0) is in the 300-s window: keep 8.
    assert_eq!(normalise(&hpa, &mut recs, &mut events, 100.0, 8, 3), 8);
    // At 300 the wish at 0 is exactly 300 s old and out (strictly newer only); 3 (at 100) is
    // the highest left: down to 3 (100 % per period allows it).
    assert_eq!(normalise(&hpa, &mut recs, &mut events, 300.0, 8, 2), 3);
    // Below minReplicas never: at 700 the wishes of 100 and 300 are out of the window, the
    // calculator's 0 is all there is; minReplicas 1 holds.
    assert_eq!(normalise(&hpa, &mut recs, &mut events, 700.0, 3, 0), 1);
}

#[test]
fn a_scale_up_window_takes_the_lowest_recent_wish() {
    // A 60-s scale-up window: wishes 9 at 0 and 5 at 30, now 12 at 45 from 4 replicas: the
    // lowest of the window is 5; 5 > 4 so up to 5 (within max(4 + 4, 8)).
    let hpa = Hpa {
        scale_up_window_s: 60.0,
        ..hpa()
    };
    let (mut recs, mut events) = (VecDeque::new(), VecDeque::new());
    recs.extend([(0.0, 9), (30.0, 5)]);
    assert_eq!(normalise(&hpa, &mut recs, &mut events, 45.0, 4, 12), 5);
}

#[test]
fn from_zero_the_total_over_the_target_rounded_up() {
    // 9 requests in the system, target 4 per pod: ceil(2.25) = 3; 1 request: 1; none: 0.
    assert_eq!(recommend_from_zero(9.0, 4.0), 3);
    assert_eq!(recommend_from_zero(1.0, 4.0), 1);
    assert_eq!(recommend_from_zero(0.0, 4.0), 0);
}
