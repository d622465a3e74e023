//! Validation tables: each setting out of bounds is rejected, naming it.

use super::*;

/// Every bound of `PolicySpec::validate`, at and just beyond each end, on the defaults
/// (lead 180 s, step 15 s). Bounds written from the documented ranges, not from the code.
#[test]
fn policy_bounds_table() {
    type Set = fn(&mut PolicySpec, f64);
    let rows: Vec<(&str, f64, f64, Set)> = vec![
        ("LEAD_TIME_SECONDS", 1.0, 3600.0, |p, v| p.lead_time_s = v),
        ("TICK_SECONDS", 1.0, 60.0, |p, v| p.tick_s = v),
        ("METRICS_STEP_SECONDS", 1.0, 300.0, |p, v| {
            // Keep the window and the fast-path window valid for every step tried.
            p.window_s = 4.0 * 301.0;
            p.fast_path_window_s = 301.0;
            p.band_step_s = 301.0;
            p.step_s = v
        }),
        ("METRICS_WINDOW_SECONDS", 60.0, 86_400.0, |p, v| {
            p.window_s = v
        }),
        ("ERROR_QUANTILE", 0.5, 0.999, |p, v| p.error_quantile = v),
        ("TARGET_WAIT_SECONDS", 0.01, 600.0, |p, v| {
            p.target_wait_s = v
        }),
        ("SCALE_DOWN_DELAY_SECONDS", 0.0, 86_400.0, |p, v| {
            p.scale_down_delay = ScaleDownDelay::Seconds(v)
        }),
        ("COOLDOWN_SECONDS", 0.0, 3600.0, |p, v| p.cooldown_s = v),
        ("STALE_AFTER_SECONDS", 1.0, 3600.0, |p, v| {
            p.stale_after_s = v
        }),
        // One second to one minute (a tick's targets each within it).
        ("TARGET_TIMEOUT_SECONDS", 1.0, 60.0, |p, v| {
            p.target_timeout_s = v
        }),
        // Four seconds (four scrapes of the shortest interval) to an hour.
        ("RATE_WINDOW_SECONDS", 4.0, 3600.0, |p, v| {
            p.scrape_interval_s = 1.0;
            p.rate_window_s = v
        }),
        // One second to 15 minutes (the rate window then an hour).
        ("SCRAPE_INTERVAL_SECONDS", 1.0, 900.0, |p, v| {
            p.rate_window_s = 3600.0;
            p.scrape_interval_s = v
        }),
        ("INGESTION_LAG_SECONDS", 0.0, 600.0, |p, v| {
            p.ingestion_lag_s = v
        }),
        ("ewma_alpha", 0.001, 1.0, |p, v| p.ewma_alpha = v),
        ("trend_beta", 0.0, 1.0, |p, v| p.trend_beta = v),
        ("trend_damping", 0.0, 1.0, |p, v| p.trend_damping = v),
        // Two lead times (360 s) to 31 days.
        ("SEASONS_SECONDS", 360.0, 2_678_400.0, |p, v| {
            p.seasons_s = vec![v]
        }),
        ("FAST_PATH_RATIO", 1.0, 100.0, |p, v| p.fast_path_ratio = v),
        // One step (15 s) to 10 minutes.
        ("FAST_PATH_WINDOW_SECONDS", 15.0, 600.0, |p, v| {
            p.fast_path_window_s = v
        }),
        ("BAND_HISTORY_SECONDS", 3600.0, 604_800.0, |p, v| {
            p.band_history_s = v
        }),
        ("BAND_STEP_SECONDS", 15.0, 3600.0, |p, v| p.band_step_s = v),
        ("CALIBRATE_EVERY_SECONDS", 60.0, 86_400.0, |p, v| {
            p.calibrate_every_s = v
        }),
        ("DELAYED_REQUEST_COST", 1e-9, 1e6, |p, v| {
            p.gpu_hour_cost = Some(1.0);
            p.delayed_request_cost = Some(v)
        }),
        ("GPU_HOUR_COST", 1e-9, 1e6, |p, v| {
            p.delayed_request_cost = Some(1.0);
            p.gpu_hour_cost = Some(v)
        }),
    ];
    assert_eq!(PolicySpec::default().validate(), Ok(()));
    for (name, lo, hi, set) in rows {
        let with = |v: f64| {
            let mut p = PolicySpec::default();
            set(&mut p, v);
            p.validate()
        };
        let below = if lo == 0.0 { -1e-9 } else { lo * (1.0 - 1e-9) };
        assert_eq!(with(lo), Ok(()), "{name} at its lower bound {lo}");
        assert_eq!(with(hi), Ok(()), "{name} at its upper bound {hi}");
        for bad in [below, hi * (1.0 + 1e-9), f64::NAN, f64::INFINITY] {
            let err = with(bad).expect_err(name);
            assert_eq!(err.0, name, "{name} = {bad}: {err:?}");
        }
    }
}

#[test]
fn the_rate_window_is_at_least_four_scrape_intervals() {
    // (rate window, scrape interval, accepted): the bound moves with the scrape interval and
    // the error names the window, its message the scrape interval.
    let rows = [
        (60.0, 15.0, true),
        (59.0, 15.0, false),
        (60.0, 60.0, false),
        (240.0, 60.0, true),
        (120.0, 30.0, true),
        (119.0, 30.0, false),
    ];
    for (window, scrape, accepted) in rows {
        let p = PolicySpec {
            rate_window_s: window,
            scrape_interval_s: scrape,
            ..PolicySpec::default()
        };
        match p.validate() {
            Ok(()) => assert!(accepted, "{window} / {scrape} accepted"),
            Err((var, message)) => {
                assert!(!accepted, "{window} / {scrape}: {message}");
                assert_eq!(var, "RATE_WINDOW_SECONDS");
                assert!(message.contains("SCRAPE_INTERVAL_SECONDS"), "{message}");
            }
        }
    }
}

#[test]
fn policy_settings_that_are_not_ranges() {
    let bad_zone = PolicySpec {
        time_zone: "Mars/Olympus".into(),
        ..PolicySpec::default()
    };
    assert_eq!(bad_zone.validate().unwrap_err().0, "TIME_ZONE");
    let berlin = PolicySpec {
        time_zone: "Europe/Berlin".into(),
        ..PolicySpec::default()
    };
    assert_eq!(berlin.validate(), Ok(()));
    let one_cost = PolicySpec {
        delayed_request_cost: Some(1.0),
        ..PolicySpec::default()
    };
    assert_eq!(one_cost.validate().unwrap_err().0, "GPU_HOUR_COST");
    // GPU_HOUR_COST alone is whole: each target may name its own delayedRequestCost.
    let gpu_only = PolicySpec {
        gpu_hour_cost: Some(4.0),
        ..PolicySpec::default()
    };
    assert_eq!(gpu_only.validate(), Ok(()));
    let no_seasons = PolicySpec {
        seasons_s: vec![],
        ..PolicySpec::default()
    };
    assert_eq!(no_seasons.validate(), Ok(()));
}

#[test]
fn a_targets_delay_price_needs_gpu_hour_cost() {
    let priced = TargetSpec {
        delayed_request_cost: Some(0.01),
        ..TargetSpec::new("t", "gpu", HeadroomKind::NodePoolReplicas, 4)
    };
    let err = priced.validate_with(&PolicySpec::default()).unwrap_err();
    assert_eq!(err.0, "GPU_HOUR_COST");
    assert!(err.1.contains("\"t\" sets delayedRequestCost"), "{}", err.1);
    let with_gpu = PolicySpec {
        gpu_hour_cost: Some(4.0),
        ..PolicySpec::default()
    };
    assert_eq!(priced.validate_with(&with_gpu), Ok(()));
    // A target without its own price needs nothing of the policy.
    let plain = TargetSpec::new("p", "gpu", HeadroomKind::NodePoolReplicas, 4);
    assert_eq!(plain.validate_with(&PolicySpec::default()), Ok(()));
}

#[test]
fn target_validation_table() {
    let base = || TargetSpec::new("t", "gpu", HeadroomKind::NodePoolReplicas, 4);
    let hpa_ref = || HpaRef {
        namespace: "ml".into(),
        name: "llm".into(),
        raise_min_replicas: false,
        in_system_metric: None,
    };
    let window = |cron: &str, zone: Option<&str>, d: f64, spare: u32| ScheduleWindow {
        cron: cron.into(),
        time_zone: zone.map(str::to_string),
        duration_seconds: d,
        min_spare: spare,
    };
    let rows: Vec<(&str, TargetSpec, Option<&str>)> = vec![
        ("defaults", base(), None),
        (
            "next step at maxSpare",
            TargetSpec {
                next_step_spare: 4,
                hpa: Some(hpa_ref()),
                ..base()
            },
            None,
        ),
        (
            "next step above maxSpare",
            TargetSpec {
                next_step_spare: 5,
                hpa: Some(hpa_ref()),
                ..base()
            },
            Some("PREWARM_TARGETS[t].nextStepSpare"),
        ),
        (
            "next step without an HPA",
            TargetSpec {
                next_step_spare: 1,
                ..base()
            },
            Some("PREWARM_TARGETS[t].nextStepSpare"),
        ),
        (
            "empty node pool",
            TargetSpec {
                node_pool: " ".into(),
                ..base()
            },
            Some("PREWARM_TARGETS[t].nodePool"),
        ),
        (
            "0 GPUs",
            TargetSpec {
                gpus_per_replica: 0,
                ..base()
            },
            Some("PREWARM_TARGETS[t].gpusPerReplica"),
        ),
        (
            "65 GPUs",
            TargetSpec {
                gpus_per_replica: 65,
                ..base()
            },
            Some("PREWARM_TARGETS[t].gpusPerReplica"),
        ),
        (
            "64 GPUs",
            TargetSpec {
                gpus_per_replica: 64,
                gpu_cap: Some(64),
                ..base()
            },
            None,
        ),
        (
            "concurrency 0",
            TargetSpec {
                replica_concurrency: 0,
                ..base()
            },
            Some("PREWARM_TARGETS[t].replicaConcurrency"),
        ),
        (
            "concurrency 4097",
            TargetSpec {
                replica_concurrency: 4097,
                ..base()
            },
            Some("PREWARM_TARGETS[t].replicaConcurrency"),
        ),
        (
            "min above max",
            TargetSpec {
                min_spare: 5,
                ..base()
            },
            Some("PREWARM_TARGETS[t].minSpare"),
        ),
        (
            "min equal max",
            TargetSpec {
                min_spare: 4,
                ..base()
            },
            None,
        ),
        (
            "step up 0",
            TargetSpec {
                max_step_up: 0,
                ..base()
            },
            Some("PREWARM_TARGETS[t].maxStepUp"),
        ),
        (
            "a delay price of nothing",
            TargetSpec {
                delayed_request_cost: Some(0.0),
                ..base()
            },
            Some("PREWARM_TARGETS[t].delayedRequestCost"),
        ),
        (
            "a delay price of a cent",
            TargetSpec {
                delayed_request_cost: Some(0.01),
                ..base()
            },
            None,
        ),
        (
            "cap below a replica",
            TargetSpec {
                gpus_per_replica: 2,
                gpu_cap: Some(1),
                ..base()
            },
            Some("PREWARM_TARGETS[t].gpuCap"),
        ),
        (
            "HPA without name",
            TargetSpec {
                hpa: Some(HpaRef {
                    namespace: "ml".into(),
                    name: "".into(),
                    raise_min_replicas: false,
                    in_system_metric: None,
                }),
                ..base()
            },
            Some("PREWARM_TARGETS[t].hpa"),
        ),
        (
            "bad cron",
            TargetSpec {
                schedules: vec![window("0 25 * * *", None, 60.0, 1)],
                ..base()
            },
            Some("PREWARM_TARGETS[t].schedules[0].cron"),
        ),
        (
            "bad zone",
            TargetSpec {
                schedules: vec![window("0 9 * * *", Some("Nowhere"), 60.0, 1)],
                ..base()
            },
            Some("PREWARM_TARGETS[t].schedules[0].timeZone"),
        ),
        (
            "zero duration",
            TargetSpec {
                schedules: vec![window("0 9 * * *", None, 0.0, 1)],
                ..base()
            },
            Some("PREWARM_TARGETS[t].schedules[0].durationSeconds"),
        ),
        (
            "window above maxSpare",
            TargetSpec {
                schedules: vec![window("0 9 * * *", None, 60.0, 5)],
                ..base()
            },
            Some("PREWARM_TARGETS[t].schedules[0].minSpare"),
        ),
        (
            "good window",
            TargetSpec {
                schedules: vec![window("0 9 * * 1-5", Some("Europe/Berlin"), 3600.0, 4)],
                ..base()
            },
            None,
        ),
    ];
    for (name, target, want) in rows {
        let got = target.validate().err().map(|e| e.0);
        assert_eq!(got.as_deref(), want, "{name}");
    }
}

#[test]
fn new_gives_the_same_defaults_as_the_targets_json() {
    let parsed: TargetSpec = serde_json::from_str(
        r#"{"name":"t","nodePool":"gpu","maxSpare":4,"headroom":{"kind":"nodePoolReplicas"}}"#,
    )
    .unwrap();
    assert_eq!(
        TargetSpec::new("t", "gpu", HeadroomKind::NodePoolReplicas, 4),
        parsed
    );
    let step: TargetSpec = serde_json::from_str(
        r#"{"name":"t","nodePool":"gpu","maxSpare":4,"headroom":{"kind":"nodePoolReplicas"},"nextStepSpare":1}"#,
    )
    .unwrap();
    assert_eq!(step.next_step_spare, 1);
}

#[test]
fn every_server_kind_parses_from_its_name() {
    // (the `server` value of a target, the kind it selects)
    let rows = [
        ("vllm", ServerKind::Vllm),
        ("triton", ServerKind::Triton),
        ("tgi", ServerKind::Tgi),
        ("sglang", ServerKind::Sglang),
        ("triton-trtllm", ServerKind::TritonTrtllm),
        ("trtllm-serve", ServerKind::TrtllmServe),
        ("dynamo", ServerKind::Dynamo),
        ("llm-d", ServerKind::LlmD),
    ];
    for (name, kind) in rows {
        let parsed: TargetSpec = serde_json::from_str(&format!(
            r#"{{"name":"t","nodePool":"gpu","maxSpare":4,"headroom":{{"kind":"nodePoolReplicas"}},"server":"{name}"}}"#
        ))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(parsed.server, kind, "{name}");
    }
}

#[test]
fn a_named_hpa_gets_warm_replicas_unless_turned_off() {
    // Warm replicas are what the benchmark says to lead with, so naming the HPA turns its floor
    // on; `raiseMinReplicas: false` keeps warm nodes only.
    let hpa = |extra: &str| -> HpaRef {
        serde_json::from_str(&format!(r#"{{"namespace":"ml","name":"llama"{extra}}}"#)).unwrap()
    };
    assert!(hpa("").raise_min_replicas, "default");
    assert!(
        !hpa(r#","raiseMinReplicas":false"#).raise_min_replicas,
        "turned off"
    );
    assert!(
        hpa(r#","raiseMinReplicas":true"#).raise_min_replicas,
        "turned on"
    );
}
