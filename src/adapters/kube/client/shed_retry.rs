//! A request the apiserver shed for load, tried again after the wait it asks for.
//!
//! API Priority and Fairness (and the max-in-flight filter before it) answers a request it has
//! no seat for with 429 and `Retry-After: 1`. Under such a storm every drain step makes a dozen
//! calls, so failing the step on any one 429 (and retrying the whole step by message a recheck
//! later) leaves a drain almost no step that gets through before its deadline. client-go tries
//! such a request again on its own; this does the same, a few times, waiting what the server
//! asked for (at most `MAX_WAIT`), so a step outlives a storm within its own timeout.
//!
//! Only that kind of 429: a 429 from the Eviction API is a PodDisruptionBudget's answer, never
//! waited on here (the drain decides when to ask again), and a 429 without `Retry-After` is
//! left to the caller, as is every other status (kube's own retry stays off: `client.rs`).

use std::time::Duration;

use http::{Request, Response, StatusCode};
use kube::client::Body;
use tower::retry::Policy;
use tower::BoxError;

/// Tries after the first, per request.
pub const SHED_RETRIES: u32 = 3;
/// The longest wait honoured between two tries: the step's whole timeout is 20 s.
pub const MAX_WAIT: Duration = Duration::from_secs(2);

/// How long to wait before sending a request to `path` again after `status` with the
/// `retry_after` header value; None: do not send it again.
pub fn shed_wait(path: &str, status: StatusCode, retry_after: Option<&str>) -> Option<Duration> {
    if status != StatusCode::TOO_MANY_REQUESTS || path.ends_with("/eviction") {
        return None;
    }
    let seconds: u64 = retry_after?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds).clamp(Duration::from_millis(200), MAX_WAIT))
}

/// The tower retry policy: `shed_wait`, at most `SHED_RETRIES` times per request (tower clones
/// the policy for each request, so the count starts afresh).
#[derive(Clone, Debug)]
pub struct ShedRetry {
    left: u32,
}

impl Default for ShedRetry {
    fn default() -> Self {
        ShedRetry { left: SHED_RETRIES }
    }
}

impl<B> Policy<Request<Body>, Response<B>, BoxError> for ShedRetry {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        req: &mut Request<Body>,
        result: &mut Result<Response<B>, BoxError>,
    ) -> Option<Self::Future> {
        let response = result.as_ref().ok()?;
        let retry_after = response
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok());
        let wait = shed_wait(req.uri().path(), response.status(), retry_after)?;
        self.left = self.left.checked_sub(1)?;
        tracing::debug!(
            path = req.uri().path(),
            wait_ms = wait.as_millis() as u64,
            "the apiserver shed the request (429): trying again"
        );
        Some(tokio::time::sleep(wait))
    }

    fn clone_request(&mut self, req: &Request<Body>) -> Option<Request<Body>> {
        // A streamed body cannot be sent twice: such a request is not tried again.
        let body = req.body().try_clone()?;
        let mut copy = Request::new(body);
        *copy.method_mut() = req.method().clone();
        *copy.uri_mut() = req.uri().clone();
        *copy.version_mut() = req.version();
        *copy.headers_mut() = req.headers().clone();
        *copy.extensions_mut() = req.extensions().clone();
        Some(copy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A situation: name, path, status, Retry-After, the wait expected in ms.
    type Row = (
        &'static str,
        &'static str,
        u16,
        Option<&'static str>,
        Option<u64>,
    );

    #[test]
    fn which_answers_are_waited_on() {
        let pods = "/api/v1/namespaces/ml/pods";
        let eviction = "/api/v1/namespaces/ml/pods/llama-0/eviction";
        // (situation, path, status, Retry-After, wait expected) - by hand from the rules above.
        let rows: &[Row] = &[
            ("APF's 429 asks for 1 s", pods, 429, Some("1"), Some(1_000)),
            (
                "a long wait is cut to MAX_WAIT",
                pods,
                429,
                Some("30"),
                Some(2_000),
            ),
            (
                "a zero wait still waits 200 ms",
                pods,
                429,
                Some("0"),
                Some(200),
            ),
            (
                "a PDB's 429 on an eviction is the drain's",
                eviction,
                429,
                Some("1"),
                None,
            ),
            (
                "a 429 with no Retry-After is the caller's",
                pods,
                429,
                None,
                None,
            ),
            (
                "a date in Retry-After is not a wait",
                pods,
                429,
                Some("Fri, 04 Dec 2026 10:00:00 GMT"),
                None,
            ),
            ("a 503 is the caller's", pods, 503, Some("1"), None),
            ("a 409 is the caller's", pods, 409, None, None),
        ];
        for (name, path, status, after, want) in rows {
            let got = shed_wait(path, StatusCode::from_u16(*status).unwrap(), *after);
            assert_eq!(got.map(|d| d.as_millis() as u64), *want, "{name}");
        }
    }

    #[tokio::test]
    async fn a_request_is_tried_again_at_most_shed_retries_times() {
        let mut policy = ShedRetry::default();
        let mut req = Request::builder()
            .uri("/api/v1/nodes")
            .body(Body::empty())
            .unwrap();
        let shed = || {
            Ok::<_, BoxError>(
                Response::builder()
                    .status(429)
                    .header("Retry-After", "1")
                    .body(())
                    .unwrap(),
            )
        };
        let mut tries = 0;
        while policy.retry(&mut req, &mut shed()).is_some() {
            tries += 1;
            assert!(tries <= 10, "no end to the retries");
        }
        assert_eq!(tries, SHED_RETRIES);
        let copy = Policy::<_, Response<()>, BoxError>::clone_request(&mut policy, &req);
        assert!(copy.is_some(), "an empty body is sent again");
    }
}
