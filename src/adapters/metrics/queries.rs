//! Built-in PromQL per inference server kind, with the target's label matchers injected and the
//! target's `QueryOverrides` taking precedence.
//!
//! Every built-in query aggregates with `sum(...)` (or a ratio of sums) so that it returns one
//! series however many replicas serve the target; the range parser rejects answers with several
//! series rather than guess how to combine them.
//!
//! Arrival rate. Servers count *completed* requests, not arrivals. By conservation
//! `arrivals = completions + d(in system)/dt`, so the built-in arrival rate is the completion
//! rate plus the change of waiting + running (`deriv` over the rate window). The change term is clamped at
//! zero: `deriv` of gauges scraped every few seconds is noisy, and while a queue drains a negative
//! term would make demand look lower than what is being served. Clamping biases the estimate
//! towards more warm capacity, the safe side for this controller; in a steady state the term is
//! zero anyway. When the gauges have too few points for `deriv`, the term counts as zero
//! (`or vector(0)`), so the completion rate alone decides whether data is there at all.
//!
//! Windows. `rate` and `deriv` range over RATE_WINDOW_SECONDS (60 s: `[1m]`); the mean latency
//! over twice it (`[2m]`), as a ratio of two rates is noisier. The window must hold several
//! scrapes (at least four: start-up checks it against SCRAPE_INTERVAL_SECONDS), or the rate of a
//! window holding one scrape is no series at all and the target fails static.
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

/// A PromQL duration for `seconds`: whole minutes as `Nm` (the default 60 s is `1m`), whole
/// seconds as `Ns`, anything else in milliseconds.
pub fn duration(seconds: f64) -> String {
    let ms = (seconds * 1000.0).round().max(0.0) as u64;
    if ms > 0 && ms % 60_000 == 0 {
        format!("{}m", ms / 60_000)
    } else if ms % 1000 == 0 {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// The `rate`/`deriv` range and the mean latency's (twice it) as PromQL durations.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Windows {
    rate: String,
    latency: String,
}

impl Windows {
    fn new(rate_window_s: f64) -> Self {
        Windows {
            rate: duration(rate_window_s),
            latency: duration(2.0 * rate_window_s),
        }
    }
}

/// `sum(rate(metric{SEL}[window]))`.
fn sum_rate(metric: &str, sel: &str, window: &str) -> String {
    format!("sum(rate({}[{window}]))", series(metric, sel))
}

/// Completion rate plus the clamped change of the in-system gauges (see the module docs).
fn arrivals_from_completions(completed: &str, gauges: &[&str], sel: &str, w: &str) -> String {
    let change = gauges
        .iter()
        .map(|g| format!("sum(deriv({}[{w}]))", series(g, sel)))
        .collect::<Vec<_>>()
        .join(" + ");
    format!(
        "{} + (clamp_min({change}, 0) or vector(0))",
        sum_rate(completed, sel, w)
    )
}

/// Mean seconds per request from a `_sum`/`_count` pair over the latency window `w`, divided by
/// `scale` to reach seconds (1 for seconds, 1e6 for microseconds).
fn mean_latency(
    sum_metric: &str,
    count_metric: &str,
    sel: &str,
    w: &str,
    scale: Option<&str>,
) -> String {
    let ratio = format!(
        "{} / {}",
        sum_rate(sum_metric, sel, w),
        sum_rate(count_metric, sel, w)
    );
    match scale {
        None => ratio,
        Some(s) => format!("({ratio}) / {s}"),
    }
}

fn built_in(kind: ServerKind, sel: &str, w: &Windows) -> QuerySet {
    let (rw, lw) = (w.rate.as_str(), w.latency.as_str());
    let sum = |metric: &str| format!("sum({})", series(metric, sel));
    match kind {
        ServerKind::Vllm => QuerySet {
            waiting: sum("vllm:num_requests_waiting"),
            running: sum("vllm:num_requests_running"),
            arrival_rate: arrivals_from_completions(
                "vllm:request_success_total",
                &["vllm:num_requests_waiting", "vllm:num_requests_running"],
                sel,
                rw,
            ),
            service_time: mean_latency(
                "vllm:e2e_request_latency_seconds_sum",
                "vllm:e2e_request_latency_seconds_count",
                sel,
                lw,
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
                sum_rate("nv_inference_compute_infer_duration_us", sel, rw)
            ),
            arrival_rate: arrivals_from_completions(
                "nv_inference_request_success",
                &["nv_inference_pending_request_count"],
                sel,
                rw,
            ),
            service_time: mean_latency(
                "nv_inference_request_duration_us",
                "nv_inference_request_success",
                sel,
                lw,
                Some("1e6"),
            ),
            kv_cache: None,
        },
        ServerKind::Tgi => QuerySet {
            waiting: sum("tgi_queue_size"),
            running: sum("tgi_batch_current_size"),
            arrival_rate: sum_rate("tgi_request_count", sel, rw),
            service_time: mean_latency(
                "tgi_request_duration_sum",
                "tgi_request_duration_count",
                sel,
                lw,
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
                rw,
            ),
            service_time: mean_latency(
                "sglang:e2e_request_latency_seconds_sum",
                "sglang:e2e_request_latency_seconds_count",
                sel,
                lw,
                None,
            ),
            kv_cache: None,
        },
    }
}

/// The queries of a target: built-ins of its server kind with `rate`/`deriv` over
/// `rate_window_s` (RATE_WINDOW_SECONDS; the mean latency over twice it), each replaced by a
/// non-blank override (overrides carry their own windows).
pub fn for_target(target: &TargetSpec, rate_window_s: f64) -> QuerySet {
    with_overrides(
        built_in(
            target.server,
            normalized_selector(&target.selector),
            &Windows::new(rate_window_s),
        ),
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

    /// The built-ins at the default RATE_WINDOW_SECONDS (60 s).
    fn for_target_1m(t: &TargetSpec) -> QuerySet {
        for_target(t, 60.0)
    }

    #[test]
    fn vllm_queries() {
        let q = for_target_1m(&target(ServerKind::Vllm, M));
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
        let q = for_target_1m(&target(ServerKind::Triton, r#"model="resnet""#));
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
        let q = for_target_1m(&target(ServerKind::Tgi, r#"service="tgi""#));
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
        let q = for_target_1m(&target(ServerKind::Sglang, M));
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
    fn every_built_in_rate_uses_the_rate_window_and_the_latency_twice_it() {
        // (server, window s, arrival rate, service time, Triton's running). 60 s is the default
        // `[1m]`/`[2m]`; 240 s (four scrapes of 60 s) is `[4m]`/`[8m]`; 90 s is `[90s]`/`[3m]`.
        let tgi = r#"service="tgi""#;
        let rows: [(ServerKind, &str, f64, &str, &str); 7] = [
            (
                ServerKind::Vllm,
                M,
                240.0,
                r#"sum(rate(vllm:request_success_total{model_name="llama"}[4m])) + (clamp_min(sum(deriv(vllm:num_requests_waiting{model_name="llama"}[4m])) + sum(deriv(vllm:num_requests_running{model_name="llama"}[4m])), 0) or vector(0))"#,
                r#"sum(rate(vllm:e2e_request_latency_seconds_sum{model_name="llama"}[8m])) / sum(rate(vllm:e2e_request_latency_seconds_count{model_name="llama"}[8m]))"#,
            ),
            (
                ServerKind::Sglang,
                M,
                240.0,
                r#"sum(rate(sglang:e2e_request_latency_seconds_count{model_name="llama"}[4m])) + (clamp_min(sum(deriv(sglang:num_queue_reqs{model_name="llama"}[4m])) + sum(deriv(sglang:num_running_reqs{model_name="llama"}[4m])), 0) or vector(0))"#,
                r#"sum(rate(sglang:e2e_request_latency_seconds_sum{model_name="llama"}[8m])) / sum(rate(sglang:e2e_request_latency_seconds_count{model_name="llama"}[8m]))"#,
            ),
            (
                ServerKind::Tgi,
                tgi,
                60.0,
                r#"sum(rate(tgi_request_count{service="tgi"}[1m]))"#,
                r#"sum(rate(tgi_request_duration_sum{service="tgi"}[2m])) / sum(rate(tgi_request_duration_count{service="tgi"}[2m]))"#,
            ),
            (
                ServerKind::Tgi,
                tgi,
                240.0,
                r#"sum(rate(tgi_request_count{service="tgi"}[4m]))"#,
                r#"sum(rate(tgi_request_duration_sum{service="tgi"}[8m])) / sum(rate(tgi_request_duration_count{service="tgi"}[8m]))"#,
            ),
            (
                ServerKind::Tgi,
                tgi,
                90.0,
                r#"sum(rate(tgi_request_count{service="tgi"}[90s]))"#,
                r#"sum(rate(tgi_request_duration_sum{service="tgi"}[3m])) / sum(rate(tgi_request_duration_count{service="tgi"}[3m]))"#,
            ),
            (
                ServerKind::Triton,
                r#"model="resnet""#,
                60.0,
                r#"sum(rate(nv_inference_request_success{model="resnet"}[1m])) + (clamp_min(sum(deriv(nv_inference_pending_request_count{model="resnet"}[1m])), 0) or vector(0))"#,
                r#"(sum(rate(nv_inference_request_duration_us{model="resnet"}[2m])) / sum(rate(nv_inference_request_success{model="resnet"}[2m]))) / 1e6"#,
            ),
            (
                ServerKind::Triton,
                r#"model="resnet""#,
                240.0,
                r#"sum(rate(nv_inference_request_success{model="resnet"}[4m])) + (clamp_min(sum(deriv(nv_inference_pending_request_count{model="resnet"}[4m])), 0) or vector(0))"#,
                r#"(sum(rate(nv_inference_request_duration_us{model="resnet"}[8m])) / sum(rate(nv_inference_request_success{model="resnet"}[8m]))) / 1e6"#,
            ),
        ];
        for (server, sel, window, arrival_rate, service_time) in rows {
            let q = for_target(&target(server, sel), window);
            assert_eq!(q.arrival_rate, arrival_rate, "{server:?} at {window} s");
            assert_eq!(q.service_time, service_time, "{server:?} at {window} s");
        }
        // Triton's running is a rate too.
        assert_eq!(
            for_target(&target(ServerKind::Triton, r#"model="resnet""#), 240.0).running,
            r#"sum(rate(nv_inference_compute_infer_duration_us{model="resnet"}[4m])) / 1e6"#
        );
        // The gauges have no window.
        assert_eq!(
            for_target(&target(ServerKind::Vllm, M), 240.0).waiting,
            r#"sum(vllm:num_requests_waiting{model_name="llama"})"#
        );
    }

    #[test]
    fn durations_are_promql_durations() {
        let rows = [
            (60.0, "1m"),
            (120.0, "2m"),
            (240.0, "4m"),
            (90.0, "90s"),
            (45.0, "45s"),
            (4.0, "4s"),
            (7.5, "7500ms"),
        ];
        for (seconds, want) in rows {
            assert_eq!(duration(seconds), want, "{seconds}");
        }
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
                for_target_1m(&target(ServerKind::Tgi, selector)).waiting,
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
        let q = for_target_1m(&t);
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
