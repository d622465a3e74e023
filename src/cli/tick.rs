//! `prewarm tick [--once] [--dry-run] [--json]`: the Lambda's tick from a terminal, with the same
//! code (`handlers::tick::tick_once`), configured by the same environment variables. Prints one
//! row per target (or the full reports as JSON). Without `--once` it ticks every TICK_SECONDS
//! until interrupted.

use std::sync::Arc;
use std::time::Duration;

use crate::clock::unix_now;
use crate::config::Config;
use crate::handlers::tick::{tick_once, TargetReport, TickDeps};

#[derive(Debug, clap::Args)]
pub struct TickArgs {
    /// Run one decision and exit.
    #[arg(long)]
    pub once: bool,
    /// Compute and log the plans, write nothing (also DRY_RUN=true).
    #[arg(long)]
    pub dry_run: bool,
    /// Print the reports as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

fn cell(v: Option<impl ToString>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

fn rate(v: Option<f64>) -> String {
    v.filter(|v| v.is_finite())
        .map_or_else(|| "-".to_string(), |v| format!("{v:.2}"))
}

/// The table: one row per target.
pub fn render_table(reports: &[TargetReport]) -> String {
    let header = [
        "TARGET", "ACTION", "CURRENT", "DESIRED", "SIZE", "OBSERVED", "FORECAST", "PENDING",
        "HEADROOM", "NODEPOOL", "REASON",
    ];
    let rows: Vec<[String; 11]> = reports
        .iter()
        .map(|r| {
            let plan = r.plan.as_ref();
            let size = match (r.size_before, r.size_after) {
                (Some(b), Some(a)) if a != b => format!("{b}->{a}"),
                (Some(b), _) => b.to_string(),
                _ => "-".into(),
            };
            [
                r.target.clone(),
                r.action(),
                cell(plan.map(|p| p.current_spare)),
                cell(plan.map(|p| p.desired_spare)),
                size,
                rate(plan.map(|p| p.forecast.observed_rate)),
                rate(plan.map(|p| p.forecast.rate_at_horizon)),
                r.pending_pods.to_string(),
                cell(r.headroom.as_deref()),
                cell(r.node_pool.as_deref()),
                r.reason(),
            ]
        })
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let n = cells.len();
        cells
            .into_iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if i + 1 == n {
                    c.to_string()
                } else {
                    format!("{c:<w$}")
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
    };
    let mut out = line(header.to_vec());
    for row in &rows {
        out.push('\n');
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

fn print(reports: &[TargetReport], json: bool) {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(reports).expect("reports serialise")
        );
    } else {
        println!("{}", render_table(reports));
    }
}

pub async fn run(args: TickArgs) -> crate::Result<()> {
    let config = Config::from_env()?;
    let dry_run = config.dry_run || args.dry_run;
    let tick_s = config.policy.tick_s;
    let deps = Arc::new(Box::pin(TickDeps::build(config)).await?);
    loop {
        let reports = Box::pin(tick_once(&deps, unix_now(), dry_run)).await;
        print(&reports, args.json);
        if args.once {
            // One-shot runs report failure through the exit code, for scripts.
            if let Some(r) = reports.iter().find(|r| r.error.is_some()) {
                return Err(crate::Error::kube(
                    "tick",
                    format!("target {}", r.target),
                    r.error.clone().unwrap_or_default(),
                    r.retryable.unwrap_or(false),
                ));
            }
            return Ok(());
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs_f64(tick_s)) => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_a_row_per_target_with_aligned_columns() {
        let ok: TargetReport = serde_json::from_value(serde_json::json!({
            "target": "llama", "dry_run": true, "plan": null, "pending_pods": 2,
            "serving_replicas": 3, "metrics_problem": null, "headroom": "dry_run",
            "size_before": 1, "size_after": 4, "node_pool": "unchanged", "skipped": null,
            "error": null, "error_kind": null, "retryable": null
        }))
        .unwrap();
        let failed: TargetReport = serde_json::from_value(serde_json::json!({
            "target": "mistral-7b", "dry_run": true, "plan": null, "pending_pods": 0,
            "serving_replicas": null, "metrics_problem": null, "headroom": null,
            "size_before": null, "size_after": null, "node_pool": null, "skipped": null,
            "error": "NodePool gpu2 not found", "error_kind": "not_found", "retryable": false
        }))
        .unwrap();
        let table = render_table(&[ok, failed]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("TARGET      ACTION"), "{table}");
        assert!(lines[1].starts_with("llama       "), "{table}");
        assert!(lines[1].contains("1->4"), "{table}");
        assert!(lines[2].starts_with("mistral-7b  error"), "{table}");
        assert!(lines[2].ends_with("NodePool gpu2 not found"), "{table}");
        let col = lines[0].find("NODEPOOL").unwrap();
        assert_eq!(&lines[1][col..col + 9], "unchanged");
    }
}
