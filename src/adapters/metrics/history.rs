//! A target's past signals over days, for `prewarm backtest`: the same `observe` call the tick
//! makes (its queries, its credentials), repeated over consecutive windows so that no single
//! answer exceeds what the servers return (Prometheus: 11,000 points per series; the tick's
//! 5 s timeout per query), and joined.

use super::{MetricSource, Window};
use crate::core::{Observation, PolicySpec, Sample, TargetSpec};
use crate::error::Error;

/// Longest window of one `observe` call.
const CHUNK_S: f64 = 86_400.0;

/// The arrival rate, service time, waiting and running requests of `target` over
/// `[start, end]` every `step` seconds, oldest first, one sample per grid point.
pub async fn read(
    source: &dyn MetricSource,
    target: &TargetSpec,
    policy: &PolicySpec,
    start: f64,
    end: f64,
    step: f64,
) -> Result<Observation, Error> {
    let mut out = Observation::default();
    let chunk = CHUNK_S.min(10_000.0 * step);
    let mut until = start;
    while until < end {
        until = (until + chunk).min(end);
        let window = PolicySpec {
            window_s: chunk,
            step_s: step,
            ..policy.clone()
        };
        let o = source
            .observe(target, Window::ending_at(until, &window))
            .await?;
        append(&mut out.arrival_rate, o.arrival_rate, start);
        append(&mut out.service_time_s, o.service_time_s, start);
        append(&mut out.waiting, o.waiting, start);
        append(&mut out.running, o.running, start);
    }
    Ok(out)
}

/// Adds the samples newer than the last one kept (windows share their boundary point).
fn append(into: &mut Vec<Sample>, samples: Vec<Sample>, start: f64) {
    let mut last = into.last().map_or(start - 1e-9, |s| s.t);
    for s in samples {
        if s.t > last {
            last = s.t;
            into.push(s);
        }
    }
}
