//! Sharing a NodePool's warm capacity between drains that run at the same time. Each drain asks
//! for its own replacement, but "ready" is judged from the free GPUs of the pool: without an
//! order, every concurrent drain would count the same spare GPUs and all would evict at once
//! onto room for one. Drains are served in the order they must finish — earliest deadline first,
//! no deadline last, then the earlier claim, then the node's name — and each sees what is left
//! after the needs of the drains ahead of it.

/// A drain competing for the pool's spare GPUs.
#[derive(Clone, Debug, PartialEq)]
pub struct Claimant {
    pub node: String,
    pub deadline: Option<f64>,
    pub started_at: f64,
    /// GPUs of the pods it still has to move (not yet terminating).
    pub need: u32,
}

fn order_key(c: &Claimant) -> (f64, f64, &str) {
    (
        c.deadline.unwrap_or(f64::INFINITY),
        c.started_at,
        c.node.as_str(),
    )
}

/// The spare GPUs `me` may count on, after the drains ahead of it have taken their needs.
pub fn share_of_spare(spare: u32, me: &Claimant, others: &[Claimant]) -> u32 {
    let mine = order_key(me);
    let ahead: u32 = others
        .iter()
        .filter(|o| o.node != me.node && order_key(o) < mine)
        .map(|o| o.need)
        .sum();
    spare.saturating_sub(ahead)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(node: &str, deadline: Option<f64>, started_at: f64, need: u32) -> Claimant {
        Claimant {
            node: node.into(),
            deadline,
            started_at,
            need,
        }
    }

    #[test]
    fn three_nodes_reclaimed_with_room_for_one() {
        // 4 spare GPUs (one replacement node); three nodes each needing 4, same deadline,
        // claimed a little apart: only the first claim sees its replacement ready.
        let a = c("a", Some(1_090.0), 1_000.0, 4);
        let b = c("b", Some(1_090.0), 1_001.0, 4);
        let d = c("d", Some(1_090.0), 1_001.0, 4);
        let all = [a.clone(), b.clone(), d.clone()];
        assert_eq!(share_of_spare(4, &a, &all), 4);
        assert_eq!(share_of_spare(4, &b, &all), 0);
        assert_eq!(share_of_spare(4, &d, &all), 0); // b before d by name
                                                    // Once a's pods have moved (need 0), b is next.
        let moved = [c("a", Some(1_090.0), 1_000.0, 0), b.clone(), d.clone()];
        assert_eq!(share_of_spare(4, &b, &moved), 4);
        assert_eq!(share_of_spare(4, &d, &moved), 0);
    }

    #[test]
    fn the_earlier_deadline_goes_first_and_no_deadline_goes_last() {
        let rebalance = c("r", None, 900.0, 2);
        let spot = c("s", Some(1_090.0), 1_000.0, 2);
        let health = c("h", Some(90_000.0), 950.0, 2);
        let all = [rebalance.clone(), spot.clone(), health.clone()];
        // (me, spare, expected share)
        let cases = [
            (&spot, 3, 3),
            (&health, 3, 1),
            (&rebalance, 3, 0),
            (&rebalance, 7, 3),
        ];
        for (me, spare, expected) in cases {
            assert_eq!(share_of_spare(spare, me, &all), expected, "{}", me.node);
        }
    }
}
