//! Fixtures of the drain planner's table tests (`#[path]`-included by
//! `interruption_drain_plan.rs` and `interruption_drain_grace.rs`; pure values, no stack).

use prewarm::core::interruption::{NodeView, ReplacementSeen};

/// The notice time of every table: 2026-11-29T12:00:00Z.
pub const T0: f64 = 1_795_953_600.0;

/// The draining node: 8 GPUs, not yet cordoned or tainted, no drain state, its replacement
/// placeholder as `replacement` says.
pub fn node(replacement: ReplacementSeen) -> NodeView {
    NodeView {
        name: "gpu-node-a".into(),
        unschedulable: false,
        tainted: false,
        gpus: 8,
        state: None,
        replacement,
        closed_event: None,
        false_alarm_at: None,
    }
}
