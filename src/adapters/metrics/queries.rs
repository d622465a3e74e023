//! Built-in PromQL per inference server kind, with the target's label matchers injected and the
//! target's `QueryOverrides` taking precedence.
//!
//! Every built-in query aggregates with `sum(...)` (or a ratio of sums) so that it returns one
//! series however many replicas serve the target; the range parser rejects answers with several
//! series rather than guess how to combine them.
//!
//! Arrival rate. Servers count *completed* requests, not arrivals. By conservation
//! `arrivals = completions + d(in system)/dt`, so the built-in arrival rate is the completion
//! rate plus the change of waiting + running (`deriv` over 1 m). The change term is clamped at
//! zero: `deriv` of gauges scraped every few seconds is noisy, and while a queue drains a negative
//! term would make demand look lower than what is being served. Clamping biases the estimate
//! towards more warm capacity, the safe side for this controller; in a steady state the term is
//! zero anyway. When the gauges have too few points for `deriv`, the term counts as zero
//! (`or vector(0)`), so the completion rate alone decides whether data is there at all.
//!
//! TGI counts incoming requests directly (`tgi_request_count` is incremented when a request is
//! received), so its arrival rate is that counter's rate and needs no correction.

use crate::core::spec::{QueryOverrides, ServerKind, TargetSpec};

/// The PromQL text of each signal of one target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuerySet {
    pub waiting: String,
    pub running: String,
    pub arrival_rate: String,
    pub service_time: String,
    /// KV-cache usage (0..1). Only vLLM exports it; not part of `Observation` yet, kept here so
    /// `explain`-style tooling and a future signal use the same text.
    pub kv_cache: Option<String>,
}

/// Label matchers of the target without surrounding braces or blanks. Users may write
/// `model_name="x"` or `{model_name="x"}`; both mean the same.
pub fn normalized_selector(selector: &str) -> &str {
    let s = selector.trim();
    let s = s.strip_prefix('{').unwrap_or(s);
    let s = s.strip_suffix('}').unwrap_or(s);
    s.trim().trim_end_matches(',').trim()
}

/// `metric{SEL}`, or just `metric` when the target selects everything.
fn series(metric: &str, sel: &str) -> String {
    if sel.is_empty() {
        metric.to_string()
    } else {
        format!("{metric}{{{sel}}}")
    }
}

/// `sum(rate(metric{SEL}[window]))`.
fn sum_rate(metric: &str, sel: &str, window: &str) -> String {
    format!("sum(rate({}[{window}]))", series(metric, sel))
}

/// Completion rate plus the clamped change of the in-system gauges (see the module docs).
fn arrivals_from_completions(completed: &str, gauges: &[&str], sel: &str) -> String {
    let change = gauges
        .iter()
        .map(|g| format!("sum(deriv({}[1m]))", series(g, sel)))
        .collect::<Vec<_>>()
        .join(" + ");
    format!(
        "{} + (clamp_min({change}, 0) or vector(0))",
        sum_rate(completed, sel, "1m")
    )
}

/// Mean seconds per request from a `_sum`/`_count` pair over 2 m, divided by `scale` to reach
/// seconds (1 for seconds, 1e6 for microseconds).
fn mean_latency(sum_metric: &str, count_metric: &str, sel: &str, scale: Option<&str>) -> String {
    let ratio = format!(
        "{} / {}",
        sum_rate(sum_metric, sel, "2m"),
        sum_rate(count_metric, sel, "2m")
    );
    match scale {
        None => ratio,
        Some(s) => format!("({ratio}) / {s}"),
    }
}

fn built_in(kind: ServerKind, sel: &str) -> QuerySet {
    let sum = |metric: &str| format!("sum({})", series(metric, sel));
    match kind {
        ServerKind::Vllm => QuerySet {
            waiting: sum("vllm:num_requests_waiting"),
            running: sum("vllm:num_requests_running"),
            arrival_rate: arrivals_from_completions(
                "vllm:request_success_total",
                &["vllm:num_requests_waiting", "vllm:num_requests_running"],
                sel,
            ),
            service_time: mean_latency(
                "vllm:e2e_request_latency_seconds_sum",
                "vllm:e2e_request_latency_seconds_count",
                sel,
                None,
            ),
            // vLLM 0.12 renamed gpu_cache_usage_perc; `or` keeps older servers working.
            kv_cache: Some(format!(
                "max({}) or max({})",
                series("vllm:kv_cache_usage_perc", sel),
                series("vllm:gpu_cache_usage_perc", sel)
            )),
        },
        // Triton exports no in-flight gauge. Its per-request compute time counter grows by the
        // number of requests in compute every second, so its rate is the mean number running
        // (Little's law). Request duration includes queueing, as the issue asks; it over- rather
        // than under-states the service time.
        ServerKind::Triton => QuerySet {
            waiting: sum("nv_inference_pending_request_count"),
            running: format!(
                "{} / 1e6",
                sum_rate("nv_inference_compute_infer_duration_us", sel, "1m")
            ),
            arrival_rate: arrivals_from_completions(
                "nv_inference_request_success",
                &["nv_inference_pending_request_count"],
                sel,
            ),
            service_time: mean_latency(
                "nv_inference_request_duration_us",
                "nv_inference_request_success",
                sel,
                Some("1e6"),
            ),
            kv_cache: None,
        },
        ServerKind::Tgi => QuerySet {
            waiting: sum("tgi_queue_size"),
            running: sum("tgi_batch_current_size"),
            arrival_rate: sum_rate("tgi_request_count", sel, "1m"),
            service_time: mean_latency(
                "tgi_request_duration_sum",
                "tgi_request_duration_count",
                sel,
                None,
            ),
            kv_cache: None,
        },
        ServerKind::Sglang => QuerySet {
            waiting: sum("sglang:num_queue_reqs"),
            running: sum("sglang:num_running_reqs"),
            arrival_rate: arrivals_from_completions(
                "sglang:e2e_request_latency_seconds_count",
                &["sglang:num_queue_reqs", "sglang:num_running_reqs"],
                sel,
            ),
            service_time: mean_latency(
                "sglang:e2e_request_latency_seconds_sum",
                "sglang:e2e_request_latency_seconds_count",
                sel,
                None,
            ),
            kv_cache: None,
        },
    }
}

/// The queries of a target: built-ins of its server kind, each replaced by a non-blank override.
pub fn for_target(target: &TargetSpec) -> QuerySet {
    with_overrides(
        built_in(target.server, normalized_selector(&target.selector)),
        &target.queries,
    )
}

fn with_overrides(mut set: QuerySet, o: &QueryOverrides) -> QuerySet {
    let pick = |built: &mut String, over: &Option<String>| {
        if let Some(q) = over.as_deref().map(str::trim).filter(|q| !q.is_empty()) {
            *built = q.to_string();
        }
    };
    pick(&mut set.waiting, &o.waiting);
    pick(&mut set.running, &o.running);
    pick(&mut set.arrival_rate, &o.arrival_rate);
    pick(&mut set.service_time, &o.service_time);
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::spec::HeadroomKind;

    fn target(server: ServerKind, selector: &str) -> TargetSpec {
        TargetSpec {
            server,
            selector: selector.into(),
            ..TargetSpec::new("t", "gpu", HeadroomKind::NodePoolReplicas, 4)
        }
    }

    const M: &str = r#"model_name="llama""#;

    #[test]
    fn vllm_queries() {
        let q = for_target(&target(ServerKind::Vllm, M));
        assert_eq!(
            q.waiting,
            r#"sum(vllm:num_requests_waiting{model_name="llama"})"#
        );
        assert_eq!(
            q.running,
            r#"sum(vllm:num_requests_running{model_name="llama"})"#
        );
        assert_eq!(
            q.arrival_rate,
            r#"sum(rate(vllm:request_success_total{model_name="llama"}[1m])) + (clamp_min(sum(deriv(vllm:num_requests_waiting{model_name="llama"}[1m])) + sum(deriv(vllm:num_requests_running{model_name="llama"}[1m])), 0) or vector(0))"#
        );
        assert_eq!(
            q.service_time,
            r#"sum(rate(vllm:e2e_request_latency_seconds_sum{model_name="llama"}[2m])) / sum(rate(vllm:e2e_request_latency_seconds_count{model_name="llama"}[2m]))"#
        );
        assert_eq!(
            q.kv_cache.as_deref(),
            Some(
                r#"max(vllm:kv_cache_usage_perc{model_name="llama"}) or max(vllm:gpu_cache_usage_perc{model_name="llama"})"#
            )
        );
    }

    #[test]
    fn triton_queries() {
        let q = for_target(&target(ServerKind::Triton, r#"model="resnet""#));
        assert_eq!(
            q.waiting,
            r#"sum(nv_inference_pending_request_count{model="resnet"})"#
        );
        assert_eq!(
            q.running,
            r#"sum(rate(nv_inference_compute_infer_duration_us{model="resnet"}[1m])) / 1e6"#
        );
        assert_eq!(
            q.arrival_rate,
            r#"sum(rate(nv_inference_request_success{model="resnet"}[1m])) + (clamp_min(sum(deriv(nv_inference_pending_request_count{model="resnet"}[1m])), 0) or vector(0))"#
        );
        assert_eq!(
            q.service_time,
            r#"(sum(rate(nv_inference_request_duration_us{model="resnet"}[2m])) / sum(rate(nv_inference_request_success{model="resnet"}[2m]))) / 1e6"#
        );
        assert_eq!(q.kv_cache, None);
    }

    #[test]
    fn tgi_queries() {
        let q = for_target(&target(ServerKind::Tgi, r#"service="tgi""#));
        assert_eq!(q.waiting, r#"sum(tgi_queue_size{service="tgi"})"#);
        assert_eq!(q.running, r#"sum(tgi_batch_current_size{service="tgi"})"#);
        assert_eq!(
            q.arrival_rate,
            r#"sum(rate(tgi_request_count{service="tgi"}[1m]))"#
        );
        assert_eq!(
            q.service_time,
            r#"sum(rate(tgi_request_duration_sum{service="tgi"}[2m])) / sum(rate(tgi_request_duration_count{service="tgi"}[2m]))"#
        );
    }

    #[test]
    fn sglang_queries() {
        let q = for_target(&target(ServerKind::Sglang, M));
        assert_eq!(
            q.waiting,
            r#"sum(sglang:num_queue_reqs{model_name="llama"})"#
        );
        assert_eq!(
            q.running,
            r#"sum(sglang:num_running_reqs{model_name="llama"})"#
        );
        assert_eq!(
            q.arrival_rate,
            r#"sum(rate(sglang:e2e_request_latency_seconds_count{model_name="llama"}[1m])) + (clamp_min(sum(deriv(sglang:num_queue_reqs{model_name="llama"}[1m])) + sum(deriv(sglang:num_running_reqs{model_name="llama"}[1m])), 0) or vector(0))"#
        );
        assert_eq!(
            q.service_time,
            r#"sum(rate(sglang:e2e_request_latency_seconds_sum{model_name="llama"}[2m])) / sum(rate(sglang:e2e_request_latency_seconds_count{model_name="llama"}[2m]))"#
        );
    }

    #[test]
    fn selector_forms_and_empty_selector() {
        let cases = [
            ("", "sum(tgi_queue_size)"),
            ("   ", "sum(tgi_queue_size)"),
            (r#"{a="1"}"#, r#"sum(tgi_queue_size{a="1"})"#),
            (
                r#" a="1", b=~"x.*", "#,
                r#"sum(tgi_queue_size{a="1", b=~"x.*"})"#,
            ),
        ];
        for (selector, expected) in cases {
            assert_eq!(
                for_target(&target(ServerKind::Tgi, selector)).waiting,
                expected,
                "{selector:?}"
            );
        }
    }

    #[test]
    fn overrides_win_and_blank_overrides_do_not() {
        let mut t = target(ServerKind::Vllm, M);
        t.queries = QueryOverrides {
            waiting: Some("sum(my_queue)".into()),
            running: Some("   ".into()),
            arrival_rate: None,
            service_time: Some(" avg(my_latency) ".into()),
        };
        let q = for_target(&t);
        assert_eq!(q.waiting, "sum(my_queue)");
        assert_eq!(
            q.running,
            r#"sum(vllm:num_requests_running{model_name="llama"})"#
        );
        assert!(q
            .arrival_rate
            .starts_with("sum(rate(vllm:request_success_total"));
        assert_eq!(q.service_time, "avg(my_latency)");
    }
}
