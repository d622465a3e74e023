//! Logging and CloudWatch Embedded Metric Format (EMF).
//!
//! Logs are JSON lines (one per decision or drain step) so Logs Insights can query their fields.
//! EMF metrics are separate JSON lines printed to stdout, which CloudWatch turns into metrics
//! without any API call from the function.

use serde_json::{json, Map, Value};

/// Sets up JSON logging to stdout; `RUST_LOG` overrides the level (default info).
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(true)
        .with_span_list(false)
        .with_target(false)
        .without_time()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// CloudWatch units used by prewarm's metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Count,
    Milliseconds,
    Seconds,
    Percent,
    None,
}

impl Unit {
    fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Milliseconds => "Milliseconds",
            Unit::Seconds => "Seconds",
            Unit::Percent => "Percent",
            Unit::None => "None",
        }
    }
}

/// One EMF document: a namespace, one dimension set, and metric values.
#[derive(Clone, Debug, Default)]
pub struct EmfRecord {
    dimensions: Vec<(String, String)>,
    metrics: Vec<(String, f64, &'static str)>,
}

impl EmfRecord {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn dimension(mut self, name: &str, value: &str) -> Self {
        self.dimensions.push((name.to_string(), value.to_string()));
        self
    }

    /// Adds a metric; non-finite values are dropped (CloudWatch rejects them).
    pub fn metric(mut self, name: &str, value: f64, unit: Unit) -> Self {
        if value.is_finite() {
            self.metrics.push((name.to_string(), value, unit.as_str()));
        }
        self
    }

    /// Renders the EMF JSON line for `timestamp_ms`.
    pub fn render(&self, namespace: &str, timestamp_ms: i64) -> String {
        let mut root = Map::new();
        let dims: Vec<&str> = self.dimensions.iter().map(|(k, _)| k.as_str()).collect();
        let defs: Vec<Value> = self
            .metrics
            .iter()
            .map(|(name, _, unit)| json!({"Name": name, "Unit": unit}))
            .collect();
        root.insert(
            "_aws".into(),
            json!({
                "Timestamp": timestamp_ms,
                "CloudWatchMetrics": [{"Namespace": namespace, "Dimensions": [dims], "Metrics": defs}]
            }),
        );
        for (k, v) in &self.dimensions {
            root.insert(k.clone(), Value::String(v.clone()));
        }
        for (name, value, _) in &self.metrics {
            root.insert(name.clone(), json!(value));
        }
        Value::Object(root).to_string()
    }

    /// Prints the record to stdout, where the Lambda log agent picks EMF up.
    pub fn emit(&self, namespace: &str) {
        if self.metrics.is_empty() {
            return;
        }
        let now_ms = chrono::Utc::now().timestamp_millis();
        println!("{}", self.render(namespace, now_ms));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emf_document_declares_every_metric_and_dimension() {
        let line = EmfRecord::new()
            .dimension("Target", "llama")
            .metric("Forecast", 2.5, Unit::Count)
            .metric("Dropped", f64::NAN, Unit::Count)
            .render("Prewarm", 1_700_000_000_000);
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["_aws"]["Timestamp"], 1_700_000_000_000i64);
        let decl = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(decl["Namespace"], "Prewarm");
        assert_eq!(decl["Dimensions"], json!([["Target"]]));
        assert_eq!(
            decl["Metrics"],
            json!([{"Name": "Forecast", "Unit": "Count"}])
        );
        assert_eq!(v["Target"], "llama");
        assert_eq!(v["Forecast"], 2.5);
        assert!(v.get("Dropped").is_none(), "NaN must not be emitted");
    }
}
