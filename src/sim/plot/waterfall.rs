//! The waterfall picture: one stacked bar per policy row of its GPU-hours by cause (serving,
//! target headroom, warm excess, ... as in the table), its idle share written beside it.
//! Changes when that picture does.

use std::path::Path;

use plotters::prelude::*;

use crate::sim::compare::Comparison;
use crate::sim::stats::Waterfall;

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
    let names = Waterfall::default().parts().map(|(name, _)| name);
    let parts: Vec<(&str, RGBColor)> = names.into_iter().zip(super::COLORS).collect();
    let bars = cmp
        .rows
        .iter()
        .map(|r| {
            (
                r.waterfall.parts().iter().map(|(_, v)| *v).collect(),
                format!(
                    "{}: {:.0} GPU-h, {:.0}% idle",
                    r.policy,
                    r.gpu_hours,
                    r.idle_share * 100.0
                ),
            )
        })
        .collect();
    super::StackedBars {
        title: format!("{} - where the GPU-hours go", cmp.workload),
        x_desc: "GPU-hours",
        x_label: &|v| format!("{v:.0}"),
        parts: &parts,
        bars,
        headroom: 1.35,
    }
    .draw(&body)
}
