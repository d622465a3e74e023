//! The reads lead times are learned from (a NodePool's NodeClaims, a namespace's `Pulled`
//! events) and the ConfigMap the book is kept in between ticks (key `lead-times.json`, one JSON
//! object: the book's windows are bounded, so it stays far below a ConfigMap's 1 MiB).
//!
//! The book is written with the `resourceVersion` it was read at: a 409 means another
//! invocation wrote first, and what this one learned is seen again by the next tick (the
//! objects it came from are still there), so nothing is retried here.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};

use super::{node_boot, Learned, NODEPOOL_LABEL};
use crate::adapters::kube::api_error::{api_failure, from_kube};
use crate::config::TargetsConfigMap;
use crate::core::lead::LeadBook;
use crate::error::{Error, Result};

/// The ConfigMap key that holds the book.
pub const BOOK_KEY: &str = "lead-times.json";

/// The book as read, and the version a write must carry (None: the ConfigMap does not exist).
#[derive(Clone, Debug, Default)]
pub struct StoredBook {
    pub book: LeadBook,
    pub resource_version: Option<String>,
}

fn display(at: &TargetsConfigMap) -> String {
    format!("ConfigMap {}/{}", at.namespace, at.name)
}

/// Reads the book; an absent ConfigMap is an empty book. A book that cannot be parsed is an
/// error (overwriting it would lose what another version of prewarm keeps there).
pub async fn read_book(client: &kube::Client, at: &TargetsConfigMap) -> Result<StoredBook> {
    let api = Api::<ConfigMap>::namespaced(client.clone(), &at.namespace);
    let Some(cm) = api
        .get_opt(&at.name)
        .await
        .map_err(|e| api_failure("get", &display(at), e))?
    else {
        return Ok(StoredBook::default());
    };
    let book = match cm.data.as_ref().and_then(|d| d.get(BOOK_KEY)) {
        None => LeadBook::default(),
        Some(raw) => serde_json::from_str(raw).map_err(|e| {
            Error::kube("parse", format!("{} key {BOOK_KEY}", display(at)), e, false)
        })?,
    };
    Ok(StoredBook {
        book,
        resource_version: cm.metadata.resource_version,
    })
}

/// Writes `book` over the version read (`Error::Conflict` when someone wrote in between), or
/// creates the ConfigMap when there was none.
pub async fn write_book(
    client: &kube::Client,
    at: &TargetsConfigMap,
    read: &StoredBook,
    book: &LeadBook,
) -> Result<()> {
    let api = Api::<ConfigMap>::namespaced(client.clone(), &at.namespace);
    let raw =
        serde_json::to_string(book).map_err(|e| Error::kube("serialise", display(at), e, false))?;
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(at.name.clone());
    cm.metadata.namespace = Some(at.namespace.clone());
    cm.metadata.labels = Some(BTreeMap::from([(
        "app.kubernetes.io/managed-by".to_string(),
        "prewarm".to_string(),
    )]));
    cm.metadata.resource_version = read.resource_version.clone();
    cm.data = Some(BTreeMap::from([(BOOK_KEY.to_string(), raw)]));
    let written = match read.resource_version {
        Some(_) => api.replace(&at.name, &PostParams::default(), &cm).await,
        None => api.create(&PostParams::default(), &cm).await,
    };
    written
        .map(|_| ())
        .map_err(|e| api_failure("write", &display(at), e))
}

fn node_claims(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("karpenter.sh", "v1", "NodeClaim"),
            "nodeclaims",
        ),
    )
}

/// The boots of `pool`'s initialized NodeClaims (one list call).
pub async fn pool_boots(client: &kube::Client, pool: &str) -> Result<Vec<Learned>> {
    let selector = format!("{NODEPOOL_LABEL}={pool}");
    let claims = node_claims(client)
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| from_kube("list", "NodeClaims", &format!("NodeClaims of {pool}"), e))?;
    Ok(claims
        .items
        .iter()
        .filter_map(|c| serde_json::to_value(c).ok())
        .filter_map(|c| node_boot(&c))
        .collect())
}

/// The kubelet's `Pulled` events in `namespace` (one list call; events live about an hour).
pub async fn pulled_events(client: &kube::Client, namespace: &str) -> Result<Vec<Event>> {
    let events = Api::<Event>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().fields("reason=Pulled"))
        .await
        .map_err(|e| api_failure("list", &format!("events in {namespace}"), e))?;
    Ok(events.items)
}
