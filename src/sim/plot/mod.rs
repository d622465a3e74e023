//! The pictures of a comparison, one SVG each: [`frontier`] (the knob curves a user decides
//! from), [`timeline`] (the time series of the reported points), [`residual`] (the delayed
//! requests by kind) and [`waterfall`] (the GPU-hours by cause). This file holds only what
//! they share, the policies' colours, and changes when that palette does.

pub mod frontier;
pub mod residual;
pub mod timeline;
pub mod waterfall;

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::RGBColor;

/// Draws one SVG of `size` pixels with `draw` and writes it, the error naming the file.
pub(crate) fn write_svg_with(
    path: &Path,
    size: (u32, u32),
    draw: impl FnOnce(
        &DrawingArea<SVGBackend, Shift>,
    ) -> Result<(), DrawingAreaErrorKind<std::io::Error>>,
) -> Result<(), String> {
    let root = SVGBackend::new(path, size).into_drawing_area();
    draw(&root).map_err(|e| format!("plot {}: {e}", path.display()))?;
    root.present()
        .map_err(|e| format!("plot {}: {e}", path.display()))
}

/// A white page with `attribution` in a footer below its first `body_px` pixels (trace
/// licences ask for it); returns the area above the footer.
pub(crate) fn page_with_footer<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    body_px: u32,
    attribution: &str,
) -> Result<DrawingArea<DB, Shift>, DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let (body, footer) = root.split_vertically(body_px);
    footer.draw_text(
        attribution,
        &("sans-serif", 13).into_text_style(&footer),
        (10, 8),
    )?;
    Ok(body)
}

/// One horizontal bar per entry of `bars` (top to bottom), its parts stacked left to right in
/// the order and colours of `parts` (named in the legend), its text written after its end; the
/// x axis runs to `headroom` times the longest bar, so the texts fit.
pub(crate) struct StackedBars<'a> {
    pub title: String,
    pub x_desc: &'a str,
    pub x_label: &'a dyn Fn(&f64) -> String,
    pub parts: &'a [(&'a str, RGBColor)],
    pub bars: Vec<(Vec<f64>, String)>,
    pub headroom: f64,
}

impl StackedBars<'_> {
    pub(crate) fn draw<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let rows = self.bars.len().max(1);
        let top = self
            .bars
            .iter()
            .map(|b| b.0.iter().sum::<f64>())
            .fold(0.0f64, f64::max)
            .max(1e-6)
            * self.headroom;
        let mut chart = ChartBuilder::on(area)
            .margin(12)
            .caption(&self.title, ("sans-serif", 17))
            .x_label_area_size(40)
            .y_label_area_size(10)
            .build_cartesian_2d(0.0..top, 0.0..rows as f64)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .disable_y_axis()
            .x_desc(self.x_desc)
            .x_label_formatter(self.x_label)
            .draw()?;
        for (k, &(name, color)) in self.parts.iter().enumerate() {
            let rects = self.bars.iter().enumerate().map(|(i, (values, _))| {
                let y = (rows - 1 - i) as f64;
                let from: f64 = values[..k].iter().sum();
                Rectangle::new(
                    [(from, y + 0.2), (from + values[k], y + 0.8)],
                    color.filled(),
                )
            });
            chart.draw_series(rects)?.label(name).legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
            });
        }
        for (i, (values, text)) in self.bars.iter().enumerate() {
            let y = (rows - 1 - i) as f64 + 0.65;
            let end: f64 = values.iter().sum();
            chart.draw_series(std::iter::once(Text::new(
                text.clone(),
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
}

/// Line colours, by a policy's place in the list (shared with the frontier plot).
pub(crate) const COLORS: [RGBColor; 8] = [
    RGBColor(228, 26, 28),
    RGBColor(255, 127, 0),
    RGBColor(152, 78, 163),
    RGBColor(77, 175, 74),
    RGBColor(55, 126, 184),
    RGBColor(120, 120, 120),
    RGBColor(166, 86, 40),
    RGBColor(247, 129, 191),
];
