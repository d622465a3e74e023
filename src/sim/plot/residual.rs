//! The residual picture: for every policy that delayed a request, one bar of its delayed
//! requests split into forecastable, lead miss and unforecastable at the lead (as shares of the
//! scored requests), with the constant reserve that removes the unforecastable part written
//! beside it. Changes when that picture does.

use std::path::Path;

use plotters::prelude::*;

use crate::sim::compare::Comparison;

/// Forecastable, lead miss, unforecastable.
const KIND_COLORS: [RGBColor; 3] = [
    RGBColor(55, 126, 184),
    RGBColor(255, 127, 0),
    RGBColor(228, 26, 28),
];
const KIND_NAMES: [&str; 3] = ["forecastable", "lead miss", "unforecastable at this lead"];

pub fn write_svg(cmp: &Comparison, path: &Path, attribution: &str) -> Result<(), String> {
    super::write_svg_with(path, (1000, 600), |root| draw(root, cmp, attribution))
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    cmp: &Comparison,
    attribution: &str,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let body = super::page_with_footer(root, 570, attribution)?;
    // (policy, [share of the scored requests of each kind], reserve text)
    let bars: Vec<(String, [f64; 3], String)> = cmp
        .rows
        .iter()
        .filter_map(|r| {
            let d = r.residual.as_ref()?;
            let n = r.requests.max(1) as f64;
            (d.delayed() > 0).then(|| {
                (
                    r.policy.clone(),
                    [
                        d.forecastable as f64 / n,
                        d.lead_miss as f64 / n,
                        d.unforecastable as f64 / n,
                    ],
                    format!(
                        "reserve {} replicas, {:.0} GPU-h, ${:.0}",
                        d.reserve_replicas, d.reserve_gpu_hours, d.reserve_usd
                    ),
                )
            })
        })
        .collect();
    let top = bars
        .iter()
        .map(|b| b.1.iter().sum::<f64>())
        .fold(0.0f64, f64::max)
        .max(1e-6)
        * 1.6;
    let title = format!(
        "{} - requests waiting > {:.0} s, decomposed at the {:.0} s lead",
        cmp.workload, cmp.slo_wait_s, cmp.lead_time_s
    );
    let rows = bars.len().max(1);
    let mut chart = ChartBuilder::on(&body)
        .margin(12)
        .caption(title, ("sans-serif", 17))
        .x_label_area_size(40)
        .y_label_area_size(10)
        .build_cartesian_2d(0.0..top, 0.0..rows as f64)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .disable_y_axis()
        .x_desc("share of the scored requests")
        .x_label_formatter(&|v| format!("{:.3}%", v * 100.0))
        .draw()?;
    for (k, color) in KIND_COLORS.iter().enumerate() {
        let rects = bars.iter().enumerate().map(|(i, (_, shares, _))| {
            let y = (rows - 1 - i) as f64;
            let from: f64 = shares[..k].iter().sum();
            Rectangle::new(
                [(from, y + 0.2), (from + shares[k], y + 0.8)],
                color.filled(),
            )
        });
        chart
            .draw_series(rects)?
            .label(KIND_NAMES[k])
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    for (i, (policy, shares, reserve)) in bars.iter().enumerate() {
        let y = (rows - 1 - i) as f64 + 0.65;
        let end: f64 = shares.iter().sum();
        chart.draw_series(std::iter::once(Text::new(
            format!("{policy}: {reserve}"),
            (end + top * 0.01, y),
            ("sans-serif", 12),
        )))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()?;
    Ok(())
}
