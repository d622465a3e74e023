//! The pictures of a comparison, one SVG each: [`frontier`] (the knob curves a user decides
//! from), [`timeline`] (the time series of the reported points) and [`residual`] (the delayed
//! requests by kind). This file holds only what
//! they share, the policies' colours, and changes when that palette does.

pub mod frontier;
pub mod residual;
pub mod timeline;

use plotters::style::RGBColor;

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
