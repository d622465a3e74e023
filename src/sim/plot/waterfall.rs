//! The waterfall picture: one stacked bar per policy row of its GPU-hours by cause (serving,
//! target headroom, warm excess, ... as in the table), its idle share written beside it.
//! Changes when that picture does.

use std::path::Path;

use plotters::prelude::*;

use crate::sim::compare::Comparison;

/// One colour per waterfall part, in `Waterfall::parts` order.
const PART_COLORS: [RGBColor; 8] = [
    RGBColor(77, 175, 74),
    RGBColor(55, 126, 184),
    RGBColor(228, 26, 28),
    RGBColor(247, 129, 191),
    RGBColor(255, 127, 0),
    RGBColor(166, 86, 40),
    RGBColor(152, 78, 163),
    RGBColor(170, 170, 170),
];

pub fn write_svg(cmp: &Comparison, path: &Path, attribution: &str) -> Result<(), String> {
    let height = 160 + 40 * cmp.rows.len() as u32;
    super::write_svg_with(path, (1000, height), |root| {
        draw(root, cmp, attribution, height)
    })
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    cmp: &Comparison,
    attribution: &str,
    height: u32,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let body = super::page_with_footer(root, height - 30, attribution)?;
    let rows = cmp.rows.len().max(1);
    let top = cmp
        .rows
        .iter()
        .map(|r| r.gpu_hours)
        .fold(0.0f64, f64::max)
        .max(1e-6)
        * 1.35;
    let mut chart = ChartBuilder::on(&body)
        .margin(12)
        .caption(
            format!("{} - where the GPU-hours go", cmp.workload),
            ("sans-serif", 17),
        )
        .x_label_area_size(40)
        .y_label_area_size(10)
        .build_cartesian_2d(0.0..top, 0.0..rows as f64)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .disable_y_axis()
        .x_desc("GPU-hours")
        .draw()?;
    for (k, color) in PART_COLORS.iter().enumerate() {
        let rects = cmp.rows.iter().enumerate().map(|(i, r)| {
            let parts = r.waterfall.parts();
            let y = (rows - 1 - i) as f64;
            let from: f64 = parts[..k].iter().map(|(_, v)| v).sum();
            Rectangle::new(
                [(from, y + 0.2), (from + parts[k].1, y + 0.8)],
                color.filled(),
            )
        });
        let name = crate::sim::stats::Waterfall::default().parts()[k].0;
        chart
            .draw_series(rects)?
            .label(name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    for (i, r) in cmp.rows.iter().enumerate() {
        let y = (rows - 1 - i) as f64 + 0.65;
        chart.draw_series(std::iter::once(Text::new(
            format!(
                "{}: {:.0} GPU-h, {:.0}% idle",
                r.policy,
                r.gpu_hours,
                r.idle_share * 100.0
            ),
            (r.gpu_hours + top * 0.01, y),
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
