//! The built-in queries of every server kind, written out in full.

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
fn triton_trtllm_queries() {
    // The backend's gauges, told apart by `request_type`; Triton's own counters for
    // completions and latency (microseconds).
    let q = for_target_1m(&target(ServerKind::TritonTrtllm, r#"model="tensorrt_llm""#));
    assert_eq!(
        q.waiting,
        r#"sum(nv_trt_llm_request_metrics{model="tensorrt_llm", request_type="waiting"})"#
    );
    assert_eq!(
        q.running,
        r#"sum(nv_trt_llm_request_metrics{model="tensorrt_llm", request_type="scheduled"})"#
    );
    assert_eq!(
        q.arrival_rate,
        r#"sum(rate(nv_inference_request_success{model="tensorrt_llm"}[1m])) + (clamp_min(sum(deriv(nv_trt_llm_request_metrics{model="tensorrt_llm", request_type="waiting"}[1m])) + sum(deriv(nv_trt_llm_request_metrics{model="tensorrt_llm", request_type="scheduled"}[1m])), 0) or vector(0))"#
    );
    assert_eq!(
        q.service_time,
        r#"(sum(rate(nv_inference_request_duration_us{model="tensorrt_llm"}[2m])) / sum(rate(nv_inference_request_success{model="tensorrt_llm"}[2m]))) / 1e6"#
    );
    // Without a selector the request type is the only matcher.
    assert_eq!(
        for_target_1m(&target(ServerKind::TritonTrtllm, "")).waiting,
        r#"sum(nv_trt_llm_request_metrics{request_type="waiting"})"#
    );
}

#[test]
fn trtllm_serve_queries() {
    let q = for_target_1m(&target(ServerKind::TrtllmServe, r#"pod=~"trt-.*""#));
    assert_eq!(
        q.waiting,
        r#"sum(trtllm_num_requests_waiting{pod=~"trt-.*"})"#
    );
    assert_eq!(
        q.running,
        r#"sum(trtllm_num_requests_running{pod=~"trt-.*"})"#
    );
    assert_eq!(
        q.arrival_rate,
        r#"sum(rate(trtllm_request_success_total{pod=~"trt-.*"}[1m])) + (clamp_min(sum(deriv(trtllm_num_requests_waiting{pod=~"trt-.*"}[1m])) + sum(deriv(trtllm_num_requests_running{pod=~"trt-.*"}[1m])), 0) or vector(0))"#
    );
    assert_eq!(
        q.service_time,
        r#"sum(rate(trtllm_e2e_request_latency_seconds_sum{pod=~"trt-.*"}[2m])) / sum(rate(trtllm_e2e_request_latency_seconds_count{pod=~"trt-.*"}[2m]))"#
    );
}

#[test]
fn dynamo_queries() {
    // Queued is a subset of inflight: running is their difference, and the requests in the
    // system are the inflight ones, whose change corrects the completion rate.
    let q = for_target_1m(&target(ServerKind::Dynamo, r#"model="llama""#));
    assert_eq!(
        q.waiting,
        r#"sum(dynamo_frontend_queued_requests{model="llama"})"#
    );
    assert_eq!(
        q.running,
        r#"sum(dynamo_frontend_inflight_requests{model="llama"}) - sum(dynamo_frontend_queued_requests{model="llama"})"#
    );
    assert_eq!(
        q.arrival_rate,
        r#"sum(rate(dynamo_frontend_requests_total{model="llama"}[1m])) + (clamp_min(sum(deriv(dynamo_frontend_inflight_requests{model="llama"}[1m])), 0) or vector(0))"#
    );
    assert_eq!(
        q.service_time,
        r#"sum(rate(dynamo_frontend_request_duration_seconds_sum{model="llama"}[2m])) / sum(rate(dynamo_frontend_request_duration_seconds_count{model="llama"}[2m]))"#
    );
}

#[test]
fn llm_d_queries_read_the_decode_pods_only() {
    // vLLM's queries with the decode matcher after the target's own.
    let q = for_target_1m(&target(ServerKind::LlmD, M));
    assert_eq!(
        q.waiting,
        r#"sum(vllm:num_requests_waiting{model_name="llama", llm_d_ai_role="decode"})"#
    );
    assert_eq!(
        q.running,
        r#"sum(vllm:num_requests_running{model_name="llama", llm_d_ai_role="decode"})"#
    );
    assert_eq!(
        q.arrival_rate,
        r#"sum(rate(vllm:request_success_total{model_name="llama", llm_d_ai_role="decode"}[1m])) + (clamp_min(sum(deriv(vllm:num_requests_waiting{model_name="llama", llm_d_ai_role="decode"}[1m])) + sum(deriv(vllm:num_requests_running{model_name="llama", llm_d_ai_role="decode"}[1m])), 0) or vector(0))"#
    );
    assert_eq!(
        q.service_time,
        r#"sum(rate(vllm:e2e_request_latency_seconds_sum{model_name="llama", llm_d_ai_role="decode"}[2m])) / sum(rate(vllm:e2e_request_latency_seconds_count{model_name="llama", llm_d_ai_role="decode"}[2m]))"#
    );
    assert_eq!(
        for_target_1m(&target(ServerKind::LlmD, "")).waiting,
        r#"sum(vllm:num_requests_waiting{llm_d_ai_role="decode"})"#
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
