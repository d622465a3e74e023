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
