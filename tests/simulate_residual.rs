//! The residual decomposition of a simulated run against numbers derived by hand (in the
//! comments; nothing here was computed by the simulator first): one run for each of the three
//! kinds (core::policy::residual), on a one-minute metric grid with a lead of two minutes.
//!
//! Every case: one replica slot per replica, 1 GPU per replica on g5.xlarge nodes ($1.006 per
//! node-hour, 1 GPU), requests delayed when they wait more than 10 s, the first ten minutes
//! (steps 0..10) training and the rest scored.

use prewarm::core::policy::residual::Kind;
use prewarm::core::{HeadroomKind, PolicySpec, TargetSpec};
use prewarm::sim::engine::{
    self, Headroom, LaunchModel, LeadTime, Replicas, Request, RunConfig, WarmStart, World,
};
use prewarm::sim::model::{instance_type, Hpa, Model, Provisioner};

const LEAD_S: f64 = 120.0;
const USD_PER_GPU_HOUR: f64 = 1.006;

fn config(replicas: u32, service_s: f64) -> RunConfig {
    RunConfig {
        model: Model {
            prefill_tokens_per_s: 1000.0,
            decode_tokens_per_s: 10.0,
            slots_per_replica: 1,
            gpus_per_replica: 1,
            image_pull_s: 0.0,
            model_load_s: 0.0,
            prepull: true,
            hpa: Hpa::kubernetes_defaults(1.0, replicas, 10),
        },
        provisioner: Provisioner {
            instance: instance_type("g5.xlarge").unwrap().clone(),
            node_launch_s: 41.0,
            batch_s: 1.0,
            batch_max_s: 10.0,
            empty_after_s: 600.0,
            disruption: None,
            price_factor: 1.0,
        },
        replicas: Replicas::Static(replicas),
        headroom: Headroom::None,
        warm: WarmStart {
            replicas,
            rate: 0.0,
            service_s,
            running: 0.0,
        },
        slo_wait_s: 10.0,
        step_s: 60.0,
        base_epoch: 1_700_006_400.0,
        launch: LaunchModel::CONSTANT,
        seed: 1,
        ingestion_lag_s: 0.0,
        burn_in_s: 0.0,
        score_from_s: 600.0,
        prelaunch: None,
        classes: None,
        lead_time: LeadTime::Configured,
        world: World::EXACT,
        stream_steps: None,
    }
}

fn req(arrival: f64, service_s: f64) -> Request {
    Request {
        arrival,
        service_s,
        prefill_s: 0.0,
        client: 0,
    }
}

/// One request of 2 s at the start of each minute 0..12, except `clumps` (minute, requests)
/// whose requests all arrive at the minute's start.
fn one_a_minute_with(clumps: &[(u32, u32)]) -> Vec<Request> {
    let mut out = Vec::new();
    for minute in 0..13u32 {
        let n = clumps.iter().find(|c| c.0 == minute).map_or(1, |c| c.1);
        out.extend((0..n).map(|_| req(f64::from(minute) * 60.0, 2.0)));
    }
    out
}

/// One replica, one slot, 2 s requests: a clump of 10 at minute 12 (t = 720) queues; request i
/// of it starts at 720 + 2i, waits 2i s: 12, 14, 16, 18 s are past 10 s, four delayed.
/// Training minutes 0..9 had one request each: demand 1/60 req/s every minute, so the largest
/// rise over the two-minute lead is R = 0. Minute 12's rise from minute 10 (one request) is
/// 10/60 − 1/60 = 0.15 req/s > 0: unforecastable. No forecast (no prewarm): no lead miss.
/// The reserve: served on arrival, the ten requests at 720 would all be in a slot at once, one
/// slot a replica: 10 replicas needed, 1 serving, so 9 more. The run ends at 740 (the last request ends), after the scrape
/// at 720: steps 0..=12, scored 10..=12, 3 minutes = 0.05 h; 9 × 1 GPU × 0.05 h = 0.45 GPU-h,
/// × $1.006 = $0.4527.
#[test]
fn a_clump_larger_than_any_training_rise_is_unforecastable() {
    let cfg = config(1, 2.0);
    let r = engine::run(&cfg, one_a_minute_with(&[(12, 10)]).into_iter(), || {});
    assert_eq!(r.scored.delayed, 4);
    let d = r.residual.decompose(LEAD_S, USD_PER_GPU_HOUR);
    assert_eq!((d.forecastable, d.lead_miss, d.unforecastable), (0, 0, 4));
    assert_eq!(d.training_rise, Some(0.0));
    assert_eq!(d.steps.len(), 1);
    assert_eq!(
        (d.steps[0].index, d.steps[0].kind),
        (12, Kind::Unforecastable)
    );
    assert_eq!(d.steps[0].t, 1_700_006_400.0 + 720.0);
    assert_eq!(d.reserve_replicas, 9);
    assert!((d.scored_hours - 0.05).abs() < 1e-12, "{}", d.scored_hours);
    assert!((d.reserve_gpu_hours - 0.45).abs() < 1e-12);
    assert!((d.reserve_usd - 0.45 * 1.006).abs() < 1e-12);
}

/// The same scored minutes, but the training days saw the same clump at minute 5 (10 requests
/// at t = 300, after one at minute 3): R = 10/60 − 1/60. Minute 12's rise is the same
/// 10/60 − 1/60 ≤ R: forecastable, a higher quantile would have covered it. The training
/// clump's own delays (minute 5) are not scored. No unforecastable step: no reserve.
#[test]
fn a_clump_the_training_days_saw_is_forecastable() {
    let cfg = config(1, 2.0);
    let r = engine::run(
        &cfg,
        one_a_minute_with(&[(5, 10), (12, 10)]).into_iter(),
        || {},
    );
    assert_eq!(r.scored.delayed, 4);
    let d = r.residual.decompose(LEAD_S, USD_PER_GPU_HOUR);
    assert_eq!(d.training_rise, Some(10.0 / 60.0 - 1.0 / 60.0));
    assert_eq!((d.forecastable, d.lead_miss, d.unforecastable), (4, 0, 0));
    assert_eq!(d.reserve_replicas, 0);
    assert_eq!(d.reserve_gpu_hours, 0.0);
}

/// prewarm forecasts a steady 2 req/s (a request every 0.5 s from t = 0), which its decisions
/// during minute 10 see, so their upper forecast is at least the 2 req/s they observe. Minute
/// 12 brings only 60 requests, all at t = 720: 1 req/s over the minute, below the forecast,
/// so the forecast covered the minute and the delay is the capacity's: a lead miss. With two
/// static replicas of one slot and 0.5 s requests, the clump leaves two at a time: request i
/// waits ⌊i/2⌋ × 0.5 s, past 10 s for ⌊i/2⌋ ≥ 21, i = 42..59: 18 delayed. The steady minutes
/// never queue (a request every 0.5 s, each 0.5 s long, on two replicas).
#[test]
fn a_clump_inside_the_forecast_is_a_lead_miss() {
    let mut cfg = config(2, 0.5);
    cfg.warm.rate = 2.0;
    cfg.warm.running = 1.0;
    let target = TargetSpec {
        replica_concurrency: 1,
        ..TargetSpec::new(
            "t",
            "gpu",
            HeadroomKind::Balloon {
                namespace: "prewarm".into(),
                name: "b".into(),
            },
            4,
        )
    };
    cfg.headroom = Headroom::Prewarm {
        policy: PolicySpec {
            lead_time_s: LEAD_S,
            step_s: 60.0,
            band_step_s: 60.0,
            rate_window_s: 240.0,
            window_s: 600.0,
            seasons_s: Vec::new(),
            ..PolicySpec::default()
        },
        target: Box::new(target),
    };
    let mut requests: Vec<Request> = (0..1440)
        .map(|i| req(f64::from(i) * 0.5, 0.5))
        .filter(|r| !(720.0..780.0).contains(&r.arrival))
        .collect();
    requests.extend((0..60).map(|_| req(720.0, 0.5)));
    requests.sort_by(|a, b| a.arrival.total_cmp(&b.arrival));
    let r = engine::run(&cfg, requests.into_iter(), || {});
    assert_eq!(r.scored.delayed, 18);
    let upper = r.residual.upper[10].expect("decisions during minute 10");
    assert!(upper >= 1.0, "{upper}");
    let d = r.residual.decompose(LEAD_S, USD_PER_GPU_HOUR);
    assert_eq!((d.forecastable, d.lead_miss, d.unforecastable), (0, 18, 0));
    assert_eq!(d.reserve_replicas, 0);
}
