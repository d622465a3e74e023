//! The residual, decomposed: of the requests that still waited longer than the SLO wait, which a
//! forecast could have prevented, which the lead time let through, and what the rest would cost
//! to remove with a constant reserve of loaded replicas.
//!
//! Everything is on one grid of steps (the metric step, `start_s + i · step_s`): the simulator
//! and `prewarm backtest` give it per step the delayed requests they counted, `prewarm explain
//! --target` the steps whose requests waited past the SLO wait (one each). Per step `m`:
//!
//! - `demand[m]`: the arrival rate the metric store shows at `m` (req/s);
//! - `upper[o]`: the highest upper forecast (point plus band, req/s: what the policy sized
//!   with) of the decisions made during step `o`, for the lead time after `o`; `None` where no
//!   decision was made (or the policy makes none);
//! - `capacity[m]`: loaded replicas serving at `m`;
//! - `need[m]`: loaded replicas the step needed to serve every request on arrival (the
//!   simulator: the most requests in the system at once over the step, over the slots of a
//!   replica; a metric history: waiting plus running over the replica's concurrency);
//! - `delayed[m]`: requests delayed at `m` (counted at their arrival).
//!
//! `L` is the lead time in steps (rounded up). The training rise `R` is the largest rise over
//! one lead seen on the training steps: `R = max demand[t] − demand[t − L]` over training steps
//! `t` with `t − L` also a training step. `R` is the band at the highest quantile (1) of the
//! simplest forecast ("as a lead ago") on the training days: any band the policy could learn
//! there at a higher quantile covers no more than that.
//!
//! A step `m` with delayed requests is, testing in this order (the first that holds wins):
//!
//! 1. **lead miss** when `upper[m − L] ≥ demand[m]`: the decision made one lead before `m`
//!    asked for enough capacity, and the requests still waited: the capacity came later than
//!    the lead (the fix is a longer LEAD_TIME_SECONDS). Tested first because it blames the
//!    forecast for nothing.
//! 2. **unforecastable at this lead** when `demand[m] − demand[m − L] > R` (or when there are
//!    no training steps, so no rise was ever seen): the rise over one lead exceeded every rise
//!    of that size on the training days, so no band learned there covered it (the fix is a
//!    constant reserve or a longer lead).
//! 3. **forecastable** otherwise: the rise lay inside what the training days showed, so a
//!    higher quantile (or a higher DELAYED_REQUEST_COST against GPU_HOUR_COST) would have
//!    covered it: prewarm under-forecast.
//!
//! A step before `L` (no step a lead back) skips the tests that need one: it is a lead miss
//! never, unforecastable when there are no training steps, else forecastable.
//!
//! The reserve: the constant number of extra loaded replicas that would have served the
//! unforecastable steps, `⌈max (need[m] − capacity[m])⌉` over them, and its cost over the
//! scored window: reserve × GPUs per replica × scored hours, in GPU-hours and at the GPU-hour
//! price. The need is a peak within the step, not its mean rate: a clump of requests inside a
//! minute needs the replicas to hold it at once, however low the minute's rate.
//!
//! Each delayed step comes back with its kind, so a caller can group them by any key (a client
//! class, a day, a target) without classifying again.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::assess::newest_finite;
use super::observation::Sample;

/// Why a delayed step was delayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Forecastable,
    LeadMiss,
    Unforecastable,
}

/// The series on one grid of steps (see the module docs).
#[derive(Clone, Copy, Debug)]
pub struct Series<'a> {
    /// Unix (or trace) time of step 0, and seconds per step.
    pub start_s: f64,
    pub step_s: f64,
    pub demand: &'a [f64],
    pub upper: &'a [Option<f64>],
    pub capacity: &'a [f64],
    pub need: &'a [f64],
    pub delayed: &'a [u64],
}

/// What the decomposition needs besides the series.
#[derive(Clone, Debug, PartialEq)]
pub struct Setting {
    /// The lead time in steps (rounded up, at least 1).
    pub lead_steps: usize,
    /// The training steps (the rise `R` is learned here) and the scored ones (classified).
    pub training: Range<usize>,
    pub scored: Range<usize>,
    pub gpus_per_replica: f64,
    pub usd_per_gpu_hour: f64,
}

impl Setting {
    /// The lead in steps of `step_s`: `⌈lead_s / step_s⌉`, at least one step.
    pub fn lead_steps(lead_s: f64, step_s: f64) -> usize {
        ((lead_s / step_s) - 1e-9).ceil().max(1.0) as usize
    }
}

/// One delayed step, classified.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Step {
    pub index: usize,
    pub t: f64,
    pub kind: Kind,
    pub delayed: u64,
    /// Replicas short at this step: need − capacity (negative: none short).
    pub shortfall: f64,
}

/// The decomposition of one run or one history.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Decomposition {
    /// Delayed requests (or steps) of each kind.
    pub forecastable: u64,
    pub lead_miss: u64,
    pub unforecastable: u64,
    /// The training rise `R` (req/s over one lead); None without training steps.
    pub training_rise: Option<f64>,
    /// The constant reserve of loaded replicas that removes the unforecastable part, and its
    /// cost over the scored window.
    pub reserve_replicas: u32,
    pub reserve_gpu_hours: f64,
    pub reserve_usd: f64,
    /// Hours scored.
    pub scored_hours: f64,
    #[serde(skip)]
    pub steps: Vec<Step>,
}

impl Decomposition {
    pub fn delayed(&self) -> u64 {
        self.forecastable + self.lead_miss + self.unforecastable
    }

    /// The kind of the delayed step `index` (None: not a scored delayed step): how a caller
    /// groups its own delayed requests (by client class, by day) by the step they arrived in.
    pub fn kind_of(&self, index: usize) -> Option<Kind> {
        self.steps
            .binary_search_by_key(&index, |s| s.index)
            .ok()
            .map(|i| self.steps[i].kind)
    }

    /// The kinds of a part of the delayed requests (one client class's, one day's), given as
    /// that part's delayed requests per step: each step's count takes the step's kind; a step
    /// that is not a scored delayed step counts nowhere, as in the whole.
    pub fn tally(&self, delayed_per_step: &[u64]) -> KindCounts {
        let mut counts = KindCounts::default();
        for (index, &n) in delayed_per_step.iter().enumerate().filter(|(_, &n)| n > 0) {
            match self.kind_of(index) {
                Some(Kind::Forecastable) => counts.forecastable += n,
                Some(Kind::LeadMiss) => counts.lead_miss += n,
                Some(Kind::Unforecastable) => counts.unforecastable += n,
                None => {}
            }
        }
        counts
    }

    /// (forecastable, lead miss, unforecastable) shares of the delayed, 0 each with none.
    pub fn shares(&self) -> (f64, f64, f64) {
        let n = self.delayed().max(1) as f64;
        (
            self.forecastable as f64 / n,
            self.lead_miss as f64 / n,
            self.unforecastable as f64 / n,
        )
    }
}

/// Delayed requests of each kind in a part of a decomposition (`Decomposition::tally`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KindCounts {
    pub forecastable: u64,
    pub lead_miss: u64,
    pub unforecastable: u64,
}

impl KindCounts {
    pub fn delayed(&self) -> u64 {
        self.forecastable + self.lead_miss + self.unforecastable
    }
}

/// What the tick says about its newest sample (the UnforecastableShare metric).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TickVerdict {
    /// The queue would wait longer than the SLO wait (waiting ÷ arrival rate).
    pub delayed: bool,
    /// Delayed, and the arrival rate rose over the last lead time by more than the training
    /// rise (or no training rise is known yet).
    pub unforecastable: bool,
}

/// The SLO wait of the tick's verdict and `prewarm explain --target`'s default (seconds): the
/// simulator's `--slo-wait`. A constant, not a setting: it only labels the residual.
pub const SLO_WAIT_S: f64 = 10.0;

/// The verdict on the newest arrival-rate sample: delayed when the newest waiting count over
/// the newest rate exceeds `slo_wait_s` (a queue with no arrivals counts), unforecastable when
/// it is delayed and the rate rose since the newest sample at least `lead_s` older by more
/// than `rise`. None without a rate sample a lead older (the window is shorter than the lead)
/// or without a waiting sample.
pub fn tick_verdict(
    arrival_rate: &[Sample],
    waiting: &[Sample],
    lead_s: f64,
    slo_wait_s: f64,
    rise: Option<f64>,
) -> Option<TickVerdict> {
    let newest = newest_finite(arrival_rate)?;
    let back = arrival_rate
        .iter()
        .filter(|s| s.t.is_finite() && s.v.is_finite() && s.t <= newest.t - lead_s)
        .max_by(|a, b| a.t.total_cmp(&b.t))?;
    let queue = newest_finite(waiting)?.v;
    let rate = newest.v.max(0.0);
    let delayed = queue > 0.0 && (rate <= 0.0 || queue / rate > slo_wait_s);
    let rose = rate - back.v.max(0.0);
    Some(TickVerdict {
        delayed,
        unforecastable: delayed && rise.is_none_or(|r| rose > r),
    })
}

/// The largest rise over `lead` steps within `training` (None: no pair of steps in it).
pub fn training_rise(demand: &[f64], lead: usize, training: &Range<usize>) -> Option<f64> {
    let end = training.end.min(demand.len());
    (training.start + lead..end)
        .map(|t| demand[t] - demand[t - lead])
        .filter(|r| r.is_finite())
        .reduce(f64::max)
}

/// The kind of step `m` (see the module docs for the order of the tests).
pub fn classify(series: &Series, lead: usize, rise: Option<f64>, m: usize) -> Kind {
    let Some(back) = m.checked_sub(lead) else {
        return match rise {
            None => Kind::Unforecastable,
            Some(_) => Kind::Forecastable,
        };
    };
    let demand = series.demand[m];
    if series
        .upper
        .get(back)
        .copied()
        .flatten()
        .is_some_and(|u| u >= demand)
    {
        return Kind::LeadMiss;
    }
    match rise {
        Some(r) if demand - series.demand[back] <= r => Kind::Forecastable,
        _ => Kind::Unforecastable,
    }
}

/// Classifies every scored step with delayed requests and prices the reserve.
pub fn decompose(series: &Series, setting: &Setting) -> Decomposition {
    let lead = setting.lead_steps.max(1);
    let rise = training_rise(series.demand, lead, &setting.training);
    let n = series
        .demand
        .len()
        .min(series.capacity.len())
        .min(series.need.len())
        .min(series.delayed.len());
    let scored = setting.scored.start.min(n)..setting.scored.end.min(n);
    let mut out = Decomposition {
        training_rise: rise,
        scored_hours: scored.len() as f64 * series.step_s / 3600.0,
        ..Decomposition::default()
    };
    let mut worst: f64 = 0.0;
    for m in scored {
        let delayed = series.delayed[m];
        if delayed == 0 {
            continue;
        }
        let kind = classify(series, lead, rise, m);
        let shortfall = series.need[m] - series.capacity[m];
        match kind {
            Kind::Forecastable => out.forecastable += delayed,
            Kind::LeadMiss => out.lead_miss += delayed,
            Kind::Unforecastable => {
                out.unforecastable += delayed;
                worst = worst.max(shortfall);
            }
        }
        out.steps.push(Step {
            index: m,
            t: series.start_s + m as f64 * series.step_s,
            kind,
            delayed,
            shortfall,
        });
    }
    // A shortfall a hair above a whole number (float noise in rate × service time) is that
    // whole number.
    out.reserve_replicas = (worst - 1e-9).ceil().max(0.0) as u32;
    out.reserve_gpu_hours =
        f64::from(out.reserve_replicas) * setting.gpus_per_replica * out.scored_hours;
    out.reserve_usd = out.reserve_gpu_hours * setting.usd_per_gpu_hour;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // A fixed clock: step 0 at 2023-11-15T00:00:00Z, one-minute steps.
    const T0: f64 = 1_700_006_400.0;

    /// Lead 2 steps; training steps 0..6, scored 6..10; 1 GPU per replica at $4 a GPU-hour.
    fn setting() -> Setting {
        Setting {
            lead_steps: 2,
            training: 0..6,
            scored: 6..10,
            gpus_per_replica: 1.0,
            usd_per_gpu_hour: 4.0,
        }
    }

    /// The series on the tests' minute grid from T0.
    fn minutes<'a>(
        demand: &'a [f64],
        upper: &'a [Option<f64>],
        capacity: &'a [f64],
        need: &'a [f64],
        delayed: &'a [u64],
    ) -> Series<'a> {
        Series {
            start_s: T0,
            step_s: 60.0,
            demand,
            upper,
            capacity,
            need,
            delayed,
        }
    }

    /// Training demand 4, 4, 6, 6, 5, 5: rises over two steps (t = 2..5) are 6−4 = 2,
    /// 6−4 = 2, 5−6 = −1, 5−6 = −1, so R = 2.
    const TRAINING: [f64; 6] = [4.0, 4.0, 6.0, 6.0, 5.0, 5.0];

    #[test]
    fn the_training_rise_is_the_largest_rise_over_one_lead() {
        assert_eq!(training_rise(&TRAINING, 2, &(0..6)), Some(2.0));
        // Fewer training steps than a lead: no pair, no rise.
        assert_eq!(training_rise(&TRAINING, 2, &(0..2)), None);
        assert_eq!(Setting::lead_steps(180.0, 60.0), 3);
        assert_eq!(Setting::lead_steps(181.0, 60.0), 4);
        assert_eq!(Setting::lead_steps(10.0, 60.0), 1);
    }

    /// One scored step (8) delayed, a table of what lay around it. Demand at 6 is 5 (the step
    /// a lead back); R = 2.
    #[test]
    fn each_kind_by_hand() {
        // (name, demand at 8, upper made at 6, expected kind)
        let rows = [
            // 5 → 7 is a rise of 2 ≤ R: forecastable; the upper at 6 (6) was below 7.
            ("rise within R", 7.0, Some(6.0), Kind::Forecastable),
            // The same rise, but the decision at 6 asked for 7 ≥ 7: a lead miss.
            ("forecast but late", 7.0, Some(7.0), Kind::LeadMiss),
            // 5 → 12 is a rise of 7 > R = 2, and the upper (6) fell short: unforecastable.
            ("rise past R", 12.0, Some(6.0), Kind::Unforecastable),
            // A lead miss wins over a large rise: the upper (12) covered 12.
            ("large rise, forecast", 12.0, Some(12.0), Kind::LeadMiss),
            // No decision at 6 (a policy without forecast): only the rise decides.
            ("no forecast, small rise", 7.0, None, Kind::Forecastable),
            ("no forecast, large rise", 12.0, None, Kind::Unforecastable),
        ];
        for (name, at8, upper6, kind) in rows {
            let mut demand = TRAINING.to_vec();
            demand.extend([5.0, 5.0, at8, 5.0]);
            let mut upper = vec![None; 10];
            upper[6] = upper6;
            let capacity = [3.0; 10];
            let need = [4.0; 10];
            let mut delayed = [0; 10];
            delayed[8] = 4;
            let series = minutes(&demand, &upper, &capacity, &need, &delayed);
            let d = decompose(&series, &setting());
            assert_eq!(d.training_rise, Some(2.0), "{name}");
            assert_eq!(d.steps.len(), 1, "{name}");
            assert_eq!(d.steps[0].kind, kind, "{name}");
            assert_eq!(d.steps[0].t, T0 + 480.0, "{name}");
            assert_eq!(d.delayed(), 4, "{name}");
        }
    }

    /// The reserve: scored steps 6..10 (4 minutes = 1/15 h), capacity 3 loaded replicas.
    /// Step 7: demand 13 (rise from step 5's 5 is 8 > R = 2), unforecastable, need 6.5:
    /// shortfall 6.5 − 3 = 3.5 replicas. Step 9: demand 10 (rise from step 7's 13 is −3 ≤ 2),
    /// forecastable (need 9, shortfall 6: a forecastable step asks no reserve). Reserve
    /// ⌈3.5⌉ = 4 replicas; 4 × 1 GPU × 1/15 h = 4/15 GPU-h; × $4 = $16/15.
    #[test]
    fn the_reserve_covers_the_worst_unforecastable_shortfall() {
        let mut demand = TRAINING.to_vec();
        demand.extend([5.0, 13.0, 5.0, 10.0]);
        let upper = vec![None; 10];
        let capacity = [3.0; 10];
        let need = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 6.5, 0.0, 9.0];
        let delayed = [0, 0, 0, 0, 0, 0, 0, 30, 0, 10];
        let series = minutes(&demand, &upper, &capacity, &need, &delayed);
        let d = decompose(&series, &setting());
        assert_eq!((d.forecastable, d.lead_miss, d.unforecastable), (10, 0, 30));
        assert_eq!(d.steps[0].shortfall, 3.5);
        assert_eq!(d.steps[1].shortfall, 6.0);
        assert_eq!(d.reserve_replicas, 4);
        assert!((d.scored_hours - 1.0 / 15.0).abs() < 1e-12);
        assert!((d.reserve_gpu_hours - 4.0 / 15.0).abs() < 1e-12);
        assert!((d.reserve_usd - 16.0 / 15.0).abs() < 1e-12);
        // 10 forecastable and 30 unforecastable of 40 delayed.
        assert_eq!(d.shares(), (0.25, 0.0, 0.75));
        assert_eq!(d.kind_of(7), Some(Kind::Unforecastable));
        assert_eq!(d.kind_of(9), Some(Kind::Forecastable));
        assert_eq!(d.kind_of(8), None);
        // Training steps are not classified: a delay at step 3 (training) is left out.
        let mut delayed = delayed;
        delayed[3] = 100;
        let series = Series {
            delayed: &delayed,
            ..series
        };
        assert_eq!(decompose(&series, &setting()).delayed(), 40);
    }

    /// The tick's verdict, lead 120 s, SLO wait 10 s, training rise 2 req/s. Rates at
    /// T0, T0 + 60, T0 + 120 (newest); the sample a lead back of the newest is T0.
    #[test]
    fn the_tick_verdict_by_hand() {
        let rates = |a: f64, c: f64| {
            vec![
                Sample::new(T0, a),
                Sample::new(T0 + 60.0, a),
                Sample::new(T0 + 120.0, c),
            ]
        };
        let queue = |w: f64| vec![Sample::new(T0 + 120.0, w)];
        let yes = |u| {
            Some(TickVerdict {
                delayed: true,
                unforecastable: u,
            })
        };
        let no = Some(TickVerdict {
            delayed: false,
            unforecastable: false,
        });
        // (name, (the older rates, the newest rate), waiting at the newest, rise, verdict)
        let rows = [
            // 30 / 2 = 15 s > 10; rose 2 − 1 = 1 ≤ 2: forecastable.
            ("small rise", (1.0, 2.0), 30.0, Some(2.0), yes(false)),
            // 60 / 5 = 12 s > 10; rose 5 − 1 = 4 > 2: unforecastable.
            ("large rise", (1.0, 5.0), 60.0, Some(2.0), yes(true)),
            // 40 / 5 = 8 s ≤ 10: not delayed, whatever the rise.
            ("short queue", (1.0, 5.0), 40.0, Some(2.0), no),
            // No training rise yet: a delayed tick is unforecastable.
            ("no rise known", (1.0, 2.0), 30.0, None, yes(true)),
            // A queue and no arrivals: delayed.
            ("queue, no arrivals", (0.0, 0.0), 1.0, Some(2.0), yes(false)),
        ];
        for (name, (older, newest), waiting, rise, want) in rows {
            let got = tick_verdict(&rates(older, newest), &queue(waiting), 120.0, 10.0, rise);
            assert_eq!(got, want, "{name}");
        }
        // A window shorter than the lead: no verdict.
        let short = [Sample::new(T0 + 60.0, 1.0), Sample::new(T0 + 120.0, 5.0)];
        assert_eq!(
            tick_verdict(&short, &queue(60.0), 120.0, 10.0, Some(2.0)),
            None
        );
    }

    /// No training steps: nothing was ever seen to rise, so whatever the forecast did not
    /// cover is unforecastable (steps before a lead included).
    #[test]
    fn without_training_days_every_miss_is_unforecastable() {
        let demand = [5.0, 9.0, 5.0, 6.0];
        let upper = [Some(9.0), None, None, None];
        let capacity = [1.0; 4];
        let need = [2.0, 4.5, 2.0, 3.0];
        let delayed = [1, 1, 1, 1];
        let series = minutes(&demand, &upper, &capacity, &need, &delayed);
        let setting = Setting {
            training: 0..0,
            scored: 0..4,
            ..setting()
        };
        let d = decompose(&series, &setting);
        // Step 2: upper made at 0 (9) ≥ 5: a lead miss. Steps 0, 1 (no step a lead back) and 3
        // (upper at 1 unknown): unforecastable.
        assert_eq!((d.forecastable, d.lead_miss, d.unforecastable), (0, 1, 3));
        assert_eq!(d.training_rise, None);
        // The worst unforecastable shortfall: step 1, 4.5 − 1 = 3.5 → 4 replicas (steps 0
        // and 3 are short 1 and 2).
        assert_eq!(d.reserve_replicas, 4);
    }

    /// A part of the delayed takes the kinds of the steps it was delayed in: steps 3 (training,
    /// not scored), 6 (lead miss), 8 (unforecastable) and 9 (forecastable) by hand below; the
    /// part has 1, 2, 4 and 3 delayed there and 5 in step 7, which no kind covers.
    #[test]
    fn a_part_of_the_delayed_takes_the_kinds_of_its_steps() {
        let step = |index: usize, kind: Kind| Step {
            index,
            t: T0 + 60.0 * index as f64,
            kind,
            delayed: 10,
            shortfall: 1.0,
        };
        let whole = Decomposition {
            steps: vec![
                step(6, Kind::LeadMiss),
                step(8, Kind::Unforecastable),
                step(9, Kind::Forecastable),
            ],
            ..Decomposition::default()
        };
        let part = [0, 0, 0, 1, 0, 0, 2, 5, 4, 3];
        let counts = whole.tally(&part);
        assert_eq!(
            counts,
            KindCounts {
                forecastable: 3,
                lead_miss: 2,
                unforecastable: 4
            }
        );
        assert_eq!(counts.delayed(), 9);
        // A part delayed nowhere, or shorter than the steps: nothing, no panic.
        assert_eq!(whole.tally(&[]), KindCounts::default());
        assert_eq!(whole.tally(&[0, 0, 0, 0, 0, 0, 7]).lead_miss, 7);
    }
}
