//! One binary, two faces: inside AWS Lambda (AWS_LAMBDA_RUNTIME_API is set) it serves the handler
//! named by PREWARM_HANDLER; anywhere else it is the `prewarm` command line.

use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    prewarm::telemetry::init_logging();
    let result = if std::env::var_os("AWS_LAMBDA_RUNTIME_API").is_some() {
        prewarm::handlers::run_lambda().await
    } else {
        prewarm::cli::run(prewarm::cli::Cli::parse()).await
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(error = %error, error_kind = error.kind(), "prewarm failed");
            eprintln!("prewarm: {error}");
            ExitCode::FAILURE
        }
    }
}
