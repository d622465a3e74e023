//! The discrete-event simulator and backtest: the same `crate::core::decide()` the Lambda runs,
//! against alternative policies, on request traces, built-in scenarios or a metrics history.

pub mod compare;
pub mod engine;
pub mod history;
pub mod model;
pub mod oracle;
pub mod plot;
pub mod report;
pub mod scenario;
pub mod trace;
pub mod workload;
