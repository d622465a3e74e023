//! Event parsing: SQS records and EventBridge envelopes into core notices. (Interruption owner.)
