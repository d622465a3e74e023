//! Queueing model: arrival rate and service time to replicas. (Implemented by the core owner.)

/// Replicas of `concurrency` slots each needed to serve `rate` req/s with mean service time
/// `service_time_s` so the mean queueing wait stays within `target_wait_s` (Erlang C over
/// `replicas * concurrency` servers; Little's law gives the offered load).
pub fn replicas_for(rate: f64, service_time_s: f64, concurrency: u32, target_wait_s: f64) -> u32 {
    let _ = (rate, service_time_s, concurrency, target_wait_s);
    todo!("core owner implements")
}
