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
