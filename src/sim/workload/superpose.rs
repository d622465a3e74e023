//! `--superpose K`: K independent tenants sending the same kind of traffic, modelled as K copies
//! of a request trace, each circularly shifted by its own random offset (seeded) and merged in
//! time order. Unlike cloning (`--scale`), the copies' bursts fall at different times, so the
//! aggregate smooths the way K independent sources do, while the request count, the mean rate
//! (K times the trace's) and the token lengths are kept.
//!
//! The shift wraps within the trace's span: `span = last - first + one mean gap` (the extra gap
//! keeps a copy's last request from landing on the same instant as its first after wrapping).
//! The base trace is held in memory (16 bytes per request); the superposed stream is not.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::merge::Merge;
use crate::sim::trace::TraceRecord;

/// One shifted copy: the requests from `split` to the end, moved to the front, then the rest.
pub struct ShiftedCopy {
    records: Arc<Vec<TraceRecord>>,
    offset: f64,
    span: f64,
    split: usize,
    emitted: usize,
}

impl Iterator for ShiftedCopy {
    type Item = TraceRecord;

    fn next(&mut self) -> Option<TraceRecord> {
        let n = self.records.len();
        if self.emitted == n {
            return None;
        }
        let i = (self.split + self.emitted) % n;
        self.emitted += 1;
        let r = self.records[i];
        let t = if i >= self.split {
            r.t + self.offset - self.span
        } else {
            r.t + self.offset
        };
        Some(TraceRecord { t: t.max(0.0), ..r })
    }
}

/// The span the copies wrap in (see the module docs).
pub fn span(records: &[TraceRecord]) -> f64 {
    match records {
        [] => 0.0,
        [_] => 1.0,
        [first, .., last] => {
            let covered = last.t - first.t;
            let gap = covered / (records.len() - 1) as f64;
            if covered > 0.0 {
                covered + gap
            } else {
                1.0
            }
        }
    }
}

/// K shifted copies of `records` (in time order, starting at t = 0), merged.
pub fn superpose(records: Arc<Vec<TraceRecord>>, k: u32, seed: u64) -> Merge<ShiftedCopy> {
    let span = span(&records);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5afe_c0b1e5);
    let copies = (0..k)
        .map(|_| {
            let offset = rng.random::<f64>() * span;
            // The first request whose shifted time passes the span wraps to the front.
            let split = records.partition_point(|r| r.t + offset < span);
            ShiftedCopy {
                records: records.clone(),
                offset,
                span,
                split,
                emitted: 0,
            }
        })
        .collect();
    Merge::new(copies)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(times: &[f64]) -> Arc<Vec<TraceRecord>> {
        Arc::new(
            times
                .iter()
                .enumerate()
                .map(|(i, &t)| TraceRecord {
                    t,
                    input_tokens: i as u32,
                    output_tokens: 1,
                    client: 0,
                })
                .collect(),
        )
    }

    #[test]
    fn superposition_keeps_the_request_count_and_the_mean_rate() {
        // 1,000 requests, one every 0.9 s from t = 0: covered 899.1 s, span 899.1 + 0.9 = 900 s,
        // mean rate 1000 / 900 per copy.
        let base = trace(&(0..1000).map(|i| i as f64 * 0.9).collect::<Vec<_>>());
        assert!((span(&base) - 900.0).abs() < 1e-9);
        let out: Vec<TraceRecord> = superpose(base.clone(), 50, 7).collect();
        assert_eq!(out.len(), 50_000);
        assert!(out.windows(2).all(|w| w[0].t <= w[1].t), "time order");
        assert!(out.iter().all(|r| r.t >= 0.0 && r.t < 900.0));
        // Over the span the mean rate is 50 x 1000 / 900 = 55.6 req/s.
        let rate = out.len() as f64 / 900.0;
        assert!((rate - 50.0 * 1000.0 / 900.0).abs() < 1e-9);
        // Every request of the base appears exactly 50 times (token counts mark them).
        let mut seen = vec![0u32; 1000];
        for r in &out {
            seen[r.input_tokens as usize] += 1;
        }
        assert!(seen.iter().all(|&c| c == 50));
        // Copies are shifted: the first 9 s hold about 50 x 10 requests from many copies,
        // while unshifted clones would put all 50 copies of request 0 at t = 0.
        let at_zero = out.iter().filter(|r| r.t == 0.0).count();
        assert!(at_zero < 5, "{at_zero}");
    }

    #[test]
    fn a_burst_is_spread_over_the_span_not_cloned() {
        // One burst of 100 requests in the first second of a 3,600 s trace (plus a request at
        // the end so the span is an hour). Cloned 100 times it would be 10,000 requests in one
        // second; superposed, each copy's burst lands at its own offset, so one second holds
        // at most a few copies' bursts (100 offsets uniform on 3,600 s: the chance that 4 fall
        // in the same second is below 100^4/4! / 3600^3 = 9e-5).
        let mut times: Vec<f64> = (0..100).map(|i| i as f64 * 0.001).collect();
        times.push(3599.0);
        let out: Vec<TraceRecord> = superpose(trace(&times), 100, 11).collect();
        let mut per_second = std::collections::HashMap::new();
        for r in &out {
            *per_second.entry(r.t as u64).or_insert(0u32) += 1;
        }
        let busiest = per_second.values().max().copied().unwrap();
        assert!(busiest <= 3 * 101, "{busiest}");
    }
}
