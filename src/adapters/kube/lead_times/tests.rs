use super::*;
use serde_json::json;

/// 2026-11-29T12:00:00Z.
const T0: f64 = 1_795_953_600.0;

fn claim(labels: Value, created: &str, conditions: Value) -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "gpu-abcde", "uid": "c-1", "labels": labels,
                     "creationTimestamp": created},
        "status": {"conditions": conditions}
    })
}

fn cond(kind: &str, status: &str, at: &str) -> Value {
    json!({"type": kind, "status": status, "lastTransitionTime": at,
           "reason": kind, "message": ""})
}

#[test]
fn a_nodeclaim_gives_its_boot_once_initialized() {
    let pool = json!({NODEPOOL_LABEL: "gpu"});
    let launched = cond("Launched", "True", "2026-11-29T12:00:02Z");
    let registered = cond("Registered", "True", "2026-11-29T12:00:31Z");
    // (name, the claim, the boot learned: pool and seconds)
    type Case<'a> = (&'a str, Value, Option<(&'a str, f64)>);
    let cases: Vec<Case> = vec![
        (
            "initialized 33 s after creation",
            claim(
                pool.clone(),
                "2026-11-29T12:00:00Z",
                json!([
                    launched,
                    registered,
                    cond("Initialized", "True", "2026-11-29T12:00:33Z")
                ]),
            ),
            Some(("gpu", 33.0)),
        ),
        (
            "registered, not initialized yet: no end",
            claim(
                pool.clone(),
                "2026-11-29T12:00:00Z",
                json!([
                    launched,
                    registered,
                    cond("Initialized", "Unknown", "2026-11-29T12:00:00Z")
                ]),
            ),
            None,
        ),
        (
            "no conditions at all",
            claim(pool.clone(), "2026-11-29T12:00:00Z", json!(null)),
            None,
        ),
        (
            "no NodePool label: no scope",
            claim(
                json!({}),
                "2026-11-29T12:00:00Z",
                json!([cond("Initialized", "True", "2026-11-29T12:00:33Z")]),
            ),
            None,
        ),
        (
            "a time that is not RFC 3339",
            claim(
                pool.clone(),
                "yesterday",
                json!([cond("Initialized", "True", "2026-11-29T12:00:33Z")]),
            ),
            None,
        ),
    ];
    for (name, claim, want) in cases {
        let got = node_boot(&claim);
        match want {
            None => assert_eq!(got, None, "{name}"),
            Some((pool, seconds)) => {
                let got = got.unwrap_or_else(|| panic!("{name}: nothing learned"));
                assert_eq!(got.phase, Phase::NodeBoot, "{name}");
                assert_eq!(got.scope, pool, "{name}");
                assert_eq!(got.sample.id, "c-1", "{name}");
                assert_eq!(got.sample.seconds, seconds, "{name}");
                assert_eq!(got.sample.at, T0 + 33.0, "{name}");
            }
        }
    }
}

#[test]
fn pulled_events_read_as_seconds() {
    let cases = [
        (
            r#"Successfully pulled image "vllm/vllm-openai:v0.6" in 12.3s (12.3s including waiting). Image size: 71027698 bytes."#,
            Some(12.3),
        ),
        // Queued behind another pull: the pod waited the longer time.
        (
            r#"Successfully pulled image "vllm" in 1.5s (4.25s including waiting)"#,
            Some(4.25),
        ),
        // Older kubelets: no "including waiting".
        (r#"Successfully pulled image "vllm" in 2m3.5s"#, Some(123.5)),
        (
            r#"Successfully pulled image "busybox" in 850ms"#,
            Some(0.85),
        ),
        (
            r#"Container image "vllm/vllm-openai:v0.6" already present on machine"#,
            Some(0.0),
        ),
        (r#"Pulling image "vllm""#, None),
        (r#"Successfully pulled image "vllm" in soon"#, None),
    ];
    for (message, want) in cases {
        let got = pulled_seconds(message);
        match (got, want) {
            (Some(g), Some(w)) => assert!((g - w).abs() < 1e-9, "{message}: {g} != {w}"),
            _ => assert_eq!(got, want, "{message}"),
        }
    }
}

#[test]
fn go_durations() {
    let cases = [
        ("1.5s", Some(1.5)),
        ("850ms", Some(0.85)),
        ("1h0m2s", Some(3602.0)),
        ("2m", Some(120.0)),
        ("12", None),
        ("", None),
        ("3x", None),
    ];
    for (raw, want) in cases {
        assert_eq!(go_duration(raw), want, "{raw:?}");
    }
}

fn pod(conditions: Value, containers: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "llama-0", "namespace": "inference", "uid": "p-1"},
        "status": {"phase": "Running", "conditions": conditions,
                   "containerStatuses": containers}
    }))
    .unwrap()
}

fn running(name: &str, started: &str, restarts: u32) -> Value {
    json!({"name": name, "image": "vllm", "imageID": "", "ready": true,
           "restartCount": restarts, "state": {"running": {"startedAt": started}}})
}

#[test]
fn a_ready_pod_gives_its_pull_and_its_load() {
    let scheduled = cond("PodScheduled", "True", "2026-11-29T12:00:00Z");
    let ready = cond("Ready", "True", "2026-11-29T12:01:30Z");
    let server = running("server", "2026-11-29T12:00:20Z", 0);
    // (name, pod, pull seen in events, want (pull s, load s))
    type Case<'a> = (&'a str, Pod, Option<f64>, Option<(f64, f64)>);
    let cases: Vec<Case> = vec![
        (
            "scheduled 12:00:00, started 12:00:20, Ready 12:01:30",
            pod(json!([scheduled, ready]), json!([server])),
            None,
            Some((20.0, 70.0)),
        ),
        (
            "the Pulled event's time replaces the timestamps' pull",
            pod(json!([scheduled, ready]), json!([server])),
            Some(12.3),
            Some((12.3, 70.0)),
        ),
        (
            "a sidecar started first: the last start ends the pull",
            pod(
                json!([scheduled, ready]),
                json!([running("proxy", "2026-11-29T12:00:05Z", 0), server]),
            ),
            None,
            Some((20.0, 70.0)),
        ),
        (
            "not Ready yet",
            pod(
                json!([scheduled, cond("Ready", "False", "2026-11-29T12:00:00Z")]),
                json!([server]),
            ),
            None,
            None,
        ),
        (
            "restarted: startedAt is not the first start",
            pod(
                json!([scheduled, ready]),
                json!([running("server", "2026-11-29T12:00:50Z", 1)]),
            ),
            None,
            None,
        ),
        (
            "a container not running",
            pod(
                json!([scheduled, ready]),
                json!([{"name": "server", "image": "vllm", "imageID": "", "ready": false,
                        "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}]),
            ),
            None,
            None,
        ),
        (
            "no PodScheduled condition",
            pod(json!([ready]), json!([server])),
            None,
            None,
        ),
    ];
    for (name, pod, pulled, want) in cases {
        let got = pod_samples(&pod, "llama", pulled);
        let Some((pull, load)) = want else {
            assert!(got.is_empty(), "{name}: {got:?}");
            continue;
        };
        let seconds: Vec<(Phase, &str, f64)> = got
            .iter()
            .map(|l| (l.phase, l.scope.as_str(), l.sample.seconds))
            .collect();
        assert_eq!(
            seconds,
            vec![
                (Phase::ImagePull, "llama", pull),
                (Phase::ModelLoad, "llama", load)
            ],
            "{name}"
        );
        assert!(got.iter().all(|l| l.sample.id == "p-1"), "{name}");
        // Each phase ends where it ends: the start, then Ready.
        assert_eq!(got[0].sample.at, T0 + 20.0, "{name}");
        assert_eq!(got[1].sample.at, T0 + 90.0, "{name}");
    }
}

#[test]
fn pulls_are_summed_per_pod_from_pulled_events_only() {
    let event = |uid: &str, reason: &str, message: &str| -> Event {
        serde_json::from_value(json!({
            "metadata": {"name": format!("e-{uid}-{reason}"), "namespace": "inference"},
            "involvedObject": {"kind": "Pod", "uid": uid},
            "reason": reason, "message": message
        }))
        .unwrap()
    };
    let events = [
        event(
            "p-1",
            "Pulled",
            r#"Successfully pulled image "vllm" in 10s (10s including waiting)"#,
        ),
        event(
            "p-1",
            "Pulled",
            r#"Container image "proxy" already present on machine"#,
        ),
        event("p-1", "Pulling", r#"Pulling image "vllm""#),
        event(
            "p-2",
            "Pulled",
            r#"Successfully pulled image "vllm" in 2.5s"#,
        ),
        event("p-3", "Created", "Created container server"),
    ];
    let pulls = pulls_by_pod(&events);
    assert_eq!(pulls.len(), 2);
    assert_eq!(pulls["p-1"], 10.0);
    assert_eq!(pulls["p-2"], 2.5);
}
