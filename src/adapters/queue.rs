//! The SQS side of the interruption queue, and every SQS call of prewarm: the tick's resume-drain
//! message (`adapters::events::resume`), which hands a drain nobody drives to the interruption
//! function; the interruption function's continuations (one body, each message with its own
//! attributes and delay) and its visibility changes. What to send is decided by the handlers;
//! this module only shapes the requests and makes the calls.

use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};

use crate::adapters::events::ResumeDrain;
use crate::error::{Error, Result};

/// SendMessageBatch takes at most this many entries per call.
const BATCH_SIZE: usize = 10;

/// One message to send with a shared body: its attributes (name, data type, value) and its
/// DelaySeconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Outgoing {
    pub attributes: Vec<(&'static str, &'static str, String)>,
    pub delay_s: i32,
}

/// `arn:aws:sqs:us-east-1:123456789012:name` -> `https://sqs.us-east-1.amazonaws.com/123456789012/name`.
pub fn queue_url_from_arn(arn: &str) -> Option<String> {
    let parts: Vec<&str> = arn.split(':').collect();
    match parts.as_slice() {
        ["arn", partition, "sqs", region, account, name] if !name.is_empty() => {
            let domain = if partition.starts_with("aws-cn") {
                "amazonaws.com.cn"
            } else {
                "amazonaws.com"
            };
            Some(format!("https://sqs.{region}.{domain}/{account}/{name}"))
        }
        _ => None,
    }
}

fn aws_error(operation: &str, message: String, retryable: bool) -> Error {
    Error::Aws {
        service: "sqs".into(),
        operation: operation.into(),
        message,
        retryable,
    }
}

/// Sends one resume-drain message; returns its SQS message id.
pub async fn send_resume(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    resume: &ResumeDrain,
) -> Result<String> {
    let out = sqs
        .send_message()
        .queue_url(queue_url)
        .message_body(resume.body())
        .send()
        .await
        .map_err(|e| {
            aws_error(
                "SendMessage",
                aws_sdk_sqs::error::DisplayErrorContext(&e).to_string(),
                true,
            )
        })?;
    Ok(out.message_id.unwrap_or_default())
}

/// The batch entries of `messages` (ids `c0`, `c1`, ... across the whole list), `BATCH_SIZE` per
/// call.
fn batches(body: &str, messages: &[Outgoing]) -> Result<Vec<Vec<SendMessageBatchRequestEntry>>> {
    let error =
        |e: aws_sdk_sqs::error::BuildError| aws_error("SendMessageBatch", e.to_string(), true);
    messages
        .chunks(BATCH_SIZE)
        .enumerate()
        .map(|(chunk_no, chunk)| {
            chunk
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    let mut entry = SendMessageBatchRequestEntry::builder()
                        .id(format!("c{}", chunk_no * BATCH_SIZE + i))
                        .message_body(body)
                        .delay_seconds(m.delay_s);
                    for (name, data_type, value) in &m.attributes {
                        let value = MessageAttributeValue::builder()
                            .data_type(*data_type)
                            .string_value(value)
                            .build()
                            .map_err(error)?;
                        entry = entry.message_attributes(*name, value);
                    }
                    entry.build().map_err(error)
                })
                .collect()
        })
        .collect()
}

/// Sends `messages`, all with `body`; returns how many were sent. Stops at the first call that
/// fails or has an entry refused.
pub async fn send_with_body(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    body: &str,
    messages: &[Outgoing],
) -> Result<usize> {
    let error = |message: String| aws_error("SendMessageBatch", message, true);
    for entries in batches(body, messages)? {
        let count = entries.len();
        let out = sqs
            .send_message_batch()
            .queue_url(queue_url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|e| error(aws_sdk_sqs::error::DisplayErrorContext(&e).to_string()))?;
        if !out.failed.is_empty() {
            return Err(error(format!(
                "{} of {} continuations refused: {:?}",
                out.failed.len(),
                count,
                out.failed
                    .iter()
                    .map(|f| f.message.clone())
                    .collect::<Vec<_>>()
            )));
        }
    }
    Ok(messages.len())
}

/// Sets the visibility of the message with `receipt_handle` to `seconds`.
pub async fn change_visibility(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    receipt_handle: Option<&str>,
    seconds: i32,
) -> Result<()> {
    let operation = "ChangeMessageVisibility";
    let handle = receipt_handle
        .ok_or_else(|| aws_error(operation, "the record has no receipt handle".into(), false))?;
    sqs.change_message_visibility()
        .queue_url(queue_url)
        .receipt_handle(handle)
        .visibility_timeout(seconds)
        .send()
        .await
        .map(|_| ())
        .map_err(|e| {
            aws_error(
                operation,
                aws_sdk_sqs::error::DisplayErrorContext(&e).to_string(),
                true,
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_urls_from_arns() {
        assert_eq!(
            queue_url_from_arn("arn:aws:sqs:us-east-1:123456789012:prewarm-InterruptionQueue-1A2B"),
            Some(
                "https://sqs.us-east-1.amazonaws.com/123456789012/prewarm-InterruptionQueue-1A2B"
                    .into()
            )
        );
        assert_eq!(
            queue_url_from_arn("arn:aws-cn:sqs:cn-north-1:1:q"),
            Some("https://sqs.cn-north-1.amazonaws.com.cn/1/q".into())
        );
        assert_eq!(queue_url_from_arn("arn:aws:sns:us-east-1:1:topic"), None);
        assert_eq!(queue_url_from_arn("not an arn"), None);
    }

    #[test]
    fn continuations_go_ten_per_call_with_ids_across_the_list() {
        let m = |delay_s: i32| Outgoing {
            attributes: vec![("prewarm-attempt", "Number", "3".into())],
            delay_s,
        };
        let messages: Vec<Outgoing> = (0..23).map(m).collect();
        let got = batches("body", &messages).unwrap();
        assert_eq!(got.iter().map(Vec::len).collect::<Vec<_>>(), [10, 10, 3]);
        let last = &got[2][2];
        assert_eq!((last.id(), last.delay_seconds()), ("c22", Some(22)));
        assert_eq!(last.message_body(), "body");
        let attempt = &last.message_attributes().unwrap()["prewarm-attempt"];
        assert_eq!(
            (attempt.data_type(), attempt.string_value()),
            ("Number", Some("3"))
        );
    }
}
