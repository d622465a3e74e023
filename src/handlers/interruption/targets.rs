//! The targets a drain step works with: read from the targets ConfigMap at most once per record,
//! and only once the step needs them (an instance not in this cluster needs none: a storm of
//! foreign notices costs no reads). A read that may succeed later (throttled, a 5xx, a timeout)
//! fails the step, to be tried again like any failed step: a drain run with no targets would
//! evict CPU-only pods at once and GPU pods without their placeholder or surge. Only a list that
//! is not there to read (the ConfigMap absent, invalid, or refused to this function) drains with
//! none, which costs the replacement capacity, never the drain, and is logged and counted.

use tokio::sync::OnceCell;

use super::Interruption;
use crate::adapters::kube::targets::{current, report_refused, TargetsRead};
use crate::core::TargetSpec;
use crate::error::Result;

/// The targets of one record, read on first use.
pub struct DrainTargets<'a> {
    handler: &'a Interruption,
    client: &'a kube::Client,
    read: OnceCell<Vec<TargetSpec>>,
}

impl<'a> DrainTargets<'a> {
    pub fn new(handler: &'a Interruption, client: &'a kube::Client) -> Self {
        DrainTargets {
            handler,
            client,
            read: OnceCell::new(),
        }
    }

    /// The targets (read now if not yet); `Err` when the read may succeed later.
    pub async fn get(&self) -> Result<&[TargetSpec]> {
        let h = self.handler;
        self.read
            .get_or_try_init(|| async {
                let read = current(h.targets_configmap.as_ref(), &h.targets, self.client).await;
                let usable = or_none_when_unreadable(read)?;
                for (name, e) in &usable.refused {
                    report_refused(&h.emf_namespace, name, e);
                }
                if usable.targets.is_empty() && !usable.refused.is_empty() {
                    tracing::warn!(refused = usable.refused.len(),
                        "targets unusable: this step drains with no targets (no replacement placeholder, no surge)");
                }
                Ok(usable.targets)
            })
            .await
            .map(Vec::as_slice)
    }
}

/// What a drain makes of reading its targets: the read as it is; a failure that trying again
/// can mend, as that failure; any other (absent, invalid, forbidden), as no targets with the
/// whole list refused for that reason.
pub fn or_none_when_unreadable(read: Result<TargetsRead>) -> Result<TargetsRead> {
    match read {
        Err(e) if !e.retryable() => Ok(TargetsRead {
            targets: Vec::new(),
            refused: vec![("targets".to_string(), e)],
        }),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::kube::api_error::api_failure;
    use crate::adapters::kube::targets::parse_each;
    use crate::error::Error;

    fn status(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("m", reason)
                .with_code(code)
                .boxed(),
        )
    }

    /// (what, the read, Some(retryable error) or None when it drains with no targets)
    #[test]
    fn only_an_unreadable_list_drains_with_no_targets() {
        let read_failed = |e: kube::Error| Err(api_failure("get", "ConfigMap prewarm/t", e));
        let cases: Vec<(&str, Result<TargetsRead>, bool)> = vec![
            // Throttled by API Priority and Fairness: 429, retryable by status_retryable.
            ("429", read_failed(status(429, "TooManyRequests")), true),
            ("503", read_failed(status(503, "ServiceUnavailable")), true),
            ("500", read_failed(status(500, "InternalError")), true),
            // No HTTP answer at all (a hung apiserver, a reset connection).
            (
                "transport",
                read_failed(kube::Error::Service("connection reset".into())),
                true,
            ),
            // Absent: from_kube turns the 404 into NotFound, final.
            (
                "404",
                Err(Error::NotFound {
                    kind: "ConfigMap".into(),
                    name: "prewarm/t".into(),
                }),
                false,
            ),
            // Refused to this function (RBAC): no retry will change it.
            ("403", read_failed(status(403, "Forbidden")), false),
            // There, but not a JSON list.
            ("invalid", parse_each("ConfigMap prewarm/t", "{"), false),
        ];
        for (what, read, retry) in cases {
            match or_none_when_unreadable(read) {
                Err(e) => assert!(retry && e.retryable(), "{what}: failed with {e}"),
                Ok(r) => {
                    assert!(!retry, "{what}: drained with {r:?}");
                    assert!(r.targets.is_empty(), "{what}");
                    assert_eq!(r.refused.len(), 1, "{what}");
                    assert_eq!(r.refused[0].0, "targets", "{what}");
                }
            }
        }
        // A readable list is used as it is, one refused target with it.
        let raw = r#"[{"name":"a","nodePool":"gpu","maxSpare":4,
            "headroom":{"kind":"balloon","namespace":"prewarm","name":"b"}},{"name":"bad"}]"#;
        let r = or_none_when_unreadable(parse_each("s", raw)).unwrap();
        let names: Vec<&str> = r.targets.iter().map(|t| t.name.as_str()).collect();
        assert_eq!((names, r.refused.len()), (vec!["a"], 1));
    }
}
