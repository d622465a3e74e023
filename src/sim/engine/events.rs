//! The event queue's entries and their order at equal times.

use std::cmp::Ordering;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Kind {
    // Same-time order: completions free slots first, the metric sample is taken before the
    // controllers that read it.
    Completion {
        pod: usize,
    },
    PodServing {
        pod: usize,
    },
    Sample,
    Hpa,
    Tick,
    Provision,
    EmptyCheck {
        node: usize,
    },
    /// A pass of Karpenter's disruption controller, and the validation of its command.
    Disruption,
    DisruptionValidate,
    /// The node hints launch a node ahead of demand.
    Prelaunch {
        index: usize,
    },
    /// A scan of Cluster Autoscaler's scale-down (the rough world).
    ScaleDown,
}

#[derive(Debug)]
pub(super) struct Event {
    pub(super) t: f64,
    pub(super) seq: u64,
    pub(super) kind: Kind,
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    // BinaryHeap is a max-heap: reverse so the earliest event comes first.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .t
            .total_cmp(&self.t)
            .then_with(|| class(&other.kind).cmp(&class(&self.kind)))
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

pub(super) fn class(kind: &Kind) -> u8 {
    match kind {
        Kind::Completion { .. } => 0,
        Kind::PodServing { .. } => 1,
        Kind::Sample => 2,
        Kind::Hpa => 3,
        Kind::Tick => 4,
        Kind::Provision => 5,
        Kind::EmptyCheck { .. } => 6,
        Kind::Disruption => 7,
        Kind::DisruptionValidate => 8,
        Kind::Prelaunch { .. } => 9,
        Kind::ScaleDown => 10,
    }
}
