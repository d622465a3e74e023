//! Stage: sizing in the units the HPA scales in. prewarm's spare only helps if it matches the
//! replicas the workload's HPA is about to create, so a target that names its HPA is sized by
//! predicting that HPA: for a per-replica average target T on requests in the system, the HPA
//! wants `ceil(in-system / T)` replicas (its 10 % tolerance ignored: the conservative side), and
//! Little's law predicts in-system at the horizon as `rate × service time`. The answer is
//! clamped to the HPA's own `[minReplicas, maxReplicas]`. HPAs on metrics prewarm cannot predict
//! from the queue (CPU, memory, DCGM, waiting alone) fall back to Erlang C sizing, logged.

use super::observation::{HpaMetric, HpaStatus};

/// Replicas the HPA will want when `rate` req/s each take `service_time_s`; Err says why it
/// cannot be predicted.
pub fn hpa_replicas(hpa: &HpaStatus, rate: f64, service_time_s: f64) -> Result<u32, String> {
    match &hpa.metric {
        HpaMetric::Unpredictable { why } => Err(why.clone()),
        HpaMetric::InSystemPerReplica { target_average } => {
            if !(target_average.is_finite() && *target_average > 0.0) {
                return Err(format!(
                    "HPA target average {target_average} is not positive"
                ));
            }
            let in_system = (rate * service_time_s).max(0.0);
            let raw = if in_system.is_finite() {
                // A hair below an integer stays there (0.1 · 30 = 3.0000000000000004).
                (in_system / target_average - 1e-9).ceil().max(0.0)
            } else {
                f64::from(hpa.max_replicas)
            };
            let wanted = raw.min(f64::from(u32::MAX)) as u32;
            Ok(wanted.clamp(hpa.min_replicas, hpa.max_replicas.max(hpa.min_replicas)))
        }
    }
}

/// The replicas an HPA on requests in the system wants for `in_system` requests (the fast
/// path's end of ramp), clamped to its range.
pub fn hpa_replicas_for_in_system(hpa: &HpaStatus, in_system: f64) -> Result<u32, String> {
    hpa_replicas(hpa, in_system, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hpa(metric: HpaMetric) -> HpaStatus {
        HpaStatus {
            min_replicas: 2,
            max_replicas: 10,
            current_replicas: 3,
            desired_replicas: 3,
            metric,
        }
    }

    #[test]
    fn hpa_table() {
        let per = |t: f64| hpa(HpaMetric::InSystemPerReplica { target_average: t });
        // (name, hpa, rate, service time, want)
        type Row = (&'static str, HpaStatus, f64, f64, Result<u32, &'static str>);
        let rows: Vec<Row> = vec![
            // 3 req/s × 4 s = 12 in system; target 4 per replica → 3.
            ("exact", per(4.0), 3.0, 4.0, Ok(3)),
            // 13 in system / 4 = 3.25 → 4.
            ("rounds up", per(4.0), 3.25, 4.0, Ok(4)),
            // 0.1 × 30 = 3.0000000000000004 / 1 must stay 3.
            ("float noise", per(1.0), 0.1, 30.0, Ok(3)),
            // Below minReplicas: the HPA keeps its minimum.
            ("min", per(4.0), 0.5, 4.0, Ok(2)),
            ("idle", per(4.0), 0.0, 4.0, Ok(2)),
            // 100 in system / 4 = 25, max 10.
            ("max", per(4.0), 25.0, 4.0, Ok(10)),
            ("infinite", per(4.0), f64::INFINITY, 4.0, Ok(10)),
            ("zero target", per(0.0), 1.0, 1.0, Err("not positive")),
            (
                "cpu",
                hpa(HpaMetric::Unpredictable {
                    why: "resource cpu".into(),
                }),
                1.0,
                1.0,
                Err("resource cpu"),
            ),
        ];
        for (name, h, rate, s, want) in rows {
            let got = hpa_replicas(&h, rate, s);
            match (got, want) {
                (Ok(g), Ok(w)) => assert_eq!(g, w, "{name}"),
                (Err(e), Err(piece)) => assert!(e.contains(piece), "{name}: {e}"),
                (g, w) => panic!("{name}: got {g:?}, want {w:?}"),
            }
        }
    }
}
