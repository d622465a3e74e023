//! Request traces, read as streams so large files never sit in memory.
//!
//! Two public formats (see ../shared/traces/README.md for sources and licences):
//! - Azure LLM inference trace 2023: CSV `TIMESTAMP,ContextTokens,GeneratedTokens`, timestamps
//!   like `2023-11-16 18:17:03.9799600` (UTC, up to 7 fractional digits).
//! - Mooncake (FAST'25) JSONL: `{"timestamp": <ms from start>, "input_length", "output_length", ...}`.
//!
//! Every record becomes a [`TraceRecord`] with its arrival in seconds from the first record.
//! A bad line stops the read with an error naming the file, the line number and the cause.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

/// One request of a trace: when it arrived and how many tokens it carried.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TraceRecord {
    /// Seconds since the first request of the trace.
    pub t: f64,
    pub input_tokens: u32,
    pub output_tokens: u32,
    /// The client that sent it, for inputs that know their clients (a ServeGen directory's
    /// client file, a superposed copy; the workload names its clients); 0 otherwise.
    pub client: u32,
}

/// Why a trace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} line {line}: {message}")]
    Line {
        path: String,
        line: usize,
        message: String,
    },
    #[error("{path}: {message}")]
    Format { path: String, message: String },
}

impl TraceError {
    /// A read error of the file `path`, for `map_err`.
    pub fn io(path: &str) -> impl FnOnce(std::io::Error) -> TraceError + '_ {
        move |source| TraceError::Io {
            path: path.to_string(),
            source,
        }
    }

    /// The error at a line of the file `path`, for a parser to call with the line number.
    pub fn at(path: &str) -> impl Fn(usize, String) -> TraceError + '_ {
        move |line, message| TraceError::Line {
            path: path.to_string(),
            line,
            message,
        }
    }
}

/// The lines of a file read whole, numbered from 1; a read error names the file.
pub fn numbered_lines<'a>(
    reader: impl BufRead + 'a,
    name: &'a str,
) -> impl Iterator<Item = Result<(usize, String), TraceError>> + 'a {
    (1..)
        .zip(reader.lines())
        .map(move |(n, line)| line.map(|l| (n, l)).map_err(TraceError::io(name)))
}

/// Opens `path` and reads it with `read`, whose errors then name the file.
pub fn read_path<T>(
    path: &Path,
    read: impl FnOnce(BufReader<File>, &str) -> Result<T, TraceError>,
) -> Result<T, TraceError> {
    let name = path.display().to_string();
    let file = File::open(path).map_err(TraceError::io(&name))?;
    read(BufReader::new(file), &name)
}

/// The file formats the simulator reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceFormat {
    AzureCsv,
    MooncakeJsonl,
}

impl TraceFormat {
    /// Picks the format from the file name: `.csv` is Azure, `.jsonl`/`.json` is Mooncake.
    pub fn from_path(path: &Path) -> Result<Self, TraceError> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("csv") => Ok(TraceFormat::AzureCsv),
            Some("jsonl") | Some("json") => Ok(TraceFormat::MooncakeJsonl),
            _ => Err(TraceError::Format {
                path: path.display().to_string(),
                message: "unknown trace format: expected .csv (Azure) or .jsonl (Mooncake)".into(),
            }),
        }
    }
}

/// A streaming reader over one trace file (or any `BufRead`, for tests).
pub struct TraceReader<R> {
    lines: std::io::Lines<R>,
    format: TraceFormat,
    name: String,
    line_no: usize,
    origin: Option<f64>,
    last_t: f64,
}

/// Opens a trace file in the format its name says.
pub fn open(path: &Path) -> Result<TraceReader<BufReader<File>>, TraceError> {
    let format = TraceFormat::from_path(path)?;
    let file = File::open(path).map_err(TraceError::io(&path.display().to_string()))?;
    Ok(TraceReader::new(
        BufReader::with_capacity(1 << 16, file),
        format,
        path.display().to_string(),
    ))
}

impl<R: BufRead> TraceReader<R> {
    pub fn new(reader: R, format: TraceFormat, name: impl Into<String>) -> Self {
        TraceReader {
            lines: reader.lines(),
            format,
            name: name.into(),
            line_no: 0,
            origin: None,
            last_t: f64::NEG_INFINITY,
        }
    }

    fn error(&self, message: impl Into<String>) -> TraceError {
        TraceError::Line {
            path: self.name.clone(),
            line: self.line_no,
            message: message.into(),
        }
    }

    /// Parses one non-empty line; `None` for a header line.
    fn parse(&self, line: &str) -> Result<Option<(f64, u32, u32)>, TraceError> {
        match self.format {
            TraceFormat::AzureCsv => {
                if self.line_no == 1 && line.starts_with("TIMESTAMP") {
                    return Ok(None);
                }
                let mut fields = line.split(',');
                let (Some(ts), Some(ctx), Some(gen), None) =
                    (fields.next(), fields.next(), fields.next(), fields.next())
                else {
                    return Err(self.error(
                        "expected 3 comma-separated fields TIMESTAMP,ContextTokens,GeneratedTokens",
                    ));
                };
                let t = parse_azure_timestamp(ts.trim())
                    .ok_or_else(|| self.error(format!("bad TIMESTAMP {ts:?}")))?;
                let input =
                    parse_tokens(ctx).map_err(|m| self.error(format!("ContextTokens {m}")))?;
                let output =
                    parse_tokens(gen).map_err(|m| self.error(format!("GeneratedTokens {m}")))?;
                Ok(Some((t, input, output)))
            }
            TraceFormat::MooncakeJsonl => {
                let value: serde_json::Value =
                    serde_json::from_str(line).map_err(|e| self.error(format!("not JSON: {e}")))?;
                let field = |name: &str| {
                    value
                        .get(name)
                        .and_then(|v| v.as_f64())
                        .filter(|v| v.is_finite() && *v >= 0.0)
                        .ok_or_else(|| {
                            self.error(format!("missing or invalid non-negative number {name:?}"))
                        })
                };
                let t_ms = field("timestamp")?;
                let input = field("input_length")?;
                let output = field("output_length")?;
                if input > u32::MAX as f64 || output > u32::MAX as f64 {
                    return Err(self.error("token count too large"));
                }
                Ok(Some((t_ms / 1000.0, input as u32, output as u32)))
            }
        }
    }
}

fn parse_tokens(field: &str) -> Result<u32, String> {
    field
        .trim()
        .parse::<u32>()
        .map_err(|_| format!("{:?} is not a non-negative integer", field.trim()))
}

/// `2023-11-16 18:17:03.9799600` (or with a `T`) to seconds since the Unix epoch, UTC.
pub fn parse_azure_timestamp(ts: &str) -> Option<f64> {
    let ts = ts.replace('T', " ");
    let (date_time, frac) = match ts.split_once('.') {
        Some((dt, frac)) => (dt.to_string(), frac.to_string()),
        None => (ts.clone(), String::new()),
    };
    let naive = chrono::NaiveDateTime::parse_from_str(&date_time, "%Y-%m-%d %H:%M:%S").ok()?;
    let secs = naive.and_utc().timestamp() as f64;
    let frac = if frac.is_empty() {
        0.0
    } else {
        if !frac.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        format!("0.{frac}").parse::<f64>().ok()?
    };
    Some(secs + frac)
}

impl<R: BufRead> Iterator for TraceReader<R> {
    type Item = Result<TraceRecord, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let line = match self.lines.next()? {
                Ok(line) => line,
                Err(e) => return Some(Err(TraceError::io(&self.name)(e))),
            };
            self.line_no += 1;
            if line.trim().is_empty() {
                continue;
            }
            let parsed = match self.parse(line.trim_end_matches('\r')) {
                Ok(Some(parsed)) => parsed,
                Ok(None) => continue,
                Err(e) => return Some(Err(e)),
            };
            let (abs_t, input, output) = parsed;
            let origin = *self.origin.get_or_insert(abs_t);
            let t = abs_t - origin;
            // The simulator consumes arrivals in order; a trace out of order is a broken file,
            // not something to sort silently.
            if t < self.last_t {
                return Some(Err(self.error(format!(
                    "timestamp goes backwards ({:.3} s after the previous request)",
                    t - self.last_t
                ))));
            }
            self.last_t = t;
            return Some(Ok(TraceRecord {
                t,
                input_tokens: input,
                output_tokens: output,
                client: 0,
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(format: TraceFormat, text: &str) -> Vec<Result<TraceRecord, TraceError>> {
        TraceReader::new(text.as_bytes(), format, "snippet").collect()
    }

    #[test]
    fn azure_timestamps_keep_sub_second_precision() {
        let a = parse_azure_timestamp("2023-11-16 18:17:03.9799600").unwrap();
        let b = parse_azure_timestamp("2023-11-16 18:17:04.0319600").unwrap();
        assert!((b - a - 0.052).abs() < 1e-6);
        // 2023-11-16T00:00:00Z is 1700092800 (19677 days after the epoch).
        assert_eq!(
            parse_azure_timestamp("2023-11-16 00:00:00"),
            Some(19677.0 * 86400.0)
        );
        assert_eq!(parse_azure_timestamp("2023-11-16 00:00:00.x"), None);
        assert_eq!(parse_azure_timestamp("yesterday"), None);
    }

    #[test]
    fn azure_snippet_is_relative_to_the_first_request() {
        let text = "TIMESTAMP,ContextTokens,GeneratedTokens\n\
                    2023-11-16 18:17:03.5,4808,10\n\
                    \n\
                    2023-11-16 18:17:05.0,3180,8\r\n";
        let records: Vec<_> = read(TraceFormat::AzureCsv, text)
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(
            records,
            vec![
                TraceRecord {
                    t: 0.0,
                    input_tokens: 4808,
                    output_tokens: 10,
                    client: 0,
                },
                TraceRecord {
                    t: 1.5,
                    input_tokens: 3180,
                    output_tokens: 8,
                    client: 0,
                },
            ]
        );
    }

    #[test]
    fn azure_malformed_lines_name_the_line() {
        let cases = [
            ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.5,12\n", "line 2", "3 comma-separated"),
            ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.5,1,2\n2023-11-16 18:17:04,-3,2\n", "line 3", "ContextTokens"),
            ("TIMESTAMP,ContextTokens,GeneratedTokens\n16/11/2023,1,2\n", "line 2", "bad TIMESTAMP"),
            ("2023-11-16 18:17:05,1,2\n2023-11-16 18:17:04,1,2\n", "line 2", "backwards"),
        ];
        for (text, line, cause) in cases {
            let results = read(TraceFormat::AzureCsv, text);
            let error = results
                .into_iter()
                .find_map(|r| r.err())
                .unwrap_or_else(|| panic!("no error for {text:?}"))
                .to_string();
            assert!(error.contains(line) && error.contains(cause), "{error}");
            assert!(error.starts_with("snippet "), "{error}");
        }
    }

    #[test]
    fn mooncake_snippet_and_errors() {
        let text = "{\"timestamp\": 0, \"input_length\": 40160, \"output_length\": 6, \"hash_ids\": [0]}\n\
                    {\"timestamp\": 2500, \"input_length\": 10, \"output_length\": 1}\n";
        let records: Vec<_> = read(TraceFormat::MooncakeJsonl, text)
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(
            records[1],
            TraceRecord {
                t: 2.5,
                input_tokens: 10,
                output_tokens: 1,
                client: 0,
            }
        );

        let bad = [
            (
                "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n{\"timestamp\": 5,",
                "line 2",
                "not JSON",
            ),
            (
                "{\"timestamp\": 0, \"input_length\": 1}\n",
                "line 1",
                "output_length",
            ),
            (
                "{\"timestamp\": 0, \"input_length\": -4, \"output_length\": 1}\n",
                "line 1",
                "input_length",
            ),
        ];
        for (text, line, cause) in bad {
            let error = read(TraceFormat::MooncakeJsonl, text)
                .into_iter()
                .find_map(|r| r.err())
                .unwrap()
                .to_string();
            assert!(error.contains(line) && error.contains(cause), "{error}");
        }
    }

    #[test]
    fn format_follows_the_extension() {
        assert_eq!(
            TraceFormat::from_path(Path::new("a/b.csv")).unwrap(),
            TraceFormat::AzureCsv
        );
        assert_eq!(
            TraceFormat::from_path(Path::new("m.jsonl")).unwrap(),
            TraceFormat::MooncakeJsonl
        );
        assert!(TraceFormat::from_path(Path::new("m.parquet")).is_err());
    }
}
