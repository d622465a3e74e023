//! The SQS interruption handler. (Placeholder until the interruption owner lands it.)

use crate::config::Config;

pub async fn serve(config: Config) -> crate::Result<()> {
    let _ = config;
    Err(crate::Error::config(
        "PREWARM_HANDLER",
        "the interruption handler is not built yet",
    ))
}
