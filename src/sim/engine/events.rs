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

/// An event, its place in the queue precomputed at push: the heap compares every event it
/// moves past, so the order is two integers instead of a float's total order and a match.
#[derive(Debug)]
pub(super) struct Event {
    /// `t`'s bits as `f64::total_cmp` orders them (an involution: `t()` undoes it).
    t_key: i64,
    /// The class in the top byte, the push sequence number below it.
    rank: u64,
    pub(super) kind: Kind,
}

impl Event {
    pub(super) fn new(t: f64, seq: u64, kind: Kind) -> Self {
        debug_assert!(
            seq < 1 << 56,
            "the sequence number stays below the class byte"
        );
        Event {
            t_key: total_order_key(t.to_bits() as i64),
            rank: (u64::from(class(&kind)) << 56) | seq,
            kind,
        }
    }

    pub(super) fn t(&self) -> f64 {
        f64::from_bits(total_order_key(self.t_key) as u64)
    }
}

/// What `f64::total_cmp` compares a float's bits as: negative numbers' magnitude bits flipped.
fn total_order_key(bits: i64) -> i64 {
    bits ^ (((bits >> 63) as u64) >> 1) as i64
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
    // BinaryHeap is a max-heap: reverse so the earliest event comes first (then by class,
    // then by push order).
    fn cmp(&self, other: &Self) -> Ordering {
        (other.t_key, other.rank).cmp(&(self.t_key, self.rank))
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BinaryHeap;

    #[test]
    fn the_queue_pops_by_time_then_class_then_push_order() {
        // Pushed as (t, seq, kind); expected by hand: t = -1 first, then at t = 5 the
        // completion (class 0) before the sample (class 2) whatever their sequence numbers,
        // the two ticks (class 4) in push order, and t = 7.5 last.
        let pushed = [
            (7.5, 1, Kind::Sample),
            (5.0, 2, Kind::Tick),
            (5.0, 3, Kind::Sample),
            (-1.0, 4, Kind::Hpa),
            (5.0, 5, Kind::Completion { pod: 9 }),
            (5.0, 6, Kind::Tick),
        ];
        let mut heap: BinaryHeap<Event> = pushed
            .iter()
            .map(|&(t, seq, kind)| Event::new(t, seq, kind))
            .collect();
        let mut popped = Vec::new();
        while let Some(e) = heap.pop() {
            popped.push((e.t(), e.rank & ((1 << 56) - 1)));
        }
        assert_eq!(
            popped,
            [(-1.0, 4), (5.0, 5), (5.0, 3), (5.0, 2), (5.0, 6), (7.5, 1)]
        );
    }
}
