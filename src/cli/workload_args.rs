//! The workload flags of `prewarm simulate` and how a `--trace` path becomes a
//! workload: a request trace (optionally superposed), a rate CSV or a ServeGen directory,
//! recognised by content (see `crate::sim::workload`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;

use crate::sim::checks::config_error;
use crate::sim::workload::{self, rate_series, servegen::ServeGen, InputKind};
use crate::sim::workload::{Source, Workload};

#[derive(Debug, Args)]
pub struct WorkloadArgs {
    /// Grow a request trace by K independent copies, each circularly shifted by a seeded random
    /// offset within the trace's span, merged in time order (the way to grow a trace; --scale
    /// clones requests and is only a stress case).
    #[arg(long, default_value_t = 1)]
    pub superpose: u32,
    /// Multiply every rate of a rate input (rate CSV, ServeGen directory, backtest history).
    #[arg(long, default_value_t = 1.0)]
    pub rate_scale: f64,
    /// Request trace that rate inputs take token lengths from (default:
    /// AzureLLMInferenceTrace_conv.csv in --trace-dir, beside the input or one level up).
    #[arg(long)]
    pub tokens_from: Option<PathBuf>,
    /// Days of the `diurnal` and `cron-bursts` scenarios (at natural speed).
    #[arg(long, default_value_t = 3)]
    pub days: u32,
}

/// A number for a workload name without a trailing `.0`.
fn num(v: f64) -> String {
    format!("{v}")
}

impl WorkloadArgs {
    pub fn validate(&self) -> crate::Result<()> {
        if self.superpose == 0 {
            return Err(config_error("--superpose", "must be at least 1"));
        }
        if !(self.rate_scale.is_finite() && self.rate_scale > 0.0) {
            return Err(config_error("--rate-scale", "must be a positive number"));
        }
        if self.days == 0 {
            return Err(config_error("--days", "must be at least 1"));
        }
        Ok(())
    }

    /// The token-length trace of a rate input: --tokens-from, or the default beside it.
    pub fn tokens_file(&self, input: &Path, trace_dir: Option<&Path>) -> crate::Result<PathBuf> {
        if let Some(p) = &self.tokens_from {
            return Ok(p.clone());
        }
        workload::default_tokens_file(input, trace_dir).ok_or_else(|| {
            config_error(
                "--tokens-from",
                format!(
                    "{} carries no token lengths and no {} was found in --trace-dir or beside it",
                    input.display(),
                    workload::DEFAULT_TOKENS_FILE
                ),
            )
        })
    }

    /// The workload of a `--trace` path, by its content. `scale` (cloning) is kept as a stress
    /// case and says so in the name.
    pub fn for_path(
        &self,
        path: &Path,
        speed: f64,
        scale: f64,
        seed: u64,
        trace_dir: Option<&Path>,
    ) -> crate::Result<Workload> {
        self.validate()?;
        let file_name = path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        let kind = workload::detect(path).map_err(|e| config_error("--trace", e.to_string()))?;
        let mut name = file_name;
        let mut tokens_from = None;
        let source = match kind {
            InputKind::RequestTrace => {
                if self.rate_scale != 1.0 {
                    return Err(config_error(
                        "--rate-scale",
                        "applies to rate inputs; grow a request trace with --superpose",
                    ));
                }
                if self.superpose > 1 {
                    name.push_str(&format!(" superposed x{}", self.superpose));
                }
                Source::Trace(path.to_path_buf())
            }
            InputKind::RateCsv | InputKind::ServeGen => {
                if self.superpose > 1 {
                    return Err(config_error(
                        "--superpose",
                        "applies to request traces; scale a rate input with --rate-scale",
                    ));
                }
                tokens_from = Some(self.tokens_file(path, trace_dir)?);
                if self.rate_scale != 1.0 {
                    name.push_str(&format!(" rate x{}", num(self.rate_scale)));
                }
                if kind == InputKind::ServeGen {
                    let set = ServeGen::read_dir(path)
                        .map_err(|e| config_error("--trace", e.to_string()))?;
                    Source::ServeGen(Arc::new(set))
                } else {
                    let series = rate_series::read_file(path)
                        .map_err(|e| config_error("--trace", e.to_string()))?;
                    Source::Rates(Arc::new(series))
                }
            }
        };
        if scale != 1.0 {
            name.push_str(&format!(" cloned x{} (stress case)", num(scale)));
        }
        Ok(Workload {
            name,
            source,
            speed,
            scale,
            seed,
            superpose: self.superpose,
            rate_scale: self.rate_scale,
            tokens_from,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(superpose: u32, rate_scale: f64) -> WorkloadArgs {
        WorkloadArgs {
            superpose,
            rate_scale,
            tokens_from: None,
            days: 3,
        }
    }

    /// A folder with a request trace, a rate series (named .txt: content decides) and a
    /// ServeGen directory beside the default token trace.
    fn inputs() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let azure = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.5,100,10\n\
                     2023-11-16 18:17:05.0,200,20\n";
        std::fs::write(dir.path().join(workload::DEFAULT_TOKENS_FILE), azure).unwrap();
        std::fs::write(
            dir.path().join("rates.txt"),
            "t_seconds,rate_per_s\n0,1\n60,2\n",
        )
        .unwrap();
        let sg = dir.path().join("sg");
        std::fs::create_dir(&sg).unwrap();
        std::fs::write(
            sg.join("chunk-3-trace.csv"),
            "0,1,1,Gamma,1,1\n600,0,0,,0,0\n",
        )
        .unwrap();
        dir
    }

    #[test]
    fn inputs_are_recognised_by_content_and_named_by_their_transform() {
        let dir = inputs();
        let p = dir.path();
        let trace = p.join(workload::DEFAULT_TOKENS_FILE);
        let w = args(200, 1.0).for_path(&trace, 1.0, 1.0, 1, None).unwrap();
        assert!(matches!(w.source, Source::Trace(_)));
        assert_eq!(w.name, "AzureLLMInferenceTrace_conv.csv superposed x200");
        let w = args(1, 1.0).for_path(&trace, 1.0, 50.0, 1, None).unwrap();
        assert_eq!(
            w.name,
            "AzureLLMInferenceTrace_conv.csv cloned x50 (stress case)"
        );
        let w = args(1, 0.25)
            .for_path(&p.join("rates.txt"), 1.0, 1.0, 1, None)
            .unwrap();
        assert!(matches!(w.source, Source::Rates(_)));
        assert_eq!(w.name, "rates.txt rate x0.25");
        // Token lengths default to the conversation trace beside the input.
        assert_eq!(w.tokens_from.as_deref(), Some(trace.as_path()));
        let w = args(1, 1.0)
            .for_path(&p.join("sg"), 1.0, 1.0, 1, None)
            .unwrap();
        let Source::ServeGen(set) = &w.source else {
            panic!("{:?}", w.source)
        };
        assert_eq!(set.clients.len(), 1);
        assert_eq!(w.tokens_from.as_deref(), Some(trace.as_path()));
    }

    #[test]
    fn transforms_on_the_wrong_input_name_the_flag() {
        let dir = inputs();
        let p = dir.path();
        let trace = p.join(workload::DEFAULT_TOKENS_FILE);
        let cases: [(WorkloadArgs, PathBuf, &str); 5] = [
            (args(1, 2.0), trace.clone(), "--rate-scale"),
            (args(4, 1.0), p.join("rates.txt"), "--superpose"),
            (args(4, 1.0), p.join("sg"), "--superpose"),
            (args(0, 1.0), trace.clone(), "--superpose"),
            (args(1, 1.0), p.to_path_buf(), "--trace"),
        ];
        for (a, path, flag) in cases {
            let e = a
                .for_path(&path, 1.0, 1.0, 1, None)
                .unwrap_err()
                .to_string();
            assert!(e.contains(flag), "{path:?}: {e}");
        }
        // No token trace anywhere near: the error says which flag to give.
        let lone = tempfile::tempdir().unwrap();
        let rates = lone.path().join("in").join("r.csv");
        std::fs::create_dir(rates.parent().unwrap()).unwrap();
        std::fs::write(&rates, "t_seconds,rate_per_s\n0,1\n60,2\n").unwrap();
        let e = args(1, 1.0)
            .for_path(&rates, 1.0, 1.0, 1, None)
            .unwrap_err();
        assert!(e.to_string().contains("--tokens-from"), "{e}");
    }
}
