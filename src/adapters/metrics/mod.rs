//! Metric sources: Prometheus, Amazon Managed Prometheus (SigV4), CloudWatch.
//!
//! Each source answers one question per target and tick: the recent history (the window the
//! tick's read plan names, `core::policy::observe::plan`, on its step grid, oldest first) of
//! arrival rate, service time, waiting and running requests. History is fetched every tick so the Lambda keeps no state between
//! invocations. Failures are `Error::Metrics` naming the target: transport problems are
//! retryable, malformed answers are not. A well-formed answer without data is an empty series,
//! on which the policy fails static (holds capacity, never scales down).

pub mod amp;
pub mod cloudwatch;
pub mod history;
pub mod prometheus;
pub mod queries;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use aws_config::{BehaviorVersion, Region};

use crate::config::MetricSourceConfig;
use crate::core::{PolicySpec, Sample, TargetSpec};
use crate::error::Error;

pub use crate::core::policy::observe::{RecentSignals, Window};

pub use cloudwatch::CloudWatchSource;
pub use prometheus::PrometheusSource;

/// Where the signals of a target come from. The tick joins them with what Kubernetes says
/// (pods, HPA) in `core::policy::observe::assemble`.
#[async_trait]
pub trait MetricSource: Send + Sync {
    /// The recent signals over `window` (the read plan's `recent`: the policy's window ending
    /// now, on its step).
    async fn observe(&self, target: &TargetSpec, window: Window) -> Result<RecentSignals, Error>;

    /// The arrival rate over any past window (seasonal history, the band's long history),
    /// oldest first, each sample stamped at its own time.
    async fn arrival_history(
        &self,
        target: &TargetSpec,
        window: Window,
    ) -> Result<Vec<Sample>, Error>;
}

pub(crate) fn metrics_error(target: &TargetSpec, message: String, retryable: bool) -> Error {
    Error::Metrics {
        target: target.name.clone(),
        message,
        retryable,
    }
}

/// Builds the configured source once at start-up. For AMP and CloudWatch the AWS configuration
/// (region, credentials, `AWS_ENDPOINT_URL`) comes from `aws-config`'s standard chain. The
/// PromQL sources evaluate their built-in queries over the policy's RATE_WINDOW_SECONDS;
/// CloudWatch reads per-period aggregates, has no rate window, and leaves out the periods that
/// ended within INGESTION_LAG_SECONDS of now in every read (the PromQL sources are given windows
/// that end one lag back instead: `core::policy::observe::plan`).
pub async fn from_config(
    cfg: &MetricSourceConfig,
    policy: &PolicySpec,
) -> Result<Box<dyn MetricSource>, Error> {
    let rate_window_s = policy.rate_window_s;
    match cfg {
        MetricSourceConfig::Prometheus { url } => Ok(Box::new(
            PrometheusSource::new(url)?.with_rate_window(rate_window_s),
        )),
        MetricSourceConfig::Amp {
            workspace_url,
            region,
        } => {
            let sdk = aws_config::defaults(BehaviorVersion::latest())
                .region(Region::new(region.clone()))
                .load()
                .await;
            let provider = sdk.credentials_provider().ok_or_else(|| {
                Error::config(
                    "AWS_ACCESS_KEY_ID",
                    "no AWS credentials found to sign requests to AMP",
                )
            })?;
            let signer = Arc::new(amp::ApsSigner::new(region, provider));
            signer.preload().await?;
            Ok(Box::new(
                amp::source(workspace_url, signer)?.with_rate_window(rate_window_s),
            ))
        }
        MetricSourceConfig::CloudWatch {
            namespace,
            publish_s,
        } => {
            // A tick must not stall on one slow call: bound each attempt and the whole call
            // (retries included), like the Prometheus client's timeout.
            let timeouts = aws_config::timeout::TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(2))
                .operation_attempt_timeout(Duration::from_secs(4))
                .operation_timeout(Duration::from_secs(8))
                .build();
            let sdk = aws_config::defaults(BehaviorVersion::latest())
                .timeout_config(timeouts)
                .load()
                .await;
            if sdk.region().is_none() {
                return Err(Error::config(
                    "AWS_REGION",
                    "needed to call CloudWatch GetMetricData",
                ));
            }
            Ok(Box::new(
                CloudWatchSource::new(aws_sdk_cloudwatch::Client::new(&sdk), namespace, *publish_s)
                    .with_ingestion_lag(policy.ingestion_lag_s),
            ))
        }
    }
}
