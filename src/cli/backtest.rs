//! `prewarm backtest`. (Placeholder until its owner lands it.)

#[derive(Debug, clap::Args)]
pub struct BacktestArgs {}

pub fn run(args: BacktestArgs) -> crate::Result<()> {
    let _ = args;
    Err(crate::Error::config(
        "command",
        "prewarm backtest is not built yet",
    ))
}
