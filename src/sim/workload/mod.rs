//! Workloads beyond a single request trace: what requests arrive.
//!
//! - [`superpose`]: K independent copies of a request trace, circularly shifted and merged.
//! - [`rate_series`]: a CSV of the request rate over time (`t_seconds,rate_per_s[,cv]`), or a
//!   metric source's history in `prewarm backtest`.
//! - [`servegen`]: a ServeGen client directory (per client and 600 s window an inter-arrival fit).
//!
//! [`workloads`] turns what a run asks for (a trace, a scenario, the shipped traces) into its
//! workloads. Inputs are recognised by content ([`detect`]). Rate inputs carry no token lengths; they are
//! sampled from a request trace ([`tokens`]). Every stream is generated lazily, in time order,
//! so a 14-day ServeGen run (about 250 M requests) never sits in memory.

pub mod merge;
pub mod rate_series;
pub mod renewal;
pub mod requests;
pub mod servegen;
pub mod superpose;
pub mod tokens;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::checks::config_error;
use super::history::HistoryRow;
use super::model::Model;
use super::scenario::{Scenario, ScenarioKind};
use super::trace::{self, TraceError, TraceRecord};
use rate_series::RateSeries;
use servegen::ServeGen;
use tokens::TokenPool;

/// Where requests come from.
#[derive(Clone, Debug)]
pub enum Source {
    Trace(PathBuf),
    Scenario(Scenario),
    /// A metrics history (backtest): every request gets the same service time.
    History {
        rows: Vec<HistoryRow>,
        service_s: f64,
    },
    /// A rate series (a rate CSV, or a metric source's history): renewal arrivals, sampled tokens.
    Rates(Arc<RateSeries>),
    /// A ServeGen client directory: per-client renewal arrivals merged, sampled tokens.
    ServeGen(Arc<ServeGen>),
}

/// A request source with its transforms.
#[derive(Clone, Debug)]
pub struct Workload {
    pub name: String,
    pub source: Source,
    pub speed: f64,
    pub scale: f64,
    pub seed: u64,
    /// Copies of a request trace, each shifted by a seeded random offset (1: the trace as is).
    pub superpose: u32,
    /// Multiplies every rate of a rate input.
    pub rate_scale: f64,
    /// The request trace rate inputs take token lengths from.
    pub tokens_from: Option<PathBuf>,
}

impl Workload {
    /// How many clients the requests are tagged with, for inputs that know them: a ServeGen
    /// directory's client files, the copies of a superposed trace (each copy one tenant).
    /// None: the requests carry no client (one class).
    pub fn clients(&self) -> Option<usize> {
        match &self.source {
            Source::ServeGen(set) => Some(set.clients.len()),
            Source::Trace(_) if self.superpose > 1 => Some(self.superpose as usize),
            _ => None,
        }
    }
}

/// The trace rate inputs take token lengths from unless told otherwise.
pub const DEFAULT_TOKENS_FILE: &str = "AzureLLMInferenceTrace_conv.csv";

/// What a `--trace` path holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// One row per request (Azure CSV, Mooncake JSONL).
    RequestTrace,
    /// `t_seconds,rate_per_s[,cv]`.
    RateCsv,
    /// A directory of `chunk-N-trace.csv` client files.
    ServeGen,
}

/// Recognises an input by its content: a directory of ServeGen client files, a CSV starting with
/// the rate-series header, or else a request trace (format by extension, as before).
pub fn detect(path: &Path) -> Result<InputKind, TraceError> {
    if path.is_dir() {
        return if servegen::client_files(path).is_empty() {
            Err(TraceError::Format {
                path: path.display().to_string(),
                message: "a directory input must hold ServeGen client files chunk-N-trace.csv"
                    .into(),
            })
        } else {
            Ok(InputKind::ServeGen)
        };
    }
    if rate_series::is_rate_csv(path) {
        return Ok(InputKind::RateCsv);
    }
    Ok(InputKind::RequestTrace)
}

/// Where rate inputs find token lengths by default: `AzureLLMInferenceTrace_conv.csv` in
/// `trace_dir`, beside the input, or beside the input's directory (a ServeGen directory sits in
/// the shipped traces folder).
pub fn default_tokens_file(input: &Path, trace_dir: Option<&Path>) -> Option<PathBuf> {
    let beside = input.parent().map(Path::to_path_buf);
    let above = input.parent().and_then(Path::parent).map(Path::to_path_buf);
    trace_dir
        .map(Path::to_path_buf)
        .into_iter()
        .chain(input.is_dir().then(|| input.to_path_buf()))
        .chain(beside)
        .chain(above)
        .map(|d| d.join(DEFAULT_TOKENS_FILE))
        .find(|p| p.is_file())
}

type Records = Box<dyn Iterator<Item = Result<TraceRecord, TraceError>> + Send>;

/// The records of a superposed trace, a rate series or a ServeGen directory (the sources
/// `compare` does not read itself).
pub fn records(w: &Workload) -> Result<Records, TraceError> {
    match &w.source {
        Source::Trace(path) => {
            let base: Vec<TraceRecord> = trace::open(path)?.collect::<Result<_, _>>()?;
            Ok(Box::new(
                superpose::superpose(Arc::new(base), w.superpose.max(1), w.seed).map(Ok),
            ))
        }
        Source::Rates(series) => {
            let series = series.clone();
            let pieces: Vec<_> = series.pieces(w.rate_scale).collect();
            let rng = ChaCha8Rng::seed_from_u64(w.seed);
            let times = renewal::Renewal::new(pieces.into_iter(), rng).map(|t| (t, 0));
            with_tokens(times, token_pool(w)?, w.seed)
        }
        Source::ServeGen(set) => {
            let times =
                servegen::arrivals(set.clone(), w.rate_scale, w.seed).map(|r| (r.t, r.client));
            with_tokens(times, token_pool(w)?, w.seed)
        }
        Source::Scenario(_) | Source::History { .. } => Err(TraceError::Format {
            path: w.name.clone(),
            message: "a scenario or metrics history is not a generated workload".into(),
        }),
    }
}

fn token_pool(w: &Workload) -> Result<TokenPool, TraceError> {
    let path = w.tokens_from.as_deref().ok_or_else(|| TraceError::Format {
        path: w.name.clone(),
        message: format!(
            "a rate input carries no token lengths: give --tokens-from TRACE (default \
             {DEFAULT_TOKENS_FILE} in --trace-dir or beside the input)"
        ),
    })?;
    TokenPool::load(path)
}

/// Arrival times (with their clients) and token pairs drawn from the pool (its own seeded
/// stream).
fn with_tokens(
    times: impl Iterator<Item = (f64, u32)> + Send + 'static,
    pool: TokenPool,
    seed: u64,
) -> Result<Records, TraceError> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(0x70_6b_65_6e);
    Ok(Box::new(times.map(move |(t, client)| {
        let (input_tokens, output_tokens) = pool.sample(&mut rng);
        Ok(TraceRecord {
            t,
            input_tokens,
            output_tokens,
            client,
        })
    })))
}

/// What a run asks for, as plain values (the workload flags of `prewarm simulate`).
#[derive(Clone, Copy, Debug)]
pub struct Asked<'a> {
    pub trace: Option<&'a Path>,
    pub scenario: Option<ScenarioKind>,
    /// The directory of the shipped traces, when all of them are asked for.
    pub all_shipped: Option<&'a Path>,
    pub seed: u64,
    pub speed: f64,
    pub scale: f64,
    /// Prompt and generated tokens of every scenario request.
    pub input_tokens: u32,
    pub output_tokens: u32,
    /// Days of the multi-day scenarios.
    pub days: u32,
    pub superpose: u32,
    pub rate_scale: f64,
}

/// Requests per second that keep one pod at the HPA target with the scenario's requests.
pub fn rate_per_pod(m: &Model, input: u32, output: u32) -> f64 {
    m.slots_per_replica as f64 * m.hpa.target_utilization / m.service_time(input, output)
}

/// The workloads `args` names, for `model` (a scenario's requests come from the seed only);
/// `trace` makes the workload of a trace path.
pub fn workloads(
    args: &Asked,
    model: &Model,
    trace: impl Fn(PathBuf) -> crate::Result<Workload>,
) -> crate::Result<Vec<Workload>> {
    let multi_day =
        |kind: ScenarioKind| matches!(kind, ScenarioKind::Diurnal | ScenarioKind::CronBursts);
    let scenario = |kind: ScenarioKind| Workload {
        name: if multi_day(kind) {
            format!("{} {}d", kind.name(), args.days)
        } else {
            kind.name().to_string()
        },
        source: Source::Scenario(Scenario {
            kind,
            seed: args.seed,
            rate_per_pod: rate_per_pod(model, args.input_tokens, args.output_tokens),
            input_tokens: args.input_tokens,
            output_tokens: args.output_tokens,
            days: args.days,
        }),
        speed: args.speed,
        scale: args.scale,
        seed: args.seed,
        superpose: 1,
        rate_scale: 1.0,
        tokens_from: None,
    };
    if let Some(dir) = args.all_shipped {
        let mut out = Vec::new();
        for file in [
            "AzureLLMInferenceTrace_conv.csv",
            "AzureLLMInferenceTrace_code.csv",
            "mooncake_synthetic_trace.jsonl",
        ] {
            let path = dir.join(file);
            if !path.is_file() {
                return Err(config_error(
                    "--trace-dir",
                    format!("{} not found", path.display()),
                ));
            }
            out.push(trace(path)?);
        }
        out.push(scenario(ScenarioKind::Burst180));
        return Ok(out);
    }
    match (args.trace, args.scenario) {
        (Some(path), None) => Ok(vec![trace(path.to_path_buf())?]),
        (None, Some(kind)) => {
            if args.superpose > 1 || args.rate_scale != 1.0 {
                return Err(config_error(
                    "--superpose",
                    "--superpose and --rate-scale apply to --trace inputs, not scenarios",
                ));
            }
            Ok(vec![scenario(kind)])
        }
        _ => Err(config_error(
            "--trace",
            "give --trace FILE, --scenario NAME or --all-shipped --trace-dir DIR",
        )),
    }
}
