//! The fields of a NodePool prewarm writes, as JSON pointers: what a GitOps tool must be told to
//! leave alone (docs/deploying.md, "GitOps"), or every sync reverts prewarm's writes. Changes when
//! a NodePool patch builder starts writing a new field; the test below builds every patch and
//! fails when this list and the patches differ, and tests/infra checks the documented Argo CD
//! and Flux snippets name exactly these.

/// `spec.limits` (the spend cap, a drain's room), `spec.disruption.budgets` (the consolidation
/// freeze; `consolidateAfter` is sent along unchanged, as Karpenter's schema needs it) and
/// `spec.replicas` (a static NodePool used as headroom). The `prewarm.io/` annotations are not
/// listed: a field Git does not set is not a difference for Argo CD or Flux.
pub const NODE_POOL_WRITTEN_POINTERS: [&str; 3] =
    ["/spec/limits", "/spec/disruption/budgets", "/spec/replicas"];

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use serde_json::{json, Value};

    use super::super::limits::{LimitsIntent, SAVED_LIMITS};
    use super::super::view::{NodePoolView, SAVED_BUDGETS};
    use super::super::{freeze_budget, node_pool_patch};
    use super::*;
    use crate::adapters::kube::headroom::annotations::{parse_headroom, REPLACEMENT_DRAINS};
    use crate::adapters::kube::headroom::release_patch;
    use crate::adapters::kube::restore;
    use crate::test_util::string_map;

    fn view(budgets: Value, annotations: &[(&str, &str)]) -> NodePoolView {
        NodePoolView {
            name: "gpu".into(),
            resource_version: "1".into(),
            annotations: string_map(annotations),
            spec: json!({"limits": {"cpu": "1000", "nvidia.com/gpu": "32"},
                "disruption": {"consolidateAfter": "30s", "budgets": budgets}}),
        }
    }

    /// The pointers a patch changes on `spec`: a top-level spec field, or, under
    /// `spec.disruption`, each field whose value differs from the NodePool's.
    fn changed(patch: &Value, spec: &Value, out: &mut BTreeSet<String>) {
        for (key, value) in patch["spec"].as_object().into_iter().flatten() {
            if key != "disruption" {
                out.insert(format!("/spec/{key}"));
                continue;
            }
            for (sub, v) in value.as_object().into_iter().flatten() {
                if spec["disruption"].get(sub) != Some(v) {
                    out.insert(format!("/spec/disruption/{sub}"));
                }
            }
        }
    }

    #[test]
    fn the_written_pointers_are_exactly_what_the_patches_change() {
        let wanted: BTreeMap<String, String> =
            [("nvidia.com/gpu".to_string(), "8".to_string())].into();
        let saved_limits =
            r#"{"hadLimits":true,"limits":{"nvidia.com/gpu":{"before":"16","written":"32"}}}"#;
        let views = [
            view(json!([{"nodes": "10%"}]), &[]),
            view(
                json!([{"nodes": "10%"}, freeze_budget()]),
                &[
                    (SAVED_BUDGETS, "[{\"nodes\":\"10%\"}]"),
                    (SAVED_LIMITS, saved_limits),
                ],
            ),
        ];
        let mut pointers = BTreeSet::new();
        for v in &views {
            for limits in [
                LimitsIntent::Write(wanted.clone()),
                LimitsIntent::Restore,
                LimitsIntent::Leave,
            ] {
                for freeze in [Some(true), Some(false), None] {
                    if let Some(p) = node_pool_patch(v, &limits, freeze).unwrap() {
                        changed(&p, &v.spec, &mut pointers);
                    }
                }
            }
            for p in [
                restore::node_pool_limits_patch(v).unwrap(),
                restore::node_pool_patch(v).unwrap(),
            ]
            .into_iter()
            .flatten()
            {
                changed(&p, &v.spec, &mut pointers);
            }
        }
        // A static NodePool as headroom: a drain's reservation given back resizes it.
        let reserved: BTreeMap<String, String> =
            [(REPLACEMENT_DRAINS.to_string(), "{\"evt\":1}".to_string())].into();
        let read = parse_headroom(3, &reserved).unwrap();
        if let Some(p) = release_patch(&read, "1", "evt") {
            changed(&p, &Value::Null, &mut pointers);
        }
        let listed: BTreeSet<String> = NODE_POOL_WRITTEN_POINTERS
            .iter()
            .map(|p| p.to_string())
            .collect();
        assert_eq!(pointers, listed);
    }
}
