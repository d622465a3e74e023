//! Lambda handlers: join the adapters to the core. Clients are built once at start-up and shared
//! by every invocation of a warm execution environment.

pub mod interruption;
pub mod tick;

use crate::config::{Config, HandlerKind};

/// Lambda mode: validates the configuration (failing start-up with the variable's name), builds
/// the clients once, and serves invocations.
pub async fn run_lambda() -> crate::Result<()> {
    let kind = HandlerKind::from_env()?;
    let config = Config::from_env()?;
    match kind {
        HandlerKind::Tick => tick::serve(config).await,
        HandlerKind::Interruption => interruption::serve(config).await,
    }
}
