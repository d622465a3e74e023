//! The simulated prewarm learns its lead time from the run's own events: tiny hand-built runs,
//! expected values worked out in the comments.

use super::tests::{config, step_to};
use super::*;
use crate::core::lead::Phase as LeadPhase;
use crate::core::{HeadroomKind, PolicySpec, TargetSpec};

/// A prewarm run on Karpenter with constant launches of 40 s, a 109 s pull and a 30 s load
/// (the truth: 40 + 109 + 30 = 179 s), told LEAD_TIME_SECONDS `hint`, with a tick far away (the
/// test asks for the lead itself), a static fleet (no HPA scales behind the test's back).
fn learning(hint: f64, lead_time: LeadTime) -> RunConfig {
    let mut cfg = config();
    cfg.provisioner.node_launch_s = 40.0;
    cfg.model.image_pull_s = 109.0;
    cfg.model.model_load_s = 30.0;
    cfg.lead_time = lead_time;
    cfg.headroom = Headroom::Prewarm {
        policy: PolicySpec {
            lead_time_s: hint,
            tick_s: 100_000.0,
            step_s: 15.0,
            ..PolicySpec::default()
        },
        target: Box::new(TargetSpec {
            // No balloons: the test's pods must launch their own nodes.
            max_spare: 0,
            ..TargetSpec::new(
                "llm",
                "gpu",
                HeadroomKind::Balloon {
                    namespace: "prewarm".into(),
                    name: "b".into(),
                },
                8,
            )
        }),
    };
    cfg
}

fn policy_and_target(cfg: &RunConfig) -> (&PolicySpec, &TargetSpec) {
    match &cfg.headroom {
        Headroom::Prewarm { policy, target } => (policy, target),
        _ => unreachable!(),
    }
}

/// (samples, learned seconds) of each phase in the last horizon, in `Phase::ALL` order.
fn phases(sim: &Sim<'_>) -> Vec<(LeadPhase, usize, Option<f64>)> {
    let last = sim.result.lead.as_ref().unwrap().last.as_ref().unwrap();
    last.phases
        .iter()
        .map(|p| (p.phase, p.samples, p.seconds))
        .collect()
}

#[test]
fn the_engine_learns_node_boot_pull_and_load_as_configured() {
    // Three pods at t = 0 on g5.xlarge (1 GPU, one replica a node): Karpenter's batch closes at
    // 1 s and launches three nodes, Ready at 41 (boot 40 s); the pods are bound at 1 s to the
    // launching nodes, the image is there at 41 + 109 = 150 (pull 109 s: the node's Ready to
    // the container's start), they serve at 180 (load 30 s). Each phase needs 3 samples.
    let cfg = learning(60.0, LeadTime::Learned { quantile: 0.9 });
    let (policy, target) = policy_and_target(&cfg);
    let mut sim = Sim::new(&cfg);
    sim.warm_start();
    for _ in 0..3 {
        sim.new_pod();
    }
    sim.schedule();
    use LeadPhase::*;
    // (time, lead the decision uses, falls back, (phase, samples, learned) each).
    let rows = [
        (
            30.0,
            60.0,
            true,
            [
                (NodeBoot, 0, None),
                (ImagePull, 0, None),
                (ModelLoad, 0, None),
            ],
        ),
        (
            // Nodes Ready at 41: their boots are learned at the next decision.
            60.0,
            60.0,
            true,
            [
                (NodeBoot, 3, Some(40.0)),
                (ImagePull, 0, None),
                (ModelLoad, 0, None),
            ],
        ),
        (
            // Serving at 180: 40 + 109 + 30 = 179, rounded up to the 15 s step: 180.
            200.0,
            180.0,
            false,
            [
                (NodeBoot, 3, Some(40.0)),
                (ImagePull, 3, Some(109.0)),
                (ModelLoad, 3, Some(30.0)),
            ],
        ),
    ];
    for (t, lead, falls_back, want) in rows {
        step_to(&mut sim, &[], t);
        let used = sim.with_learned_lead(policy, target).lead_time_s;
        assert_eq!(used, lead, "t = {t}");
        let report = sim.result.lead.as_ref().unwrap();
        let last = report.last.as_ref().unwrap();
        assert_eq!(last.fallback.is_some(), falls_back, "t = {t}");
        assert_eq!(phases(&sim), want.to_vec(), "t = {t}");
    }
    // A replica started on a Ready node that has the image pulls nothing: it teaches its load
    // (a 4th sample) and no pull. One replica goes (its node empties), a new one is bound there
    // at 300 and serves at 330.
    sim.scale_down(1);
    step_to(&mut sim, &[], 300.0);
    sim.new_pod();
    sim.schedule();
    step_to(&mut sim, &[], 400.0);
    let used = sim.with_learned_lead(policy, target).lead_time_s;
    assert_eq!(used, 180.0);
    assert_eq!(
        phases(&sim),
        vec![
            (NodeBoot, 3, Some(40.0)),
            (ImagePull, 3, Some(109.0)),
            (ModelLoad, 4, Some(30.0)),
        ]
    );
    let report = sim.result.lead.as_ref().unwrap();
    // Five decisions: the warm start's and the first two rows' on the fallback.
    assert_eq!(report.fallback_decisions, 3);
    assert_eq!(report.learned_from_s, Some(200.0));
    assert_eq!(report.learned_range_s, Some((180.0, 180.0)));
    assert_eq!(report.configured_s, 60.0);
    // The last decision on the fallback (t = 60) lacked the pull and the load.
    assert_eq!(
        report.last_fallback.as_deref(),
        Some(
            "LEAD_TIME_SECONDS (60 s) until every phase is learned: image-pull in llm has 0 of \
             3 samples; model-load in llm has 0 of 3 samples"
        )
    );
}

#[test]
fn without_learning_the_configured_lead_stands() {
    // The same run with LEAD_TIME_SECONDS as configured: the decision keeps 60 s after every
    // phase has happened, and nothing is reported.
    let cfg = learning(60.0, LeadTime::Configured);
    let (policy, target) = policy_and_target(&cfg);
    let mut sim = Sim::new(&cfg);
    sim.warm_start();
    for _ in 0..3 {
        sim.new_pod();
    }
    sim.schedule();
    step_to(&mut sim, &[], 200.0);
    assert_eq!(sim.with_learned_lead(policy, target).lead_time_s, 60.0);
    assert!(sim.result.lead.is_none());
    assert!(sim.lead_book.windows.is_empty());
}

#[test]
fn a_pull_is_learned_from_the_replicas_that_waited_for_all_of_it() {
    // A g5.12xlarge (4 GPUs) launched at 0, Ready at 40; the pull takes 109 s. With the
    // pre-pull it starts at Ready (image at 149); without, when the first replica is bound
    // after Ready (at 100: image at 209).
    // (pre-pull, replicas bound at, the whole pull each waited for: learned, or None).
    let rows = [
        (
            true,
            vec![0.0, 100.0, 200.0],
            // Bound before Ready: all 109 s; at 100 the pull was under way (49 s left); at
            // 200 the image was there.
            vec![Some(109.0), None, None],
        ),
        (
            false,
            vec![100.0, 150.0, 300.0],
            // The first starts the pull; the second comes while it runs; the third finds it.
            vec![Some(109.0), None, None],
        ),
    ];
    for (prepull, bound_at, want) in rows {
        let mut cfg = learning(60.0, LeadTime::Learned { quantile: 0.9 });
        cfg.provisioner.instance = crate::sim::model::instance_type("g5.12xlarge")
            .unwrap()
            .clone();
        cfg.model.prepull = prepull;
        let mut sim = Sim::new(&cfg);
        let node = sim.launch_node(Some(40.0));
        let got: Vec<Option<f64>> = bound_at
            .iter()
            .map(|&t| {
                sim.now = t;
                let pod = sim.new_pod();
                sim.bind(pod, node);
                sim.pods[pod].pulled_s
            })
            .collect();
        assert_eq!(got, want, "pre-pull {prepull}");
    }
}
