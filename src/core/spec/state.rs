//! What prewarm knows of a target's headroom object between invocations.

use serde::{Deserialize, Serialize};

/// What prewarm knows of a target's headroom object right now, read from the object itself
/// (its size and prewarm's annotations), so the Lambda keeps no state between invocations.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HeadroomState {
    /// Spare replicas the headroom object holds now.
    pub spare: u32,
    /// No change before this time (Unix seconds): the cooldown persisted as an annotation.
    pub cooldown_until: Option<f64>,
    /// The scale-down delay: the highest recent desired value and when it may be released.
    pub hold: Option<Hold>,
    /// Extra replicas requested by the interruption path as replacements for draining nodes;
    /// the tick never takes these back while the drain is on.
    pub replacement_reserved: u32,
    /// Whether prewarm has frozen the NodePool's consolidation budgets.
    pub consolidation_frozen: bool,
    /// When the last tick acted on this object (Unix seconds); guards overlapping invocations.
    pub last_tick: Option<f64>,
    /// The long-window statistics (lead-time band, blend weights), recomputed at most every
    /// CALIBRATE_EVERY_SECONDS and cached on the object (`prewarm.io/calibration`).
    #[serde(default)]
    pub calibration: Option<crate::policy::band::Calibration>,
}

/// The high-water mark of desired spare capacity kept for the scale-down delay.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hold {
    pub spare: u32,
    pub until: f64,
}
