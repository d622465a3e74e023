//! Interruption planning, pure: what a notice is ([`notice`]), what to do per kind ([`actions`]),
//! when eviction must start ([`deadline`]), the drain state kept on the node ([`state`]), the
//! planner's views and commands ([`model`]), the step-by-step drain plan ([`drain`]) and what a
//! finished drain came to ([`figures`]). The adapters execute the plan's commands; nothing here
//! talks to Kubernetes or AWS, and the current time is always a parameter.

pub mod actions;
pub mod collection;
pub mod deadline;
pub mod drain;
pub mod false_alarm;
pub mod figures;
pub mod model;
pub mod notice;
pub mod pods;
pub mod replacement;
pub mod reservation;
pub mod restore;
pub mod retry;
pub mod state;
pub mod surge;
pub mod surge_floor;
pub mod surge_step;

pub use actions::{Action, ActionTable};
pub use collection::{
    plan_collection, CollectAction, CollectCommand, CollectedNode, CollectionSeen, PlaceholderSeen,
};
pub use deadline::{eviction_deadline, instance_end, issued_at};
pub use drain::plan_drain;
pub use figures::{drain_figures, ends_drain, DrainFigures};
pub use model::{
    Command, DrainSettings, DrainStep, Finish, NodeView, PodOwner, PodRef, PodView, ReplacementSeen,
};
pub use notice::{Notice, NoticeKind, NoticeStatus};
pub use replacement::reservation_expiry;
pub use reservation::{notice_of_record, plan_resume, ReservationVerdict};
pub use restore::{node_restore, NodeMarks, NodeRestore};
pub use state::{DrainState, Phase};
