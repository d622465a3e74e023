//! What to do for each kind of notice (`ACTIONS`), with defaults that put the replacement
//! before the eviction ("make before break").

use serde::Serialize;

use super::notice::NoticeKind;

/// The response to a notice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Cordon and taint, request a replacement at once, evict when the replacement is ready or
    /// when the eviction deadline comes, whichever is first.
    Drain,
    /// Cordon and taint and request a replacement, but leave the pods serving: eviction waits
    /// for a later notice with a deadline (or this notice's own deadline, if it has one).
    CordonPrewarm,
    /// Cordon, taint, request a replacement and evict at once (what the established tools do).
    EvictNow,
    /// Acknowledge and do nothing.
    Ignore,
}

impl Action {
    pub const ALL: [Action; 4] = [
        Action::Drain,
        Action::CordonPrewarm,
        Action::EvictNow,
        Action::Ignore,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Drain => "drain",
            Action::CordonPrewarm => "cordon-prewarm",
            Action::EvictNow => "evict-now",
            Action::Ignore => "ignore",
        }
    }

    pub fn parse(name: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.as_str() == name)
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The action of every kind. Built from `ACTIONS` (`kind=action` pairs separated by commas);
/// kinds not named keep their default.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ActionTable {
    entries: [(NoticeKind, Action); 6],
}

impl Default for ActionTable {
    /// Spot, capacity-reservation and Capacity Block warnings and Health scheduled changes drain
    /// make-before-break against their deadlines; a rebalance recommendation drains once the
    /// replacement is ready (it has no deadline; with surge its move costs GPU time, not serving,
    /// and a false alarm is un-drained: `false_alarm`; docs/interruption.md weighs it against
    /// `cordon-prewarm`); a state change means the instance is already going: evict now.
    fn default() -> Self {
        ActionTable {
            entries: [
                (NoticeKind::SpotInterruption, Action::Drain),
                (NoticeKind::Rebalance, Action::Drain),
                (NoticeKind::StateChange, Action::EvictNow),
                (NoticeKind::ScheduledChange, Action::Drain),
                (NoticeKind::CapacityReservation, Action::Drain),
                (NoticeKind::CapacityBlock, Action::Drain),
            ],
        }
    }
}

impl ActionTable {
    pub fn for_kind(&self, kind: NoticeKind) -> Action {
        self.entries
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, a)| *a)
            .expect("every kind has an entry")
    }

    /// Parses `ACTIONS`. The error message names the bad pair and the allowed names; the caller
    /// wraps it in a configuration error for `ACTIONS`.
    pub fn parse(raw: &str) -> Result<ActionTable, String> {
        let mut table = ActionTable::default();
        let mut seen = Vec::new();
        for pair in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (kind, action) = pair
                .split_once('=')
                .map(|(k, a)| (k.trim(), a.trim()))
                .ok_or_else(|| format!("expected kind=action, got {pair:?}"))?;
            let kind = NoticeKind::parse(kind).ok_or_else(|| {
                format!(
                    "unknown notice kind {kind:?} in {pair:?}; kinds are {}",
                    names(NoticeKind::ALL.iter().map(|k| k.as_str()))
                )
            })?;
            let action = Action::parse(action).ok_or_else(|| {
                format!(
                    "unknown action {action:?} in {pair:?}; actions are {}",
                    names(Action::ALL.iter().map(|a| a.as_str()))
                )
            })?;
            if seen.contains(&kind) {
                return Err(format!("kind {kind} is given twice"));
            }
            seen.push(kind);
            for entry in table.entries.iter_mut() {
                if entry.0 == kind {
                    entry.1 = action;
                }
            }
        }
        Ok(table)
    }
}

fn names<'a>(it: impl Iterator<Item = &'a str>) -> String {
    it.collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_per_kind() {
        let t = ActionTable::default();
        let expected = [
            (NoticeKind::SpotInterruption, Action::Drain),
            (NoticeKind::Rebalance, Action::Drain),
            (NoticeKind::StateChange, Action::EvictNow),
            (NoticeKind::ScheduledChange, Action::Drain),
            (NoticeKind::CapacityReservation, Action::Drain),
            (NoticeKind::CapacityBlock, Action::Drain),
        ];
        for (kind, action) in expected {
            assert_eq!(t.for_kind(kind), action, "{kind}");
        }
        assert_eq!(ActionTable::parse("").unwrap(), t);
        assert_eq!(ActionTable::parse(" , ").unwrap(), t);
    }

    #[test]
    fn pairs_override_only_their_kind() {
        let t = ActionTable::parse("rebalance=cordon-prewarm, state-change = ignore").unwrap();
        assert_eq!(t.for_kind(NoticeKind::Rebalance), Action::CordonPrewarm);
        assert_eq!(t.for_kind(NoticeKind::StateChange), Action::Ignore);
        assert_eq!(t.for_kind(NoticeKind::SpotInterruption), Action::Drain);
    }

    #[test]
    fn bad_pairs_are_named() {
        let cases = [
            ("rebalance", "expected kind=action"),
            ("spot=drain", "unknown notice kind \"spot\""),
            ("rebalance=wait", "unknown action \"wait\""),
            ("rebalance=drain,rebalance=ignore", "given twice"),
        ];
        for (raw, needle) in cases {
            let err = ActionTable::parse(raw).unwrap_err();
            assert!(err.contains(needle), "{raw}: {err}");
        }
    }
}
