//! The drain state prewarm keeps on the node itself (`prewarm.io/drain-*` annotations). Keeping
//! it there makes every step idempotent: a re-delivered or duplicate message reads what was done
//! and carries on, and any number of Lambda instances agree on one story.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

use super::notice::NoticeKind;

pub const EVENT_ID: &str = "prewarm.io/drain-event-id";
pub const KIND: &str = "prewarm.io/drain-kind";
pub const PHASE: &str = "prewarm.io/drain-phase";
pub const NOTICE_TIME: &str = "prewarm.io/drain-notice-time";
pub const DEADLINE: &str = "prewarm.io/drain-deadline";
pub const STARTED_AT: &str = "prewarm.io/drain-started-at";
pub const REPLACEMENT_REQUESTED_AT: &str = "prewarm.io/drain-replacement-requested-at";
pub const REPLACEMENT_READY_AT: &str = "prewarm.io/drain-replacement-ready-at";
pub const EVICTING_SINCE: &str = "prewarm.io/drain-evicting-since";
pub const FINISHED_AT: &str = "prewarm.io/drain-finished-at";
pub const REPLACEMENT_GPUS: &str = "prewarm.io/drain-replacement-gpus";
pub const INSTANCE_END: &str = "prewarm.io/drain-instance-end";
pub const LAST_STEP_AT: &str = "prewarm.io/drain-last-step-at";
pub const NEXT_CHECK_AT: &str = "prewarm.io/drain-next-check-at";
pub const EVENT_TIME: &str = "prewarm.io/drain-event-time";
/// "true" when the node was already cordoned by someone else when prewarm claimed it: un-draining
/// then leaves that cordon in place.
pub const USER_CORDONED: &str = "prewarm.io/drain-user-cordoned";
/// How many pods the drain has evicted (or deleted past a budget) so far: the executor adds a
/// step's own after its evictions (`adapters::kube::drain::pods_moved_patch`). Absent: none.
pub const PODS_MOVED: &str = "prewarm.io/drain-pods-moved";

/// `<time> <event id>` of the last notice that closed a drain of this node (AWS Health
/// `closed`). Not a drain key: it stays after the un-drain, so deliveries of that notice still in
/// the queue do not drain the node again.
pub const CLOSED_EVENT: &str = "prewarm.io/closed-event";

/// When the last drain of a rebalance recommendation ended with the node still there (a false
/// alarm). Not a drain key: it stays after the un-drain, for the cool-down of the next rebalance.
pub const FALSE_ALARM_AT: &str = "prewarm.io/rebalance-false-alarm-at";

/// Every annotation key, so an executor can write (or clear) the whole set in one patch.
pub const ALL_KEYS: [&str; 17] = [
    EVENT_ID,
    KIND,
    PHASE,
    NOTICE_TIME,
    DEADLINE,
    STARTED_AT,
    REPLACEMENT_REQUESTED_AT,
    REPLACEMENT_READY_AT,
    EVICTING_SINCE,
    FINISHED_AT,
    REPLACEMENT_GPUS,
    INSTANCE_END,
    LAST_STEP_AT,
    NEXT_CHECK_AT,
    EVENT_TIME,
    USER_CORDONED,
    PODS_MOVED,
];

/// Where a drain stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Cordoned and tainted; the replacement is requested; pods still serve.
    WaitingForReplacement,
    /// Evicting pods tier by tier.
    Evicting,
    /// No pods left to evict (or only do-not-disrupt pods on a notice without deadline).
    Drained,
    /// cordon-prewarm: the replacement is ready; the pods keep serving.
    Prewarmed,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::WaitingForReplacement => "waiting-for-replacement",
            Phase::Evicting => "evicting",
            Phase::Drained => "drained",
            Phase::Prewarmed => "prewarmed",
        }
    }

    fn parse(s: &str) -> Option<Phase> {
        [
            Phase::WaitingForReplacement,
            Phase::Evicting,
            Phase::Drained,
            Phase::Prewarmed,
        ]
        .into_iter()
        .find(|p| p.as_str() == s)
    }
}

/// The drain state of one node. Times are seconds since the Unix epoch.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DrainState {
    pub event_id: String,
    pub kind: NoticeKind,
    pub phase: Phase,
    /// When the notice was issued as far as it can be trusted (`deadline::issued_at`: the
    /// envelope time bounded by SQS's `SentTimestamp`): the origin of every wait counted from
    /// the notice.
    pub notice_time: f64,
    /// The envelope's `time` as the body claims it, unbounded: it only tells a newer update of
    /// one AWS Health event from an older one or a redelivery, and is never used as a clock
    /// (each continuation has its own `SentTimestamp`, so bounded times of one notice differ
    /// between deliveries). None on a record written before it was kept: `notice_time` stands in.
    pub event_time: Option<f64>,
    pub deadline: Option<f64>,
    /// When prewarm first acted on the node (cordon).
    pub started_at: f64,
    pub replacement_requested_at: Option<f64>,
    pub replacement_ready_at: Option<f64>,
    pub evicting_since: Option<f64>,
    pub finished_at: Option<f64>,
    /// GPUs asked for as replacement (the node's GPUs).
    pub replacement_gpus: u32,
    /// When the instance goes away, if the notice says: pods whose grace period would outlast
    /// it are evicted early enough, or with the grace cut to the seconds left.
    pub instance_end: Option<f64>,
    /// When the drain last made a step: the owner's heartbeat. A drain whose owner has not
    /// stepped for a while is adopted by the next notice or the tick (its message is gone).
    pub last_step_at: Option<f64>,
    /// The check the last step planned (its message's delivery time). A delivery of the same
    /// notice well before it is a duplicate (the planned check carries the drain on); the planned
    /// check itself, arriving on time, is not. None once the drain is over.
    pub next_check_at: Option<f64>,
    /// The node was unschedulable (someone else's cordon) when the drain claimed it: an
    /// un-drain keeps the cordon.
    pub user_cordoned: bool,
    /// Pods this drain evicted or deleted over its life (`PODS_MOVED`): kept on the node, since
    /// each step may run in another invocation. Counted by the executor, not planned: a pod a
    /// budget refuses is planned again at every check but moved once.
    pub pods_moved: u32,
}

impl DrainState {
    /// The tests' drain: a `kind` notice noticed, claimed and its replacement (8 GPUs) asked for
    /// at `t`, last stepped at `t`, nothing else yet; a test changes what its row needs with
    /// `..DrainState::test(..)`.
    #[cfg(test)]
    pub(crate) fn test(kind: NoticeKind, phase: Phase, t: f64) -> Self {
        DrainState {
            event_id: "ev".into(),
            kind,
            phase,
            notice_time: t,
            event_time: None,
            deadline: None,
            started_at: t,
            replacement_requested_at: Some(t),
            replacement_ready_at: None,
            evicting_since: None,
            finished_at: None,
            replacement_gpus: 8,
            instance_end: None,
            last_step_at: Some(t),
            next_check_at: None,
            user_cordoned: false,
            pods_moved: 0,
        }
    }

    /// The annotations that hold this state.
    pub fn to_annotations(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            m.insert(k.to_string(), v);
        };
        put(EVENT_ID, self.event_id.clone());
        put(KIND, self.kind.as_str().into());
        put(PHASE, self.phase.as_str().into());
        put(NOTICE_TIME, format_time(self.notice_time));
        put(STARTED_AT, format_time(self.started_at));
        put(REPLACEMENT_GPUS, self.replacement_gpus.to_string());
        if self.user_cordoned {
            put(USER_CORDONED, "true".into());
        }
        if self.pods_moved > 0 {
            put(PODS_MOVED, self.pods_moved.to_string());
        }
        for (key, value) in [
            (DEADLINE, self.deadline),
            (REPLACEMENT_REQUESTED_AT, self.replacement_requested_at),
            (REPLACEMENT_READY_AT, self.replacement_ready_at),
            (EVICTING_SINCE, self.evicting_since),
            (FINISHED_AT, self.finished_at),
            (INSTANCE_END, self.instance_end),
            (LAST_STEP_AT, self.last_step_at),
            (NEXT_CHECK_AT, self.next_check_at),
            (EVENT_TIME, self.event_time),
        ] {
            if let Some(t) = value {
                put(key, format_time(t));
            }
        }
        m
    }

    /// Reads the state back. `Ok(None)`: the node carries no drain state. `Err`: the annotations
    /// are there but unreadable (someone edited them); the caller treats the node as unclaimed
    /// and starts over, which is safe because every step is idempotent.
    pub fn from_annotations(a: &BTreeMap<String, String>) -> Result<Option<DrainState>, String> {
        let Some(event_id) = a.get(EVENT_ID) else {
            return Ok(None);
        };
        let req = |k: &str| a.get(k).ok_or_else(|| format!("annotation {k} is missing"));
        let time = |k: &str| -> Result<Option<f64>, String> {
            a.get(k)
                .map(|v| parse_time(v).ok_or_else(|| format!("annotation {k}={v:?} is not a time")))
                .transpose()
        };
        let kind_raw = req(KIND)?;
        let phase_raw = req(PHASE)?;
        Ok(Some(DrainState {
            event_id: event_id.clone(),
            kind: NoticeKind::parse(kind_raw)
                .ok_or_else(|| format!("annotation {KIND}={kind_raw:?} is not a kind"))?,
            phase: Phase::parse(phase_raw)
                .ok_or_else(|| format!("annotation {PHASE}={phase_raw:?} is not a phase"))?,
            notice_time: time(NOTICE_TIME)?
                .ok_or(format!("annotation {NOTICE_TIME} is missing"))?,
            deadline: time(DEADLINE)?,
            started_at: time(STARTED_AT)?.ok_or(format!("annotation {STARTED_AT} is missing"))?,
            replacement_requested_at: time(REPLACEMENT_REQUESTED_AT)?,
            replacement_ready_at: time(REPLACEMENT_READY_AT)?,
            evicting_since: time(EVICTING_SINCE)?,
            finished_at: time(FINISHED_AT)?,
            replacement_gpus: a
                .get(REPLACEMENT_GPUS)
                .map(|v| {
                    v.parse()
                        .map_err(|_| format!("annotation {REPLACEMENT_GPUS}={v:?}"))
                })
                .transpose()?
                .unwrap_or(0),
            instance_end: time(INSTANCE_END)?,
            last_step_at: time(LAST_STEP_AT)?,
            next_check_at: time(NEXT_CHECK_AT)?,
            event_time: time(EVENT_TIME)?,
            user_cordoned: a.get(USER_CORDONED).is_some_and(|v| v == "true"),
            pods_moved: a
                .get(PODS_MOVED)
                .map(|v| {
                    v.parse()
                        .map_err(|_| format!("annotation {PODS_MOVED}={v:?}"))
                })
                .transpose()?
                .unwrap_or(0),
        }))
    }
}

/// RFC 3339 with milliseconds, UTC: readable in `kubectl describe node` and exact enough.
pub fn format_time(t: f64) -> String {
    let ms = (t * 1000.0).round() as i64;
    DateTime::<Utc>::from_timestamp_millis(ms)
        .map(|d| d.to_rfc3339_opts(SecondsFormat::Millis, true))
        .unwrap_or_else(|| t.to_string())
}

pub fn parse_time(s: &str) -> Option<f64> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|d| d.timestamp_millis() as f64 / 1000.0)
}

/// An RFC 3339 time a user may have edited (an annotation's lease end): blanks around it are
/// allowed, and a malformed one says what was found.
pub fn parse_annotation_time(raw: &str) -> Result<f64, String> {
    DateTime::parse_from_rfc3339(raw.trim())
        .map(|t| t.timestamp_millis() as f64 / 1000.0)
        .map_err(|e| format!("expected an RFC 3339 time, got {raw:?} ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> DrainState {
        DrainState {
            event_id: "e-1".into(),
            kind: NoticeKind::SpotInterruption,
            phase: Phase::Evicting,
            notice_time: 1_795_953_600.0,
            deadline: Some(1_795_953_690.0),
            started_at: 1_795_953_601.25,
            replacement_requested_at: Some(1_795_953_601.25),
            replacement_ready_at: None,
            evicting_since: Some(1_795_953_690.0),
            finished_at: None,
            replacement_gpus: 8,
            instance_end: Some(1_795_953_720.0),
            last_step_at: Some(1_795_953_690.5),
            next_check_at: Some(1_795_953_705.5),
            event_time: Some(1_795_953_600.0),
            user_cordoned: true,
            pods_moved: 3,
        }
    }

    #[test]
    fn annotations_round_trip() {
        let s = state();
        let a = s.to_annotations();
        assert_eq!(a[NOTICE_TIME], "2026-11-29T12:00:00.000Z");
        assert!(!a.contains_key(FINISHED_AT));
        assert_eq!(DrainState::from_annotations(&a).unwrap(), Some(s));
    }

    #[test]
    fn no_annotations_means_no_state_and_bad_ones_are_named() {
        assert_eq!(DrainState::from_annotations(&BTreeMap::new()), Ok(None));
        let mut a = state().to_annotations();
        a.insert(PHASE.into(), "sleeping".into());
        assert!(DrainState::from_annotations(&a)
            .unwrap_err()
            .contains(PHASE));
        let mut a = state().to_annotations();
        a.insert(DEADLINE.into(), "soon".into());
        assert!(DrainState::from_annotations(&a)
            .unwrap_err()
            .contains(DEADLINE));
    }
}
