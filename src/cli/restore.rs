//! `prewarm restore [--dry-run]`: puts back what prewarm changed for every target (frozen
//! disruption budgets, sizes, prewarm.io/ annotations; see adapters::kube::restore), for example
//! before `helm uninstall` and deleting the stack. Configured like the functions: CLUSTER_NAME or
//! KUBECONFIG, and PREWARM_TARGETS or PREWARM_TARGETS_CONFIGMAP. Exits non-zero when anything
//! could not be restored.

use crate::adapters::kube::{self as kube_adapter, restore, targets};
use crate::clock::unix_now;
use crate::config::{Config, HandlerKind};
use crate::error::{Error, Result};

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
    let read =
        targets::current(config.targets_configmap.as_ref(), &config.targets, &client).await?;
    let mut failed = read.refused.len();
    for (name, e) in &read.refused {
        eprintln!("{name}: not restored, its target does not parse: {e}");
    }
    for result in restore::restore_all(&client, &read.targets, unix_now(), args.dry_run).await {
        match result {
            Ok(steps) => {
                for r in steps {
                    println!("{}\t{}\t{}\t{}", r.target, r.object, r.outcome, r.detail);
                }
            }
            Err(e) => {
                failed += 1;
                eprintln!("not restored: {e}");
            }
        }
    }
    if failed > 0 {
        return Err(Error::config(
            "restore",
            format!("{failed} objects could not be restored (see above)"),
        ));
    }
    Ok(())
}
