//! Interruption planning, pure: what a notice is ([`notice`]), what to do per kind ([`actions`]),
//! when eviction must start ([`deadline`]), the drain state kept on the node ([`state`]) and the
//! step-by-step drain plan ([`drain`]). The adapters execute the plan's commands; nothing here
//! talks to Kubernetes or AWS, and the current time is always a parameter.

pub mod actions;
pub mod deadline;
pub mod drain;
pub mod lease;
pub mod notice;
pub mod pods;
pub mod replacement;
pub mod state;

pub use actions::{Action, ActionTable};
pub use deadline::{eviction_deadline, instance_end, issued_at};
pub use drain::{
    owner_alive, plan_drain, Command, DrainSettings, DrainStep, Finish, NodeView, PodOwner, PodRef,
    PodView,
};
pub use lease::{lease_verdict, LeaseVerdict, NodeSeen};
pub use notice::{Notice, NoticeKind, NoticeStatus};
pub use replacement::{lease_expiry, placeholder_verdict, PlaceholderVerdict, ReplacementSeen};
pub use state::{DrainState, Phase};
