//! Which node holds an instance, without listing the cluster for every notice. The interruption
//! rules are account-wide: every instance of the account that EC2 warns about reaches the queue,
//! and most are not this cluster's. Nodes cannot be selected by `spec.providerID`, so finding an
//! instance's node means listing them all; per record, a storm of foreign notices would cost one
//! full node list each.
//!
//! The index maps instance ids to node names, as of the last full list. A hit names the node to
//! GET by name (the caller checks that its providerID still names the instance: a node deleted,
//! or its name taken by another instance, is stale, forgotten and treated as a miss). A miss is
//! authoritative ("not in this cluster") when the last list started no earlier than the record
//! was sent: a node registered before the notice was sent is in it. Otherwise the nodes are listed
//! again, but at most once per `MIN_RELIST_S`: a record that misses sooner than that looks again
//! when the window ends (the caller waits those few seconds), so a storm costs one list per
//! window, however many records it brings.
//! Changes when the rule of when a miss is believed changes.

use std::collections::BTreeMap;

/// The least time between two full node lists of one index.
pub const MIN_RELIST_S: f64 = 5.0;

/// What to do to find an instance's node.
#[derive(Clone, Debug, PartialEq)]
pub enum Lookup {
    /// GET this node by name and check its providerID (`stale` when it does not match).
    Get(String),
    /// List the nodes (`refreshed`), then look up again.
    List,
    /// Not in this cluster: a list started after the record was sent has no node for it.
    NotHere,
    /// The last list is older than the record but too recent to list again: look again at `at`.
    Wait { at: f64 },
}

/// Instance id → node name, as of the last full list.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeIndex {
    by_instance: BTreeMap<String, String>,
    /// When the last full list started (what it saw was true at least from then).
    listed_at: Option<f64>,
    lists: u64,
}

impl NodeIndex {
    /// Where to find the node of `instance` for a record sent at `sent` (clamped to `now`: a
    /// record is not sent after it is read).
    pub fn lookup(&self, instance: &str, sent: f64, now: f64) -> Lookup {
        match self.by_instance.get(instance) {
            Some(name) => Lookup::Get(name.clone()),
            None => self.on_miss(sent, now),
        }
    }

    /// The node the index named for `instance` is gone or holds another instance: forgotten, and
    /// answered as a miss.
    pub fn stale(&mut self, instance: &str, sent: f64, now: f64) -> Lookup {
        self.by_instance.remove(instance);
        self.on_miss(sent, now)
    }

    /// A full list started at `started`: (instance id, node name) of every node with one.
    pub fn refreshed(&mut self, nodes: impl IntoIterator<Item = (String, String)>, started: f64) {
        self.by_instance = nodes.into_iter().collect();
        self.listed_at = Some(started);
        self.lists += 1;
    }

    /// How many full lists this index was refreshed from.
    pub fn lists(&self) -> u64 {
        self.lists
    }

    fn on_miss(&self, sent: f64, now: f64) -> Lookup {
        let sent = sent.min(now);
        match self.listed_at {
            Some(t) if t >= sent => Lookup::NotHere,
            Some(t) if now < t + MIN_RELIST_S => Lookup::Wait {
                at: t + MIN_RELIST_S,
            },
            _ => Lookup::List,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: f64 = 1_795_953_600.0;

    fn listed(at: f64, nodes: &[(&str, &str)]) -> NodeIndex {
        let mut index = NodeIndex::default();
        index.refreshed(
            nodes.iter().map(|(i, n)| (i.to_string(), n.to_string())),
            at,
        );
        index
    }

    /// One row per situation: the index (listed at T with i-ours on node-a), the record's sent
    /// time, the clock, and what to do, by hand from the rule in the module comment.
    #[test]
    fn lookups_per_situation() {
        let index = listed(T, &[("i-ours", "node-a")]);
        let empty = NodeIndex::default();
        let get = |n: &str| Lookup::Get(n.into());
        let cases: Vec<(&str, &NodeIndex, &str, f64, f64, Lookup)> = vec![
            ("a cold index lists", &empty, "i-x", T, T, Lookup::List),
            (
                "a hit names the node",
                &index,
                "i-ours",
                T + 50.0,
                T + 60.0,
                get("node-a"),
            ),
            (
                "a miss for a record sent before the list: not here",
                &index,
                "i-foreign",
                T - 1.0,
                T + 3.0,
                Lookup::NotHere,
            ),
            (
                "a miss for a record sent as the list started: not here",
                &index,
                "i-foreign",
                T,
                T + 3.0,
                Lookup::NotHere,
            ),
            (
                "a miss for a newer record within the window waits for its end",
                &index,
                "i-new",
                T + 2.0,
                T + 3.0,
                Lookup::Wait { at: T + 5.0 },
            ),
            (
                "a miss for a newer record after the window lists",
                &index,
                "i-new",
                T + 2.0,
                T + 10.0,
                Lookup::List,
            ),
            (
                "a record claiming to be sent in the future counts as sent now",
                &index,
                "i-foreign",
                T + 3_600.0,
                T + 4.0,
                Lookup::Wait { at: T + 5.0 },
            ),
        ];
        for (what, idx, instance, sent, now, want) in cases {
            assert_eq!(idx.lookup(instance, sent, now), want, "{what}");
        }
    }

    /// A hit whose node turned out gone (or renamed, or holding another instance) is forgotten
    /// and answered as a miss; the list that follows finds the instance's node under its new
    /// name, or finds none.
    #[test]
    fn a_stale_hit_is_forgotten_and_looked_up_again() {
        let mut index = listed(T, &[("i-ours", "node-a"), ("i-other", "node-b")]);
        // Sent after the list, within the window: wait, and the stale entry is gone.
        assert_eq!(
            index.stale("i-ours", T + 1.0, T + 2.0),
            Lookup::Wait { at: T + 5.0 }
        );
        assert_eq!(
            index.lookup("i-ours", T + 1.0, T + 2.0),
            Lookup::Wait { at: T + 5.0 }
        );
        assert_eq!(
            index.lookup("i-other", T + 1.0, T + 2.0),
            Lookup::Get("node-b".into())
        );
        // After the window: list; the node came back under another name.
        assert_eq!(index.lookup("i-ours", T + 1.0, T + 11.0), Lookup::List);
        index.refreshed([("i-ours".into(), "node-c".into())], T + 11.0);
        assert_eq!(
            index.lookup("i-ours", T + 1.0, T + 12.0),
            Lookup::Get("node-c".into())
        );
        // Stale again right after that list: the list was newer than the record, so not here.
        assert_eq!(index.stale("i-ours", T + 1.0, T + 12.0), Lookup::NotHere);
        assert_eq!(index.lists(), 2);
    }

    /// Twenty foreign notices sent within a second, read as they come: the first lists, the
    /// others are answered from that list.
    #[test]
    fn a_storm_of_foreign_notices_costs_one_list() {
        let mut index = NodeIndex::default();
        let mut not_here = 0;
        for k in 0..20 {
            let sent = T + k as f64 * 0.05;
            let now = T + 1.0 + k as f64 * 0.1;
            let instance = format!("i-foreign{k}");
            loop {
                match index.lookup(&instance, sent, now) {
                    Lookup::List => index.refreshed([("i-ours".into(), "node-a".into())], now),
                    Lookup::NotHere => {
                        not_here += 1;
                        break;
                    }
                    other => panic!("{instance}: {other:?}"),
                }
            }
        }
        assert_eq!((index.lists(), not_here), (1, 20));
    }
}
