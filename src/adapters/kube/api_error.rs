//! Turns kube client errors into prewarm's error type, deciding what is worth retrying.
//! A rejection (400/403/422: schema, CEL or RBAC) is final: trying the same write again next tick
//! cannot succeed, so it is reported once per tick as non-retryable rather than looped on.

use crate::error::Error;

/// Maps a kube error from `operation` on `object`. 404 becomes `NotFound` so a missing NodePool
/// or headroom object is reported by name.
pub fn from_kube(operation: &str, kind: &str, object: &str, error: kube::Error) -> Error {
    match error {
        kube::Error::Api(status) if status.code == 404 => Error::NotFound {
            kind: kind.to_string(),
            name: object.to_string(),
        },
        other => api_failure(operation, object, other),
    }
}

/// Maps a kube error as it is, 404 included (for callers to whom a missing object is a failure
/// of the call rather than a named absence). A 409 becomes `Error::Conflict`, so whether to
/// re-read is decided on the kind of error, never on its text.
pub fn api_failure(operation: &str, object: &str, error: kube::Error) -> Error {
    match error {
        kube::Error::Api(status) if status.code == 409 => Error::Conflict {
            operation: operation.to_string(),
            object: object.to_string(),
            message: format!("{} {}: {}", status.code, status.reason, status.message),
        },
        kube::Error::Api(status) => Error::kube(
            operation,
            object,
            format!("{} {}: {}", status.code, status.reason, status.message),
            status_retryable(status.code),
        ),
        // Transport errors, timeouts and the like: the next tick may get through.
        other => Error::kube(operation, object, other, true),
    }
}

/// 409 (conflict), 429 (throttled) and 5xx can succeed later; other 4xx never will.
pub fn status_retryable(code: u16) -> bool {
    code == 409 || code == 429 || code >= 500
}

/// The `reason` of a Status whose HTTP code is 429 (`metav1.StatusReasonTooManyRequests`).
const TOO_MANY_REQUESTS: &str = "TooManyRequests";
/// The cause type the Eviction API attaches to a PodDisruptionBudget's refusal
/// (`policyv1.DisruptionBudgetCause`; a StatusCause's type is serialised as `reason`).
const DISRUPTION_BUDGET_CAUSE: &str = "DisruptionBudget";

/// Whether a refused eviction is a PodDisruptionBudget's answer, rather than the apiserver
/// shedding load. Both are 429s. The Eviction API refuses for a budget with a JSON Status whose
/// reason is `TooManyRequests` and whose causes include a `DisruptionBudget` cause ("The
/// disruption budget NAME needs N healthy pods and has M currently", or "... is still being
/// processed by the server"). API Priority and Fairness (and the max-in-flight filter) answers
/// a plain-text "Too many requests, please try again later." with a Retry-After header: no
/// Status at all (the client then makes one up, reason "Failed to parse error data"). Only the
/// first may ever lead to a delete past the budget; the second is a transient failure.
pub fn is_pdb_refusal(status: &kube::core::Status) -> bool {
    status.code == 429
        && status.reason == TOO_MANY_REQUESTS
        && status
            .details
            .as_ref()
            .is_some_and(|d| d.causes.iter().any(|c| c.reason == DISRUPTION_BUDGET_CAUSE))
}

/// Whether a kube error is the optimistic-concurrency conflict (another writer got there first).
pub fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            ..kube::core::Status::failure("m", "R")
        }))
    }

    #[test]
    fn a_409_is_a_conflict_404_not_found_others_kube_errors() {
        // (code, is_conflict, kind) - by hand.
        let cases = [
            (409, true, "conflict"),
            (404, false, "not_found"),
            (422, false, "kube"),
            (500, false, "kube"),
        ];
        for (code, conflict, kind) in cases {
            let e = from_kube("patch", "NodePool", "gpu", api(code));
            assert_eq!(e.is_conflict(), conflict, "{code}");
            assert_eq!(e.kind(), kind, "{code}");
        }
        assert!(api_failure("get", "x", api(409)).is_conflict());
        assert_eq!(api_failure("get", "x", api(404)).kind(), "kube");
    }

    /// 429s as the apiserver sends them (bodies from Kubernetes' eviction REST handler and the
    /// flow-control filter), and whether each is a budget's refusal.
    #[test]
    fn only_a_disruption_budget_429_is_a_pdb_refusal() {
        let status = |json: serde_json::Value| -> kube::core::Status {
            serde_json::from_value(json).unwrap()
        };
        let pdb = status(serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "reason": "TooManyRequests",
            "details": {"causes": [{"reason": "DisruptionBudget",
                "message": "The disruption budget llama needs 2 healthy pods and has 2 currently"}]},
            "code": 429
        }));
        let pdb_processing = status(serde_json::json!({
            "status": "Failure", "reason": "TooManyRequests", "code": 429,
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "details": {"retryAfterSeconds": 10, "causes": [{"reason": "DisruptionBudget",
                "message": "The disruption budget llama is still being processed by the server."}]}
        }));
        // API Priority and Fairness: a plain-text body, which the client turns into this.
        let flow_control = kube::core::Status::failure(
            "Too many requests, please try again later.",
            "Failed to parse error data",
        )
        .with_code(429);
        // A JSON 429 without a budget's cause (an aggregated API server's own limit, say).
        let throttled_json = status(serde_json::json!({
            "status": "Failure", "reason": "TooManyRequests", "code": 429,
            "message": "the server has received too many requests and has asked us to try again later",
            "details": {"retryAfterSeconds": 1}
        }));
        let mut forbidden = pdb.clone();
        forbidden.code = 403;
        let cases = [
            ("pdb", pdb, true),
            ("pdb still being processed", pdb_processing, true),
            ("flow control", flow_control, false),
            ("429 without a budget cause", throttled_json, false),
            ("not a 429", forbidden, false),
        ];
        for (name, s, expected) in cases {
            assert_eq!(is_pdb_refusal(&s), expected, "{name}");
        }
    }

    #[test]
    fn rejections_are_final_and_transient_failures_retry() {
        let cases = [
            (400, false),
            (403, false),
            (404, false),
            (409, true),
            (422, false),
            (429, true),
            (500, true),
            (503, true),
        ];
        for (code, retryable) in cases {
            assert_eq!(status_retryable(code), retryable, "{code}");
        }
    }
}
