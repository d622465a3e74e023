//! The discrete-event simulator and backtest. (Simulator owner.)
