//! Client classes: which clients of a workload are interactive and which batch-like, decided on
//! the training days only from each client's own arrivals, so a verdict can be read for the
//! interactive users apart from one tenant's batch job. Changes when the statistics or the rule
//! do (docs/simulator.md, "Client classes").
//!
//! Both statistics are computed per 600 s window (the ServeGen windows), from the client's
//! arrivals in that window only:
//! - the **request-weighted inter-arrival CV**: in a window with n >= 3 requests, the n - 1 gaps
//!   between consecutive requests give cv = sd / mean (population sd; a window whose gaps are all
//!   0 has none); the client's figure is the mean of its windows' cv weighted by their n. Per
//!   window, so a client that is silent at night is not called bursty for the silence.
//! - the **clump size**: in a window with n requests, the most requests that fall in one whole
//!   second [s, s + 1) over the window's mean rate n / 600 per second, floored at 1 per second
//!   (a client sending less than one request a second is not clumpy for sending one or two in
//!   the same second); the client's figure is the largest over its windows.
//!
//! A client is batch-like when its CV exceeds `batch_cv` or its clump size exceeds
//! `batch_clump` (strictly); otherwise, and when it sent nothing on the training days, it is
//! interactive.

use serde::Serialize;

/// Seconds of one window of the statistics.
pub const WINDOW_S: f64 = 600.0;
/// Default `--batch-cv` (chosen on the training days of servegen-m-large: docs/simulator.md).
pub const DEFAULT_BATCH_CV: f64 = 4.5;
/// Default `--batch-clump` (same).
pub const DEFAULT_BATCH_CLUMP: f64 = 45.0;

/// A client's class. The discriminant is the index of the class's figures in a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    Interactive = 0,
    Batch = 1,
}

impl Class {
    pub const ALL: [Class; 2] = [Class::Interactive, Class::Batch];

    pub fn label(self) -> &'static str {
        match self {
            Class::Interactive => "interactive",
            Class::Batch => "batch",
        }
    }
}

/// The thresholds of the rule (`--batch-cv`, `--batch-clump`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Thresholds {
    pub batch_cv: f64,
    pub batch_clump: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            batch_cv: DEFAULT_BATCH_CV,
            batch_clump: DEFAULT_BATCH_CLUMP,
        }
    }
}

/// One client's statistics over the training days and its class.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ClientStats {
    pub client: u32,
    pub requests: u64,
    /// None: no window with three requests and a non-zero mean gap.
    pub cv: Option<f64>,
    pub clump: f64,
    pub class: Class,
}

impl Thresholds {
    /// The rule: batch-like when either statistic exceeds its threshold.
    pub fn class(&self, cv: Option<f64>, clump: f64) -> Class {
        if cv.is_some_and(|cv| cv > self.batch_cv) || clump > self.batch_clump {
            Class::Batch
        } else {
            Class::Interactive
        }
    }
}

/// One client's running tally, one window at a time.
#[derive(Clone, Debug, Default)]
struct Tally {
    requests: u64,
    window: Option<i64>,
    /// The open window: requests, the last arrival, gap sum and sum of squares.
    n: u64,
    last: f64,
    gaps: f64,
    gaps2: f64,
    /// The open second and its count, and the most in one second of the open window.
    second: i64,
    in_second: u64,
    max_second: u64,
    /// Closed windows: sum of n * cv and of n over windows with a cv; the largest clump.
    cv_sum: f64,
    cv_weight: u64,
    clump: f64,
}

impl Tally {
    fn observe(&mut self, t: f64) {
        let window = (t / WINDOW_S).floor() as i64;
        if self.window != Some(window) {
            self.close();
            self.window = Some(window);
        }
        if self.n > 0 {
            let gap = t - self.last;
            self.gaps += gap;
            self.gaps2 += gap * gap;
        }
        let second = t.floor() as i64;
        if self.n == 0 || second != self.second {
            self.second = second;
            self.in_second = 0;
        }
        self.in_second += 1;
        self.max_second = self.max_second.max(self.in_second);
        self.n += 1;
        self.last = t;
        self.requests += 1;
    }

    /// Folds the open window into the client's figures.
    fn close(&mut self) {
        if self.n == 0 {
            return;
        }
        let n = self.n as f64;
        if self.n >= 3 {
            let gaps = n - 1.0;
            let mean = self.gaps / gaps;
            if mean > 0.0 {
                let var = (self.gaps2 / gaps - mean * mean).max(0.0);
                self.cv_sum += n * var.sqrt() / mean;
                self.cv_weight += self.n;
            }
        }
        let rate = n / WINDOW_S;
        self.clump = self.clump.max(self.max_second as f64 / rate.max(1.0));
        self.n = 0;
        self.gaps = 0.0;
        self.gaps2 = 0.0;
        self.max_second = 0;
    }

    fn cv(&self) -> Option<f64> {
        (self.cv_weight > 0).then(|| self.cv_sum / self.cv_weight as f64)
    }
}

/// Collects every client's statistics from its arrivals (in time order) before `until_s`.
#[derive(Clone, Debug)]
pub struct Classifier {
    until_s: f64,
    tallies: Vec<Tally>,
}

impl Classifier {
    /// A classifier for `clients` clients, reading arrivals before `until_s` (the end of the
    /// training days).
    pub fn new(clients: usize, until_s: f64) -> Self {
        Classifier {
            until_s,
            tallies: vec![Tally::default(); clients],
        }
    }

    /// One arrival of `client` at `t` (arrivals after the training days are left out).
    pub fn observe(&mut self, client: u32, t: f64) {
        if t >= self.until_s {
            return;
        }
        let i = client as usize;
        if i >= self.tallies.len() {
            self.tallies.resize(i + 1, Tally::default());
        }
        self.tallies[i].observe(t);
    }

    /// Every client's statistics and class.
    pub fn finish(mut self, thresholds: &Thresholds) -> Vec<ClientStats> {
        self.tallies
            .iter_mut()
            .enumerate()
            .map(|(i, t)| {
                t.close();
                let cv = t.cv();
                ClientStats {
                    client: i as u32,
                    requests: t.requests,
                    cv,
                    clump: t.clump,
                    class: thresholds.class(cv, t.clump),
                }
            })
            .collect()
    }
}

/// A workload's clients, classified: what a run counts each request's class by.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClientClasses {
    pub thresholds: Thresholds,
    /// The days the statistics come from, as the report says it ("days 0-6", or every day in
    /// hindsight without training days).
    pub on: String,
    pub clients: Vec<ClientStats>,
}

impl ClientClasses {
    /// The class of each client, by client index (what the engine reads).
    pub fn of_client(&self) -> Vec<Class> {
        self.clients.iter().map(|c| c.class).collect()
    }

    /// Clients and their requests on the training days, of `class`.
    pub fn count(&self, class: Class) -> (usize, u64) {
        self.clients
            .iter()
            .filter(|c| c.class == class)
            .fold((0, 0), |(n, r), c| (n + 1, r + c.requests))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(arrivals: &[f64]) -> ClientStats {
        let mut c = Classifier::new(1, f64::INFINITY);
        for &t in arrivals {
            c.observe(0, t);
        }
        c.finish(&Thresholds::default())[0]
    }

    #[test]
    fn evenly_spaced_arrivals_have_cv_0_and_clump_1() {
        // One request every 2 s from 0 to 598: 300 requests, 299 gaps of exactly 2 s: cv 0.
        // Rate 300 / 600 = 0.5 req/s, floored at 1: clump = 1 (one request per second) / 1.
        let s = stats(&(0..300).map(|i| i as f64 * 2.0).collect::<Vec<_>>());
        assert_eq!(s.requests, 300);
        assert_eq!(s.cv, Some(0.0));
        assert_eq!(s.clump, 1.0);
        assert_eq!(s.class, Class::Interactive);
    }

    #[test]
    fn cv_by_hand_and_weighted_by_requests() {
        // Window 0: arrivals 0, 1, 4: gaps 1 and 3, mean 2, population sd 1: cv 0.5, n 3.
        // Window 1 (600-1200): arrivals 600, 601, 602, 603, 613: gaps 1, 1, 1, 10: mean 13/4 =
        // 3.25; mean square (1 + 1 + 1 + 100) / 4 = 25.75; var 25.75 - 10.5625 = 15.1875; sd
        // 3.8971; cv 1.19911, n 5.
        // Window 2: two requests only: no cv (but they count as requests).
        // Weighted: (3 * 0.5 + 5 * 1.19911) / 8 = (1.5 + 5.99556) / 8 = 0.93695.
        let s = stats(&[
            0.0, 1.0, 4.0, 600.0, 601.0, 602.0, 603.0, 613.0, 1300.0, 1400.0,
        ]);
        assert_eq!(s.requests, 10);
        let cv = s.cv.unwrap();
        assert!((cv - 0.93695).abs() < 1e-4, "{cv}");
    }

    #[test]
    fn gaps_across_windows_are_not_counted() {
        // 0, 10, 20 in window 0 (gaps 10, 10: cv 0) and 600, 610, 620 in window 1 (cv 0): the
        // 580 s between them would make a cv of 1.84 were it counted. Weighted cv 0.
        assert_eq!(stats(&[0.0, 10.0, 20.0, 600.0, 610.0, 620.0]).cv, Some(0.0));
    }

    #[test]
    fn clump_by_hand() {
        // Window 0: 1,200 requests, 1,150 of them spread one per 0.5 s from 0 to 574.5 (two per
        // second), and 50 all in second 580: most in one second 50; rate 1200 / 600 = 2 req/s:
        // clump 50 / 2 = 25.
        let mut t: Vec<f64> = (0..1150).map(|i| i as f64 * 0.5).collect();
        t.extend((0..50).map(|i| 580.0 + i as f64 * 0.01));
        let s = stats(&t);
        assert_eq!(s.clump, 25.0);
        // Below one request per second the floor holds: 3 requests in second 7 of a window
        // holding 4 in all (rate 4 / 600): clump 3 / 1 = 3, not 3 / (4 / 600) = 450.
        assert_eq!(stats(&[7.0, 7.1, 7.2, 300.0]).clump, 3.0);
        // All in one instant: no cv (mean gap 0), clump 5.
        let s = stats(&[9.0; 5]);
        assert_eq!((s.cv, s.clump), (None, 5.0));
    }

    #[test]
    fn the_rule_is_strictly_above_either_threshold() {
        let th = Thresholds {
            batch_cv: 4.0,
            batch_clump: 50.0,
        };
        let cases = [
            (Some(4.0), 50.0, Class::Interactive),
            (Some(4.0001), 1.0, Class::Batch),
            (Some(0.5), 50.0001, Class::Batch),
            (None, 50.0, Class::Interactive),
            (None, 51.0, Class::Batch),
            (Some(17.0), 200.0, Class::Batch),
        ];
        for (cv, clump, want) in cases {
            assert_eq!(th.class(cv, clump), want, "{cv:?} {clump}");
        }
    }

    #[test]
    fn only_arrivals_before_the_end_of_training_count() {
        // Client 1 is quiet before 86,400 s and sends a clump of 200 after it: still
        // interactive. Client 2 sent nothing on the training days: interactive, 0 requests.
        let mut c = Classifier::new(3, 86_400.0);
        for i in 0..100 {
            c.observe(0, i as f64 * 5.0);
            c.observe(1, i as f64 * 5.0);
        }
        for _ in 0..200 {
            c.observe(1, 90_000.0);
            c.observe(2, 90_000.0);
        }
        let s = c.finish(&Thresholds::default());
        assert_eq!(s.len(), 3);
        assert_eq!(
            s.iter().map(|c| (c.requests, c.class)).collect::<Vec<_>>(),
            vec![
                (100, Class::Interactive),
                (100, Class::Interactive),
                (0, Class::Interactive)
            ]
        );
    }
}
