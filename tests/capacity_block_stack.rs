//! A Capacity Block expiration warning against the real apiserver of the local stack: the
//! handler (as the Lambda's RBAC user) finds the reservation's instances by the nodes'
//! `karpenter.k8s.aws/capacity-reservation-id` label, fans out one continuation per instance,
//! and each drains as any notice naming it would (cordon, taint, evict); a node of another
//! reservation is left alone, and a reservation with no node here is acknowledged.

use aws_lambda_events::event::sqs::SqsMessage;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use prewarm::adapters::events::parse_record;
use prewarm::handlers::interruption::{Continuation, RecordOutcome};
use serde_json::json;

#[path = "common/drain_fixtures.rs"]
mod drain_fixtures;
use drain_fixtures::*;

const RESERVATION_LABEL: &str = "karpenter.k8s.aws/capacity-reservation-id";

/// An SQS record carrying a Capacity Block warning for `reservation` issued `age_s` seconds ago,
/// the reservation ending 40 minutes after the warning (termination 10 minutes after it).
fn capacity_block_record(reservation: &str, age_s: i64) -> SqsMessage {
    let body = json!({
        "version": "0", "id": unique("ev-"),
        "detail-type": "Capacity Block Reservation Expiration Warning",
        "source": "aws.ec2", "account": "123456789012", "time": now_rfc3339(-age_s),
        "region": "us-east-1",
        "resources": [format!("arn:aws:ec2:us-east-1:123456789012:capacity-reservation/{reservation}")],
        "detail": {"capacity-reservation-id": reservation, "end-date": now_rfc3339(2400 - age_s)}
    });
    sqs_record(body.to_string())
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_capacity_block_warning_drains_the_reservations_nodes_and_only_those() {
    let admin = admin().await;
    ensure_namespace(&admin).await;
    let (reservation, other) = (unique("cr-0abcd"), unique("cr-0fedc"));
    // Two nodes in the reservation, one in another; one pod each.
    let nodes: Vec<(String, String, &str)> = vec![
        (unique("cb-in-a-"), unique("i-0abcd"), reservation.as_str()),
        (unique("cb-in-b-"), unique("i-0abcd"), reservation.as_str()),
        (unique("cb-other-"), unique("i-0abcd"), other.as_str()),
    ];
    for (node, instance, r) in &nodes {
        make_node(&admin, node, instance).await;
        label(
            &admin,
            node,
            json!({ RESERVATION_LABEL: r, "karpenter.sh/capacity-type": "reserved" }),
        )
        .await;
        make_pod(&admin, &format!("{node}-a"), node, "cb-pod").await;
    }
    let h = handler(&[]).await;
    // Issued 650 s ago: termination began 50 s ago, so the deadline (600 − 30 s) has passed and
    // eviction is at once.
    let parsed = parse_record(&capacity_block_record(&reservation, 650));
    let first = h.handle_record(&parsed, &Continuation::default()).await;
    let mut in_reservation = vec![nodes[0].1.clone(), nodes[1].1.clone()];
    in_reservation.sort();
    let mut steps = Vec::new();
    for instance in &in_reservation {
        let cont = Continuation {
            instance: Some(instance.clone()),
            ..Continuation::default()
        };
        for _ in 0..40 {
            let o = h.handle_record(&parsed, &cont).await;
            let done = matches!(o, RecordOutcome::Delete { .. });
            steps.push(o);
            if done {
                break;
            }
            tokio::time::sleep(CHECK_GAP).await;
        }
    }
    let mut seen = Vec::new();
    for (node, _, _) in &nodes {
        let n = Api::<Node>::all(admin.clone()).get(node).await.unwrap();
        seen.push((n, pods_left(&admin, node).await));
    }
    // A reservation no node of this cluster is in: acknowledged, nothing drained.
    let empty = parse_record(&capacity_block_record(&unique("cr-0dead"), 5));
    let nothing = h.handle_record(&empty, &Continuation::default()).await;
    for (node, _, _) in &nodes {
        let pod = format!("{node}-a");
        cleanup(&admin, node, &[&pod], None).await;
    }

    assert_eq!(
        first,
        RecordOutcome::FanOut {
            instances: in_reservation.clone(),
            resume_after: None
        }
    );
    assert_eq!(
        steps
            .iter()
            .filter(|o| matches!(o, RecordOutcome::Delete { .. }))
            .count(),
        2,
        "{steps:?}"
    );
    for (n, left) in &seen[..2] {
        let name = n.metadata.name.clone().unwrap();
        assert!(left.is_empty(), "{name}: pods left {left:?}");
        let spec = n.spec.clone().unwrap();
        assert_eq!(spec.unschedulable, Some(true), "{name}");
        let taint = spec
            .taints
            .unwrap_or_default()
            .into_iter()
            .find(|t| t.key == "prewarm.io/draining")
            .expect("the draining taint");
        assert_eq!(taint.value.as_deref(), Some("capacity-block"), "{name}");
        let a = n.metadata.annotations.clone().unwrap();
        assert_eq!(a["prewarm.io/drain-kind"], "capacity-block", "{name}");
        assert_eq!(a["prewarm.io/drain-phase"], "drained", "{name}");
    }
    let (n, left) = &seen[2];
    assert_eq!(left.len(), 1, "the other reservation's pod stays");
    assert_ne!(n.spec.clone().unwrap().unschedulable, Some(true));
    assert!(!n
        .metadata
        .annotations
        .clone()
        .unwrap_or_default()
        .contains_key("prewarm.io/drain-phase"));
    match nothing {
        RecordOutcome::Delete { reason } => {
            assert!(reason.contains("nothing to drain"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}

/// A reservation with more nodes than one fan-out step sends (50): the resume lists the nodes
/// afresh, and nodes of the reservation deleted in between (gone early) make it skip none of
/// those not sent yet.
#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_fan_out_resumed_after_nodes_left_the_reservation_skips_none() {
    let admin = admin().await;
    let reservation = unique("cr-0abcd");
    let mut nodes: Vec<(String, String)> = Vec::new();
    for i in 0..55 {
        let (node, instance) = (unique(&format!("cb-many-{i:02}-")), unique("i-0abcd"));
        make_node(&admin, &node, &instance).await;
        label(&admin, &node, json!({ RESERVATION_LABEL: reservation })).await;
        nodes.push((node, instance));
    }
    nodes.sort_by(|a, b| a.1.cmp(&b.1));
    let h = handler(&[]).await;
    let parsed = parse_record(&capacity_block_record(&reservation, 5));
    let first = h.handle_record(&parsed, &Continuation::default()).await;
    let resume = match prewarm::handlers::interruption::queue::settle(
        &first,
        &Continuation::default(),
        0.0,
        2.0,
        Default::default(),
    ) {
        prewarm::handlers::interruption::Settlement::Send { continuations, .. } => {
            continuations.last().unwrap().0.clone()
        }
        other => panic!("{other:?} after {first:?}"),
    };
    // Ten of the instances already sent leave the reservation before the resume.
    for (node, _) in &nodes[10..20] {
        cleanup(&admin, node, &[], None).await;
    }
    let second = h.handle_record(&parsed, &resume).await;
    for (node, _) in nodes[..10].iter().chain(&nodes[20..]) {
        cleanup(&admin, node, &[], None).await;
    }

    let ids = |range: std::ops::Range<usize>| -> Vec<String> {
        nodes[range].iter().map(|(_, i)| i.clone()).collect()
    };
    // By hand: 55 in id order, the first 50 sent, then the five after them.
    match &first {
        RecordOutcome::FanOut { instances, .. } => assert_eq!(instances, &ids(0..50)),
        other => panic!("{other:?}"),
    }
    match &second {
        RecordOutcome::FanOut {
            instances,
            resume_after,
        } => assert_eq!((instances, resume_after), (&ids(50..55), &None)),
        other => panic!("{other:?}"),
    }
}
