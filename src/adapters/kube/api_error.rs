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
        kube::Error::Api(status) => Error::Kube {
            operation: operation.to_string(),
            object: object.to_string(),
            message: format!("{} {}: {}", status.code, status.reason, status.message),
            retryable: status_retryable(status.code),
        },
        other => Error::Kube {
            operation: operation.to_string(),
            object: object.to_string(),
            message: other.to_string(),
            // Transport errors, timeouts and the like: the next tick may get through.
            retryable: true,
        },
    }
}

/// 409 (conflict), 429 (throttled) and 5xx can succeed later; other 4xx never will.
pub fn status_retryable(code: u16) -> bool {
    code == 409 || code == 429 || code >= 500
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
