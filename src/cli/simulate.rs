//! `prewarm simulate`. (Placeholder until its owner lands it.)

#[derive(Debug, clap::Args)]
pub struct SimulateArgs {}

pub fn run(args: SimulateArgs) -> crate::Result<()> {
    let _ = args;
    Err(crate::Error::config(
        "command",
        "prewarm simulate is not built yet",
    ))
}
