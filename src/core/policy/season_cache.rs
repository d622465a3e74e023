//! What one warm execution environment keeps of a target's seasonal history between ticks, and
//! when a tick reads it again. Changes when the rule for re-reading the seasons changes.
//!
//! Every tick needs each season's arrival rate over the season frame one season back (`observe::
//! plan`). That history is long past and no longer changes, yet read afresh at every tick it was
//! most of what the metric reads cost (on AMP and CloudWatch). So a read reaches ahead: it
//! covers the frame and up to `SEASON_READ_AHEAD_S` beyond it, as far as the history is already
//! complete (one ingestion lag before now), and the following ticks take their frame out of what
//! is held until a frame ends past it, or the season's shift changes (a daylight-saving switch),
//! or the environment is new. Samples are the store's own, at the first read's step grid; the
//! seasonal forecaster pairs samples within half a step, so a grid that started earlier reads the
//! same.

use super::observation::Sample;
use super::observe::{SeasonHistory, SeasonRead, Window};

/// How far past the season frame one read reaches: the ticks of the next hour take their frame
/// out of it (at 15 s ticks, one read where there were 240).
pub const SEASON_READ_AHEAD_S: f64 = 3_600.0;

/// One season's history held, as it was read.
#[derive(Clone, Debug, PartialEq)]
pub struct HeldSeason {
    pub period_s: f64,
    pub shift_s: f64,
    /// The range that was read (samples at its step grid).
    pub window: Window,
    pub samples: Vec<Sample>,
}

/// One target's seasons held in a warm execution environment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SeasonCache {
    pub held: Vec<HeldSeason>,
}

/// Where a season's history comes from this tick.
#[derive(Clone, Debug, PartialEq)]
pub enum SeasonSource {
    /// Already held: the samples of the read's window.
    Held(SeasonHistory),
    /// To be read over this window (the read's, reaching ahead), then kept.
    Read(Window),
}

impl SeasonCache {
    /// The history of `read` if a read held here covers its window with the same shift;
    /// otherwise the window to read: `read.window` extended forward by `SEASON_READ_AHEAD_S`,
    /// but never past `complete_until` (Unix seconds: now minus the ingestion lag, before which
    /// the store's history is complete), so nothing still filling is kept.
    pub fn lookup(&self, read: &SeasonRead, complete_until: f64) -> SeasonSource {
        let half_step = read.window.step / 2.0;
        let held = self.held.iter().find(|h| {
            h.period_s == read.period_s
                && h.shift_s == read.shift_s
                && h.window.step == read.window.step
                && h.window.start <= read.window.start + half_step
                && h.window.end >= read.window.end
        });
        match held {
            Some(h) => SeasonSource::Held(frame_of(read, &h.samples)),
            None => {
                let reach = (complete_until - read.window.end).clamp(0.0, SEASON_READ_AHEAD_S);
                SeasonSource::Read(Window {
                    end: read.window.end + reach,
                    ..read.window
                })
            }
        }
    }

    /// Keeps what a read over `window` returned for `read`'s season, in place of what was held
    /// for that season. An empty answer is not kept: the next tick reads again.
    pub fn keep(&mut self, read: &SeasonRead, window: Window, samples: Vec<Sample>) {
        self.held.retain(|h| h.period_s != read.period_s);
        if !samples.is_empty() {
            self.held.push(HeldSeason {
                period_s: read.period_s,
                shift_s: read.shift_s,
                window,
                samples,
            });
        }
    }
}

/// The samples of a read that reached ahead which lie in `read`'s own window (within half a
/// step): this tick's part, the same cut whether the read was made now or held from earlier.
pub fn frame_of(read: &SeasonRead, samples: &[Sample]) -> SeasonHistory {
    let half_step = read.window.step / 2.0;
    SeasonHistory {
        period_s: read.period_s,
        shift_s: read.shift_s,
        samples: samples
            .iter()
            .filter(|s| s.t >= read.window.start - half_step && s.t <= read.window.end + half_step)
            .copied()
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: f64 = 86_400.0;
    // A tick at 1_000_000 with the default policy: window 900 s, lead 180 s, step 15 s, lag 30 s.
    // Its season frame is [999_100, 1_000_180]; a day back (1_000_000 - 86_400 = 913_600),
    // [912_700, 913_780].
    const NOW: f64 = 1_000_000.0;

    fn read_at(now: f64) -> SeasonRead {
        SeasonRead {
            period_s: DAY,
            window: Window {
                start: now - 900.0 - DAY,
                end: now + 180.0 - DAY,
                step: 15.0,
            },
            shift_s: DAY,
        }
    }

    fn grid(start: f64, end: f64) -> Vec<Sample> {
        let mut out = Vec::new();
        let mut t = start;
        while t <= end {
            out.push(Sample::new(t, t - start));
            t += 15.0;
        }
        out
    }

    #[test]
    fn a_read_reaches_an_hour_ahead_and_the_next_hours_ticks_take_their_frame_from_it() {
        let mut cache = SeasonCache::default();
        let first = read_at(NOW);
        // Nothing held: read the frame and an hour past it (912_700 to 913_780 + 3_600 =
        // 917_380), all long complete (now - lag = 999_970).
        let window = match cache.lookup(&first, NOW - 30.0) {
            SeasonSource::Read(w) => w,
            held => panic!("{held:?}"),
        };
        assert_eq!(
            window,
            Window {
                start: 912_700.0,
                end: 917_380.0,
                step: 15.0
            }
        );
        cache.keep(&first, window, grid(912_700.0, 917_380.0));

        // 15 s later the frame is [912_715, 913_795]: held, its (1_080 / 15) + 1 = 73 samples and
        // no others.
        match cache.lookup(&read_at(NOW + 15.0), NOW + 15.0 - 30.0) {
            SeasonSource::Held(h) => {
                assert_eq!(h.samples.len(), 73);
                assert_eq!(h.samples.first().unwrap().t, 912_715.0);
                assert_eq!(h.samples.last().unwrap().t, 913_795.0);
                assert_eq!((h.period_s, h.shift_s), (DAY, DAY));
            }
            read => panic!("{read:?}"),
        }
        // An hour on (frame end 917_380) still held; a tick later it ends past the read: read.
        assert!(matches!(
            cache.lookup(&read_at(NOW + 3_600.0), NOW + 3_570.0),
            SeasonSource::Held(_)
        ));
        assert!(matches!(
            cache.lookup(&read_at(NOW + 3_615.0), NOW + 3_585.0),
            SeasonSource::Read(_)
        ));
    }

    #[test]
    fn what_is_read_again_and_what_is_never_kept() {
        let mut cache = SeasonCache::default();
        let first = read_at(NOW);
        cache.keep(
            &first,
            Window {
                end: 917_380.0,
                ..first.window
            },
            grid(912_700.0, 917_380.0),
        );

        // A daylight-saving switch: the same wall-clock time is 23 h back, not 24: read again.
        let switched = SeasonRead {
            shift_s: DAY - 3_600.0,
            window: read_at(NOW).window.shifted_back(-3_600.0),
            ..read_at(NOW)
        };
        assert!(matches!(
            cache.lookup(&switched, NOW - 30.0),
            SeasonSource::Read(_)
        ));

        // A season shorter than the frame's reach: a 900 s season with a 180 s lead ends its
        // read at now + 180 - 900 = 999_280; complete until 999_970, so it reaches 690 s ahead.
        let short = SeasonRead {
            period_s: 900.0,
            window: Window {
                start: NOW - 1_800.0,
                end: NOW - 720.0,
                step: 15.0,
            },
            shift_s: 900.0,
        };
        assert_eq!(
            cache.lookup(&short, NOW - 30.0),
            SeasonSource::Read(Window {
                start: NOW - 1_800.0,
                end: NOW - 30.0,
                step: 15.0
            })
        );
        // A frame ending where the history is not complete yet reaches nothing ahead.
        assert_eq!(
            cache.lookup(&short, NOW - 800.0),
            SeasonSource::Read(short.window)
        );

        // An empty answer is not kept (and drops what was held for that season).
        cache.keep(&first, first.window, Vec::new());
        assert!(matches!(
            cache.lookup(&read_at(NOW + 15.0), NOW),
            SeasonSource::Read(_)
        ));
    }
}
