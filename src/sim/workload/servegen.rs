//! The ServeGen client directory format (alibaba/ServeGen `data/language/*`; the copy shipped in
//! ../shared/traces/servegen-m-large/ is described in ../shared/traces/README.md): one file per
//! API client, `chunk-N-trace.csv`, no header, one row per 600 s window:
//! `window_start_s, rate_req_per_s, cv, dist, p1, p2`, with `dist` `Gamma` (p1 shape, p2 scale
//! in seconds) or `Weibull` (p1 shape, p2 scale in seconds), empty when the rate is 0.
//!
//! The fitted distribution is used as given (so a window's realised mean gap is the fit's,
//! `p1 * p2` or `p2 * Γ(1 + 1/p1)`, not `1 / rate_req_per_s`: in m-large they differ by a few
//! per cent, and the fits add up to about 7 % more requests than the rate column). Each client is
//! a renewal process carried across its windows ([`super::renewal`]), and the clients are merged
//! in time order ([`super::merge`]). Only the window table sits in memory (162 clients x 2,016
//! windows); the requests are generated as they are consumed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::merge::Merge;
use super::renewal::{Gap, Piece, Renewal};
use crate::sim::trace::{TraceError, TraceRecord};

/// Every client's windows, in file-number order.
#[derive(Clone, Debug, PartialEq)]
pub struct ServeGen {
    pub name: String,
    pub clients: Vec<Vec<Piece>>,
}

/// The client files of a directory (`chunk-N-trace.csv`), by N; empty if none.
pub fn client_files(dir: &Path) -> Vec<(u64, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<(u64, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let n = name.strip_prefix("chunk-")?.strip_suffix("-trace.csv")?;
            Some((n.parse().ok()?, e.path()))
        })
        .collect();
    files.sort();
    files
}

/// Parses one client's file.
pub fn read_client(text: &str, name: &str) -> Result<Vec<Piece>, TraceError> {
    let err = TraceError::at(name);
    let mut rows: Vec<(f64, Option<Gap>)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() != 6 {
            return Err(err(
                line_no,
                format!(
                    "expected 6 fields window_start_s,rate_req_per_s,cv,dist,p1,p2, found {}",
                    f.len()
                ),
            ));
        }
        let num = |k: usize, what: &str| {
            f[k].parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| {
                    err(
                        line_no,
                        format!("{what} {:?} is not a non-negative number", f[k]),
                    )
                })
        };
        let start = num(0, "window_start_s")?;
        let rate = num(1, "rate_req_per_s")?;
        let (p1, p2) = (num(4, "p1")?, num(5, "p2")?);
        let gap = match (f[3], rate > 0.0) {
            (_, false) => None,
            ("Gamma", true) => Some(Gap::Gamma {
                shape: p1,
                scale: p2,
            }),
            ("Weibull", true) => Some(Gap::Weibull {
                shape: p1,
                scale: p2,
            }),
            (other, true) => {
                return Err(err(
                    line_no,
                    format!("dist {other:?}: expected Gamma or Weibull for a window with requests"),
                ))
            }
        };
        if let Some(g) = gap {
            g.check().map_err(|m| err(line_no, m))?;
        }
        if rows.last().is_some_and(|&(prev, _)| start <= prev) {
            return Err(err(line_no, "window_start_s must increase".into()));
        }
        rows.push((start, gap));
    }
    if rows.is_empty() {
        return Err(TraceError::Format {
            path: name.to_string(),
            message: "no windows".into(),
        });
    }
    // The last window lasts as long as the one before (600 s in ServeGen).
    let last_len = match rows.as_slice() {
        [.., (a, _), (b, _)] => b - a,
        _ => 600.0,
    };
    Ok(rows
        .iter()
        .enumerate()
        .map(|(i, &(start, gap))| Piece {
            start,
            end: rows.get(i + 1).map_or(start + last_len, |next| next.0),
            gap,
        })
        .collect())
}

impl ServeGen {
    /// Reads every client file of the directory.
    pub fn read_dir(dir: &Path) -> Result<ServeGen, TraceError> {
        let files = client_files(dir);
        if files.is_empty() {
            return Err(TraceError::Format {
                path: dir.display().to_string(),
                message: "no ServeGen client files (chunk-N-trace.csv)".into(),
            });
        }
        let mut clients = Vec::with_capacity(files.len());
        for (_, path) in files {
            let name = path.display().to_string();
            let text = std::fs::read_to_string(&path).map_err(TraceError::io(&name))?;
            clients.push(read_client(&text, &name)?);
        }
        let name = dir
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| dir.display().to_string());
        Ok(ServeGen { name, clients })
    }

    /// Expected requests (each window's length over its fit's mean gap), times `rate_scale`.
    pub fn expected_requests(&self, rate_scale: f64) -> f64 {
        self.clients
            .iter()
            .flatten()
            .filter_map(|p| p.gap.map(|g| (p.end - p.start) / g.mean()))
            .sum::<f64>()
            * rate_scale
    }
}

/// One client's windows with every gap divided by the rate scale.
pub struct ClientPieces {
    set: Arc<ServeGen>,
    client: usize,
    next: usize,
    stretch: f64,
}

impl Iterator for ClientPieces {
    type Item = Piece;

    fn next(&mut self) -> Option<Piece> {
        let p = *self.set.clients[self.client].get(self.next)?;
        self.next += 1;
        Some(Piece {
            gap: p.gap.map(|g| g.stretched(self.stretch)),
            ..p
        })
    }
}

/// One client's arrivals as records without tokens.
pub type ClientStream = std::iter::Map<Renewal<ClientPieces>, fn(f64) -> TraceRecord>;

fn untokened(t: f64) -> TraceRecord {
    TraceRecord {
        t,
        input_tokens: 0,
        output_tokens: 0,
        // The merge tags each record with its client (its stream's index).
        client: 0,
    }
}

/// Every client's arrivals merged in time order (tokens left at 0, `client` the index of the
/// client's file in number order), rates times `rate_scale`. Client `i` draws from its own stream of the seeded generator, so adding a client does not
/// change the others' arrivals.
pub fn arrivals(set: Arc<ServeGen>, rate_scale: f64, seed: u64) -> Merge<ClientStream> {
    let streams = (0..set.clients.len())
        .map(|client| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(client as u64 + 1);
            let pieces = ClientPieces {
                set: set.clone(),
                client,
                next: 0,
                stretch: 1.0 / rate_scale,
            };
            Renewal::new(pieces, rng).map(untokened as fn(f64) -> TraceRecord)
        })
        .collect();
    Merge::new(streams)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_files_parse_with_their_fits_as_given() {
        let text =
            "0,1.33,8.6,Weibull,0.375,0.397\n600,0,0,,0,0\n1200,0.15,4.07,Gamma,0.0604,103.65\n";
        let pieces = read_client(text, "chunk-0-trace.csv").unwrap();
        assert_eq!(pieces.len(), 3);
        assert_eq!(
            pieces[0].gap,
            Some(Gap::Weibull {
                shape: 0.375,
                scale: 0.397
            })
        );
        assert_eq!(
            (pieces[1].start, pieces[1].end, pieces[1].gap),
            (600.0, 1200.0, None)
        );
        assert_eq!((pieces[2].start, pieces[2].end), (1200.0, 1800.0));
        assert_eq!(
            pieces[2].gap,
            Some(Gap::Gamma {
                shape: 0.0604,
                scale: 103.65
            })
        );
        let bad = [
            ("0,1,1,Gamma,1\n", "6 fields"),
            ("0,1,1,Lognormal,1,1\n", "Gamma or Weibull"),
            ("0,1,1,Gamma,0,1\n", "positive"),
            ("0,x,1,Gamma,1,1\n", "rate_req_per_s"),
            ("600,1,1,Gamma,1,1\n0,1,1,Gamma,1,1\n", "increase"),
        ];
        for (text, cause) in bad {
            let e = read_client(text, "c.csv").unwrap_err().to_string();
            assert!(
                e.contains(cause) && e.starts_with("c.csv line"),
                "{text:?}: {e}"
            );
        }
    }

    #[test]
    fn window_boundaries_have_no_arrival_spikes() {
        // 50 clients, 200 windows of 600 s. Gamma gaps with cv 1.5 (shape 1/2.25); rate
        // alternating 0.1 and 0.3 req/s, and every 5th window silent. Were clients restarted
        // at each boundary, a fresh Gamma(0.44) gap falls under 1 s with probability ~0.3-0.5,
        // several times the window's rate: a spike in the first second after boundaries.
        let shape = 1.0 / 2.25;
        let rate_of = |w: usize| match w % 5 {
            4 => 0.0,
            k if k % 2 == 0 => 0.1,
            _ => 0.3,
        };
        let client: Vec<Piece> = (0..200)
            .map(|w| Piece {
                start: w as f64 * 600.0,
                end: (w + 1) as f64 * 600.0,
                gap: (rate_of(w) > 0.0).then(|| Gap::Gamma {
                    shape,
                    scale: 1.0 / (rate_of(w) * shape),
                }),
            })
            .collect();
        let set = Arc::new(ServeGen {
            name: "test".into(),
            clients: vec![client; 50],
        });
        let mut first_second = 0u64;
        let mut total = 0u64;
        let mut last = 0.0;
        for r in arrivals(set.clone(), 1.0, 9) {
            assert!(r.t >= last, "time order");
            last = r.t;
            total += 1;
            let w = (r.t / 600.0) as usize;
            if w > 0 && r.t - w as f64 * 600.0 < 1.0 {
                first_second += 1;
            }
        }
        // Expected in the first second after boundaries 1..199: 50 clients x that window's rate.
        let expected: f64 = (1..200).map(|w| 50.0 * rate_of(w)).sum();
        // Short counts of a superposition of 50 independent sources are close to Poisson; allow
        // cv^2 = 2.25 times the Poisson variance and 5 standard deviations.
        let sd = (2.25 * expected).sqrt();
        assert!(
            (first_second as f64 - expected).abs() < 5.0 * sd,
            "{first_second} in first seconds, expected {expected} +- {}",
            5.0 * sd
        );
        // And the whole run: 120 windows at 0.1 or 0.3 ... computed from the fits.
        let expected_total = set.expected_requests(1.0);
        assert!(
            (expected_total
                - (1..=200)
                    .map(|w| 50.0 * 600.0 * rate_of(w - 1))
                    .sum::<f64>())
            .abs()
                < 1e-6
        );
        assert!(
            (total as f64 - expected_total).abs() < 5.0 * (2.25 * expected_total).sqrt(),
            "{total} vs {expected_total}"
        );
    }

    #[test]
    fn rate_scale_multiplies_every_rate() {
        let client = vec![Piece {
            start: 0.0,
            end: 10_000.0,
            gap: Some(Gap::Weibull {
                shape: 0.5,
                scale: 1.0,
            }),
        }];
        let set = Arc::new(ServeGen {
            name: "test".into(),
            clients: vec![client],
        });
        // Mean gap scale * Γ(3) = 2 s: 5,000 requests; scaled by 4: 20,000. The Weibull(0.5)
        // gap has cv sqrt(24 - 4) / 2 = 2.24, so the count's sd is about 2.24 * sqrt(n):
        // 5 sd = 1,584 at 20,000.
        assert_eq!(set.expected_requests(4.0), 20_000.0);
        let n = arrivals(set, 4.0, 1).count() as f64;
        assert!((n - 20_000.0).abs() < 1_584.0, "{n}");
    }
}
