//! Runs a list of comparisons: progress on stderr, the report (table or JSON) on stdout, the
//! plots and time series into files. Changes when what a run writes, or where, changes.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::checks::config_error;
use super::compare::{compare, Comparison};
use super::plot;
use super::report::print::print_comparison;
use super::setup::Setup;
use super::verdict::attribution;
use super::workload::Workload;

/// Where and how a run's results go, as plain values (the output flags).
#[derive(Clone, Debug, Default)]
pub struct Output {
    /// Print the comparisons as JSON instead of tables.
    pub json: bool,
    /// The plot of a single comparison.
    pub plot: Option<PathBuf>,
    /// One plot per comparison in this directory.
    pub plot_dir: Option<PathBuf>,
    /// Each comparison's time series as CSV in this directory.
    pub series_dir: Option<PathBuf>,
}

/// Runs the comparisons, prints them and writes the plots.
pub fn run_jobs(common: &Output, jobs: Vec<(Workload, Setup)>) -> crate::Result<()> {
    if common.plot.is_some() && jobs.len() > 1 {
        return Err(config_error(
            "--plot",
            "several comparisons: use --plot-dir DIR instead",
        ));
    }
    let pooled = jobs.iter().any(|(_, setup)| setup.models.is_some());
    if pooled
        && (common.json
            || common.plot.is_some()
            || common.plot_dir.is_some()
            || common.series_dir.is_some())
    {
        return Err(config_error(
            "--models",
            "the pool's comparison is a table only: leave out --json, --plot, --plot-dir and --series-dir",
        ));
    }
    for (flag, dir) in [
        ("--plot-dir", &common.plot_dir),
        ("--series-dir", &common.series_dir),
    ] {
        if let Some(dir) = dir {
            std::fs::create_dir_all(dir)
                .map_err(|e| config_error(flag, format!("{}: {e}", dir.display())))?;
        }
    }
    let bar =
        indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} {msg}: {human_pos} requests simulated ({per_sec})",
        )
        .expect("valid template"),
    );
    let mut results: Vec<Comparison> = Vec::new();
    for (workload, setup) in jobs {
        bar.set_message(format!(
            "{} (lead time {:.0} s)",
            workload.name,
            setup.lead_time_s()
        ));
        let started = Instant::now();
        let before = bar.position();
        let tick = |n: u64| bar.inc(n);
        let cmp = compare(&workload, &setup, &tick)
            .map_err(|e| config_error("--trace", e.to_string()))?;
        let elapsed = started.elapsed().as_secs_f64();
        let simulated = bar.position() - before;
        if !common.json {
            bar.suspend(|| print_comparison(&cmp, &setup, simulated, elapsed));
        }
        let plot_path = match (&common.plot, &common.plot_dir) {
            (Some(p), _) => Some(p.clone()),
            (None, Some(dir)) => Some(dir.join(plot_name(&cmp))),
            (None, None) => None,
        };
        if let Some(dir) = &common.series_dir {
            let path = dir.join(plot_name(&cmp).replace(".svg", ".csv"));
            write_series(&cmp, &path)
                .map_err(|e| config_error("--series-dir", format!("{}: {e}", path.display())))?;
        }
        if let Some(path) = plot_path {
            // The frontier is the plot; the time series of the reported points goes beside it.
            let timeline = sibling(&path, "timeline");
            plot::frontier::write_svg(&cmp, &path, attribution(&cmp.workload))
                .map_err(|e| config_error("--plot", e))?;
            plot::timeline::write_svg(&cmp, &timeline, attribution(&cmp.workload))
                .map_err(|e| config_error("--plot", e))?;
            let residual = sibling(&path, "residual");
            plot::residual::write_svg(&cmp, &residual, attribution(&cmp.workload))
                .map_err(|e| config_error("--plot", e))?;
            let waterfall = sibling(&path, "waterfall");
            plot::waterfall::write_svg(&cmp, &waterfall, attribution(&cmp.workload))
                .map_err(|e| config_error("--plot", e))?;
            if !common.json {
                bar.suspend(|| {
                    println!(
                        "plots: {} (frontiers), {} (time series), {} (the residual), {} (the GPU-hours by cause)\n",
                        path.display(),
                        timeline.display(),
                        residual.display(),
                        waterfall.display()
                    )
                });
            }
        }
        results.push(cmp);
    }
    bar.finish_and_clear();
    if common.json {
        let text = serde_json::to_string_pretty(&results).expect("comparison serialises");
        println!("{text}");
    }
    Ok(())
}

/// `NAME-what.svg` beside the plot `NAME.svg`.
fn sibling(path: &std::path::Path, what: &str) -> std::path::PathBuf {
    path.with_file_name(format!(
        "{}-{what}.svg",
        path.file_stem()
            .map_or("plot".into(), |s| s.to_string_lossy())
    ))
}

/// `policy,t,ready_gpus,serving_replicas,balloons,waiting,replicas,pending,cold_starts` for
/// every step of every policy (`cold_starts` cumulative from t = 0).
fn write_series(cmp: &Comparison, path: &Path) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(
        out,
        "policy,t,ready_gpus,serving_replicas,balloons,waiting,replicas,pending,cold_starts"
    )?;
    for (policy, series) in &cmp.plot.policies {
        for p in series {
            writeln!(
                out,
                "{policy},{},{},{},{},{},{},{},{}",
                p.t,
                p.ready_gpus,
                p.serving_replicas,
                p.balloons,
                p.waiting,
                p.replicas,
                p.pending,
                p.cold_starts
            )?;
        }
    }
    out.flush()
}

fn plot_name(cmp: &Comparison) -> String {
    // A plain file name loses its extension; a transformed one ("x.csv superposed x200")
    // becomes a slug, so two workloads of one trace get two files.
    let name = &cmp.workload;
    let plain = name
        .strip_suffix(".csv")
        .or_else(|| name.strip_suffix(".jsonl"));
    let stem: String = plain
        .unwrap_or(name)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("{stem}-lead{:.0}s.svg", cmp.lead_time_s)
}
