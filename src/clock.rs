//! The one clock: the wall time, read at the edge (the handlers and the CLI commands) and passed
//! down as `now` (seconds since the Unix epoch), so that everything below it (the core, the
//! adapters) runs at whatever time it is given, a fixed one in tests.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, as a `SystemTime`: for what signs a request (an EKS token) or measures a deadline.
pub fn system_now() -> SystemTime {
    SystemTime::now()
}

/// Now, in seconds since the Unix epoch.
pub fn unix_now() -> f64 {
    unix_seconds(system_now())
}

/// `t` in seconds since the Unix epoch (0 before it).
pub fn unix_seconds(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The `SystemTime` of `unix_s` seconds since the Unix epoch (the epoch for a negative or
/// non-finite value): a `now` handed down, for what needs it as a `SystemTime`.
pub fn system_time(unix_s: f64) -> SystemTime {
    UNIX_EPOCH + std::time::Duration::try_from_secs_f64(unix_s).unwrap_or_default()
}

/// Now, in whole milliseconds since the Unix epoch (EMF timestamps).
pub fn unix_millis() -> i64 {
    system_now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn seconds_since_the_epoch_keep_the_fraction() {
        // 1_795_953_600.25 s after the epoch is 2026-11-29T12:00:00.250Z; before it counts as 0.
        let t = UNIX_EPOCH + Duration::from_millis(1_795_953_600_250);
        assert_eq!(unix_seconds(t), 1_795_953_600.25);
        assert_eq!(unix_seconds(UNIX_EPOCH - Duration::from_secs(1)), 0.0);
    }
}
