//! Label selectors as the apiserver reads them, for the shapes and for the drain's own
//! PodDisruptionBudget lookups.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Whether `selector` selects a pod with `labels` (matchLabels and matchExpressions; an empty
/// selector selects everything, as PodDisruptionBudgets in policy/v1 do).
pub fn selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let labels_ok = selector
        .match_labels
        .as_ref()
        .is_none_or(|m| m.iter().all(|(k, v)| labels.get(k) == Some(v)));
    let exprs_ok = selector.match_expressions.as_ref().is_none_or(|es| {
        es.iter().all(|e| {
            let values = e.values.clone().unwrap_or_default();
            let have = labels.get(&e.key);
            match e.operator.as_str() {
                "In" => have.is_some_and(|v| values.contains(v)),
                "NotIn" => have.is_none_or(|v| !values.contains(v)),
                "Exists" => have.is_some(),
                "DoesNotExist" => have.is_none(),
                _ => false,
            }
        })
    });
    labels_ok && exprs_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    #[test]
    fn label_selectors() {
        let labels: BTreeMap<String, String> = [
            ("app".to_string(), "llama".to_string()),
            ("tier".into(), "gpu".into()),
        ]
        .into();
        let sel = |ml: Option<Vec<(&str, &str)>>, ex: Option<Vec<(&str, &str, Vec<&str>)>>| {
            LabelSelector {
                match_labels: ml.map(|m| {
                    m.into_iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect()
                }),
                match_expressions: ex.map(|es| {
                    es.into_iter()
                        .map(|(k, op, vs)| LabelSelectorRequirement {
                            key: k.into(),
                            operator: op.into(),
                            values: Some(vs.into_iter().map(String::from).collect()),
                        })
                        .collect()
                }),
            }
        };
        let cases = [
            (sel(None, None), true),
            (sel(Some(vec![("app", "llama")]), None), true),
            (sel(Some(vec![("app", "qwen")]), None), false),
            (
                sel(None, Some(vec![("tier", "In", vec!["gpu", "cpu"])])),
                true,
            ),
            (sel(None, Some(vec![("tier", "NotIn", vec!["gpu"])])), false),
            (sel(None, Some(vec![("zone", "Exists", vec![])])), false),
            (
                sel(None, Some(vec![("zone", "DoesNotExist", vec![])])),
                true,
            ),
        ];
        for (i, (s, expected)) in cases.into_iter().enumerate() {
            assert_eq!(selector_matches(&s, &labels), expected, "case {i}");
        }
    }
}
