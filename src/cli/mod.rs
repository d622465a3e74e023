//! The `prewarm` command line for people: run a tick, explain events, simulate and backtest,
//! price the tick's metric reads.

use clap::{Parser, Subcommand};

pub mod backtest;
pub mod explain;
pub mod explain_lead;
pub mod explain_replay;
pub mod explain_target;
pub mod query_cost;
pub mod replay_state;
pub mod replay_surge;
pub mod restore;
pub mod simulate;
pub mod tick;
pub mod workload_args;

#[derive(Debug, Parser)]
#[command(
    name = "prewarm",
    version,
    about = "Warm GPU capacity ahead of LLM inference demand"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one decision against the configured sources and print the plan.
    Tick(tick::TickArgs),
    /// Explain what the interruption handler would do with an SQS or EventBridge event, or
    /// (--target) which of a target's delayed requests a forecast could have prevented.
    Explain(explain::ExplainArgs),
    /// Simulate policies on a request trace or a built-in scenario.
    Simulate(simulate::SimulateArgs),
    /// Replay a metrics history (queue length, arrival rate) through the policies.
    Backtest(backtest::BacktestArgs),
    /// Put back what prewarm changed in the cluster (budgets, sizes, annotations).
    Restore(restore::RestoreArgs),
    /// Count the samples and metrics the tick's reads ask for and price them a month (AMP,
    /// CloudWatch) for a fleet of vLLM targets.
    QueryCost(query_cost::QueryCostArgs),
}

/// Runs the command line; returns the process exit code.
pub async fn run(cli: Cli) -> crate::Result<()> {
    match cli.command {
        Command::Tick(args) => tick::run(args).await,
        Command::Explain(args) => explain::run(args).await,
        Command::Simulate(args) => simulate::run(args),
        Command::Backtest(args) => backtest::run(args).await,
        Command::Restore(args) => restore::run(args).await,
        Command::QueryCost(args) => query_cost::run(args),
    }
}
