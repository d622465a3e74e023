//! The comparison as an SVG: arrival rate, warm GPUs of each policy against the GPUs demand
//! needs, and waiting requests of each policy, over time. Changes when that picture does.

use std::path::Path;

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::COLORS;
use crate::sim::compare::Comparison;
use crate::sim::engine::Point;

/// Writes the plot; `attribution` is printed under it (trace licences ask for it).
pub fn write_svg(cmp: &Comparison, path: &Path, attribution: &str) -> Result<(), String> {
    super::write_svg_with(path, (1100, 900), |root| draw(root, cmp, attribution))
}

fn minutes(t: f64) -> f64 {
    t / 60.0
}

/// One line per policy (coloured by its place in the list) and the legend naming them: the
/// warm-capacity and waiting-requests panels differ only in the value they plot.
fn policy_lines<'a, DB: DrawingBackend + 'a>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    policies: &[(String, Vec<Point>)],
    value: impl Fn(&Point) -> f64,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    for (i, (name, series)) in policies.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                series.iter().map(|p| (minutes(p.t), value(p))),
                color,
            ))?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    Ok(())
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    cmp: &Comparison,
    attribution: &str,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let body = super::page_with_footer(root, 870, attribution)?.titled(
        &format!(
            "{} - lead time {:.0} s, SLO wait {:.0} s",
            cmp.workload, cmp.lead_time_s, cmp.slo_wait_s
        ),
        ("sans-serif", 22),
    )?;
    let panels = body.split_evenly((3, 1));
    let data = &cmp.plot;
    let step = data.step_s;
    let t_max = minutes(cmp.duration_s.max(step));

    // 1. Arrival rate.
    let rate_max = data.rate.iter().cloned().fold(0.0, f64::max).max(1e-3) * 1.1;
    let mut chart = ChartBuilder::on(&panels[0])
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(60)
        .caption("arrival rate (req/s, per step)", ("sans-serif", 16))
        .build_cartesian_2d(0.0..t_max, 0.0..rate_max)?;
    chart.configure_mesh().x_desc("minutes").draw()?;
    chart.draw_series(LineSeries::new(
        data.rate
            .iter()
            .enumerate()
            .map(|(i, v)| (minutes(i as f64 * step), *v)),
        &BLACK,
    ))?;

    // 2. Warm GPUs per policy, and the GPUs demand needs (ideal packing).
    let gpu_max = data
        .policies
        .iter()
        .flat_map(|(_, s)| s.iter().map(|p| p.ready_gpus as f64))
        .chain(data.demand_gpus.iter().cloned())
        .fold(1.0, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(&panels[1])
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(60)
        .caption(
            "GPUs on Ready nodes (warm capacity) vs GPUs demand needs",
            ("sans-serif", 16),
        )
        .build_cartesian_2d(0.0..t_max, 0.0..gpu_max)?;
    chart.configure_mesh().x_desc("minutes").draw()?;
    chart
        .draw_series(LineSeries::new(
            data.demand_gpus
                .iter()
                .enumerate()
                .map(|(i, v)| (minutes(i as f64 * step), *v)),
            BLACK.stroke_width(2),
        ))?
        .label("demand (ideal packing)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK.stroke_width(2)));
    policy_lines(&mut chart, &data.policies, |p| p.ready_gpus as f64)?;

    // 3. Waiting requests per policy.
    let wait_max = data
        .policies
        .iter()
        .flat_map(|(_, s)| s.iter().map(|p| p.waiting as f64))
        .fold(1.0, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(&panels[2])
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(60)
        .caption("waiting requests", ("sans-serif", 16))
        .build_cartesian_2d(0.0..t_max, 0.0..wait_max)?;
    chart.configure_mesh().x_desc("minutes").draw()?;
    policy_lines(&mut chart, &data.policies, |p| p.waiting as f64)?;
    Ok(())
}
