//! Stage: spare for the HPA's next scale-out step (the target's `nextStepSpare`, 0 = off).
//!
//! Why: an HPA on requests in the system sizes on the instantaneous count, which fluctuates
//! (about Poisson around rate × service time), and its scale-down stabilisation keeps the
//! highest proposal of the last five minutes. It therefore runs a few replicas above what the
//! mean rate needs, and `hpa_sizing`'s prediction at the horizon (the mean) is at or below the
//! replicas already running: on a slow ramp the forecast's spare is 0, and each scale-out that
//! does not fit the warm nodes waits for a node (measured on the simulator's `diurnal`: the
//! HPA ran 1 to 8 replicas above the prediction in 93 % of the ticks, and every node cold
//! start came when it added a replica to full nodes).
//!
//! The cheapest spare that lets that step land warm is the step itself: a placeholder of one
//! replica sits on a free GPU of a warm node when there is one (costing no node) and makes
//! Karpenter launch the next node only when the warm nodes are full, one step ahead of the
//! HPA. So while the HPA can still scale out (below its `maxReplicas`) and the forecast's upper
//! band at the horizon is above the rate observed now (demand may grow within the lead time),
//! keep `step` spare replicas (at most the room below `maxReplicas`). Larger rises are the
//! forecast's and the fast path's job; this only covers the step the mean cannot see.

use super::observation::HpaStatus;

/// Spare replicas for the HPA's next scale-out step; 0 when `step` is 0, without a predictable
/// HPA (`hpa` None), at the HPA's `maxReplicas`, or when the forecast's upper band at the
/// horizon is not above the rate observed now.
pub fn next_step_spare(
    step: u32,
    hpa: Option<&HpaStatus>,
    observed_rate: f64,
    rate_at_horizon: f64,
) -> u32 {
    let Some(hpa) = hpa else { return 0 };
    // NaN is not greater: no evidence of growth, no spare.
    let rising = rate_at_horizon > observed_rate;
    if !rising {
        return 0;
    }
    step.min(hpa.max_replicas.saturating_sub(hpa.current_replicas))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::observation::HpaMetric;

    fn hpa(current: u32, max: u32) -> HpaStatus {
        HpaStatus {
            min_replicas: 1,
            max_replicas: max,
            current_replicas: current,
            desired_replicas: current,
            metric: HpaMetric::InSystemPerReplica {
                target_average: 5.6,
            },
        }
    }

    #[test]
    fn next_step_table() {
        // (name, step, hpa, observed rate, rate at horizon, want)
        type Row = (&'static str, u32, Option<HpaStatus>, f64, f64, u32);
        let rows: Vec<Row> = vec![
            // Upper band 6.9 req/s above the 6.3 observed, HPA at 8 of 30: one step.
            ("rising room", 1, Some(hpa(8, 30)), 6.3, 6.9, 1),
            ("step of two", 2, Some(hpa(8, 30)), 6.3, 6.9, 2),
            ("off", 0, Some(hpa(8, 30)), 6.3, 6.9, 0),
            // rate_at_horizon is max(upper, observed): equal means the upper band is at or
            // below what is already here.
            ("not rising", 1, Some(hpa(8, 30)), 6.3, 6.3, 0),
            ("no hpa (queue sizing)", 1, None, 6.3, 6.9, 0),
            // One replica below maxReplicas: a step of 2 can only use one.
            ("room of one", 2, Some(hpa(29, 30)), 6.3, 6.9, 1),
            ("at max", 1, Some(hpa(30, 30)), 6.3, 6.9, 0),
            // Above max (an HPA edited down): no room, no underflow.
            ("above max", 1, Some(hpa(31, 30)), 6.3, 6.9, 0),
            // Idle now, the band allows demand: the first replica lands warm.
            ("idle", 1, Some(hpa(1, 30)), 0.0, 0.4, 1),
            ("nan horizon", 1, Some(hpa(8, 30)), 6.3, f64::NAN, 0),
        ];
        for (name, step, h, observed, horizon, want) in rows {
            assert_eq!(
                next_step_spare(step, h.as_ref(), observed, horizon),
                want,
                "{name}"
            );
        }
    }
}
