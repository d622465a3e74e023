//! Demand forecast: EWMA level, damped trend, and an upper quantile of recent one-step forecast
//! error, projected over the provisioning lead time. (Implemented by the core owner.)

use super::signal::Sample;
use super::spec::PolicySpec;

/// The forecast of one series.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Forecast {
    /// Smoothed level now.
    pub level: f64,
    /// Damped trend per step.
    pub trend: f64,
    /// Upper `error_quantile` of recent absolute forecast errors.
    pub error_quantile: f64,
    /// Highest point forecast over (now, now + lead time], plus the error quantile.
    pub upper_over_horizon: f64,
}

/// Forecasts `series` (oldest first, on the `policy.step_s` grid) over `policy.lead_time_s`.
/// Returns None when there are fewer than two finite samples.
pub fn forecast(series: &[Sample], policy: &PolicySpec) -> Option<Forecast> {
    let _ = (series, policy);
    todo!("core owner implements")
}
