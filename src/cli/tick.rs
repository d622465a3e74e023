//! `prewarm tick`. (Placeholder until its owner lands it.)

#[derive(Debug, clap::Args)]
pub struct TickArgs {}

pub async fn run(args: TickArgs) -> crate::Result<()> {
    let _ = args;
    Err(crate::Error::config(
        "command",
        "prewarm tick is not built yet",
    ))
}
