//! One step of one drain, the only way a drain moves: find the node of the instance (by
//! `spec.providerID`; an instance not here costs nothing more, not even the targets' read),
//! observe it and its pods, plan (`core::interruption`), add the surge's commands (the
//! workloads observed, the core deciding), execute (`adapters::kube::drain::execute`). A node write
//! that conflicts (the kubelet, the node controller or another delivery wrote the node since it
//! was read) is observed and planned again, up to `PLAN_ATTEMPTS` times. Notices and the tick's
//! resume-drain messages both come through here; they differ only in how they plan.

use super::targets::DrainTargets;
use crate::adapters::kube::conflict::retry_on_conflict;
use crate::adapters::kube::drain::execute::{execute, StepContext, StepReport};
use crate::adapters::kube::drain::find::NodeFinder;
use crate::adapters::kube::drain::replacement::DrainContext;
use crate::adapters::kube::drain::surge;
use crate::adapters::kube::drain::{observe, replacement, Observation};
use crate::adapters::kube::shape::placeholder::PlaceholderSettings;
use crate::core::interruption::surge_step::SurgePlan;
use crate::core::interruption::DrainStep;
use crate::error::{Error, Result};
use kube::runtime::events::Recorder;

/// Node writes that conflict are re-observed and re-planned this often within one step.
pub const PLAN_ATTEMPTS: usize = 3;

/// A planned step and the event id it acts for (Event notes and logs name it).
pub struct Planned {
    pub step: DrainStep,
    pub event_id: String,
}

/// What one step came to. (One per record and step: its size does not matter.)
#[allow(clippy::large_enum_variant)]
pub enum Stepped {
    /// No node has this instance (foreign, or ours and already gone): nothing to drain. Any
    /// replacement a drain of this instance reserved was handed back (targets that released)
    /// when the message carries a drain (`release_if_gone`).
    NodeGone { released: Vec<String> },
    Done {
        observed: Observation,
        planned: Planned,
        report: StepReport,
        /// What the surge planned, with what its writes did (None: `DRAIN_SURGE` off).
        surge: Option<SurgePlan>,
        /// The clock the step was planned at.
        now: f64,
    },
}

/// Steps the drain of `instance` once. `plan` decides from the observation and the clock; it is
/// called again after a conflict, with what is then observed. With `surge` on, the step gets its
/// surges (`drain::surge::gate`) before it is executed, whoever planned it.
/// The node is found through the container's index (`nodes`; `sent`: when the record was sent,
/// which tells whether the index's last list can answer for it). An instance with no node gives
/// back what a drain of it holds only when `release_if_gone`: the message carries a drain (a
/// continuation, a retry, the tick's resume). A notice's first delivery has claimed nothing, and
/// most name instances of other clusters: they cost no call beyond the index's.
#[allow(clippy::too_many_arguments)]
pub async fn step(
    client: &kube::Client,
    recorder: &Recorder,
    targets: &DrainTargets<'_>,
    nodes: &NodeFinder,
    instance: &str,
    sent: f64,
    release_if_gone: bool,
    surge: bool,
    placeholder: &PlaceholderSettings,
    plan: impl Fn(&Observation, f64) -> Planned,
    clock: impl Fn() -> f64,
) -> Result<Stepped> {
    let plan = &plan;
    let clock = &clock;
    retry_on_conflict(PLAN_ATTEMPTS, |_| async move {
        let Some(node) = nodes.find(client, instance, sent, clock).await? else {
            if !release_if_gone {
                return Ok(Stepped::NodeGone { released: vec![] });
            }
            // The drain is over with its node (Karpenter's own interruption handling, or the
            // instance went): its surges end with it, as its placeholder does. A failed release
            // is left to the tick's collection (orphaned surges, placeholders of gone nodes).
            let targets = targets.get().await?;
            let mut results: Vec<Result<String>> = Vec::new();
            if surge {
                results.extend(
                    surge::release(client, targets, instance, clock())
                        .await
                        .into_iter()
                        .map(|r| r.map(|t| format!("surge {t}"))),
                );
            }
            results.extend(replacement::release(client, targets, None, instance).await);
            let mut released = Vec::new();
            for r in results {
                match r {
                    Ok(t) => released.push(t),
                    Err(e) => tracing::warn!(instance, error = %e,
                        "node gone: release failed; the tick's collection gives it back"),
                }
            }
            return Ok(Stepped::NodeGone { released });
        };
        let targets = targets.get().await?;
        let mut observed = observe(client, node).await?;
        // Planning tells a placeholder not made yet from one that cannot be made.
        observed.view.replacement =
            replacement::seen_with_home(observed.view.replacement, targets, &observed.node);
        let now = clock();
        let mut planned = plan(&observed, now);
        let mut surged = if surge {
            Some(
                Box::pin(surge::gate(
                    client,
                    targets,
                    &observed,
                    &mut planned.step,
                    instance,
                    now,
                ))
                .await,
            )
        } else {
            None
        };
        // The drain's end gives its surges back, whether or not DRAIN_SURGE is on now.
        let release_errors = Box::pin(surge::plan_release(
            client,
            targets,
            &mut planned.step,
            instance,
        ))
        .await;
        let context = StepContext {
            client,
            recorder,
            drain: DrainContext {
                drain_id: instance,
                now,
                event_id: &planned.event_id,
                targets,
                placeholder,
            },
        };
        // Boxed, as the surge gate is: the executor's future is large (every write of a step),
        // and kept inline it overflowed a 2 MiB thread stack in debug builds.
        let mut report = Box::pin(execute(&context, &observed, &planned.step)).await?;
        report.release_errors.extend(release_errors);
        if let Some(plan) = surged.as_mut() {
            plan.workloads.extend(report.surged.iter().cloned());
            plan.errors.extend(report.surge_errors.iter().cloned());
        }
        if report.conflict {
            return Err(Error::conflict(
                "patch",
                format!("node of {instance}"),
                format!("the node changed since it was observed (within {PLAN_ATTEMPTS} attempts)"),
            ));
        }
        Ok(Stepped::Done {
            observed,
            planned,
            report,
            surge: surged,
            now,
        })
    })
    .await
}
