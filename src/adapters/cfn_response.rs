//! The CloudFormation custom resource contract, prewarm's side of it: which request came
//! (`aws_lambda_events`' types), the response body, and its delivery. CloudFormation waits for a
//! JSON body PUT to the request's pre-signed `ResponseURL` (an S3 URL signed for an empty
//! Content-Type, so none is sent): `Status` SUCCESS or FAILED, a `Reason`, the
//! `PhysicalResourceId`, the request's `StackId`, `RequestId` and `LogicalResourceId`, and `Data`.
//! Changes when that contract does.

use std::collections::HashMap;

use aws_lambda_events::event::cloudformation::{
    CloudFormationCustomResourceRequest, CloudFormationCustomResourceResponse,
    CloudFormationCustomResourceResponseStatus,
};
use serde_json::Value;

use crate::error::{Error, Result};

pub type Request = CloudFormationCustomResourceRequest;

/// A custom resource request, when `event` is one (it names a `RequestType` and a
/// `ResponseURL`); None for any other event (the tick's schedule).
pub fn request_of(event: &Value) -> Option<std::result::Result<Request, String>> {
    let is_request = event.get("RequestType").is_some() && event.get("ResponseURL").is_some();
    is_request.then(|| serde_json::from_value(event.clone()).map_err(|e| e.to_string()))
}

/// The fields of a request every answer echoes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Echo {
    pub response_url: String,
    pub stack_id: String,
    pub request_id: String,
    pub logical_resource_id: String,
    /// The request's physical id (Update, Delete); None on Create.
    pub physical_resource_id: Option<String>,
}

/// What a request is, and what to echo.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestKind {
    Create,
    Update,
    Delete,
}

/// The fields every request echoes. The three request types carry them under the same names
/// but share no trait, so one macro reads them from whichever it is given.
macro_rules! echo {
    ($r:expr, $physical_resource_id:expr) => {
        Echo {
            response_url: $r.response_url.clone(),
            stack_id: $r.stack_id.clone(),
            request_id: $r.request_id.clone(),
            logical_resource_id: $r.logical_resource_id.clone(),
            physical_resource_id: $physical_resource_id,
        }
    };
}

/// None for a request type this crate version does not know (the type is non-exhaustive).
pub fn echo_of(request: &Request) -> Option<(RequestKind, Echo)> {
    Some(match request {
        CloudFormationCustomResourceRequest::Create(r) => (RequestKind::Create, echo!(r, None)),
        CloudFormationCustomResourceRequest::Update(r) => (
            RequestKind::Update,
            echo!(r, Some(r.physical_resource_id.clone())),
        ),
        CloudFormationCustomResourceRequest::Delete(r) => (
            RequestKind::Delete,
            echo!(r, Some(r.physical_resource_id.clone())),
        ),
        _ => return None,
    })
}

/// CloudFormation refuses a response body over 4,096 bytes: the reason is cut to fit.
pub const MAX_REASON_CHARS: usize = 2_000;

/// The response body. The physical id is the request's (Update, Delete: a changed id on Update
/// would make CloudFormation delete the "old" resource, which would restore), or on Create
/// `<logical id>-restore`, stable for the stack's life.
pub fn response_body(
    echo: &Echo,
    success: bool,
    reason: &str,
    data: HashMap<String, String>,
) -> Value {
    let mut r = CloudFormationCustomResourceResponse::default();
    r.status = if success {
        CloudFormationCustomResourceResponseStatus::Success
    } else {
        CloudFormationCustomResourceResponseStatus::Failed
    };
    r.reason = Some(reason.chars().take(MAX_REASON_CHARS).collect());
    r.physical_resource_id = echo
        .physical_resource_id
        .clone()
        .unwrap_or_else(|| format!("{}-restore", echo.logical_resource_id));
    r.stack_id = echo.stack_id.clone();
    r.request_id = echo.request_id.clone();
    r.logical_resource_id = echo.logical_resource_id.clone();
    r.data = data;
    serde_json::to_value(r).expect("a response serializes")
}

/// The HTTP client for the answer (aws-lc-rs as the process's TLS provider, as for Prometheus).
pub fn http_client() -> Result<reqwest::Client> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(|e| {
            Error::aws(
                "cloudformation",
                "custom resource response",
                format!("HTTP client: {e}"),
                false,
            )
        })
}

/// PUTs `body` to the pre-signed `url`, with no Content-Type (the signature covers an empty
/// one). A failure is retryable: the invocation fails, and Lambda's asynchronous retry (or
/// CloudFormation's timeout) follows.
pub async fn send(http: &reqwest::Client, url: &str, body: &Value) -> Result<()> {
    let failed =
        |message: String| Error::aws("cloudformation", "custom resource response", message, true);
    let response = http
        .put(url)
        .header(reqwest::header::CONTENT_TYPE, "")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| failed(e.to_string()))?;
    let status = response.status();
    if !status.is_success() {
        let text = response.text().await.unwrap_or_default();
        return Err(failed(format!(
            "the response URL answered {status}: {text}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(kind: &str) -> Value {
        let mut e = json!({
            "RequestType": kind,
            "ServiceToken": "arn:aws:lambda:eu-west-1:123456789012:function:prewarm-tick",
            "ResponseURL": "https://cloudformation-custom-resource-response-euwest1.s3.amazonaws.com/x?X-Amz-Signature=abc",
            "StackId": "arn:aws:cloudformation:eu-west-1:123456789012:stack/prewarm/1",
            "RequestId": "req-1",
            "ResourceType": "Custom::PrewarmRestore",
            "LogicalResourceId": "RestoreOnDelete",
            "ResourceProperties": {"ServiceToken": "arn"}
        });
        if kind != "Create" {
            e["PhysicalResourceId"] = json!("RestoreOnDelete-restore");
        }
        if kind == "Update" {
            e["OldResourceProperties"] = json!({});
        }
        e
    }

    #[test]
    fn custom_resource_requests_are_told_from_the_schedule() {
        // (event, expected kind; None: not a custom resource request) - by hand.
        let scheduled = json!({"source": "aws.events", "detail-type": "Scheduled Event"});
        let cases = [
            (event("Create"), Some(RequestKind::Create)),
            (event("Update"), Some(RequestKind::Update)),
            (event("Delete"), Some(RequestKind::Delete)),
            (scheduled, None),
            (json!({}), None),
        ];
        for (e, want) in cases {
            let got = request_of(&e)
                .and_then(|r| echo_of(&r.unwrap()))
                .map(|(kind, _)| kind);
            assert_eq!(got, want, "{e}");
        }
        // A request missing a field the answer needs is an error, not a schedule.
        let broken = json!({"RequestType": "Delete", "ResponseURL": "https://x"});
        assert!(request_of(&broken).unwrap().is_err());
    }

    #[test]
    fn the_response_body_echoes_the_request() {
        let (_, create) = echo_of(&request_of(&event("Create")).unwrap().unwrap()).unwrap();
        let (_, delete) = echo_of(&request_of(&event("Delete")).unwrap().unwrap()).unwrap();
        let data: HashMap<String, String> = [("Failed".to_string(), "1".to_string())].into();
        // By hand: the contract's field names, SUCCESS/FAILED, the request's ids echoed; on
        // Create the id is "<LogicalResourceId>-restore", later requests keep theirs.
        assert_eq!(
            response_body(&create, true, "nothing to do on Create", HashMap::new()),
            json!({"Status": "SUCCESS", "Reason": "nothing to do on Create",
                "PhysicalResourceId": "RestoreOnDelete-restore",
                "StackId": "arn:aws:cloudformation:eu-west-1:123456789012:stack/prewarm/1",
                "RequestId": "req-1", "LogicalResourceId": "RestoreOnDelete",
                "NoEcho": false, "Data": {}})
        );
        let failed = response_body(&delete, false, "boom", data);
        assert_eq!(failed["Status"], "FAILED");
        assert_eq!(failed["PhysicalResourceId"], "RestoreOnDelete-restore");
        assert_eq!(failed["Data"], json!({"Failed": "1"}));
        let long = "x".repeat(5_000);
        let cut = response_body(&delete, true, &long, HashMap::new());
        assert_eq!(cut["Reason"].as_str().unwrap().len(), MAX_REASON_CHARS);
    }
}
