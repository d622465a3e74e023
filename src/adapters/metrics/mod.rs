//! Metric sources: Prometheus, Amazon Managed Prometheus (SigV4), CloudWatch.
//!
//! Each source answers one question per target and tick: the recent history (the policy's
//! window, ending now, on its step grid, oldest first) of arrival rate, service time, waiting and
//! running requests. History is fetched every tick so the Lambda keeps no state between
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
use crate::core::{Observation, PolicySpec, Sample, TargetSpec};
use crate::error::Error;

pub use cloudwatch::CloudWatchSource;
pub use prometheus::PrometheusSource;

/// Where the signals of a target come from. `pending_pods` and `serving_replicas` of the
/// returned observation are left at their defaults: the tick fills them from Kubernetes.
#[async_trait]
pub trait MetricSource: Send + Sync {
    async fn observe(
        &self,
        target: &TargetSpec,
        policy: &PolicySpec,
        now: f64,
    ) -> Result<Observation, Error>;

    /// The arrival rate over any past window (seasonal history, the band's long history),
    /// oldest first, each sample stamped at its own time.
    async fn arrival_history(
        &self,
        target: &TargetSpec,
        window: Window,
    ) -> Result<Vec<Sample>, Error>;
}

/// The time range of one observation, in Unix seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    pub start: f64,
    pub end: f64,
    pub step: f64,
}

impl Window {
    /// Consecutive windows of at most `max_points` points covering this one; neighbours share
    /// their boundary point.
    pub fn chunks(&self, max_points: f64) -> Vec<Window> {
        let span = (max_points - 1.0).max(1.0) * self.step;
        let mut out = Vec::new();
        let mut start = self.start;
        loop {
            let end = (start + span).min(self.end);
            out.push(Window {
                start,
                end,
                step: self.step,
            });
            if end >= self.end {
                return out;
            }
            start = end;
        }
    }

    /// The same clock times one season back: what a PromQL `offset` would read. (`offset`
    /// binds to each selector, not to a whole expression such as the arrival-rate sum, so the
    /// query's range is shifted instead; the samples are the same.)
    pub fn shifted_back(&self, season_s: f64) -> Window {
        Window {
            start: self.start - season_s,
            end: self.end - season_s,
            step: self.step,
        }
    }

    /// `policy.window_s` ending at `now`, with the policy's step. The grid is anchored at `now`
    /// rather than rounded to a multiple of the step, so the newest point is as fresh as the
    /// source allows (staleness is judged on it).
    pub fn ending_at(now: f64, policy: &PolicySpec) -> Window {
        Window {
            start: now - policy.window_s,
            end: now,
            step: policy.step_s,
        }
    }
}

pub(crate) fn metrics_error(target: &TargetSpec, message: String, retryable: bool) -> Error {
    Error::Metrics {
        target: target.name.clone(),
        message,
        retryable,
    }
}

/// Builds the configured source once at start-up. For AMP and CloudWatch the AWS configuration
/// (region, credentials, `AWS_ENDPOINT_URL`) comes from `aws-config`'s standard chain.
pub async fn from_config(cfg: &MetricSourceConfig) -> Result<Box<dyn MetricSource>, Error> {
    match cfg {
        MetricSourceConfig::Prometheus { url } => Ok(Box::new(PrometheusSource::new(url)?)),
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
            Ok(Box::new(amp::source(workspace_url, signer)?))
        }
        MetricSourceConfig::CloudWatch { namespace } => {
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
            Ok(Box::new(CloudWatchSource::new(
                aws_sdk_cloudwatch::Client::new(&sdk),
                namespace,
            )))
        }
    }
}
