//! A rate series: the request rate over time, one row per change, as a CSV with the header
//! `t_seconds,rate_per_s` and an optional third column `cv`. Each row holds until the next; the
//! last row holds as long as the interval before it. Times are made relative to the first row.
//! Arrivals are a renewal process carried across rows ([`super::renewal`]): Gamma gaps with
//! shape 1/cv² where a row has a `cv`, exponential (Poisson) where it has none.
//!
//! `prewarm backtest` builds the same type from a metric source's arrival-rate series.

use std::io::BufRead;
use std::path::Path;

use super::renewal::{Gap, Piece};
use crate::sim::trace::{numbered_lines, read_path, TraceError};

/// The header a rate CSV starts with (recognised by content, whatever the file is called).
pub const HEADER: &str = "t_seconds,rate_per_s";

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateRow {
    /// Seconds since the first row.
    pub t: f64,
    pub rate: f64,
    /// Coefficient of variation of the gaps; `None`: Poisson.
    pub cv: Option<f64>,
}

/// Rows in time order and the end of the last one.
#[derive(Clone, Debug, PartialEq)]
pub struct RateSeries {
    pub rows: Vec<RateRow>,
    pub end: f64,
}

impl RateSeries {
    /// From `(t, rate, cv)` rows in increasing time; at least two.
    pub fn new(rows: Vec<RateRow>) -> Result<RateSeries, String> {
        if rows.len() < 2 {
            return Err("a rate series needs at least two rows".into());
        }
        let origin = rows[0].t;
        let mut out = Vec::with_capacity(rows.len());
        for (i, row) in rows.iter().enumerate() {
            if !(row.rate.is_finite() && row.rate >= 0.0) {
                return Err(format!(
                    "row {}: rate {} must be zero or more",
                    i + 1,
                    row.rate
                ));
            }
            if let Some(cv) = row.cv.filter(|cv| !(cv.is_finite() && *cv > 0.0)) {
                return Err(format!("row {}: cv {cv} must be positive", i + 1));
            }
            if i > 0 && row.t <= rows[i - 1].t {
                return Err(format!("row {}: times must increase", i + 1));
            }
            out.push(RateRow {
                t: row.t - origin,
                ..*row
            });
        }
        let n = out.len();
        let end = out[n - 1].t + (out[n - 1].t - out[n - 2].t);
        Ok(RateSeries { rows: out, end })
    }

    /// The pieces of the renewal process, every rate multiplied by `rate_scale`.
    pub fn pieces(&self, rate_scale: f64) -> impl Iterator<Item = Piece> + '_ {
        self.rows.iter().enumerate().map(move |(i, row)| Piece {
            start: row.t,
            end: self.rows.get(i + 1).map_or(self.end, |next| next.t),
            gap: (row.rate * rate_scale > 0.0)
                .then(|| Gap::from_rate(row.rate * rate_scale, row.cv)),
        })
    }

    /// The expected number of requests (rate times duration, summed).
    pub fn expected_requests(&self, rate_scale: f64) -> f64 {
        self.pieces(1.0)
            .zip(&self.rows)
            .map(|(p, r)| r.rate * rate_scale * (p.end - p.start))
            .sum()
    }
}

/// Samples missing for longer than this many steps are a gap in the data, not a slow rate.
const GAP_STEPS: f64 = 3.0;

/// A rate series from a metric source's arrival-rate samples `(t, rate)` on a `step` grid:
/// one Poisson row per sample (negative rates count as 0). Where samples are missing for more
/// than 3 steps the data has a gap, not a rate: it is replayed as no requests from one step
/// after the last sample, and its length is returned so the caller can say so.
pub fn from_samples(samples: &[(f64, f64)], step: f64) -> Result<(RateSeries, f64), String> {
    let mut rows = Vec::with_capacity(samples.len());
    let mut missing_s = 0.0;
    for (i, &(t, rate)) in samples.iter().enumerate() {
        rows.push(RateRow {
            t,
            rate: rate.max(0.0),
            cv: None,
        });
        if let Some(&(next, _)) = samples.get(i + 1) {
            if next - t > GAP_STEPS * step {
                rows.push(RateRow {
                    t: t + step,
                    rate: 0.0,
                    cv: None,
                });
                missing_s += next - t - step;
            }
        }
    }
    Ok((RateSeries::new(rows)?, missing_s))
}

/// Whether a file starts with the rate-series header.
pub fn is_rate_csv(path: &Path) -> bool {
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let mut first = String::new();
    std::io::BufReader::new(file)
        .read_line(&mut first)
        .is_ok_and(|_| {
            first
                .trim_start_matches('\u{feff}')
                .trim()
                .starts_with(HEADER)
        })
}

/// Reads a rate CSV; errors name the file and line.
pub fn read(reader: impl BufRead, name: &str) -> Result<RateSeries, TraceError> {
    let err = TraceError::at(name);
    let mut rows = Vec::new();
    let mut has_cv = false;
    for line in numbered_lines(reader, name) {
        let (line_no, line) = line?;
        let line = line.trim().trim_start_matches('\u{feff}');
        if line_no == 1 {
            let header: Vec<&str> = line.split(',').map(str::trim).collect();
            has_cv = match header.as_slice() {
                ["t_seconds", "rate_per_s"] => false,
                ["t_seconds", "rate_per_s", "cv"] => true,
                _ => return Err(err(1, format!("expected the header {HEADER}[,cv]"))),
            };
            continue;
        }
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let width = if has_cv { 3 } else { 2 };
        if fields.len() != width && !(has_cv && fields.len() == 2) {
            return Err(err(
                line_no,
                format!("expected {width} fields, found {}", fields.len()),
            ));
        }
        let number = |field: &str, what: &str| {
            field
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| err(line_no, format!("{what} {field:?} is not a number")))
        };
        let t = number(fields[0], "t_seconds")?;
        let rate = number(fields[1], "rate_per_s")?;
        let cv = match fields.get(2) {
            None | Some(&"") => None,
            Some(v) => Some(number(v, "cv")?),
        };
        if rate < 0.0 {
            return Err(err(
                line_no,
                format!("rate_per_s {rate} must be zero or more"),
            ));
        }
        if cv.is_some_and(|cv| cv <= 0.0) {
            return Err(err(line_no, "cv must be positive".into()));
        }
        if rows.last().is_some_and(|prev: &RateRow| t <= prev.t) {
            return Err(err(line_no, "t_seconds must increase".into()));
        }
        rows.push(RateRow { t, rate, cv });
    }
    RateSeries::new(rows).map_err(|message| TraceError::Format {
        path: name.to_string(),
        message,
    })
}

pub fn read_file(path: &Path) -> Result<RateSeries, TraceError> {
    read_path(path, read)
}

/// The rate CSV of arrival times (seconds from 0): one row per `step_s` step, the arrivals in
/// it over its length (`prewarm simulate --rates-out`: a workload as the rate a metric store
/// shows, read back by this module and by tools/weigh-forecasters).
pub fn csv_of_arrivals(arrivals: impl Iterator<Item = f64>, step_s: f64) -> String {
    let mut counts: Vec<u64> = Vec::new();
    for t in arrivals {
        let i = (t / step_s).floor().max(0.0) as usize;
        if counts.len() <= i {
            counts.resize(i + 1, 0);
        }
        counts[i] += 1;
    }
    let mut csv = format!("{HEADER}\n");
    for (i, n) in counts.iter().enumerate() {
        csv.push_str(&format!("{},{}\n", i as f64 * step_s, *n as f64 / step_s));
    }
    csv
}

#[cfg(test)]
mod tests {
    use super::super::renewal::{tests::rng, Renewal};
    use super::*;

    /// Index of dispersion of the counts in 1 s bins over [0, seconds): sum (x - mean)^2 / mean.
    fn dispersion(series: &RateSeries, seed: u64, seconds: usize) -> (f64, f64) {
        let mut counts = vec![0u32; seconds];
        for t in Renewal::new(series.pieces(1.0), rng(seed)) {
            if let Some(c) = counts.get_mut(t as usize) {
                *c += 1;
            }
        }
        let mean = counts.iter().map(|&c| c as f64).sum::<f64>() / seconds as f64;
        let d = counts
            .iter()
            .map(|&c| (c as f64 - mean).powi(2))
            .sum::<f64>()
            / mean;
        (mean, d)
    }

    /// 20 req/s for 10,000 s in rows of 60 s (so every row boundary is crossed), with `cv`.
    fn steady(cv: Option<f64>) -> RateSeries {
        let rows = (0..=10_000 / 60)
            .map(|i| RateRow {
                t: i as f64 * 60.0,
                rate: 20.0,
                cv,
            })
            .collect();
        RateSeries::new(rows).unwrap()
    }

    #[test]
    fn cv_1_gives_poisson_counts() {
        // For Poisson counts in n = 10,000 bins the dispersion index is chi-square with n - 1
        // degrees of freedom: mean 9,999, standard deviation sqrt(2 * 9,999) = 141.4. Accept
        // 4 standard deviations (566). The mean count is 20 with standard error
        // sqrt(20 / 10,000) = 0.045; accept 0.2.
        for cv in [None, Some(1.0)] {
            let (mean, d) = dispersion(&steady(cv), 42, 10_000);
            assert!((mean - 20.0).abs() < 0.2, "{cv:?}: mean {mean}");
            assert!((d - 9_999.0).abs() < 566.0, "{cv:?}: dispersion {d}");
        }
    }

    #[test]
    fn cv_above_1_gives_over_dispersion() {
        // A renewal process's counts over a window of many mean gaps have variance/mean close
        // to cv^2 (9 here; 1 s is 20 mean gaps). Poisson would stay within
        // 1 + 4 * sqrt(2 / 9,999) = 1.057; ask for more than 3.
        let (mean, d) = dispersion(&steady(Some(3.0)), 42, 10_000);
        assert!((mean - 20.0).abs() < 1.0, "mean {mean}");
        assert!(d / 9_999.0 > 3.0, "dispersion per bin {}", d / 9_999.0);
    }

    #[test]
    fn rows_hold_until_the_next_and_the_last_as_long_as_the_one_before() {
        let csv = "t_seconds,rate_per_s,cv\n100,2,\n160,0.5,3\n400,4,1\n";
        let s = read(csv.as_bytes(), "r.csv").unwrap();
        assert_eq!(
            s.rows[1],
            RateRow {
                t: 60.0,
                rate: 0.5,
                cv: Some(3.0)
            }
        );
        assert_eq!(s.end, 300.0 + 240.0);
        let pieces: Vec<Piece> = s.pieces(2.0).collect();
        assert_eq!((pieces[0].start, pieces[0].end), (0.0, 60.0));
        assert_eq!(pieces[0].gap, Some(Gap::Exponential { mean: 0.25 }));
        // cv 3 at rate 1: shape 1/9, scale 1/(1 * 1/9) = 9.
        assert_eq!(
            pieces[1].gap,
            Some(Gap::Gamma {
                shape: 1.0 / 9.0,
                scale: 9.0
            })
        );
        assert_eq!((pieces[2].start, pieces[2].end), (300.0, 540.0));
        // 2*60 + 0.5*240 + 4*240 = 1200 requests, doubled.
        assert_eq!(s.expected_requests(2.0), 2400.0);
    }

    #[test]
    fn metric_samples_become_rows_and_gaps_become_silence() {
        // Step 60 s; a gap from 120 to 600 s (more than 3 steps): silence from 180 s.
        let samples = [
            (1000.0, 2.0),
            (1060.0, 4.0),
            (1120.0, -0.5),
            (1600.0, 1.0),
            (1660.0, 1.0),
        ];
        let (s, missing) = from_samples(&samples, 60.0).unwrap();
        let rows: Vec<(f64, f64)> = s.rows.iter().map(|r| (r.t, r.rate)).collect();
        assert_eq!(
            rows,
            vec![
                (0.0, 2.0),
                (60.0, 4.0),
                (120.0, 0.0),
                (180.0, 0.0),
                (600.0, 1.0),
                (660.0, 1.0)
            ]
        );
        assert_eq!(missing, 420.0);
        assert_eq!(s.end, 720.0);
        // 2*60 + 4*60 + 0 + 0 + 1*60 + 1*60.
        assert_eq!(s.expected_requests(1.0), 480.0);
    }

    #[test]
    fn arrivals_become_the_rate_of_each_step() {
        // Step 60 s: 0.5, 10 and 59.9 fall in step 0 (3/60 = 0.05 req/s), 60 in step 1 and
        // 130 in step 2 (1/60 each, printed as Rust prints f64).
        let csv = csv_of_arrivals([0.5, 10.0, 59.9, 60.0, 130.0].into_iter(), 60.0);
        assert_eq!(
            csv,
            "t_seconds,rate_per_s\n0,0.05\n60,0.016666666666666666\n120,0.016666666666666666\n"
        );
        // What it writes reads back as a rate series.
        assert_eq!(read(csv.as_bytes(), "r.csv").unwrap().rows.len(), 3);
    }

    #[test]
    fn malformed_rate_csv_names_the_line() {
        let cases = [
            ("t,rate\n0,1\n1,1\n", "line 1", "header"),
            ("t_seconds,rate_per_s\n0,1\n5,x\n", "line 3", "rate_per_s"),
            (
                "t_seconds,rate_per_s\n0,1\n5,-2\n",
                "line 3",
                "zero or more",
            ),
            ("t_seconds,rate_per_s\n0,1\n0,2\n", "line 3", "increase"),
            ("t_seconds,rate_per_s,cv\n0,1,0\n5,1,1\n", "line 2", "cv"),
            ("t_seconds,rate_per_s\n0,1,4\n", "line 2", "2 fields"),
        ];
        for (text, line, cause) in cases {
            let error = read(text.as_bytes(), "r.csv").unwrap_err().to_string();
            assert!(
                error.contains(line) && error.contains(cause),
                "{text:?}: {error}"
            );
        }
        assert!(read("t_seconds,rate_per_s\n0,1\n".as_bytes(), "r.csv").is_err());
    }
}
