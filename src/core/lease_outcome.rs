//! The vocabulary of a field prewarm raises on a user's object and gives back (an HPA's or a
//! ScaledObject's floor, a Deployment's replicas under a drain surge): what one planning step did
//! to it. Callers branch on the variant; the text is what the logs and reports carry.

use std::fmt;

/// What a lease step did to the raised field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseOutcome {
    /// The field was raised (first raise, or a new value while held).
    Raised,
    /// The raise stays as it is; its lease was extended.
    Renewed,
    /// The user's value was written back and prewarm's annotations removed.
    Restored,
    /// The user changed the field while prewarm had it raised: the edit stays, prewarm's
    /// annotations go, and `prewarm restore` reports it as kept, not restored.
    UserEditKept,
    /// Nothing of the field changed (stray annotations may still be removed).
    Unchanged,
}

impl LeaseOutcome {
    /// The text of the logs and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseOutcome::Raised => "raised",
            LeaseOutcome::Renewed => "renewed",
            LeaseOutcome::Restored => "restored",
            LeaseOutcome::UserEditKept => "user_edit_kept",
            LeaseOutcome::Unchanged => "unchanged",
        }
    }
}

impl fmt::Display for LeaseOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::LeaseOutcome::*;

    #[test]
    fn the_text_is_the_one_the_logs_always_carried() {
        // By hand, from the string literals the plans wrote before the enum (hpa_floor's
        // FloorPatch and surge's ReplicasPatch outcomes, and surge::USER_EDIT_KEPT).
        let cases = [
            (Raised, "raised"),
            (Renewed, "renewed"),
            (Restored, "restored"),
            (UserEditKept, "user_edit_kept"),
            (Unchanged, "unchanged"),
        ];
        for (outcome, text) in cases {
            assert_eq!(outcome.to_string(), text, "{outcome:?}");
            assert_eq!(format!("replicas {outcome}"), format!("replicas {text}"));
        }
    }
}
