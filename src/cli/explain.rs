//! `prewarm explain`. (Placeholder until its owner lands it.)

#[derive(Debug, clap::Args)]
pub struct ExplainArgs {}

pub fn run(args: ExplainArgs) -> crate::Result<()> {
    let _ = args;
    Err(crate::Error::config(
        "command",
        "prewarm explain is not built yet",
    ))
}
