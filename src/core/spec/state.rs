//! What prewarm knows of a target's headroom object between invocations, the cached band
//! calibration included (its arithmetic is policy::band's).

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
    pub calibration: Option<Calibration>,
}

/// The high-water mark of desired spare capacity kept for the scale-down delay.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hold {
    pub spare: u32,
    pub until: f64,
}

/// The long-window statistics of a target, cached on its headroom object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Calibration {
    /// When it was computed (Unix seconds).
    pub computed_at: f64,
    /// The nominal quantile it was fitted for.
    pub quantile: f64,
    /// The lead-time band (req/s); None when the history was too short (see `note`).
    pub band: Option<f64>,
    /// The band per hour of day (24 values) or of week (168, from Monday 00:00) in TIME_ZONE,
    /// as BAND_BY_HOUR chose at this calibration; empty: `band` all day.
    #[serde(default)]
    pub by_hour: Vec<f64>,
    /// Weight of the seasonal forecast in the blend, 0..1 (0 without seasonal history).
    pub seasonal_weight: f64,
    /// Achieved out-of-sample coverage (0..1) of the band, when measurable.
    pub coverage: Option<f64>,
    /// The out-of-sample coverage per hour of day in TIME_ZONE (24 values; None for an hour
    /// the held-back part of the history did not reach).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub coverage_by_hour: Vec<Option<f64>>,
    /// Lead-time windows the band was fitted on.
    pub windows: u32,
    /// Why there is no band, or what was left out.
    #[serde(default)]
    pub note: Option<String>,
    /// The largest rise of the arrival rate over one lead time in the history (req/s): the
    /// training rise of the residual's decomposition (policy::residual), which the tick's
    /// UnforecastableShare metric compares each delayed tick's rise with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rise: Option<f64>,
    /// The lead time (s) it was fitted for: a band of errors over one lead says nothing of
    /// another, so a learned horizon that moves makes it due (`band::due`). None on objects
    /// written before it was recorded: kept until its CALIBRATE_EVERY_SECONDS refresh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lead_time_s: Option<f64>,
    /// The forecaster this calibration chose for the target (`policy::band::calibrate`); the
    /// blend on objects written before the choice existed.
    #[serde(default)]
    pub forecaster: Forecaster,
    /// The profile forecaster's table when it was chosen: the peak rate (req/s) of each slot of
    /// the local day in TIME_ZONE over the history, a lead time wide (`policy::profile::slots`;
    /// 24 values are hours), None for a slot never seen.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profile: Vec<Option<f64>>,
}

/// The forecasters a calibration chooses between (`policy::band::calibrate`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Forecaster {
    /// Holt's damped trend blended with the seasons (`policy::forecast`, `policy::seasonal`).
    #[default]
    Blend,
    /// The peak rate of the same slot of the local day on the days before (`policy::profile`).
    Profile,
}

impl Forecaster {
    pub fn label(self) -> &'static str {
        match self {
            Self::Blend => "blend",
            Self::Profile => "profile",
        }
    }
}
