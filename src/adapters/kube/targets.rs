//! The targets of one invocation: PREWARM_TARGETS (read once at start-up) or the targets
//! ConfigMap (PREWARM_TARGETS_CONFIGMAP, re-read at every invocation so operators change targets
//! without redeploying the stack, with no Lambda variable size limit and no SAM quoting).
//!
//! A ConfigMap that is missing, unreadable or not a JSON list stops the tick of every target
//! (there is no target list to act on); one target the binary refuses stops only that target's
//! tick. Either way the error is logged and counted; what the interruption path makes of it is
//! `handlers::interruption::targets`'s.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;

use super::api_error::from_kube;
use crate::config::{TargetsConfigMap, TARGETS_KEY};
use crate::core::spec::shared_pool_conflicts;
use crate::core::TargetSpec;
use crate::error::{Error, Result};

/// The targets that can run, and those refused (by name, with the reason).
#[derive(Debug, Default)]
pub struct TargetsRead {
    pub targets: Vec<TargetSpec>,
    pub refused: Vec<(String, Error)>,
}

/// Where the targets come from, as errors name it.
pub fn source_name(configmap: &TargetsConfigMap) -> String {
    format!(
        "ConfigMap {}/{} key {TARGETS_KEY}",
        configmap.namespace, configmap.name
    )
}

/// The targets for this invocation: read from `configmap` when there is one, else `fixed`
/// (PREWARM_TARGETS).
pub async fn current(
    configmap: Option<&TargetsConfigMap>,
    fixed: &[TargetSpec],
    client: &kube::Client,
) -> Result<TargetsRead> {
    let Some(cm) = configmap else {
        return Ok(TargetsRead {
            targets: fixed.to_vec(),
            refused: Vec::new(),
        });
    };
    let source = source_name(cm);
    let found = Api::<ConfigMap>::namespaced(client.clone(), &cm.namespace)
        .get(&cm.name)
        .await
        .map_err(|e| {
            from_kube(
                "get",
                "ConfigMap",
                &format!("{}/{}", cm.namespace, cm.name),
                e,
            )
        })?;
    let raw = found
        .data
        .and_then(|mut d| d.remove(TARGETS_KEY))
        .ok_or_else(|| Error::config(&source, "is missing"))?;
    parse_each(&source, &raw)
}

/// Parses the JSON list target by target, with the checks PREWARM_TARGETS gets
/// (`config::parse_targets`): unknown fields, `TargetSpec::validate`, names given twice.
pub fn parse_each(source: &str, raw: &str) -> Result<TargetsRead> {
    let items: Vec<serde_json::Value> = serde_json::from_str(raw)
        .map_err(|e| Error::config(source, format!("invalid JSON target list: {e}")))?;
    let mut read = TargetsRead::default();
    let mut seen = BTreeSet::new();
    for item in items {
        let name = item
            .get("name")
            .and_then(|n| n.as_str())
            .unwrap_or("(no name)")
            .to_string();
        let refused = match serde_json::from_value::<TargetSpec>(item) {
            Err(e) => Some(Error::config(source, format!("target {name:?}: {e}"))),
            Ok(t) => match t.validate() {
                Err((field, message)) => Some(Error::config(format!("{source}: {field}"), message)),
                Ok(()) if !seen.insert(t.name.clone()) => Some(Error::config(
                    source,
                    format!("target name {name:?} appears twice"),
                )),
                Ok(()) => {
                    read.targets.push(t);
                    None
                }
            },
        };
        if let Some(e) = refused {
            read.refused.push((name, e));
        }
    }
    Ok(read)
}

/// The targets, with every problem logged and counted: what the handlers use. `None` when the
/// list itself could not be read.
pub async fn current_or_report(
    configmap: Option<&TargetsConfigMap>,
    fixed: &[TargetSpec],
    client: &kube::Client,
    emf_namespace: &str,
) -> Option<Vec<TargetSpec>> {
    match current(configmap, fixed, client).await {
        Ok(read) => {
            for (name, e) in &read.refused {
                report_refused(emf_namespace, name, e);
            }
            Some(read.targets)
        }
        Err(e) => {
            report_refused(emf_namespace, "targets", &e);
            None
        }
    }
}

/// The targets the tick may run: every target of a NodePool whose targets could fight over it
/// (`core::spec::shared_pool`) is refused, logged and counted with the reason, and that pool is
/// left alone; the others run. The tick re-reads a targets ConfigMap at every invocation, so
/// this is its start-up check for a list that can change while it runs.
pub fn without_pool_conflicts(targets: Vec<TargetSpec>, emf_namespace: &str) -> Vec<TargetSpec> {
    let mut targets = targets;
    for c in shared_pool_conflicts(&targets) {
        let (on_pool, others): (Vec<_>, Vec<_>) =
            targets.into_iter().partition(|t| t.node_pool == c.pool);
        targets = others;
        for t in on_pool {
            let e = Error::config("PREWARM_TARGETS", format!("{}: {}", c.setting, c.message));
            report_refused(emf_namespace, &t.name, &e);
        }
    }
    targets
}

/// The targets whose settings the policy can honour: one whose `delayedRequestCost` has no
/// GPU_HOUR_COST to be weighed against is refused, logged and counted with the reason (the
/// start-up check for PREWARM_TARGETS, again for a targets ConfigMap that can change).
pub fn without_policy_gaps(
    targets: Vec<TargetSpec>,
    policy: &crate::core::PolicySpec,
    emf_namespace: &str,
) -> Vec<TargetSpec> {
    targets
        .into_iter()
        .filter(|t| match t.validate_with(policy) {
            Ok(()) => true,
            Err((var, message)) => {
                report_refused(emf_namespace, &t.name, &Error::config(var, message));
                false
            }
        })
        .collect()
}

/// Logs and counts (EMF Errors, also without dimensions) one target that cannot run, or the whole
/// list (`target` = the source) when it could not be read.
pub fn report_refused(emf_namespace: &str, target: &str, error: &Error) {
    tracing::error!(target_name = %target, error = %error, error_kind = error.kind(),
        "targets: this target does not run until its configuration is fixed");
    crate::telemetry::emit_error(emf_namespace, ("Target", target));
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "ConfigMap prewarm/prewarm-targets key targets.json";

    fn target(name: &str, extra: &str) -> String {
        format!(
            r#"{{"name":"{name}","nodePool":"gpu","maxSpare":4{extra},
            "headroom":{{"kind":"balloon","namespace":"prewarm","name":"balloon-{name}"}}}}"#
        )
    }

    fn var(e: &Error) -> String {
        match e {
            Error::Config { var, .. } => var.clone(),
            other => panic!("expected a configuration error, got {other:?}"),
        }
    }

    #[test]
    fn each_target_is_refused_alone() {
        /// (list, targets that run, (refused name, variable the error names))
        type Case<'a> = (String, Vec<&'a str>, Vec<(&'a str, String)>);
        let cases: Vec<Case> = vec![
            (format!("[{}]", target("a", "")), vec!["a"], vec![]),
            (
                format!("[{},{}]", target("a", ""), target("b", r#","minSpare":9"#)),
                vec!["a"],
                vec![("b", format!("{SOURCE}: PREWARM_TARGETS[b].minSpare"))],
            ),
            (
                format!("[{},{}]", target("a", r#","maxSpares":1"#), target("b", "")),
                vec!["b"],
                vec![("a", SOURCE.to_string())],
            ),
            (
                format!("[{},{}]", target("a", ""), target("a", "")),
                vec!["a"],
                vec![("a", SOURCE.to_string())],
            ),
            ("[]".to_string(), vec![], vec![]),
        ];
        for (raw, runs, refused) in cases {
            let read = parse_each(SOURCE, &raw).unwrap();
            let names: Vec<&str> = read.targets.iter().map(|t| t.name.as_str()).collect();
            assert_eq!(names, runs, "{raw}");
            let got: Vec<(&str, String)> = read
                .refused
                .iter()
                .map(|(n, e)| (n.as_str(), var(e)))
                .collect();
            assert_eq!(got, refused, "{raw}");
        }
    }

    #[test]
    fn targets_that_could_fight_over_a_node_pool_do_not_run() {
        // a and c share NodePool gpu and a freezes it: both refused; b (pool cpu) runs.
        let raw = format!(
            "[{},{},{}]",
            target("a", r#","freezeConsolidation":true"#),
            target("b", "").replace(r#""nodePool":"gpu""#, r#""nodePool":"cpu""#),
            target("c", "")
        );
        let read = parse_each(SOURCE, &raw).unwrap();
        assert_eq!(read.targets.len(), 3);
        let runs: Vec<String> = without_pool_conflicts(read.targets, "Prewarm-test")
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert_eq!(runs, ["b"]);
    }

    #[test]
    fn a_delay_price_without_gpu_hour_cost_does_not_run() {
        let raw = format!(
            "[{},{}]",
            target("priced", r#","delayedRequestCost":0.05"#),
            target("plain", "")
        );
        let read = parse_each(SOURCE, &raw).unwrap();
        let names = |policy: &crate::core::PolicySpec| -> Vec<String> {
            without_policy_gaps(read.targets.clone(), policy, "Prewarm-test")
                .into_iter()
                .map(|t| t.name)
                .collect()
        };
        assert_eq!(names(&crate::core::PolicySpec::default()), ["plain"]);
        let priced = crate::core::PolicySpec {
            gpu_hour_cost: Some(4.0),
            ..crate::core::PolicySpec::default()
        };
        assert_eq!(names(&priced), ["priced", "plain"]);
    }

    #[test]
    fn a_list_that_is_not_json_stops_every_target() {
        for raw in ["{not json", r#"{"name":"a"}"#, ""] {
            assert_eq!(var(&parse_each(SOURCE, raw).unwrap_err()), SOURCE, "{raw}");
        }
    }

    #[test]
    fn the_same_target_parses_as_from_the_variable() {
        let raw = format!("[{}]", target("a", r#","gpusPerReplica":2"#));
        let from_env = crate::config::parse_targets(&raw).unwrap();
        assert_eq!(parse_each(SOURCE, &raw).unwrap().targets, from_env);
    }
}
