//! The residual picture: for every policy that delayed a request, one bar of its delayed
//! requests split into forecastable, lead miss and unforecastable at the lead (as shares of the
//! scored requests), with the constant reserve that removes the unforecastable part written
//! beside it. Changes when that picture does.

use std::path::Path;

use plotters::prelude::*;

use crate::sim::compare::Comparison;

/// Forecastable, lead miss, unforecastable.
const KINDS: [(&str, RGBColor); 3] = [
    ("forecastable", RGBColor(55, 126, 184)),
    ("lead miss", RGBColor(255, 127, 0)),
    ("unforecastable at this lead", RGBColor(228, 26, 28)),
];

pub fn write_svg(cmp: &Comparison, path: &Path, attribution: &str) -> Result<(), String> {
    super::write_svg_with(path, (1000, 600), |root| draw(root, cmp, attribution))
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    cmp: &Comparison,
    attribution: &str,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let body = super::page_with_footer(root, 570, attribution)?;
    // [share of the scored requests of each kind], policy and reserve text
    let bars = cmp
        .rows
        .iter()
        .filter_map(|r| {
            let d = r.residual.as_ref()?;
            let n = r.requests.max(1) as f64;
            (d.delayed() > 0).then(|| {
                (
                    vec![
                        d.forecastable as f64 / n,
                        d.lead_miss as f64 / n,
                        d.unforecastable as f64 / n,
                    ],
                    format!(
                        "{}: reserve {} replicas, {:.0} GPU-h, ${:.0}",
                        r.policy, d.reserve_replicas, d.reserve_gpu_hours, d.reserve_usd
                    ),
                )
            })
        })
        .collect();
    super::StackedBars {
        title: format!(
            "{} - requests waiting > {:.0} s, decomposed at the {:.0} s lead",
            cmp.workload, cmp.slo_wait_s, cmp.lead_time_s
        ),
        x_desc: "share of the scored requests",
        x_label: &|v| format!("{:.3}%", v * 100.0),
        parts: &KINDS,
        bars,
        headroom: 1.6,
    }
    .draw(&body)
}
