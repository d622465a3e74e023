//! The stack's `Custom::PrewarmRestore` resource, served by the tick function: Create and Update
//! do nothing; Delete (the stack being deleted, before the functions go) runs the restore, so
//! deleting the stack leaves no balloons, frozen budgets, limits, floors, surges or placeholders
//! behind. Changes when what the stack does on its own deletion changes.
//!
//! A Delete always answers SUCCESS: a FAILED Delete leaves the stack in DELETE_FAILED until
//! someone retains the resource by hand, and a cluster already gone (or unreachable) must not
//! hold the stack forever. What could not be restored is logged as an error and reported in the
//! answer's `Reason` and `Data` (`Restored`, `Kept`, `Failed`): the stack's events show it, and
//! `prewarm restore` finishes the job. Nodes are reported, not written: the tick never writes a
//! node (`handlers::restore::Scope::ReportNodes`).

use std::collections::HashMap;

use serde_json::{json, Value};

use super::restore::{log_summary, restore_everything, RestoreSummary, Scope};
use crate::adapters::cfn_response::{self, Echo, Request, RequestKind};
use crate::adapters::kube::restore::RestoreOutcome;
use crate::adapters::kube::ClientCache;
use crate::config::Config;
use crate::error::Result;

/// What handling the request came to.
#[derive(Clone, Debug, PartialEq)]
pub enum Handled {
    /// Create or Update: nothing to do.
    Nothing,
    /// Delete: the restore ran.
    Restored(RestoreSummary),
    /// The request did not parse: nothing was done.
    Unreadable(String),
    /// The function could not start (its configuration): nothing was done.
    NotStarted(String),
}

/// The answer: SUCCESS or not, the reason, the data. Decided here, purely (module docs).
pub fn answer(
    kind: Option<RequestKind>,
    handled: &Handled,
) -> (bool, String, HashMap<String, String>) {
    match handled {
        Handled::Nothing => (
            true,
            "nothing to do: prewarm restores the cluster when this resource is deleted".into(),
            HashMap::new(),
        ),
        Handled::Restored(s) => {
            let data: HashMap<String, String> = [
                ("Restored", s.count(RestoreOutcome::Restored)),
                ("Kept", s.count(RestoreOutcome::Kept)),
                ("Failed", s.errors.len()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
            let mut reason = s.sentence();
            if !s.errors.is_empty() {
                reason = format!(
                    "{reason} (the stack's deletion goes on: run `prewarm restore` to finish)"
                );
            }
            (true, reason, data)
        }
        Handled::Unreadable(e) if kind == Some(RequestKind::Delete) => (
            true,
            format!("unreadable request ({e}): nothing restored; run `prewarm restore`"),
            HashMap::new(),
        ),
        Handled::Unreadable(e) => (false, format!("unreadable request: {e}"), HashMap::new()),
        // Create fails with the reason the tick cannot run: the stack rolls back saying why.
        Handled::NotStarted(e) if kind == Some(RequestKind::Delete) => (
            true,
            format!("the function cannot start ({e}): nothing restored; run `prewarm restore`"),
            HashMap::new(),
        ),
        Handled::NotStarted(e) => (
            false,
            format!("the tick function cannot start: {e}"),
            HashMap::new(),
        ),
    }
}

/// The kind and echo of a request that did not parse into `aws_lambda_events`' types, read from
/// the raw event (what an answer needs, as far as it is there).
pub fn raw_echo(event: &Value) -> (Option<RequestKind>, Echo) {
    let field = |k: &str| event.get(k).and_then(Value::as_str).map(str::to_string);
    let kind = match field("RequestType").as_deref() {
        Some("Create") => Some(RequestKind::Create),
        Some("Update") => Some(RequestKind::Update),
        Some("Delete") => Some(RequestKind::Delete),
        _ => None,
    };
    let echo = Echo {
        response_url: field("ResponseURL").unwrap_or_default(),
        stack_id: field("StackId").unwrap_or_default(),
        request_id: field("RequestId").unwrap_or_default(),
        logical_resource_id: field("LogicalResourceId").unwrap_or_default(),
        physical_resource_id: field("PhysicalResourceId"),
    };
    (kind, echo)
}

/// Serves one custom resource request and PUTs the answer. An answer that cannot be delivered
/// fails the invocation (Lambda retries an asynchronous invocation twice). `deps`: the tick's
/// cluster clients and configuration, or why it could not start; `now` in Unix seconds.
pub async fn handle(
    deps: std::result::Result<(&ClientCache, &Config), &str>,
    event: &Value,
    request: std::result::Result<Request, String>,
    now: f64,
) -> Result<Value> {
    let parsed = request.and_then(|r| {
        cfn_response::echo_of(&r).ok_or_else(|| "a request type this version does not know".into())
    });
    let (kind, echo, handled) = match (parsed, deps) {
        (Err(e), _) => {
            let (kind, echo) = raw_echo(event);
            (kind, echo, Handled::Unreadable(e))
        }
        (Ok((kind, echo)), deps) => {
            let handled = match (kind, deps) {
                (_, Err(e)) => Handled::NotStarted(e.to_string()),
                (RequestKind::Create | RequestKind::Update, _) => Handled::Nothing,
                (RequestKind::Delete, Ok((clients, config))) => {
                    Handled::Restored(restore_on_delete(clients, config, now).await)
                }
            };
            (Some(kind), echo, handled)
        }
    };
    let (success, reason, data) = answer(kind, &handled);
    let clean = matches!(handled, Handled::Nothing)
        || matches!(&handled, Handled::Restored(s) if s.errors.is_empty());
    if clean {
        tracing::info!(event = "custom_resource", request = ?kind, reason = %reason, "answered");
    } else {
        tracing::error!(event = "custom_resource", request = ?kind, error = %reason, "answered");
    }
    let body = cfn_response::response_body(&echo, success, &reason, data);
    let http = cfn_response::http_client()?;
    cfn_response::send(&http, &echo.response_url, &body).await?;
    Ok(
        json!({"customResource": kind.map(|k| format!("{k:?}")), "status": body["Status"], "reason": reason}),
    )
}

/// The restore on the stack's deletion, every line logged.
async fn restore_on_delete(clients: &ClientCache, config: &Config, now: f64) -> RestoreSummary {
    let client = match clients.get(crate::clock::system_time(now)).await {
        Ok(c) => c,
        Err(e) => {
            return RestoreSummary {
                lines: Vec::new(),
                errors: vec![format!("no Kubernetes client: {e}")],
            }
        }
    };
    let summary = restore_everything(&client, config, now, Scope::ReportNodes, false).await;
    log_summary(&summary, "stack deleted");
    summary
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::kube::restore::Restored;
    use crate::test_util::string_map;

    fn line(outcome: RestoreOutcome) -> Restored {
        Restored {
            target: "t".into(),
            object: "o".into(),
            outcome,
            detail: String::new(),
        }
    }

    #[test]
    fn a_delete_never_fails_the_stack_and_says_what_it_left() {
        let clean = RestoreSummary {
            lines: vec![
                line(RestoreOutcome::Restored),
                line(RestoreOutcome::Restored),
                line(RestoreOutcome::Kept),
                line(RestoreOutcome::Unchanged),
            ],
            errors: vec![],
        };
        let broken = RestoreSummary {
            lines: vec![line(RestoreOutcome::Restored)],
            errors: vec!["not restored: nodepool gpu: forbidden".into()],
        };
        let delete = Some(RequestKind::Delete);
        // (request, handled, expected success, a piece of the reason, expected Data) - by hand:
        // counts of "restored" / "kept" lines and of errors; a Delete is SUCCESS even when the
        // restore failed, the request did not parse or the function cannot start; any other
        // request in those cases is FAILED with the reason.
        let cases = [
            (
                Some(RequestKind::Create),
                Handled::Nothing,
                true,
                "nothing to do",
                vec![],
            ),
            (
                delete,
                Handled::Restored(clean),
                true,
                "2 restored, 1 kept, 0 failed",
                vec![("Failed", "0"), ("Kept", "1"), ("Restored", "2")],
            ),
            (
                delete,
                Handled::Restored(broken),
                true,
                "nodepool gpu: forbidden (the stack's deletion goes on",
                vec![("Failed", "1"), ("Kept", "0"), ("Restored", "1")],
            ),
            (
                delete,
                Handled::Unreadable("missing field".into()),
                true,
                "nothing restored",
                vec![],
            ),
            (
                Some(RequestKind::Update),
                Handled::Unreadable("missing field".into()),
                false,
                "unreadable",
                vec![],
            ),
            (
                None,
                Handled::Unreadable("missing field".into()),
                false,
                "unreadable",
                vec![],
            ),
            (
                Some(RequestKind::Create),
                Handled::NotStarted("METRIC_SOURCE: unset".into()),
                false,
                "METRIC_SOURCE",
                vec![],
            ),
            (
                delete,
                Handled::NotStarted("METRIC_SOURCE: unset".into()),
                true,
                "nothing restored",
                vec![],
            ),
        ];
        for (kind, handled, ok, piece, data) in cases {
            let (success, reason, got) = answer(kind, &handled);
            assert_eq!(success, ok, "{handled:?}");
            assert!(reason.contains(piece), "{handled:?}: {reason}");
            let want: HashMap<String, String> = string_map(&data);
            assert_eq!(got, want, "{handled:?}");
        }
    }

    #[test]
    fn an_unreadable_request_is_answered_from_the_raw_event() {
        let event = json!({"RequestType": "Delete", "ResponseURL": "https://s3/x",
            "StackId": "s", "RequestId": "r", "LogicalResourceId": "RestoreOnDelete"});
        let (kind, echo) = raw_echo(&event);
        assert_eq!(kind, Some(RequestKind::Delete));
        assert_eq!(echo.response_url, "https://s3/x");
        assert_eq!(echo.physical_resource_id, None);
        assert_eq!(echo.logical_resource_id, "RestoreOnDelete");
    }
}
