//! Configuration from environment variables, read and validated once at start-up. Every error
//! names the variable and the allowed range. `Config::from_lookup` takes any lookup function so
//! tests need not touch the process environment.

use crate::core::cloudwatch_periods::publish_interval_problem;
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
    /// CloudWatch GetMetricData in this namespace; each publisher puts a datapoint of each
    /// metric every `publish_s` seconds (CLOUDWATCH_PUBLISH_SECONDS).
    CloudWatch { namespace: String, publish_s: f64 },
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
    pub instance_ids: InstanceIdRule,
    /// DRAIN_SURGE (true): before evicting a Deployment's pods, raise its replicas (or its HPA's
    /// minReplicas) by its pods on the draining node and wait for the surge pods to be Ready
    /// (or the pod's due time / the deadline): no serving gap once the replacement is ready.
    pub surge: bool,
    /// DELETE_PAST_PDB_AT_DEADLINE (false): from the eviction deadline on, delete a pod whose
    /// eviction a PodDisruptionBudget refuses (opt-in; needs the chart's
    /// `interruption.deletePastPdb` for the pods/delete permission).
    pub delete_past_pdb: bool,
    /// BALLOON_PRIORITY_CLASS (prewarm-balloon) and PAUSE_IMAGE (registry.k8s.io/pause:3.10):
    /// the replacement placeholders' PriorityClass and image; the same as the chart's
    /// `balloon.priorityClassName` and `balloon.image`.
    pub placeholder: PlaceholderSettings,
}

impl Default for InterruptionSettings {
    /// The values used when the variables are unset.
    fn default() -> Self {
        InterruptionSettings {
            actions: crate::core::interruption::ActionTable::default(),
            eviction_budget_s: 30.0,
            recheck_s: 15.0,
            queue_url: None,
            instance_ids: InstanceIdRule::Ec2,
            surge: true,
            delete_past_pdb: false,
            placeholder: Default::default(),
        }
    }
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

/// Static inclusive bounds of the interruption settings: `(variable, min, max)`. template.yaml's
/// parameters carry the same (tests/template_bounds.rs).
pub const INTERRUPTION_BOUNDS: [(&str, f64, f64); 2] = [
    // A spot notice gives 120 s.
    ("EVICTION_BUDGET_SECONDS", 0.0, 110.0),
    ("RECHECK_SECONDS", 1.0, 900.0),
];

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
                // The tick's drain-lease collection needs two drain settings: when a silent drain
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

    /// The decision policy, the metric source and DRY_RUN.
    fn read_tick_settings<F: Fn(&str) -> Option<String>>(&mut self, vars: &Vars<F>) -> Result<()> {
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

/// A bounded interruption setting (`INTERRUPTION_BOUNDS`), `default` when unset.
fn bounded_interruption<F: Fn(&str) -> Option<String>>(
    vars: &Vars<F>,
    name: &str,
    default: f64,
) -> Result<f64> {
    let value = vars.f64_or(name, default)?;
    let (_, lo, hi) = INTERRUPTION_BOUNDS
        .iter()
        .find(|(n, _, _)| *n == name)
        .expect("every bounded interruption setting is in INTERRUPTION_BOUNDS");
    if (*lo..=*hi).contains(&value) {
        Ok(value)
    } else {
        Err(Error::config(
            name,
            format!("must be between {lo} and {hi}, got {value}"),
        ))
    }
}

/// RECHECK_SECONDS (15): read by both functions.
fn recheck_s<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<f64> {
    bounded_interruption(vars, "RECHECK_SECONDS", 15.0)
}

/// INTERRUPTION_QUEUE_URL (optional here; the tick requires it in `require_tick_ready`): read by
/// both functions.
fn queue_url<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<Option<String>> {
    match vars.get("INTERRUPTION_QUEUE_URL") {
        Some(u) if !(u.starts_with("https://") || u.starts_with("http://")) => Err(Error::config(
            "INTERRUPTION_QUEUE_URL",
            format!("must be the queue's http(s) URL, got {u:?}"),
        )),
        other => Ok(other),
    }
}

impl InterruptionSettings {
    /// The interruption settings from `lookup` alone, validated as at start-up (`prewarm
    /// explain --cluster-state` plans with them as the handler would).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        interruption_settings(&Vars(lookup))
    }
}

fn interruption_settings<F: Fn(&str) -> Option<String>>(
    vars: &Vars<F>,
) -> Result<InterruptionSettings> {
    Ok(InterruptionSettings {
        actions: crate::core::interruption::ActionTable::parse(
            &vars.get("ACTIONS").unwrap_or_default(),
        )
        .map_err(|message| Error::config("ACTIONS", message))?,
        eviction_budget_s: bounded_interruption(vars, "EVICTION_BUDGET_SECONDS", 30.0)?,
        recheck_s: recheck_s(vars)?,
        queue_url: queue_url(vars)?,
        delete_past_pdb: vars.bool_or("DELETE_PAST_PDB_AT_DEADLINE", false)?,
        instance_ids: if vars.bool_or("ACCEPT_KWOK_INSTANCE_IDS", false)? {
            InstanceIdRule::Ec2OrKwok
        } else {
            InstanceIdRule::Ec2
        },
        surge: vars.bool_or("DRAIN_SURGE", true)?,
        placeholder: placeholder_settings(vars)?,
    })
}

/// BALLOON_PRIORITY_CLASS must be a PriorityClass name (a DNS-1123 subdomain) and PAUSE_IMAGE an
/// image reference without spaces: the apiserver would refuse every placeholder otherwise, and
/// that must show at start-up, not as drains that wait for their deadline.
fn placeholder_settings<F: Fn(&str) -> Option<String>>(
    vars: &Vars<F>,
) -> Result<PlaceholderSettings> {
    let mut settings = PlaceholderSettings::default();
    if let Some(class) = vars.get("BALLOON_PRIORITY_CLASS") {
        if !crate::core::names::is_dns1123_subdomain(&class) {
            return Err(Error::config(
                "BALLOON_PRIORITY_CLASS",
                format!(
                    "must be a PriorityClass name (lowercase DNS-1123 subdomain), got {class:?}"
                ),
            ));
        }
        settings.priority_class = class;
    }
    if let Some(image) = vars.get("PAUSE_IMAGE") {
        if image.is_empty() || image.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(Error::config(
                "PAUSE_IMAGE",
                format!("must be an image reference without spaces, got {image:?}"),
            ));
        }
        settings.image = image;
    }
    Ok(settings)
}

fn require<F: Fn(&str) -> Option<String>>(
    vars: &Vars<F>,
    name: &str,
    because: &str,
) -> Result<String> {
    vars.get(name)
        .ok_or_else(|| Error::config(name, format!("must be set when {because}")))
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

// Settings types the adapters take: defined with the settings, so that config imports no adapter.

/// What the parser accepts as an instance id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InstanceIdRule {
    /// EC2's form only: `i-` and 8 or 17 lowercase hexadecimal digits.
    #[default]
    Ec2,
    /// EC2's form, and also the node names Karpenter's kwok provider puts in `providerID`
    /// (`kwok://kwok-<nodeclaim>-…`): the local stack has no EC2 instances. Set by
    /// `ACCEPT_KWOK_INSTANCE_IDS`, never in a real deployment.
    Ec2OrKwok,
}

/// The chart's `balloon.image` default.
pub const DEFAULT_PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.10";
/// The chart's `balloon.priorityClassName` default.
pub const DEFAULT_BALLOON_PRIORITY_CLASS: &str = "prewarm-balloon";

/// What the placeholders are made of that is the deployment's choice, not the drain's: the same
/// as the chart's balloon (`balloon.priorityClassName`, `balloon.image`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlaceholderSettings {
    /// BALLOON_PRIORITY_CLASS: the placeholder's PriorityClass (negative, so every real pod
    /// preempts it); pods of this class on a draining node are not counted as pods to move.
    pub priority_class: String,
    /// PAUSE_IMAGE: the placeholder's container image.
    pub image: String,
}

impl Default for PlaceholderSettings {
    fn default() -> Self {
        PlaceholderSettings {
            priority_class: DEFAULT_BALLOON_PRIORITY_CLASS.into(),
            image: DEFAULT_PAUSE_IMAGE.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const TARGET: &str = r#"[{"name":"llama","nodePool":"gpu","maxSpare":8,
        "headroom":{"kind":"balloon","namespace":"prewarm","name":"balloon-llama"},
        "selector":"model_name=\"llama\""}]"#;

    const SHARED_FREEZE: &str = r#"[
        {"name":"a","nodePool":"gpu","maxSpare":8,"freezeConsolidation":true,
         "headroom":{"kind":"balloon","namespace":"prewarm","name":"balloon-a"}},
        {"name":"b","nodePool":"gpu","maxSpare":8,
         "headroom":{"kind":"balloon","namespace":"prewarm","name":"balloon-b"}}]"#;

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
        // The chart's balloon defaults (infra/helm/prewarm/values.yaml `balloon`).
        assert_eq!(c.interruption.placeholder.priority_class, "prewarm-balloon");
        assert_eq!(
            c.interruption.placeholder.image,
            "registry.k8s.io/pause:3.10"
        );
    }

    #[test]
    fn placeholder_settings_are_read() {
        let c = config(&[
            ("BALLOON_PRIORITY_CLASS", "team-a.spare"),
            (
                "PAUSE_IMAGE",
                "123456789012.dkr.ecr.us-east-1.amazonaws.com/pause:3.10",
            ),
        ])
        .unwrap();
        assert_eq!(c.interruption.placeholder.priority_class, "team-a.spare");
        assert_eq!(
            c.interruption.placeholder.image,
            "123456789012.dkr.ecr.us-east-1.amazonaws.com/pause:3.10"
        );
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
        assert!(c.policy.band_by_hour);
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
        let pairs = [
            ("PREWARM_TARGETS", SHARED_FREEZE),
            ("METRIC_SOURCE", "prometheus"),
            ("PROMETHEUS_URL", "http://127.0.0.1:19090"),
            ("KUBECONFIG", "/tmp/kubeconfig"),
            ("INTERRUPTION_QUEUE_URL", "http://127.0.0.1:5000/1/q"),
        ];
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
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let drains = Config::for_handler(HandlerKind::Interruption, |k| map.get(k).cloned());
        assert_eq!(drains.unwrap().targets.len(), 2);
    }

    /// A target's own delay price is weighed against GPU_HOUR_COST: without it the tick refuses
    /// to start, naming GPU_HOUR_COST; with it the tick starts.
    #[test]
    fn a_targets_delay_price_needs_gpu_hour_cost_at_start_up() {
        let priced = r#"[{"name":"llama","nodePool":"gpu","maxSpare":8,"delayedRequestCost":0.02,
            "headroom":{"kind":"balloon","namespace":"prewarm","name":"balloon-llama"}}]"#;
        let mut pairs = vec![
            ("PREWARM_TARGETS", priced),
            ("METRIC_SOURCE", "prometheus"),
            ("PROMETHEUS_URL", "http://127.0.0.1:19090"),
            ("KUBECONFIG", "/tmp/kubeconfig"),
            ("INTERRUPTION_QUEUE_URL", "http://127.0.0.1:5000/1/q"),
        ];
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
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let c = Config::for_handler(HandlerKind::Interruption, |k| map.get(k).cloned()).unwrap();
        assert_eq!(c.metric_source, None);
        assert_eq!(c.interruption.recheck_s, 20.0);
        assert_eq!(c.targets.len(), 1);
        c.require_cluster().unwrap();
        // The same environment stops the tick at Init, naming the first bad variable.
        match Config::for_handler(HandlerKind::Tick, |k| map.get(k).cloned()) {
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
    fn the_tick_needs_the_interruption_queue_to_hand_drains_over() {
        let base = [
            ("PREWARM_TARGETS", TARGET),
            ("METRIC_SOURCE", "prometheus"),
            ("PROMETHEUS_URL", "http://127.0.0.1:19090"),
            ("KUBECONFIG", "/tmp/kubeconfig"),
        ];
        match config(&base).unwrap().require_tick_ready() {
            Err(Error::Config { var, .. }) => assert_eq!(var, "INTERRUPTION_QUEUE_URL"),
            other => panic!("{other:?}"),
        }
        let mut bad = base.to_vec();
        bad.push(("INTERRUPTION_QUEUE_URL", "prewarm-interruptions"));
        assert_eq!(error_var(config(&bad)), "INTERRUPTION_QUEUE_URL");
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
