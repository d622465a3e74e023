use super::*;
use crate::test_util::string_map;
use k8s_openapi::api::core::v1::{NodeSpec, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn annotations(keys: &[&str]) -> BTreeMap<String, String> {
    keys.iter()
        .map(|k| (k.to_string(), "x".to_string()))
        .collect()
}

#[test]
fn each_found_object_gets_back_what_prewarm_changed_on_it() {
    use FoundKind::*;
    // (kind, annotation keys, expected) - by hand: a surge's record is the surge release's; the
    // tick's headroom keys mean a balloon or buffer; floor keys an HPA floor; any other prewarm.io/
    // key is a stray annotation removed alone; a user's key is never touched.
    let cases: Vec<(FoundKind, Vec<&str>, GiveBack)> = vec![
        (
            NodePool,
            vec!["prewarm.io/saved-budgets"],
            GiveBack::NodePool,
        ),
        (
            NodePool,
            vec!["prewarm.io/last-tick", "team"],
            GiveBack::NodePool,
        ),
        (NodePool, vec!["team"], GiveBack::Nothing),
        (
            Workload,
            vec!["prewarm.io/last-tick", "prewarm.io/cooldown-until"],
            GiveBack::Headroom,
        ),
        (
            Workload,
            vec!["prewarm.io/replacement-drains"],
            GiveBack::Headroom,
        ),
        (
            Workload,
            vec!["prewarm.io/surge-drains", "prewarm.io/surge-user-replicas"],
            GiveBack::Nothing,
        ),
        (
            Workload,
            vec!["prewarm.io/surge-drains", "prewarm.io/odd"],
            GiveBack::Annotations(vec!["prewarm.io/odd".into()]),
        ),
        (Workload, vec!["app"], GiveBack::Nothing),
        (
            Floor,
            vec![
                "prewarm.io/user-min-replicas",
                "prewarm.io/raised-min-replicas",
            ],
            GiveBack::Floor,
        ),
        (Floor, vec!["prewarm.io/floor-lease-until"], GiveBack::Floor),
        (Floor, vec!["prewarm.io/surge-base"], GiveBack::Nothing),
        (
            Floor,
            vec!["prewarm.io/last-tick"],
            GiveBack::Annotations(vec!["prewarm.io/last-tick".into()]),
        ),
    ];
    for (kind, keys, want) in cases {
        assert_eq!(
            give_back(kind, &annotations(&keys)),
            want,
            "{kind:?} {keys:?}"
        );
    }
}

fn node(annotations: &[(&str, &str)], taints: &[&str]) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some("ip-10-0-1-7".into()),
            resource_version: Some("42".into()),
            annotations: Some(string_map(annotations)),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            unschedulable: Some(true),
            taints: Some(
                taints
                    .iter()
                    .map(|k| Taint {
                        key: k.to_string(),
                        value: Some("spot-interruption".into()),
                        effect: "NoSchedule".into(),
                        time_added: None,
                    })
                    .collect(),
            ),
            ..NodeSpec::default()
        }),
        status: None,
    }
}

#[test]
fn a_node_given_back_loses_every_mark_of_prewarm_and_keeps_the_rest() {
    let n = node(
        &[
            ("prewarm.io/drain-phase", "evicting"),
            ("prewarm.io/closed-event", "2026-11-29T12:00:00.000Z ev-0"),
            ("team", "ml"),
        ],
        &["nvidia.com/gpu", "prewarm.io/draining"],
    );
    let lifted = node_give_back_patch(&n, true);
    // By hand: the draining taint goes, the GPU taint stays; every prewarm.io/ key is null (the
    // drain keys whether present or not, and the closed-event mark); "team" is not in the patch;
    // the cordon lifted (null) only with uncordon.
    assert_eq!(
        lifted["spec"]["taints"],
        json!([{"key": "nvidia.com/gpu", "value": "spot-interruption", "effect": "NoSchedule"}])
    );
    let a = lifted["metadata"]["annotations"].as_object().unwrap();
    assert_eq!(a["prewarm.io/drain-phase"], Value::Null);
    assert_eq!(a["prewarm.io/closed-event"], Value::Null);
    assert_eq!(a["prewarm.io/drain-user-cordoned"], Value::Null);
    assert!(!a.contains_key("team"));
    assert!(a.keys().all(|k| k.starts_with(PREFIX)));
    assert_eq!(lifted["metadata"]["resourceVersion"], "42");
    assert_eq!(lifted["spec"].get("unschedulable"), Some(&Value::Null));
    let kept = node_give_back_patch(&n, false);
    assert_eq!(kept["spec"].get("unschedulable"), None);
}
