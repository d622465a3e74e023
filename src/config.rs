//! Configuration from environment variables, read and validated once at start-up. Every error
//! names the variable and the allowed range. `Config::from_lookup` takes any lookup function so
//! tests need not touch the process environment.

use crate::core::{PolicySpec, TargetSpec};
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
    /// CloudWatch GetMetricData in this namespace.
    CloudWatch { namespace: String },
}

/// How to reach the cluster.
#[derive(Clone, Debug, PartialEq)]
pub enum ClusterAccess {
    /// KUBECONFIG set: local runs and tests.
    Kubeconfig { path: String },
    /// CLUSTER_NAME: DescribeCluster + a presigned STS token.
    Eks {
        cluster_name: String,
        region: String,
    },
}

/// Settings of the interruption path.
#[derive(Clone, Debug, PartialEq)]
pub struct InterruptionSettings {
    /// ACTIONS: `kind=action` pairs (e.g. `rebalance=cordon-prewarm`); kinds not named keep
    /// their default.
    pub actions: crate::core::interruption::ActionTable,
    /// EVICTION_BUDGET_SECONDS (30): eviction starts this long before a hard deadline.
    pub eviction_budget_s: f64,
    /// RECHECK_SECONDS (15): when a drain is not done, the message comes back after this.
    pub recheck_s: f64,
    /// INTERRUPTION_QUEUE_URL: for ChangeMessageVisibility on records still in progress.
    pub queue_url: Option<String>,
    /// ACCEPT_KWOK_INSTANCE_IDS (false): local stack only; also take the kwok provider's node
    /// names as instance ids (its nodes have no EC2 ids).
    pub instance_ids: crate::adapters::events::InstanceIdRule,
}

/// Which handler a Lambda function runs (PREWARM_HANDLER).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandlerKind {
    Tick,
    Interruption,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub policy: PolicySpec,
    pub targets: Vec<TargetSpec>,
    pub metric_source: Option<MetricSourceConfig>,
    pub cluster: Option<ClusterAccess>,
    pub dry_run: bool,
    pub emf_namespace: String,
    pub interruption: InterruptionSettings,
}

/// Reads one variable through the lookup; empty counts as unset.
struct Vars<F: Fn(&str) -> Option<String>>(F);

impl<F: Fn(&str) -> Option<String>> Vars<F> {
    fn get(&self, name: &str) -> Option<String> {
        (self.0)(name).filter(|v| !v.trim().is_empty())
    }

    fn f64_or(&self, name: &str, default: f64) -> Result<f64> {
        match self.get(name) {
            None => Ok(default),
            Some(raw) => raw
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| Error::config(name, format!("expected a number, got {raw:?}"))),
        }
    }

    fn opt_f64(&self, name: &str) -> Result<Option<f64>> {
        self.get(name).map(|_| self.f64_or(name, 0.0)).transpose()
    }

    /// Comma-separated numbers; an explicitly empty list is allowed with "none".
    fn f64_list_or(&self, name: &str, default: Vec<f64>) -> Result<Vec<f64>> {
        match self.get(name) {
            None => Ok(default),
            Some(raw) if raw.trim().eq_ignore_ascii_case("none") => Ok(Vec::new()),
            Some(raw) => raw
                .split(',')
                .map(|part| {
                    part.trim()
                        .parse::<f64>()
                        .ok()
                        .filter(|v| v.is_finite())
                        .ok_or_else(|| {
                            Error::config(
                                name,
                                format!("expected comma-separated seconds or none, got {raw:?}"),
                            )
                        })
                })
                .collect(),
        }
    }

    fn bool_or(&self, name: &str, default: bool) -> Result<bool> {
        match self.get(name).map(|v| v.trim().to_ascii_lowercase()) {
            None => Ok(default),
            Some(v) if ["true", "1", "yes"].contains(&v.as_str()) => Ok(true),
            Some(v) if ["false", "0", "no"].contains(&v.as_str()) => Ok(false),
            Some(v) => Err(Error::config(
                name,
                format!("expected true or false, got {v:?}"),
            )),
        }
    }
}

impl HandlerKind {
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        match Vars(lookup)
            .get("PREWARM_HANDLER")
            .as_deref()
            .map(str::trim)
        {
            Some("tick") => Ok(HandlerKind::Tick),
            Some("interruption") => Ok(HandlerKind::Interruption),
            Some(other) => Err(Error::config(
                "PREWARM_HANDLER",
                format!("must be tick or interruption, got {other:?}"),
            )),
            None => Err(Error::config(
                "PREWARM_HANDLER",
                "must be set to tick or interruption in Lambda mode",
            )),
        }
    }
}

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let vars = Vars(lookup);
        let defaults = PolicySpec::default();
        let policy = PolicySpec {
            lead_time_s: vars.f64_or("LEAD_TIME_SECONDS", defaults.lead_time_s)?,
            tick_s: vars.f64_or("TICK_SECONDS", defaults.tick_s)?,
            window_s: vars.f64_or("METRICS_WINDOW_SECONDS", defaults.window_s)?,
            step_s: vars.f64_or("METRICS_STEP_SECONDS", defaults.step_s)?,
            error_quantile: vars.f64_or("ERROR_QUANTILE", defaults.error_quantile)?,
            target_wait_s: vars.f64_or("TARGET_WAIT_SECONDS", defaults.target_wait_s)?,
            scale_down_delay_s: vars
                .f64_or("SCALE_DOWN_DELAY_SECONDS", defaults.scale_down_delay_s)?,
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
            band_by_hour: vars.bool_or("BAND_BY_HOUR", defaults.band_by_hour)?,
            calibrate_every_s: vars
                .f64_or("CALIBRATE_EVERY_SECONDS", defaults.calibrate_every_s)?,
            delayed_request_cost: vars.opt_f64("DELAYED_REQUEST_COST")?,
            gpu_hour_cost: vars.opt_f64("GPU_HOUR_COST")?,
            ..defaults
        };
        policy
            .validate()
            .map_err(|(var, message)| Error::config(var, message))?;

        let targets = match vars.get("PREWARM_TARGETS") {
            None => Vec::new(),
            Some(raw) => parse_targets(&raw)?,
        };

        let region = vars
            .get("AWS_REGION")
            .or_else(|| vars.get("AWS_DEFAULT_REGION"));
        let metric_source = match vars.get("METRIC_SOURCE").as_deref().map(str::trim) {
            None => None,
            Some("prometheus") => Some(MetricSourceConfig::Prometheus {
                url: require(&vars, "PROMETHEUS_URL", "METRIC_SOURCE=prometheus")?,
            }),
            Some("amp") => Some(MetricSourceConfig::Amp {
                workspace_url: require(&vars, "AMP_WORKSPACE_URL", "METRIC_SOURCE=amp")?,
                region: region
                    .clone()
                    .ok_or_else(|| Error::config("AWS_REGION", "needed to sign requests to AMP"))?,
            }),
            Some("cloudwatch") => Some(MetricSourceConfig::CloudWatch {
                namespace: require(&vars, "CLOUDWATCH_NAMESPACE", "METRIC_SOURCE=cloudwatch")?,
            }),
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

        let cluster = match (vars.get("KUBECONFIG"), vars.get("CLUSTER_NAME")) {
            (Some(path), _) => Some(ClusterAccess::Kubeconfig { path }),
            (None, Some(cluster_name)) => Some(ClusterAccess::Eks {
                cluster_name,
                region: region.clone().ok_or_else(|| {
                    Error::config(
                        "AWS_REGION",
                        "needed with CLUSTER_NAME to call DescribeCluster",
                    )
                })?,
            }),
            (None, None) => None,
        };

        let eviction_budget_s = vars.f64_or("EVICTION_BUDGET_SECONDS", 30.0)?;
        if !(0.0..=110.0).contains(&eviction_budget_s) {
            return Err(Error::config(
                "EVICTION_BUDGET_SECONDS",
                format!("must be between 0 and 110 (a spot notice gives 120 s), got {eviction_budget_s}"),
            ));
        }
        let recheck_s = vars.f64_or("RECHECK_SECONDS", 15.0)?;
        if !(1.0..=900.0).contains(&recheck_s) {
            return Err(Error::config(
                "RECHECK_SECONDS",
                format!("must be between 1 and 900, got {recheck_s}"),
            ));
        }

        Ok(Config {
            policy,
            targets,
            metric_source,
            cluster,
            dry_run: vars.bool_or("DRY_RUN", false)?,
            emf_namespace: vars
                .get("EMF_NAMESPACE")
                .unwrap_or_else(|| "Prewarm".into()),
            interruption: InterruptionSettings {
                actions: crate::core::interruption::ActionTable::parse(
                    &vars.get("ACTIONS").unwrap_or_default(),
                )
                .map_err(|message| Error::config("ACTIONS", message))?,
                eviction_budget_s,
                recheck_s,
                queue_url: vars.get("INTERRUPTION_QUEUE_URL"),
                instance_ids: if vars.bool_or("ACCEPT_KWOK_INSTANCE_IDS", false)? {
                    crate::adapters::events::InstanceIdRule::Ec2OrKwok
                } else {
                    crate::adapters::events::InstanceIdRule::Ec2
                },
            },
        })
    }

    /// The tick needs a metric source, a cluster and at least one target.
    pub fn require_tick_ready(&self) -> Result<()> {
        if self.targets.is_empty() {
            return Err(Error::config(
                "PREWARM_TARGETS",
                "at least one target is needed",
            ));
        }
        if self.metric_source.is_none() {
            return Err(Error::config(
                "METRIC_SOURCE",
                "must be set to prometheus, amp or cloudwatch",
            ));
        }
        self.require_cluster().map(|_| ())
    }

    pub fn require_cluster(&self) -> Result<&ClusterAccess> {
        self.cluster.as_ref().ok_or_else(|| {
            Error::config(
                "CLUSTER_NAME",
                "set CLUSTER_NAME (or KUBECONFIG for local runs)",
            )
        })
    }

    pub fn target(&self, name: &str) -> Option<&TargetSpec> {
        self.targets.iter().find(|t| t.name == name)
    }
}

fn require<F: Fn(&str) -> Option<String>>(
    vars: &Vars<F>,
    name: &str,
    because: &str,
) -> Result<String> {
    vars.get(name)
        .ok_or_else(|| Error::config(name, format!("must be set when {because}")))
}

/// Parses and validates the PREWARM_TARGETS JSON array.
pub fn parse_targets(raw: &str) -> Result<Vec<TargetSpec>> {
    let targets: Vec<TargetSpec> = serde_json::from_str(raw)
        .map_err(|e| Error::config("PREWARM_TARGETS", format!("invalid JSON target list: {e}")))?;
    let mut seen = std::collections::BTreeSet::new();
    for t in &targets {
        t.validate()
            .map_err(|(field, message)| Error::config(field, message))?;
        if !seen.insert(t.name.clone()) {
            return Err(Error::config(
                "PREWARM_TARGETS",
                format!("target name {:?} appears twice", t.name),
            ));
        }
    }
    Ok(targets)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const TARGET: &str = r#"[{"name":"llama","nodePool":"gpu","maxSpare":8,
        "headroom":{"kind":"balloon","namespace":"prewarm","name":"balloon-llama"},
        "selector":"model_name=\"llama\""}]"#;

    fn config(pairs: &[(&str, &str)]) -> Result<Config> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(move |k| map.get(k).cloned())
    }

    fn error_var(result: Result<Config>) -> String {
        match result {
            Err(Error::Config { var, .. }) => var,
            other => panic!("expected a configuration error, got {other:?}"),
        }
    }

    #[test]
    fn defaults_when_nothing_is_set() {
        let c = config(&[]).unwrap();
        assert_eq!(c.policy, PolicySpec::default());
        assert!(!c.dry_run);
        assert_eq!(c.emf_namespace, "Prewarm");
        assert_eq!(c.interruption.eviction_budget_s, 30.0);
    }

    #[test]
    fn policy_v2_settings_are_read() {
        let c = config(&[
            ("SEASONS_SECONDS", "3600, 25200"),
            ("TIME_ZONE", "America/New_York"),
            ("FAST_PATH_RATIO", "3"),
            ("BAND_BY_HOUR", "true"),
            ("DELAYED_REQUEST_COST", "0.002"),
            ("GPU_HOUR_COST", "4"),
        ])
        .unwrap();
        assert_eq!(c.policy.seasons_s, vec![3600.0, 25200.0]);
        assert_eq!(c.policy.time_zone, "America/New_York");
        assert_eq!(c.policy.fast_path_ratio, 3.0);
        assert!(c.policy.band_by_hour);
        assert_eq!(
            (c.policy.delayed_request_cost, c.policy.gpu_hour_cost),
            (Some(0.002), Some(4.0))
        );
        let off = config(&[("SEASONS_SECONDS", "none")]).unwrap();
        assert!(off.policy.seasons_s.is_empty());
    }

    #[test]
    fn each_bad_setting_is_named() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[("TICK_SECONDS", "0")], "TICK_SECONDS"),
            (&[("TICK_SECONDS", "fast")], "TICK_SECONDS"),
            (&[("LEAD_TIME_SECONDS", "NaN")], "LEAD_TIME_SECONDS"),
            (&[("ERROR_QUANTILE", "1.5")], "ERROR_QUANTILE"),
            (&[("SEASONS_SECONDS", "86400,week")], "SEASONS_SECONDS"),
            (&[("SEASONS_SECONDS", "60")], "SEASONS_SECONDS"),
            (&[("TIME_ZONE", "Europe/Atlantis")], "TIME_ZONE"),
            (&[("FAST_PATH_RATIO", "0.5")], "FAST_PATH_RATIO"),
            (&[("BAND_BY_HOUR", "sometimes")], "BAND_BY_HOUR"),
            (&[("BAND_HISTORY_SECONDS", "60")], "BAND_HISTORY_SECONDS"),
            (&[("DELAYED_REQUEST_COST", "0.01")], "GPU_HOUR_COST"),
            (&[("DRY_RUN", "maybe")], "DRY_RUN"),
            (&[("METRIC_SOURCE", "graphite")], "METRIC_SOURCE"),
            (&[("METRIC_SOURCE", "prometheus")], "PROMETHEUS_URL"),
            (
                &[("METRIC_SOURCE", "amp"), ("AMP_WORKSPACE_URL", "https://x")],
                "AWS_REGION",
            ),
            (&[("PROMETHEUS_URL", "localhost:9090")], "PROMETHEUS_URL"),
            (&[("PREWARM_TARGETS", "{not json")], "PREWARM_TARGETS"),
            (&[("CLUSTER_NAME", "prod")], "AWS_REGION"),
            (
                &[("EVICTION_BUDGET_SECONDS", "300")],
                "EVICTION_BUDGET_SECONDS",
            ),
            (&[("RECHECK_SECONDS", "0")], "RECHECK_SECONDS"),
            (&[("ACTIONS", "rebalance=nap")], "ACTIONS"),
            (&[("ACTIONS", "spot")], "ACTIONS"),
        ];
        for (pairs, var) in cases {
            assert_eq!(error_var(config(pairs)), *var, "{pairs:?}");
        }
    }

    #[test]
    fn a_bad_target_names_its_field() {
        let bad = TARGET.replace("\"maxSpare\":8", "\"maxSpare\":8,\"minSpare\":9");
        assert_eq!(
            error_var(config(&[("PREWARM_TARGETS", &bad)])),
            "PREWARM_TARGETS[llama].minSpare"
        );
        let twice = format!("[{0},{0}]", &TARGET[1..TARGET.len() - 1]);
        assert_eq!(
            error_var(config(&[("PREWARM_TARGETS", &twice)])),
            "PREWARM_TARGETS"
        );
        let unknown = TARGET.replace("\"maxSpare\"", "\"maxSpares\"");
        assert_eq!(
            error_var(config(&[("PREWARM_TARGETS", &unknown)])),
            "PREWARM_TARGETS"
        );
    }

    #[test]
    fn a_full_tick_configuration_parses() {
        let c = config(&[
            ("PREWARM_TARGETS", TARGET),
            ("METRIC_SOURCE", "prometheus"),
            ("PROMETHEUS_URL", "http://127.0.0.1:19090"),
            ("KUBECONFIG", "/tmp/kubeconfig"),
            ("DRY_RUN", "true"),
            ("LEAD_TIME_SECONDS", "45"),
        ])
        .unwrap();
        c.require_tick_ready().unwrap();
        assert!(c.dry_run);
        assert_eq!(c.policy.lead_time_s, 45.0);
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

    #[test]
    fn tick_without_targets_names_the_variable() {
        let c = config(&[]).unwrap();
        match c.require_tick_ready() {
            Err(Error::Config { var, .. }) => assert_eq!(var, "PREWARM_TARGETS"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn handler_kind_is_required_and_checked() {
        assert_eq!(
            HandlerKind::from_lookup(|_| Some("tick".into())).unwrap(),
            HandlerKind::Tick
        );
        assert!(HandlerKind::from_lookup(|_| Some("tock".into())).is_err());
        assert!(HandlerKind::from_lookup(|_| None).is_err());
    }
}
