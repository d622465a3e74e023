//! The function-wide decision settings (`PolicySpec`), their defaults and bounds.

use serde::{Deserialize, Serialize};

/// BAND_BY_HOUR: the conditionings of the lead-time band a calibration may use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BandByHour {
    Off,
    Day,
    Week,
    #[default]
    Auto,
}

impl BandByHour {
    /// The setting's value: `off`/`false`, `day`/`true` (what the flag meant when it was a
    /// yes-or-no setting), `week`, `auto`.
    pub fn parse(raw: &str) -> Option<Self> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "off" | "false" => Some(Self::Off),
            "day" | "true" => Some(Self::Day),
            "week" => Some(Self::Week),
            "auto" => Some(Self::Auto),
            _ => None,
        }
    }

    /// The conditionings the calibration scores, the whole-day band first (it wins ties).
    pub fn candidates(self) -> &'static [BandSlots] {
        match self {
            Self::Off => &[BandSlots::Whole],
            Self::Day => &[BandSlots::HourOfDay],
            Self::Week => &[BandSlots::HourOfWeek],
            Self::Auto => &[
                BandSlots::Whole,
                BandSlots::HourOfDay,
                BandSlots::HourOfWeek,
            ],
        }
    }
}

/// FORECASTER: the forecasters a calibration chooses between.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ForecasterChoice {
    /// The blend of the damped trend and the seasons only.
    Blend,
    /// The blend or the profile of the day (peaks per lead-wide slot), whichever is narrowest
    /// out of sample.
    #[default]
    Auto,
}

impl ForecasterChoice {
    /// The setting's value: `blend` or `auto`.
    pub fn parse(raw: &str) -> Option<Self> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "blend" => Some(Self::Blend),
            "auto" => Some(Self::Auto),
            _ => None,
        }
    }
}

/// What the lead-time band is conditioned on: nothing, the hour of day, the hour of week.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BandSlots {
    Whole,
    HourOfDay,
    HourOfWeek,
}

impl BandSlots {
    /// Bands held: one, 24 or 168 (`Calibration::by_hour` is empty for one).
    pub fn count(self) -> usize {
        match self {
            Self::Whole => 1,
            Self::HourOfDay => 24,
            Self::HourOfWeek => 168,
        }
    }

    /// The conditioning of `bands` bands (`count`'s inverse; any other length is one band).
    pub fn of(bands: usize) -> Self {
        match bands {
            24 => Self::HourOfDay,
            168 => Self::HourOfWeek,
            _ => Self::Whole,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Self::Whole => "whole",
            Self::HourOfDay => "hour-of-day",
            Self::HourOfWeek => "hour-of-week",
        }
    }
}

/// SCALE_DOWN_DELAY_SECONDS: how long a high-water mark of wanted spare is held.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "DelayText", into = "DelayText")]
pub enum ScaleDownDelay {
    /// A fixed number of seconds.
    Seconds(f64),
    /// `lead`: one lead time, the horizon the decision looked ahead by (the learned one once
    /// learned, LEAD_TIME_SECONDS until then): a burst's spare is kept as long as a replica
    /// released now would take to come back, no longer.
    Lead,
}

impl std::str::FromStr for ScaleDownDelay {
    type Err = String;

    fn from_str(raw: &str) -> Result<Self, String> {
        let raw = raw.trim();
        if raw.eq_ignore_ascii_case("lead") {
            return Ok(Self::Lead);
        }
        raw.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .map(Self::Seconds)
            .ok_or_else(|| format!("expected seconds or lead, got {raw:?}"))
    }
}

impl std::fmt::Display for ScaleDownDelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Seconds(s) => write!(f, "{s}"),
            Self::Lead => f.write_str("lead"),
        }
    }
}

/// The serialized form: a number of seconds or the word `lead`, as the variable is written.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum DelayText {
    Seconds(f64),
    Word(String),
}

impl TryFrom<DelayText> for ScaleDownDelay {
    type Error = String;

    fn try_from(text: DelayText) -> Result<Self, String> {
        match text {
            DelayText::Seconds(s) => Ok(Self::Seconds(s)),
            DelayText::Word(w) => w.parse(),
        }
    }
}

impl From<ScaleDownDelay> for DelayText {
    fn from(delay: ScaleDownDelay) -> Self {
        match delay {
            ScaleDownDelay::Seconds(s) => Self::Seconds(s),
            ScaleDownDelay::Lead => Self::Word("lead".into()),
        }
    }
}

/// Function-wide decision settings. Field docs give the environment variable and default.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicySpec {
    /// LEAD_TIME_SECONDS (180): node launch + image pull + model load; the forecast horizon.
    pub lead_time_s: f64,
    /// TICK_SECONDS (15): time between decisions.
    pub tick_s: f64,
    /// METRICS_WINDOW_SECONDS (900): history fetched every tick.
    pub window_s: f64,
    /// METRICS_STEP_SECONDS (15): resolution of that history.
    pub step_s: f64,
    /// ERROR_QUANTILE (0.9): upper quantile of recent forecast error added to the forecast.
    pub error_quantile: f64,
    /// TARGET_WAIT_SECONDS (2): mean queueing wait the sizing aims for.
    pub target_wait_s: f64,
    /// SCALE_DOWN_DELAY_SECONDS (300): hold the maximum desired headroom over this window
    /// (`hold_s`).
    #[serde(alias = "scale_down_delay_s")]
    pub scale_down_delay: ScaleDownDelay,
    /// COOLDOWN_SECONDS (60): minimum time between two changes of one target.
    pub cooldown_s: f64,
    /// STALE_AFTER_SECONDS (120): newest sample older than this means "metrics missing".
    pub stale_after_s: f64,
    /// EWMA smoothing factor of the level (0 < alpha <= 1).
    pub ewma_alpha: f64,
    /// Smoothing factor of the trend (0 < beta <= 1).
    pub trend_beta: f64,
    /// Damping of the trend per step (0 < phi <= 1); 1 is an undamped linear trend.
    pub trend_damping: f64,
    /// SEASONS_SECONDS ("86400,604800"): season lengths of the seasonal forecast, comma-separated
    /// seconds (a day and a week); empty turns it off. A setting so a test can compress a "day".
    #[serde(default = "default_seasons")]
    pub seasons_s: Vec<f64>,
    /// TIME_ZONE ("UTC"): IANA zone of scheduled windows, per-hour bands and the
    /// seasons' wall-clock days (DST-safe).
    #[serde(default = "default_time_zone")]
    pub time_zone: String,
    /// FAST_PATH_RATIO (2): requests in the system over the fast-path window at or above this
    /// many times the ready slots trigger the fast path (Knative's panic threshold is 200 %).
    #[serde(default = "default_fast_ratio")]
    pub fast_path_ratio: f64,
    /// FAST_PATH_WINDOW_SECONDS (30): the short window the fast path averages demand over (two
    /// samples on the 15 s grid; Knative's 6 s panic window is below a metric store's step).
    #[serde(default = "default_fast_window")]
    pub fast_path_window_s: f64,
    /// BAND_HISTORY_SECONDS (86400): history the lead-time band is calibrated on (1 to 7 days).
    #[serde(default = "default_band_history")]
    pub band_history_s: f64,
    /// BAND_STEP_SECONDS (60): resolution of that history (coarser than the tick's: cost).
    #[serde(default = "default_band_step")]
    pub band_step_s: f64,
    /// BAND_BY_HOUR (auto): how the band follows the clock: `off` one band for the whole
    /// day, `day` per hour of day, `week` per hour of week (in TIME_ZONE), `auto` the one of the
    /// three narrowest out of sample at each calibration, per target (`policy::band_slots`).
    #[serde(default)]
    pub band_by_hour: BandByHour,
    /// FORECASTER (auto): `auto` chooses per target at each calibration between the blend and
    /// the profile of the day (peaks per lead-wide slot), whichever has the narrowest upper
    /// band out of sample (`policy::band`); `blend` sizes with the damped trend blended with
    /// the seasons alone.
    #[serde(default)]
    pub forecaster: ForecasterChoice,
    /// CALIBRATE_EVERY_SECONDS (3600): long-window statistics are recomputed at most this often
    /// and cached on the headroom object.
    #[serde(default = "default_calibrate_every")]
    pub calibrate_every_s: f64,
    /// DELAYED_REQUEST_COST and GPU_HOUR_COST (unset): when both are set (or GPU_HOUR_COST and a
    /// target's `delayedRequestCost`), the band's quantile is derived from them (newsvendor)
    /// instead of ERROR_QUANTILE; see `band::quantile`.
    #[serde(default)]
    pub delayed_request_cost: Option<f64>,
    #[serde(default)]
    pub gpu_hour_cost: Option<f64>,
    /// TARGET_TIMEOUT_SECONDS (10): the longest one target's tick may take (its metric reads,
    /// API calls and writes); past it that target's tick fails, retryable, and the others go on.
    /// Also the time a tick must still have before the invocation's deadline to start.
    #[serde(default = "default_target_timeout")]
    pub target_timeout_s: f64,
    /// RATE_WINDOW_SECONDS (60): the range of the built-in queries' `rate`/`deriv` (the mean
    /// latency's is twice it). At least 4 x SCRAPE_INTERVAL_SECONDS, so each window holds
    /// enough scrapes for a rate even when one is missed.
    #[serde(default = "default_rate_window")]
    pub rate_window_s: f64,
    /// SCRAPE_INTERVAL_SECONDS (15): how often the inference servers are scraped; only bounds
    /// RATE_WINDOW_SECONDS.
    #[serde(default = "default_scrape_interval")]
    pub scrape_interval_s: f64,
    /// INGESTION_LAG_SECONDS (30): how late the metric store shows a sample (AMP: ~30 s). The
    /// recent read ends this long before now, so its newest point is computed over a full
    /// rate window; staleness still counts from now, with the lag added to
    /// STALE_AFTER_SECONDS.
    #[serde(default = "default_ingestion_lag")]
    pub ingestion_lag_s: f64,
}

fn default_seasons() -> Vec<f64> {
    vec![86_400.0, 604_800.0]
}
fn default_time_zone() -> String {
    "UTC".into()
}
fn default_fast_ratio() -> f64 {
    2.0
}
fn default_fast_window() -> f64 {
    30.0
}
fn default_band_history() -> f64 {
    86_400.0
}
fn default_band_step() -> f64 {
    60.0
}
fn default_calibrate_every() -> f64 {
    3_600.0
}
fn default_target_timeout() -> f64 {
    10.0
}
fn default_rate_window() -> f64 {
    60.0
}
fn default_scrape_interval() -> f64 {
    15.0
}
fn default_ingestion_lag() -> f64 {
    30.0
}

impl Default for PolicySpec {
    fn default() -> Self {
        PolicySpec {
            lead_time_s: 180.0,
            tick_s: 15.0,
            window_s: 900.0,
            step_s: 15.0,
            error_quantile: 0.9,
            target_wait_s: 2.0,
            scale_down_delay: ScaleDownDelay::Seconds(300.0),
            cooldown_s: 60.0,
            stale_after_s: 120.0,
            ewma_alpha: 0.3,
            trend_beta: 0.2,
            trend_damping: 0.9,
            seasons_s: default_seasons(),
            time_zone: default_time_zone(),
            fast_path_ratio: default_fast_ratio(),
            fast_path_window_s: default_fast_window(),
            band_history_s: default_band_history(),
            band_step_s: default_band_step(),
            band_by_hour: BandByHour::Auto,
            forecaster: ForecasterChoice::Auto,
            calibrate_every_s: default_calibrate_every(),
            delayed_request_cost: None,
            gpu_hour_cost: None,
            target_timeout_s: default_target_timeout(),
            rate_window_s: default_rate_window(),
            scrape_interval_s: default_scrape_interval(),
            ingestion_lag_s: default_ingestion_lag(),
        }
    }
}

/// Inclusive bounds of a setting, checked once at start-up.
fn check(name: &str, value: f64, lo: f64, hi: f64) -> Result<(), (String, String)> {
    if value.is_finite() && value >= lo && value <= hi {
        Ok(())
    } else {
        Err((
            name.to_string(),
            format!("must be between {lo} and {hi}, got {value}"),
        ))
    }
}

/// Static inclusive bounds of the policy's environment variables: `(variable, min, max)`.
/// template.yaml's parameters carry exactly these as MinValue/MaxValue, so a value CloudFormation
/// accepts never fails at Init (tests/template_bounds.rs holds the two equal).
pub const POLICY_BOUNDS: [(&str, f64, f64); 12] = [
    ("LEAD_TIME_SECONDS", 1.0, 3600.0),
    ("TICK_SECONDS", 1.0, 60.0),
    ("METRICS_STEP_SECONDS", 1.0, 300.0),
    ("METRICS_WINDOW_SECONDS", 60.0, 86_400.0),
    ("ERROR_QUANTILE", 0.5, 0.999),
    ("TARGET_WAIT_SECONDS", 0.01, 600.0),
    ("COOLDOWN_SECONDS", 0.0, 3600.0),
    ("STALE_AFTER_SECONDS", 1.0, 3600.0),
    ("TARGET_TIMEOUT_SECONDS", 1.0, 60.0),
    ("RATE_WINDOW_SECONDS", 4.0, 3600.0),
    ("SCRAPE_INTERVAL_SECONDS", 1.0, 900.0),
    ("INGESTION_LAG_SECONDS", 0.0, 600.0),
];

/// SCALE_DOWN_DELAY_SECONDS's bounds when it is seconds (`lead` is LEAD_TIME_SECONDS's). Its
/// template.yaml parameter is a string (seconds or `lead`) whose pattern admits exactly these
/// (tests/infra/test_deploy.py holds the two equal).
pub const SCALE_DOWN_DELAY_BOUNDS: (&str, f64, f64) = ("SCALE_DOWN_DELAY_SECONDS", 0.0, 86_400.0);

impl PolicySpec {
    /// Validates ranges. The error is `(variable name, message)`.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let values = [
            self.lead_time_s,
            self.tick_s,
            self.step_s,
            self.window_s,
            self.error_quantile,
            self.target_wait_s,
            self.cooldown_s,
            self.stale_after_s,
            self.target_timeout_s,
            self.rate_window_s,
            self.scrape_interval_s,
            self.ingestion_lag_s,
        ];
        for ((name, lo, hi), value) in POLICY_BOUNDS.iter().zip(values) {
            check(name, value, *lo, *hi)?;
        }
        if let ScaleDownDelay::Seconds(s) = self.scale_down_delay {
            let (name, lo, hi) = SCALE_DOWN_DELAY_BOUNDS;
            check(name, s, lo, hi)?;
        }
        // The one bound that depends on another setting (CloudFormation parameters cannot say
        // it): the forecast needs at least four samples of history.
        check(
            "METRICS_WINDOW_SECONDS",
            self.window_s,
            self.step_s * 4.0,
            86_400.0,
        )?;
        // A rate needs two scrapes inside its window; four leave room for a missed scrape and
        // for the window's alignment to the scrapes. With a 60 s scrape interval the default
        // 1 m window holds one scrape and the query returns nothing.
        if self.rate_window_s < 4.0 * self.scrape_interval_s {
            return Err((
                "RATE_WINDOW_SECONDS".into(),
                format!(
                    "must be at least 4 x SCRAPE_INTERVAL_SECONDS ({}) = {}, got {}",
                    self.scrape_interval_s,
                    4.0 * self.scrape_interval_s,
                    self.rate_window_s
                ),
            ));
        }
        check("ewma_alpha", self.ewma_alpha, 0.001, 1.0)?;
        check("trend_beta", self.trend_beta, 0.0, 1.0)?;
        check("trend_damping", self.trend_damping, 0.0, 1.0)?;
        for season in &self.seasons_s {
            // At least two lead times, so "the same time one season back, one lead time ahead"
            // is in the past.
            check(
                "SEASONS_SECONDS",
                *season,
                2.0 * self.lead_time_s,
                31.0 * 86_400.0,
            )?;
        }
        parse_time_zone(&self.time_zone).map_err(|m| ("TIME_ZONE".to_string(), m))?;
        check("FAST_PATH_RATIO", self.fast_path_ratio, 1.0, 100.0)?;
        check(
            "FAST_PATH_WINDOW_SECONDS",
            self.fast_path_window_s,
            self.step_s,
            600.0,
        )?;
        check(
            "BAND_HISTORY_SECONDS",
            self.band_history_s,
            3_600.0,
            7.0 * 86_400.0,
        )?;
        check("BAND_STEP_SECONDS", self.band_step_s, self.step_s, 3_600.0)?;
        check(
            "CALIBRATE_EVERY_SECONDS",
            self.calibrate_every_s,
            60.0,
            86_400.0,
        )?;
        match (self.delayed_request_cost, self.gpu_hour_cost) {
            (None, None) => {}
            (Some(d), Some(g)) => {
                check("DELAYED_REQUEST_COST", d, 1e-9, 1e6)?;
                check("GPU_HOUR_COST", g, 1e-9, 1e6)?;
            }
            (Some(_), None) => {
                return Err((
                    "GPU_HOUR_COST".into(),
                    "must be set with DELAYED_REQUEST_COST".into(),
                ))
            }
            // GPU_HOUR_COST alone is whole: targets name their own delayedRequestCost.
            (None, Some(g)) => check("GPU_HOUR_COST", g, 1e-9, 1e6)?,
        }
        Ok(())
    }

    /// The seconds a high-water mark is held: SCALE_DOWN_DELAY_SECONDS, or for `lead` this
    /// policy's lead time, which is the horizon the decision uses once the tick or the
    /// simulator has applied it (`Horizon::applied_to`).
    pub fn hold_s(&self) -> f64 {
        match self.scale_down_delay {
            ScaleDownDelay::Seconds(s) => s,
            ScaleDownDelay::Lead => self.lead_time_s,
        }
    }

    /// The lease of a raised HPA floor, renewed each tick: the hold, never under 120 s (a few
    /// ticks, so one that fails to renew it does not give the floor back).
    pub fn floor_lease_s(&self) -> f64 {
        self.hold_s().max(120.0)
    }

    /// The configured zone (validated at start-up; UTC if it somehow does not parse).
    pub fn zone(&self) -> chrono_tz::Tz {
        parse_time_zone(&self.time_zone).unwrap_or(chrono_tz::UTC)
    }
}

/// An IANA zone name such as `Europe/Berlin`.
pub fn parse_time_zone(name: &str) -> Result<chrono_tz::Tz, String> {
    name.trim()
        .parse::<chrono_tz::Tz>()
        .map_err(|_| format!("{name:?} is not an IANA time zone name (e.g. Europe/Berlin)"))
}
