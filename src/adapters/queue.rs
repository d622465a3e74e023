//! Sending to the interruption queue from the tick: the resume-drain message
//! (`adapters::events::resume`), which hands a drain nobody drives to the interruption function.

use crate::adapters::events::ResumeDrain;
use crate::error::{Error, Result};

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
        .map_err(|e| Error::Aws {
            service: "sqs".into(),
            operation: "SendMessage".into(),
            message: aws_sdk_sqs::error::DisplayErrorContext(&e).to_string(),
            retryable: true,
        })?;
    Ok(out.message_id.unwrap_or_default())
}
