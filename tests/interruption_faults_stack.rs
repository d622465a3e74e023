//! The drain's fault matrix (issue 11) against the real apiserver and a real SQS queue of the
//! local stack (tests/stack). A binary of its own: it stops the apiserver for 60 s, and cargo
//! runs test binaries one after another, so no other stack test meets a frozen apiserver.
//!
//! Each fault on the real apiserver and a real SQS queue (moto), through `handle_batch` as the
//! Lambda poller drives it (received messages go in, failures stay, the rest are deleted), with a
//! replacement reservation on a real balloon Deployment (the chart's default target prewarm/balloon-gpu,
//! the only headroom object the interruption user may patch). Timings are shortened by
//! configuration (RECHECK_SECONDS 2, EVICTION_BUDGET_SECONDS 110, queue visibility 2 s) or, where
//! a wait is a fixed rule (the owner's 4 x recheck + 60 s of silence, the 30-minute cordon-prewarm
//! expiry), by dating the drain's own record back by that much: the clock moving on.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event as CoreEvent, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use prewarm::config::{ClusterAccess, Config};
use serde_json::json;

mod common;
#[path = "common/drain_fixtures.rs"]
mod drain_fixtures;
use drain_fixtures::*;

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn fault_matrix_every_drain_ends_and_nothing_is_left_behind() {
    // The matrix's state is large: boxed, it lives on the heap and not on the test thread's
    // stack, which it overflowed as cases grew (case 8 inline; later the whole matrix, in a
    // drain-repeat round and a clean-clone CI run: "fatal runtime error: stack overflow").
    Box::pin(fault_matrix()).await;
}

/// The fault matrix (issue 11): each case checks what happened to the pods, the node and the
/// warm capacity.
async fn fault_matrix() {
    let admin = admin().await;
    ensure_namespace(&admin).await;
    ensure_balloon(&admin).await;
    let sqs = sqs().await;
    let q = queue(&sqs, "h6-faults-").await;
    let dlq = queue(&sqs, "h6-faults-dlq-").await;
    let targets = fault_targets();
    let base: Vec<(&str, &str)> = vec![
        ("INTERRUPTION_QUEUE_URL", &q),
        ("PREWARM_TARGETS", &targets),
        // A spot warning's deadline 10 s after its notice: a drain ends within seconds.
        ("EVICTION_BUDGET_SECONDS", "110"),
    ];
    let h = handler(&base).await;
    let mut prewarm_env = base.clone();
    prewarm_env.push(("ACTIONS", "rebalance=cordon-prewarm"));
    let h_prewarm = handler(&prewarm_env).await;
    let tick = prewarm::adapters::kube::client(&ClusterAccess::Kubeconfig {
        path: env("PREWARM_TICK_KUBECONFIG"),
    })
    .await
    .unwrap();
    let tick_targets = Config::from_lookup(|k| (k == "PREWARM_TARGETS").then(|| targets.clone()))
        .unwrap()
        .targets;
    let settings = prewarm::core::interruption::DrainSettings {
        recheck_s: 2.0,
        ..Default::default()
    };
    let mut failures: Vec<String> = Vec::new();
    let mut cleanups: Vec<(String, Vec<String>)> = Vec::new();
    let drained = |a: &After| {
        a.pods.is_empty()
            && a.annotations
                .get("prewarm.io/drain-phase")
                .map(String::as_str)
                == Some("drained")
    };
    let untouched = |a: &After| a.annotations.is_empty() && !a.cordoned && !a.tainted;

    // The stuck-terminating case (6) starts here so that the minute after which a Terminating
    // pod counts as stuck (a fixed rule, STUCK_TERMINATING_S; the apiserver sets
    // deletionTimestamp, so it cannot be dated back) passes during cases 1-5. A node whose
    // kubelet is dead, with an ordinary pod and a pod that a finalizer keeps Terminating; its
    // drain has its own queue, so the other cases' polls do not move it on meanwhile.
    let q_stuck = queue(&sqs, "h6-stuck-").await;
    let (stuck_node, stuck_inst) = (unique("h6-stuck-"), unique("i-0abcd"));
    let (stuck_plain, stuck_held) = (format!("{stuck_node}-a"), format!("{stuck_node}-held"));
    dead_node(&admin, &stuck_node, &stuck_inst).await;
    make_pod(&admin, &stuck_plain, &stuck_node, "h6-faults").await;
    make_pod(&admin, &stuck_held, &stuck_node, "h6-faults").await;
    hold_pod(&admin, &stuck_held, true).await;
    cleanups.push((
        stuck_node.clone(),
        vec![stuck_plain.clone(), stuck_held.clone()],
    ));
    let mut stuck_env = base.clone();
    stuck_env.retain(|(k, _)| *k != "INTERRUPTION_QUEUE_URL");
    stuck_env.push(("INTERRUPTION_QUEUE_URL", &q_stuck));
    let h_stuck = handler(&stuck_env).await;
    // Issued 100 s ago: past its deadline, the drain evicts at once; the held pod goes
    // Terminating and stays so, holding the drain open until it counts as stuck.
    send(&sqs, &q_stuck, &spot_body(&stuck_inst, 100)).await;
    pump(&h_stuck, &sqs, &q_stuck).await;
    let stuck_since = std::time::Instant::now();
    let stuck_first = after(&admin, &stuck_node).await;
    let held_terminating = Api::<Pod>::namespaced(admin.clone(), NS)
        .get_opt(&stuck_held)
        .await
        .unwrap()
        .is_some_and(|p| p.metadata.deletion_timestamp.is_some());

    // ---- 1. The Lambda killed mid-drain: the claimed drain's continuation is received by an
    // invocation that dies (never answers, never deletes); the queue delivers it again after
    // its visibility timeout and that delivery finishes the drain.
    let (case_start, failed_before) = (std::time::Instant::now(), failures.len());
    {
        let (node, inst) = fault_node(&admin, "h6-killed-", &mut cleanups).await;
        send(&sqs, &q, &spot_body(&inst, 0)).await;
        pump(&h, &sqs, &q).await; // claims: cordon, taint, reservation; continuation queued
        let claimed = after(&admin, &node).await;
        let dropped = receive_some(&sqs, &q).await; // the invocation that died
        let ok = pump_until(&h, &sqs, &q, Duration::from_secs(40), || async {
            let a = after(&admin, &node).await;
            drained(&a) && !a.reservations.contains(&inst)
        })
        .await;
        let a = after(&admin, &node).await;
        if !(ok && claimed.cordoned && claimed.reservations.contains(&inst) && !dropped.is_empty())
        {
            failures.push(format!(
                "killed mid-drain: claimed cordoned={} reserved={} dropped={}; {}",
                claimed.cordoned,
                claimed.reservations.contains(&inst),
                dropped.len(),
                fault_report(&admin, &node).await
            ));
        }
        // Drained: the node stays cordoned and tainted until the instance goes (legitimate).
        assert!(a.cordoned || !ok);
    }
    case_outcome(
        1,
        "killed mid-drain",
        &failures[failed_before..],
        case_start,
    );

    // ---- 2. The message dropped to the DLQ mid-drain: the owner goes silent; the tick hands the
    // drain over with a resume-drain message and the interruption function finishes it.
    let (case_start, failed_before) = (std::time::Instant::now(), failures.len());
    {
        let (node, inst) = fault_node(&admin, "h6-dlq-", &mut cleanups).await;
        // A warning 60 s ahead: claimed and waiting (no warm capacity in the pool).
        let mut waiting_env = base.clone();
        waiting_env.retain(|(k, _)| *k != "EVICTION_BUDGET_SECONDS");
        let h_slow = handler(&waiting_env).await;
        send(&sqs, &q, &spot_body(&inst, 0)).await;
        pump(&h_slow, &sqs, &q).await;
        for (r, handle) in receive_some(&sqs, &q).await {
            send(&sqs, &dlq, r.body.as_deref().unwrap()).await;
            sqs.delete_message()
                .queue_url(&q)
                .receipt_handle(handle)
                .send()
                .await
                .unwrap();
        }
        // Silent past 4 x recheck + 60 s: the record dated back by that much (the check the
        // last step planned too: silence counts from it when it is later).
        annotate(
            &admin,
            &node,
            &[
                ("prewarm.io/drain-last-step-at", ago(600)),
                ("prewarm.io/drain-next-check-at", ago(598)),
                ("prewarm.io/drain-notice-time", ago(600)),
                ("prewarm.io/drain-deadline", ago(500)),
                ("prewarm.io/drain-instance-end", ago(480)),
            ],
        )
        .await;
        let collected = tick_now(&tick, &sqs, &q, &tick_targets, &settings).await;
        let handed = collected.iter().any(|c| {
            c.node.as_deref() == Some(node.as_str())
                && c.outcome.as_ref().is_ok_and(|o| o.contains("enqueued"))
        });
        let ok = pump_until(&h, &sqs, &q, Duration::from_secs(40), || async {
            let a = after(&admin, &node).await;
            drained(&a) && !a.reservations.contains(&inst)
        })
        .await;
        if !(ok && handed) {
            failures.push(format!(
                "dropped to the DLQ: handed over={handed} {collected:?}; {}",
                fault_report(&admin, &node).await
            ));
        }
    }
    case_outcome(
        2,
        "dropped to the DLQ",
        &failures[failed_before..],
        case_start,
    );

    // ---- 3. The apiserver unavailable for 60 s (the process stopped with SIGSTOP, then
    // continued), on a queue with a redrive like the template's but tight (maxReceiveCount 2,
    // visibility 2 s: a message kept through the outage would be in the DLQ within seconds). A
    // claimed drain whose steps fail, and a notice whose first delivery comes during the outage,
    // are both carried on by new messages (nothing kept, nothing in the DLQ); once the apiserver
    // answers, both drains finish.
    let (case_start, failed_before) = (std::time::Instant::now(), failures.len());
    // Boxed: see case 8.
    Box::pin(async {
        let down_dlq = queue(&sqs, "h6-down-dlq-").await;
        let q_down = redrive_queue(&sqs, "h6-down-", &down_dlq, 2).await;
        let (node, inst) = fault_node(&admin, "h6-apiserver-", &mut cleanups).await;
        let (first, first_inst) = fault_node(&admin, "h6-first-down-", &mut cleanups).await;
        let mut waiting_env = base.clone();
        waiting_env
            .retain(|(k, _)| !matches!(*k, "EVICTION_BUDGET_SECONDS" | "INTERRUPTION_QUEUE_URL"));
        waiting_env.push(("EVICTION_BUDGET_SECONDS", "90")); // deadline 30 s after the notice
        waiting_env.push(("INTERRUPTION_QUEUE_URL", &q_down));
        let h30 = handler(&waiting_env).await;
        send(&sqs, &q_down, &spot_body(&inst, 0)).await;
        pump(&h30, &sqs, &q_down).await;
        let claimed = after(&admin, &node).await;
        assert!(signal_apiserver("-STOP"));
        let stopped = std::time::Instant::now();
        // Its first delivery during the outage: nothing on the node yet.
        send(&sqs, &q_down, &spot_body(&first_inst, 0)).await;
        let (mut handled_while_down, mut kept_while_down) = (0, 0);
        while stopped.elapsed() < Duration::from_secs(60) {
            // An 8 s invocation: each record's step gives up after 5 s.
            let (n, kept) = pump_within(&h30, &sqs, &q_down, Duration::from_secs(8)).await;
            handled_while_down += n;
            kept_while_down += kept;
        }
        let in_dlq_while_down = queue_total(&sqs, &down_dlq).await;
        assert!(signal_apiserver("-CONT"));
        let ok = pump_until(&h30, &sqs, &q_down, Duration::from_secs(90), || async {
            let (a, b) = (after(&admin, &node).await, after(&admin, &first).await);
            drained(&a)
                && !a.reservations.contains(&inst)
                && drained(&b)
                && !b.reservations.contains(&first_inst)
        })
        .await;
        // Whatever is still queued is handled; then nothing is left and nothing went to the DLQ.
        let left = {
            let until = std::time::Instant::now() + Duration::from_secs(20);
            while queue_total(&sqs, &q_down).await > 0 && std::time::Instant::now() < until {
                pump(&h30, &sqs, &q_down).await;
            }
            queue_total(&sqs, &q_down).await
        };
        let in_dlq = queue_total(&sqs, &down_dlq).await;
        eprintln!(
            "fault case 3: {handled_while_down} deliveries while down, {kept_while_down} kept; \
             DLQ {in_dlq_while_down} then {in_dlq}; {left} left"
        );
        if !(ok
            && claimed.cordoned
            && handled_while_down >= 2
            && kept_while_down == 0
            && in_dlq_while_down + in_dlq == 0
            && left == 0)
        {
            failures.push(format!(
                "apiserver down 60 s: claimed first={} deliveries while down {handled_while_down}, \
                 kept {kept_while_down}, DLQ {in_dlq_while_down}+{in_dlq}, left {left}; {}\n{}",
                claimed.cordoned,
                fault_report(&admin, &node).await,
                fault_report(&admin, &first).await
            ));
        }
        let _ = sqs.delete_queue().queue_url(&q_down).send().await;
        let _ = sqs.delete_queue().queue_url(&down_dlq).send().await;
    })
    .await;
    case_outcome(
        3,
        "apiserver down 60 s, a claimed drain and a first delivery",
        &failures[failed_before..],
        case_start,
    );

    // ---- 4. A Health notice cancelled: the closed update (new EventBridge id, same eventArn)
    // un-drains the node; the pods were never evicted.
    let (case_start, failed_before) = (std::time::Instant::now(), failures.len());
    {
        let (node, inst) = fault_node(&admin, "h6-health-", &mut cleanups).await;
        let arn = format!(
            "arn:aws:health:us-east-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/{}",
            unique("x")
        );
        send(
            &sqs,
            &q,
            &health_notice(&inst, &unique("ev-"), &arn, "upcoming", 3_600),
        )
        .await;
        pump(&h, &sqs, &q).await;
        let claimed = after(&admin, &node).await;
        send(
            &sqs,
            &q,
            &health_notice(&inst, &unique("ev-"), &arn, "closed", 3_600),
        )
        .await;
        let ok = pump_until(&h, &sqs, &q, Duration::from_secs(30), || async {
            let a = after(&admin, &node).await;
            untouched(&a) && !a.reservations.contains(&inst)
        })
        .await;
        let a = after(&admin, &node).await;
        if !(ok && claimed.cordoned && claimed.reservations.contains(&inst) && a.pods.len() == 1) {
            failures.push(format!(
                "Health cancelled: claimed cordoned={} reserved={}; {}",
                claimed.cordoned,
                claimed.reservations.contains(&inst),
                fault_report(&admin, &node).await
            ));
        }
    }
    case_outcome(
        4,
        "Health notice cancelled",
        &failures[failed_before..],
        case_start,
    );

    // ---- 5. A rebalance that never becomes a spot warning (rebalance=cordon-prewarm): the
    // cordon expires 30 min after the later of the notice and the claim, and the node is
    // un-drained, pods untouched. The clock moving on is the notice dated 30 min minus
    // EXPIRES_IN_S back (every delivery of it carries that time, so a later delivery never looks
    // like a newer update), and the claim's record (`drain-started-at`) dated back as much right
    // after the claim: the body's time alone cannot shorten the wait.
    let (case_start, failed_before) = (std::time::Instant::now(), failures.len());
    {
        const EXPIRES_IN_S: i64 = 8;
        let (node, inst) = fault_node(&admin, "h6-rebalance-", &mut cleanups).await;
        let notice_age =
            prewarm::core::interruption::model::NO_DEADLINE_MAX_WAIT_S as i64 - EXPIRES_IN_S;
        let body = json!({
            "version": "0", "id": unique("ev-"), "detail-type": "EC2 Instance Rebalance Recommendation",
            "source": "aws.ec2", "account": "123456789012", "time": now_rfc3339(-notice_age),
            "region": "us-east-1", "resources": [format!("arn:aws:ec2:us-east-1a:instance/{inst}")],
            "detail": {"instance-id": inst}
        })
        .to_string();
        let expires = std::time::Instant::now() + Duration::from_secs(EXPIRES_IN_S as u64 + 1);
        send(&sqs, &q, &body).await;
        pump(&h_prewarm, &sqs, &q).await;
        let claimed = after(&admin, &node).await;
        annotate(
            &admin,
            &node,
            &[("prewarm.io/drain-started-at", ago(notice_age))],
        )
        .await;
        // Whichever way it stands at the expiry (waiting for a replacement: its own continuation
        // expires it; prewarmed: no continuation, the tick hands it over and the resume-drain
        // step expires it), the node is un-drained.
        let (mut last_phase, mut ticked) = (String::new(), false);
        let mut handed = Vec::new();
        let until = std::time::Instant::now() + Duration::from_secs(40);
        let mut ok = false;
        while std::time::Instant::now() < until {
            let a = after(&admin, &node).await;
            if untouched(&a) && !a.reservations.contains(&inst) {
                ok = true;
                break;
            }
            last_phase = a
                .annotations
                .get("prewarm.io/drain-phase")
                .cloned()
                .unwrap_or_default();
            if !ticked && std::time::Instant::now() >= expires {
                ticked = true;
                handed = tick_now(&tick, &sqs, &q, &tick_targets, &settings)
                    .await
                    .into_iter()
                    .filter(|c| c.node.as_deref() == Some(node.as_str()))
                    .map(|c| format!("{:?}", c.outcome))
                    .collect();
            }
            pump(&h_prewarm, &sqs, &q).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let a = after(&admin, &node).await;
        eprintln!("fault case 5: last phase before the un-drain {last_phase:?}, tick: {handed:?}");
        if !(ok && claimed.cordoned && a.pods.len() == 1) {
            failures.push(format!(
                "rebalance expired: claimed cordoned={} last phase {last_phase:?} \
                 tick {handed:?}; {}",
                claimed.cordoned,
                fault_report(&admin, &node).await
            ));
        }
    }
    case_outcome(
        5,
        "rebalance expired",
        &failures[failed_before..],
        case_start,
    );

    // ---- 6. A pod stuck in Terminating (dead kubelet, a finalizer nobody removes), set up
    // before case 1: it held the drain open at first; a minute past its deletionTimestamp it no
    // longer does, and the drain ends with the ordinary pod evicted and the stuck one left.
    let (case_start, failed_before) = (std::time::Instant::now(), failures.len());
    {
        let stuck_after =
            Duration::from_secs_f64(prewarm::core::interruption::pods::STUCK_TERMINATING_S + 2.0);
        if let Some(left) = stuck_after.checked_sub(stuck_since.elapsed()) {
            tokio::time::sleep(left).await;
        }
        let held_open = stuck_first.cordoned
            && stuck_first
                .annotations
                .get("prewarm.io/drain-phase")
                .map(String::as_str)
                != Some("drained")
            && held_terminating;
        let ok = pump_until(
            &h_stuck,
            &sqs,
            &q_stuck,
            Duration::from_secs(30),
            || async {
                let a = after(&admin, &stuck_node).await;
                drained(&a) && !a.reservations.contains(&stuck_inst)
            },
        )
        .await;
        let still_held = Api::<Pod>::namespaced(admin.clone(), NS)
            .get_opt(&stuck_held)
            .await
            .unwrap()
            .is_some();
        if !(ok && held_open && still_held) {
            failures.push(format!(
                "stuck terminating: held the drain open at first={held_open} (phase {:?}, \
                 terminating={held_terminating}); stuck pod still there={still_held}; {}",
                stuck_first.annotations.get("prewarm.io/drain-phase"),
                fault_report(&admin, &stuck_node).await
            ));
        }
    }
    case_outcome(
        6,
        "stuck-terminating pod",
        &failures[failed_before..],
        case_start,
    );

    // ---- 7. A PDB that blocks for longer than the queue's whole receive budget
    // (maxReceiveCount 2, visibility 2 s): the drain keeps going on its own continuations (each
    // delivery's receive count stays 1), none reaches the DLQ; the node stays cordoned and the
    // pod running while blocked (a drain legitimately running). Once the budget allows, the
    // drain evicts and ends, and its reservation is given back.
    let (case_start, failed_before) = (std::time::Instant::now(), failures.len());
    {
        let pdb_dlq = queue(&sqs, "h6-pdb-dlq-").await;
        let q_pdb = redrive_queue(&sqs, "h6-pdb-", &pdb_dlq, 2).await;
        let (node, inst) = (unique("h6-pdb-"), unique("i-0abcd"));
        pool_node(&admin, &node, &inst).await;
        let (pod, app) = (format!("{node}-a"), unique("h6-guarded-"));
        make_pod(&admin, &pod, &node, &app).await;
        cleanups.push((node.clone(), vec![pod]));
        let pdb_name = format!("{node}-pdb");
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": pdb_name, "namespace": NS},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": app}}}
        }))
        .unwrap();
        let pdbs = Api::<PodDisruptionBudget>::namespaced(admin.clone(), NS);
        pdbs.create(&PostParams::default(), &pdb).await.unwrap();
        let mut pdb_env = base.clone();
        pdb_env.retain(|(k, _)| *k != "INTERRUPTION_QUEUE_URL");
        pdb_env.push(("INTERRUPTION_QUEUE_URL", &q_pdb));
        let h_pdb = handler(&pdb_env).await;
        send(&sqs, &q_pdb, &spot_body(&inst, 100)).await;
        // Three times the receive budget in deliveries.
        let mut delivered = 0;
        let until = std::time::Instant::now() + Duration::from_secs(40);
        while delivered < 6 && std::time::Instant::now() < until {
            delivered += pump(&h_pdb, &sqs, &q_pdb).await;
        }
        let blocked = after(&admin, &node).await;
        let (in_dlq, carried) = (
            queue_total(&sqs, &pdb_dlq).await,
            queue_total(&sqs, &q_pdb).await,
        );
        let blocked_events = Api::<CoreEvent>::all(admin.clone())
            .list(&ListParams::default().fields(&format!(
                "involvedObject.name={node},reason=DrainBlockedByPDB"
            )))
            .await
            .map(|l| l.items.len())
            .unwrap_or(0);
        eprintln!(
            "fault case 7: {delivered} deliveries while blocked; reservation held {}",
            blocked.reservations.contains(&inst)
        );
        pdbs.delete(&pdb_name, &DeleteParams::default())
            .await
            .unwrap();
        let ok = pump_until(&h_pdb, &sqs, &q_pdb, Duration::from_secs(30), || async {
            let a = after(&admin, &node).await;
            drained(&a) && !a.reservations.contains(&inst)
        })
        .await;
        let in_dlq_after = queue_total(&sqs, &pdb_dlq).await;
        if !(ok
            && delivered >= 6
            && in_dlq + in_dlq_after == 0
            && carried == 1
            && blocked.cordoned
            && blocked.pods.len() == 1
            && blocked_events > 0)
        {
            failures.push(format!(
                "PDB past the receive budget: {delivered} deliveries, DLQ {in_dlq}+{in_dlq_after}, \
                 carried on by {carried} message(s), cordoned={} pods {:?}, \
                 DrainBlockedByPDB Events {blocked_events}; {}",
                blocked.cordoned,
                blocked.pods,
                fault_report(&admin, &node).await
            ));
        }
        let _ = sqs.delete_queue().queue_url(&q_pdb).send().await;
        let _ = sqs.delete_queue().queue_url(&pdb_dlq).send().await;
    }
    case_outcome(
        7,
        "PDB past the receive budget",
        &failures[failed_before..],
        case_start,
    );

    // ---- 8. Three nodes reclaimed at once with room for one replacement at a time (a pool of
    // its own whose one spare node has a single free GPU; each drain's placeholder asks for the
    // GPU of its node's one pod): never two placeholders run at once; each drain evicts only
    // after its own placeholder ran, and the next one's runs only after that hand-over (the
    // evicted pods here have no controller, so no successor takes the freed room; with one, the
    // others wait for Karpenter or their deadlines); all three end before their deadlines and
    // nothing stays reserved.
    let (case_start, failed_before) = (std::time::Instant::now(), failures.len());
    // Boxed: this case's state is the largest of the matrix, and inline it overflowed the
    // test thread's 2 MiB stack in a debug build.
    Box::pin(async {
        let pool = unique("h6-three-");
        let three_targets = json!([{
            "name": "three", "nodePool": pool, "maxSpare": 4, "gpusPerReplica": 1,
            "headroom": {"kind": "balloon", "namespace": BALLOON_NS, "name": "h6-no-balloon"},
            "selector": "model_name=\"three\"",
        }])
        .to_string();
        let q3 = queue(&sqs, "h6-three-").await;
        // A warning's own 120 s with the default 30 s budget: deadlines 90 s after the notice.
        let h3 = handler(&[
            ("INTERRUPTION_QUEUE_URL", q3.as_str()),
            ("PREWARM_TARGETS", three_targets.as_str()),
        ])
        .await;
        // Every node has one GPU: the reclaimed ones are full (no placeholder lands on a node
        // whose claim comes a moment later), the spare one is the room for one replacement.
        let mut reclaimed = Vec::new();
        for k in 0..3 {
            let (node, inst) = (format!("{pool}-{k}"), unique("i-0abcd"));
            make_node(&admin, &node, &inst).await;
            label(&admin, &node, json!({"karpenter.sh/nodepool": pool})).await;
            reclaimed.push((node, inst));
        }
        let spare = format!("{pool}-spare");
        make_node(&admin, &spare, &unique("i-0cccc")).await;
        label(&admin, &spare, json!({"karpenter.sh/nodepool": pool})).await;
        // kwok's node-ready stage (NODE_READY_DELAY after the node appears) writes the status
        // from the copy it saw then: a single GPU patched before it ran was once overwritten with
        // make_node's 4 (all three placeholders then fit the spare at once). So the one GPU is
        // written once every node is Ready, and read back.
        let nodes_api = Api::<Node>::all(admin.clone());
        let one = json!({"cpu": "32", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": "1"});
        let all: Vec<String> = reclaimed
            .iter()
            .map(|(n, _)| n.clone())
            .chain([spare.clone()])
            .collect();
        for node in &all {
            common::write_capacity_once_ready(&nodes_api, node, &one).await;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        for node in &all {
            let n = nodes_api.get(node).await.unwrap();
            let gpus = n
                .status
                .and_then(|s| s.allocatable)
                .and_then(|a| a.get("nvidia.com/gpu").map(|q| q.0.clone()));
            assert_eq!(gpus.as_deref(), Some("1"), "{node} kept one GPU");
        }
        for (node, _) in &reclaimed {
            let pod = format!("{node}-a");
            make_pod(&admin, &pod, node, "h6-three").await;
            cleanups.push((node.clone(), vec![pod]));
        }
        cleanups.push((spare.clone(), Vec::new()));
        for (_, inst) in &reclaimed {
            send(&sqs, &q3, &spot_body(inst, 0)).await;
        }
        let running_placeholders = || async {
            Api::<Pod>::all(admin.clone())
                .list(&ListParams::default().labels("prewarm.io/replacement-for"))
                .await
                .unwrap()
                .items
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter(|p| {
                    p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(spare.as_str())
                })
                .count()
        };
        let mut most_at_once = 0;
        let until = std::time::Instant::now() + Duration::from_secs(80);
        let mut all_done = false;
        while std::time::Instant::now() < until {
            most_at_once = most_at_once.max(running_placeholders().await);
            let mut done = true;
            for (node, inst) in &reclaimed {
                let a = after(&admin, node).await;
                done &= drained(&a) && !a.reservations.contains(inst);
            }
            if done {
                all_done = true;
                break;
            }
            pump(&h3, &sqs, &q3).await;
        }
        // (ready, first eviction, deadline) of each drain, in the order they became ready.
        let mut milestones: Vec<(String, f64, f64, f64)> = Vec::new();
        for (node, _) in &reclaimed {
            let a = after(&admin, node).await.annotations;
            let at = |k: &str| {
                a.get(k)
                    .and_then(|v| chrono::DateTime::parse_from_rfc3339(v).ok())
                    .map_or(f64::NAN, |t| t.timestamp_millis() as f64 / 1000.0)
            };
            milestones.push((
                node.clone(),
                at("prewarm.io/drain-replacement-ready-at"),
                at("prewarm.io/drain-evicting-since"),
                at("prewarm.io/drain-deadline"),
            ));
        }
        milestones.sort_by(|x, y| x.1.total_cmp(&y.1));
        let each_before = milestones
            .iter()
            .all(|(_, ready, evict, deadline)| ready <= evict && evict < deadline);
        // The next drain's placeholder could run only once the previous one was handed over.
        let one_at_a_time = milestones.windows(2).all(|w| w[1].1 >= w[0].2);
        eprintln!("fault case 8: milestones {milestones:?}; most placeholders running at once {most_at_once}");
        let left = queue_total(&sqs, &q3).await;
        if !(all_done && each_before && one_at_a_time && most_at_once <= 1 && left == 0) {
            let mut reports = Vec::new();
            for (node, _) in &reclaimed {
                reports.push(fault_report(&admin, node).await);
            }
            failures.push(format!(
                "three at once: all drained={all_done} messages left {left} each ready<=evict<deadline={each_before} \
                 one at a time={one_at_a_time} most running at once={most_at_once} \
                 {milestones:?}\n{}",
                reports.join("\n")
            ));
        }
        let _ = sqs.delete_queue().queue_url(&q3).send().await;
    })
    .await;
    case_outcome(
        8,
        "three at once, room for one",
        &failures[failed_before..],
        case_start,
    );

    // Deliveries still queued (a closed notice's continuation, a resume message) are handled and
    // must leave every node as the cases left it: nothing drains again.
    let (case_start, failed_before) = (std::time::Instant::now(), failures.len());
    let settled: Vec<(String, After)> = {
        let mut v = Vec::new();
        for (node, _) in &cleanups {
            v.push((node.clone(), after(&admin, node).await));
        }
        v
    };
    // At least 8 s, and on until both queues are empty: a delivery still invisible (a
    // continuation's delay, a retried record's visibility) is handled, not counted as left
    // over; one that keeps coming back for 90 s is left over (it would loop forever).
    let quiet = std::time::Instant::now() + Duration::from_secs(8);
    let give_up = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        pump(&h_prewarm, &sqs, &q).await;
        pump(&h_stuck, &sqs, &q_stuck).await;
        let now = std::time::Instant::now();
        let empty = queue_total(&sqs, &q).await + queue_total(&sqs, &q_stuck).await == 0;
        if (now >= quiet && empty) || now >= give_up {
            break;
        }
    }
    for (node, before) in &settled {
        let now = after(&admin, node).await;
        if (now.cordoned, now.tainted, &now.annotations)
            != (before.cordoned, before.tainted, &before.annotations)
        {
            failures.push(format!(
                "{node} changed after its case ended: {}",
                fault_report(&admin, node).await
            ));
        }
    }
    case_outcome(
        9,
        "nothing drains again",
        &failures[failed_before..],
        case_start,
    );
    let leftover = queue_total(&sqs, &q).await + queue_total(&sqs, &q_stuck).await;
    let leftover_bodies: Vec<String> = if leftover > 0 {
        let mut v = Vec::new();
        for queue in [&q, &q_stuck] {
            v.push(format!("{queue}: {:?}", queue_counts(&sqs, queue).await));
            for (m, _) in receive(&sqs, queue).await {
                v.push(format!(
                    "{queue}: {} attributes {:?} system {:?}",
                    m.body.unwrap_or_default(),
                    m.message_attributes,
                    m.attributes
                ));
            }
        }
        v
    } else {
        Vec::new()
    };
    hold_pod(&admin, &stuck_held, false).await;
    for (node, pods) in &cleanups {
        let pods: Vec<&str> = pods.iter().map(String::as_str).collect();
        cleanup(&admin, node, &pods, None).await;
    }
    let _ = sqs.delete_queue().queue_url(&q).send().await;
    let _ = sqs.delete_queue().queue_url(&dlq).send().await;
    let _ = sqs.delete_queue().queue_url(&q_stuck).send().await;
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert_eq!(
        leftover, 0,
        "messages left on the queue 90 s after every drain ended (counts, then the visible ones: {leftover_bodies:?})"
    );
}
