//! Surge: a replacement replica Ready before the old one is evicted. An evicted inference pod
//! stops serving at once and its successor only then starts loading the model, so even a warm
//! replacement node leaves a serving gap of one model load per evicted replica. For the drain's
//! duration the workload of each evictable pod (a Deployment, through its ReplicaSet) is raised
//! by `k`, the number of its pods on the draining node; the old pods are evicted once the `k`
//! surge pods are Ready — or at a pod's own due time or the deadline, whichever is first: the
//! deadline always wins. When the drain finishes (or un-drains, or is found orphaned by the
//! tick) the workload gets the user's value back.
//!
//! What is raised: the `minReplicas` of the autoscaling/v2 HPA that targets the Deployment
//! (floor = replicas at the first surge + the sum of the drains' `k`, never above
//! `maxReplicas`), else the Deployment's `spec.replicas`. The record of who holds a surge lives
//! in annotations on the object that was raised, so several drains (nodes reclaimed together)
//! can hold surges of the same workload and each gives back only its own:
//!
//! - `prewarm.io/surge-drains`: `{"<drain id>": k, ...}` (the drain id is the instance id);
//! - `prewarm.io/surge-base`: the workload's replicas when the first drain surged;
//! - Deployment only: `prewarm.io/surge-user-replicas` (the user's `spec.replicas`, restored
//!   exactly) and `prewarm.io/surge-written-replicas` (what prewarm wrote: a different value
//!   means the user edited it meanwhile, and the edit is kept). For an HPA the same two roles
//!   are played by the HPA floor lease's annotations (`adapters::kube::hpa::floor`). Both follow
//!   the one lease protocol, `crate::lease`.
//!
//! Everything here is pure: the adapter (`adapters::kube::drain::surge`) reads the objects,
//! asks these functions and writes what they say.

use std::collections::{BTreeMap, BTreeSet};

use super::model::{no_deadline_wait_end, Command, DrainStep, PodRef, PodView};
use super::pods::pod_due;
use super::state::DrainState;
use crate::lease::{lease_step, Held, LeaseOutcome, Want};

pub const SURGE_DRAINS: &str = "prewarm.io/surge-drains";
pub const SURGE_BASE: &str = "prewarm.io/surge-base";
pub const SURGE_USER_REPLICAS: &str = "prewarm.io/surge-user-replicas";
pub const SURGE_WRITTEN_REPLICAS: &str = "prewarm.io/surge-written-replicas";

/// Who holds a surge of one workload, read from the raised object's annotations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SurgeRecord {
    /// The workload's replicas when the first drain surged.
    pub base: u32,
    /// Drain id -> the number of the workload's pods that drain moves.
    pub drains: BTreeMap<String, u32>,
}

impl SurgeRecord {
    /// None when the object carries no surge; Err (naming the annotation) when it is unreadable.
    pub fn from_annotations(a: &BTreeMap<String, String>) -> Result<Option<SurgeRecord>, String> {
        let Some(raw) = a.get(SURGE_DRAINS) else {
            return Ok(None);
        };
        let drains: BTreeMap<String, u32> = serde_json::from_str(raw)
            .map_err(|e| format!("annotation {SURGE_DRAINS}: expected {{drain: count}}: {e}"))?;
        let base = a
            .get(SURGE_BASE)
            .ok_or_else(|| format!("annotation {SURGE_BASE} missing next to {SURGE_DRAINS}"))?;
        let base = base
            .trim()
            .parse::<u32>()
            .map_err(|_| format!("annotation {SURGE_BASE}: expected a count, got {base:?}"))?;
        Ok(Some(SurgeRecord { base, drains }))
    }

    /// The replicas the workload should have while the surge lasts: base plus every drain's
    /// `k`, never above `max` (an HPA's maxReplicas).
    pub fn want(&self, max: Option<u32>) -> u32 {
        let want = self.base.saturating_add(self.drains.values().sum());
        max.map_or(want, |m| want.min(m.max(self.base)))
    }

    fn annotations(&self) -> BTreeMap<String, Option<String>> {
        [
            (
                SURGE_DRAINS.to_string(),
                Some(serde_json::to_string(&self.drains).unwrap_or_default()),
            ),
            (SURGE_BASE.to_string(), Some(self.base.to_string())),
        ]
        .into()
    }
}

/// What a drain asks of one workload's surge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SurgeIntent {
    /// Hold a surge of `k` for `drain` (a drain already holding keeps the `k` it recorded: its
    /// pods leave the node as it goes, but the surge lasts for the drain's duration).
    Hold { drain: String, k: u32 },
    /// `drain` is over: give its share back.
    Release { drain: String },
}

/// The count to write and the record to keep, before it is mapped onto the object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SurgeDecision {
    /// Write `want` and this record.
    Set { want: u32, record: SurgeRecord },
    /// Nothing holds a surge any more: the user's value back, the record removed.
    Restore,
    /// Nothing to change.
    Unchanged,
}

/// Decides a workload's surge. `replicas` is the workload's replicas now (the base of a first
/// surge); `max` the HPA's maxReplicas, if an HPA is raised.
pub fn plan_surge(
    record: Option<&SurgeRecord>,
    replicas: u32,
    max: Option<u32>,
    intent: &SurgeIntent,
) -> SurgeDecision {
    match (record, intent) {
        (None, SurgeIntent::Hold { k: 0, .. }) => SurgeDecision::Unchanged,
        (None, SurgeIntent::Hold { drain, k }) => {
            let record = SurgeRecord {
                base: replicas,
                drains: [(drain.clone(), *k)].into(),
            };
            SurgeDecision::Set {
                want: record.want(max),
                record,
            }
        }
        (Some(r), SurgeIntent::Hold { drain, .. }) if r.drains.contains_key(drain) => {
            SurgeDecision::Unchanged
        }
        (Some(r), SurgeIntent::Hold { drain, k }) => {
            let mut record = r.clone();
            record.drains.insert(drain.clone(), *k);
            SurgeDecision::Set {
                want: record.want(max),
                record,
            }
        }
        (None, SurgeIntent::Release { .. }) => SurgeDecision::Unchanged,
        (Some(r), SurgeIntent::Release { drain }) if !r.drains.contains_key(drain) => {
            if r.drains.is_empty() {
                SurgeDecision::Restore
            } else {
                SurgeDecision::Unchanged
            }
        }
        (Some(r), SurgeIntent::Release { drain }) => {
            let mut record = r.clone();
            record.drains.remove(drain);
            if record.drains.is_empty() {
                SurgeDecision::Restore
            } else {
                SurgeDecision::Set {
                    want: record.want(max),
                    record,
                }
            }
        }
    }
}

/// A change to a Deployment: `spec.replicas` (None = leave) and annotations (None = remove).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicasPatch {
    pub replicas: Option<u32>,
    pub annotations: BTreeMap<String, Option<String>>,
    /// For the log: raised, restored, user_edit_kept, unchanged.
    pub outcome: LeaseOutcome,
}

fn remove_deployment_record() -> BTreeMap<String, Option<String>> {
    [
        SURGE_DRAINS,
        SURGE_BASE,
        SURGE_USER_REPLICAS,
        SURGE_WRITTEN_REPLICAS,
    ]
    .into_iter()
    .map(|k| (k.to_string(), None))
    .collect()
}

/// Maps a decision onto a Deployment whose `spec.replicas` is `replicas` and whose annotations
/// are `a`: the user's value is saved at the first raise and restored exactly; a value that is
/// no longer what prewarm wrote is the user's edit, kept (the record is dropped).
pub fn plan_deployment_surge(
    replicas: u32,
    a: &BTreeMap<String, String>,
    intent: &SurgeIntent,
) -> Result<ReplicasPatch, String> {
    let number = |key: &str| -> Result<Option<u32>, String> {
        a.get(key)
            .map(|raw| {
                raw.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("annotation {key}: expected a count, got {raw:?}"))
            })
            .transpose()
    };
    let record = SurgeRecord::from_annotations(a)?;
    let user = number(SURGE_USER_REPLICAS)?;
    let written = number(SURGE_WRITTEN_REPLICAS)?;
    let held = match (&record, user, written) {
        (Some(_), Some(user), Some(written)) => Some(Held { user, written }),
        // A record cut short by hand (no user's value): a count that is no longer prewarm's is
        // still the user's edit, kept; one that is prewarm's counts as no record at all.
        (Some(_), None, Some(written)) if replicas != written => Some(Held {
            user: replicas,
            written,
        }),
        _ => None,
    };
    let record = record.filter(|_| held.is_some());
    let stray = record.is_none() && a.keys().any(|k| remove_deployment_record().contains_key(k));
    let decision = plan_surge(record.as_ref(), replicas, None, intent);
    let want = match &decision {
        SurgeDecision::Set { want, .. } => Want::Value(*want),
        SurgeDecision::Restore => Want::GiveBack,
        SurgeDecision::Unchanged => Want::Keep,
    };
    let step = lease_step(held.as_ref(), &replicas, want);
    Ok(match (step.outcome, decision) {
        (LeaseOutcome::UserEditKept | LeaseOutcome::Restored, _) => ReplicasPatch {
            replicas: step.write,
            annotations: remove_deployment_record(),
            outcome: step.outcome,
        },
        // A new record (a drain joined or left) is written even when the count stays: the
        // Deployment's lease has no expiry to renew, so that is a raise too.
        (_, SurgeDecision::Set { want, record }) => {
            let mut annotations = record.annotations();
            let user = step.held.map_or(replicas, |h| h.user);
            annotations.insert(SURGE_USER_REPLICAS.into(), Some(user.to_string()));
            annotations.insert(SURGE_WRITTEN_REPLICAS.into(), Some(want.to_string()));
            ReplicasPatch {
                replicas: step.write,
                annotations,
                outcome: LeaseOutcome::Raised,
            }
        }
        // Nothing to change (a held surge has no expiry to renew); strays are cleaned up.
        _ => ReplicasPatch {
            replicas: None,
            annotations: if stray {
                remove_deployment_record()
            } else {
                BTreeMap::new()
            },
            outcome: LeaseOutcome::Unchanged,
        },
    })
}

/// Whether a surge has started: only once the drain's replacement capacity is ready (the surge
/// pods then land on warm capacity), and never past the deadline (the old pods go then anyway,
/// and extra replicas would only queue behind them). A notice without a deadline (rebalance)
/// stops waiting for surges when it stops waiting for anything (`NO_DEADLINE_MAX_WAIT_S`), so a
/// surge that never turns Ready cannot hold its drain forever.
pub fn wants_surge(state: &DrainState, now: f64) -> bool {
    let until = state.deadline.unwrap_or(no_deadline_wait_end(state));
    state.replacement_ready_at.is_some() && now < until
}

/// Whether a workload's surge pods are Ready: its ready replicas reach what the surge asked for
/// (the old pods, still serving on the draining node, are counted in both).
pub fn surge_ready(want: u32, ready_replicas: u32) -> bool {
    ready_replicas >= want
}

/// Takes out of `step` the evictions of pods whose workload's surge is not Ready yet (`held`),
/// unless the pod is due (its own due time or the deadline: the deadline always wins). The
/// step's next check stays as planned: it already wakes at the deadline and at every pod's due
/// time. Returns the pods held back.
pub fn hold_evictions(
    step: &mut DrainStep,
    pods: &[PodView],
    held: &BTreeSet<PodRef>,
    now: f64,
) -> Vec<PodRef> {
    let Some(state) = step.state.as_ref() else {
        return Vec::new();
    };
    let (deadline, end) = (state.deadline, state.instance_end);
    let due = |r: &PodRef| {
        pods.iter()
            .find(|p| &p.pod == r)
            .is_none_or(|p| pod_due(p, deadline, end, now))
    };
    let mut kept_back = Vec::new();
    step.commands.retain(|c| match c {
        Command::Evict { pod, .. } if held.contains(pod) && !due(pod) => {
            kept_back.push(pod.clone());
            false
        }
        _ => true,
    });
    kept_back
}

#[cfg(test)]
#[path = "surge_tests.rs"]
mod tests;
