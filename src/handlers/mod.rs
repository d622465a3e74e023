//! Lambda handlers: join the adapters to the core. Clients are built once at start-up and shared
//! by every invocation of a warm execution environment.

pub mod custom_resource;
pub mod interruption;
pub mod restore;
pub mod tick;

use crate::config::{Config, HandlerKind};

/// Lambda mode: validates the configuration (failing start-up with the variable's name; the
/// tick fails each scheduled invocation with it instead, see `tick::serve`), builds the clients
/// once, and serves invocations.
pub async fn run_lambda() -> crate::Result<()> {
    let kind = HandlerKind::from_env()?;
    // Each function reads only its own settings: a metric setting never stops drains.
    let config = Config::for_handler_from_env(kind);
    match kind {
        // The tick serves the stack's custom resource even when its settings are wrong (a
        // Create then fails naming the variable, a Delete goes through): it takes the error.
        HandlerKind::Tick => tick::serve(config).await,
        HandlerKind::Interruption => interruption::serve(config?).await,
    }
}
