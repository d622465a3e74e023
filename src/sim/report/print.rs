//! The text report of one comparison as `prewarm simulate` and `backtest` print it: the table
//! and the lines around it. Changes when the printed layout changes.

use std::fmt::Write as _;

use super::PolicyReport;
use crate::core::policy::residual::Decomposition;
use crate::sim::classes::{Class, ClientClasses};
use crate::sim::compare::{Comparison, FrontierPoint, PoolReport};
use crate::sim::engine::LeadReport;
use crate::sim::setup::Setup;
use crate::sim::verdict::{attribution, verdict};

/// The table of one comparison, its frontiers, daily intervals, verdict and attribution; a
/// pool's its points. `simulated` requests in `elapsed` seconds.
pub fn print_comparison(cmp: &Comparison, setup: &Setup, simulated: u64, elapsed: f64) {
    if let Some(pool) = &cmp.pool {
        return print_pool(cmp, pool, setup, simulated, elapsed);
    }
    let requests = cmp.rows.first().map(|r| r.requests).unwrap_or(0);
    // prewarm told another lead time than the cluster's (--lead-time-hint): say so up front.
    let told = setup.prewarm_policy.lead_time_s;
    let hint = if (told - cmp.lead_time_s).abs() > 1e-9 {
        format!(", prewarm told {told:.0} s")
    } else {
        String::new()
    };
    // The rough world's pulls and loads are medians of draws: say so up front.
    let hint = if setup.world.is_exact() {
        hint
    } else {
        format!("{hint}; rough world, medians")
    };
    println!(
        "== {} - {:.1} h simulated, {} requests scored from t = {:.1} h; lead time {:.0} s (launch {:.0} + pull {:.0} + load {:.0}{hint}); SLO: wait <= {:.0} s for >= {:.2}% ==",
        cmp.workload,
        cmp.duration_s / 3600.0,
        requests,
        cmp.scored_from_s / 3600.0,
        cmp.lead_time_s,
        setup.karpenter.node_launch_s,
        setup.model.image_pull_s,
        setup.model.model_load_s,
        cmp.slo_wait_s,
        (1.0 - cmp.slo_fraction) * 100.0
    );
    match cmp.train_days {
        Some(d) => println!(
            "knobs chosen on days 0-{} (ideal peak {} replicas), scored on the rest",
            d - 1,
            cmp.training_peak_replicas
        ),
        None => println!(
            "knobs tuned IN HINDSIGHT on the scored requests themselves (use --train-days D for an honest split)"
        ),
    }
    print!("{}", table(&cmp.rows));
    for line in lead_lines(&cmp.rows) {
        println!("{line}");
    }
    if let Some(classes) = &cmp.classes {
        println!("{}", classes_line(classes));
        print!("{}", class_table(&cmp.rows));
    }
    let residuals: Vec<(String, &Decomposition)> = cmp
        .rows
        .iter()
        .filter_map(|r| r.residual.as_ref().map(|d| (r.policy.clone(), d)))
        .collect();
    if residuals.iter().any(|(_, d)| d.delayed() > 0) {
        println!(
            "the delayed requests, decomposed at the {:.0} s lead (docs/simulator.md#the-residual-decomposed):",
            cmp.lead_time_s
        );
        print!("{}", residual_table(&residuals));
        if cmp.classes.is_some() {
            print!("{}", residual_class_table(&cmp.rows));
        }
    }
    for (policy, points) in &cmp.frontiers {
        let text: Vec<String> = points
            .iter()
            .map(|p| {
                format!(
                    "{}{}: {:.1} GPU-h {:.3}%",
                    p.knob,
                    p.release
                        .map(|r| r.label())
                        .or(p.slots.map(|s| s.label()))
                        .map_or(String::new(), |v| format!(" {v}")),
                    p.gpu_hours,
                    p.delayed_fraction * 100.0
                )
            })
            .collect();
        println!(
            "frontier {policy} ({}): {}",
            cmp.knobs.get(policy).map_or("", String::as_str),
            text.join("; ")
        );
    }
    for r in cmp.rows.iter().filter(|r| r.days.len() >= 2) {
        if let (Some(d), Some(g)) = (r.delayed_fraction_ci95, r.gpu_hours_per_day_ci95) {
            println!(
                "{} over {} days: delayed {:.3}%..{:.3}% (95% interval of the daily mean), GPU-h/day {:.1}..{:.1}",
                r.policy,
                r.days.len(),
                d.0 * 100.0,
                d.1 * 100.0,
                g.0,
                g.1
            );
        }
    }
    if let Some(verdict) = verdict(cmp) {
        println!("{verdict}");
    }
    println!("{}", attribution(&cmp.workload));
    println!("simulated in {elapsed:.2} s\n");
}

/// A pool's comparison (`--models`) as text: the chosen point of each policy, then every point.
fn print_pool(c: &Comparison, pool: &PoolReport, setup: &Setup, simulated: u64, elapsed: f64) {
    println!(
        "{}: {} models on one NodePool (training requests per model {:?}), lead time {:.0} s, seed {}",
        c.workload,
        pool.model_load.len(),
        pool.model_load,
        setup.lead_time_s(),
        setup.seed
    );
    let header = format!(
        "{:<14} {:>6} {:>9} {:>9} {:>8} {:>10} {:>6} {:>5} {:>9} {:>9}",
        "policy",
        "knob",
        "delayed %",
        "GPU-h",
        "node cs",
        "replica cs",
        "split",
        "warm",
        "train d %",
        "train GPU-h"
    );
    let line = |policy: &str, p: &FrontierPoint| {
        let train = p.training.expect("a pool's point has its training figures");
        let split = p.split.unwrap_or_default();
        println!(
            "{:<14} {:>6} {:>9.4} {:>9.1} {:>8} {:>10} {:>6.2} {:>5.2} {:>9.4} {:>9.1}",
            policy,
            p.knob,
            100.0 * p.delayed_fraction,
            p.gpu_hours,
            p.cold_starts,
            p.replica_cold_starts,
            split.share,
            split.mean_warm_nodes,
            100.0 * train.delayed_fraction,
            train.gpu_hours
        )
    };
    println!("chosen on the training days (scored days only):\n{header}");
    for (policy, i) in &pool.chosen {
        line(policy, &c.frontiers[policy][*i]);
    }
    println!("every point:\n{header}");
    for (policy, _) in &pool.chosen {
        c.frontiers[policy].iter().for_each(|p| line(policy, p));
    }
    println!("({simulated} requests simulated in {elapsed:.0} s)\n");
}

/// How many clients and training requests each class has, and the rule.
pub fn classes_line(c: &ClientClasses) -> String {
    let (ni, ri) = c.count(Class::Interactive);
    let (nb, rb) = c.count(Class::Batch);
    let share = |r: u64| 100.0 * r as f64 / (ri + rb).max(1) as f64;
    format!(
        "client classes (on {}): {ni} interactive ({:.1}% of the requests), {nb} batch-like ({:.1}%): request-weighted inter-arrival CV > {} or clump size > {}",
        c.on,
        share(ri),
        share(rb),
        c.thresholds.batch_cv,
        c.thresholds.batch_clump
    )
}

/// Per policy, the scored figures of each class beside the total (rows without per-class
/// figures, the packings, are left out).
pub fn class_table(rows: &[PolicyReport]) -> String {
    let mut header = vec!["policy".to_string()];
    for what in ["all", "interactive", "batch"] {
        header.push(format!("{what}: delayed"));
        header.push("p99 wait".into());
        header.push("cold replica".into());
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .filter(|r| !r.classes.is_empty())
        .map(|r| {
            let mut row = vec![
                r.policy.clone(),
                format!("{:.3}%", r.delayed_fraction * 100.0),
                format!("{:.1}s", r.p99_wait_s),
                r.replica_cold_starts.to_string(),
            ];
            for c in &r.classes {
                if c.requests == 0 {
                    // A class without scored requests has no share to show.
                    row.extend(["-".to_string(), "-".to_string(), "-".to_string()]);
                    continue;
                }
                row.push(format!("{:.3}%", c.delayed_fraction * 100.0));
                row.push(format!("{:.1}s", c.p99_wait_s));
                row.push(c.replica_cold_starts.to_string());
            }
            row
        })
        .collect();
    aligned(&header, &cells, 1)
}

/// The residual of each policy split by client class: one row per class with delayed
/// requests, each kind's count and its share of the class's delayed.
pub fn residual_class_table(rows: &[PolicyReport]) -> String {
    let header: Vec<String> = [
        "policy",
        "class",
        "delayed",
        "forecastable",
        "lead miss",
        "unforecastable",
    ]
    .map(String::from)
    .to_vec();
    let share = |n: u64, of: u64| format!("{n} ({:.0}%)", 100.0 * n as f64 / of.max(1) as f64);
    let cells: Vec<Vec<String>> = rows
        .iter()
        .flat_map(|r| {
            r.classes.iter().filter_map(|c| {
                let k = c.residual.filter(|k| k.delayed() > 0)?;
                let n = k.delayed();
                Some(vec![
                    r.policy.clone(),
                    c.class.label().to_string(),
                    n.to_string(),
                    share(k.forecastable, n),
                    share(k.lead_miss, n),
                    share(k.unforecastable, n),
                ])
            })
        })
        .collect();
    aligned(&header, &cells, 2)
}

/// Rows of cells as aligned text: the first `left` columns left-aligned, the rest right.
fn aligned(header: &[String], cells: &[Vec<String>], left: usize) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in cells {
        for (w, c) in widths.iter_mut().zip(row.iter()) {
            *w = (*w).max(c.len());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, row: &[String]| {
        for (i, (c, w)) in row.iter().zip(&widths).enumerate() {
            if i < left {
                let _ = write!(out, "{c:<w$}  ");
            } else {
                let _ = write!(out, "{c:>w$}  ");
            }
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
    };
    line(&mut out, header);
    for row in cells {
        line(&mut out, row);
    }
    out
}

/// The comparison as an aligned text table.
pub fn table(rows: &[PolicyReport]) -> String {
    let header = [
        "policy",
        "detail",
        "requests",
        "delayed",
        "p50 wait",
        "p99 wait",
        "p99 TTFT",
        "GPU-h",
        "serve/head/excess/drain/load/boot/balloon/empty %",
        "idle",
        "cold node/replica",
        "vs bound/slo-bound",
        "$/week",
    ];
    let pct = |v: f64, total: f64| if total > 0.0 { v / total * 100.0 } else { 0.0 };
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.policy.clone(),
                r.detail.clone(),
                r.requests.to_string(),
                format!("{:.3}%", r.delayed_fraction * 100.0),
                format!("{:.1}s", r.p50_wait_s),
                format!("{:.1}s", r.p99_wait_s),
                format!("{:.1}s", r.p99_ttft_s),
                format!("{:.1}", r.gpu_hours),
                r.waterfall
                    .parts()
                    .iter()
                    .map(|(_, v)| format!("{:.0}", pct(*v, r.gpu_hours)))
                    .collect::<Vec<_>>()
                    .join("/"),
                format!("{:.0}%", r.idle_share * 100.0),
                format!("{}/{}", r.cold_starts, r.replica_cold_starts),
                format!(
                    "{:.2}x/{:.2}x",
                    r.gpu_hours_vs_bound, r.gpu_hours_vs_slo_bound
                ),
                format!("{:.0}", r.usd_per_week),
            ]
        })
        .collect();
    aligned(&header, &cells, 2)
}

/// The residual of every row that delayed a request: its delayed requests by kind (share of
/// them), the training rise, and the constant reserve that removes the unforecastable part.
pub fn residual_table(rows: &[(String, &Decomposition)]) -> String {
    let header: Vec<String> = [
        "policy",
        "delayed",
        "forecastable",
        "lead miss",
        "unforecastable",
        "training rise",
        "reserve",
        "reserve GPU-h",
        "reserve $",
    ]
    .map(String::from)
    .to_vec();
    let cells: Vec<Vec<String>> = rows
        .iter()
        .filter(|(_, d)| d.delayed() > 0)
        .map(|(name, d)| {
            let (f, l, u) = d.shares();
            [
                name.clone(),
                d.delayed().to_string(),
                format!("{} ({:.0}%)", d.forecastable, f * 100.0),
                format!("{} ({:.0}%)", d.lead_miss, l * 100.0),
                format!("{} ({:.0}%)", d.unforecastable, u * 100.0),
                d.training_rise
                    .map_or("none".to_string(), |r| format!("{r:.2} req/s")),
                format!("{} replicas", d.reserve_replicas),
                format!("{:.1}", d.reserve_gpu_hours),
                format!("{:.0}", d.reserve_usd),
            ]
            .to_vec()
        })
        .collect();
    aligned(&header, &cells, 1)
}

/// One line per row that learned its lead time: the learned horizon of its last decision and
/// its phases, or the fallback and why.
pub fn lead_lines(rows: &[PolicyReport]) -> Vec<String> {
    rows.iter()
        .filter_map(|r| {
            Some(format!(
                "{} lead time: {}",
                r.policy,
                lead_text(r.lead_time.as_ref()?)
            ))
        })
        .collect()
}

fn lead_text(l: &LeadReport) -> String {
    let Some(last) = &l.last else {
        return format!("no decision (LEAD_TIME_SECONDS {:.0} s)", l.configured_s);
    };
    if let Some(why) = &last.fallback {
        return format!("never learned: {why}");
    }
    let phases: Vec<String> = last
        .phases
        .iter()
        .map(|p| {
            format!(
                "{} {:.0} s ({} samples)",
                p.phase.as_str(),
                p.seconds.unwrap_or(f64::NAN),
                p.samples
            )
        })
        .collect();
    let range = l.learned_range_s.map_or(String::new(), |(lo, hi)| {
        if lo < hi {
            format!(", {lo:.0}..{hi:.0} s over the run")
        } else {
            String::new()
        }
    });
    format!(
        "learned {:.0} s = p{:.0} of {} (rounded up to the step){range}; LEAD_TIME_SECONDS {:.0} s for the {} decisions before t = {:.1} h",
        last.seconds,
        l.quantile * 100.0,
        phases.join(" + "),
        l.configured_s,
        l.fallback_decisions,
        l.learned_from_s.unwrap_or(0.0) / 3600.0
    )
}

#[cfg(test)]
mod tests {
    use super::lead_text;
    use crate::core::lead::{Horizon, Phase, PhaseLead};
    use crate::sim::engine::LeadReport;

    fn phase(phase: Phase, scope: &str, samples: usize, seconds: Option<f64>) -> PhaseLead {
        PhaseLead {
            phase,
            scope: scope.into(),
            samples,
            seconds,
        }
    }

    #[test]
    fn the_lead_line_says_what_was_learned_or_why_not() {
        let learned = LeadReport {
            quantile: 0.9,
            configured_s: 60.0,
            last: Some(Horizon {
                seconds: 210.0,
                phases: vec![
                    phase(Phase::NodeBoot, "gpu", 12, Some(61.5)),
                    phase(Phase::ImagePull, "llm", 9, Some(109.0)),
                    phase(Phase::ModelLoad, "llm", 20, Some(30.0)),
                ],
                fallback: None,
            }),
            learned_from_s: Some(5400.0),
            fallback_decisions: 90,
            last_fallback: None,
            learned_range_s: Some((195.0, 210.0)),
        };
        assert_eq!(
            lead_text(&learned),
            "learned 210 s = p90 of node-boot 62 s (12 samples) + image-pull 109 s (9 samples) + \
             model-load 30 s (20 samples) (rounded up to the step), 195..210 s over the run; \
             LEAD_TIME_SECONDS 60 s for the 90 decisions before t = 1.5 h"
        );
        let never = LeadReport {
            last: Some(Horizon {
                seconds: 60.0,
                phases: Vec::new(),
                fallback: Some("LEAD_TIME_SECONDS (60 s) until ...".into()),
            }),
            learned_from_s: None,
            learned_range_s: None,
            ..learned
        };
        assert_eq!(
            lead_text(&never),
            "never learned: LEAD_TIME_SECONDS (60 s) until ..."
        );
    }
}
