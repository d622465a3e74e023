//! Who owns a pod and what scales its Deployment, read from the objects' own fields.

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

/// The name of the controller of kind `kind` among `owners`.
pub fn controller_of<'a>(owners: Option<&'a Vec<OwnerReference>>, kind: &str) -> Option<&'a str> {
    owners?
        .iter()
        .find(|o| o.kind == kind && o.controller == Some(true))
        .map(|o| o.name.as_str())
}

/// Whether HPA `h` scales Deployment `name`.
pub fn scales(h: &HorizontalPodAutoscaler, name: &str) -> bool {
    h.spec.as_ref().is_some_and(|s| {
        s.scale_target_ref.kind == "Deployment"
            && s.scale_target_ref.name == name
            && s.scale_target_ref
                .api_version
                .as_deref()
                .is_none_or(|v| v.starts_with("apps/"))
    })
}
