//! `decide(observed, target, policy, prior, now) -> Plan`: the whole decision for one target,
//! with its safety rails. (Implemented by the core owner.)

use super::plan::Plan;
use super::signal::Observation;
use super::spec::{HeadroomState, PolicySpec, TargetSpec};

pub fn decide(
    observed: &Observation,
    target: &TargetSpec,
    policy: &PolicySpec,
    prior: &HeadroomState,
    now: f64,
) -> Plan {
    let _ = (observed, target, policy, prior, now);
    todo!("core owner implements")
}
