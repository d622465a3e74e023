//! `prewarm restore [--dry-run]`: puts back what prewarm changed for every target (frozen
//! disruption budgets, sizes, prewarm.io/ annotations; see adapters::kube::restore), then what
//! it finds still marked across the cluster (a removed target's objects, nodes a drain cordoned
//! that no live drain holds; adapters::kube::restore::found), for example before `helm uninstall`
//! and deleting the stack. Configured like the functions: CLUSTER_NAME or KUBECONFIG, and
//! PREWARM_TARGETS or PREWARM_TARGETS_CONFIGMAP. Exits non-zero when anything could not be
//! restored.

use crate::adapters::kube as kube_adapter;
use crate::config::{Config, HandlerKind};
use crate::error::{Error, Result};
use crate::handlers::restore::{restore_everything, Scope};

#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    /// Print what would be restored, write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

pub async fn run(args: RestoreArgs) -> Result<()> {
    // The settings the interruption function reads: the cluster and the targets, no metrics.
    let config = Config::for_handler_from_env(HandlerKind::Interruption)?;
    let client = kube_adapter::client(config.require_cluster()?).await?;
    let now = crate::clock::unix_now();
    let summary = restore_everything(&client, &config, now, Scope::Everything, args.dry_run).await;
    for r in &summary.lines {
        println!("{}\t{}\t{}\t{}", r.target, r.object, r.outcome, r.detail);
    }
    for e in &summary.errors {
        eprintln!("{e}");
    }
    if !summary.errors.is_empty() {
        return Err(Error::config(
            "restore",
            format!(
                "{} objects could not be restored (see above)",
                summary.errors.len()
            ),
        ));
    }
    Ok(())
}
