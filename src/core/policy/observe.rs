//! The observe step, shared by the Lambda's tick (src/handlers/tick/observe.rs) and the
//! simulator's eyes (src/sim/engine/lambda_view.rs) so that what the simulator assumes the Lambda sees
//! cannot drift from what it sees: the plan of what one tick reads (`plan`,
//! `calibration_window`) and the assembly of what the sources returned into the `Observation`
//! (`assemble`). Changes when what a tick reads, or how a read becomes the observation, changes.
//!
//! The tick issues the reads against its metric source and Kubernetes; the eyes evaluate the
//! built-in queries over their own scrape grid (what Prometheus would return). Each source
//! aligns a window in its own way; where the two differ today:
//!
//! - recent window: the tick asks for `[now - lag - window, now - lag]` every STEP_SECONDS,
//!   lag = INGESTION_LAG_SECONDS, anchored at `now - lag` (Prometheus answers `window / step + 1`
//!   points; CloudWatch puts its complete periods on that grid, so periods ending within the
//!   lag are left out too); the eyes read one point per scrape of their grid (the simulator's
//!   runs scrape every STEP_SECONDS), `round(window / scrape)` scrapes ending at the newest
//!   scrape at or before `now - lag` that the simulated ingestion lag lets a query see. The
//!   simulator's runs set both lags from `--ingestion-lag` (one value, the policy's
//!   `ingestion_lag_s`), so both end at the same time: the eyes have one point fewer and their
//!   newest up to part of a scrape older. The eyes evaluate each point over scrapes already
//!   visible; Prometheus evaluating at `now` with a lagging store would compute the newest
//!   rates over half-filled windows (0.4-0.9 x the true rate with a 30 s lag and a 1 m range),
//!   which the lag moves out of the tick's read as well. Staleness counts from `now` for both,
//!   STALE_AFTER_SECONDS plus the lag (`assess::fresh`);
//! - seasons: the tick reads the season frame shifted back by the season (for whole days, to
//!   the same wall-clock time in TIME_ZONE) and moves the samples forward by as much; the eyes
//!   snap the frame inward to the scrape grid, shift by whole scrapes (`round(shift / scrape)`
//!   of them) and stop at the newest visible scrape;
//! - calibration history: the tick reads `[now - history, now]` every BAND_STEP_SECONDS
//!   anchored at `now` (not moved by INGESTION_LAG_SECONDS: its newest point or two, of a
//!   day's, are computed over partly ingested ranges; CloudWatch leaves out the periods that
//!   ended within the lag of its own accord); the eyes count whole band steps of
//!   `round(band step / scrape)` scrapes back from the newest visible scrape;
//! - the queries' own `rate`/`deriv` windows (RATE_WINDOW_SECONDS, 1 m by default; twice it for
//!   the latency) are the same setting for both (`queries::for_target` for the tick, the
//!   policy's `rate_window_s` for the eyes), evaluated by Prometheus for the tick and by the
//!   eyes with Prometheus' own `rate` extrapolation (`lambda_view::prometheus_rate`) over the scrapes
//!   inside `(t - W, t]` (Prometheus 3's open start; Prometheus 2 includes a scrape exactly at
//!   `t - W`), but only at scrape times, where the tick's points fall wherever `now - lag` puts
//!   them; the eyes see no history before the trace starts.
//!
//! The plan names one window per read; the eyes keep their alignment to the scrape grid.

use super::band::{self, Calibration};
use super::observation::{HpaStatus, Observation, Sample, SeasonSeries};
use super::seasonal::wall_clock_shift;
use crate::spec::PolicySpec;

/// The time range of one read, in Unix seconds: samples at `start`, `start + step`, ... up to
/// `end`, as a Prometheus range query returns them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    pub start: f64,
    pub end: f64,
    pub step: f64,
}

impl Window {
    /// The same clock times one season back: what a PromQL `offset` would read. (`offset`
    /// binds to each selector, not to a whole expression such as the arrival-rate sum, so the
    /// query's range is shifted instead; the samples are the same.)
    pub fn shifted_back(&self, season_s: f64) -> Window {
        Window {
            start: self.start - season_s,
            end: self.end - season_s,
            step: self.step,
        }
    }

    /// `policy.window_s` ending at `end`, with the policy's step. The grid is anchored at `end`
    /// rather than rounded to a multiple of the step, so the newest point is as fresh as the
    /// source allows (staleness is judged on it). The tick's recent read ends at
    /// `now - INGESTION_LAG_SECONDS` (`plan`).
    pub fn ending_at(end: f64, policy: &PolicySpec) -> Window {
        Window {
            start: end - policy.window_s,
            end,
            step: policy.step_s,
        }
    }
}

/// What one tick reads for a target, apart from the calibration history (which depends on the
/// cached calibration: `calibration_window`).
#[derive(Clone, Debug, PartialEq)]
pub struct ReadPlan {
    /// The recent signals (arrival rate, service time, waiting, running): the policy's window
    /// ending INGESTION_LAG_SECONDS before `now`. A metric store shows a sample that long after
    /// it is scraped; a window ending at `now` would compute its newest rate points over
    /// half-filled ranges (with a 30 s lag and a 1 m range, 0.4-0.9 x the true rate), and the
    /// trend would see a fall every tick. Staleness is still judged against `now`
    /// (`assess::fresh`, which adds the lag).
    pub recent: Window,
    /// Today's stretch the seasons cover, `[now - window, now + lead time]`: each season reads
    /// it one season back.
    pub season_frame: Window,
    pub seasons: Vec<SeasonRead>,
}

/// One season's read: the arrival rate over `window` (the season frame one season back), whose
/// samples move forward by `shift_s` into today's frame.
#[derive(Clone, Debug, PartialEq)]
pub struct SeasonRead {
    pub period_s: f64,
    pub window: Window,
    pub shift_s: f64,
}

/// The windows one tick at `now` (Unix seconds) reads. A season of whole days reads the same
/// wall-clock time in TIME_ZONE that many days back (`seasonal::wall_clock_shift`: 23 or 25 h
/// across a daylight-saving switch). In UTC nothing in it depends on where time starts, so the
/// simulator, which runs in UTC, may ask it on its own clock.
pub fn plan(policy: &PolicySpec, now: f64) -> ReadPlan {
    let zone = policy.zone();
    let season_frame = Window {
        start: now - policy.window_s,
        end: now + policy.lead_time_s,
        step: policy.step_s,
    };
    ReadPlan {
        recent: Window::ending_at(now - policy.ingestion_lag_s, policy),
        season_frame,
        seasons: policy
            .seasons_s
            .iter()
            .map(|&period_s| {
                let shift_s = wall_clock_shift(now, period_s, &zone);
                SeasonRead {
                    period_s,
                    window: season_frame.shifted_back(shift_s),
                    shift_s,
                }
            })
            .collect(),
    }
}

/// The band's calibration history, read only when the cached calibration is due (at most every
/// CALIBRATE_EVERY_SECONDS): `band::history_seconds` back from `now`, every BAND_STEP_SECONDS,
/// so the seasonal forecaster can be replayed over the whole band history. None when the cached
/// calibration is still fresh. `now` is Unix time (the cache is stamped with it).
pub fn calibration_window(
    policy: &PolicySpec,
    cached: Option<&Calibration>,
    now: f64,
) -> Option<Window> {
    band::due(cached, policy, now).then(|| Window {
        start: now - band::history_seconds(policy),
        end: now,
        step: policy.band_step_s,
    })
}

/// The four recent series a metric source returns for the plan's recent window, oldest first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecentSignals {
    pub arrival_rate: Vec<Sample>,
    pub service_time_s: Vec<Sample>,
    pub waiting: Vec<Sample>,
    pub running: Vec<Sample>,
}

/// Counts of a target's inference pods.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PodCounts {
    /// Pending and unschedulable: demand already waiting for capacity.
    pub unschedulable: u32,
    /// Ready to serve.
    pub serving: u32,
    /// On a node, not Ready yet (image pull, model load).
    pub loading: u32,
}

/// One season's history as read, each sample at its own time, and how far to move it forward.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SeasonHistory {
    pub period_s: f64,
    pub shift_s: f64,
    pub samples: Vec<Sample>,
}

/// What the sources returned for one tick. A failed read is its error message; a season whose
/// read failed, and the HPA when it could not be read, are left out by the caller (which logs
/// why): the policy forecasts with the trend alone, or sizes without the HPA, and says so.
#[derive(Clone, Debug, PartialEq)]
pub struct Reads {
    pub signals: Result<RecentSignals, String>,
    /// None when the target configures no pod selector.
    pub pods: Result<Option<PodCounts>, String>,
    pub hpa: Option<HpaStatus>,
    pub seasons: Vec<SeasonHistory>,
    /// Empty when the calibration was not due.
    pub calibration_history: Vec<Sample>,
}

/// The observation of one tick. A failed metric or pod read becomes the observation's
/// `problem` (both joined by "; "), so the policy fails static (holds, never scales down) and
/// says why; season samples move forward into today's frame.
pub fn assemble(reads: Reads) -> Observation {
    let (signals, metrics_problem) = match reads.signals {
        Ok(s) => (s, None),
        Err(e) => (RecentSignals::default(), Some(e)),
    };
    let mut observation = Observation {
        arrival_rate: signals.arrival_rate,
        service_time_s: signals.service_time_s,
        waiting: signals.waiting,
        running: signals.running,
        problem: metrics_problem,
        hpa: reads.hpa,
        seasonal: reads.seasons.into_iter().map(season_series).collect(),
        calibration_history: reads.calibration_history,
        ..Observation::default()
    };
    match reads.pods {
        Ok(Some(counts)) => {
            observation.pending_pods = counts.unschedulable;
            observation.serving_replicas = Some(counts.serving);
            observation.loading_replicas = Some(counts.loading);
        }
        Ok(None) => {}
        Err(e) => {
            let problem = format!("inference pods: {e}");
            observation.problem = Some(match observation.problem.take() {
                Some(p) => format!("{p}; {problem}"),
                None => problem,
            });
        }
    }
    observation
}

/// A season's samples moved forward into today's frame.
pub fn season_series(season: SeasonHistory) -> SeasonSeries {
    SeasonSeries {
        period_s: season.period_s,
        samples: season
            .samples
            .into_iter()
            .map(|s| Sample::new(s.t + season.shift_s, s.v))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::observation::HpaMetric;

    const NOW: f64 = 1_000_000.0;

    fn policy() -> PolicySpec {
        PolicySpec {
            window_s: 300.0,
            lead_time_s: 180.0,
            step_s: 15.0,
            seasons_s: vec![86_400.0, 600.0],
            band_step_s: 60.0,
            band_history_s: 3_600.0,
            calibrate_every_s: 3_600.0,
            tick_s: 15.0,
            ingestion_lag_s: 0.0,
            ..PolicySpec::default()
        }
    }

    fn w(start: f64, end: f64, step: f64) -> Window {
        Window { start, end, step }
    }

    #[test]
    fn a_tick_reads_the_window_before_now_and_each_season_one_season_back() {
        // Recent: 300 s ending now, every 15 s. Season frame: [now - 300, now + 180]. A day
        // back: 999_700 - 86_400 = 913_300 to 1_000_180 - 86_400 = 913_780; ten minutes back:
        // 999_100 to 999_580. Each moves forward by its own season.
        let plan = plan(&policy(), NOW);
        assert_eq!(plan.recent, w(999_700.0, NOW, 15.0));
        assert_eq!(plan.season_frame, w(999_700.0, 1_000_180.0, 15.0));
        assert_eq!(
            plan.seasons,
            vec![
                SeasonRead {
                    period_s: 86_400.0,
                    window: w(913_300.0, 913_780.0, 15.0),
                    shift_s: 86_400.0,
                },
                SeasonRead {
                    period_s: 600.0,
                    window: w(999_100.0, 999_580.0, 15.0),
                    shift_s: 600.0,
                },
            ]
        );
        // No season configured: nothing to read a season back.
        let none = PolicySpec {
            seasons_s: vec![],
            ..policy()
        };
        assert!(super::plan(&none, NOW).seasons.is_empty());
    }

    #[test]
    fn across_a_daylight_saving_switch_a_season_reads_the_same_wall_clock_time() {
        // America/New_York went to summer time on 2026-03-08 at 02:00 EST (07:00Z). NOW is
        // that Sunday 12:00 EDT = 16:00Z = 1_772_928_000 (2026-03-08T00:00Z) + 57_600 =
        // 1_772_985_600. The same wall-clock time a day back, Saturday 12:00 EST, is 17:00Z:
        // 23 h = 82_800 s back; a week back, Sunday 03-01 12:00 EST: 167 h = 601_200 s.
        // Frame [NOW - 300, NOW + 180] = [1_772_985_300, 1_772_985_780]; minus 82_800:
        // [1_772_902_500, 1_772_902_980]; minus 601_200: [1_772_384_100, 1_772_384_580].
        const NOW: f64 = 1_772_985_600.0;
        let policy = PolicySpec {
            seasons_s: vec![86_400.0, 604_800.0],
            time_zone: "America/New_York".into(),
            ..policy()
        };
        let plan = plan(&policy, NOW);
        assert_eq!(
            plan.seasons,
            vec![
                SeasonRead {
                    period_s: 86_400.0,
                    window: w(1_772_902_500.0, 1_772_902_980.0, 15.0),
                    shift_s: 82_800.0,
                },
                SeasonRead {
                    period_s: 604_800.0,
                    window: w(1_772_384_100.0, 1_772_384_580.0, 15.0),
                    shift_s: 601_200.0,
                },
            ]
        );
    }

    #[test]
    fn the_recent_read_ends_the_ingestion_lag_before_now() {
        // (name, INGESTION_LAG_SECONDS, recent window). Fixed clock NOW, window 300 s, step
        // 15 s: the read is the window ending `lag` before now, so its newest point is computed
        // over a full rate window of ingested samples. The season frame stays
        // [now - window, now + lead] whatever the lag.
        let rows = [
            ("no lag: ends now", 0.0, w(999_700.0, NOW, 15.0)),
            (
                "the default 30 s: ends 30 s before now",
                30.0,
                w(999_670.0, 999_970.0, 15.0),
            ),
            (
                "a lag off the step grid",
                20.0,
                w(999_680.0, 999_980.0, 15.0),
            ),
            (
                "a lag of a whole window",
                300.0,
                w(999_400.0, 999_700.0, 15.0),
            ),
        ];
        for (name, lag, want) in rows {
            let policy = PolicySpec {
                ingestion_lag_s: lag,
                ..policy()
            };
            let plan = plan(&policy, NOW);
            assert_eq!(plan.recent, want, "{name}");
            assert_eq!(plan.season_frame, w(999_700.0, 1_000_180.0, 15.0), "{name}");
        }
        assert_eq!(PolicySpec::default().ingestion_lag_s, 30.0);
    }

    fn calibrated_at(computed_at: f64) -> Calibration {
        Calibration {
            computed_at,
            quantile: 0.9,
            band: Some(1.0),
            windows: 30,
            ..Calibration::default()
        }
    }

    #[test]
    fn the_calibration_history_is_read_only_when_the_cached_one_is_due() {
        // History: band history 3_600 + shortest season 600 + window 300 + lead 180 = 4_680 s
        // back from now, every band step (60 s). Due every 3_600 s, or when the cache is stamped
        // more than a tick (15 s) in the future (a clock that jumped back).
        let history = Some(w(NOW - 4_680.0, NOW, 60.0));
        let rows: [(&str, Option<Calibration>, Option<Window>); 5] = [
            ("never calibrated", None, history),
            ("ten minutes old", Some(calibrated_at(NOW - 600.0)), None),
            ("an hour old", Some(calibrated_at(NOW - 3_600.0)), history),
            ("a tick ahead", Some(calibrated_at(NOW + 15.0)), None),
            ("further ahead", Some(calibrated_at(NOW + 16.0)), history),
        ];
        for (name, cached, want) in rows {
            assert_eq!(
                calibration_window(&policy(), cached.as_ref(), NOW),
                want,
                "{name}"
            );
        }
    }

    fn s(t: f64, v: f64) -> Sample {
        Sample::new(t, v)
    }

    fn signals() -> RecentSignals {
        RecentSignals {
            arrival_rate: vec![s(985.0, 2.0), s(1_000.0, 3.0)],
            service_time_s: vec![s(1_000.0, 4.5)],
            waiting: vec![s(1_000.0, 1.0)],
            running: vec![s(1_000.0, 8.0)],
        }
    }

    fn counts() -> PodCounts {
        PodCounts {
            unschedulable: 2,
            serving: 3,
            loading: 1,
        }
    }

    fn hpa() -> HpaStatus {
        HpaStatus {
            min_replicas: 1,
            max_replicas: 10,
            current_replicas: 3,
            desired_replicas: 4,
            metric: HpaMetric::InSystemPerReplica {
                target_average: 8.0,
            },
        }
    }

    fn reads(
        signals: Result<RecentSignals, String>,
        pods: Result<Option<PodCounts>, String>,
    ) -> Reads {
        Reads {
            signals,
            pods,
            hpa: Some(hpa()),
            seasons: vec![],
            calibration_history: vec![s(900.0, 1.0)],
        }
    }

    /// What every row shares: the HPA and the calibration history pass through as read.
    fn observed() -> Observation {
        Observation {
            hpa: Some(hpa()),
            calibration_history: vec![s(900.0, 1.0)],
            ..Observation::default()
        }
    }

    #[test]
    fn a_failed_source_becomes_the_problem_and_the_rest_is_kept() {
        let with_signals = Observation {
            arrival_rate: signals().arrival_rate,
            service_time_s: signals().service_time_s,
            waiting: signals().waiting,
            running: signals().running,
            ..observed()
        };
        let with_pods = |o: Observation| Observation {
            pending_pods: 2,
            serving_replicas: Some(3),
            loading_replicas: Some(1),
            ..o
        };
        let rows: [(&str, Reads, Observation); 5] = [
            (
                "everything read: the series and the counts as returned",
                reads(Ok(signals()), Ok(Some(counts()))),
                with_pods(with_signals.clone()),
            ),
            (
                "no pod selector: no counts, no problem",
                reads(Ok(signals()), Ok(None)),
                with_signals.clone(),
            ),
            (
                "metrics failed: empty series, its message is the problem, the pods are kept",
                reads(Err("m down".into()), Ok(Some(counts()))),
                with_pods(Observation {
                    problem: Some("m down".into()),
                    ..observed()
                }),
            ),
            (
                "pods failed: named as the inference pods' problem, the series are kept",
                reads(Ok(signals()), Err("403".into())),
                Observation {
                    problem: Some("inference pods: 403".into()),
                    ..with_signals
                },
            ),
            (
                "both failed: the metrics' message first, then the pods', joined by '; '",
                reads(Err("m down".into()), Err("403".into())),
                Observation {
                    problem: Some("m down; inference pods: 403".into()),
                    ..observed()
                },
            ),
        ];
        for (name, reads, want) in rows {
            assert_eq!(assemble(reads), want, "{name}");
        }
    }

    #[test]
    fn season_samples_move_forward_by_their_shift() {
        // A day's samples at 100 and 115 shifted by 86_400 s land at 86_500 and 86_515; the
        // eyes' 600 s season read on a 45 s scrape grid shifts by 13 scrapes (585 s): 15 -> 600.
        // An empty read stays an empty series (a query without data).
        let seasons = vec![
            SeasonHistory {
                period_s: 86_400.0,
                shift_s: 86_400.0,
                samples: vec![s(100.0, 1.0), s(115.0, 2.0)],
            },
            SeasonHistory {
                period_s: 600.0,
                shift_s: 585.0,
                samples: vec![s(15.0, 7.0)],
            },
            SeasonHistory {
                period_s: 604_800.0,
                shift_s: 604_800.0,
                samples: vec![],
            },
        ];
        let observation = assemble(Reads {
            seasons,
            ..reads(Ok(RecentSignals::default()), Ok(None))
        });
        assert_eq!(
            observation.seasonal,
            vec![
                SeasonSeries {
                    period_s: 86_400.0,
                    samples: vec![s(86_500.0, 1.0), s(86_515.0, 2.0)],
                },
                SeasonSeries {
                    period_s: 600.0,
                    samples: vec![s(600.0, 7.0)],
                },
                SeasonSeries {
                    period_s: 604_800.0,
                    samples: vec![],
                },
            ]
        );
    }
}
