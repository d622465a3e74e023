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

/// One EMF document: a namespace, one dimension set, and metric values. Metrics named with
/// [`EmfRecord::total`] are published a second time without any dimension: CloudWatch alarms
/// cannot SEARCH across dimension values, so an alarm needs such a series.
#[derive(Clone, Debug, Default)]
pub struct EmfRecord {
    dimensions: Vec<(String, String)>,
    metrics: Vec<(String, f64, &'static str)>,
    totals: Vec<String>,
}

/// The metric the HandledErrorsAlarm of template.yaml watches, without dimensions.
pub const ERRORS: &str = "Errors";

/// Publishes one handled error (a failed write, a 401/403, an unreachable metric source) under
/// `dimension`, and once more without dimensions for the alarm.
pub fn emit_error(namespace: &str, dimension: (&str, &str)) {
    EmfRecord::new()
        .dimension(dimension.0, dimension.1)
        .metric(ERRORS, 1.0, Unit::Count)
        .total(ERRORS)
        .emit(namespace);
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

    /// Also publishes the metric `name` (added with [`EmfRecord::metric`]) without dimensions.
    pub fn total(mut self, name: &str) -> Self {
        self.totals.push(name.to_string());
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
        let mut directives =
            vec![json!({"Namespace": namespace, "Dimensions": [dims], "Metrics": defs})];
        let totals: Vec<Value> = self
            .metrics
            .iter()
            .filter(|(name, _, _)| self.totals.contains(name))
            .map(|(name, _, unit)| json!({"Name": name, "Unit": unit}))
            .collect();
        if !totals.is_empty() {
            // An empty dimension set: the series without dimensions.
            directives.push(json!({"Namespace": namespace, "Dimensions": [[]], "Metrics": totals}));
        }
        root.insert(
            "_aws".into(),
            json!({"Timestamp": timestamp_ms, "CloudWatchMetrics": directives}),
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
        let now_ms = crate::clock::unix_millis();
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
        assert_eq!(v["_aws"]["CloudWatchMetrics"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn a_total_is_declared_again_without_dimensions() {
        let line = EmfRecord::new()
            .dimension("Target", "llama")
            .metric("Forecast", 2.5, Unit::None)
            .metric("Errors", 1.0, Unit::Count)
            .total("Errors")
            .render("Prewarm", 1_700_000_000_000);
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            v["_aws"]["CloudWatchMetrics"],
            json!([
                {"Namespace": "Prewarm", "Dimensions": [["Target"]], "Metrics": [
                    {"Name": "Forecast", "Unit": "None"}, {"Name": "Errors", "Unit": "Count"}]},
                {"Namespace": "Prewarm", "Dimensions": [[]], "Metrics": [
                    {"Name": "Errors", "Unit": "Count"}]}
            ])
        );
        assert_eq!(v["Errors"], 1.0);
    }
}
