//! When eviction must start at the latest, per kind of notice.

use super::notice::{Notice, NoticeKind};

/// A spot or capacity-reservation warning comes two minutes before the instance goes.
pub const WARNING_SECONDS: f64 = 120.0;

/// When the instance goes away (as far as the notice says), if it says.
pub fn instance_end(notice: &Notice) -> Option<f64> {
    match notice.kind {
        NoticeKind::SpotInterruption => Some(notice.time + WARNING_SECONDS),
        NoticeKind::CapacityReservation => Some(
            notice
                .termination_time
                .unwrap_or(notice.time + WARNING_SECONDS),
        ),
        NoticeKind::ScheduledChange => notice.window_start,
        // Already stopping or gone: the end is now.
        NoticeKind::StateChange => Some(notice.time),
        NoticeKind::Rebalance => None,
    }
}

/// The latest time eviction may start: the instance's end minus the eviction budget (the time
/// pods need to shut down and be rescheduled). A state change is due at once; a rebalance
/// recommendation has no deadline.
pub fn eviction_deadline(notice: &Notice, eviction_budget_s: f64) -> Option<f64> {
    match notice.kind {
        NoticeKind::StateChange => Some(notice.time),
        _ => instance_end(notice).map(|end| end - eviction_budget_s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::interruption::NoticeStatus;

    fn notice(kind: NoticeKind) -> Notice {
        Notice {
            event_id: "e".into(),
            kind,
            instance_ids: vec!["i-1".into()],
            time: 1000.0,
            instance_state: None,
            window_start: None,
            termination_time: None,
            status: NoticeStatus::Active,
            sent_time: None,
        }
    }

    #[test]
    fn deadline_per_kind() {
        let with = |kind, f: fn(&mut Notice)| {
            let mut n = notice(kind);
            f(&mut n);
            n
        };
        let cases = [
            (
                notice(NoticeKind::SpotInterruption),
                Some(1000.0 + 120.0 - 30.0),
            ),
            (notice(NoticeKind::CapacityReservation), Some(1090.0)),
            (
                with(NoticeKind::CapacityReservation, |n| {
                    n.termination_time = Some(1100.0)
                }),
                Some(1070.0),
            ),
            (
                with(NoticeKind::ScheduledChange, |n| {
                    n.window_start = Some(90_000.0)
                }),
                Some(89_970.0),
            ),
            (notice(NoticeKind::StateChange), Some(1000.0)),
            (notice(NoticeKind::Rebalance), None),
        ];
        for (n, expected) in cases {
            assert_eq!(eviction_deadline(&n, 30.0), expected, "{:?}", n.kind);
        }
    }
}
