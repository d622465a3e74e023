//! The workload's `autoscaling/v2` HorizontalPodAutoscaler, read so the policy can size in the
//! replicas it will want (`core::hpa_sizing`). Reading needs `get` on
//! `horizontalpodautoscalers` in the workload's namespace (infra/k8s/rbac.yaml).
//!
//! Which HPA metrics prewarm can predict: a per-replica average (`Pods` metric, or `External` /
//! `Object` with an `AverageValue` target) on requests in the system or running, recognised by
//! the metric's name (`num_requests_running`, `requests_in_flight`, `concurrency`, ...; vLLM,
//! TGI, Triton and KServe spellings) or named explicitly by the target's `hpa.inSystemMetric`.
//! Anything else (CPU or memory `Resource` metrics, DCGM utilisation, a waiting-only queue
//! length, `Value` targets) is reported as unpredictable with the reason; with several metrics
//! the HPA takes the largest proposal, so one unpredictable metric makes the whole HPA so.
//!
//! The range is the user's: while prewarm holds a raised floor (`hpa::floor`), the HPA's
//! `minReplicas` (or its KEDA ScaledObject's `minReplicaCount`) is prewarm's own value, and
//! sizing against it would keep the forecast from ever asking for less than the raise.

use k8s_openapi::api::autoscaling::v2::{HorizontalPodAutoscaler, MetricSpec, MetricTarget};
use kube::Api;

pub mod floor;
pub mod scaled_object;

use super::api_error::from_kube;
use crate::core::floor::FloorView;
use crate::core::policy::observation::{HpaMetric, HpaStatus};
use crate::core::spec::HpaRef;
use crate::error::Result;

/// Name fragments of per-replica metrics that count requests in the system or running.
const IN_SYSTEM_NAMES: [&str; 8] = [
    "num_requests_running",
    "requests_running",
    "in_flight",
    "inflight",
    "concurrency",
    "queue_size",
    "batch_current_size",
    "requests_in_system",
];

/// A Kubernetes quantity as a number: plain, decimal SI (m, k, M, G) or binary (Ki, Mi, Gi).
pub fn parse_quantity(raw: &str) -> Option<f64> {
    let raw = raw.trim();
    let suffixes: [(&str, f64); 8] = [
        ("Ki", 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
    ];
    for (suffix, factor) in suffixes {
        if let Some(number) = raw.strip_suffix(suffix) {
            return number.parse::<f64>().ok().map(|v| v * factor);
        }
    }
    raw.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// (kind, metric name, target) of one metric spec.
fn parts(m: &MetricSpec) -> (&str, String, Option<&MetricTarget>) {
    match m.type_.as_str() {
        "Pods" => m.pods.as_ref().map_or(("Pods", String::new(), None), |p| {
            ("Pods", p.metric.name.clone(), Some(&p.target))
        }),
        "External" => m
            .external
            .as_ref()
            .map_or(("External", String::new(), None), |p| {
                ("External", p.metric.name.clone(), Some(&p.target))
            }),
        "Object" => m
            .object
            .as_ref()
            .map_or(("Object", String::new(), None), |p| {
                ("Object", p.metric.name.clone(), Some(&p.target))
            }),
        "Resource" => m
            .resource
            .as_ref()
            .map_or(("Resource", String::new(), None), |r| {
                ("Resource", r.name.clone(), Some(&r.target))
            }),
        "ContainerResource" => m
            .container_resource
            .as_ref()
            .map_or(("ContainerResource", String::new(), None), |r| {
                ("ContainerResource", r.name.clone(), Some(&r.target))
            }),
        other => (other, String::new(), None),
    }
}

/// What prewarm can predict of one metric.
fn metric(m: &MetricSpec, explicit: Option<&str>) -> HpaMetric {
    let (kind, name, target) = parts(m);
    let unpredictable = |why: String| HpaMetric::Unpredictable { why };
    if kind == "Resource" || kind == "ContainerResource" {
        return unpredictable(format!("{kind} metric {name}"));
    }
    let lower = name.to_ascii_lowercase();
    let named =
        explicit.is_some_and(|e| e == name) || IN_SYSTEM_NAMES.iter().any(|n| lower.contains(n));
    if !named {
        return unpredictable(format!(
            "{kind} metric {name:?} is not a count of requests in the system (set hpa.inSystemMetric if it is)"
        ));
    }
    let Some(target) = target else {
        return unpredictable(format!("{kind} metric {name} has no target"));
    };
    match target
        .average_value
        .as_ref()
        .and_then(|q| parse_quantity(&q.0))
    {
        Some(v) if v > 0.0 => HpaMetric::InSystemPerReplica { target_average: v },
        _ => unpredictable(format!(
            "{kind} metric {name} has a {} target, not a positive AverageValue",
            target.type_
        )),
    }
}

/// The HPA as the policy sees it. An HPA without metrics scales on CPU at 80 % by default.
pub fn hpa_status(hpa: &HorizontalPodAutoscaler, explicit: Option<&str>) -> HpaStatus {
    let spec = hpa.spec.as_ref();
    let status = hpa.status.as_ref();
    let metrics = spec.and_then(|s| s.metrics.as_deref()).unwrap_or_default();
    let judged: Vec<HpaMetric> = metrics.iter().map(|m| metric(m, explicit)).collect();
    let metric = if judged.is_empty() {
        HpaMetric::Unpredictable {
            why: "no metrics: the default CPU target".into(),
        }
    } else if let Some(bad) = judged
        .iter()
        .find(|m| matches!(m, HpaMetric::Unpredictable { .. }))
    {
        bad.clone()
    } else {
        // Several in-system metrics: the smallest per-replica target proposes the most
        // replicas, and the HPA takes the largest proposal.
        judged
            .into_iter()
            .min_by(|a, b| match (a, b) {
                (
                    HpaMetric::InSystemPerReplica { target_average: x },
                    HpaMetric::InSystemPerReplica { target_average: y },
                ) => x.total_cmp(y),
                _ => std::cmp::Ordering::Equal,
            })
            .expect("not empty")
    };
    let clamp = |v: i32| u32::try_from(v).unwrap_or(0);
    HpaStatus {
        min_replicas: clamp(spec.and_then(|s| s.min_replicas).unwrap_or(1)),
        max_replicas: clamp(spec.map_or(0, |s| s.max_replicas)),
        current_replicas: clamp(status.and_then(|s| s.current_replicas).unwrap_or(0)),
        desired_replicas: clamp(status.map_or(0, |s| s.desired_replicas)),
        metric,
    }
}

/// `status` with the user's floor: the one saved on the floor object while prewarm holds a
/// raise there, else the HPA's own.
pub fn with_users_floor(status: HpaStatus, floor: &FloorView) -> HpaStatus {
    HpaStatus {
        min_replicas: floor.saved_user_floor().unwrap_or(status.min_replicas),
        ..status
    }
}

/// Reads the target's HPA, and the KEDA ScaledObject that owns it if one does (where the floor
/// and its lease live then).
pub async fn read_hpa_status(client: &kube::Client, r: &HpaRef) -> Result<HpaStatus> {
    let api: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), &r.namespace);
    let hpa = api.get(&r.name).await.map_err(|e| {
        from_kube(
            "get",
            "HorizontalPodAutoscaler",
            &format!("{}/{}", r.namespace, r.name),
            e,
        )
    })?;
    let status = hpa_status(&hpa, r.in_system_metric.as_deref());
    let on = floor::floor_object_of(client, hpa).await?;
    Ok(with_users_floor(status, &on.view))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hpa(metrics: serde_json::Value) -> HorizontalPodAutoscaler {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "llama", "namespace": "ml"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llama"},
                "minReplicas": 2, "maxReplicas": 12, "metrics": metrics
            },
            "status": {"currentReplicas": 3, "desiredReplicas": 4}
        }))
        .unwrap()
    }

    fn pods(name: &str, target: serde_json::Value) -> serde_json::Value {
        serde_json::json!({"type": "Pods", "pods": {"metric": {"name": name}, "target": target}})
    }

    #[test]
    fn hpa_metric_table() {
        let avg = |v: &str| serde_json::json!({"type": "AverageValue", "averageValue": v});
        type Row<'a> = (
            &'a str,
            serde_json::Value,
            Option<&'a str>,
            Result<f64, &'a str>,
        );
        let rows: Vec<Row> = vec![
            (
                "vLLM running",
                serde_json::json!([pods("vllm:num_requests_running", avg("4"))]),
                None,
                Ok(4.0),
            ),
            (
                "milli quantity",
                serde_json::json!([pods("requests_in_flight", avg("2500m"))]),
                None,
                Ok(2.5),
            ),
            (
                "explicit name",
                serde_json::json!([pods("my_load", avg("3"))]),
                Some("my_load"),
                Ok(3.0),
            ),
            (
                "unknown name",
                serde_json::json!([pods("my_load", avg("3"))]),
                None,
                Err("not a count of requests"),
            ),
            (
                "waiting only",
                serde_json::json!([pods("vllm:num_requests_waiting", avg("3"))]),
                None,
                Err("not a count of requests"),
            ),
            (
                "cpu",
                serde_json::json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 70}}}]),
                None,
                Err("Resource metric cpu"),
            ),
            (
                "value target",
                serde_json::json!([{"type": "External", "external": {
                "metric": {"name": "queue_size"}, "target": {"type": "Value", "value": "10"}}}]),
                None,
                Err("Value target"),
            ),
            (
                "external average",
                serde_json::json!([{"type": "External", "external": {
                "metric": {"name": "queue_size"}, "target": avg("5")}}]),
                None,
                Ok(5.0),
            ),
            (
                "two in-system metrics: the smaller target",
                serde_json::json!([
                    pods("num_requests_running", avg("6")),
                    pods("concurrency", avg("4"))
                ]),
                None,
                Ok(4.0),
            ),
            (
                "one unpredictable spoils it",
                serde_json::json!([
                pods("num_requests_running", avg("6")),
                {"type": "Resource", "resource": {"name": "memory",
                    "target": {"type": "Utilization", "averageUtilization": 70}}}]),
                None,
                Err("memory"),
            ),
            (
                "no metrics",
                serde_json::json!([]),
                None,
                Err("default CPU"),
            ),
        ];
        for (name, metrics, explicit, want) in rows {
            let s = hpa_status(&hpa(metrics), explicit);
            assert_eq!(
                (
                    s.min_replicas,
                    s.max_replicas,
                    s.current_replicas,
                    s.desired_replicas
                ),
                (2, 12, 3, 4),
                "{name}"
            );
            match (s.metric, want) {
                (HpaMetric::InSystemPerReplica { target_average }, Ok(w)) => {
                    assert_eq!(target_average, w, "{name}")
                }
                (HpaMetric::Unpredictable { why }, Err(piece)) => {
                    assert!(why.contains(piece), "{name}: {why}")
                }
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn sizing_takes_the_users_floor_while_prewarm_holds_a_raise() {
        use crate::adapters::kube::hpa::scaled_object;
        use crate::core::floor::{RAISED_MIN, USER_MIN};
        // The fixture HPA says minReplicas 2; prewarm raised it to 6 from the user's 2.
        let mut raised = hpa(serde_json::json!([]));
        raised.spec.as_mut().unwrap().min_replicas = Some(6);
        raised.metadata.annotations = Some(
            [(USER_MIN, "2"), (RAISED_MIN, "6")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .into(),
        );
        let status = hpa_status(&raised, None);
        assert_eq!(status.min_replicas, 6, "the spec says prewarm's 6");
        let sized = with_users_floor(status.clone(), &floor::floor_view(&raised));
        assert_eq!(sized.min_replicas, 2, "sized with the user's 2");
        // The user set 4 while it was raised: 4 is theirs.
        raised.spec.as_mut().unwrap().min_replicas = Some(4);
        let edited = hpa_status(&raised, None);
        let sized = with_users_floor(edited, &floor::floor_view(&raised));
        assert_eq!(sized.min_replicas, 4);
        // KEDA: the HPA says KEDA's 5 (from minReplicaCount 5, prewarm's raise of the user's 1);
        // the lease is on the ScaledObject.
        let so: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": {"name": "llama", "namespace": "ml",
                         "annotations": {USER_MIN: "1", RAISED_MIN: "5"}},
            "spec": {"minReplicaCount": 5, "maxReplicaCount": 12}
        }))
        .unwrap();
        let keda = HpaStatus {
            min_replicas: 5,
            ..status
        };
        let sized = with_users_floor(keda, &scaled_object::floor_view(&so));
        assert_eq!(sized.min_replicas, 1);
    }

    #[test]
    fn quantities() {
        for (raw, want) in [
            ("4", Some(4.0)),
            ("500m", Some(0.5)),
            ("2k", Some(2000.0)),
            ("1Ki", Some(1024.0)),
            ("1.5", Some(1.5)),
            ("x", None),
        ] {
            assert_eq!(parse_quantity(raw), want, "{raw}");
        }
    }
}
