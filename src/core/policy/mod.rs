//! The tick's policy, one file per stage, in the order `decide` runs them: the observation
//! (what the metric sources saw; `observe` plans the reads and assembles them, for the tick and
//! the simulator alike), assess (which numbers can be trusted, or fail static),
//! forecast (damped trend), seasonal (the same clock time a season back), band (the calibrated
//! error quantile, and the choice of forecaster per target: profile, the peak of each
//! lead-wide slot of the day;
//! calibration_cache: when the tick re-reads its history), horizon (the rate to cover at the
//! lead time and its replicas), sizing (Erlang C) and hpa_sizing (the HPA's own units), fast_path (a surge already in the system), next_step,
//! schedule (cron windows), rails (floors, caps, steps, cooldowns, holds) and plan (the
//! decision and its log line). `decide` joins them; `plan_target` turns one target's
//! observations into its tick's commands. Beside the tick, residual decomposes the
//! requests that still waited (forecastable, lead miss, unforecastable) for the simulator,
//! `prewarm backtest` and `prewarm explain --target`.

pub mod assess;
pub mod band;
pub mod band_slots;
pub mod calibration_cache;
pub mod decide;
pub mod fast_path;
pub mod forecast;
pub mod horizon;
pub mod hpa_sizing;
pub mod next_step;
pub mod observation;
pub mod observe;
pub mod plan;
pub mod profile;
pub mod rails;
pub mod residual;
pub mod residual_history;
pub mod schedule;
pub mod season_cache;
pub mod seasonal;
pub mod sizing;

pub use decide::decide;
