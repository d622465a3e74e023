//! The Kubernetes objects prewarm writes, as dynamic API resources, and which object holds a
//! target's headroom. Dynamic objects (plain JSON) let one read/patch path serve a Deployment, a
//! CapacityBuffer and a NodePool alike; only the fields prewarm owns are ever touched.

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};

use crate::core::{HeadroomKind, TargetSpec};

/// `apps/v1` Deployment (balloon pods).
pub fn deployment() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apps", "v1", "Deployment"),
        "deployments",
    )
}

/// `autoscaling.x-k8s.io/v1beta1` CapacityBuffer (Karpenter 1.14+, feature gate CapacityBuffer).
pub fn capacity_buffer() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("autoscaling.x-k8s.io", "v1beta1", "CapacityBuffer"),
        "capacitybuffers",
    )
}

/// `karpenter.sh/v1` NodePool (cluster-scoped).
pub fn node_pool() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("karpenter.sh", "v1", "NodePool"),
        "nodepools",
    )
}

/// The object whose `spec.replicas` is a target's warm spare capacity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeadroomRef {
    /// Human name for logs and errors, e.g. `deployment prewarm/balloon-gpu`.
    pub display: String,
    /// Kind for `Error::NotFound`.
    pub kind: &'static str,
    pub namespace: Option<String>,
    pub name: String,
    resource: ObjectKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ObjectKind {
    Deployment,
    CapacityBuffer,
    NodePool,
}

impl HeadroomRef {
    pub fn of(target: &TargetSpec) -> Self {
        match &target.headroom {
            HeadroomKind::Balloon { namespace, name } => HeadroomRef {
                display: format!("deployment {namespace}/{name}"),
                kind: "balloon Deployment",
                namespace: Some(namespace.clone()),
                name: name.clone(),
                resource: ObjectKind::Deployment,
            },
            HeadroomKind::CapacityBuffer { namespace, name } => HeadroomRef {
                display: format!("capacitybuffer {namespace}/{name}"),
                kind: "CapacityBuffer",
                namespace: Some(namespace.clone()),
                name: name.clone(),
                resource: ObjectKind::CapacityBuffer,
            },
            HeadroomKind::NodePoolReplicas => HeadroomRef {
                display: format!("nodepool {}", target.node_pool),
                kind: "NodePool",
                namespace: None,
                name: target.node_pool.clone(),
                resource: ObjectKind::NodePool,
            },
        }
    }

    pub fn api(&self, client: &kube::Client) -> Api<DynamicObject> {
        let resource = match self.resource {
            ObjectKind::Deployment => deployment(),
            ObjectKind::CapacityBuffer => capacity_buffer(),
            ObjectKind::NodePool => node_pool(),
        };
        match &self.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        }
    }
}

pub fn node_pool_api(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &node_pool())
}
