//! prewarm: keep warm GPU capacity ahead of LLM inference demand on EKS with Karpenter, and drain
//! interrupted nodes make-before-break.
//!
//! Layout (pure core, thin edges):
//! - [`core`]: forecast, sizing, policy and interruption planning. No tokio, kube or AWS here:
//!   time is a parameter, state is passed in and returned.
//! - [`adapters`]: metric sources, Kubernetes operations, event parsing, EMF output.
//! - [`handlers`]: the tick and interruption handlers that join adapters to the core.
//! - [`sim`]: the discrete-event simulator that runs the same core code on request traces.
//! - [`cli`]: the `prewarm` command line for people.
//! - [`clock`]: the one reading of the wall time, at the edge; below it `now` is a parameter.

pub mod adapters;
pub mod cli;
pub mod clock;
pub mod config;
pub mod error;
pub mod handlers;
pub mod sim;
pub mod telemetry;
#[cfg(test)]
pub(crate) mod test_util;

/// The pure core, its own crate (src/core) so that the compiler keeps it free of tokio, kube and
/// AWS; re-exported here so that `crate::core::...` and `prewarm::core::...` name it everywhere.
pub use prewarm_core as core;

pub use error::{Error, Result};
