//! The drain against the real apiserver of the local stack (tests/stack): node lookup by
//! providerID, cordon, taint, drain state annotations, evictions through policy/v1, a
//! PodDisruptionBudget's 429 recorded as an Event on the node, a foreign instance, duplicates,
//! and the tick's collection of orphaned drains. The fault matrix is its own binary
//! (`interruption_faults_stack`): it stops the apiserver, which no other test may meet.
//!
//! The handler runs as the `prewarm-lambda` user (PREWARM_LAMBDA_KUBECONFIG), so these tests
//! also prove that the RBAC of infra/k8s is enough. Test objects (a kwok-managed Node with an
//! AWS-style providerID, pods bound to it, PDBs) are created with the admin kubeconfig.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lambda_events::event::sqs::SqsMessage;
use k8s_openapi::api::core::v1::{Event as CoreEvent, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use prewarm::adapters::events::parse_record;
use prewarm::config::ClusterAccess;
use prewarm::handlers::interruption::{Continuation, RecordOutcome};
use serde_json::json;

#[path = "common/drain_fixtures.rs"]
mod drain_fixtures;
use drain_fixtures::*;

/// The tick's drain collection is cluster-wide: run in parallel, one test's collection hands
/// over (or un-drains) another test's drains, which are orphaned on purpose (seen once: the
/// tick test stepped the fault matrix's DLQ drain, when the matrix was still in this binary).
/// The tests that collect or leave drains orphaned take this lock for their whole run.
static CLUSTER_WIDE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_spot_warning_past_its_deadline_cordons_taints_evicts_and_finishes() {
    let admin = admin().await;
    ensure_namespace(&admin).await;
    let (node, instance) = (unique("h6-drain-"), unique("i-0abcd"));
    let pods = [format!("{node}-a"), format!("{node}-b")];
    make_node(&admin, &node, &instance).await;
    for p in &pods {
        make_pod(&admin, p, &node, "h6-free").await;
    }
    let h = handler(&[]).await;
    // Issued 100 s ago: the eviction deadline (120 - 30 s) has passed, so eviction is at once.
    let record = spot_record(&instance, &unique("ev-"), 100);
    let outcomes = run_until_done(&h, &record, 40).await;

    let n = Api::<Node>::all(admin.clone()).get(&node).await.unwrap();
    let pod_names: Vec<&str> = pods.iter().map(String::as_str).collect();
    let left = pods_left(&admin, &node).await;
    cleanup(&admin, &node, &pod_names, None).await;

    assert!(
        matches!(outcomes.last(), Some(RecordOutcome::Delete { .. })),
        "{outcomes:?}"
    );
    assert!(left.is_empty(), "pods left on the node: {left:?}");
    let spec = n.spec.unwrap();
    assert_eq!(spec.unschedulable, Some(true));
    let taint = spec
        .taints
        .unwrap()
        .into_iter()
        .find(|t| t.key == "prewarm.io/draining")
        .expect("the draining taint");
    assert_eq!(
        (taint.value.as_deref(), taint.effect.as_str()),
        (Some("spot-interruption"), "NoSchedule")
    );
    let a = n.metadata.annotations.unwrap();
    assert_eq!(a["prewarm.io/drain-phase"], "drained");
    assert_eq!(a["prewarm.io/drain-kind"], "spot-interruption");
    assert!(a.contains_key("prewarm.io/drain-evicting-since"));
    // Both pods evicted, counted on the node for the drain's `PodsMoved`.
    assert_eq!(a["prewarm.io/drain-pods-moved"], "2");
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_pdb_that_allows_nothing_keeps_the_record_and_names_the_pod_and_budget_in_an_event() {
    let admin = admin().await;
    ensure_namespace(&admin).await;
    let (node, instance) = (unique("h6-pdb-"), unique("i-0abcd"));
    let pod = format!("{node}-guarded");
    let app = unique("h6-guarded-");
    let pdb_name = format!("{node}-pdb");
    make_node(&admin, &node, &instance).await;
    make_pod(&admin, &pod, &node, &app).await;
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": pdb_name, "namespace": NS},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": app}}}
    }))
    .unwrap();
    Api::<PodDisruptionBudget>::namespaced(admin.clone(), NS)
        .create(&PostParams::default(), &pdb)
        .await
        .unwrap();

    let h = handler(&[]).await;
    let record = spot_record(&instance, &unique("ev-"), 100);
    let parsed = parse_record(&record);
    let first = h.handle_record(&parsed, &Continuation::default()).await;
    tokio::time::sleep(CHECK_GAP).await;
    let second = h.handle_record(&parsed, &Continuation::default()).await;

    let events = Api::<CoreEvent>::all(admin.clone())
        .list(&ListParams::default().fields(&format!("involvedObject.name={node}")))
        .await
        .unwrap()
        .items;
    let still_there = pods_left(&admin, &node).await;
    let n = Api::<Node>::all(admin.clone()).get(&node).await.unwrap();
    cleanup(&admin, &node, &[&pod], Some(&pdb_name)).await;

    // Claimed, blocked: each check continues the drain (a continuation, not a kept message).
    for o in [&first, &second] {
        assert!(matches!(o, RecordOutcome::Continue { .. }), "{o:?}");
    }
    assert_eq!(still_there, std::slice::from_ref(&pod));
    let blocked: Vec<&CoreEvent> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("DrainBlockedByPDB"))
        .collect();
    assert!(
        !blocked.is_empty(),
        "no DrainBlockedByPDB event among {events:?}"
    );
    let note = blocked[0].message.clone().unwrap_or_default();
    assert!(note.contains(&pod), "{note}");
    assert!(note.contains(&format!("{NS}/{pdb_name}")), "{note}");
    // Planned twice, refused twice: no pod moved.
    let a = n.metadata.annotations.unwrap_or_default();
    assert_eq!(a.get("prewarm.io/drain-pods-moved"), None, "{a:?}");
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_foreign_instance_is_acknowledged_and_duplicates_are_harmless() {
    let admin = admin().await;
    ensure_namespace(&admin).await;
    let h = handler(&[]).await;

    let foreign = parse_record(&spot_record(&unique("i-0f0f0"), &unique("ev-"), 5));
    match h.handle_record(&foreign, &Continuation::default()).await {
        RecordOutcome::Delete { reason } => {
            assert!(reason.contains("not in this cluster"), "{reason}")
        }
        other => panic!("{other:?}"),
    }

    // The same notice delivered twice at once, on a fresh warning (deadline 85 s ahead, no warm
    // capacity): both copies agree, neither evicts, the node is claimed once, and exactly one
    // delivery carries the drain on (the other collapses into it as a duplicate).
    let (node, instance) = (unique("h6-dup-"), unique("i-0abcd"));
    let pod = format!("{node}-a");
    make_node(&admin, &node, &instance).await;
    make_pod(&admin, &pod, &node, "h6-dup").await;
    let event_id = unique("ev-");
    let a = parse_record(&spot_record(&instance, &event_id, 5));
    let b = parse_record(&spot_record(&instance, &event_id, 5));
    let first = Continuation::default();
    let (oa, ob) = tokio::join!(h.handle_record(&a, &first), h.handle_record(&b, &first));
    let oc = h.handle_record(&a, &first).await;
    let n = Api::<Node>::all(admin.clone()).get(&node).await.unwrap();
    let left = pods_left(&admin, &node).await;
    cleanup(&admin, &node, &[&pod], None).await;

    let carrying = [&oa, &ob]
        .iter()
        .filter(|o| matches!(o, RecordOutcome::Continue { .. }))
        .count();
    assert_eq!(carrying, 1, "{oa:?} {ob:?}");
    for o in [&oa, &ob, &oc] {
        if let RecordOutcome::Delete { reason } = o {
            assert!(reason.contains("duplicate delivery"), "{reason}");
        }
    }
    assert!(matches!(oc, RecordOutcome::Delete { .. }), "{oc:?}");
    assert_eq!(left, [pod]);
    let a = n.metadata.annotations.unwrap();
    assert_eq!(a["prewarm.io/drain-event-id"], event_id);
    assert_eq!(a["prewarm.io/drain-phase"], "waiting-for-replacement");
    let taints = n.spec.unwrap().taints.unwrap();
    assert_eq!(
        taints
            .iter()
            .filter(|t| t.key == "prewarm.io/draining")
            .count(),
        1
    );
}

/// The rules are account-wide: most notices name instances of other clusters or none. Twenty of
/// them, sent together and delivered in two batches, cost one node list between them (the warm
/// container's index); a notice for this cluster's node is then found by name, with no list.
#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_storm_of_foreign_notices_costs_one_node_list() {
    let admin = admin().await;
    ensure_namespace(&admin).await;
    let h = handler(&[]).await;
    let (node, instance) = (unique("h6-index-"), unique("i-0abcd"));
    make_node(&admin, &node, &instance).await;
    // SQS stamps every record with its SentTimestamp: a second ago, before any list.
    let sent_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
        - 1_000;
    let with_sent = |mut r: SqsMessage| {
        r.attributes
            .insert("SentTimestamp".into(), sent_ms.to_string());
        r
    };
    let foreign: Vec<SqsMessage> = (0..20)
        .map(|_| with_sent(spot_record(&unique("i-0f0f0"), &unique("ev-"), 1)))
        .collect();
    let mut kept = Vec::new();
    for chunk in foreign.chunks(10) {
        let response = h
            .handle_batch(
                batch(chunk.to_vec()),
                SystemTime::now() + Duration::from_secs(15),
            )
            .await;
        kept.extend(failed_ids(&response));
    }
    let lists_after_storm = h.nodes.lists().await;
    let ours = parse_record(&with_sent(spot_record(&instance, &unique("ev-"), 1)));
    let claimed = h.handle_record(&ours, &Continuation::default()).await;
    let lists_after_ours = h.nodes.lists().await;
    cleanup(&admin, &node, &[], None).await;

    assert!(kept.is_empty(), "{kept:?}");
    assert_eq!(lists_after_storm, 1);
    // Found (no pods on it: drained at once), not "not in this cluster".
    match &claimed {
        RecordOutcome::Delete { reason } => assert!(reason.ends_with(": drained"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(lists_after_ours, 1);
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn handle_batch_continues_a_claimed_drain_with_its_own_message_and_keeps_poison() {
    let admin = admin().await;
    ensure_namespace(&admin).await;
    let (node, instance) = (unique("h6-batch-"), unique("i-0abcd"));
    let pod = format!("{node}-a");
    make_node(&admin, &node, &instance).await;
    make_pod(&admin, &pod, &node, "h6-batch").await;
    let sqs = sqs().await;
    let queue = sqs
        .create_queue()
        .queue_name(unique("h6-batch-"))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let h = handler(&[("INTERRUPTION_QUEUE_URL", &queue)]).await;
    // A fresh warning (deadline 85 s ahead, no warm capacity): claimed, work left.
    let claimed = spot_record(&instance, &unique("ev-"), 5);
    let mut poison = spot_record(&instance, &unique("ev-"), 5);
    poison.body = Some("spot interruption {not json".into());
    poison.message_id = Some(unique("m-"));
    let deadline = SystemTime::now() + Duration::from_secs(20);
    let response = h
        .handle_batch(batch(vec![claimed.clone(), poison.clone()]), deadline)
        .await;

    // The poison record is kept (to the DLQ after maxReceiveCount); the claimed one is
    // acknowledged, and its continuation waits in the queue: same body, attempt 1.
    assert_eq!(failed_ids(&response), [poison.message_id.clone().unwrap()]);
    let got = sqs
        .receive_message()
        .queue_url(&queue)
        .wait_time_seconds(5)
        .message_attribute_names("All")
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default();
    // A continuation sent with a send that fails falls back to keeping the message.
    let broken = handler(&[("INTERRUPTION_QUEUE_URL", &format!("{queue}-missing"))]).await;
    tokio::time::sleep(CHECK_GAP).await;
    let kept = broken
        .handle_batch(batch(vec![claimed.clone()]), deadline)
        .await;
    cleanup(&admin, &node, &[&pod], None).await;
    let _ = sqs.delete_queue().queue_url(&queue).send().await;

    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].body, claimed.body);
    let attempt = got[0]
        .message_attributes
        .as_ref()
        .and_then(|a| a.get("prewarm-attempt"))
        .and_then(|v| v.string_value.clone());
    assert_eq!(attempt.as_deref(), Some("1"));
    assert_eq!(failed_ids(&kept), [claimed.message_id.clone().unwrap()]);
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn the_tick_hands_orphaned_and_expired_drains_to_the_interruption_function() {
    let _alone = CLUSTER_WIDE.lock().await;
    use prewarm::core::interruption::{DrainSettings, ReservationVerdict};
    use prewarm::handlers::tick::reservations as collect;
    let admin = admin().await;
    ensure_namespace(&admin).await;
    // The tick runs as its own user: listing nodes is all it may do to them.
    let tick = prewarm::adapters::kube::client(&ClusterAccess::Kubeconfig {
        path: env("PREWARM_TICK_KUBECONFIG"),
    })
    .await
    .unwrap();
    let settings = DrainSettings {
        recheck_s: 2.0,
        ..DrainSettings::default()
    };
    let h = handler(&[]).await;

    // 1. A drain whose message went to the DLQ mid-drain: claimed, then silent for 10 minutes.
    let (orphan, orphan_i) = (unique("h6-orphan-"), unique("i-0abcd"));
    make_node(&admin, &orphan, &orphan_i).await;
    make_pod(&admin, &format!("{orphan}-a"), &orphan, "h6-orphan").await;
    // A spot warning issued 100 s ago: past its deadline, so a step evicts.
    let record = parse_record(&spot_record(&orphan_i, &unique("ev-"), 100));
    let claimed = h.handle_record(&record, &Continuation::default()).await;
    annotate(
        &admin,
        &orphan,
        &[
            ("prewarm.io/drain-last-step-at", ago(600)),
            // Silence counts from the planned check when it is later: dated back too.
            ("prewarm.io/drain-next-check-at", ago(585)),
        ],
    )
    .await;
    // 2. A cordon-prewarm rebalance drain 31 minutes old that no spot warning followed, on a
    //    node prewarm cordoned; 3. the same on a node an operator had cordoned before the claim.
    let prewarmed = |user_cordoned: bool| {
        let mut a = vec![
            ("prewarm.io/drain-event-id", "ev-rebalance".to_string()),
            ("prewarm.io/drain-kind", "rebalance".into()),
            ("prewarm.io/drain-phase", "prewarmed".into()),
            ("prewarm.io/drain-notice-time", ago(1_860)),
            ("prewarm.io/drain-started-at", ago(1_860)),
        ];
        if user_cordoned {
            a.push(("prewarm.io/drain-user-cordoned", "true".into()));
        }
        a
    };
    let (survivor, survivor_i) = (unique("h6-prewarm-"), unique("i-0abcd"));
    let (cordoned, cordoned_i) = (unique("h6-usercordon-"), unique("i-0abcd"));
    for (node, instance, user) in [
        (&survivor, &survivor_i, false),
        (&cordoned, &cordoned_i, true),
    ] {
        make_node(&admin, node, instance).await;
        annotate(&admin, node, &prewarmed(user)).await;
        Api::<Node>::all(admin.clone())
            .patch(
                node,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"unschedulable": true, "taints": [
                    {"key": "prewarm.io/draining", "value": "rebalance", "effect": "NoSchedule"}]}})),
            )
            .await
            .unwrap();
    }
    // 4. A `drain` (the default) of a rebalance that moved everything 41 minutes ago, on a node
    //    still Ready: a false alarm, un-drained 10 min after the end of the 30-min wait.
    let (false_alarm, false_alarm_i) = false_alarm_node(&admin, "h6-falsealarm-").await;
    let sqs = sqs().await;
    let queue = sqs
        .create_queue()
        .queue_name(unique("h6-handover-"))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();

    // The tick: detects and enqueues, writes nothing.
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let handover = collect::Handover {
        sqs: &sqs,
        queue_url: &queue,
    };
    let collected = collect::collect(&tick, &handover, &[], &settings, now)
        .await
        .unwrap();
    let nodes = Api::<Node>::all(admin.clone());
    let orphan_after_tick = nodes.get(&orphan).await.unwrap();
    // The interruption function: takes the resume-drain messages off the queue and steps them.
    let mut messages = Vec::new();
    for _ in 0..5 {
        let got = sqs
            .receive_message()
            .queue_url(&queue)
            .max_number_of_messages(10)
            .wait_time_seconds(2)
            .message_attribute_names("All")
            .send()
            .await
            .unwrap()
            .messages
            .unwrap_or_default();
        messages.extend(got);
        if messages.len() >= 4 {
            break;
        }
    }
    let mut outcomes = Vec::new();
    for m in &messages {
        let record: SqsMessage = serde_json::from_value(json!({
            "messageId": m.message_id, "receiptHandle": m.receipt_handle, "body": m.body,
            "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {},
            "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q",
            "awsRegion": "us-east-1"
        }))
        .unwrap();
        let parsed = prewarm::adapters::events::parse_record_with(
            &record,
            prewarm::adapters::events::InstanceIdRule::Ec2,
        );
        // A write that conflicts with kwok's own node writes is planned again up to 3 times in a
        // step; like the queue, deliver again if the step was left for later.
        let mut outcome = h.handle_record(&parsed, &Continuation::default()).await;
        for _ in 0..3 {
            if !matches!(outcome, RecordOutcome::Failed { .. }) {
                break;
            }
            outcome = h.handle_record(&parsed, &Continuation::default()).await;
        }
        outcomes.push((m.body.clone().unwrap_or_default(), outcome));
    }
    let orphan_after = nodes.get(&orphan).await.unwrap();
    let survivor_after = nodes.get(&survivor).await.unwrap();
    let cordoned_after = nodes.get(&cordoned).await.unwrap();
    let false_alarm_after = nodes.get(&false_alarm).await.unwrap();
    // A new rebalance for the node within the hour: acknowledged, not acted on.
    let again = parse_record(&rebalance_record(&false_alarm_i, &unique("ev-")));
    let again = h.handle_record(&again, &Continuation::default()).await;
    let false_alarm_later = nodes.get(&false_alarm).await.unwrap();
    cleanup(&admin, &orphan, &[&format!("{orphan}-a")], None).await;
    cleanup(&admin, &survivor, &[], None).await;
    cleanup(&admin, &cordoned, &[], None).await;
    cleanup(&admin, &false_alarm, &[], None).await;
    let _ = sqs.delete_queue().queue_url(&queue).send().await;

    assert!(
        matches!(claimed, RecordOutcome::Continue { .. }),
        "{claimed:?}"
    );
    let verdict_of = |node: &str| {
        collected
            .iter()
            .find(|c| c.node.as_deref() == Some(node))
            .map(|c| (c.verdict.clone(), c.outcome.clone()))
    };
    let (v, outcome) = verdict_of(&orphan).expect("the orphaned drain was collected");
    assert_eq!(v, ReservationVerdict::Resume, "{outcome:?}");
    assert!(outcome.unwrap().contains("enqueued"));
    for node in [&survivor, &cordoned, &false_alarm] {
        let (v, outcome) = verdict_of(node).expect("the expired prewarm was collected");
        assert!(matches!(v, ReservationVerdict::Undrain { .. }), "{v:?}");
        assert!(outcome.unwrap().contains("enqueued"));
    }
    // The tick wrote nothing: the heartbeat is still the one of 10 minutes ago.
    let a = orphan_after_tick.metadata.annotations.unwrap();
    let last = prewarm::core::interruption::state::parse_time(&a["prewarm.io/drain-last-step-at"]);
    assert!(last.unwrap() < now - 500.0, "{a:?}");
    // One versioned message per node, naming node and instance.
    assert_eq!(messages.len(), 4, "{outcomes:?}");
    for (body, outcome) in &outcomes {
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(
            (&v["prewarm"], &v["version"]),
            (&json!("resume-drain"), &json!(1))
        );
        assert!(
            !matches!(
                outcome,
                RecordOutcome::Failed { .. } | RecordOutcome::Poison { .. }
            ),
            "{body}: {outcome:?}"
        );
    }
    // The interruption function's step is the drain's new heartbeat.
    let a = orphan_after.metadata.annotations.unwrap();
    let last = prewarm::core::interruption::state::parse_time(&a["prewarm.io/drain-last-step-at"]);
    assert!(last.unwrap() > now - 5.0, "{a:?}");
    // Un-drained: no state, no taint; prewarm's cordon lifted, the operator's kept.
    // The false alarm is remembered; the next rebalance leaves the node serving.
    let a = false_alarm_after
        .metadata
        .annotations
        .clone()
        .unwrap_or_default();
    assert!(
        a.contains_key("prewarm.io/rebalance-false-alarm-at"),
        "{a:?}"
    );
    assert!(
        a["prewarm.io/closed-event"].ends_with(" ev-rebalance-drained"),
        "{a:?}"
    );
    match &again {
        RecordOutcome::Delete { reason } => assert!(reason.contains("cool-down"), "{reason}"),
        other => panic!("{other:?}"),
    }
    let spec = false_alarm_later.spec.clone().unwrap();
    assert_ne!(spec.unschedulable, Some(true));
    for (after, still_cordoned) in [
        (survivor_after, false),
        (cordoned_after, true),
        (false_alarm_after, false),
    ] {
        let a = after.metadata.annotations.clone().unwrap_or_default();
        assert!(
            !a.keys().any(|k| k.starts_with("prewarm.io/drain-")),
            "{a:?}"
        );
        let spec = after.spec.unwrap();
        assert_eq!(spec.unschedulable == Some(true), still_cordoned, "{a:?}");
        assert!(!spec
            .taints
            .unwrap_or_default()
            .iter()
            .any(|t| t.key == "prewarm.io/draining"));
    }
}
/// Two nodes of one pool reclaimed at once, with room for one replacement: each drain makes its
/// own placeholder; the one that runs (on the pool's spare node) makes only its own drain ready,
/// which hands it over (deletes it) and evicts; the other drain waits on its pending
/// placeholder. Then the node of the waiting drain goes away and the tick collects its reservation.
#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn each_drain_is_ready_only_on_its_own_placeholder_and_the_tick_collects_orphans() {
    let _alone = CLUSTER_WIDE.lock().await;
    use prewarm::core::interruption::{DrainSettings, ReservationVerdict};
    use prewarm::handlers::tick::reservations as collect;
    let admin = admin().await;
    ensure_namespace(&admin).await;
    let pool = unique("h6pool-");
    let targets = json!([{
        "name": "h6", "nodePool": pool, "maxSpare": 4, "gpusPerReplica": 1,
        "headroom": {"kind": "balloon", "namespace": "prewarm", "name": "h6-no-balloon"},
        "selector": "model_name=\"h6\"",
    }])
    .to_string();
    let h = handler(&[("PREWARM_TARGETS", &targets)]).await;
    // Two draining nodes with three 1-GPU pods each; one spare node of the pool with 4 GPUs:
    // room for one 3-GPU placeholder.
    let (a, a_i) = (unique("h6-a-"), unique("i-0aaaa"));
    let (b, b_i) = (unique("h6-b-"), unique("i-0bbbb"));
    let (spare, spare_i) = (unique("h6-spare-"), unique("i-0cccc"));
    for (n, i) in [(&a, &a_i), (&b, &b_i), (&spare, &spare_i)] {
        make_node(&admin, n, i).await;
        label(&admin, n, json!({"karpenter.sh/nodepool": pool})).await;
    }
    let pods_a: Vec<String> = (0..3).map(|k| format!("{a}-{k}")).collect();
    let pods_b: Vec<String> = (0..3).map(|k| format!("{b}-{k}")).collect();
    for p in &pods_a {
        make_pod(&admin, p, &a, "h6-a").await;
    }
    for p in &pods_b {
        make_pod(&admin, p, &b, "h6-b").await;
    }
    let rec_a = parse_record(&spot_record(&a_i, &unique("ev-"), 0));
    let rec_b = parse_record(&spot_record(&b_i, &unique("ev-"), 0));

    // Step both drains until one sees its replacement ready (at most ~40 s, before the 90 s
    // deadline, so readiness and nothing else starts an eviction).
    let nodes = Api::<Node>::all(admin.clone());
    let ready_at = |n: Node| {
        n.metadata
            .annotations
            .unwrap_or_default()
            .contains_key("prewarm.io/drain-replacement-ready-at")
    };
    let mut made: Vec<(String, Pod)> = Vec::new();
    let mut first_ready = None;
    for _ in 0..30 {
        for (rec, node, inst) in [(&rec_a, &a, &a_i), (&rec_b, &b, &b_i)] {
            h.handle_record(rec, &Continuation::default()).await;
            for p in placeholders_of(&admin, inst).await {
                if !made.iter().any(|(i, _)| i == inst) {
                    made.push((inst.clone(), p));
                }
            }
            // Stop at once: the winner's hand-over frees the spare node, and the other drain's
            // placeholder may run there a moment later (one replacement at a time, as wanted).
            if ready_at(nodes.get(node).await.unwrap()) {
                first_ready = Some(node.clone());
                break;
            }
        }
        if first_ready.is_some() {
            break;
        }
        tokio::time::sleep(CHECK_GAP).await;
    }
    let winner = first_ready.clone().unwrap_or_default();
    let (loser, loser_i, winner_i) = if winner == a {
        (&b, &b_i, &a_i)
    } else {
        (&a, &a_i, &b_i)
    };
    let loser_ready = ready_at(nodes.get(loser).await.unwrap());
    let winner_left = placeholders_of(&admin, winner_i).await;
    let winner_pods_left = pods_left(&admin, &winner).await;
    let loser_placeholders = placeholders_of(&admin, loser_i).await;

    // The waiting drain's node goes away (instance reclaimed): the tick collects its reservation, as
    // its own user (its RBAC lists pods in the balloon namespaces only) with the targets.
    nodes.delete(loser, &DeleteParams::default()).await.unwrap();
    let tick = prewarm::adapters::kube::client(&ClusterAccess::Kubeconfig {
        path: env("PREWARM_TICK_KUBECONFIG"),
    })
    .await
    .unwrap();
    let target_specs: Vec<prewarm::core::spec::TargetSpec> =
        serde_json::from_str(&targets).unwrap();
    let settings = DrainSettings {
        recheck_s: 2.0,
        ..DrainSettings::default()
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    // A gone node's lease is released by the tick itself: nothing is handed over (no queue).
    let sqs_client = sqs().await;
    let handover = collect::Handover {
        sqs: &sqs_client,
        queue_url: "http://127.0.0.1:9/unused",
    };
    let collected = collect::collect(&tick, &handover, &target_specs, &settings, now)
        .await
        .unwrap();
    let loser_after = placeholders_of(&admin, loser_i).await;

    for p in placeholders_of(&admin, &a_i)
        .await
        .into_iter()
        .chain(placeholders_of(&admin, &b_i).await)
    {
        let _ = Api::<Pod>::namespaced(admin.clone(), "prewarm")
            .delete(
                p.metadata.name.as_deref().unwrap(),
                &DeleteParams::default(),
            )
            .await;
    }
    let all_a: Vec<&str> = pods_a.iter().map(String::as_str).collect();
    let all_b: Vec<&str> = pods_b.iter().map(String::as_str).collect();
    cleanup(&admin, &a, &all_a, None).await;
    cleanup(&admin, &b, &all_b, None).await;
    cleanup(&admin, &spare, &[], None).await;

    // Each drain made its own placeholder: 3 GPUs (its pods), the balloon priority, the pool.
    assert_eq!(made.len(), 2, "one placeholder per drain: {made:?}");
    for (inst, p) in &made {
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(spec.priority_class_name.as_deref(), Some("prewarm-balloon"));
        assert_eq!(
            spec.node_selector.as_ref().unwrap()["karpenter.sh/nodepool"],
            pool
        );
        let requests = spec.containers[0]
            .resources
            .as_ref()
            .unwrap()
            .requests
            .clone()
            .unwrap();
        assert_eq!(requests["nvidia.com/gpu"].0, "3", "{inst}");
        let a = p.metadata.annotations.as_ref().unwrap();
        assert!(a.contains_key("prewarm.io/lease-expires-at"), "{a:?}");
        assert!(a.contains_key("prewarm.io/replacement-owner"), "{a:?}");
    }
    assert!(first_ready.is_some(), "no drain saw its replacement ready");
    assert!(
        !loser_ready,
        "both drains saw ready with room for one replacement"
    );
    // Hand-over: the ready drain deleted its placeholder and evicted its pods.
    assert!(winner_left.is_empty(), "{winner_left:?}");
    assert!(
        winner_pods_left.len() < 3,
        "no eviction after ready: {winner_pods_left:?}"
    );
    // The tick could list the placeholders (a 403 here once left every placeholder to its reservation).
    assert!(
        !collected
            .iter()
            .any(|c| matches!(&c.outcome, Err(e) if e.contains("placeholders"))),
        "{collected:?}"
    );
    // The waiting drain's placeholder held on until its node went, then the tick collected it.
    assert_eq!(loser_placeholders.len(), 1);
    assert!(loser_after.is_empty(), "{loser_after:?}");
    let c = collected
        .iter()
        .find(|c| &c.instance == loser_i)
        .unwrap_or_else(|| panic!("not collected: {collected:?}"));
    assert!(
        matches!(&c.verdict, ReservationVerdict::Release { reason } if reason.contains("gone")),
        "{c:?}"
    );
    assert!(c.outcome.is_ok(), "{c:?}");
}

/// An SQS record carrying a rebalance recommendation issued 5 s ago.
fn rebalance_record(instance: &str, event_id: &str) -> SqsMessage {
    let body = json!({
        "version": "0", "id": event_id, "detail-type": "EC2 Instance Rebalance Recommendation",
        "source": "aws.ec2", "account": "123456789012", "time": now_rfc3339(-5),
        "region": "us-east-1", "resources": [format!("arn:aws:ec2:us-east-1a:instance/{instance}")],
        "detail": {"instance-id": instance}
    });
    sqs_record(body.to_string())
}

/// `delete_pod` (DELETE_PAST_PDB_AT_DEADLINE's delete at the deadline) against the apiserver: it
/// deletes exactly the pod it is told to; a pod already gone (404) or replaced by a same-named one
/// (its UID precondition fails, 409) counts as gone and the new pod is kept; any other refusal is
/// an error. Its pods select no node, so a delete removes them at once.
#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn delete_pod_deletes_the_pod_named_and_takes_not_found_and_a_new_uid_as_gone() {
    use prewarm::adapters::kube::drain::execute::delete_pod;
    use prewarm::core::interruption::PodRef;

    let admin = drain_fixtures::admin().await;
    // The interruption function's own user: the chart grants it pods/delete only with
    // `deletePastPdb: true`, which the stack's infra/k8s/rbac.yaml render leaves out.
    let interruption = prewarm::adapters::kube::client(&ClusterAccess::Kubeconfig {
        path: env("PREWARM_INTERRUPTION_KUBECONFIG"),
    })
    .await
    .unwrap();
    ensure_namespace(&admin).await;
    let pods = Api::<Pod>::namespaced(admin.clone(), NS);
    let pending = |name: &str| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": NS},
            "spec": {"nodeSelector": {"prewarm-test": "no-such-node"},
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
        }))
        .unwrap()
    };
    let base = unique("h6-delete-");
    let bystander = format!("{base}-bystander");
    pods.create(&PostParams::default(), &pending(&bystander))
        .await
        .unwrap();
    enum Uid {
        Own,
        Stale,
        Unknown,
    }
    // (row, caller, pod made first, uid passed, expected: result, the pod still there undeleted?)
    let rows = [
        ("its own uid: deleted", &admin, true, Uid::Own, "ok", false),
        (
            "uid unknown: deleted",
            &admin,
            true,
            Uid::Unknown,
            "ok",
            false,
        ),
        (
            "never there: 404, gone",
            &admin,
            false,
            Uid::Own,
            "ok",
            false,
        ),
        (
            "another uid: 409, gone, the new pod kept",
            &admin,
            true,
            Uid::Stale,
            "ok",
            true,
        ),
        (
            "forbidden: an error, the pod kept",
            &interruption,
            true,
            Uid::Own,
            "403 error",
            true,
        ),
    ];
    let mut got = Vec::new();
    let mut want = Vec::new();
    for (i, (row, caller, made, uid, ok, left)) in rows.into_iter().enumerate() {
        let name = format!("{base}-{i}");
        let own = if made {
            pods.create(&PostParams::default(), &pending(&name))
                .await
                .unwrap()
                .metadata
                .uid
        } else {
            Some("00000000-0000-0000-0000-00000000000a".into())
        };
        let uid = match uid {
            Uid::Own => own,
            Uid::Stale => Some("00000000-0000-0000-0000-00000000000b".into()),
            Uid::Unknown => None,
        };
        let pod = PodRef {
            namespace: NS.into(),
            name: name.clone(),
        };
        let result = delete_pod(caller, &pod, uid.as_deref(), Some(0)).await;
        let still_there = pods
            .get_opt(&name)
            .await
            .unwrap()
            .is_some_and(|p| p.metadata.deletion_timestamp.is_none());
        let outcome = match &result {
            Ok(()) => "ok",
            Err(e) if e.to_string().contains("403") => "403 error",
            Err(_) => "other error",
        };
        got.push((row, outcome, still_there, format!("{result:?}")));
        want.push((row, ok, left));
    }
    let bystander_kept = pods
        .get_opt(&bystander)
        .await
        .unwrap()
        .is_some_and(|p| p.metadata.deletion_timestamp.is_none());
    let mut names: Vec<String> = (0..5).map(|i| format!("{base}-{i}")).collect();
    names.push(bystander);
    for name in &names {
        let _ = pods.delete(name, &DeleteParams::default()).await;
    }
    let seen: Vec<_> = got
        .iter()
        .map(|(r, ok, left, _)| (*r, *ok, *left))
        .collect();
    assert_eq!(
        seen, want,
        "(row, result, pod left undeleted?); results: {got:#?}"
    );
    assert!(
        bystander_kept,
        "delete_pod deleted a pod it was not told to"
    );
}
