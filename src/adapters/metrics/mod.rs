//! Metric sources: Prometheus, Amazon Managed Prometheus (SigV4), CloudWatch. (Metrics owner.)
