//! The floor a lease works on, read from an HPA (`hpa::floor::floor_view`) or from the KEDA
//! ScaledObject that owns one (`scaled_object::floor_view`), and what its lease annotations say
//! of the user's own value.

use std::collections::BTreeMap;

/// The user's value, saved when prewarm first raises the floor.
pub const USER_MIN: &str = "prewarm.io/user-min-replicas";
/// What prewarm wrote.
pub const RAISED_MIN: &str = "prewarm.io/raised-min-replicas";
/// When the raise expires unless a tick renews it.
pub const LEASE_UNTIL: &str = "prewarm.io/floor-lease-until";

/// The HPA as the floor logic needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct FloorView {
    pub min_replicas: u32,
    pub max_replicas: u32,
    pub annotations: BTreeMap<String, String>,
    pub keda_owner: Option<String>,
}

impl FloorView {
    /// A count kept in annotation `key`: None when absent, Err when malformed.
    pub fn count(&self, key: &str) -> Result<Option<u32>, String> {
        self.annotations
            .get(key)
            .map(|raw| {
                raw.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("annotation {key}: expected a count, got {raw:?}"))
            })
            .transpose()
    }

    /// The user's floor while prewarm holds a raise (both annotations readable and the floor
    /// still what prewarm wrote); None when the floor on the object is the user's own (not
    /// raised, a user's edit made while raised, or annotations that cannot be read).
    pub fn saved_user_floor(&self) -> Option<u32> {
        match (self.count(USER_MIN), self.count(RAISED_MIN)) {
            (Ok(Some(user)), Ok(Some(raised))) if raised == self.min_replicas => Some(user),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_users_floor_is_the_saved_one_only_while_prewarm_holds_the_raise() {
        let view = |min: u32, ann: &[(&str, &str)]| FloorView {
            min_replicas: min,
            max_replicas: 10,
            annotations: ann
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            keda_owner: None,
        };
        // (name, floor on the object, annotations, the user's floor) - by hand from the rule.
        type Row<'a> = (&'a str, u32, &'a [(&'a str, &'a str)], Option<u32>);
        let rows: [Row; 5] = [
            ("not raised", 2, &[], None),
            (
                "raised 2 -> 6",
                6,
                &[(USER_MIN, "2"), (RAISED_MIN, "6")],
                Some(2),
            ),
            (
                "user edited to 4 while raised to 6: 4 is the user's",
                4,
                &[(USER_MIN, "2"), (RAISED_MIN, "6")],
                None,
            ),
            ("half a lease", 6, &[(USER_MIN, "2")], None),
            (
                "malformed",
                6,
                &[(USER_MIN, "two"), (RAISED_MIN, "6")],
                None,
            ),
        ];
        for (name, min, ann, want) in rows {
            assert_eq!(view(min, ann).saved_user_floor(), want, "{name}");
        }
    }
}
