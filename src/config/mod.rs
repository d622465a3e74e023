//! Configuration from environment variables, read and validated once at start-up. Every error
//! names the variable and the allowed range. `Config::from_lookup` takes any lookup function so
//! tests need not touch the process environment.
//!
//! One path reads every setting: this module holds what both functions read (the cluster, the
//! targets) and puts the settings together; `tick` holds the tick's settings (the policy, the
//! metric source), `interruption` the interruption function's (the drain's actions, bounds,
//! placeholders). Settings types the adapters take live here too, so that config imports no
//! adapter.

mod interruption;
mod tick;

pub use interruption::{
    InstanceIdRule, InterruptionSettings, PlaceholderSettings, DEFAULT_BALLOON_PRIORITY_CLASS,
    DEFAULT_PAUSE_IMAGE,
};
pub use tick::{MetricSourceConfig, TICK_ONLY_VARS};

use crate::core::{PolicySpec, TargetSpec};
use crate::error::{Error, Result};
use interruption::{interruption_settings, queue_url, recheck_s};

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

/// Which handler a Lambda function runs (PREWARM_HANDLER).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandlerKind {
    Tick,
    Interruption,
}

/// A ConfigMap that holds the targets (key `targets.json`), re-read at every invocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetsConfigMap {
    pub namespace: String,
    pub name: String,
}

/// The key of the targets ConfigMap that holds the JSON target list.
pub const TARGETS_KEY: &str = "targets.json";

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub policy: PolicySpec,
    /// PREWARM_TARGETS, read once at start-up (empty when the targets come from a ConfigMap).
    pub targets: Vec<TargetSpec>,
    /// PREWARM_TARGETS_CONFIGMAP (`namespace/name`): the targets are read from it instead.
    pub targets_configmap: Option<TargetsConfigMap>,
    pub metric_source: Option<MetricSourceConfig>,
    pub cluster: Option<ClusterAccess>,
    pub dry_run: bool,
    /// PAUSED: the tick restores what prewarm changed (once per execution environment, until
    /// it succeeds) and from then on only observes, as under DRY_RUN.
    pub paused: bool,
    pub emf_namespace: String,
    pub interruption: InterruptionSettings,
    /// LEARN_LEAD_TIMES: the tick learns the lead time from NodeClaims and pods
    /// (`core::lead`); off, LEAD_TIME_SECONDS is the horizon.
    pub learn_lead_times: bool,
    /// LEAD_TIMES_CONFIGMAP (`namespace/name`): where the learned lead times are kept;
    /// `prewarm-lead-times` in the targets ConfigMap's namespace (else `prewarm`) by default.
    pub lead_times_configmap: TargetsConfigMap,
}

/// The default name of the ConfigMap the learned lead times are kept in.
pub const LEAD_TIMES_CONFIGMAP: &str = "prewarm-lead-times";

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
    /// Reads the process environment: every setting of both paths (command line).
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads the process environment for one Lambda function: only the settings that function
    /// uses are read and validated.
    pub fn for_handler_from_env(kind: HandlerKind) -> Result<Self> {
        Self::for_handler(kind, |k| std::env::var(k).ok())
    }

    /// Every setting of both paths (the command line, which can run either).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let vars = Vars(lookup);
        let mut config = Self::shared(&vars)?;
        config.read_tick_settings(&vars)?;
        config.interruption = interruption_settings(&vars)?;
        Ok(config)
    }

    /// The settings of one function. The interruption function reads none of the tick's
    /// (`TICK_ONLY_VARS`): it starts, and drains, whatever the metric settings say.
    pub fn for_handler(kind: HandlerKind, lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let vars = Vars(lookup);
        let mut config = Self::shared(&vars)?;
        match kind {
            HandlerKind::Tick => {
                config.read_tick_settings(&vars)?;
                // The tick's reservation collection needs two drain settings: when a silent drain
                // counts as orphaned (RECHECK_SECONDS) and where to hand it over
                // (INTERRUPTION_QUEUE_URL). Only those two are read: a bad value of a drain-only
                // setting (ACTIONS, DRAIN_SURGE, ...) is the interruption function's to refuse.
                config.interruption.recheck_s = recheck_s(&vars)?;
                config.interruption.queue_url = queue_url(&vars)?;
            }
            HandlerKind::Interruption => config.interruption = interruption_settings(&vars)?,
        }
        Ok(config)
    }

    /// Settings both functions read: the cluster, the targets, the EMF namespace.
    fn shared<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<Self> {
        let targets = match vars.get("PREWARM_TARGETS") {
            None => Vec::new(),
            Some(raw) => parse_targets(&raw)?,
        };
        let targets_configmap = match vars.get("PREWARM_TARGETS_CONFIGMAP") {
            None => None,
            Some(_) if !targets.is_empty() => {
                return Err(Error::config(
                    "PREWARM_TARGETS_CONFIGMAP",
                    "set either PREWARM_TARGETS or PREWARM_TARGETS_CONFIGMAP, not both",
                ))
            }
            Some(raw) => Some(parse_configmap_ref("PREWARM_TARGETS_CONFIGMAP", &raw)?),
        };
        let cluster = match (vars.get("KUBECONFIG"), vars.get("CLUSTER_NAME")) {
            (Some(path), _) => Some(ClusterAccess::Kubeconfig { path }),
            (None, Some(cluster_name)) => Some(ClusterAccess::Eks {
                cluster_name,
                region: region(vars).ok_or_else(|| {
                    Error::config(
                        "AWS_REGION",
                        "needed with CLUSTER_NAME to call DescribeCluster",
                    )
                })?,
            }),
            (None, None) => None,
        };
        let lead_times_configmap = TargetsConfigMap {
            namespace: targets_configmap
                .as_ref()
                .map_or_else(|| "prewarm".to_string(), |c| c.namespace.clone()),
            name: LEAD_TIMES_CONFIGMAP.into(),
        };
        Ok(Config {
            policy: PolicySpec::default(),
            targets,
            targets_configmap,
            metric_source: None,
            cluster,
            dry_run: false,
            paused: false,
            emf_namespace: vars
                .get("EMF_NAMESPACE")
                .unwrap_or_else(|| "Prewarm".into()),
            interruption: InterruptionSettings::default(),
            learn_lead_times: true,
            lead_times_configmap,
        })
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

fn region<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Option<String> {
    vars.get("AWS_REGION")
        .or_else(|| vars.get("AWS_DEFAULT_REGION"))
}

/// `namespace/name` of a ConfigMap (Kubernetes DNS-1123 names), set in `var`.
fn parse_configmap_ref(var: &str, raw: &str) -> Result<TargetsConfigMap> {
    let dns_label = |s: &str| {
        !s.is_empty()
            && s.len() <= 253
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
            && !s.starts_with(['-', '.'])
            && !s.ends_with(['-', '.'])
    };
    match raw.trim().split_once('/') {
        Some((namespace, name)) if dns_label(namespace) && dns_label(name) => {
            Ok(TargetsConfigMap {
                namespace: namespace.into(),
                name: name.into(),
            })
        }
        _ => Err(Error::config(
            var,
            format!("must be namespace/name of a ConfigMap, got {raw:?}"),
        )),
    }
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
    use crate::test_util::string_map;
    use std::collections::HashMap;

    pub(crate) const TARGET: &str = r#"[{"name":"llama","nodePool":"gpu","maxSpare":8,
        "headroom":{"kind":"balloon","namespace":"prewarm","name":"balloon-llama"},
        "selector":"model_name=\"llama\""}]"#;

    pub(crate) const SHARED_FREEZE: &str = r#"[
        {"name":"a","nodePool":"gpu","maxSpare":8,"freezeConsolidation":true,
         "headroom":{"kind":"balloon","namespace":"prewarm","name":"balloon-a"}},
        {"name":"b","nodePool":"gpu","maxSpare":8,
         "headroom":{"kind":"balloon","namespace":"prewarm","name":"balloon-b"}}]"#;

    pub(crate) fn config(pairs: &[(&str, &str)]) -> Result<Config> {
        let map: HashMap<String, String> = string_map(pairs);
        Config::from_lookup(move |k| map.get(k).cloned())
    }

    /// One function's configuration from `pairs`.
    pub(crate) fn handler_config(kind: HandlerKind, pairs: &[(&str, &str)]) -> Result<Config> {
        let map: HashMap<String, String> = string_map(pairs);
        Config::for_handler(kind, move |k| map.get(k).cloned())
    }

    pub(crate) fn error_var(result: Result<Config>) -> String {
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
        // The chart's balloon defaults (infra/helm/prewarm/values.yaml `balloon`).
        assert_eq!(c.interruption.placeholder.priority_class, "prewarm-balloon");
        assert_eq!(
            c.interruption.placeholder.image,
            "registry.k8s.io/pause:3.10"
        );
    }

    /// SCALE_DOWN_DELAY_SECONDS is seconds or the word `lead` (any case, spaces trimmed).
    #[test]
    fn the_scale_down_delay_is_seconds_or_one_lead() {
        use crate::core::spec::ScaleDownDelay;
        for (raw, want) in [
            ("90", ScaleDownDelay::Seconds(90.0)),
            ("lead", ScaleDownDelay::Lead),
            (" Lead ", ScaleDownDelay::Lead),
        ] {
            let c = config(&[("SCALE_DOWN_DELAY_SECONDS", raw)]).unwrap();
            assert_eq!(c.policy.scale_down_delay, want, "{raw:?}");
        }
    }

    #[test]
    fn each_bad_setting_is_named() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[("TICK_SECONDS", "0")], "TICK_SECONDS"),
            (&[("TICK_SECONDS", "fast")], "TICK_SECONDS"),
            (&[("TARGET_TIMEOUT_SECONDS", "0")], "TARGET_TIMEOUT_SECONDS"),
            (
                &[("TARGET_TIMEOUT_SECONDS", "61")],
                "TARGET_TIMEOUT_SECONDS",
            ),
            (&[("RATE_WINDOW_SECONDS", "3")], "RATE_WINDOW_SECONDS"),
            (
                &[("SCRAPE_INTERVAL_SECONDS", "0")],
                "SCRAPE_INTERVAL_SECONDS",
            ),
            (&[("INGESTION_LAG_SECONDS", "-1")], "INGESTION_LAG_SECONDS"),
            (&[("INGESTION_LAG_SECONDS", "601")], "INGESTION_LAG_SECONDS"),
            (&[("LEAD_TIME_SECONDS", "NaN")], "LEAD_TIME_SECONDS"),
            (&[("ERROR_QUANTILE", "1.5")], "ERROR_QUANTILE"),
            (&[("SEASONS_SECONDS", "86400,week")], "SEASONS_SECONDS"),
            (&[("SEASONS_SECONDS", "60")], "SEASONS_SECONDS"),
            (&[("TIME_ZONE", "Europe/Atlantis")], "TIME_ZONE"),
            (&[("FAST_PATH_RATIO", "0.5")], "FAST_PATH_RATIO"),
            (&[("BAND_BY_HOUR", "sometimes")], "BAND_BY_HOUR"),
            (&[("FORECASTER", "augurs")], "FORECASTER"),
            (
                &[("SCALE_DOWN_DELAY_SECONDS", "later")],
                "SCALE_DOWN_DELAY_SECONDS",
            ),
            (
                &[("SCALE_DOWN_DELAY_SECONDS", "-1")],
                "SCALE_DOWN_DELAY_SECONDS",
            ),
            (&[("BAND_HISTORY_SECONDS", "60")], "BAND_HISTORY_SECONDS"),
            (&[("DELAYED_REQUEST_COST", "0.01")], "GPU_HOUR_COST"),
            (&[("DRY_RUN", "maybe")], "DRY_RUN"),
            (&[("PAUSED", "maybe")], "PAUSED"),
            (&[("LEARN_LEAD_TIMES", "maybe")], "LEARN_LEAD_TIMES"),
            (
                &[("LEAD_TIMES_CONFIGMAP", "lead-times")],
                "LEAD_TIMES_CONFIGMAP",
            ),
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
            (&[("DRAIN_SURGE", "sometimes")], "DRAIN_SURGE"),
            (
                &[("BALLOON_PRIORITY_CLASS", "Prewarm_Balloon")],
                "BALLOON_PRIORITY_CLASS",
            ),
            (
                &[("BALLOON_PRIORITY_CLASS", "-balloon")],
                "BALLOON_PRIORITY_CLASS",
            ),
            (
                &[("BALLOON_PRIORITY_CLASS", "a..b")],
                "BALLOON_PRIORITY_CLASS",
            ),
            (&[("PAUSE_IMAGE", "pause 3.10")], "PAUSE_IMAGE"),
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
    fn an_unknown_server_kind_names_the_variable_and_every_kind() {
        let bad = TARGET.replace("\"maxSpare\":8", "\"maxSpare\":8,\"server\":\"trtllm\"");
        match config(&[("PREWARM_TARGETS", &bad)]) {
            Err(Error::Config { var, message }) => {
                assert_eq!(var, "PREWARM_TARGETS");
                for kind in [
                    "vllm",
                    "triton",
                    "tgi",
                    "sglang",
                    "triton-trtllm",
                    "trtllm-serve",
                    "dynamo",
                    "llm-d",
                ] {
                    assert!(message.contains(&format!("`{kind}`")), "{kind}: {message}");
                }
            }
            other => panic!("{other:?}"),
        }
    }

    /// What the template gives the interruption function when the tick's metric settings are
    /// wrong or absent (the issue's case: MetricSource=amp with no workspace).
    #[test]
    fn the_interruption_function_starts_without_any_metric_setting() {
        let broken_tick_settings: &[(&str, &str)] = &[
            ("METRIC_SOURCE", "amp"),
            ("LEAD_TIME_SECONDS", "0"),
            ("ERROR_QUANTILE", "0.1"),
            ("PROMETHEUS_URL", "localhost:9090"),
            ("DRY_RUN", "maybe"),
        ];
        let mut pairs = vec![
            ("CLUSTER_NAME", "prod"),
            ("AWS_REGION", "eu-west-1"),
            ("PREWARM_TARGETS", TARGET),
            ("RECHECK_SECONDS", "20"),
        ];
        pairs.extend_from_slice(broken_tick_settings);
        let c = handler_config(HandlerKind::Interruption, &pairs).unwrap();
        assert_eq!(c.metric_source, None);
        assert_eq!(c.interruption.recheck_s, 20.0);
        assert_eq!(c.targets.len(), 1);
        c.require_cluster().unwrap();
        // The same environment stops the tick at Init, naming the first bad variable.
        match handler_config(HandlerKind::Tick, &pairs) {
            Err(Error::Config { var, .. }) => assert_eq!(var, "LEAD_TIME_SECONDS"),
            other => panic!("{other:?}"),
        }
        // No settings at all (only the cluster): the interruption function still starts.
        let bare = |k: &str| match k {
            "CLUSTER_NAME" => Some("prod".to_string()),
            "AWS_REGION" => Some("eu-west-1".to_string()),
            _ => None,
        };
        Config::for_handler(HandlerKind::Interruption, bare).unwrap();
    }

    #[test]
    fn the_tick_function_reads_only_the_drain_settings_of_its_handover() {
        const Q: &str = "http://127.0.0.1:5000/1/q";
        // (situation, environment, expected (RECHECK_SECONDS, INTERRUPTION_QUEUE_URL) or the
        // variable the start-up error names) - by hand; defaults: 15 s, no queue.
        type Row = (
            &'static str,
            &'static [(&'static str, &'static str)],
            std::result::Result<(f64, Option<&'static str>), &'static str>,
        );
        let rows: [Row; 9] = [
            ("nothing set: defaults", &[], Ok((15.0, None))),
            (
                "both read",
                &[("RECHECK_SECONDS", "20"), ("INTERRUPTION_QUEUE_URL", Q)],
                Ok((20.0, Some(Q))),
            ),
            (
                "bad ACTIONS is not the tick's business",
                &[("ACTIONS", "spot=explode"), ("INTERRUPTION_QUEUE_URL", Q)],
                Ok((15.0, Some(Q))),
            ),
            (
                "bad eviction budget ignored",
                &[
                    ("EVICTION_BUDGET_SECONDS", "999"),
                    ("RECHECK_SECONDS", "30"),
                ],
                Ok((30.0, None)),
            ),
            (
                "bad drain switches ignored",
                &[
                    ("DRAIN_SURGE", "maybe"),
                    ("DELETE_PAST_PDB_AT_DEADLINE", "x"),
                    ("ACCEPT_KWOK_INSTANCE_IDS", "y"),
                ],
                Ok((15.0, None)),
            ),
            (
                "recheck below 1 s",
                &[("RECHECK_SECONDS", "0")],
                Err("RECHECK_SECONDS"),
            ),
            (
                "recheck not a number",
                &[("RECHECK_SECONDS", "soon")],
                Err("RECHECK_SECONDS"),
            ),
            (
                "queue name instead of URL",
                &[("INTERRUPTION_QUEUE_URL", "prewarm-interruptions")],
                Err("INTERRUPTION_QUEUE_URL"),
            ),
            (
                "bad ACTIONS does not hide a bad recheck",
                &[("ACTIONS", "spot=explode"), ("RECHECK_SECONDS", "901")],
                Err("RECHECK_SECONDS"),
            ),
        ];
        for (situation, env, want) in rows {
            let map: HashMap<&str, &str> = env.iter().copied().collect();
            let got = Config::for_handler(HandlerKind::Tick, |k| map.get(k).map(|v| v.to_string()));
            match (got, want) {
                (Ok(c), Ok((recheck, queue))) => {
                    assert_eq!(c.interruption.recheck_s, recheck, "{situation}");
                    assert_eq!(c.interruption.queue_url.as_deref(), queue, "{situation}");
                    // The drain-only settings stay at their defaults, whatever was set.
                    let d = InterruptionSettings::default();
                    assert_eq!(c.interruption.eviction_budget_s, d.eviction_budget_s);
                    assert_eq!(c.interruption.actions, d.actions, "{situation}");
                    assert_eq!(c.interruption.surge, d.surge, "{situation}");
                }
                (Err(Error::Config { var, .. }), Err(want_var)) => {
                    assert_eq!(var, want_var, "{situation}")
                }
                (got, want) => panic!("{situation}: got {got:?}, want {want:?}"),
            }
        }
        // The interruption function refuses the same bad ACTIONS at its start-up.
        let bad = |k: &str| (k == "ACTIONS").then(|| "spot=explode".to_string());
        assert!(matches!(
            Config::for_handler(HandlerKind::Interruption, bad),
            Err(Error::Config { var, .. }) if var == "ACTIONS"
        ));
    }

    /// The learned lead times live beside the targets ConfigMap, or where LEAD_TIMES_CONFIGMAP
    /// says; LEARN_LEAD_TIMES=false turns learning off.
    #[test]
    fn lead_times_are_kept_beside_the_targets_unless_told_otherwise() {
        let at = |namespace: &str, name: &str| TargetsConfigMap {
            namespace: namespace.into(),
            name: name.into(),
        };
        type Case<'a> = (&'a [(&'a str, &'a str)], bool, TargetsConfigMap);
        let cases: &[Case] = &[
            (
                &[("PREWARM_TARGETS_CONFIGMAP", "ops/prewarm-targets")],
                true,
                at("ops", "prewarm-lead-times"),
            ),
            (
                &[
                    ("PREWARM_TARGETS", TARGET),
                    ("LEAD_TIMES_CONFIGMAP", "ml/leads"),
                    ("LEARN_LEAD_TIMES", "false"),
                ],
                false,
                at("ml", "leads"),
            ),
        ];
        for (vars, learn, where_) in cases {
            let c = config(vars).unwrap();
            assert_eq!(c.learn_lead_times, *learn, "{vars:?}");
            assert_eq!(&c.lead_times_configmap, where_, "{vars:?}");
        }
    }

    #[test]
    fn targets_come_from_a_configmap_or_the_variable_not_both() {
        let c = config(&[("PREWARM_TARGETS_CONFIGMAP", "prewarm/prewarm-targets")]).unwrap();
        assert_eq!(
            c.targets_configmap,
            Some(TargetsConfigMap {
                namespace: "prewarm".into(),
                name: "prewarm-targets".into()
            })
        );
        assert!(c.targets.is_empty());
        let both = config(&[
            ("PREWARM_TARGETS_CONFIGMAP", "prewarm/prewarm-targets"),
            ("PREWARM_TARGETS", TARGET),
        ]);
        assert_eq!(error_var(both), "PREWARM_TARGETS_CONFIGMAP");
        for bad in [
            "prewarm",
            "/x",
            "prewarm/",
            "Prewarm/targets",
            "a/b/c",
            "-a/b",
        ] {
            assert_eq!(
                error_var(config(&[("PREWARM_TARGETS_CONFIGMAP", bad)])),
                "PREWARM_TARGETS_CONFIGMAP",
                "{bad}"
            );
        }
        // The tick may start with the ConfigMap alone (it reads it at every invocation).
        let ready = config(&[
            ("PREWARM_TARGETS_CONFIGMAP", "prewarm/prewarm-targets"),
            ("METRIC_SOURCE", "prometheus"),
            ("PROMETHEUS_URL", "http://127.0.0.1:19090"),
            ("KUBECONFIG", "/tmp/kubeconfig"),
            ("INTERRUPTION_QUEUE_URL", "http://127.0.0.1:5000/1/q"),
        ])
        .unwrap();
        ready.require_tick_ready().unwrap();
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
