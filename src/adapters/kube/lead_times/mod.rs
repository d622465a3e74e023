//! Lead-time samples from the cluster's own objects (`core::lead`): a Karpenter NodeClaim's
//! boot, a pod's image pull and model load. Pure shaping here; the reads and the ConfigMap the
//! book is kept in are in [`store`].
//!
//! - Node boot (per NodePool): the NodeClaim's `creationTimestamp` to its `Initialized`
//!   condition turning True (launch, registration and the node's own start-up: Karpenter sets it
//!   once the node is Ready and its start-up taints are gone, the moment a pod can land).
//! - Image pull (per target): the pod's `PodScheduled` condition to its containers' start; when
//!   the kubelet's `Pulled` events of the pod are seen, the pull durations they report instead
//!   (0 s for an image already present), which leave out the sandbox and volume set-up.
//! - Model load (per target): the containers' start to the pod's `Ready` condition.
//!
//! Only pods that are Ready now and whose containers never restarted give samples: a restart
//! moves `startedAt` past the first start, and a pod not Ready yet has no end to measure.

pub mod store;

use k8s_openapi::api::core::v1::{Event, Pod};
use serde_json::Value;

pub use crate::core::lead::Learned;
use crate::core::lead::{LeadSample, Phase};

/// The label naming a NodeClaim's NodePool (the same as its node's).
pub use super::shape::NODEPOOL_LABEL;

/// Unix seconds of an RFC 3339 time.
fn unix(raw: &str) -> Option<f64> {
    chrono::DateTime::parse_from_rfc3339(raw)
        .ok()
        .map(|t| t.timestamp_millis() as f64 / 1000.0)
}

fn condition_true_since(conditions: Option<&Value>, kind: &str) -> Option<f64> {
    let c = conditions?
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind && c["status"] == "True")?;
    unix(c["lastTransitionTime"].as_str()?)
}

/// A NodeClaim (`karpenter.sh/v1`, as JSON) that finished booting: its NodePool and how long it
/// took. None before `Initialized` is True, or without the NodePool label.
pub fn node_boot(claim: &Value) -> Option<Learned> {
    let meta = &claim["metadata"];
    let pool = meta["labels"][NODEPOOL_LABEL].as_str()?;
    let created = unix(meta["creationTimestamp"].as_str()?)?;
    let initialized = condition_true_since(claim["status"].get("conditions"), "Initialized")?;
    let id = meta["uid"]
        .as_str()
        .or_else(|| meta["name"].as_str())?
        .to_string();
    Some(Learned {
        phase: Phase::NodeBoot,
        scope: pool.to_string(),
        sample: LeadSample {
            id,
            at: initialized,
            seconds: initialized - created,
        },
    })
}

/// How long the kubelet's `Pulled` event says a pull took: the time including the wait behind
/// other pulls when it says so ("Successfully pulled image \"x\" in 1.2s (3.4s including
/// waiting)..."), 0 for "Container image \"x\" already present on machine". None for any other
/// message.
pub fn pulled_seconds(message: &str) -> Option<f64> {
    if message.contains("already present on machine") {
        return Some(0.0);
    }
    let rest = message.split_once("Successfully pulled image")?.1;
    let after_in = rest.rsplit_once("\" in ").map_or(rest, |(_, r)| r);
    let took = go_duration(after_in.split_whitespace().next()?)?;
    // "(3.4s including waiting)": the pod waited that long for its image.
    let waited = after_in
        .split_once('(')
        .and_then(|(_, w)| w.split_once(" including waiting"))
        .and_then(|(d, _)| go_duration(d.trim()));
    Some(waited.unwrap_or(took))
}

/// A Go duration as the kubelet prints it (`1.5s`, `850ms`, `2m3.1s`, `1h0m2s`), in seconds.
pub fn go_duration(raw: &str) -> Option<f64> {
    let raw = raw.trim_end_matches([',', '.', ')']);
    let mut total = 0.0;
    let mut number = String::new();
    let mut chars = raw.chars().peekable();
    let mut parsed_any = false;
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() || c == '.' {
            number.push(c);
            continue;
        }
        let mut unit = c.to_string();
        while let Some(&n) = chars.peek() {
            if n.is_ascii_digit() || n == '.' {
                break;
            }
            unit.push(n);
            chars.next();
        }
        let value: f64 = number.parse().ok()?;
        number.clear();
        total += value
            * match unit.as_str() {
                "h" => 3_600.0,
                "m" => 60.0,
                "s" => 1.0,
                "ms" => 1e-3,
                "us" | "µs" => 1e-6,
                "ns" => 1e-9,
                _ => return None,
            };
        parsed_any = true;
    }
    (parsed_any && number.is_empty()).then_some(total)
}

/// The pull seconds per pod uid from the kubelet's `Pulled` events (summed over the pod's
/// containers: the kubelet pulls them one after another).
pub fn pulls_by_pod(events: &[Event]) -> std::collections::HashMap<String, f64> {
    let mut pulls = std::collections::HashMap::new();
    for e in events {
        if e.reason.as_deref() != Some("Pulled") {
            continue;
        }
        let (Some(uid), Some(seconds)) = (
            e.involved_object.uid.as_deref(),
            e.message.as_deref().and_then(pulled_seconds),
        ) else {
            continue;
        };
        *pulls.entry(uid.to_string()).or_insert(0.0) += seconds;
    }
    pulls
}

/// The pull and load samples of one pod of `target`, when it is Ready and its containers never
/// restarted; `pulled` is the pull time the kubelet's events report for it, when seen.
pub fn pod_samples(pod: &Pod, target: &str, pulled: Option<f64>) -> Vec<Learned> {
    let Ok(json) = serde_json::to_value(pod) else {
        return Vec::new();
    };
    let status = &json["status"];
    let conditions = status.get("conditions");
    let (Some(uid), Some(scheduled), Some(ready)) = (
        json["metadata"]["uid"].as_str(),
        condition_true_since(conditions, "PodScheduled"),
        condition_true_since(conditions, "Ready"),
    ) else {
        return Vec::new();
    };
    let containers = status["containerStatuses"].as_array();
    let restarted = containers.is_none_or(|cs| cs.iter().any(|c| c["restartCount"] != 0));
    // The last container to start gates readiness: what comes after it is the load.
    let started = containers
        .into_iter()
        .flatten()
        .map(|c| c["state"]["running"]["startedAt"].as_str().and_then(unix))
        .collect::<Option<Vec<f64>>>()
        .and_then(|starts| starts.into_iter().reduce(f64::max));
    let (false, Some(started)) = (restarted, started) else {
        return Vec::new();
    };
    let sample = |phase, at: f64, seconds: f64| Learned {
        phase,
        scope: target.to_string(),
        sample: LeadSample {
            id: uid.to_string(),
            at,
            seconds,
        },
    };
    vec![
        sample(
            Phase::ImagePull,
            started,
            pulled.unwrap_or(started - scheduled),
        ),
        sample(Phase::ModelLoad, ready, ready - started),
    ]
}

#[cfg(test)]
mod tests;
