//! The discrete-event simulator and backtest: the same `crate::core::decide()` the Lambda runs,
//! against alternative policies, on request traces, built-in scenarios or a metrics history.

pub mod bound;
pub mod checks;
pub mod classes;
pub mod compare;
pub mod engine;
pub mod history;
pub mod hpa;
pub mod ideal;
pub mod jobs;
pub mod knob_grid;
pub mod model;
pub mod parallel;
pub mod plot;
pub mod pool_bench;
pub mod report;
pub mod run;
pub mod scenario;
pub mod setup;
pub mod startup_profile;
pub mod stats;
pub mod tier_split;
pub mod trace;
pub mod verdict;
pub mod wait_bound;
pub mod workload;
