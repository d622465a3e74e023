//! `prewarm explain --cluster-state`: a spot warning's drain replayed offline on a hand-written
//! cluster state, the binary run whole. Every expected line is worked out by hand from the drain
//! rules (docs/interruption.md) for `events/sqs-spot-interruption.json`: issued 12:00:00 (the
//! envelope time equals SentTimestamp 1795953600000), instance end 12:02:00, eviction deadline
//! 12:02:00 − EVICTION_BUDGET_SECONDS 30 = 12:01:30, RECHECK_SECONDS 15.
//!
//! STATE (`tests/data/drain_replay_state.json`): node gpu-node-a (pool gpu, the instance
//! i-0abc1111111111111) runs llama-0 (2 GPUs, grace 30 s), llama-slow (2 GPUs, grace 300 s) and a
//! DaemonSet pod; gpu-node-b is a Ready node of the same pool.

use serde_json::Value;

#[path = "common/prewarm_bin.rs"]
mod prewarm_bin;

const TARGETS: &str = r#"[{"name":"llama","nodePool":"gpu","headroom":{"kind":"balloon","namespace":"prewarm","name":"balloon-llama"},"maxSpare":8}]"#;

fn state_fixture() -> Value {
    serde_json::from_str(include_str!("data/drain_replay_state.json")).unwrap()
}

/// Runs the replay of the spot warning on `state` from 12:00:00 for `steps` further checks.
fn replay(state: &Value, steps: u32) -> Vec<Value> {
    replay_event(state, "sqs-spot-interruption.json", steps)
}

/// Runs the replay of `events/<event>` on `state` from 12:00:00; one JSON value per step.
fn replay_event(state: &Value, event: &str, steps: u32) -> Vec<Value> {
    replay_with(state, event, steps, TARGETS)
}

/// `replay_event` with the targets `targets`.
fn replay_with(state: &Value, event: &str, steps: u32, targets: &str) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    std::fs::write(&path, state.to_string()).unwrap();
    let out = prewarm_bin::run_prewarm(&[
        "explain",
        "--event",
        &format!("{}/events/{event}", env!("CARGO_MANIFEST_DIR")),
        "--cluster-state",
        path.to_str().unwrap(),
        "--at",
        "2026-11-29T12:00:00Z",
        "--steps",
        &steps.to_string(),
        "--targets",
        targets,
        "--eviction-budget-seconds",
        "30",
        "--actions",
        "",
    ]);
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// (at, phase, commands, next check) of each step.
fn summary(lines: &[Value]) -> Vec<(String, String, Vec<String>, String)> {
    lines
        .iter()
        .map(|l| {
            (
                l["at"].as_str().unwrap().to_string(),
                l["phase"].as_str().unwrap_or("-").to_string(),
                l["commands"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c.as_str().unwrap().to_string())
                    .collect(),
                l["next_check"].as_str().unwrap_or("-").to_string(),
            )
        })
        .collect()
}

fn row(
    at: &str,
    phase: &str,
    commands: &[&str],
    next: &str,
) -> (String, String, Vec<String>, String) {
    (
        format!("2026-11-29T{at}.000Z"),
        phase.into(),
        commands.iter().map(|c| c.to_string()).collect(),
        if next == "-" {
            "-".into()
        } else {
            format!("2026-11-29T{next}.000Z")
        },
    )
}

/// The last step of a drain: nothing evictable left, the placeholder released, done.
fn drained(at: &str) -> (String, String, Vec<String>, String) {
    row(
        at,
        "drained",
        &[
            "record-state drained",
            "release-replacement",
            "done drained",
        ],
        "-",
    )
}

const TAINT: &str = "taint prewarm.io/draining=spot-interruption:NoSchedule";

/// Step 2 at 12:00:15: the placeholder runs (the next comment says why): hand-over, then `then`.
fn handed_over(then: &str) -> (String, String, Vec<String>, String) {
    row(
        "12:00:15",
        "evicting",
        &[
            "record-state evicting",
            "hand-over",
            then,
            "wait-until 2026-11-29T12:00:30.000Z",
        ],
        "12:00:30",
    )
}

/// Step 1 of the spot warning's drain at 12:00:00 (the next comment says why).
fn claimed() -> (String, String, Vec<String>, String) {
    row(
        "12:00:00",
        "evicting",
        &[
            "record-state evicting",
            "cordon",
            TAINT,
            "request-replacement gpus=2",
            "evict inference/llama-slow tier=1 grace=120s",
            "wait-until 2026-11-29T12:00:15.000Z",
        ],
        "12:00:15",
    )
}

/// Step 1 claims: cordon, taint, a placeholder for llama-0's 2 GPUs, and llama-slow goes at
/// once (due at end − 300 s = 11:57:00, before now; grace cut to the 120 s left). The placeholder
/// runs on gpu-node-b (Ready, pool gpu). Step 2 (15 s later) sees it running: hand-over, llama-0
/// evicted (its own 30 s grace fits the 105 s left: not cut). Step 3: only the DaemonSet pod is
/// left: drained, released, done — the replay stops there although 5 checks were allowed.
#[test]
fn a_ready_replacement_hands_over_at_the_second_check() {
    let lines = replay(&state_fixture(), 5);
    assert_eq!(
        summary(&lines),
        vec![
            claimed(),
            handed_over("evict inference/llama-0 tier=1"),
            drained("12:00:30"),
        ]
    );
    assert_eq!(lines[1]["replacement_seen"], "running");
    assert_eq!(
        lines[0]["applied"]["placeholder"],
        "placeholder prewarm/prewarm-replacement-i-0abc1111111111111 made, Running on gpu-node-b"
    );
}

/// llama-slow (a ReplicaSet's pod, grace 300 s) is due at the claim and evicted in that step:
/// its successor asks for its own room, so the placeholder made in the same step stands for
/// llama-0 alone (2 GPUs, 8 cpu, 64Gi = 68719476736 bytes), not for both.
#[test]
fn a_pod_evicted_at_the_claim_is_not_in_the_claims_placeholder() {
    let lines = replay(&state_fixture(), 0);
    let commands = &summary(&lines)[0].2;
    assert!(
        commands.contains(&"request-replacement gpus=2".to_string()),
        "{commands:?}"
    );
    assert!(
        commands.contains(&"evict inference/llama-slow tier=1 grace=120s".to_string()),
        "{commands:?}"
    );
    assert_eq!(
        lines[0]["applied"]["placeholder_requests"],
        serde_json::json!({"cpu": "8000m", "memory": "68719476736", "nvidia.com/gpu": "2"})
    );
}

/// No Ready node of the pool besides the draining one (gpu-node-b NotReady): the placeholder stays
/// Pending, so after llama-slow's early eviction the drain waits, checking every 15 s, until the
/// deadline 12:01:30 (also llama-0's due time: min(deadline, end − 30 s)). There it says it evicts
/// without a replacement, hands the pending placeholder over and evicts llama-0 (30 s left = its
/// own grace: not cut); 15 s later it is drained.
#[test]
fn without_a_ready_node_the_deadline_step_evicts_without_a_replacement() {
    let mut state = state_fixture();
    state["items"][1]["status"]["conditions"][0]["status"] = "False".into();
    let lines = replay(&state, 10);
    let waiting = |at: &str, next: &str| {
        row(
            at,
            "evicting",
            &[
                "record-state evicting",
                &format!("wait-until 2026-11-29T{next}.000Z"),
            ],
            next,
        )
    };
    assert_eq!(
        summary(&lines)[1..],
        vec![
            waiting("12:00:15", "12:00:30"),
            waiting("12:00:30", "12:00:45"),
            waiting("12:00:45", "12:01:00"),
            waiting("12:01:00", "12:01:15"),
            waiting("12:01:15", "12:01:30"),
            row(
                "12:01:30",
                "evicting",
                &[
                    "record-state evicting",
                    "announce DrainWithoutReplacement",
                    "hand-over",
                    "evict inference/llama-0 tier=1",
                    "wait-until 2026-11-29T12:01:45.000Z",
                ],
                "12:01:45"
            ),
            drained("12:01:45"),
        ]
    );
    assert_eq!(lines[1]["replacement_seen"], "pending");
    assert!(lines[0]["applied"]["placeholder"]
        .as_str()
        .unwrap()
        .ends_with("Pending (no Ready node of the pool in STATE)"));
}

/// A PodDisruptionBudget of llama-0 with disruptionsAllowed 0: the hand-over step's eviction is
/// blocked and llama-0 stays, so the next check (12:00:30) evicts it again (no hand-over: the
/// placeholder is gone) and is blocked again; the drain keeps checking.
#[test]
fn a_budget_with_no_disruptions_allowed_keeps_its_pod() {
    let mut state = state_fixture();
    state["items"].as_array_mut().unwrap().push(serde_json::json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "llama-pdb", "namespace": "inference"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "llama"}}},
        "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}
    }));
    let lines = replay(&state, 2);
    let s = summary(&lines);
    assert_eq!(
        s[2],
        row(
            "12:00:30",
            "evicting",
            &[
                "record-state evicting",
                "evict inference/llama-0 tier=1",
                "wait-until 2026-11-29T12:00:45.000Z",
            ],
            "12:00:45"
        )
    );
    let blocked =
        serde_json::json!(["inference/llama-0 (PodDisruptionBudget inference/llama-pdb)"]);
    assert_eq!(lines[1]["applied"]["blocked"], blocked);
    assert_eq!(lines[2]["applied"]["blocked"], blocked);
}

/// A Capacity Block warning (`events/sqs-capacity-block.json`: issued 12:00:00, end-date 12:40:00,
/// so termination at 12:40 − 30 min = 12:10:00 and the deadline 12:09:30) names its reservation:
/// the replay drains the node labelled with it, as the handler's fan-out finds it. Ten minutes
/// leave llama-slow undue at the claim (due 12:10:00 − 300 s = 12:05:00), so step 1 only claims
/// and asks for the placeholder; step 2 sees it running on gpu-node-b and evicts both pods after
/// the hand-over (neither grace is cut: 585 s are left); step 3 finds the node drained.
#[test]
fn a_capacity_block_warning_drains_the_node_labelled_with_its_reservation() {
    let mut state = state_fixture();
    state["items"][0]["metadata"]["labels"]["karpenter.k8s.aws/capacity-reservation-id"] =
        "cr-0abc9999999999999".into();
    let lines = replay_event(&state, "sqs-capacity-block.json", 5);
    assert_eq!(
        summary(&lines),
        vec![
            row(
                "12:00:00",
                "waiting-for-replacement",
                &[
                    "record-state waiting-for-replacement",
                    "cordon",
                    "taint prewarm.io/draining=capacity-block:NoSchedule",
                    "request-replacement gpus=4",
                    "wait-until 2026-11-29T12:00:15.000Z",
                ],
                "12:00:15"
            ),
            row(
                "12:00:15",
                "evicting",
                &[
                    "record-state evicting",
                    "hand-over",
                    "evict inference/llama-0 tier=1",
                    "evict inference/llama-slow tier=1",
                    "wait-until 2026-11-29T12:00:30.000Z",
                ],
                "12:00:30"
            ),
            drained("12:00:30"),
        ]
    );
    assert_eq!(lines[0]["instance"], "i-0abc1111111111111");
}

/// With DRAIN_SURGE on (the default) and `inference` a target's podNamespace, llama-0's
/// Deployment (llama: replicas 1, 1 ready; its ReplicaSet llama-5d9f in STATE) is surged once
/// the replacement is ready (12:00:15): want = 1 + k 1 = 2 > 1 ready, so llama-0's eviction is
/// held (due at min(deadline 12:01:30, end 12:02:00 − grace 30 s) = 12:01:30). No surge pod turns
/// Ready offline: the surge is renewed each check (held) until 12:01:30, where the deadline has
/// come (no surge wanted) and llama-0 goes; 12:01:45 finds the node empty and gives the surge
/// back (the record on llama names this drain) before the placeholder. llama-slow's ReplicaSet
/// is not in STATE: no surge for it, evicted at the claim as before.
#[test]
fn a_surge_holds_the_eviction_and_the_drains_end_gives_it_back() {
    let mut state = state_fixture();
    let items = state["items"].as_array_mut().unwrap();
    items.push(
        serde_json::json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"namespace": "inference", "name": "llama-5d9f", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llama", "uid": "d-1",
             "controller": true}]}}),
    );
    items.push(
        serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"namespace": "inference", "name": "llama"},
        "spec": {"replicas": 1, "selector": {}, "template": {}},
        "status": {"replicas": 1, "readyReplicas": 1}}),
    );
    let targets = TARGETS.replace(
        r#""maxSpare":8"#,
        r#""maxSpare":8,"podNamespace":"inference""#,
    );
    let lines = replay_with(&state, "sqs-spot-interruption.json", 10, &targets);
    let surge = "surge inference/llama k=1 held=1";
    let held = |at: &str, next: &str| {
        row(
            at,
            "evicting",
            &[
                "record-state evicting",
                surge,
                &format!("wait-until 2026-11-29T{next}.000Z"),
            ],
            next,
        )
    };
    assert_eq!(
        summary(&lines),
        vec![
            claimed(),
            handed_over(surge),
            held("12:00:30", "12:00:45"),
            held("12:00:45", "12:01:00"),
            held("12:01:00", "12:01:15"),
            held("12:01:15", "12:01:30"),
            row(
                "12:01:30",
                "evicting",
                &[
                    "record-state evicting",
                    "evict inference/llama-0 tier=1",
                    "wait-until 2026-11-29T12:01:45.000Z",
                ],
                "12:01:45"
            ),
            row(
                "12:01:45",
                "drained",
                &[
                    "record-state drained",
                    "release-surge inference/llama drain=i-0abc1111111111111",
                    "release-replacement",
                    "done drained",
                ],
                "-"
            ),
        ]
    );
    assert_eq!(
        lines[1]["applied"]["surges"],
        serde_json::json!(["inference/llama: replicas raised"])
    );
    assert_eq!(
        lines[7]["applied"]["surges"],
        serde_json::json!(["inference/llama: replicas restored"])
    );
}
