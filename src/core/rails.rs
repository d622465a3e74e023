//! Stage: the safety rails. They bound the raw spare a forecast asks for (floor, ceiling, GPU
//! cap), slow its changes (step limits, scale-down delay, cooldown), never scale down while pods
//! are pending, and finally let the hard limits win over everything that only slows a change.
//! Each rail that changes the value is logged as a `Reason`.

use super::plan::Reason;
use super::spec::{HeadroomState, Hold, PolicySpec, TargetSpec};

/// The limits of one decision, fixed before the rails run.
pub struct Rails {
    min_spare: u32,
    max_spare: u32,
    /// Spare replicas the GPU cap leaves after what is in use and pending.
    gpu_room: Option<(u32, u32)>,
    max_step_up: u32,
    max_step_down: u32,
    /// The tick's own share of the current spare (the replacement reserve excluded).
    base: u32,
    hold: Option<Hold>,
    cooldown_until: Option<f64>,
}

/// The railed spare and the hold to persist.
pub struct Railed {
    pub value: u32,
    pub hold: Option<Hold>,
}

impl Rails {
    pub fn new(target: &TargetSpec, prior: &HeadroomState, current_need: u32) -> Self {
        let gpus = target.gpus_per_replica.max(1);
        Rails {
            min_spare: target.min_spare,
            max_spare: target.max_spare,
            gpu_room: target
                .gpu_cap
                .map(|cap| (cap, (cap / gpus).saturating_sub(current_need))),
            max_step_up: target.max_step_up,
            max_step_down: target.max_step_down,
            base: prior.spare.saturating_sub(prior.replacement_reserved),
            hold: prior.hold,
            cooldown_until: prior.cooldown_until,
        }
    }

    pub fn apply(
        &self,
        raw: u32,
        pending_pods: u32,
        policy: &PolicySpec,
        now: f64,
        reasons: &mut Vec<Reason>,
    ) -> Railed {
        let mut v = raw;

        // 1. Floor and ceiling.
        if v < self.min_spare {
            v = self.min_spare;
            reasons.push(Reason::Floor {
                min_spare: self.min_spare,
            });
        }
        if v > self.max_spare {
            v = self.max_spare;
            reasons.push(Reason::Ceiling {
                max_spare: self.max_spare,
            });
        }
        // 2. GPU cap: (in use + pending + spare) × GPUs per replica ≤ cap.
        if let Some((gpu_cap, room)) = self.gpu_room {
            if v > room {
                v = room;
                reasons.push(Reason::GpuCap { gpu_cap });
            }
        }
        // What the scale-down delay remembers: the value wanted before any rail that only
        // slows change.
        let wanted = v;

        // 3. Step limits, relative to the tick's share of the current spare.
        let up_limit = self.base.saturating_add(self.max_step_up);
        let down_limit = self.base.saturating_sub(self.max_step_down);
        if v > up_limit {
            v = up_limit;
            reasons.push(Reason::StepUpLimited {
                max_step_up: self.max_step_up,
            });
        } else if v < down_limit {
            v = down_limit;
            reasons.push(Reason::StepDownLimited {
                max_step_down: self.max_step_down,
            });
        }
        // 4. Pending pods: the spare ran out, so it is not too large; never scale down now.
        if pending_pods > 0 {
            v = v.max(self.base);
            reasons.push(Reason::PendingPods {
                count: pending_pods,
            });
        }
        // 5. Scale-down delay: no decrease below the held high-water mark while it lasts (it
        //    blocks decreases only; it never raises the spare above the current one).
        let active_hold = self.hold.filter(|h| h.until > now);
        if let Some(h) = active_hold {
            let keep = h.spare.min(self.base);
            if v < keep {
                v = keep;
                reasons.push(Reason::ScaleDownDelay {
                    hold_spare: h.spare,
                    until: h.until,
                });
            }
        }
        let hold = match active_hold {
            Some(h) if h.spare >= wanted => Some(h),
            _ if policy.scale_down_delay_s > 0.0 => Some(Hold {
                spare: wanted,
                until: now + policy.scale_down_delay_s,
            }),
            _ => None,
        };
        // 6. Cooldown gates scale-down only: fast up, slow down (Knative/HPA convention).
        if let Some(until) = self.cooldown_until.filter(|u| *u > now) {
            if v < self.base {
                v = self.base;
                reasons.push(Reason::Cooldown { until });
            }
        }
        // 7. Hard limits win over the rails that only slow change: never above the ceiling or
        //    the GPU cap (the cap also wins over the floor), never below the floor.
        if v > self.max_spare {
            v = self.max_spare;
            reasons.push(Reason::Ceiling {
                max_spare: self.max_spare,
            });
        }
        if v < self.min_spare {
            // Only the step-up limit can leave v below the floor here. The floor is a promise,
            // not a forecast: it is met at once, past the step limit.
            v = self.min_spare;
            reasons.push(Reason::Floor {
                min_spare: self.min_spare,
            });
        }
        if let Some((gpu_cap, room)) = self.gpu_room {
            if v > room {
                v = room;
                reasons.push(Reason::GpuCap { gpu_cap });
            }
        }
        Railed { value: v, hold }
    }
}
