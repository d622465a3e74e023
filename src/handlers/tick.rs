//! The scheduled tick handler. (Placeholder until the kube/tick owner lands it.)

use crate::config::Config;

pub async fn serve(config: Config) -> crate::Result<()> {
    config.require_tick_ready()?;
    Err(crate::Error::config(
        "PREWARM_HANDLER",
        "the tick handler is not built yet",
    ))
}
