//! Building the Kubernetes client: from a kubeconfig file (local runs, tests) or, on EKS, from
//! `DescribeCluster` (endpoint and CA) plus a presigned-STS bearer token.
//!
//! The Lambda builds clients once per execution environment; `ClientCache` hands the same client
//! to every warm invocation and only rebuilds it when its EKS token nears the end of its
//! validity (`eks_token::is_fresh`).

pub mod eks_token;
pub mod shed_retry;

use std::time::{Duration, SystemTime};

use aws_credential_types::provider::ProvideCredentials;
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;
use tokio::sync::Mutex;

use crate::clock::{system_now, unix_seconds};
use crate::config::ClusterAccess;
use crate::error::{Error, Result};
use shed_retry::ShedRetry;

/// What `DescribeCluster` tells us about a cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterEndpoint {
    pub endpoint: String,
    /// Base64 of the PEM CA bundle, as EKS returns it (and kubeconfig expects it).
    pub certificate_authority_data: String,
}

fn eks_error(operation: &str, message: impl std::fmt::Display, retryable: bool) -> Error {
    Error::aws("eks", operation, message, retryable)
}

/// AWS SDK configuration for `region`; `AWS_ENDPOINT_URL` (or `AWS_ENDPOINT_URL_EKS`) redirects
/// the calls, which is how tests reach the moto server.
pub async fn aws_config(region: &str) -> aws_config::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(region.to_string()))
        .load()
        .await
}

/// `DescribeCluster`: the API server endpoint and its CA.
pub async fn describe_cluster(
    eks: &aws_sdk_eks::Client,
    cluster_name: &str,
) -> Result<ClusterEndpoint> {
    let out = eks
        .describe_cluster()
        .name(cluster_name)
        .send()
        .await
        .map_err(|e| {
            let service = e.as_service_error();
            let not_found = service.is_some_and(|s| s.is_resource_not_found_exception());
            let message = format!(
                "cluster {cluster_name}: {}",
                aws_sdk_eks::error::DisplayErrorContext(&e)
            );
            eks_error("DescribeCluster", message, !not_found)
        })?;
    let cluster = out.cluster().ok_or_else(|| {
        eks_error(
            "DescribeCluster",
            format!("no cluster {cluster_name} in the answer"),
            false,
        )
    })?;
    let endpoint = cluster
        .endpoint()
        .filter(|e| !e.is_empty())
        .ok_or_else(|| {
            eks_error(
                "DescribeCluster",
                format!("cluster {cluster_name} has no endpoint yet"),
                true,
            )
        })?;
    let ca = cluster
        .certificate_authority()
        .and_then(|c| c.data())
        .filter(|d| !d.is_empty())
        .ok_or_else(|| {
            eks_error(
                "DescribeCluster",
                format!("cluster {cluster_name} has no certificate authority"),
                true,
            )
        })?;
    Ok(ClusterEndpoint {
        endpoint: endpoint.to_string(),
        certificate_authority_data: ca.to_string(),
    })
}

/// How long a connection to the API server may take to open. kube's default is 30 s: two ticks.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one answer may take once a request is sent (kube's default: no limit, for exec and
/// watch streams, which prewarm does not use). Every call of prewarm is a get, list or patch the
/// API server answers in well under a second; past this it is hung, and a tick must not wait on
/// it until the Lambda's timeout.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The client's timeouts: an API server that does not answer fails the call, not the tick.
/// The read timeout counts from when a request is sent, not from when its pooled connection
/// went idle (`reset_reader_on_write`): a connection idle between ticks must not time out the
/// next tick's first call.
/// Requests waiting for the client's one connection pool at once (the buffer's bound): more
/// than a tick or a drain step ever has in flight.
const REQUESTS_QUEUED: usize = 1024;

fn with_timeouts(mut config: kube::Config) -> kube::Config {
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(READ_TIMEOUT);
    config.reset_reader_on_write = true;
    config
}

fn kube_build_error(message: impl std::fmt::Display) -> Error {
    Error::kube("build client", "cluster", message, false)
}

/// The kubeconfig (JSON is YAML) of an EKS endpoint with a bearer token; going through
/// kubeconfig lets kube parse the CA exactly as it would for kubectl.
pub fn eks_kubeconfig(endpoint: &ClusterEndpoint, token: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "eks", "cluster": {
            "server": endpoint.endpoint,
            "certificate-authority-data": endpoint.certificate_authority_data,
        }}],
        "users": [{"name": "prewarm", "user": {"token": token}}],
        "contexts": [{"name": "eks", "context": {"cluster": "eks", "user": "prewarm"}}],
        "current-context": "eks",
    })
}

async fn from_kubeconfig(kubeconfig: Kubeconfig) -> Result<kube::Client> {
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(kube_build_error)?;
    // kube retries 429/503/504 by default, for up to 15 attempts with backoff to 1000 s. A 429
    // from the Eviction API is a PodDisruptionBudget's answer, not throttling, and a Lambda must
    // not sleep on it: callers see every status at once and retry on their own schedule (the
    // next tick, the message's next visibility). Only a request the apiserver shed for load
    // (429 with Retry-After, not an eviction) is tried again, briefly (`shed_retry`); the
    // buffer makes the service cloneable, as the retry needs.
    config.default_retry = false;
    let builder =
        kube::client::ClientBuilder::try_from(with_timeouts(config)).map_err(kube_build_error)?;
    Ok(builder
        .with_layer(&tower::buffer::BufferLayer::new(REQUESTS_QUEUED))
        .with_layer(&tower::retry::RetryLayer::new(ShedRetry::default()))
        .build())
}

async fn kubeconfig_client(path: &str) -> Result<kube::Client> {
    let kubeconfig = Kubeconfig::read_from(path)
        .map_err(|e| Error::config("KUBECONFIG", format!("cannot read {path}: {e}")))?;
    from_kubeconfig(kubeconfig)
        .await
        .map_err(|e| Error::config("KUBECONFIG", format!("{path}: {e}")))
}

/// Signs a fresh token at `signed_at` with the SDK's current credentials (Lambda role
/// credentials rotate).
async fn fresh_token(
    sdk: &aws_config::SdkConfig,
    cluster: &str,
    region: &str,
    signed_at: SystemTime,
) -> Result<String> {
    let provider = sdk
        .credentials_provider()
        .ok_or_else(|| eks_error("token", "no AWS credentials provider configured", false))?;
    let credentials = provider
        .provide_credentials()
        .await
        .map_err(|e| eks_error("token", format!("no AWS credentials: {e}"), true))?;
    eks_token::token(cluster, region, &credentials, signed_at)
}

async fn eks_client(
    sdk: &aws_config::SdkConfig,
    endpoint: &ClusterEndpoint,
    cluster: &str,
    region: &str,
    signed_at: SystemTime,
) -> Result<kube::Client> {
    let token = fresh_token(sdk, cluster, region, signed_at).await?;
    let kubeconfig = Kubeconfig::from_yaml(&eks_kubeconfig(endpoint, &token).to_string())
        .map_err(kube_build_error)?;
    from_kubeconfig(kubeconfig).await
}

/// Builds a client for `access` (no caching; see `ClientCache` for the Lambda). A one-shot
/// client (a CLI command, a test) signs its EKS token when it is built.
pub async fn client(access: &ClusterAccess) -> Result<kube::Client> {
    match access {
        ClusterAccess::Kubeconfig { path } => kubeconfig_client(path).await,
        ClusterAccess::Eks {
            cluster_name,
            region,
        } => {
            let sdk = aws_config(region).await;
            let endpoint = describe_cluster(&aws_sdk_eks::Client::new(&sdk), cluster_name).await?;
            eks_client(&sdk, &endpoint, cluster_name, region, system_now()).await
        }
    }
}

struct Cached {
    client: kube::Client,
    /// When its token was signed; None for kubeconfig clients, which never need renewing.
    issued_at: Option<f64>,
}

struct EksContext {
    sdk: aws_config::SdkConfig,
    endpoint: ClusterEndpoint,
}

/// A client shared by warm invocations, rebuilt when its EKS token is about to expire.
pub struct ClientCache {
    access: ClusterAccess,
    cached: Mutex<Option<Cached>>,
    eks: Mutex<Option<EksContext>>,
}

impl ClientCache {
    pub fn new(access: ClusterAccess) -> Self {
        ClientCache {
            access,
            cached: Mutex::new(None),
            eks: Mutex::new(None),
        }
    }

    /// The current client at `now` (the caller's clock), built or renewed as needed: a new EKS
    /// token is signed at `now`.
    pub async fn get(&self, now: SystemTime) -> Result<kube::Client> {
        let signed_at = now;
        let now = unix_seconds(now);
        let mut cached = self.cached.lock().await;
        if let Some(c) = cached.as_ref() {
            if c.issued_at.is_none_or(|t| eks_token::is_fresh(t, now)) {
                return Ok(c.client.clone());
            }
        }
        let built = match &self.access {
            ClusterAccess::Kubeconfig { path } => Cached {
                client: kubeconfig_client(path).await?,
                issued_at: None,
            },
            ClusterAccess::Eks {
                cluster_name,
                region,
            } => {
                let mut eks = self.eks.lock().await;
                if eks.is_none() {
                    let sdk = aws_config(region).await;
                    let endpoint =
                        describe_cluster(&aws_sdk_eks::Client::new(&sdk), cluster_name).await?;
                    *eks = Some(EksContext { sdk, endpoint });
                }
                let ctx = eks.as_ref().expect("set above");
                Cached {
                    client: eks_client(&ctx.sdk, &ctx.endpoint, cluster_name, region, signed_at)
                        .await?,
                    issued_at: Some(now),
                }
            }
        };
        let client = built.client.clone();
        *cached = Some(built);
        Ok(client)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eks_kubeconfig_is_one_kube_accepts() {
        let endpoint = ClusterEndpoint {
            endpoint: "https://ABC.gr7.us-east-1.eks.amazonaws.com".into(),
            certificate_authority_data: "LS0tLS1CRUdJTi0tLS0t".into(),
        };
        let text = eks_kubeconfig(&endpoint, "k8s-aws-v1.abc").to_string();
        let kc = Kubeconfig::from_yaml(&text).unwrap();
        assert_eq!(kc.current_context.as_deref(), Some("eks"));
        let cluster = kc.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some(endpoint.endpoint.as_str()));
        assert_eq!(
            cluster.certificate_authority_data.as_deref(),
            Some("LS0tLS1CRUdJTi0tLS0t")
        );
        assert!(kc.auth_infos[0].auth_info.as_ref().unwrap().token.is_some());
    }

    #[test]
    fn a_hung_api_server_fails_the_call_not_the_tick() {
        // kube's defaults: connect 30 s, no read limit at all.
        let defaults = kube::Config::new("https://127.0.0.1:6443".parse().unwrap());
        assert_eq!(defaults.read_timeout, None);
        let config = with_timeouts(defaults);
        assert_eq!(config.connect_timeout, Some(Duration::from_secs(5)));
        assert_eq!(config.read_timeout, Some(Duration::from_secs(10)));
        assert!(config.reset_reader_on_write);
    }

    #[tokio::test]
    async fn a_missing_kubeconfig_names_the_variable() {
        let access = ClusterAccess::Kubeconfig {
            path: "/nonexistent/prewarm/kubeconfig".into(),
        };
        match client(&access).await {
            Err(Error::Config { var, message }) => {
                assert_eq!(var, "KUBECONFIG");
                assert!(
                    message.contains("/nonexistent/prewarm/kubeconfig"),
                    "{message}"
                );
            }
            Err(other) => panic!("expected a config error, got {other}"),
            Ok(_) => panic!("expected a config error, got a client"),
        }
    }
}
