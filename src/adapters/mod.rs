//! Thin edges: metric sources, Kubernetes operations, event parsing.

pub mod cfn_response;
pub mod events;
pub mod kube;
pub mod metrics;
pub mod queue;
