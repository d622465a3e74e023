//! The one optimistic-concurrency loop of prewarm: every write carries the `resourceVersion` it
//! was planned from, the apiserver refuses it with 409 when anyone wrote in between, and the
//! writer then observes again and plans again. Callers differ only in what one attempt does
//! (observe + plan + write) and how many attempts they can afford (a tick can leave the object
//! to the next tick; a drain cannot wait a minute).

use std::future::Future;
use std::time::Duration;

use crate::error::Result;

/// The pause before re-observing after the n-th conflict (n >= 1): 25 ms doubling, at most
/// 400 ms. Controllers write status in bursts (a new Deployment's status changes several times in
/// its first second, observed as three 409s in a row on the stack); re-reading at once can land
/// inside the same burst, a short pause lets it settle. Small against a drain's check interval.
pub fn conflict_backoff(n: usize) -> Duration {
    let shift = u32::try_from(n.saturating_sub(1))
        .unwrap_or(u32::MAX)
        .min(4);
    Duration::from_millis(25 << shift)
}

/// Runs `attempt(n)` for n = 0, 1, ... while it fails with a write conflict
/// (`Error::Conflict`), at most `attempts` times (at least once). Any other outcome, success or
/// error, is returned at once. Out of attempts, the last conflict is returned: it is retryable,
/// so the caller's caller tries again later rather than reporting a write that did not happen.
///
/// `n` lets an attempt reuse what the caller already read on the first run and observe afresh
/// on later ones.
pub async fn retry_on_conflict<T, F, Fut>(attempts: usize, mut attempt: F) -> Result<T>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut n = 0;
    loop {
        match attempt(n).await {
            Err(e) if e.is_conflict() && n + 1 < attempts => {
                n += 1;
                tokio::time::sleep(conflict_backoff(n)).await;
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_from_25_ms_and_stops_at_400_ms() {
        let ms: Vec<u128> = (1..=7).map(|n| conflict_backoff(n).as_millis()).collect();
        assert_eq!(ms, vec![25, 50, 100, 200, 400, 400, 400]);
    }
    use crate::error::Error;
    use std::cell::RefCell;

    /// An attempt that conflicts `conflicts` times, then ends with `then`; records the n it saw.
    async fn run(
        attempts: usize,
        conflicts: usize,
        then: Result<&'static str>,
    ) -> (Result<&'static str>, Vec<usize>) {
        let seen = RefCell::new(Vec::new());
        let then = RefCell::new(Some(then));
        let got = retry_on_conflict(attempts, |n| {
            seen.borrow_mut().push(n);
            let out = if n < conflicts {
                Err(Error::conflict(
                    "patch",
                    "nodepool gpu",
                    format!("409 #{n}"),
                ))
            } else {
                then.borrow_mut().take().expect("called after the end")
            };
            async move { out }
        })
        .await;
        (got, seen.into_inner())
    }

    fn message(e: &Error) -> String {
        e.to_string()
    }

    #[tokio::test]
    async fn conflicts_are_retried_until_the_attempts_run_out() {
        // (attempts, conflicts before the end, expected attempts seen, expected result) by hand.
        let ok = "written";
        let (got, seen) = run(5, 0, Ok(ok)).await;
        assert_eq!(
            (got.unwrap(), seen),
            (ok, vec![0]),
            "no conflict: one attempt"
        );

        let (got, seen) = run(5, 2, Ok(ok)).await;
        assert_eq!((got.unwrap(), seen), (ok, vec![0, 1, 2]), "two conflicts");

        let (got, seen) = run(3, 2, Ok(ok)).await;
        assert_eq!(
            (got.unwrap(), seen),
            (ok, vec![0, 1, 2]),
            "last attempt wins"
        );

        let (got, seen) = run(3, 9, Ok(ok)).await;
        let e = got.unwrap_err();
        assert_eq!(seen, vec![0, 1, 2], "never more than the attempts");
        assert!(e.is_conflict() && e.retryable(), "{e}");
        assert!(message(&e).ends_with("409 #2"), "the last conflict: {e}");

        let (got, seen) = run(0, 9, Ok(ok)).await;
        assert_eq!(seen, vec![0], "zero attempts still tries once");
        assert!(got.unwrap_err().is_conflict());
    }

    #[tokio::test]
    async fn other_errors_end_the_loop_at_once() {
        let kube = |operation: &str, message: &str, retryable| {
            Error::kube(operation, "nodepool gpu", message, retryable)
        };
        let rejected = kube("patch", "422 Invalid", false);
        let (got, seen) = run(5, 1, Err(rejected)).await;
        assert_eq!(seen, vec![0, 1]);
        let e = got.unwrap_err();
        assert!(!e.is_conflict() && !e.retryable(), "{e}");
        // A 503 is retryable but not a conflict: re-planning cannot help, the caller retries.
        let unavailable = kube("get", "503", true);
        let (got, seen) = run(5, 0, Err(unavailable)).await;
        assert_eq!(seen, vec![0]);
        assert_eq!(
            message(&got.unwrap_err()),
            "kubernetes get nodepool gpu: 503"
        );
    }
}
