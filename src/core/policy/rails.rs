//! Stage: the safety rails. They bound the raw spare a forecast asks for (floor, ceiling, GPU
//! cap), slow its changes (step limits, scale-down delay, cooldown), never scale down while pods
//! are pending, and finally let the hard limits win over everything that only slows a change.
//! Each rail that changes the value is logged as a `Reason`.

use super::plan::Reason;
use crate::spec::{HeadroomState, Hold, PolicySpec, TargetSpec};

/// The limits of one decision, fixed before the rails run.
pub struct Rails {
    min_spare: u32,
    max_spare: u32,
    /// Spare replicas the GPU cap leaves the tick after what is in use, pending, and reserved
    /// for replacements of draining nodes (the reserve is served first; see `new`).
    gpu_room: Option<(u32, u32)>,
    max_step_up: u32,
    max_step_down: u32,
    /// The tick's own share of the current spare (the replacement reserve excluded).
    base: u32,
    hold: Option<Hold>,
    cooldown_until: Option<f64>,
    /// A scheduled window's minimum spare and its index, a floor like `min_spare`.
    scheduled: Option<(u32, usize)>,
    /// The fast path's own spare when it fired this tick (the step-up limit does not hold the
    /// spare below it); None: it did not fire.
    urgent: Option<u32>,
    /// The replicas the seasonal forecast adds at the horizon above the trend-only forecast
    /// (0: none, or no seasonal forecast): provisioned at once, past the step-up limit.
    seasonal_rise: u32,
    /// The spare the forecast alone wants (without the fast path): the most the scale-down
    /// delay remembers.
    remembered_at_most: Option<u32>,
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
            // The reserve takes the cap's room before the forecast does: a replacement for a
            // draining node is needed now, a forecast spare only maybe. The tick never cuts the
            // reserve itself (the drain owns it), so spare + reserve exceeds the cap only when
            // the reserve alone does: make-before-break briefly runs above the cap.
            gpu_room: target.gpu_cap.map(|cap| {
                let room = (cap / gpus).saturating_sub(current_need);
                (cap, room.saturating_sub(prior.replacement_reserved))
            }),
            max_step_up: target.max_step_up,
            max_step_down: target.max_step_down,
            base: prior.spare.saturating_sub(prior.replacement_reserved),
            hold: prior.hold,
            cooldown_until: prior.cooldown_until,
            scheduled: None,
            urgent: None,
            seasonal_rise: 0,
            remembered_at_most: None,
        }
    }

    /// The fast path's spare is for replicas the HPA is creating right now; once they run, it is
    /// not needed, so the scale-down delay remembers at most what the forecast wants.
    pub fn remember_at_most(mut self, forecast_spare: u32) -> Self {
        self.remembered_at_most = Some(forecast_spare);
        self
    }

    /// Adds a scheduled window's minimum spare as a floor (the larger floor wins).
    pub fn with_scheduled_floor(mut self, scheduled: Option<(u32, usize)>) -> Self {
        self.scheduled = scheduled;
        self
    }

    /// Whether the fast path fired this tick, and the spare of its own it wants (0 once the
    /// HPA's pods it ordered for are in place): provisioned in one step, past the step-up
    /// limit.
    pub fn urgent(mut self, fast_path_spare: Option<u32>) -> Self {
        self.urgent = fast_path_spare;
        self
    }

    /// The replicas the seasonal forecast adds above the trend-only forecast this tick. A
    /// recurring rise is known a lead time ahead, so stepping towards it would make it late: it
    /// passes the step-up limit at once, and only the rest of the spare steps on top of it.
    pub fn seasonal_rise(mut self, replicas: u32) -> Self {
        self.seasonal_rise = replicas;
        self
    }

    /// The effective floor and the reason to log when it is applied.
    fn floor(&self) -> (u32, Reason) {
        match self.scheduled {
            Some((min_spare, window)) if min_spare > self.min_spare => {
                (min_spare, Reason::Scheduled { min_spare, window })
            }
            _ => (
                self.min_spare,
                Reason::Floor {
                    min_spare: self.min_spare,
                },
            ),
        }
    }

    /// `v` no higher than the ceiling (`maxSpare`), logged when it cuts.
    fn ceiling(&self, v: u32, reasons: &mut Vec<Reason>) -> u32 {
        if v <= self.max_spare {
            return v;
        }
        reasons.push(Reason::Ceiling {
            max_spare: self.max_spare,
        });
        self.max_spare
    }

    /// `v` no higher than the room the GPU cap leaves, logged when it cuts.
    fn gpu_cap(&self, v: u32, reasons: &mut Vec<Reason>) -> u32 {
        match self.gpu_room {
            Some((gpu_cap, room)) if v > room => {
                reasons.push(Reason::GpuCap { gpu_cap });
                room
            }
            _ => v,
        }
    }

    /// The HPA floor (`hpa.raiseMinReplicas`) within the rails a spare has: the replicas the HPA
    /// will want at the horizon (`at_horizon`), at most `maxSpare` above those it wants now
    /// (`wanted_now`: the warm replicas a floor holds are spare by another name), at most
    /// `maxStepUp` above those in place (`in_place`: the replicas one tick adds) plus the
    /// seasonal rise (`seasonal_rise`: a recurring rise known a lead ahead, at once), and never
    /// more replicas than the GPU cap leaves after the replacement reserve. Build the rails
    /// with a current need of 0 (`Rails::new(target, prior, 0)`): the floor counts every
    /// replica, not a spare beyond those in use. A falling floor is not slowed: lowering it
    /// removes no pod (the HPA's own scale-down stabilisation does that), so the user's value
    /// comes back as soon as the forecast stops asking for more.
    ///
    /// A floor above the replicas in place is at least what the HPA asks for now from its
    /// queue (`hpa_asks`): an HPA below its minReplicas sets minReplicas and reads no metric
    /// at that sync (Kubernetes' `reconcileAutoscaler`), so a floor raised by less than the
    /// HPA's own step would take its scale-up over and slow it, sync after sync. A floor not
    /// above them leaves the HPA's scale-up to the HPA.
    pub fn replica_floor(
        &self,
        at_horizon: u32,
        wanted_now: u32,
        in_place: u32,
        hpa_asks: u32,
    ) -> u32 {
        let mut v = at_horizon
            .min(wanted_now.saturating_add(self.max_spare))
            .min(
                in_place
                    .saturating_add(self.seasonal_rise)
                    .saturating_add(self.max_step_up),
            );
        if v > in_place {
            v = v.max(hpa_asks);
        }
        self.gpu_cap(v, &mut Vec::new())
    }

    /// The tick's own spare when it cannot trust its inputs (fail static): never below what it
    /// holds now, raised to the floor (the target's `minSpare` or a scheduled window's) so that a
    /// target with no metrics (no pods yet, scale to zero) still gets its scheduled capacity,
    /// bounded by the ceiling and the GPU cap as any spare is. Nothing forecast, nothing lowered.
    pub fn blind_floor(&self, reasons: &mut Vec<Reason>) -> u32 {
        let (floor, floor_reason) = self.floor();
        if floor <= self.base {
            return self.base;
        }
        reasons.push(floor_reason);
        let v = self.ceiling(floor, reasons);
        self.gpu_cap(v, reasons).max(self.base)
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

        // 1. Floor (the target's or a scheduled window's) and ceiling.
        let (floor, floor_reason) = self.floor();
        if v < floor {
            v = floor;
            reasons.push(floor_reason.clone());
        }
        v = self.ceiling(v, reasons);
        // 2. GPU cap: (in use + pending + spare) × GPUs per replica ≤ cap.
        v = self.gpu_cap(v, reasons);
        // What the scale-down delay remembers: the value wanted before any rail that only
        // slows change.
        let wanted = self
            .remembered_at_most
            .map_or(v, |m| v.min(m.max(self.floor().0)));

        // What the rails that slow a decrease (3–6) protect. Without the fast path: the whole
        // current spare (a pod pending means the spare ran out, so it is not too large; on a
        // ramp the forecast's spare is what keeps nodes warm ahead of the HPA). While the fast
        // path acts: the current spare less what the pending pods take. Its spare was ordered
        // for exactly the pods the HPA is now creating (sizing counts them in place), and each
        // pending pod takes the node one of the spare's placeholders waits for; holding that
        // part of the spare would launch a second node for each (296 ready GPUs for an HPA
        // capped at 200 on burst-180 in the simulator).
        let kept = match self.urgent {
            Some(_) => self.base.saturating_sub(pending_pods),
            None => self.base,
        };

        // 3. Step limits, relative to the tick's share of the current spare.
        // The fast path lifts the limit for its own spare only: the forecast's spare keeps its
        // steps (a queue inflates the latency the forecast sizes with, and it would otherwise
        // ride the fast path's tick to a jump of its own). The seasonal rise is lifted the same
        // way: the current spare counts as covering it first, and the rest steps on top of it
        // (so a trend rise riding a seasonal tick still steps).
        let up_limit = self
            .base
            .max(self.seasonal_rise)
            .saturating_add(self.max_step_up)
            .max(self.urgent.unwrap_or(0));
        let down_limit = kept.saturating_sub(self.max_step_down);
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
        // 4. Pending pods: the spare ran out, so it is not too large; no scale-down now beyond
        //    what the pending pods take.
        if pending_pods > 0 {
            v = v.max(kept);
            reasons.push(Reason::PendingPods {
                count: pending_pods,
            });
        }
        // 5. Scale-down delay: no decrease below the held high-water mark while it lasts (it
        //    blocks decreases only; it never raises the spare above the current one).
        let active_hold = self.hold.filter(|h| h.until > now);
        if let Some(h) = active_hold {
            let keep = h.spare.min(kept);
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
            _ if policy.hold_s() > 0.0 => Some(Hold {
                spare: wanted,
                until: now + policy.hold_s(),
            }),
            _ => None,
        };
        // 6. Cooldown gates scale-down only: fast up, slow down (Knative/HPA convention).
        if let Some(until) = self.cooldown_until.filter(|u| *u > now) {
            if v < kept {
                v = kept;
                reasons.push(Reason::Cooldown { until });
            }
        }
        // 7. Hard limits win over the rails that only slow change: never above the ceiling or
        //    the GPU cap (the cap also wins over the floor), never below the floor.
        v = self.ceiling(v, reasons);
        if v < floor {
            // Only the step-up limit can leave v below the floor here. The floor is a promise,
            // not a forecast: it is met at once, past the step limit.
            v = floor;
            reasons.push(floor_reason);
        }
        v = self.gpu_cap(v, reasons);
        Railed { value: v, hold }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{HeadroomKind, ScaleDownDelay};

    /// The fixed clock of every row.
    const NOW: f64 = 1_700_000_000.0;

    fn target() -> TargetSpec {
        TargetSpec {
            min_spare: 0,
            max_step_up: 4,
            max_step_down: 1,
            ..TargetSpec::new("t", "gpu", HeadroomKind::NodePoolReplicas, 10)
        }
    }

    struct Row {
        name: &'static str,
        target: TargetSpec,
        policy: PolicySpec,
        prior: HeadroomState,
        /// Replicas in use + pending now (only the GPU cap reads it).
        need: u32,
        raw: u32,
        pending: u32,
        /// The fast path's own spare when it fired this tick.
        fast: Option<u32>,
        want: u32,
        hold: Option<Hold>,
        reasons: Vec<Reason>,
    }

    /// Raw 2 from a spare of 2, nothing in the way: 2, and a fresh hold of 2.
    fn base() -> Row {
        Row {
            name: "base",
            target: target(),
            policy: PolicySpec::default(),
            prior: spare(2),
            need: 0,
            raw: 2,
            pending: 0,
            fast: None,
            want: 2,
            hold: hold(2, NOW + 300.0),
            reasons: vec![],
        }
    }

    /// `policy` deciding on a horizon learned at 60 s (`Horizon::applied_to`, as the tick and
    /// the simulator apply it).
    fn learned_60(policy: PolicySpec) -> PolicySpec {
        crate::lead::Horizon {
            seconds: 60.0,
            phases: Vec::new(),
            fallback: None,
        }
        .applied_to(&policy)
    }

    /// A hold of `spare` until `until`, as `apply` returns it (and a prior state carries it).
    fn hold(spare: u32, until: f64) -> Option<Hold> {
        Some(Hold { spare, until })
    }

    fn spare(spare: u32) -> HeadroomState {
        HeadroomState {
            spare,
            ..HeadroomState::default()
        }
    }

    #[test]
    fn rails_table() {
        let rows = vec![
            base(),
            Row {
                // SCALE_DOWN_DELAY_SECONDS=0: no hold is kept, so nothing is persisted.
                name: "scale-down delay 0 keeps no hold",
                policy: PolicySpec {
                    scale_down_delay: ScaleDownDelay::Seconds(0.0),
                    ..PolicySpec::default()
                },
                hold: None,
                ..base()
            },
            Row {
                // SCALE_DOWN_DELAY_SECONDS=0 with a hold left from before the setting changed:
                // it still blocks the step down (3 → 2) until it ends, and is carried as is.
                name: "scale-down delay 0 honours an old hold",
                policy: PolicySpec {
                    scale_down_delay: ScaleDownDelay::Seconds(0.0),
                    ..PolicySpec::default()
                },
                prior: HeadroomState {
                    hold: hold(3, NOW + 10.0),
                    ..spare(3)
                },
                raw: 0,
                want: 3,
                hold: hold(3, NOW + 10.0),
                reasons: vec![
                    Reason::StepDownLimited { max_step_down: 1 },
                    Reason::ScaleDownDelay {
                        hold_spare: 3,
                        until: NOW + 10.0,
                    },
                ],
                ..base()
            },
            Row {
                // A hold of one lead time, with the horizon learned at 60 s while
                // LEAD_TIME_SECONDS stays 180: the fresh hold of 2 ends one learned lead from
                // now, NOW + 60 (the horizon this decision looked ahead by), not NOW + 180.
                name: "a hold of one lead is the learned horizon",
                policy: learned_60(PolicySpec {
                    scale_down_delay: ScaleDownDelay::Lead,
                    ..PolicySpec::default()
                }),
                hold: hold(2, NOW + 60.0),
                ..base()
            },
            Row {
                // A hold of 3 until NOW+100 is overtaken by a wanted 6: the new high-water mark
                // is 6 for the full delay from now; 2 + step 4 = 6 is reached in this tick.
                name: "hold overtaken by a higher wanted value",
                prior: HeadroomState {
                    hold: hold(3, NOW + 100.0),
                    ..spare(2)
                },
                raw: 6,
                want: 6,
                hold: hold(6, NOW + 300.0),
                ..base()
            },
            Row {
                // The same hold with a wanted value equal to it is kept, not renewed.
                name: "hold equal to the wanted value is kept",
                prior: HeadroomState {
                    hold: hold(3, NOW + 100.0),
                    ..spare(3)
                },
                raw: 3,
                want: 3,
                hold: hold(3, NOW + 100.0),
                ..base()
            },
            Row {
                // A hold that ends exactly now is over (until > now is required).
                name: "hold ending now is over",
                prior: HeadroomState {
                    hold: hold(3, NOW),
                    ..spare(3)
                },
                raw: 0,
                want: 2,
                hold: hold(0, NOW + 300.0),
                reasons: vec![Reason::StepDownLimited { max_step_down: 1 }],
                ..base()
            },
            Row {
                // A cooldown persisted until NOW+30 blocks 3 → 2 (a cooldown of 0 seconds is
                // tested in the decide table: it persists none).
                name: "cooldown blocks the step down",
                prior: HeadroomState {
                    cooldown_until: Some(NOW + 30.0),
                    ..spare(3)
                },
                raw: 0,
                want: 3,
                hold: hold(0, NOW + 300.0),
                reasons: vec![
                    Reason::StepDownLimited { max_step_down: 1 },
                    Reason::Cooldown { until: NOW + 30.0 },
                ],
                ..base()
            },
            Row {
                // A cooldown ending exactly now no longer blocks.
                name: "cooldown ending now is over",
                prior: HeadroomState {
                    cooldown_until: Some(NOW),
                    ..spare(3)
                },
                raw: 0,
                want: 2,
                hold: hold(0, NOW + 300.0),
                reasons: vec![Reason::StepDownLimited { max_step_down: 1 }],
                ..base()
            },
            Row {
                // maxStepDown 0: the spare never falls by itself (only the ceiling can cut it).
                name: "step down 0",
                target: TargetSpec {
                    max_step_down: 0,
                    ..target()
                },
                prior: spare(3),
                raw: 0,
                want: 3,
                hold: hold(0, NOW + 300.0),
                reasons: vec![Reason::StepDownLimited { max_step_down: 0 }],
                ..base()
            },
            Row {
                // GPU cap 8 at 2 GPUs per replica = 4 replicas; 1 in use → room 3; 2 reserved
                // for replacements take room first → the tick's own room is 1 of the raw 3.
                name: "GPU cap counts the replacement reserve first",
                target: TargetSpec {
                    gpus_per_replica: 2,
                    gpu_cap: Some(8),
                    ..target()
                },
                prior: HeadroomState {
                    replacement_reserved: 2,
                    ..spare(2)
                },
                need: 1,
                raw: 3,
                want: 1,
                hold: hold(1, NOW + 300.0),
                reasons: vec![Reason::GpuCap { gpu_cap: 8 }],
                ..base()
            },
            Row {
                // Reserve 4 > room 3: the tick's own share is 0 (the caller adds the 4 on top:
                // one replica above the cap while the drain makes before it breaks). The floor
                // of 1 yields to the cap.
                name: "reserve beyond the cap leaves the tick nothing",
                target: TargetSpec {
                    gpus_per_replica: 2,
                    gpu_cap: Some(8),
                    min_spare: 1,
                    ..target()
                },
                prior: HeadroomState {
                    replacement_reserved: 4,
                    ..spare(4)
                },
                need: 1,
                raw: 3,
                want: 0,
                hold: hold(0, NOW + 300.0),
                reasons: vec![
                    Reason::GpuCap { gpu_cap: 8 },
                    Reason::Floor { min_spare: 1 },
                    Reason::GpuCap { gpu_cap: 8 },
                ],
                ..base()
            },
            Row {
                // Pending pods forbid the step down from 3 (raw 0 → step 2 → kept at 3): the
                // spare ran out, and on a ramp it is what keeps nodes warm ahead of the HPA.
                name: "pending pods",
                prior: spare(3),
                raw: 0,
                pending: 1,
                want: 3,
                hold: hold(0, NOW + 300.0),
                reasons: vec![
                    Reason::StepDownLimited { max_step_down: 1 },
                    Reason::PendingPods { count: 1 },
                ],
                ..base()
            },
            Row {
                // While the fast path acts (its own spare now 0: the HPA's pods are in place),
                // pending pods forbid a step down of what they do not take: from 3 with 1
                // pending, 2 are kept (raw 0 → step from 2 to 1 → back to 2).
                name: "pending pods while the fast path acts",
                prior: spare(3),
                raw: 0,
                pending: 1,
                fast: Some(0),
                want: 2,
                hold: hold(0, NOW + 300.0),
                reasons: vec![
                    Reason::StepDownLimited { max_step_down: 1 },
                    Reason::PendingPods { count: 1 },
                ],
                ..base()
            },
            Row {
                // While the fast path acts, the spare the HPA's own pods take is handed over at
                // once, past the cooldown
                // and the hold: spare 6, 4 pods pending → 2 kept; raw 0 steps from 2 to 1, the
                // pending pods keep 2; the hold of 6 and the cooldown keep no more than 2.
                name: "pending pods take the spare past hold and cooldown",
                fast: Some(0),
                prior: HeadroomState {
                    cooldown_until: Some(NOW + 30.0),
                    hold: hold(6, NOW + 100.0),
                    ..spare(6)
                },
                raw: 0,
                pending: 4,
                want: 2,
                hold: hold(6, NOW + 100.0),
                reasons: vec![
                    Reason::StepDownLimited { max_step_down: 1 },
                    Reason::PendingPods { count: 4 },
                ],
                ..base()
            },
            Row {
                // While the fast path acts, more pods pending (8) than spare (6): all of it goes
                // to them.
                name: "pending pods take all the spare",
                fast: Some(0),
                prior: spare(6),
                raw: 0,
                pending: 8,
                want: 0,
                hold: hold(0, NOW + 300.0),
                reasons: vec![Reason::PendingPods { count: 8 }],
                ..base()
            },
            Row {
                // Step-up limit: from 2, raw 9 → 6; the hold remembers the wanted 9.
                name: "step up limit",
                raw: 9,
                want: 6,
                hold: hold(9, NOW + 300.0),
                reasons: vec![Reason::StepUpLimited { max_step_up: 4 }],
                ..base()
            },
        ];
        for row in rows {
            let rails = Rails::new(&row.target, &row.prior, row.need).urgent(row.fast);
            let mut reasons = vec![];
            let got = rails.apply(row.raw, row.pending, &row.policy, NOW, &mut reasons);
            assert_eq!(
                got.value, row.want,
                "{}: value; reasons {reasons:?}",
                row.name
            );
            assert_eq!(got.hold, row.hold, "{}: hold", row.name);
            assert_eq!(reasons, row.reasons, "{}: reasons", row.name);
        }
    }

    /// The seasonal rise passes the step-up limit and the rest steps on top of it. From a
    /// spare of 2 with maxStepUp 4 (ceiling 10): the limit is max(2, rise) + 4.
    #[test]
    fn seasonal_rise_lifts_the_step_limit_for_its_own_part() {
        // (seasonal rise, prior spare, raw, want, step limit logged)
        let rows = [
            // No seasonal rise: 2 + 4 = 6.
            (0, 2, 9, 6, true),
            // A rise of 7 of the raw 9: max(2, 7) + 4 = 11 lets 9 through.
            (7, 2, 9, 9, false),
            // A rise of 3: max(2, 3) + 4 = 7; the trend's part of 9 still steps.
            (3, 2, 9, 7, true),
            // A rise the current spare already covers (1 ≤ 2): the plain limit 6.
            (1, 2, 9, 6, true),
            // From 0, a rise of 5 of the raw 10: 5 + 4 = 9.
            (5, 0, 10, 9, true),
        ];
        for (rise, prior, raw, want, limited) in rows {
            let rails = Rails::new(&target(), &spare(prior), 0).seasonal_rise(rise);
            let mut reasons = vec![];
            let got = rails.apply(raw, 0, &PolicySpec::default(), NOW, &mut reasons);
            assert_eq!(got.value, want, "rise {rise}, prior {prior}, raw {raw}");
            let logged = reasons.contains(&Reason::StepUpLimited { max_step_up: 4 });
            assert_eq!(logged, limited, "rise {rise}, raw {raw}: {reasons:?}");
        }
    }

    /// The HPA floor's step-up limit is lifted by the seasonal rise as the spare's is: at most
    /// in place + rise + maxStepUp (4), within the horizon and maxSpare (10) above the replicas
    /// wanted now. 10 replicas in place, the HPA asks for none.
    #[test]
    fn seasonal_rise_lifts_the_floor_step_limit_for_its_own_part() {
        // (name, seasonal rise, at horizon, wanted now, floor) by hand.
        let rows = [
            // min(40, 35 + 10 = 45, 10 + 0 + 4 = 14): a rise of 30 steps 4 a tick.
            ("no seasonal rise", 0, 40, 35, 14),
            // min(40, 45, 10 + 26 + 4 = 40): a recurring burst the trend does not see, at once.
            ("the whole rise seasonal", 26, 40, 35, 40),
            // min(40, 45, 10 + 20 + 4 = 34): the trend's part of the rise still steps.
            ("part of it seasonal", 20, 40, 35, 34),
            // min(40, 25 + 10 = 35, 40): maxSpare still bounds it.
            ("maxSpare binds", 26, 40, 25, 35),
        ];
        for (name, rise, at_horizon, now, want) in rows {
            let rails = Rails::new(&target(), &spare(0), 0).seasonal_rise(rise);
            assert_eq!(rails.replica_floor(at_horizon, now, 10, 0), want, "{name}");
        }
    }

    /// The fast path lifts the step-up limit for its own spare only. From a spare of 2 with
    /// maxStepUp 4 (limit 6; ceiling 10): without it raw 9 gives 6; a fast-path spare of 8
    /// lifts the limit to 8, so raw 9 gives 8 (still limited, logged); a fast-path spare of 9
    /// lets raw 9 through; raw 5 is within the plain limit whatever the fast path wants.
    #[test]
    fn fast_path_lifts_the_step_limit_for_its_own_spare() {
        // (fast-path spare when it fired, raw, want, step limit logged)
        let rows = [
            (None, 9, 6, true),
            (Some(0), 9, 6, true),
            (Some(8), 9, 8, true),
            (Some(9), 9, 9, false),
            (Some(3), 5, 5, false),
        ];
        let prior = spare(2);
        for (fast, raw, want, limited) in rows {
            let rails = Rails::new(&target(), &prior, 0).urgent(fast);
            let mut reasons = vec![];
            let got = rails.apply(raw, 0, &PolicySpec::default(), NOW, &mut reasons);
            assert_eq!(got.value, want, "fast {fast:?}, raw {raw}");
            let logged = reasons.contains(&Reason::StepUpLimited { max_step_up: 4 });
            assert_eq!(logged, limited, "fast {fast:?}, raw {raw}: {reasons:?}");
        }
    }
}
