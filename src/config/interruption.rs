//! The interruption function's settings: the drain's actions, its bounded timings, the queue,
//! surge and the placeholders' make; the tick reads RECHECK_SECONDS and INTERRUPTION_QUEUE_URL
//! too, for its handover of drains nobody drives.

use super::Vars;
use crate::error::{Error, Result};

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

/// Static inclusive bounds of the interruption settings: `(variable, min, max)`. template.yaml's
/// parameters carry the same (tests/template_bounds.rs).
pub const INTERRUPTION_BOUNDS: [(&str, f64, f64); 2] = [
    // A spot notice gives 120 s.
    ("EVICTION_BUDGET_SECONDS", 0.0, 110.0),
    ("RECHECK_SECONDS", 1.0, 900.0),
];

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
pub(super) fn recheck_s<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<f64> {
    bounded_interruption(vars, "RECHECK_SECONDS", 15.0)
}

/// INTERRUPTION_QUEUE_URL (optional here; the tick requires it in `require_tick_ready`): read by
/// both functions.
pub(super) fn queue_url<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<Option<String>> {
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

pub(super) fn interruption_settings<F: Fn(&str) -> Option<String>>(
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
    use crate::config::tests::config;

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
}
