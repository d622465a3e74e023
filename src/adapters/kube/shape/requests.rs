//! What a pod asks of a node, as the scheduler counts it (pure): the placeholder of a drain
//! holds the sum of this over the pods it stands for.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::adapters::kube::hpa::parse_quantity;

/// One container's requests per resource (a request missing where a limit is set counts as the
/// limit, as the apiserver defaults it).
fn container_requests(c: &Container) -> BTreeMap<String, f64> {
    let r = c.resources.as_ref();
    let requests = r.and_then(|r| r.requests.clone()).unwrap_or_default();
    let limits = r.and_then(|r| r.limits.clone()).unwrap_or_default();
    let mut out = BTreeMap::new();
    for name in requests.keys().chain(limits.keys()) {
        let q = requests.get(name).or_else(|| limits.get(name));
        if let Some(v) = q.and_then(|q| parse_quantity(&q.0)) {
            out.insert(name.clone(), v);
        }
    }
    out
}

fn add(into: &mut BTreeMap<String, f64>, from: &BTreeMap<String, f64>) {
    for (k, v) in from {
        *into.entry(k.clone()).or_insert(0.0) += v;
    }
}

/// A pod's effective requests per resource, as the scheduler counts them: the larger of the
/// containers' sum (plus sidecars: init containers with `restartPolicy: Always`) and each
/// ordinary init container's own (plus the sidecars started before it), plus the pod overhead.
pub(crate) fn pod_requests(pod: &Pod) -> BTreeMap<String, f64> {
    let Some(spec) = pod.spec.as_ref() else {
        return BTreeMap::new();
    };
    let mut sidecars = BTreeMap::new();
    let mut init_peak: BTreeMap<String, f64> = BTreeMap::new();
    for c in spec.init_containers.iter().flatten() {
        let own = container_requests(c);
        if c.restart_policy.as_deref() == Some("Always") {
            add(&mut sidecars, &own);
        } else {
            let mut during = sidecars.clone();
            add(&mut during, &own);
            for (k, v) in during {
                let peak = init_peak.entry(k).or_insert(0.0);
                *peak = peak.max(v);
            }
        }
    }
    let mut out = sidecars;
    for c in &spec.containers {
        add(&mut out, &container_requests(c));
    }
    for (k, v) in init_peak {
        let sum = out.entry(k).or_insert(0.0);
        *sum = sum.max(v);
    }
    let overhead: BTreeMap<String, f64> = spec
        .overhead
        .iter()
        .flatten()
        .filter_map(|(k, q)| parse_quantity(&q.0).map(|v| (k.clone(), v)))
        .collect();
    add(&mut out, &overhead);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn effective_requests_count_init_containers_sidecars_and_overhead() {
        let c = |name: &str, cpu: &str, mem: &str| json!({"name": name, "resources": {"requests": {"cpu": cpu, "memory": mem}}});
        let gib = 1024.0 * 1024.0 * 1024.0;
        // (situation, pod spec, expected cpu cores, expected memory GiB) — worked out by hand.
        let cases = [
            (
                "containers only: their sum",
                json!({"containers": [c("a", "1", "1Gi"), c("b", "500m", "2Gi")]}),
                1.5,
                3.0,
            ),
            (
                "an init container larger than the sum (model download needing 8Gi): the init's",
                json!({"initContainers": [c("fetch", "1", "8Gi")],
                       "containers": [c("a", "2", "2Gi")]}),
                2.0,
                8.0,
            ),
            (
                "a sidecar (restartPolicy Always) adds to the sum and to later inits",
                json!({"initContainers": [
                        {"name": "proxy", "restartPolicy": "Always",
                         "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}},
                        c("fetch", "1", "6Gi")],
                       "containers": [c("a", "2", "2Gi")]}),
                // sum 0.25 + 2 = 2.25 cpu, 1 + 2 = 3 GiB; init "fetch" runs next to the
                // proxy: 1.25 cpu, 7 GiB. Larger of each.
                2.25,
                7.0,
            ),
            (
                "pod overhead on top",
                json!({"overhead": {"cpu": "250m", "memory": "512Mi"},
                       "containers": [c("a", "1", "1Gi")]}),
                1.25,
                1.5,
            ),
        ];
        for (what, spec, cpu, mem) in cases {
            let p = pod(json!({"metadata": {"name": "p"}, "spec": spec}));
            let got = pod_requests(&p);
            assert_eq!(got["cpu"], cpu, "{what}");
            assert_eq!(got["memory"], mem * gib, "{what}");
        }
    }
}
