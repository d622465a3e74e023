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
    let gauges: Vec<String> = gauges.iter().map(|g| series(g, sel)).collect();
    arrivals_from_series(&series(completed, sel), &gauges, w)
}

/// The same, from whole series selectors (gauges told apart by a label, not by their name).
fn arrivals_from_series(completed: &str, gauges: &[String], w: &str) -> String {
    let change = gauges
        .iter()
        .map(|g| format!("sum(deriv({g}[{w}]))"))
        .collect::<Vec<_>>()
        .join(" + ");
    format!("sum(rate({completed}[{w}])) + (clamp_min({change}, 0) or vector(0))")
}

/// The target's matchers and one more (`a="1", b="2"`).
fn and(sel: &str, matcher: &str) -> String {
    if sel.is_empty() {
        matcher.to_string()
    } else {
        format!("{sel}, {matcher}")
    }
}

/// The matcher llm-d's decode pods carry once their pod label `llm-d.ai/role` is copied onto
/// the series (Prometheus names the pod label `__meta_kubernetes_pod_label_llm_d_ai_role`;
/// docs/configuration.md shows the PodMonitor relabeling).
pub const LLM_D_DECODE: &str = r#"llm_d_ai_role="decode""#;

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

/// Triton's mean request time, from its per-model counters (microseconds), whatever the backend.
fn triton_service_time(sel: &str, w: &str) -> String {
    mean_latency(
        "nv_inference_request_duration_us",
        "nv_inference_request_success",
        sel,
        w,
        Some("1e6"),
    )
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
            service_time: triton_service_time(sel, lw),
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
        },
        // Triton with the TensorRT-LLM backend. Triton hands each request to the backend's
        // in-flight batcher at once, so its pending count stays near 0; the backend's own
        // gauges count the waiting and the scheduled requests: family
        // `nv_trt_llm_request_metrics`, label `request_type` ("waiting", "scheduled"; also
        // "active", "max", "context"), labels `model` and `version`, in NVIDIA/TensorRT-LLM
        // triton_backend/inflight_batcher_llm/src/custom_metrics_reporter/custom_metrics_reporter.cc
        // (moved there from triton-inference-server/tensorrtllm_backend, whose copy has no
        // "waiting" yet). Completions and latency are Triton's per-model counters,
        // `nv_inference_request_success` and `nv_inference_request_duration_us`
        // (triton-inference-server/server docs/user_guide/metrics.md).
        ServerKind::TritonTrtllm => {
            let waiting = series(
                "nv_trt_llm_request_metrics",
                &and(sel, r#"request_type="waiting""#),
            );
            let scheduled = series(
                "nv_trt_llm_request_metrics",
                &and(sel, r#"request_type="scheduled""#),
            );
            QuerySet {
                waiting: format!("sum({waiting})"),
                running: format!("sum({scheduled})"),
                arrival_rate: arrivals_from_series(
                    &series("nv_inference_request_success", sel),
                    &[waiting, scheduled],
                    rw,
                ),
                service_time: triton_service_time(sel, lw),
            }
        }
        // trtllm-serve, at `/prometheus/metrics` (mounted only with `return_perf_metrics: true`;
        // the gauges need `enable_iter_perf_stats: true` on the PyTorch backend). Names in
        // NVIDIA/TensorRT-LLM tensorrt_llm/metrics/collector.py (prefix `trtllm_`): the gauges
        // `trtllm_num_requests_waiting` (numQueuedRequests) and `trtllm_num_requests_running`
        // (numActiveRequests), the counter `trtllm_request_success_total`, the histogram
        // `trtllm_e2e_request_latency_seconds`; its labels `model_name` and `engine_type` are
        // set to "undefined" by tensorrt_llm/serve/openai_server.py, so select by pod or job.
        ServerKind::TrtllmServe => QuerySet {
            waiting: sum("trtllm_num_requests_waiting"),
            running: sum("trtllm_num_requests_running"),
            arrival_rate: arrivals_from_completions(
                "trtllm_request_success_total",
                &["trtllm_num_requests_waiting", "trtllm_num_requests_running"],
                sel,
                rw,
            ),
            service_time: mean_latency(
                "trtllm_e2e_request_latency_seconds_sum",
                "trtllm_e2e_request_latency_seconds_count",
                sel,
                lw,
                None,
            ),
        },
        // NVIDIA Dynamo's HTTP frontend (label `model`, lower-cased). Names in ai-dynamo/dynamo
        // lib/runtime/src/metrics/prometheus_names.rs (prefix `dynamo_frontend`, module
        // `frontend_service`): `inflight_requests` counts a request from the HTTP handler to
        // its last response, `queued_requests` until its first (queueing and prefill), a subset
        // of it (lib/llm/src/http/service/metrics.rs): waiting = queued, running = inflight -
        // queued. `requests_total` is counted, and `request_duration_seconds` observed, when a
        // request ends (the in-flight guard's drop), whatever its status: every departure.
        ServerKind::Dynamo => QuerySet {
            waiting: sum("dynamo_frontend_queued_requests"),
            running: format!(
                "{} - {}",
                sum("dynamo_frontend_inflight_requests"),
                sum("dynamo_frontend_queued_requests")
            ),
            arrival_rate: arrivals_from_completions(
                "dynamo_frontend_requests_total",
                &["dynamo_frontend_inflight_requests"],
                sel,
                rw,
            ),
            service_time: mean_latency(
                "dynamo_frontend_request_duration_seconds_sum",
                "dynamo_frontend_request_duration_seconds_count",
                sel,
                lw,
                None,
            ),
        },
        // llm-d serves with vLLM in prefill and decode pods, and both export `vllm:*`: a
        // request would be counted twice (waiting, running, and its completion). Decode pods
        // see every request to its end, so only theirs are read: pod label
        // `llm-d.ai/role: decode` (llm-d-incubation/llm-d-modelservice
        // charts/llm-d-modelservice/templates/_helpers.tpl, "llm-d-modelservice.decodelabels").
        ServerKind::LlmD => built_in(ServerKind::Vllm, &and(sel, LLM_D_DECODE), w),
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
#[path = "queries_tests.rs"]
mod tests;
