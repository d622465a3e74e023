//! prewarm's state on the headroom object, as `prewarm.io/*` annotations: parsing them into a
//! `HeadroomState` and rendering the changes of a plan as a JSON merge patch fragment.
//!
//! The Lambda keeps nothing in memory between invocations, so the object itself carries the
//! cooldown, the scale-down hold, the last tick and the replacement reservations of drains.
//! Times are RFC 3339 (readable with `kubectl get -o yaml`), read back as Unix seconds.
//!
//! Size convention (shared with `core::decide`): `HeadroomState::spare` is the object's whole
//! size (`spec.replicas`), which includes the `replacement_reserved` replicas the interruption
//! path added for draining nodes; the policy keeps those on top of its own share.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::core::spec::Hold;
use crate::core::HeadroomState;

pub const COOLDOWN_UNTIL: &str = "prewarm.io/cooldown-until";
pub const HOLD: &str = "prewarm.io/hold";
pub const LAST_TICK: &str = "prewarm.io/last-tick";
/// Total replicas reserved for replacements (for people; derived from the drains map).
pub const REPLACEMENT_RESERVED: &str = "prewarm.io/replacement-reserved";
/// JSON object `{drain id: replicas}`: which drains reserved what, so reserve/release are
/// idempotent per drain however often a message is redelivered.
pub const REPLACEMENT_DRAINS: &str = "prewarm.io/replacement-drains";
/// JSON of `core::band::Calibration`: the hourly long-window statistics (a cache; a malformed
/// value is dropped and recomputed, never an error).
pub const CALIBRATION: &str = "prewarm.io/calibration";

/// The headroom object as read: its size, the tick's state and the reservations by drain.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedHeadroom {
    pub size: u32,
    pub state: HeadroomState,
    pub drains: BTreeMap<String, u32>,
}

#[derive(Serialize, Deserialize)]
struct HoldAnnotation {
    spare: u32,
    until: String,
}

pub fn format_time(unix_s: f64) -> String {
    let ms = (unix_s * 1000.0).round() as i64;
    DateTime::<Utc>::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Parses an RFC 3339 time into Unix seconds (the core's, which the HPA floor's lease uses too).
pub use crate::core::interruption::state::parse_annotation_time as parse_time;

fn annotation_error(key: &str, message: impl std::fmt::Display) -> String {
    format!("annotation {key}: {message}")
}

/// Reads prewarm's annotations. A malformed annotation is an error naming it (the caller then
/// writes nothing): guessing could drop a cooldown, a hold or a drain's reservation.
pub fn parse_headroom(
    size: u32,
    annotations: &BTreeMap<String, String>,
) -> Result<ParsedHeadroom, String> {
    let time = |key: &str| -> Result<Option<f64>, String> {
        annotations
            .get(key)
            .map(|raw| parse_time(raw).map_err(|e| annotation_error(key, e)))
            .transpose()
    };
    let cooldown_until = time(COOLDOWN_UNTIL)?;
    let last_tick = time(LAST_TICK)?;
    let hold = annotations
        .get(HOLD)
        .map(|raw| {
            let h: HoldAnnotation = serde_json::from_str(raw).map_err(|e| {
                annotation_error(
                    HOLD,
                    format!("expected {{\"spare\":N,\"until\":TIME}}: {e}"),
                )
            })?;
            Ok::<_, String>(Hold {
                spare: h.spare,
                until: parse_time(&h.until).map_err(|e| annotation_error(HOLD, e))?,
            })
        })
        .transpose()?;
    let drains: BTreeMap<String, u32> = match annotations.get(REPLACEMENT_DRAINS) {
        Some(raw) => serde_json::from_str(raw).map_err(|e| {
            annotation_error(
                REPLACEMENT_DRAINS,
                format!("expected a JSON object of drain id to replicas: {e}"),
            )
        })?,
        None => BTreeMap::new(),
    };
    let replacement_reserved = if annotations.contains_key(REPLACEMENT_DRAINS) {
        drains.values().sum()
    } else {
        match annotations.get(REPLACEMENT_RESERVED) {
            Some(raw) => raw.trim().parse::<u32>().map_err(|_| {
                annotation_error(
                    REPLACEMENT_RESERVED,
                    format!("expected a count, got {raw:?}"),
                )
            })?,
            None => 0,
        }
    };
    Ok(ParsedHeadroom {
        size,
        state: HeadroomState {
            spare: size,
            cooldown_until,
            hold,
            replacement_reserved,
            consolidation_frozen: false,
            last_tick,
            calibration: annotations
                .get(CALIBRATION)
                .and_then(|raw| serde_json::from_str(raw).ok()),
        },
        drains,
    })
}

/// The tick-owned annotations that change from `current` to `next` (null removes one), plus
/// `last-tick = now`. Replacement annotations belong to the interruption path and are left out.
pub fn tick_annotation_patch(
    current: &HeadroomState,
    next: &HeadroomState,
    now: f64,
) -> Map<String, Value> {
    let mut patch = Map::new();
    if current.cooldown_until != next.cooldown_until {
        patch.insert(
            COOLDOWN_UNTIL.into(),
            next.cooldown_until
                .map_or(Value::Null, |t| Value::String(format_time(t))),
        );
    }
    if current.hold != next.hold {
        patch.insert(
            HOLD.into(),
            next.hold.map_or(Value::Null, |h| {
                Value::String(
                    serde_json::to_string(&HoldAnnotation {
                        spare: h.spare,
                        until: format_time(h.until),
                    })
                    .expect("a hold always serialises"),
                )
            }),
        );
    }
    if current.calibration != next.calibration {
        patch.insert(
            CALIBRATION.into(),
            next.calibration.as_ref().map_or(Value::Null, |c| {
                Value::String(serde_json::to_string(c).expect("a calibration serialises"))
            }),
        );
    }
    patch.insert(LAST_TICK.into(), Value::String(format_time(now)));
    patch
}

/// The replacement annotations for a drains map (both removed when it is empty).
pub fn drains_patch(drains: &BTreeMap<String, u32>) -> Map<String, Value> {
    let mut patch = Map::new();
    if drains.is_empty() {
        patch.insert(REPLACEMENT_DRAINS.into(), Value::Null);
        patch.insert(REPLACEMENT_RESERVED.into(), Value::Null);
    } else {
        patch.insert(
            REPLACEMENT_DRAINS.into(),
            Value::String(serde_json::to_string(drains).expect("a map always serialises")),
        );
        patch.insert(
            REPLACEMENT_RESERVED.into(),
            Value::String(drains.values().sum::<u32>().to_string()),
        );
    }
    patch
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::string_map;

    // 2026-11-29T12:00:00Z
    const NOON: f64 = 1_795_953_600.0;

    #[test]
    fn times_are_rfc3339_in_utc_with_milliseconds() {
        assert_eq!(format_time(NOON), "2026-11-29T12:00:00.000Z");
        assert_eq!(format_time(NOON + 0.25), "2026-11-29T12:00:00.250Z");
        assert_eq!(parse_time("2026-11-29T12:00:00Z").unwrap(), NOON);
        assert_eq!(
            parse_time("2026-11-29T13:00:00.500+01:00").unwrap(),
            NOON + 0.5
        );
        assert!(parse_time("1795953600").is_err());
    }

    #[test]
    fn no_annotations_means_a_fresh_state_sized_by_the_object() {
        let p = parse_headroom(3, &BTreeMap::new()).unwrap();
        assert_eq!(
            p.state,
            HeadroomState {
                spare: 3,
                ..HeadroomState::default()
            }
        );
        assert!(p.drains.is_empty());
    }

    #[test]
    fn every_annotation_is_read() {
        let a = string_map(&[
            (COOLDOWN_UNTIL, "2026-11-29T12:01:00Z"),
            (HOLD, r#"{"spare":4,"until":"2026-11-29T12:05:00Z"}"#),
            (LAST_TICK, "2026-11-29T11:59:45Z"),
            (REPLACEMENT_DRAINS, r#"{"evt-1":2,"evt-2":1}"#),
            (REPLACEMENT_RESERVED, "3"),
        ]);
        let p = parse_headroom(7, &a).unwrap();
        assert_eq!(
            p.state,
            HeadroomState {
                spare: 7,
                cooldown_until: Some(NOON + 60.0),
                hold: Some(Hold {
                    spare: 4,
                    until: NOON + 300.0
                }),
                replacement_reserved: 3,
                consolidation_frozen: false,
                last_tick: Some(NOON - 15.0),
                calibration: None,
            }
        );
        assert_eq!(
            p.drains,
            BTreeMap::from([("evt-1".into(), 2), ("evt-2".into(), 1)])
        );
    }

    #[test]
    fn the_drains_map_wins_over_the_total() {
        let a = string_map(&[
            (REPLACEMENT_DRAINS, r#"{"evt-1":5}"#),
            (REPLACEMENT_RESERVED, "1"),
        ]);
        let p = parse_headroom(2, &a).unwrap();
        assert_eq!(p.state.replacement_reserved, 5);
        assert_eq!(p.state.spare, 2);
    }

    #[test]
    fn a_malformed_annotation_is_named() {
        let cases = [
            (COOLDOWN_UNTIL, "soon"),
            (LAST_TICK, "yesterday"),
            (HOLD, "4"),
            (HOLD, r#"{"spare":4,"until":"later"}"#),
            (REPLACEMENT_DRAINS, "[1,2]"),
            (REPLACEMENT_RESERVED, "-1"),
        ];
        for (key, value) in cases {
            let err = parse_headroom(1, &string_map(&[(key, value)])).unwrap_err();
            assert!(err.contains(key), "{key}={value}: {err}");
        }
    }

    #[test]
    fn the_patch_carries_only_what_changed_and_always_the_last_tick() {
        let current = HeadroomState {
            spare: 2,
            cooldown_until: Some(NOON - 10.0),
            hold: Some(Hold {
                spare: 2,
                until: NOON + 100.0,
            }),
            ..HeadroomState::default()
        };
        let next = HeadroomState {
            spare: 4,
            cooldown_until: Some(NOON + 60.0),
            hold: None,
            ..current.clone()
        };
        let patch = tick_annotation_patch(&current, &next, NOON);
        assert_eq!(
            Value::Object(patch),
            serde_json::json!({
                "prewarm.io/cooldown-until": "2026-11-29T12:01:00.000Z",
                "prewarm.io/hold": null,
                "prewarm.io/last-tick": "2026-11-29T12:00:00.000Z",
            })
        );
        let unchanged = tick_annotation_patch(&current, &current, NOON);
        assert_eq!(unchanged.len(), 1);
        assert!(unchanged.contains_key(LAST_TICK));
    }

    #[test]
    fn a_written_hold_reads_back_the_same() {
        let next = HeadroomState {
            hold: Some(Hold {
                spare: 6,
                until: NOON + 300.5,
            }),
            ..HeadroomState::default()
        };
        let patch = tick_annotation_patch(&HeadroomState::default(), &next, NOON);
        let written: BTreeMap<String, String> = patch
            .into_iter()
            .map(|(k, v)| (k, v.as_str().unwrap().to_string()))
            .collect();
        let back = parse_headroom(6, &written).unwrap();
        assert_eq!(back.state.hold, next.hold);
        assert_eq!(back.state.last_tick, Some(NOON));
    }

    #[test]
    fn drains_render_with_their_total_and_vanish_when_empty() {
        let drains = BTreeMap::from([("a".to_string(), 2u32), ("b".to_string(), 3u32)]);
        assert_eq!(
            Value::Object(drains_patch(&drains)),
            serde_json::json!({
                "prewarm.io/replacement-drains": "{\"a\":2,\"b\":3}",
                "prewarm.io/replacement-reserved": "5",
            })
        );
        assert_eq!(
            Value::Object(drains_patch(&BTreeMap::new())),
            serde_json::json!({
                "prewarm.io/replacement-drains": null,
                "prewarm.io/replacement-reserved": null,
            })
        );
    }
}
