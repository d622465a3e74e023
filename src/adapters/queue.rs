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
/// SendMessageBatch refuses a call whose messages add up to more than 256 KiB (the sum of their
/// lengths; `BatchRequestTooLong`). A message's length counts its body and its attributes (name,
/// data type, value).
const MAX_BATCH_BYTES: usize = 262_144;

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
    Error::aws("sqs", operation, message, retryable)
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

/// A message's length as SQS counts it against the batch limit: body and attributes.
fn message_bytes(body: &str, m: &Outgoing) -> usize {
    body.len()
        + m.attributes
            .iter()
            .map(|(name, data_type, value)| name.len() + data_type.len() + value.len())
            .sum::<usize>()
}

/// `messages` in calls: in order, at most `BATCH_SIZE` entries and `MAX_BATCH_BYTES` per call (a
/// Health body of 100 KB goes two to a call, not ten). A message over the limit on its own goes
/// alone, for SQS to take or refuse by the queue's own maximum message size.
fn calls(body: &str, messages: &[Outgoing]) -> Vec<std::ops::Range<usize>> {
    let mut out: Vec<std::ops::Range<usize>> = Vec::new();
    let mut bytes = 0;
    for (i, m) in messages.iter().enumerate() {
        let size = message_bytes(body, m);
        match out.last_mut() {
            Some(call) if call.len() < BATCH_SIZE && bytes + size <= MAX_BATCH_BYTES => {
                call.end = i + 1;
                bytes += size;
            }
            _ => {
                out.push(i..i + 1);
                bytes = size;
            }
        }
    }
    out
}

/// The batch entries of `messages` (ids `c0`, `c1`, ... across the whole list), in calls as
/// [`calls`] cuts them.
fn batches(body: &str, messages: &[Outgoing]) -> Result<Vec<Vec<SendMessageBatchRequestEntry>>> {
    let error =
        |e: aws_sdk_sqs::error::BuildError| aws_error("SendMessageBatch", e.to_string(), true);
    calls(body, messages)
        .into_iter()
        .map(|call| {
            messages[call.clone()]
                .iter()
                .zip(call)
                .map(|(m, i)| {
                    let mut entry = SendMessageBatchRequestEntry::builder()
                        .id(format!("c{i}"))
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

    /// A Health body of about 100 KB (thousands of instances): a call holds two continuations
    /// (2 x 100,022 = 200,044 bytes; three would be 300,066 > 262,144), not ten.
    #[test]
    fn continuations_of_a_large_body_stay_under_the_batch_payload_limit() {
        let body = "x".repeat(100_000);
        // 15 + 6 + 1 bytes of attribute per message: 100,022 bytes each.
        let m = Outgoing {
            attributes: vec![("prewarm-attempt", "Number", "3".into())],
            delay_s: 0,
        };
        let messages = vec![m; 23];
        let got = batches(&body, &messages).unwrap();
        let sizes: Vec<usize> = got.iter().map(Vec::len).collect();
        assert_eq!(sizes, [2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1]);
        assert_eq!(got[11][0].id(), "c22");
        // Over the limit on its own (300,000 bytes): each goes alone, in order.
        let huge = "y".repeat(300_000);
        let messages = vec![
            Outgoing {
                attributes: vec![],
                delay_s: 0,
            };
            3
        ];
        let got = batches(&huge, &messages).unwrap();
        let ids: Vec<Vec<&str>> = got
            .iter()
            .map(|b| b.iter().map(|e| e.id()).collect())
            .collect();
        assert_eq!(ids, [["c0"], ["c1"], ["c2"]]);
    }
}
