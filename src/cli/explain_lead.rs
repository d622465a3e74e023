//! The lead-time part of `prewarm explain --target NAME`: the horizon the tick decides with, as
//! learned from the cluster (the `LEAD_TIMES_CONFIGMAP` book the tick keeps), phase by phase,
//! or LEAD_TIME_SECONDS and why.

use crate::adapters::kube::lead_times::store;
use crate::config::Config;
use crate::core::lead::{Horizon, HORIZON_QUANTILE};
use crate::core::TargetSpec;
use crate::handlers::tick::lead;

/// The target's horizon at `now` from the stored book; LEAD_TIME_SECONDS with the reason when
/// learning is off or the book cannot be read. Never fails: explain goes on without it.
pub async fn horizon(config: &Config, target: &TargetSpec, now: f64) -> Horizon {
    let policy = &config.policy;
    if !config.learn_lead_times {
        return lead::setting(policy, "LEARN_LEAD_TIMES is off: LEAD_TIME_SECONDS".into());
    }
    let at = &config.lead_times_configmap;
    let read = match config.require_cluster() {
        Ok(access) => match crate::adapters::kube::client(access).await {
            Ok(client) => store::read_book(&client, at).await,
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    match read {
        Ok(stored) => lead::book_horizon(&stored.book, target, policy, now),
        Err(e) => lead::setting(
            policy,
            format!(
                "LEAD_TIME_SECONDS: the learned lead times in {}/{} were not read: {e}",
                at.namespace, at.name
            ),
        ),
    }
}

/// `lead time: 60 s learned (node-boot in gpu 32 s of 3 samples, ...)` or the fallback's reason.
pub fn text(h: &Horizon) -> String {
    let phases: Vec<String> = h
        .phases
        .iter()
        .map(|p| {
            let seconds = p.seconds.map_or("-".to_string(), |s| format!("{s:.0} s"));
            format!(
                "{} in {} {seconds} of {} samples",
                p.phase.as_str(),
                p.scope,
                p.samples
            )
        })
        .collect();
    let phases = if phases.is_empty() {
        String::new()
    } else {
        format!(" ({})", phases.join(", "))
    };
    match &h.fallback {
        None => format!(
            "lead time: {:.0} s learned, the {HORIZON_QUANTILE} quantile of each phase{phases}\n",
            h.seconds
        ),
        Some(why) => format!("lead time: {:.0} s, {why}{phases}\n", h.seconds),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::lead::{Phase, PhaseLead};

    #[test]
    fn the_horizon_reads_as_one_line() {
        let phase = |phase, scope: &str, samples, seconds| PhaseLead {
            phase,
            scope: scope.into(),
            samples,
            seconds,
        };
        let learned = Horizon {
            seconds: 60.0,
            phases: vec![
                phase(Phase::NodeBoot, "gpu", 3, Some(32.0)),
                phase(Phase::ImagePull, "llama", 3, Some(0.0)),
                phase(Phase::ModelLoad, "llama", 4, Some(20.0)),
            ],
            fallback: None,
        };
        assert_eq!(
            text(&learned),
            "lead time: 60 s learned, the 0.9 quantile of each phase (node-boot in gpu 32 s of 3 \
             samples, image-pull in llama 0 s of 3 samples, model-load in llama 20 s of 4 samples)\n"
        );
        let off = Horizon {
            seconds: 180.0,
            phases: Vec::new(),
            fallback: Some("LEARN_LEAD_TIMES is off: LEAD_TIME_SECONDS".into()),
        };
        assert_eq!(
            text(&off),
            "lead time: 180 s, LEARN_LEAD_TIMES is off: LEAD_TIME_SECONDS\n"
        );
    }
}
