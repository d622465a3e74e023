//! The tick's settings: the decision policy (`PolicySpec`, validated by the core), the metric
//! source, DRY_RUN, PAUSED and the learned lead times; and what the tick needs before it starts.
//! The interruption function reads none of them (`TICK_ONLY_VARS`).

use super::{parse_configmap_ref, region, Config, Vars};
use crate::core::cloudwatch_periods::publish_interval_problem;
use crate::core::spec::{BandByHour, ForecasterChoice};
use crate::core::PolicySpec;
use crate::error::{Error, Result};

/// Where metrics come from.
#[derive(Clone, Debug, PartialEq)]
pub enum MetricSourceConfig {
    /// Plain Prometheus HTTP API (self-hosted).
    Prometheus { url: String },
    /// Amazon Managed Prometheus workspace URL; requests are SigV4-signed (service `aps`).
    Amp {
        workspace_url: String,
        region: String,
    },
    /// CloudWatch GetMetricData in this namespace; each publisher puts a datapoint of each
    /// metric every `publish_s` seconds (CLOUDWATCH_PUBLISH_SECONDS).
    CloudWatch { namespace: String, publish_s: f64 },
}

/// The variables only the tick reads: the interruption function never looks at them, so a bad
/// or missing metric setting cannot stop drains (they are not even set on that function).
pub const TICK_ONLY_VARS: [&str; 19] = [
    "METRIC_SOURCE",
    "PROMETHEUS_URL",
    "AMP_WORKSPACE_URL",
    "CLOUDWATCH_NAMESPACE",
    "CLOUDWATCH_PUBLISH_SECONDS",
    "LEAD_TIME_SECONDS",
    "TICK_SECONDS",
    "METRICS_WINDOW_SECONDS",
    "METRICS_STEP_SECONDS",
    "ERROR_QUANTILE",
    "TARGET_WAIT_SECONDS",
    "SCALE_DOWN_DELAY_SECONDS",
    "COOLDOWN_SECONDS",
    "STALE_AFTER_SECONDS",
    "RATE_WINDOW_SECONDS",
    "SCRAPE_INTERVAL_SECONDS",
    "INGESTION_LAG_SECONDS",
    "DRY_RUN",
    "PAUSED",
];

impl Config {
    /// The decision policy, the metric source and DRY_RUN.
    pub(super) fn read_tick_settings<F: Fn(&str) -> Option<String>>(
        &mut self,
        vars: &Vars<F>,
    ) -> Result<()> {
        let defaults = PolicySpec::default();
        let policy = PolicySpec {
            lead_time_s: vars.f64_or("LEAD_TIME_SECONDS", defaults.lead_time_s)?,
            tick_s: vars.f64_or("TICK_SECONDS", defaults.tick_s)?,
            window_s: vars.f64_or("METRICS_WINDOW_SECONDS", defaults.window_s)?,
            step_s: vars.f64_or("METRICS_STEP_SECONDS", defaults.step_s)?,
            error_quantile: vars.f64_or("ERROR_QUANTILE", defaults.error_quantile)?,
            target_wait_s: vars.f64_or("TARGET_WAIT_SECONDS", defaults.target_wait_s)?,
            scale_down_delay: match vars.get("SCALE_DOWN_DELAY_SECONDS") {
                None => defaults.scale_down_delay,
                Some(raw) => raw
                    .parse()
                    .map_err(|m| Error::config("SCALE_DOWN_DELAY_SECONDS", m))?,
            },
            cooldown_s: vars.f64_or("COOLDOWN_SECONDS", defaults.cooldown_s)?,
            stale_after_s: vars.f64_or("STALE_AFTER_SECONDS", defaults.stale_after_s)?,
            seasons_s: vars.f64_list_or("SEASONS_SECONDS", defaults.seasons_s.clone())?,
            time_zone: vars
                .get("TIME_ZONE")
                .unwrap_or_else(|| defaults.time_zone.clone()),
            fast_path_ratio: vars.f64_or("FAST_PATH_RATIO", defaults.fast_path_ratio)?,
            fast_path_window_s: vars
                .f64_or("FAST_PATH_WINDOW_SECONDS", defaults.fast_path_window_s)?,
            band_history_s: vars.f64_or("BAND_HISTORY_SECONDS", defaults.band_history_s)?,
            band_step_s: vars.f64_or("BAND_STEP_SECONDS", defaults.band_step_s)?,
            band_by_hour: match vars.get("BAND_BY_HOUR") {
                None => defaults.band_by_hour,
                Some(raw) => BandByHour::parse(&raw).ok_or_else(|| {
                    Error::config(
                        "BAND_BY_HOUR",
                        format!("expected off, day, week or auto, got {raw:?}"),
                    )
                })?,
            },
            forecaster: match vars.get("FORECASTER") {
                None => defaults.forecaster,
                Some(raw) => ForecasterChoice::parse(&raw).ok_or_else(|| {
                    Error::config("FORECASTER", format!("expected blend or auto, got {raw:?}"))
                })?,
            },
            calibrate_every_s: vars
                .f64_or("CALIBRATE_EVERY_SECONDS", defaults.calibrate_every_s)?,
            delayed_request_cost: vars.opt_f64("DELAYED_REQUEST_COST")?,
            gpu_hour_cost: vars.opt_f64("GPU_HOUR_COST")?,
            target_timeout_s: vars.f64_or("TARGET_TIMEOUT_SECONDS", defaults.target_timeout_s)?,
            rate_window_s: vars.f64_or("RATE_WINDOW_SECONDS", defaults.rate_window_s)?,
            scrape_interval_s: vars
                .f64_or("SCRAPE_INTERVAL_SECONDS", defaults.scrape_interval_s)?,
            ingestion_lag_s: vars.f64_or("INGESTION_LAG_SECONDS", defaults.ingestion_lag_s)?,
            ..defaults
        };
        policy
            .validate()
            .map_err(|(var, message)| Error::config(var, message))?;
        self.policy = policy;
        self.metric_source = metric_source(vars, self.policy.step_s)?;
        self.dry_run = vars.bool_or("DRY_RUN", false)?;
        self.paused = vars.bool_or("PAUSED", false)?;
        self.learn_lead_times = vars.bool_or("LEARN_LEAD_TIMES", true)?;
        if let Some(raw) = vars.get("LEAD_TIMES_CONFIGMAP") {
            self.lead_times_configmap = parse_configmap_ref("LEAD_TIMES_CONFIGMAP", &raw)?;
        }
        Ok(())
    }

    /// The tick needs a metric source, a cluster and at least one target.
    pub fn require_tick_ready(&self) -> Result<()> {
        if self.targets.is_empty() && self.targets_configmap.is_none() {
            return Err(Error::config(
                "PREWARM_TARGETS",
                "at least one target is needed (or PREWARM_TARGETS_CONFIGMAP)",
            ));
        }
        if self.metric_source.is_none() {
            return Err(Error::config(
                "METRIC_SOURCE",
                "must be set to prometheus, amp or cloudwatch",
            ));
        }
        // Targets that could fight over a shared NodePool (`core::spec::shared_pool`): the tick
        // writes pools, so it refuses them; the interruption function and `prewarm restore`
        // read the same targets and run.
        crate::core::spec::validate_shared_pools(&self.targets).map_err(|(setting, message)| {
            Error::config("PREWARM_TARGETS", format!("{setting}: {message}"))
        })?;
        for t in &self.targets {
            t.validate_with(&self.policy)
                .map_err(|(var, message)| Error::config(var, message))?;
        }
        if self.interruption.queue_url.is_none() {
            return Err(Error::config(
                "INTERRUPTION_QUEUE_URL",
                "must be set for the tick: it hands drains nobody drives to the interruption \
                 function through that queue",
            ));
        }
        self.require_cluster().map(|_| ())
    }
}

/// SigV4-signed requests go to the managed-Prometheus host of the signing region only:
/// `https://aps-workspaces.<region>.amazonaws.com` (or `aps-workspaces-fips.`, and
/// `.amazonaws.com.cn` in the China regions), no user info, no port but 443. Any other host would
/// receive signed requests it could replay against the workspace within their validity.
fn check_amp_host(workspace_url: &str, region: &str) -> Result<()> {
    let refuse = |why: String| {
        Error::config(
            "AMP_WORKSPACE_URL",
            format!(
                "{why}: only https://aps-workspaces.{region}.amazonaws.com/workspaces/<id>/ \
                 (or aps-workspaces-fips.{region}) receives SigV4-signed requests"
            ),
        )
    };
    let url = url::Url::parse(workspace_url.trim())
        .map_err(|e| refuse(format!("{workspace_url:?} is not a URL ({e})")))?;
    if url.scheme() != "https" {
        return Err(refuse(format!("scheme {:?} is not https", url.scheme())));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(refuse("the URL holds user info".into()));
    }
    if url.port().is_some_and(|p| p != 443) {
        return Err(refuse(format!(
            "port {} is not 443",
            url.port().unwrap_or(0)
        )));
    }
    let host = url.host_str().unwrap_or("").to_ascii_lowercase();
    let suffix = if region.starts_with("cn-") {
        "amazonaws.com.cn"
    } else {
        "amazonaws.com"
    };
    let allowed = [
        format!("aps-workspaces.{region}.{suffix}"),
        format!("aps-workspaces-fips.{region}.{suffix}"),
    ];
    if allowed.contains(&host) {
        Ok(())
    } else {
        Err(refuse(format!("host {host:?} is not AMP's in {region}")))
    }
}

/// CLOUDWATCH_PUBLISH_SECONDS when unset: high-resolution datapoints every 10 s fill the 10 s
/// periods the default 15 s step is read at.
pub const DEFAULT_CLOUDWATCH_PUBLISH_SECONDS: f64 = 10.0;

/// The metric source; `step_s` (METRICS_STEP_SECONDS) decides which publish intervals CloudWatch
/// can be read at.
fn metric_source<F: Fn(&str) -> Option<String>>(
    vars: &Vars<F>,
    step_s: f64,
) -> Result<Option<MetricSourceConfig>> {
    let source = match vars.get("METRIC_SOURCE").as_deref().map(str::trim) {
        None => None,
        Some("prometheus") => Some(MetricSourceConfig::Prometheus {
            url: require(vars, "PROMETHEUS_URL", "METRIC_SOURCE=prometheus")?,
        }),
        Some("amp") => {
            let workspace_url = require(vars, "AMP_WORKSPACE_URL", "METRIC_SOURCE=amp")?;
            let region = region(vars)
                .ok_or_else(|| Error::config("AWS_REGION", "needed to sign requests to AMP"))?;
            check_amp_host(&workspace_url, &region)?;
            Some(MetricSourceConfig::Amp {
                workspace_url,
                region,
            })
        }
        Some("cloudwatch") => {
            let namespace = require(vars, "CLOUDWATCH_NAMESPACE", "METRIC_SOURCE=cloudwatch")?;
            let publish_s = vars.f64_or(
                "CLOUDWATCH_PUBLISH_SECONDS",
                DEFAULT_CLOUDWATCH_PUBLISH_SECONDS,
            )?;
            if let Some(problem) = publish_interval_problem(publish_s, step_s) {
                return Err(Error::config("CLOUDWATCH_PUBLISH_SECONDS", problem));
            }
            Some(MetricSourceConfig::CloudWatch {
                namespace,
                publish_s,
            })
        }
        Some(other) => {
            return Err(Error::config(
                "METRIC_SOURCE",
                format!("must be prometheus, amp or cloudwatch, got {other:?}"),
            ))
        }
    };
    for url_var in ["PROMETHEUS_URL", "AMP_WORKSPACE_URL"] {
        if let Some(u) = vars.get(url_var) {
            if !(u.starts_with("http://") || u.starts_with("https://")) {
                return Err(Error::config(
                    url_var,
                    format!("must be an http(s) URL, got {u:?}"),
                ));
            }
        }
    }
    Ok(source)
}

fn require<F: Fn(&str) -> Option<String>>(
    vars: &Vars<F>,
    name: &str,
    because: &str,
) -> Result<String> {
    vars.get(name)
        .ok_or_else(|| Error::config(name, format!("must be set when {because}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::{config, error_var, handler_config, SHARED_FREEZE, TARGET};
    use crate::config::{HandlerKind, TargetsConfigMap};

    #[test]
    fn policy_v2_settings_are_read() {
        let c = config(&[
            ("SEASONS_SECONDS", "3600, 25200"),
            ("TIME_ZONE", "America/New_York"),
            ("FAST_PATH_RATIO", "3"),
            ("BAND_BY_HOUR", "true"),
            ("DELAYED_REQUEST_COST", "0.002"),
            ("GPU_HOUR_COST", "4"),
            ("TARGET_TIMEOUT_SECONDS", "7"),
            ("RATE_WINDOW_SECONDS", "240"),
            ("SCRAPE_INTERVAL_SECONDS", "60"),
            ("INGESTION_LAG_SECONDS", "45"),
        ])
        .unwrap();
        assert_eq!(c.policy.target_timeout_s, 7.0);
        assert_eq!(
            (
                c.policy.rate_window_s,
                c.policy.scrape_interval_s,
                c.policy.ingestion_lag_s
            ),
            (240.0, 60.0, 45.0)
        );
        let defaults = config(&[]).unwrap();
        assert_eq!(
            (
                defaults.policy.rate_window_s,
                defaults.policy.scrape_interval_s,
                defaults.policy.ingestion_lag_s
            ),
            (60.0, 15.0, 30.0)
        );
        assert_eq!(c.policy.seasons_s, vec![3600.0, 25200.0]);
        assert_eq!(c.policy.time_zone, "America/New_York");
        assert_eq!(c.policy.fast_path_ratio, 3.0);
        assert_eq!(c.policy.band_by_hour, BandByHour::Day);
        assert_eq!(defaults.policy.band_by_hour, BandByHour::Auto);
        // (value, setting): the words and the yes-or-no values the flag once took.
        for (raw, want) in [
            ("off", BandByHour::Off),
            ("false", BandByHour::Off),
            ("Week", BandByHour::Week),
            (" auto ", BandByHour::Auto),
        ] {
            let c = config(&[("BAND_BY_HOUR", raw)]).unwrap();
            assert_eq!(c.policy.band_by_hour, want, "{raw}");
        }
        assert_eq!(defaults.policy.forecaster, ForecasterChoice::Auto);
        for (raw, want) in [
            ("blend", ForecasterChoice::Blend),
            (" Auto ", ForecasterChoice::Auto),
        ] {
            let c = config(&[("FORECASTER", raw)]).unwrap();
            assert_eq!(c.policy.forecaster, want, "{raw}");
        }
        assert_eq!(
            (c.policy.delayed_request_cost, c.policy.gpu_hour_cost),
            (Some(0.002), Some(4.0))
        );
        let off = config(&[("SEASONS_SECONDS", "none")]).unwrap();
        assert!(off.policy.seasons_s.is_empty());
    }

    #[test]
    fn the_rate_window_must_hold_four_scrapes_at_start_up() {
        // (RATE_WINDOW_SECONDS, SCRAPE_INTERVAL_SECONDS, accepted). The default 1 m window with
        // a 60 s scrape interval holds one scrape: every rate would be empty, so start-up fails
        // naming both variables.
        let rows: [(Option<&str>, Option<&str>, bool); 6] = [
            (None, None, true),
            (None, Some("15"), true),
            (None, Some("16"), false),
            (None, Some("60"), false),
            (Some("240"), Some("60"), true),
            (Some("239"), Some("60"), false),
        ];
        for (window, scrape, accepted) in rows {
            let mut pairs = Vec::new();
            if let Some(w) = window {
                pairs.push(("RATE_WINDOW_SECONDS", w));
            }
            if let Some(s) = scrape {
                pairs.push(("SCRAPE_INTERVAL_SECONDS", s));
            }
            let result = config(&pairs);
            if accepted {
                assert!(result.is_ok(), "{pairs:?}: {:?}", result.err());
                continue;
            }
            let message = result.expect_err(&format!("{pairs:?}")).to_string();
            assert!(message.contains("RATE_WINDOW_SECONDS"), "{message}");
            assert!(message.contains("SCRAPE_INTERVAL_SECONDS"), "{message}");
        }
    }

    #[test]
    fn the_cloudwatch_publish_interval_must_fill_the_steps_period() {
        // (CLOUDWATCH_PUBLISH_SECONDS, METRICS_STEP_SECONDS, accepted interval). The default
        // step 15 is read at 10 s periods (cloudwatch_periods::period_for): the default 10 s
        // interval fills them; standard-resolution (60 s) datapoints need a step of 60 or more.
        let rows: [(Option<&str>, Option<&str>, Option<f64>); 6] = [
            (None, None, Some(10.0)),
            (Some("5"), None, Some(5.0)),
            (Some("60"), Some("60"), Some(60.0)),
            (Some("60"), None, None),
            (Some("30"), None, None),
            (Some("20"), Some("60"), None),
        ];
        for (publish, step, want) in rows {
            let mut pairs = vec![
                ("METRIC_SOURCE", "cloudwatch"),
                ("CLOUDWATCH_NAMESPACE", "Llm"),
            ];
            if let Some(p) = publish {
                pairs.push(("CLOUDWATCH_PUBLISH_SECONDS", p));
            }
            if let Some(s) = step {
                // a 60 s step needs a fast-path window of at least two steps
                pairs.extend([
                    ("METRICS_STEP_SECONDS", s),
                    ("FAST_PATH_WINDOW_SECONDS", "120"),
                ]);
            }
            match want {
                Some(publish_s) => assert_eq!(
                    config(&pairs).unwrap().metric_source,
                    Some(MetricSourceConfig::CloudWatch {
                        namespace: "Llm".into(),
                        publish_s
                    }),
                    "{pairs:?}"
                ),
                None => assert_eq!(
                    error_var(config(&pairs)),
                    "CLOUDWATCH_PUBLISH_SECONDS",
                    "{pairs:?}"
                ),
            }
        }
    }

    /// A tick that is ready to start with `targets`: Prometheus, a kubeconfig and the queue.
    fn tick_env(targets: &str) -> Vec<(&'static str, &str)> {
        vec![
            ("PREWARM_TARGETS", targets),
            ("METRIC_SOURCE", "prometheus"),
            ("PROMETHEUS_URL", "http://127.0.0.1:19090"),
            ("KUBECONFIG", "/tmp/kubeconfig"),
            ("INTERRUPTION_QUEUE_URL", "http://127.0.0.1:5000/1/q"),
        ]
    }

    #[test]
    fn a_full_tick_configuration_parses() {
        let c = config(&[
            ("PREWARM_TARGETS", TARGET),
            ("METRIC_SOURCE", "prometheus"),
            ("PROMETHEUS_URL", "http://127.0.0.1:19090"),
            ("KUBECONFIG", "/tmp/kubeconfig"),
            (
                "INTERRUPTION_QUEUE_URL",
                "https://sqs.us-east-1.amazonaws.com/1/q",
            ),
            ("DRY_RUN", "true"),
            ("PAUSED", "true"),
            ("LEAD_TIME_SECONDS", "45"),
        ])
        .unwrap();
        c.require_tick_ready().unwrap();
        assert!(c.dry_run);
        assert!(c.paused);
        assert_eq!(c.policy.lead_time_s, 45.0);
        // Lead times are learned by default, kept beside prewarm's other objects.
        assert!(c.learn_lead_times);
        assert_eq!(
            c.lead_times_configmap,
            TargetsConfigMap {
                namespace: "prewarm".into(),
                name: "prewarm-lead-times".into()
            }
        );
        let t = c.target("llama").unwrap();
        assert_eq!(t.gpus_per_replica, 1);
        assert_eq!(t.replica_concurrency, 8);
        assert_eq!(
            t.headroom,
            crate::core::HeadroomKind::Balloon {
                namespace: "prewarm".into(),
                name: "balloon-llama".into()
            }
        );
    }

    /// Two targets on NodePool gpu, one freezing it: the tick refuses to start, naming both;
    /// the interruption function starts with the same targets (it writes no pool).
    #[test]
    fn targets_that_could_fight_over_a_node_pool_stop_the_tick_not_the_drains() {
        let pairs = tick_env(SHARED_FREEZE);
        match config(&pairs).unwrap().require_tick_ready() {
            Err(Error::Config { var, message }) => {
                assert_eq!(var, "PREWARM_TARGETS");
                assert!(
                    message.contains(r#"targets "a" and "b" share NodePool "gpu""#),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
        let drains = handler_config(HandlerKind::Interruption, &pairs);
        assert_eq!(drains.unwrap().targets.len(), 2);
    }

    /// A target's own delay price is weighed against GPU_HOUR_COST: without it the tick refuses
    /// to start, naming GPU_HOUR_COST; with it the tick starts.
    #[test]
    fn a_targets_delay_price_needs_gpu_hour_cost_at_start_up() {
        let priced = r#"[{"name":"llama","nodePool":"gpu","maxSpare":8,"delayedRequestCost":0.02,
            "headroom":{"kind":"balloon","namespace":"prewarm","name":"balloon-llama"}}]"#;
        let mut pairs = tick_env(priced);
        match config(&pairs).unwrap().require_tick_ready() {
            Err(Error::Config { var, message }) => {
                assert_eq!(var, "GPU_HOUR_COST");
                assert!(
                    message.contains("\"llama\" sets delayedRequestCost"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
        pairs.push(("GPU_HOUR_COST", "4"));
        let c = config(&pairs).unwrap();
        c.require_tick_ready().unwrap();
        assert_eq!(c.target("llama").unwrap().delayed_request_cost, Some(0.02));
    }

    #[test]
    fn tick_without_targets_names_the_variable() {
        let c = config(&[]).unwrap();
        match c.require_tick_ready() {
            Err(Error::Config { var, .. }) => assert_eq!(var, "PREWARM_TARGETS"),
            other => panic!("{other:?}"),
        }
    }

    /// Only the managed-Prometheus host of the signing region receives SigV4-signed requests:
    /// any other host (a typo, a proxy, an attacker's URL in the stack's parameters) fails at
    /// start-up naming AMP_WORKSPACE_URL.
    #[test]
    fn only_the_amp_host_of_the_region_receives_signed_requests() {
        let amp = |url: &str, region: &str| {
            config(&[
                ("METRIC_SOURCE", "amp"),
                ("AMP_WORKSPACE_URL", url),
                ("AWS_REGION", region),
            ])
        };
        for (url, region) in [
            (
                "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1/",
                "us-east-1",
            ),
            (
                "https://aps-workspaces-fips.us-gov-west-1.amazonaws.com/workspaces/ws-1",
                "us-gov-west-1",
            ),
            (
                "https://aps-workspaces.cn-north-1.amazonaws.com.cn/workspaces/ws-1",
                "cn-north-1",
            ),
            (
                "https://APS-Workspaces.eu-west-1.amazonaws.com:443/workspaces/ws-1/api/v1/query",
                "eu-west-1",
            ),
        ] {
            assert!(amp(url, region).is_ok(), "{url}");
        }
        for (url, region) in [
            ("https://evil.example/workspaces/ws-1", "us-east-1"),
            (
                "http://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1",
                "us-east-1",
            ),
            (
                "https://aps-workspaces.us-east-1.amazonaws.com.evil.example/w",
                "us-east-1",
            ),
            (
                "https://aps-workspaces.us-east-1.amazonaws.com@evil.example/w",
                "us-east-1",
            ),
            (
                "https://user@aps-workspaces.us-east-1.amazonaws.com/w",
                "us-east-1",
            ),
            (
                "https://aps-workspaces.us-east-1.amazonaws.com:8443/w",
                "us-east-1",
            ),
            (
                "https://aps-workspaces.us-west-2.amazonaws.com/w",
                "us-east-1",
            ),
            (
                "https://aps-workspaces.us-east-1.amazonaws.com.cn/w",
                "us-east-1",
            ),
            (
                "https://x.aps-workspaces.us-east-1.amazonaws.com/w",
                "us-east-1",
            ),
            ("https://127.0.0.1:9090", "us-east-1"),
            ("https://", "us-east-1"),
        ] {
            assert_eq!(error_var(amp(url, region)), "AMP_WORKSPACE_URL", "{url}");
        }
        // A plain Prometheus (no signing) may be any host.
        assert!(config(&[
            ("METRIC_SOURCE", "prometheus"),
            ("PROMETHEUS_URL", "http://prometheus.monitoring:9090")
        ])
        .is_ok());
    }

    #[test]
    fn amp_without_a_workspace_names_the_variable() {
        assert_eq!(
            error_var(config(&[
                ("METRIC_SOURCE", "amp"),
                ("AWS_REGION", "us-east-1")
            ])),
            "AMP_WORKSPACE_URL"
        );
    }

    #[test]
    fn the_tick_needs_the_interruption_queue_to_hand_drains_over() {
        let mut base = tick_env(TARGET);
        base.retain(|(k, _)| *k != "INTERRUPTION_QUEUE_URL");
        match config(&base).unwrap().require_tick_ready() {
            Err(Error::Config { var, .. }) => assert_eq!(var, "INTERRUPTION_QUEUE_URL"),
            other => panic!("{other:?}"),
        }
        let mut bad = base;
        bad.push(("INTERRUPTION_QUEUE_URL", "prewarm-interruptions"));
        assert_eq!(error_var(config(&bad)), "INTERRUPTION_QUEUE_URL");
    }
}
