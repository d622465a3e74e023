//! The metric samples the engine records and the `Observation` a tick reads from them.

use crate::core::{Observation, PolicySpec, Sample};

use super::events::Kind;
use super::{Point, Sim};

impl Sim<'_> {
    pub(super) fn on_sample(&mut self) {
        let boundary = (self.now / self.cfg.step_s).round() as usize;
        let waiting = self.queue.len() as u32;
        let running = self.active_total as u32;
        if self.waiting_at_boundary.len() <= boundary {
            self.waiting_at_boundary.resize(boundary + 1, 0);
            self.running_at_boundary.resize(boundary + 1, 0);
        }
        self.waiting_at_boundary[boundary] = waiting;
        self.running_at_boundary[boundary] = running;
        let serving = self.serving_count();
        self.result.peak_replicas = self.result.peak_replicas.max(self.replica_count());
        let point = Point {
            t: self.now,
            ready_gpus: self.ready_gpus(),
            serving_replicas: serving,
            balloons: self.balloon_count(),
            waiting,
        };
        self.result.series.push(point);
        let next = self.now + self.cfg.step_s;
        self.push(next, Kind::Sample);
    }

    /// The metric history a tick would fetch: `window_s` of samples on the step grid ending at
    /// the last complete step, the steady state before t = 0 standing in for older history.
    pub(super) fn observation(&self, policy: &PolicySpec) -> Observation {
        let step = self.cfg.step_s;
        let base = self.cfg.base_epoch;
        let steps = (policy.window_s / step).round() as i64;
        let now_boundary = (self.now / step + 1e-9).floor() as i64;
        let warm = self.cfg.warm;
        let mut obs = Observation {
            pending_pods: self.pending_inference + self.cold_starting,
            serving_replicas: Some(self.serving_count()),
            ..Observation::default()
        };
        let mut last_service = warm.service_s;
        // Service-time history: carry the last known mean through steps without completions.
        for j in 0..(now_boundary - steps).max(0) {
            if let Some(&(sum, n)) = self.service_per_step.get(j as usize) {
                if n > 0 {
                    last_service = sum / n as f64;
                }
            }
        }
        for j in (now_boundary - steps)..now_boundary {
            // Step j covers [j*step, (j+1)*step); its sample is stamped at its end.
            let t = base + (j + 1) as f64 * step;
            let rate = if j < 0 {
                warm.rate
            } else {
                *self.arrivals_per_step.get(j as usize).unwrap_or(&0) as f64 / step
            };
            if j >= 0 {
                if let Some(&(sum, n)) = self.service_per_step.get(j as usize) {
                    if n > 0 {
                        last_service = sum / n as f64;
                    }
                }
            }
            let b = j + 1;
            let (waiting, running) = if b <= 0 {
                (0.0, warm.running)
            } else {
                (
                    *self.waiting_at_boundary.get(b as usize).unwrap_or(&0) as f64,
                    *self.running_at_boundary.get(b as usize).unwrap_or(&0) as f64,
                )
            };
            obs.arrival_rate.push(Sample::new(t, rate));
            obs.service_time_s.push(Sample::new(t, last_service));
            obs.waiting.push(Sample::new(t, waiting));
            obs.running.push(Sample::new(t, running));
        }
        obs
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Headroom, Replicas, Request, RunConfig, WarmStart};
    use super::*;
    use crate::sim::model::{instance_type, Hpa, Model, Provisioner};

    fn config() -> RunConfig {
        RunConfig {
            model: Model {
                prefill_tokens_per_s: 1000.0,
                decode_tokens_per_s: 10.0,
                slots_per_replica: 8,
                gpus_per_replica: 1,
                image_pull_s: 0.0,
                model_load_s: 0.0,
                prepull: true,
                hpa: Hpa {
                    target_utilization: 1.0,
                    sync_s: 15.0,
                    scale_down_window_s: 300.0,
                    scale_up_pods: 4,
                    scale_up_percent: 100.0,
                    min_replicas: 1,
                    max_replicas: 10,
                },
            },
            provisioner: Provisioner {
                instance: instance_type("g5.xlarge").unwrap().clone(),
                node_launch_s: 41.0,
                batch_s: 1.0,
                empty_after_s: 600.0,
                price_factor: 1.0,
            },
            replicas: Replicas::Static(1),
            headroom: Headroom::None,
            warm: WarmStart {
                replicas: 1,
                rate: 2.0,
                service_s: 3.0,
                running: 6.0,
            },
            slo_wait_s: 10.0,
            step_s: 15.0,
            base_epoch: 1_000_000.0,
        }
    }

    #[test]
    fn the_observation_is_the_metric_history_a_tick_would_fetch() {
        // A 60 s window at a 15 s step is 4 samples, stamped at the end of each step and ending
        // with the last complete step. At t = 31 the complete steps are [0,15) and [15,30); the
        // two before t = 0 are the steady state (2 req/s, 3 s service, 6 running, none waiting).
        let cfg = config();
        let mut sim = Sim::new(&cfg);
        sim.warm_start();
        let policy = PolicySpec {
            window_s: 60.0,
            ..PolicySpec::default()
        };
        for (t, kind) in [
            (0.0, "sample"),
            (1.0, "req"),
            (2.0, "req"),
            (15.0, "sample"),
            (16.0, "req"),
            (30.0, "sample"),
        ] {
            sim.now = t;
            if kind == "req" {
                sim.on_arrival(Request {
                    arrival: t,
                    service_s: 100.0,
                });
            } else {
                sim.on_sample();
            }
        }
        sim.now = 31.0;
        let obs = sim.observation(&policy);
        let base = cfg.base_epoch;
        let times: Vec<f64> = obs.arrival_rate.iter().map(|s| s.t - base).collect();
        assert_eq!(times, vec![-15.0, 0.0, 15.0, 30.0]);
        let rates: Vec<f64> = obs.arrival_rate.iter().map(|s| s.v).collect();
        assert_eq!(rates, vec![2.0, 2.0, 2.0 / 15.0, 1.0 / 15.0]);
        let service: Vec<f64> = obs.service_time_s.iter().map(|s| s.v).collect();
        assert_eq!(service, vec![3.0, 3.0, 100.0, 100.0]);
        // Running at the boundaries 15 and 30: 2 then 3 requests in their 100 s slots.
        let running: Vec<f64> = obs.running.iter().map(|s| s.v).collect();
        assert_eq!(running, vec![6.0, 6.0, 2.0, 3.0]);
        assert!(obs.waiting.iter().all(|s| s.v == 0.0));
        assert_eq!(obs.serving_replicas, Some(1));
        assert_eq!(obs.pending_pods, 0);
        assert_eq!(obs.problem, None);
    }
}
