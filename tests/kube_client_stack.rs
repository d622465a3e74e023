//! Cluster access against the stack: DescribeCluster on the moto server (cluster `prewarm-test`,
//! created by tests/stack's AWS setup) and a kubeconfig client reaching the real apiserver with
//! the Lambda's RBAC. (The token's presigned URL is checked by unit tests in client/eks_token.rs: moto
//! routes requests by their Authorization header or body, not by query-string signatures, and
//! checks no signature, so it could not say more.)
//!
//! Run: `. tests/stack/.run/env && cargo test --test kube_client_stack -- --include-ignored`

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use kube::api::{Api, DynamicObject, ListParams};
use prewarm::adapters::kube::client::{aws_config, describe_cluster};
use prewarm::adapters::kube::{client, resources};
use prewarm::config::ClusterAccess;
use prewarm::Error;

mod common;
use common::env;

/// An EKS client aimed at moto (AWS_ENDPOINT_URL_EKS from the stack env wins if set).
async fn eks() -> aws_sdk_eks::Client {
    let sdk = aws_config(&env("AWS_REGION")).await;
    let endpoint = std::env::var("AWS_ENDPOINT_URL_EKS").unwrap_or_else(|_| env("MOTO_URL"));
    let config = aws_sdk_eks::config::Builder::from(&sdk)
        .endpoint_url(endpoint)
        .build();
    aws_sdk_eks::Client::from_conf(config)
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn describe_cluster_returns_the_endpoint_and_ca() {
    let cluster = env("CLUSTER_NAME");
    let found = describe_cluster(&eks().await, &cluster).await.unwrap();
    let url = url::Url::parse(&found.endpoint).unwrap();
    assert_eq!(url.scheme(), "https", "{}", found.endpoint);
    assert!(
        url.host_str().unwrap().ends_with(".eks.amazonaws.com"),
        "{}",
        found.endpoint
    );
    let ca = STANDARD
        .decode(&found.certificate_authority_data)
        .expect("the CA is base64");
    assert!(!ca.is_empty());
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn an_unknown_cluster_is_a_final_error_naming_it() {
    match describe_cluster(&eks().await, "no-such-cluster").await {
        Err(e @ Error::Aws { .. }) => {
            assert!(!e.retryable(), "{e}");
            assert!(e.to_string().contains("no-such-cluster"), "{e}");
        }
        other => panic!("expected an AWS error, got {other:?}"),
    }
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_kubeconfig_client_reaches_the_apiserver_with_the_lambda_rbac() {
    let c = client(&ClusterAccess::Kubeconfig {
        path: env("PREWARM_LAMBDA_KUBECONFIG"),
    })
    .await
    .unwrap();
    let pools = Api::<DynamicObject>::all_with(c, &resources::node_pool());
    let list = pools.list(&ListParams::default()).await.unwrap();
    assert!(
        list.items
            .iter()
            .any(|p| p.metadata.name.as_deref() == Some("gpu")),
        "the stack's NodePool gpu is listed"
    );
}
