//! The one restore flow, for `prewarm restore`, the stack's delete (the custom resource) and a
//! paused stack: the current targets' steps (`adapters::kube::restore`), then everything still
//! marked across the cluster (`adapters::kube::restore::found`). Changes when what a restore
//! covers changes.

use crate::adapters::kube::restore::{self, RestoreOutcome, Restored};
use crate::adapters::kube::targets;
use crate::config::Config;

/// Who restores, which decides what it may touch. The functions' own restores (the tick's
/// identity) never write nodes: only the interruption function does
/// (infra/helm/prewarm/permissions.yaml); they report the nodes they would give back instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// `prewarm restore`: everything, nodes included (where no live drain holds them).
    Everything,
    /// The stack's delete: everything, nodes reported.
    ReportNodes,
    /// PAUSED: nodes reported, and running drains' placeholders and surges left to them
    /// (`restore::Drains::KeepRunning`).
    KeepDrains,
}

/// What a restore did: every line, and every error (one per step or object that failed).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RestoreSummary {
    pub lines: Vec<Restored>,
    pub errors: Vec<String>,
}

impl RestoreSummary {
    pub fn count(&self, outcome: RestoreOutcome) -> usize {
        self.lines.iter().filter(|r| r.outcome == outcome).count()
    }

    /// One sentence for a log line or a CloudFormation reason: the counts, then the errors.
    pub fn sentence(&self) -> String {
        let mut s = format!(
            "restore: {} restored, {} kept, {} failed",
            self.count(RestoreOutcome::Restored),
            self.count(RestoreOutcome::Kept),
            self.errors.len()
        );
        if !self.errors.is_empty() {
            s.push_str(": ");
            s.push_str(&self.errors.join("; "));
        }
        s
    }
}

/// Restores everything (`dry_run`: says what it would do). A target that does not parse is an
/// error and the others go on.
pub async fn restore_everything(
    client: &kube::Client,
    config: &Config,
    now: f64,
    scope: Scope,
    dry_run: bool,
) -> RestoreSummary {
    let mut summary = RestoreSummary::default();
    let read =
        match targets::current(config.targets_configmap.as_ref(), &config.targets, client).await {
            Ok(read) => read,
            Err(e) => {
                summary.errors.push(format!("targets: {e}"));
                targets::TargetsRead {
                    targets: Vec::new(),
                    refused: Vec::new(),
                }
            }
        };
    for (name, e) in &read.refused {
        summary.errors.push(format!(
            "{name}: not restored, its target does not parse: {e}"
        ));
    }
    let settings = super::interruption::drain_settings(&config.interruption);
    let drains = match scope {
        Scope::KeepDrains => restore::Drains::KeepRunning,
        Scope::Everything | Scope::ReportNodes => restore::Drains::GiveBack,
    };
    let report_nodes = scope != Scope::Everything;
    let mut results = restore::restore_all(client, &read.targets, now, dry_run, drains).await;
    results.extend(
        restore::found::restore_found(client, &settings, now, dry_run, report_nodes, drains).await,
    );
    for result in results {
        match result {
            Ok(lines) => summary.lines.extend(lines),
            Err(e) => summary.errors.push(format!("not restored: {e}")),
        }
    }
    summary
}

/// One log line per restore line and per error (`event = "restore"`, `why`: what started it).
pub fn log_summary(summary: &RestoreSummary, why: &str) {
    for r in &summary.lines {
        tracing::info!(event = "restore", why, target = %r.target, object = %r.object,
            outcome = %r.outcome, detail = %r.detail, "restore");
    }
    for e in &summary.errors {
        tracing::error!(event = "restore", why, error = %e, "not restored");
    }
}
