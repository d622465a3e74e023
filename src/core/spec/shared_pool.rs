//! Targets that share a NodePool. The NodePool's consolidation budgets and `spec.limits` are the
//! pool's, not a target's, yet each target's tick writes them: two targets that want different
//! things of one pool would flip it every tick (budgets frozen and restored, a cap written and
//! taken away), and consolidation would run in the middle of a ramp. So the tick refuses a
//! configuration in which they can disagree, naming both targets (the interruption function,
//! which writes no pool's budgets or cap, runs with it):
//!
//! - `freezeConsolidation` only on a NodePool that serves one target: each target freezes and
//!   restores on its own forecast (and one without the option undoes a freeze), so two would
//!   alternate whenever their forecasts disagree;
//! - `limits` the same on every target of a NodePool (or on none): the cap is written as is.
//!
//! Refusing is the smaller change that is right: deciding once per NodePool would need every
//! target's plan before any pool is written, and a rule for merging caps and forecasts.

use std::collections::BTreeMap;

use super::TargetSpec;

/// A NodePool whose targets could disagree.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolConflict {
    pub pool: String,
    /// The target setting at fault: `freezeConsolidation` or `limits`.
    pub setting: String,
    /// Names two of the pool's targets and says why.
    pub message: String,
}

/// Err `(setting, message)` naming two targets of the first NodePool that could disagree.
pub fn validate_shared_pools(targets: &[TargetSpec]) -> Result<(), (String, String)> {
    match shared_pool_conflicts(targets).into_iter().next() {
        Some(c) => Err((c.setting, c.message)),
        None => Ok(()),
    }
}

/// Every NodePool whose targets could disagree, in the order of the pools' names.
pub fn shared_pool_conflicts(targets: &[TargetSpec]) -> Vec<PoolConflict> {
    let mut by_pool: BTreeMap<&str, Vec<&TargetSpec>> = BTreeMap::new();
    for t in targets {
        by_pool.entry(t.node_pool.as_str()).or_default().push(t);
    }
    by_pool
        .into_iter()
        .filter_map(|(pool, on_pool)| {
            conflict(pool, &on_pool).map(|(setting, message)| PoolConflict {
                pool: pool.to_string(),
                setting,
                message,
            })
        })
        .collect()
}

/// Why the targets of one pool could disagree, if they could.
fn conflict(pool: &str, on_pool: &[&TargetSpec]) -> Option<(String, String)> {
    let (first, second) = match on_pool {
        [first, second, ..] => (*first, *second),
        _ => return None,
    };
    if let Some(frozen) = on_pool.iter().find(|t| t.freeze_consolidation) {
        let other = if frozen.name == first.name {
            second
        } else {
            first
        };
        return Some((
            "freezeConsolidation".into(),
            format!(
                "targets {:?} and {:?} share NodePool {pool:?} and {:?} sets \
                 freezeConsolidation: each target would freeze and restore the pool's \
                 consolidation on its own forecast, alternating; give that model a NodePool \
                 of its own or turn the option off",
                frozen.name, other.name, frozen.name
            ),
        ));
    }
    if let Some(other) = on_pool.iter().find(|t| t.limits != first.limits) {
        let show = |t: &TargetSpec| {
            t.limits
                .as_ref()
                .map_or("none".to_string(), |l| format!("{l:?}"))
        };
        return Some((
            "limits".into(),
            format!(
                "targets {:?} and {:?} share NodePool {pool:?} with different limits ({} and \
                 {}): the pool's spec.limits would flip between them every tick; give every \
                 target of the pool the same limits, or none",
                first.name,
                other.name,
                show(first),
                show(other)
            ),
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::HeadroomKind;

    fn target(name: &str, pool: &str, freeze: bool, gpu_cap: Option<&str>) -> TargetSpec {
        TargetSpec {
            freeze_consolidation: freeze,
            limits: gpu_cap.map(|c| [("nvidia.com/gpu".to_string(), c.to_string())].into()),
            ..TargetSpec::new(name, pool, HeadroomKind::NodePoolReplicas, 4)
        }
    }

    #[test]
    fn targets_that_could_fight_over_a_node_pool_are_refused_by_name() {
        // (name, targets, Ok or the setting and the pieces the message must name) - by the rules
        // of the module docs.
        type Row = (
            &'static str,
            Vec<TargetSpec>,
            Result<(), (&'static str, &'static str)>,
        );
        let rows: Vec<Row> = vec![
            (
                "one target per pool: anything goes",
                vec![
                    target("a", "gpu", true, Some("8")),
                    target("b", "cpu", true, None),
                ],
                Ok(()),
            ),
            (
                "a shared pool with neither option",
                vec![
                    target("a", "gpu", false, None),
                    target("b", "gpu", false, None),
                ],
                Ok(()),
            ),
            (
                "a shared pool with the same cap",
                vec![
                    target("a", "gpu", false, Some("8")),
                    target("b", "gpu", false, Some("8")),
                ],
                Ok(()),
            ),
            (
                "freeze on a shared pool, the other without",
                vec![
                    target("a", "gpu", false, None),
                    target("b", "gpu", true, None),
                ],
                Err((
                    "freezeConsolidation",
                    r#"targets "b" and "a" share NodePool "gpu""#,
                )),
            ),
            (
                "freeze on both: their forecasts disagree",
                vec![
                    target("a", "gpu", true, None),
                    target("b", "gpu", true, None),
                ],
                Err(("freezeConsolidation", r#"targets "a" and "b""#)),
            ),
            (
                "a cap and none",
                vec![
                    target("a", "gpu", false, Some("8")),
                    target("b", "gpu", false, None),
                ],
                Err(("limits", r#"({"nvidia.com/gpu": "8"} and none)"#)),
            ),
            (
                "two caps",
                vec![
                    target("x", "cpu", false, None),
                    target("a", "gpu", false, Some("8")),
                    target("b", "gpu", false, Some("16")),
                ],
                Err(("limits", r#"targets "a" and "b" share NodePool "gpu""#)),
            ),
        ];
        for (name, targets, want) in rows {
            match (validate_shared_pools(&targets), want) {
                (Ok(()), Ok(())) => {}
                (Err((setting, message)), Err((want_setting, piece))) => {
                    assert_eq!(setting, want_setting, "{name}");
                    assert!(message.contains(piece), "{name}: {message}");
                }
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }
    }
}
