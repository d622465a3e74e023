//! When eviction must start at the latest, per kind of notice, with every time the message body
//! states bounded by what can be checked.
//!
//! The body's times are claims; the record's SQS `SentTimestamp` is a fact (SQS stamps it on
//! receipt). The rule:
//!
//! 1. **Issued** ([`issued_at`]): the envelope's `time`, clamped into
//!    `[SentTimestamp − 24 h, SentTimestamp]`. A notice cannot have been issued after SQS received
//!    it, and EventBridge stops retrying a delivery after 24 hours (its maximum event age), so an
//!    honest notice is never older than that when it lands. Without a `SentTimestamp` (a bare
//!    EventBridge event given to `prewarm explain`) the envelope time is taken as it is.
//! 2. **Instance end** ([`instance_end`]), counted from the issued time: spot warning + 120 s;
//!    capacity-reservation `instance-termination-time` clamped into `[issued, issued + 120 s]`
//!    (a two-minute warning: a stated end outside it is not believed); Capacity Block: the
//!    reservation's `end-date` − 30 min, clamped into `[issued, issued + 10 min]` (AWS warns 40
//!    minutes before the end that termination begins 10 minutes later; without an `end-date`,
//!    issued + 10 min); a Health window start no later than issued + 8 weeks
//!    ([`MAX_SCHEDULED_LEAD_S`]; AWS announces maintenance about two weeks ahead, so honest
//!    windows are never cut, while a window in 2099 is); a state change ends at the issued time. A Health window already in the past is kept: the maintenance is
//!    under way, so eviction is due at once.
//! 3. **Deadline** ([`eviction_deadline`]): the end minus the eviction budget. A rebalance
//!    recommendation has none, and neither has a `Closed` Health notice (no drain is wanted).
//!
//! So an event time in 2099 yields a deadline 120 s − budget after SQS received the message, and
//! one in 1970 a deadline 24 h before it (that is: at once) rather than one in 1970.

use super::notice::{Notice, NoticeKind, NoticeStatus};

/// A spot or capacity-reservation warning comes two minutes before the instance goes.
pub const WARNING_SECONDS: f64 = 120.0;
/// A Capacity Block's expiration warning comes ten minutes before its instances begin to
/// terminate…
pub const CAPACITY_BLOCK_WARNING_SECONDS: f64 = 600.0;
/// …which is 30 minutes before the reservation's `end-date` (the warning comes 40 minutes
/// before it).
pub const CAPACITY_BLOCK_TERMINATION_LEAD_S: f64 = 1800.0;
/// EventBridge retries a delivery for at most 24 hours: no honest notice is older than this when
/// SQS receives it.
pub const MAX_DELIVERY_DELAY_S: f64 = 24.0 * 3600.0;
/// The latest a Health maintenance window is believed to start after the notice: 8 weeks, four
/// times the usual two weeks' notice.
pub const MAX_SCHEDULED_LEAD_S: f64 = 56.0 * 24.0 * 3600.0;

/// When the notice was issued, as far as it can be trusted: the envelope time clamped into
/// `[sent − MAX_DELIVERY_DELAY_S, sent]` when SQS's `SentTimestamp` is known.
pub fn issued_at(notice: &Notice) -> f64 {
    match notice.sent_time {
        // max/min rather than clamp: never panics, whatever the inputs.
        Some(sent) => notice.time.max(sent - MAX_DELIVERY_DELAY_S).min(sent),
        None => notice.time,
    }
}

/// When the instance goes away (as far as the notice says, bounded as the module explains), if
/// it says.
pub fn instance_end(notice: &Notice) -> Option<f64> {
    if notice.status == NoticeStatus::Closed {
        return None;
    }
    let issued = issued_at(notice);
    match notice.kind {
        NoticeKind::SpotInterruption => Some(issued + WARNING_SECONDS),
        NoticeKind::CapacityReservation => Some(
            notice
                .termination_time
                .map_or(issued + WARNING_SECONDS, |end| {
                    end.max(issued).min(issued + WARNING_SECONDS)
                }),
        ),
        NoticeKind::CapacityBlock => Some(notice.reservation_end.map_or(
            issued + CAPACITY_BLOCK_WARNING_SECONDS,
            |end| {
                (end - CAPACITY_BLOCK_TERMINATION_LEAD_S)
                    .max(issued)
                    .min(issued + CAPACITY_BLOCK_WARNING_SECONDS)
            },
        )),
        NoticeKind::ScheduledChange => notice
            .window_start
            .map(|start| start.min(issued + MAX_SCHEDULED_LEAD_S)),
        // Already stopping or gone: the end is now.
        NoticeKind::StateChange => Some(issued),
        NoticeKind::Rebalance => None,
    }
}

/// The latest time eviction may start: the instance's end minus the eviction budget (the time
/// pods need to shut down and be rescheduled). A state change is due at once; a rebalance
/// recommendation and a closed Health notice have no deadline.
pub fn eviction_deadline(notice: &Notice, eviction_budget_s: f64) -> Option<f64> {
    match notice.kind {
        NoticeKind::StateChange => instance_end(notice),
        _ => instance_end(notice).map(|end| end - eviction_budget_s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SENT: f64 = 1_795_953_600.0; // 2026-11-29T12:00:00Z
    const DAY: f64 = 86_400.0;

    fn notice(kind: NoticeKind, time: f64) -> Notice {
        Notice {
            instance_ids: vec!["i-0123456789abcdef0".into()],
            sent_time: Some(SENT),
            ..Notice::new("e", kind, time)
        }
    }

    fn with(mut n: Notice, f: impl FnOnce(&mut Notice)) -> Notice {
        f(&mut n);
        n
    }

    #[test]
    fn deadline_per_kind_without_sent_time() {
        let bare = |kind| with(notice(kind, 1000.0), |n| n.sent_time = None);
        let cases = [
            (
                bare(NoticeKind::SpotInterruption),
                Some(1000.0 + 120.0 - 30.0),
            ),
            (bare(NoticeKind::CapacityReservation), Some(1090.0)),
            // 1000 + 600 − 30.
            (bare(NoticeKind::CapacityBlock), Some(1570.0)),
            (
                // end-date 3100: terminates at 3100 − 1800 = 1300 (warned late); − 30.
                with(bare(NoticeKind::CapacityBlock), |n| {
                    n.reservation_end = Some(3100.0)
                }),
                Some(1270.0),
            ),
            (
                with(bare(NoticeKind::CapacityReservation), |n| {
                    n.termination_time = Some(1100.0)
                }),
                Some(1070.0),
            ),
            (
                with(bare(NoticeKind::ScheduledChange), |n| {
                    n.window_start = Some(90_000.0)
                }),
                Some(89_970.0),
            ),
            (bare(NoticeKind::StateChange), Some(1000.0)),
            (bare(NoticeKind::Rebalance), None),
        ];
        for (n, expected) in cases {
            assert_eq!(eviction_deadline(&n, 30.0), expected, "{:?}", n.kind);
        }
    }

    /// Each row: the notice, then the expected issued time and deadline (budget 30 s), worked
    /// out from the rule in the module comment.
    #[test]
    fn times_are_bounded_by_the_sent_timestamp() {
        let year_2099 = 4_099_766_400.0; // 2099-12-01T00:00:00Z
        let cases: Vec<(&str, Notice, f64, Option<f64>)> = vec![
            (
                "spot on time",
                notice(NoticeKind::SpotInterruption, SENT - 2.0),
                SENT - 2.0,
                Some(SENT - 2.0 + 90.0),
            ),
            (
                "spot from 2099 counts from SQS receipt",
                notice(NoticeKind::SpotInterruption, year_2099),
                SENT,
                Some(SENT + 90.0),
            ),
            (
                "spot from 1970 is at most a day old",
                notice(NoticeKind::SpotInterruption, 0.0),
                SENT - DAY,
                Some(SENT - DAY + 90.0),
            ),
            (
                "spot delivered 3 h late keeps its own time",
                notice(NoticeKind::SpotInterruption, SENT - 3.0 * 3600.0),
                SENT - 10_800.0,
                Some(SENT - 10_800.0 + 90.0),
            ),
            (
                "state change from 2099 is due at SQS receipt",
                notice(NoticeKind::StateChange, year_2099),
                SENT,
                Some(SENT),
            ),
            (
                "rebalance has no deadline whatever its time",
                notice(NoticeKind::Rebalance, year_2099),
                SENT,
                None,
            ),
            (
                "capacity reservation ending in 2099 ends 120 s after issue",
                with(notice(NoticeKind::CapacityReservation, SENT), |n| {
                    n.termination_time = Some(year_2099)
                }),
                SENT,
                Some(SENT + 90.0),
            ),
            (
                "capacity reservation ending before its warning ends at the warning",
                with(notice(NoticeKind::CapacityReservation, SENT), |n| {
                    n.termination_time = Some(SENT - 500.0)
                }),
                SENT,
                Some(SENT - 30.0),
            ),
            (
                "capacity reservation ending 100 s after issue is believed",
                with(notice(NoticeKind::CapacityReservation, SENT), |n| {
                    n.termination_time = Some(SENT + 100.0)
                }),
                SENT,
                Some(SENT + 70.0),
            ),
            (
                "capacity block ending 40 min after its warning terminates 10 min after it",
                // end-date SENT + 2400 − 1800 = SENT + 600, inside [SENT, SENT + 600]; − 30.
                with(notice(NoticeKind::CapacityBlock, SENT), |n| {
                    n.reservation_end = Some(SENT + 2400.0)
                }),
                SENT,
                Some(SENT + 570.0),
            ),
            (
                "capacity block warned late (end-date 35 min after issue) is believed",
                // SENT + 2100 − 1800 = SENT + 300; − 30.
                with(notice(NoticeKind::CapacityBlock, SENT - 60.0), |n| {
                    n.reservation_end = Some(SENT + 2100.0)
                }),
                SENT - 60.0,
                Some(SENT + 270.0),
            ),
            (
                "capacity block ending in 2099 terminates at most 10 min after issue",
                with(notice(NoticeKind::CapacityBlock, SENT), |n| {
                    n.reservation_end = Some(year_2099)
                }),
                SENT,
                Some(SENT + 600.0 - 30.0),
            ),
            (
                "capacity block already ended is due at the warning",
                // SENT − 3600 − 1800 is before the issue: raised to SENT; − 30.
                with(notice(NoticeKind::CapacityBlock, SENT), |n| {
                    n.reservation_end = Some(SENT - 3600.0)
                }),
                SENT,
                Some(SENT - 30.0),
            ),
            (
                "capacity block without end-date terminates 10 min after issue",
                notice(NoticeKind::CapacityBlock, SENT - 5.0),
                SENT - 5.0,
                Some(SENT - 5.0 + 600.0 - 30.0),
            ),
            (
                "capacity block from 2099 counts from SQS receipt",
                with(notice(NoticeKind::CapacityBlock, year_2099), |n| {
                    n.reservation_end = Some(year_2099 + 2400.0)
                }),
                SENT,
                Some(SENT + 570.0),
            ),
            (
                "health window in two weeks is believed",
                with(notice(NoticeKind::ScheduledChange, SENT), |n| {
                    n.window_start = Some(SENT + 14.0 * DAY)
                }),
                SENT,
                Some(SENT + 14.0 * DAY - 30.0),
            ),
            (
                "health window in 2099 starts at most 8 weeks after issue",
                with(notice(NoticeKind::ScheduledChange, SENT), |n| {
                    n.window_start = Some(year_2099)
                }),
                SENT,
                Some(SENT + 56.0 * DAY - 30.0),
            ),
            (
                "health window and event time both in 2099",
                with(notice(NoticeKind::ScheduledChange, year_2099), |n| {
                    n.window_start = Some(year_2099 + DAY)
                }),
                SENT,
                Some(SENT + 56.0 * DAY - 30.0),
            ),
            (
                "health window already open is due at once",
                with(notice(NoticeKind::ScheduledChange, SENT), |n| {
                    n.window_start = Some(SENT - 3600.0)
                }),
                SENT,
                Some(SENT - 3600.0 - 30.0),
            ),
            (
                "closed health notice has no deadline",
                with(notice(NoticeKind::ScheduledChange, SENT), |n| {
                    n.window_start = Some(SENT - 3600.0);
                    n.status = NoticeStatus::Closed;
                }),
                SENT,
                None,
            ),
        ];
        for (name, n, issued, deadline) in cases {
            assert_eq!(issued_at(&n), issued, "{name}: issued");
            assert_eq!(eviction_deadline(&n, 30.0), deadline, "{name}: deadline");
        }
    }

    #[test]
    fn bounds_never_panic_on_extreme_times() {
        for t in [f64::MIN, -1e300, 0.0, 1e300, f64::MAX] {
            let n = with(notice(NoticeKind::CapacityReservation, t), |n| {
                n.termination_time = Some(-t)
            });
            let issued = issued_at(&n);
            assert!((SENT - DAY..=SENT).contains(&issued), "{t}: {issued}");
            let d = eviction_deadline(&n, 30.0).unwrap();
            assert!((issued - 30.0..=issued + 90.0).contains(&d), "{t}: {d}");
        }
    }
}
