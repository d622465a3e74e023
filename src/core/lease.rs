//! The lease prewarm holds on a field of a user's object (an HPA's or a ScaledObject's floor, a
//! Deployment's replicas under a drain surge, a NodePool's limits and its disruption budgets):
//! the user's value saved at prewarm's first write, prewarm's value written, a user's edit kept,
//! the user's value given back. `lease_step` is that protocol, once; the adapters map its
//! decision onto their object's field and annotations, and report its `LeaseOutcome`.

use std::fmt;

/// What a lease step did to the field.
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

/// What prewarm holds of a field: the user's value, saved before prewarm's first write, and the
/// value prewarm wrote last.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held<T> {
    pub user: T,
    pub written: T,
}

/// What prewarm wants of the field now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Want<T> {
    /// The field at this value.
    Value(T),
    /// What is held stays as it is (a lease with an expiry is renewed); nothing if nothing is.
    Keep,
    /// The user's value back.
    GiveBack,
}

/// The decision of one lease step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseStep<T> {
    /// The value to write into the field; None leaves it as it is.
    pub write: Option<T>,
    /// What is held after the step; None: nothing (prewarm's record of the lease is removed).
    pub held: Option<Held<T>>,
    pub outcome: LeaseOutcome,
}

/// One step of the lease on a field whose value is `live` now, `held` what prewarm holds of it
/// (None: nothing), `want` what prewarm wants of it:
///
/// - held, but the field is no longer what prewarm wrote: someone edited it, and the edit is
///   theirs. Nothing is written and the lease ends (`UserEditKept`), whatever prewarm wants;
/// - held, given back: the user's value is written (`Restored`);
/// - held, kept or wanted at what prewarm wrote: nothing is written (`Renewed`);
/// - held, wanted at another value: that value, the user's value still the saved one (`Raised`);
/// - not held, wanted at a value the field does not have: that value, and `live` saved as the
///   user's (`Raised`);
/// - otherwise nothing (`Unchanged`).
///
/// What "wanted" means (a floor only ever raises; a surge is an exact count) and when a lease
/// expires stay with the caller, which turns them into `want`.
pub fn lease_step<T: Clone + PartialEq>(
    held: Option<&Held<T>>,
    live: &T,
    want: Want<T>,
) -> LeaseStep<T> {
    let step = |write: Option<T>, held: Option<Held<T>>, outcome| LeaseStep {
        write,
        held,
        outcome,
    };
    match (held, want) {
        (Some(h), _) if *live != h.written => step(None, None, LeaseOutcome::UserEditKept),
        (Some(h), Want::GiveBack) => step(Some(h.user.clone()), None, LeaseOutcome::Restored),
        (Some(h), Want::Value(v)) if v != h.written => step(
            Some(v.clone()),
            Some(Held {
                user: h.user.clone(),
                written: v,
            }),
            LeaseOutcome::Raised,
        ),
        (Some(h), _) => step(None, Some(h.clone()), LeaseOutcome::Renewed),
        (None, Want::Value(v)) if v != *live => step(
            Some(v.clone()),
            Some(Held {
                user: live.clone(),
                written: v,
            }),
            LeaseOutcome::Raised,
        ),
        (None, _) => step(None, None, LeaseOutcome::Unchanged),
    }
}

#[cfg(test)]
mod tests {
    use super::LeaseOutcome::*;
    use super::*;

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

    fn held(user: u32, written: u32) -> Option<Held<u32>> {
        Some(Held { user, written })
    }

    /// (situation, held, live, want, expected write, expected held after, expected outcome);
    /// each row worked out by hand from the rules in `lease_step`'s comment.
    #[test]
    fn the_lease_table() {
        type Row = (
            &'static str,
            Option<Held<u32>>,
            u32,
            Want<u32>,
            Option<u32>,
            Option<Held<u32>>,
            LeaseOutcome,
        );
        let rows: Vec<Row> = vec![
            (
                "first write: 5 over the user's 2, the 2 saved",
                None,
                2,
                Want::Value(5),
                Some(5),
                held(2, 5),
                Raised,
            ),
            (
                "not held, wanted at what is there: nothing",
                None,
                4,
                Want::Value(4),
                None,
                None,
                Unchanged,
            ),
            (
                "not held, kept: nothing",
                None,
                4,
                Want::Keep,
                None,
                None,
                Unchanged,
            ),
            (
                "not held, given back: nothing to give",
                None,
                4,
                Want::GiveBack,
                None,
                None,
                Unchanged,
            ),
            (
                "held at 5, now 7: 7 written, the user's 2 still saved",
                held(2, 5),
                5,
                Want::Value(7),
                Some(7),
                held(2, 7),
                Raised,
            ),
            (
                "held at 5, down to 3: 3 written (the caller says whether it may lower)",
                held(2, 5),
                5,
                Want::Value(3),
                Some(3),
                held(2, 3),
                Raised,
            ),
            (
                "held at 5, wanted at 5: renewed, nothing written",
                held(2, 5),
                5,
                Want::Value(5),
                None,
                held(2, 5),
                Renewed,
            ),
            (
                "held at 5, kept: renewed",
                held(2, 5),
                5,
                Want::Keep,
                None,
                held(2, 5),
                Renewed,
            ),
            (
                "held at 5, given back: the user's 2 written, nothing held",
                held(2, 5),
                5,
                Want::GiveBack,
                Some(2),
                None,
                Restored,
            ),
            (
                "the user's 2 given back even when it equals what prewarm wrote",
                held(5, 5),
                5,
                Want::GiveBack,
                Some(5),
                None,
                Restored,
            ),
            (
                "edited to 8 while held at 5, given back: the 8 stays",
                held(2, 5),
                8,
                Want::GiveBack,
                None,
                None,
                UserEditKept,
            ),
            (
                "edited to 8 while held at 5, wanted at 9: the 8 stays this step",
                held(2, 5),
                8,
                Want::Value(9),
                None,
                None,
                UserEditKept,
            ),
            (
                "edited to 8 while held at 5, kept: the 8 stays",
                held(2, 5),
                8,
                Want::Keep,
                None,
                None,
                UserEditKept,
            ),
        ];
        for (situation, before, live, want, write, after, outcome) in rows {
            let got = lease_step(before.as_ref(), &live, want);
            assert_eq!(got.write, write, "{situation}: write");
            assert_eq!(got.held, after, "{situation}: held");
            assert_eq!(got.outcome, outcome, "{situation}: outcome");
        }
    }
}
