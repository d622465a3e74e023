//! Metrics history for `prewarm backtest`: a CSV of `timestamp,arrival_rate,queue_length`
//! (header required; `queue_length` may be empty). `timestamp` is Unix seconds or RFC 3339;
//! `arrival_rate` is requests per second over the interval up to the next row. This is what a
//! Prometheus/AMP `query_range` of the servers' request rate and queue length gives (see
//! docs/simulator.md for the export commands).
//!
//! The history becomes a request stream: each interval's `rate * dt` requests (the fractional
//! remainder carried to the next interval) are spread evenly over it, and the first row's
//! queue length arrives at t = 0 as a backlog. Later queue lengths are the result of the
//! capacity the cluster had then, so they are not replayed as demand.

use std::io::BufRead;
use std::path::Path;

use super::engine::Request;
use super::trace::{numbered_lines, read_path, TraceError};

/// One row of the history.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HistoryRow {
    pub t: f64,
    pub arrival_rate: f64,
    pub queue_length: Option<f64>,
}

/// Reads and checks the whole history (it is small: one row per step).
pub fn read(reader: impl BufRead, name: &str) -> Result<Vec<HistoryRow>, TraceError> {
    let mut rows: Vec<HistoryRow> = Vec::new();
    let err = TraceError::at(name);
    for line in numbered_lines(reader, name) {
        let (line_no, line) = line?;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if line_no == 1 {
            if !line.starts_with("timestamp") {
                return Err(err(
                    1,
                    "expected the header timestamp,arrival_rate,queue_length".into(),
                ));
            }
            continue;
        }
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if fields.len() < 2 || fields.len() > 3 {
            return Err(err(
                line_no,
                format!("expected 2 or 3 fields, found {}", fields.len()),
            ));
        }
        let t = parse_time(fields[0])
            .ok_or_else(|| err(line_no, format!("bad timestamp {:?}", fields[0])))?;
        let arrival_rate = fields[1]
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| {
                err(
                    line_no,
                    format!("arrival_rate {:?} is not a non-negative number", fields[1]),
                )
            })?;
        let queue_length = match fields.get(2) {
            None | Some(&"") => None,
            Some(v) => Some(
                v.parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .ok_or_else(|| {
                        err(
                            line_no,
                            format!("queue_length {v:?} is not a non-negative number"),
                        )
                    })?,
            ),
        };
        if let Some(prev) = rows.last() {
            if t <= prev.t {
                return Err(err(line_no, "timestamps must increase".into()));
            }
        }
        rows.push(HistoryRow {
            t,
            arrival_rate,
            queue_length,
        });
    }
    if rows.len() < 2 {
        return Err(TraceError::Format {
            path: name.to_string(),
            message: "a history needs at least two rows".into(),
        });
    }
    Ok(rows)
}

pub fn read_file(path: &Path) -> Result<Vec<HistoryRow>, TraceError> {
    read_path(path, read)
}

fn parse_time(field: &str) -> Option<f64> {
    if let Ok(v) = field.parse::<f64>() {
        return v.is_finite().then_some(v);
    }
    chrono::DateTime::parse_from_rfc3339(field)
        .ok()
        .map(|d| d.timestamp() as f64 + d.timestamp_subsec_nanos() as f64 / 1e9)
}

/// The request stream of a history, times relative to its first row.
pub fn requests(rows: &[HistoryRow], service_s: f64) -> Vec<Request> {
    let origin = rows[0].t;
    let mut out = Vec::new();
    let backlog = rows[0].queue_length.unwrap_or(0.0).round() as usize;
    out.extend(std::iter::repeat_n(
        Request {
            arrival: 0.0,
            service_s,
            prefill_s: 0.0,
            client: 0,
        },
        backlog,
    ));
    let mut carry = 0.0;
    for (i, row) in rows.iter().enumerate() {
        let dt = match rows.get(i + 1) {
            Some(next) => next.t - row.t,
            None => row.t - rows[i - 1].t,
        };
        let expected = row.arrival_rate * dt + carry;
        let n = expected.floor();
        carry = expected - n;
        let n = n as usize;
        for k in 0..n {
            out.push(Request {
                arrival: row.t - origin + (k as f64 + 0.5) * dt / n as f64,
                service_s,
                prefill_s: 0.0,
                client: 0,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_become_evenly_spread_requests() {
        let csv = "timestamp,arrival_rate,queue_length\n\
                   1700000000,0.2,3\n\
                   1700000010,0.15,\n\
                   2023-11-14T22:13:40Z,1\n";
        let rows = read(csv.as_bytes(), "h.csv").unwrap();
        assert_eq!(rows[2].t, 1_700_000_020.0);
        let reqs = requests(&rows, 2.0);
        // 3 backlog at t=0; 0.2*10 = 2 in [0,10) at 2.5 and 7.5; 0.15*10 = 1.5 -> 1 at 15,
        // carry 0.5; last row 1*10 + 0.5 = 10.5 -> 10 spread over [20,30).
        let times: Vec<f64> = reqs.iter().map(|r| r.arrival).collect();
        assert_eq!(&times[..6], &[0.0, 0.0, 0.0, 2.5, 7.5, 15.0]);
        assert_eq!(times.len(), 3 + 2 + 1 + 10);
        assert_eq!(times[6], 20.5);
    }

    #[test]
    fn malformed_history_names_the_line() {
        let cases = [
            ("time,rate\n1,2\n2,3\n", "line 1", "header"),
            (
                "timestamp,arrival_rate\n1,2\nyesterday,3\n",
                "line 3",
                "bad timestamp",
            ),
            (
                "timestamp,arrival_rate\n1,2\n2,-3\n",
                "line 3",
                "arrival_rate",
            ),
            ("timestamp,arrival_rate\n1,2\n1,3\n", "line 3", "increase"),
            (
                "timestamp,arrival_rate,queue_length\n1,2,x\n2,3\n",
                "line 2",
                "queue_length",
            ),
        ];
        for (text, line, cause) in cases {
            let error = read(text.as_bytes(), "h.csv").unwrap_err().to_string();
            assert!(error.contains(line) && error.contains(cause), "{error}");
        }
        assert!(read("timestamp,arrival_rate\n1,2\n".as_bytes(), "h.csv").is_err());
    }
}
