//! Queueing model: arrival rate and service time to replicas.
//!
//! Each replica is `concurrency` identical servers (continuous-batching slots); the whole target
//! is an M/M/c queue with c = replicas × concurrency. Little's law gives the offered load
//! a = λ·S (Erlangs, the mean number of busy slots). Erlang C gives the probability that an
//! arrival has to queue, and the mean queueing wait is W = C(c, a) · S / (c − a). We pick the
//! smallest number of replicas with W ≤ the target wait.
//!
//! Erlang C is computed from the Erlang B recurrence B(0) = 1, B(k) = a·B(k−1) / (k + a·B(k−1)),
//! then C = c·B / (c − a·(1 − B)). Every intermediate stays in (0, 1], so it is stable for tens
//! of thousands of servers, where the textbook a^c / c! form overflows.

/// The largest answer `replicas_for` gives; inputs that would need more are absurd (a metric
/// bug or a unit mistake) and the policy's ceiling clamps far below this anyway.
pub const MAX_REPLICAS: u32 = 100_000;

/// Offered loads above this many Erlangs (busy slots) answer `MAX_REPLICAS` without searching,
/// which bounds the work per call to about this many recurrence steps.
pub const MAX_OFFERED_LOAD: f64 = 1_000_000.0;

/// Target waits below this (seconds) are raised to it: a zero wait is unreachable for any
/// finite number of servers (C > 0), and sub-millisecond targets are below metric resolution.
pub const MIN_TARGET_WAIT_S: f64 = 0.001;

/// Relative slack in the wait comparison, so a wait equal to the target up to rounding passes.
const WAIT_TOLERANCE: f64 = 1e-9;

/// Replicas of `concurrency` slots each needed to serve `rate` req/s with mean service time
/// `service_time_s` so the mean queueing wait stays within `target_wait_s` (Erlang C over
/// `replicas * concurrency` servers; Little's law gives the offered load).
///
/// Guards: zero, negative or NaN load → 0 replicas (no evidence of demand; the policy fails
/// static on missing data before it gets here); infinite or > `MAX_OFFERED_LOAD` load →
/// `MAX_REPLICAS`; concurrency 0 counts as 1; target wait NaN or below `MIN_TARGET_WAIT_S` →
/// `MIN_TARGET_WAIT_S` (an infinite target only asks for a stable queue, servers > load).
pub fn replicas_for(rate: f64, service_time_s: f64, concurrency: u32, target_wait_s: f64) -> u32 {
    let load = rate * service_time_s;
    if load.is_nan() || load <= 0.0 || rate <= 0.0 || service_time_s <= 0.0 {
        return 0;
    }
    if load > MAX_OFFERED_LOAD {
        return MAX_REPLICAS;
    }
    let slots = u64::from(concurrency.max(1));
    let target = if target_wait_s >= MIN_TARGET_WAIT_S {
        target_wait_s
    } else {
        MIN_TARGET_WAIT_S
    };
    let limit = target * (1.0 + WAIT_TOLERANCE);

    // Walk the Erlang B recurrence one server at a time and test at each whole replica; the
    // walk is O(final servers), which the load cap above bounds.
    let mut b = 1.0;
    let mut servers: u64 = 0;
    loop {
        servers += 1;
        let c = servers as f64;
        b = load * b / (c + load * b);
        if servers % slots != 0 || c <= load {
            continue;
        }
        let replicas = servers / slots;
        let wait_probability = c * b / (c - load * (1.0 - b));
        let mean_wait = wait_probability * service_time_s / (c - load);
        if mean_wait <= limit || replicas >= u64::from(MAX_REPLICAS) {
            return replicas.min(u64::from(MAX_REPLICAS)) as u32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Row {
        name: &'static str,
        rate: f64,
        service_time_s: f64,
        concurrency: u32,
        target_wait_s: f64,
        want: u32,
    }

    #[test]
    fn replicas_table() {
        let rows = [
            Row {
                // M/M/1 with λ = 0.5, μ = 1: W = ρ/(μ−λ) = 0.5/0.5 = 1.0 s, meets a 1 s target.
                name: "M/M/1 exactly at target",
                rate: 0.5,
                service_time_s: 1.0,
                concurrency: 1,
                target_wait_s: 1.0,
                want: 1,
            },
            Row {
                // Same queue, 0.99 s target: one server waits 1.0 s, two wait
                // C(2,0.5)·S/(2−0.5) = 0.1/1.5 ≈ 0.067 s.
                name: "M/M/1 just over target",
                rate: 0.5,
                service_time_s: 1.0,
                concurrency: 1,
                target_wait_s: 0.99,
                want: 2,
            },
            Row {
                // Two slots per replica: one replica is the M/M/2 above, 0.067 s ≤ 0.5 s.
                name: "slots share one replica",
                rate: 0.5,
                service_time_s: 1.0,
                concurrency: 2,
                target_wait_s: 0.5,
                want: 1,
            },
            Row {
                // a = 4 Erlangs on 4 slots/replica: 1 replica is unstable (c = a), 2 replicas
                // (c = 8) wait C(8,4)·1/4 ≈ 0.0304·0.25 s, far below 2 s.
                name: "stability needs the second replica",
                rate: 4.0,
                service_time_s: 1.0,
                concurrency: 4,
                target_wait_s: 2.0,
                want: 2,
            },
            Row {
                // Target far above the service time: only stability matters, c > a, so with
                // a = 1000 and one slot per replica c = 1001 (W = C·1/1 ≤ 1 s ≤ 600 s).
                name: "large load, loose target",
                rate: 1000.0,
                service_time_s: 1.0,
                concurrency: 1,
                target_wait_s: 600.0,
                want: 1001,
            },
            Row {
                name: "zero load",
                rate: 0.0,
                service_time_s: 3.0,
                concurrency: 8,
                target_wait_s: 2.0,
                want: 0,
            },
            Row {
                name: "NaN rate",
                rate: f64::NAN,
                service_time_s: 3.0,
                concurrency: 8,
                target_wait_s: 2.0,
                want: 0,
            },
            Row {
                name: "negative service time",
                rate: 3.0,
                service_time_s: -1.0,
                concurrency: 8,
                target_wait_s: 2.0,
                want: 0,
            },
            Row {
                name: "absurd load is capped",
                rate: 1e12,
                service_time_s: 1.0,
                concurrency: 8,
                target_wait_s: 2.0,
                want: MAX_REPLICAS,
            },
            Row {
                name: "infinite rate is capped",
                rate: f64::INFINITY,
                service_time_s: 1.0,
                concurrency: 8,
                target_wait_s: 2.0,
                want: MAX_REPLICAS,
            },
            Row {
                // Concurrency 0 is read as 1: the M/M/1 row again.
                name: "zero concurrency",
                rate: 0.5,
                service_time_s: 1.0,
                concurrency: 0,
                target_wait_s: 1.0,
                want: 1,
            },
            Row {
                // Zero target raised to 1 ms: M/M/1 at ρ = 0.5 waits 1 s, M/M/2 0.067 s,
                // M/M/3: C(3,0.5) = (a³/3!·3/2.5)/(1 + a + a²/2 + a³/6·1.2)
                //      = 0.025/(1.625 + 0.025) ≈ 0.01515, W = 0.01515/2.5 ≈ 6.1 ms;
                // M/M/4: C ≈ (a⁴/24·4/3.5)/(1.6458 + 0.00298) ≈ 0.0018, W ≈ 0.0018/3.5 ≈ 0.5 ms.
                name: "zero target wait",
                rate: 0.5,
                service_time_s: 1.0,
                concurrency: 1,
                target_wait_s: 0.0,
                want: 4,
            },
        ];
        for row in rows {
            let got = replicas_for(
                row.rate,
                row.service_time_s,
                row.concurrency,
                row.target_wait_s,
            );
            assert_eq!(got, row.want, "{}", row.name);
        }
    }

    proptest::proptest! {
        #[test]
        fn replicas_monotone_in_rate(
            r1 in 0.0f64..500.0,
            dr in 0.0f64..100.0,
            s in 0.01f64..30.0,
            k in 1u32..64,
            w in 0.01f64..30.0,
        ) {
            proptest::prop_assert!(replicas_for(r1, s, k, w) <= replicas_for(r1 + dr, s, k, w));
        }

        #[test]
        fn replicas_meet_the_target_and_one_less_does_not(
            rate in 0.01f64..200.0,
            s in 0.05f64..20.0,
            k in 1u32..32,
            w in 0.05f64..20.0,
        ) {
            let n = replicas_for(rate, s, k, w);
            let load = rate * s;
            let wait = |n: u32| {
                let c = u64::from(n * k);
                if c as f64 <= load { f64::INFINITY } else {
                    erlang_c_textbook_safe(c, load) * s / (c as f64 - load)
                }
            };
            proptest::prop_assert!(wait(n) <= w * (1.0 + 1e-6));
            if n > 1 {
                proptest::prop_assert!(wait(n - 1) > w * (1.0 - 1e-6));
            }
        }
    }

    /// Independent check for the property above: Erlang C via log-space terms of the
    /// textbook sum (no shared code with the recurrence).
    fn erlang_c_textbook_safe(c: u64, a: f64) -> f64 {
        // term_k = a^k/k! relative to the last term, summed backwards to avoid overflow.
        let mut rel = 1.0; // a^c/c! divided by itself
        let mut sum = 0.0;
        for k in (0..c).rev() {
            rel *= (k + 1) as f64 / a; // a^k/k! ÷ a^c/c!
            sum += rel;
            if rel < 1e-300 {
                break;
            }
        }
        let top = c as f64 / (c as f64 - a);
        top / (sum + top)
    }
}
