//! The frontier picture a user decides from: for every policy with a knob, the curve of
//! (GPU-hours, delayed share) over its grid, with the policies without a knob as points, on one
//! SVG with a log delay axis. A delayed share of 0 is drawn at the axis floor. With client
//! classes, each curve has a dashed twin for the interactive clients' delayed share at the same
//! GPU-hours (and each point a hollow twin), beside the total, never instead of it. The lower
//! bounds are dashed vertical lines. Changes when that picture does.

use std::path::Path;

use plotters::prelude::*;

use super::COLORS;
use crate::sim::classes::Class;
use crate::sim::compare::Comparison;
use crate::sim::report::ClassReport;

/// The interactive class's delayed share among a row's or point's per-class figures (None
/// when the class had no scored request: no share to draw).
fn interactive(classes: &[ClassReport]) -> Option<f64> {
    classes
        .iter()
        .find(|c| c.class == Class::Interactive && c.requests > 0)
        .map(|c| c.delayed_fraction)
}

/// Smallest delayed share drawn: one request in a million.
const FLOOR: f64 = 1e-6;

pub fn write_svg(cmp: &Comparison, path: &Path, attribution: &str) -> Result<(), String> {
    super::write_svg_with(path, (1000, 700), |root| draw(root, cmp, attribution))
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    cmp: &Comparison,
    attribution: &str,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let body = super::page_with_footer(root, 670, attribution)?;
    // The bounds are vertical lines: no point that delays nobody lies left of its bound.
    const BOUNDS: [&str; 2] = ["lower-bound", "slo-bound"];
    let points = cmp.rows.iter().filter(|r| {
        !cmp.frontiers.contains_key(&r.policy)
            && r.policy != "ideal"
            && !BOUNDS.contains(&r.policy.as_str())
    });
    let bounds = cmp
        .rows
        .iter()
        .filter(|r| BOUNDS.contains(&r.policy.as_str()));
    let all_x = cmp
        .frontiers
        .values()
        .flatten()
        .map(|p| p.gpu_hours)
        .chain(points.clone().map(|r| r.gpu_hours))
        .chain(bounds.clone().map(|r| r.gpu_hours));
    let (mut x0, mut x1) = (f64::INFINITY, 0.0f64);
    for x in all_x {
        x0 = x0.min(x);
        x1 = x1.max(x);
    }
    if !x0.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    let pad = (x1 - x0).max(1e-3) * 0.05;
    let title = format!(
        "{} - GPU-hours vs share of requests waiting > {:.0} s (lead time {:.0} s; {})",
        cmp.workload,
        cmp.slo_wait_s,
        cmp.lead_time_s,
        match cmp.train_days {
            Some(d) => format!("scored after {d} training days"),
            None => "knobs in hindsight".into(),
        }
    );
    let mut chart = ChartBuilder::on(&body)
        .margin(12)
        .caption(title, ("sans-serif", 17))
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((x0 - pad)..(x1 + pad), (FLOOR..1.0).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("GPU-hours (scored days)")
        .y_desc("delayed share (log)")
        .y_label_formatter(&|v| format!("{v:.0e}"))
        .draw()?;
    let y = |d: f64| d.max(FLOOR);
    for (i, (policy, curve)) in cmp.frontiers.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut sorted = curve.clone();
        sorted.sort_by(|a, b| a.gpu_hours.total_cmp(&b.gpu_hours));
        chart
            .draw_series(LineSeries::new(
                sorted.iter().map(|p| (p.gpu_hours, y(p.delayed_fraction))),
                color.stroke_width(2),
            ))?
            .label(format!(
                "{policy} ({})",
                cmp.knobs.get(policy).map_or("", String::as_str)
            ))
            .legend(move |(x, yy)| PathElement::new(vec![(x, yy), (x + 16, yy)], color));
        chart.draw_series(
            sorted
                .iter()
                .map(|p| Circle::new((p.gpu_hours, y(p.delayed_fraction)), 3, color.filled())),
        )?;
        let twin: Vec<(f64, f64)> = sorted
            .iter()
            .filter_map(|p| interactive(&p.classes).map(|d| (p.gpu_hours, y(d))))
            .collect();
        if !twin.is_empty() {
            chart
                .draw_series(DashedLineSeries::new(twin, 6, 4, color.stroke_width(1)))?
                .label(format!("{policy}, interactive clients"))
                .legend(move |(x, yy)| {
                    PathElement::new(vec![(x, yy), (x + 6, yy)], color.stroke_width(1))
                });
        }
    }
    for r in points {
        let at = (r.gpu_hours, y(r.delayed_fraction));
        chart
            .draw_series(std::iter::once(TriangleMarker::new(at, 7, BLACK.filled())))?
            .label(r.policy.clone())
            .legend(|(x, yy)| TriangleMarker::new((x + 8, yy), 5, BLACK.filled()));
        chart.draw_series(std::iter::once(Text::new(
            r.policy.clone(),
            (at.0, at.1 * 1.6),
            ("sans-serif", 12),
        )))?;
        if let Some(d) = interactive(&r.classes) {
            chart.draw_series(std::iter::once(TriangleMarker::new(
                (r.gpu_hours, y(d)),
                7,
                BLACK.stroke_width(1),
            )))?;
        }
    }
    for r in bounds {
        let style = if r.policy == "slo-bound" {
            BLACK.mix(0.4)
        } else {
            BLACK.mix(0.8)
        };
        chart
            .draw_series(DashedLineSeries::new(
                [(r.gpu_hours, FLOOR), (r.gpu_hours, 1.0)],
                4,
                4,
                style.stroke_width(1),
            ))?
            .label(format!("{} ({:.1} GPU-h)", r.policy, r.gpu_hours))
            .legend(move |(x, yy)| PathElement::new(vec![(x, yy), (x + 16, yy)], style));
    }
    let slo = cmp.slo_fraction.max(FLOOR);
    chart
        .draw_series(LineSeries::new(
            [(x0 - pad, slo), (x1 + pad, slo)],
            BLACK.mix(0.4),
        ))?
        .label(format!("SLO {:.2}%", cmp.slo_fraction * 100.0))
        .legend(|(x, yy)| PathElement::new(vec![(x, yy), (x + 16, yy)], BLACK.mix(0.4)));
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    Ok(())
}
