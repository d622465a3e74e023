//! The lead time each target's tick looks ahead by, learned from the cluster (`core::lead`,
//! shaped by `adapters::kube::lead_times`). Per tick:
//!
//! 1. before the targets run, [`start`]: the book is read from its ConfigMap (merged with what
//!    this execution environment learned: under DRY_RUN nothing is written) and the boots of
//!    every NodePool's NodeClaims are learned (one list per pool);
//! 2. each target decides with [`horizon_for`] its horizon, and learns the pulls and loads of
//!    the pods its observation listed anyway ([`pod_samples`]; the kubelet's `Pulled` events
//!    are listed only when a pod has a pull not learned yet), for the next tick;
//! 3. after them, [`finish`]: what was new goes back into the ConfigMap, with the version read
//!    (a 409 leaves it to the next tick, which sees the same objects again).
//!
//! Nothing here fails a tick: a read or write refused (RBAC, a missing CRD) leaves the learned
//! part out and the horizon falls back to LEAD_TIME_SECONDS, saying why.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::TickDeps;
use crate::adapters::kube::lead_times::store::{self, StoredBook};
use crate::adapters::kube::lead_times::{self, Learned};
use crate::core::lead::{self, Horizon, LeadBook, Phase, HORIZON_QUANTILE};
use crate::core::{PolicySpec, TargetSpec};

/// What this execution environment has learned (the ConfigMap's book and its own samples).
pub type Memory = Mutex<LeadBook>;

/// The book as this tick starts, and what kept parts of it from being read.
#[derive(Clone, Debug, Default)]
pub struct LeadStart {
    pub book: LeadBook,
    stored: Option<StoredBook>,
    /// The ConfigMap could not be read (then nothing is written this tick).
    store_problem: Option<String>,
    /// Per NodePool, why its NodeClaims could not be read.
    pool_problems: BTreeMap<String, String>,
}

fn remembered(memory: &Memory) -> LeadBook {
    memory.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Step 1: the stored book, this environment's memory and the NodePools' boots. None when
/// LEARN_LEAD_TIMES is off. Bounded by TARGET_TIMEOUT_SECONDS: what did not answer by then is
/// left out, with the reason.
pub async fn start(
    deps: &TickDeps,
    client: &kube::Client,
    targets: &[TargetSpec],
    now: f64,
) -> Option<LeadStart> {
    if !deps.config.learn_lead_times {
        return None;
    }
    let limit = Duration::from_secs_f64(deps.config.policy.target_timeout_s.max(0.0));
    let at = &deps.config.lead_times_configmap;
    let pools: BTreeSet<&str> = targets.iter().map(|t| t.node_pool.as_str()).collect();
    let boots = futures::future::join_all(
        pools
            .iter()
            .map(|pool| async move { (*pool, store::pool_boots(client, pool).await) }),
    );
    let read = tokio::time::timeout(limit, async {
        futures::join!(store::read_book(client, at), boots)
    })
    .await;
    let mut start = LeadStart {
        book: remembered(&deps.lead_book),
        ..LeadStart::default()
    };
    let Ok((stored, boots)) = read else {
        start.store_problem = Some(format!(
            "the ConfigMap and NodeClaims did not answer within {} s",
            limit.as_secs_f64()
        ));
        return Some(start);
    };
    match stored {
        Ok(stored) => {
            start.book.merge(&stored.book, now);
            start.stored = Some(stored);
        }
        Err(e) => {
            tracing::warn!(error = %e, "learned lead times not read: kept in this environment only");
            start.store_problem = Some(e.to_string());
        }
    }
    for (pool, boots) in boots {
        match boots {
            Ok(boots) => {
                start.book.learn_all(&boots, now);
            }
            Err(e) => {
                tracing::warn!(node_pool = pool, error = %e, "NodeClaims not read: no node boot learned");
                start.pool_problems.insert(pool.to_string(), e.to_string());
            }
        }
    }
    Some(start)
}

/// Step 2: the horizon `target` decides with, or LEAD_TIME_SECONDS with the reason (learning
/// off, too few samples, and what could not be read).
pub fn horizon_for(
    start: Option<&LeadStart>,
    target: &TargetSpec,
    policy: &PolicySpec,
    now: f64,
) -> Horizon {
    let Some(start) = start else {
        return setting(policy, "LEARN_LEAD_TIMES is off: LEAD_TIME_SECONDS".into());
    };
    let mut horizon = book_horizon(&start.book, target, policy, now);
    if let Some(reason) = horizon.fallback.as_mut() {
        if let Some(p) = &start.store_problem {
            reason.push_str(&format!("; the learned lead times not read: {p}"));
        }
        if let Some(p) = start.pool_problems.get(&target.node_pool) {
            reason.push_str(&format!("; NodeClaims not read: {p}"));
        }
        if target.pod_selector.is_none() {
            reason
                .push_str("; the target names no pods (podSelector) to learn pulls and loads from");
        }
    }
    horizon
}

/// LEAD_TIME_SECONDS, and `why` the learned horizon does not stand in for it.
pub fn setting(policy: &PolicySpec, why: String) -> Horizon {
    Horizon {
        seconds: policy.lead_time_s,
        phases: Vec::new(),
        fallback: Some(why),
    }
}

/// The horizon `book` gives `target` at `now` (`core::lead::horizon` at [`HORIZON_QUANTILE`],
/// LEAD_TIME_SECONDS as the fallback, rounded up to METRICS_STEP_SECONDS).
pub fn book_horizon(
    book: &LeadBook,
    target: &TargetSpec,
    policy: &PolicySpec,
    now: f64,
) -> Horizon {
    lead::target_horizon(book, target, policy, HORIZON_QUANTILE, now)
}

/// Step 2, after the observation: the pulls and loads of `pods` not in `book` yet. The
/// kubelet's `Pulled` events are listed (once) only when a pull is new; when they cannot be
/// read the pods' own timestamps measure the pull.
pub async fn pod_samples(
    client: &kube::Client,
    target: &TargetSpec,
    pods: &[Pod],
    book: &LeadBook,
) -> Vec<Learned> {
    let known = |l: &Learned| {
        book.window(l.phase, &l.scope)
            .is_some_and(|w| w.samples.iter().any(|s| s.id == l.sample.id))
    };
    let measured: Vec<Learned> = pods
        .iter()
        .flat_map(|p| lead_times::pod_samples(p, &target.name, None))
        .filter(|l| !known(l))
        .collect();
    let new_pull = measured.iter().any(|l| l.phase == Phase::ImagePull);
    let Some(namespace) = target.pod_namespace.as_deref().filter(|_| new_pull) else {
        return measured;
    };
    let pulls: HashMap<String, f64> = match store::pulled_events(client, namespace).await {
        Ok(events) => lead_times::pulls_by_pod(&events),
        Err(e) => {
            tracing::debug!(target = %target.name, error = %e,
                "Pulled events not read: pulls measured from the pods' timestamps");
            return measured;
        }
    };
    pods.iter()
        .flat_map(|p| {
            let uid = p.metadata.uid.as_deref().unwrap_or_default();
            lead_times::pod_samples(p, &target.name, pulls.get(uid).copied())
        })
        .filter(|l| !known(l))
        .collect()
}

/// Step 3: the book after the tick (`core::lead::book_after_tick`): kept in this environment
/// and, unless `dry_run`, written back when the store lacks anything of it.
pub async fn finish(
    deps: &TickDeps,
    client: &kube::Client,
    start: LeadStart,
    learned: &[Learned],
    now: f64,
    dry_run: bool,
) {
    let stored = start.stored.filter(|_| !dry_run);
    let after = lead::book_after_tick(start.book, learned, stored.as_ref().map(|s| &s.book), now);
    *deps.lead_book.lock().unwrap_or_else(|p| p.into_inner()) = after.keep;
    let (Some(stored), Some(on_object)) = (stored, after.write) else {
        return;
    };
    let at = &deps.config.lead_times_configmap;
    match store::write_book(client, at, &stored, &on_object).await {
        Ok(()) => {}
        Err(e) if e.is_conflict() => {
            tracing::debug!(error = %e, "learned lead times written by another invocation first: the next tick writes")
        }
        Err(e) => {
            tracing::warn!(error = %e,
                "learned lead times not written: kept in this environment only (the chart creates \
                 the ConfigMap and grants get and update on it; without it the tick needs create)")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::lead::LeadSample;

    const NOW: f64 = 1_795_953_600.0; // 2026-11-29T12:00:00Z

    fn target(pods: bool) -> TargetSpec {
        let mut t = serde_json::json!({
            "name": "llama", "nodePool": "gpu", "maxSpare": 8,
            "headroom": {"kind": "balloon", "namespace": "prewarm", "name": "balloon-gpu"}
        });
        if pods {
            t["podNamespace"] = "inference".into();
            t["podSelector"] = "app=llama".into();
        }
        serde_json::from_value(t).unwrap()
    }

    /// Three samples of each phase: boots 30-32 s, pulls 0-2 s, loads 20-22 s.
    fn learned_book() -> LeadBook {
        let mut book = LeadBook::default();
        for (phase, scope, base) in [
            (Phase::NodeBoot, "gpu", 30.0),
            (Phase::ImagePull, "llama", 0.0),
            (Phase::ModelLoad, "llama", 20.0),
        ] {
            for k in 0..3 {
                let sample = LeadSample {
                    id: format!("{scope}-{k}"),
                    at: NOW - 60.0 * f64::from(k),
                    seconds: base + f64::from(k),
                };
                assert!(book.learn(phase, scope, sample, NOW));
            }
        }
        book
    }

    /// The horizon per situation: learning off, learned (32 + 2 + 22 = 56 s, rounded up to the
    /// 15 s step: 60), and the fallbacks with what kept each phase from being learned.
    #[test]
    fn the_horizon_is_learned_or_the_setting_with_the_reason() {
        let policy = PolicySpec::default(); // LEAD_TIME_SECONDS 180, METRICS_STEP_SECONDS 15
        let learned = LeadStart {
            book: learned_book(),
            ..LeadStart::default()
        };
        let refused = LeadStart {
            store_problem: Some("403 Forbidden: configmaps".into()),
            pool_problems: [("gpu".to_string(), "403 Forbidden".to_string())].into(),
            ..LeadStart::default()
        };
        // (name, the tick's start, the target names pods, horizon, reason contains)
        type Case<'a> = (&'a str, Option<&'a LeadStart>, bool, f64, Option<&'a str>);
        let cases: [Case; 4] = [
            ("off", None, true, 180.0, Some("LEARN_LEAD_TIMES is off")),
            ("learned", Some(&learned), true, 60.0, None),
            (
                "NodeClaims refused",
                Some(&refused),
                true,
                180.0,
                Some("not read: 403 Forbidden: configmaps; NodeClaims not read: 403 Forbidden"),
            ),
            (
                "no pods named",
                Some(&refused),
                false,
                180.0,
                Some("names no pods"),
            ),
        ];
        for (name, start, pods, seconds, reason) in cases {
            let h = horizon_for(start, &target(pods), &policy, NOW);
            assert_eq!(h.seconds, seconds, "{name}");
            match reason {
                None => assert_eq!(h.fallback, None, "{name}"),
                Some(r) => assert!(
                    h.fallback.as_deref().is_some_and(|f| f.contains(r)),
                    "{name}: {:?}",
                    h.fallback
                ),
            }
            assert_eq!(h.applied_to(&policy).lead_time_s, seconds, "{name}");
        }
    }

    /// Merging the environment's book into the stored one says whether the store lacks anything.
    #[test]
    fn a_merge_reports_only_what_is_new() {
        let mut stored = LeadBook::default();
        assert!(stored.merge(&learned_book(), NOW));
        assert_eq!(stored, learned_book());
        assert!(!stored.merge(&learned_book(), NOW));
    }
}
