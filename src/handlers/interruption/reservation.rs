//! A Capacity Block warning names its capacity reservation, not instances. Its first delivery
//! (and each fan-out resume) finds the instances — the nodes Karpenter labelled with the
//! reservation — and fans out one continuation per instance, exactly as a notice naming those
//! instances would; from then on each instance's continuation names it, so its drain no longer
//! depends on the node still being listed (a node gone is the step's business, as for any kind).

use super::queue::{self, Continuation, RecordOutcome};
use super::Interruption;
use crate::adapters::events::ParsedRecord;
use crate::adapters::kube::drain::reservation::{reservation_instances, reservation_selector};
use crate::core::interruption::{Action, Notice};
use crate::telemetry::{EmfRecord, Unit};

impl Interruption {
    /// The outcome of a Capacity Block warning's delivery that names no instance yet.
    pub(super) async fn fan_out_reservation(
        &self,
        record: &ParsedRecord,
        notice: &Notice,
        reservation: &str,
        came_with: &Continuation,
    ) -> RecordOutcome {
        if *came_with == Continuation::default() && record.receive_count <= 1 {
            EmfRecord::new()
                .dimension("Kind", notice.kind.as_str())
                .metric("NoticesReceived", 1.0, Unit::Count)
                .emit(&self.emf_namespace);
        }
        if self.settings.actions.for_kind(notice.kind) == Action::Ignore {
            return RecordOutcome::Delete {
                reason: format!("capacity reservation {reservation}: ACTIONS says ignore"),
            };
        }
        let (client, _) = match self.cluster().await {
            Ok(c) => c,
            Err(later) => return later,
        };
        let instances = match reservation_instances(&client, reservation).await {
            Ok(ids) => ids,
            Err(e) => {
                tracing::warn!(event_id = %notice.event_id, reservation, error = %e,
                    "capacity block: nodes of the reservation not listed");
                return RecordOutcome::Failed {
                    retryable: e.retryable(),
                    reason: format!("capacity reservation {reservation}: {e}"),
                };
            }
        };
        if instances.is_empty() {
            let reason = format!(
                "capacity reservation {reservation}: no node of this cluster matches {}, nothing to drain",
                reservation_selector(reservation)
            );
            tracing::info!(event = "interruption", event_id = %notice.event_id,
                kind = notice.kind.as_str(), reservation, reason = %reason, "nothing to drain");
            return RecordOutcome::Delete { reason };
        }
        tracing::info!(event_id = %notice.event_id, kind = notice.kind.as_str(), reservation,
            instances = ?instances, "capacity block: draining the reservation's nodes");
        queue::fan_out_step(&instances, came_with)
    }
}
