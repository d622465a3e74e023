//! Stage: scheduled windows. Launches, batch jobs and known events are announced, not
//! forecast: a target lists cron windows (five-field cron, an IANA zone, a duration) with a
//! minimum spare. Capacity must be Ready when a window starts, so a window counts from one lead
//! time before its start until its end; overlapping windows take the maximum. The anchors are
//! KEDA's cron scaler (start, end, desired replicas, timezone) and EC2 Auto Scaling scheduled
//! actions. Zones are evaluated by croner over chrono-tz, so DST shifts move the wall clock,
//! not the window.

use chrono::TimeZone;

pub use crate::spec::parse_cron;
use crate::spec::{parse_time_zone, ScheduleWindow};

/// The largest `min_spare` of the windows that cover any moment of `[now, now + lead]`, and
/// the index of that window. Windows that do not parse (validation rejects them at start-up)
/// are skipped.
pub fn scheduled_floor(
    windows: &[ScheduleWindow],
    default_zone: &chrono_tz::Tz,
    now: f64,
    lead_s: f64,
) -> Option<(u32, usize)> {
    let mut best: Option<(u32, usize)> = None;
    for (i, w) in windows.iter().enumerate() {
        let Ok(cron) = parse_cron(&w.cron) else {
            continue;
        };
        let zone = match &w.time_zone {
            Some(z) => match parse_time_zone(z) {
                Ok(z) => z,
                Err(_) => continue,
            },
            None => *default_zone,
        };
        // The latest start at or before now + lead; later starts are not due yet, earlier
        // ones end earlier (all windows of one entry last equally long).
        let horizon = (now + lead_s).floor() as i64;
        let Some(at) = zone.timestamp_opt(horizon, 0).single() else {
            continue;
        };
        let Ok(start) = cron.find_previous_occurrence(&at, true) else {
            continue;
        };
        let start = start.timestamp() as f64;
        if start + w.duration_seconds > now && best.is_none_or(|(m, _)| w.min_spare > m) {
            best = Some((w.min_spare, i));
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-03-27T12:00:00Z, a Friday; Europe/Berlin is UTC+1 until the DST switch on
    /// Sunday 2026-03-29 at 01:00 UTC, then UTC+2.
    const FRI_NOON_UTC: f64 = 1_774_612_800.0;
    const H: f64 = 3600.0;

    fn window(cron: &str, zone: Option<&str>, minutes: f64, spare: u32) -> ScheduleWindow {
        ScheduleWindow {
            cron: cron.into(),
            time_zone: zone.map(str::to_string),
            duration_seconds: minutes * 60.0,
            min_spare: spare,
        }
    }

    #[test]
    fn schedule_table() {
        let utc = chrono_tz::UTC;
        let berlin: chrono_tz::Tz = "Europe/Berlin".parse().unwrap();
        // (name, windows, default zone, now, lead, want)
        type Row = (
            &'static str,
            Vec<ScheduleWindow>,
            chrono_tz::Tz,
            f64,
            f64,
            Option<(u32, usize)>,
        );
        let rows: Vec<Row> = vec![
            // 14:00 UTC daily for 30 min; at 13:57 with a 180 s lead the window starts at
            // 14:00 = now + lead exactly: active.
            (
                "starts one lead time ahead",
                vec![window("0 14 * * *", None, 30.0, 3)],
                utc,
                FRI_NOON_UTC + 2.0 * H - 180.0,
                180.0,
                Some((3, 0)),
            ),
            // One second earlier it is not due yet.
            (
                "not yet",
                vec![window("0 14 * * *", None, 30.0, 3)],
                utc,
                FRI_NOON_UTC + 2.0 * H - 181.0,
                180.0,
                None,
            ),
            // Inside the window and at its last second.
            (
                "inside",
                vec![window("0 14 * * *", None, 30.0, 3)],
                utc,
                FRI_NOON_UTC + 2.0 * H + 1799.0,
                180.0,
                Some((3, 0)),
            ),
            // Ends at 14:30: at 14:30 the window is over.
            (
                "over",
                vec![window("0 14 * * *", None, 30.0, 3)],
                utc,
                FRI_NOON_UTC + 2.5 * H,
                180.0,
                None,
            ),
            // 13:00 in Berlin is 12:00 UTC on this Friday (UTC+1): active at noon UTC.
            (
                "zone of the window",
                vec![window("0 13 * * *", Some("Europe/Berlin"), 10.0, 2)],
                utc,
                FRI_NOON_UTC,
                0.0,
                Some((2, 0)),
            ),
            // The default zone applies when the window names none.
            (
                "default zone",
                vec![window("0 13 * * *", None, 10.0, 2)],
                berlin,
                FRI_NOON_UTC,
                0.0,
                Some((2, 0)),
            ),
            // After the DST switch 13:00 Berlin is 11:00 UTC: Monday 2026-03-30 at 11:00 UTC
            // is inside, at 12:00 UTC (the winter time) it is over.
            (
                "DST moves the wall clock",
                vec![window("0 13 * * *", Some("Europe/Berlin"), 10.0, 2)],
                utc,
                FRI_NOON_UTC + 3.0 * 24.0 * H - H,
                0.0,
                Some((2, 0)),
            ),
            (
                "DST: winter time is over",
                vec![window("0 13 * * *", Some("Europe/Berlin"), 10.0, 2)],
                utc,
                FRI_NOON_UTC + 3.0 * 24.0 * H,
                0.0,
                None,
            ),
            // Weekdays only: Saturday noon is outside.
            (
                "weekdays",
                vec![window("0 12 * * 1-5", None, 60.0, 4)],
                utc,
                FRI_NOON_UTC + 24.0 * H,
                0.0,
                None,
            ),
            (
                "weekdays, friday",
                vec![window("0 12 * * 1-5", None, 60.0, 4)],
                utc,
                FRI_NOON_UTC,
                0.0,
                Some((4, 0)),
            ),
            // Overlapping windows take the maximum.
            (
                "overlap takes the max",
                vec![
                    window("0 12 * * *", None, 60.0, 2),
                    window("30 11 * * *", None, 120.0, 5),
                    window("0 11 * * *", None, 30.0, 9),
                ],
                utc,
                FRI_NOON_UTC,
                0.0,
                Some((5, 1)),
            ),
            ("none", vec![], utc, FRI_NOON_UTC, 180.0, None),
        ];
        for (name, windows, zone, now, lead, want) in rows {
            assert_eq!(scheduled_floor(&windows, &zone, now, lead), want, "{name}");
        }
    }

    #[test]
    fn cron_errors_say_what_is_wrong() {
        assert!(parse_cron("0 14 * * *").is_ok());
        assert!(parse_cron("0 0 14 * * *").unwrap_err().contains("6 fields"));
        assert!(parse_cron("0 25 * * *")
            .unwrap_err()
            .contains("not a valid cron"));
        assert!(parse_cron("@daily").is_ok());
    }
}
