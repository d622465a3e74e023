//! Kubernetes: client (kubeconfig or EKS token), headroom actuators, NodePool limits and budgets,
//! pending and serving pods. (Kube owner; `drain/` belongs to the interruption path.)
//!
//! Everything that decides what to write is a pure function (state parsing, patch building) with
//! unit tests; the async functions around them only read, call those functions and send.

pub mod api_error;
pub mod client;
pub mod conflict;
pub mod drain;
pub mod headroom;
pub mod hpa;
pub mod lead_times;
pub mod nodepool;
pub mod pods;
pub mod resources;
pub mod restore;
pub mod shape;
pub mod targets;

pub use client::{client, ClientCache};
