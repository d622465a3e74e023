//! The one error type of prewarm. Every variant knows whether trying again later can help,
//! which decides between "report a batch item failure / try next tick" and "give up loudly".

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting is missing or out of range. Raised at start-up, naming the variable.
    #[error("configuration error in {var}: {message}")]
    Config { var: String, message: String },

    /// A metric source answered badly or not at all.
    #[error("metrics for target {target}: {message}")]
    Metrics {
        target: String,
        message: String,
        retryable: bool,
    },

    /// A Kubernetes API call failed. `retryable` is false for rejections (4xx other than 409/429).
    #[error("kubernetes {operation} {object}: {message}")]
    Kube {
        operation: String,
        object: String,
        message: String,
        retryable: bool,
    },

    /// A Kubernetes write lost an optimistic-concurrency race (HTTP 409: the object changed
    /// since it was read). Always retryable: read again and re-plan
    /// (`adapters::kube::retry_on_conflict`). Its own variant so callers decide on the kind of
    /// error, never on its message.
    #[error("kubernetes {operation} {object}: {message}")]
    Conflict {
        operation: String,
        object: String,
        message: String,
    },

    /// An AWS API call failed (SQS, EKS, STS, CloudWatch).
    #[error("aws {service} {operation}: {message}")]
    Aws {
        service: String,
        operation: String,
        message: String,
        retryable: bool,
    },

    /// An event or message that can never be processed (not JSON, missing fields). Poison: it is
    /// reported as failed so SQS moves it to the dead-letter queue after maxReceiveCount.
    #[error("malformed event {id}: {message}")]
    Malformed { id: String, message: String },

    /// An object the configuration names does not exist (NodePool, headroom object).
    #[error("{kind} {name} not found")]
    NotFound { kind: String, name: String },
}

impl Error {
    /// Whether the same operation may succeed if tried again later.
    pub fn retryable(&self) -> bool {
        match self {
            Error::Config { .. } | Error::Malformed { .. } | Error::NotFound { .. } => false,
            Error::Conflict { .. } => true,
            Error::Metrics { retryable, .. }
            | Error::Kube { retryable, .. }
            | Error::Aws { retryable, .. } => *retryable,
        }
    }

    /// A short stable name of the variant, for log fields and EMF dimensions.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Config { .. } => "config",
            Error::Metrics { .. } => "metrics",
            Error::Kube { .. } => "kube",
            Error::Conflict { .. } => "conflict",
            Error::Aws { .. } => "aws",
            Error::Malformed { .. } => "malformed",
            Error::NotFound { .. } => "not_found",
        }
    }

    pub fn aws(
        service: impl Into<String>,
        operation: impl Into<String>,
        message: impl std::fmt::Display,
        retryable: bool,
    ) -> Self {
        Error::Aws {
            service: service.into(),
            operation: operation.into(),
            message: message.to_string(),
            retryable,
        }
    }

    pub fn kube(
        operation: impl Into<String>,
        object: impl Into<String>,
        message: impl std::fmt::Display,
        retryable: bool,
    ) -> Self {
        Error::Kube {
            operation: operation.into(),
            object: object.into(),
            message: message.to_string(),
            retryable,
        }
    }

    pub fn config(var: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Config {
            var: var.into(),
            message: message.into(),
        }
    }

    /// Whether this is a write conflict (409), the one error a re-read and re-plan can cure.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Conflict { .. })
    }

    pub fn conflict(
        operation: impl Into<String>,
        object: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Error::Conflict {
            operation: operation.into(),
            object: object.into(),
            message: message.into(),
        }
    }

    pub fn malformed(id: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Malformed {
            id: id.into(),
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poison_and_config_errors_are_final_transient_ones_retry() {
        let cases = [
            (Error::config("TICK_SECONDS", "must be 5..=60"), false),
            (Error::malformed("m-1", "not JSON"), false),
            (
                Error::kube("patch", "nodepool/gpu", "503 ServiceUnavailable", true),
                true,
            ),
            (
                Error::conflict("patch", "nodepool/gpu", "409 Conflict"),
                true,
            ),
            (
                Error::Metrics {
                    target: "llama".into(),
                    message: "400 bad query".into(),
                    retryable: false,
                },
                false,
            ),
        ];
        for (error, expected) in cases {
            assert_eq!(error.retryable(), expected, "{error}");
        }
    }

    #[test]
    fn config_error_names_the_variable() {
        let e = Error::config("LEAD_TIME_SECONDS", "must be between 10 and 3600, got 0");
        assert!(e.to_string().contains("LEAD_TIME_SECONDS"));
    }
}
