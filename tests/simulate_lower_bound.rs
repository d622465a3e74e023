//! The true lower bound holds: every policy, on every built-in scenario, at each of its knob
//! points, spends at least the bound's GPU-hours whenever no request waited. The bound is for
//! serving every request on arrival; a policy that lets requests wait, even within the SLO's
//! wait, can pack them into fewer replicas and is compared with it only as regret.

use clap::Parser;
use prewarm::cli::{Cli, Command};
use prewarm::sim::compare::{compare, Comparison};
use prewarm::sim::scenario::{Scenario, ScenarioKind};
use prewarm::sim::setup::PolicyName;
use prewarm::sim::workload::{Source, Workload};

fn run(kind: ScenarioKind, speed: f64, scale: f64, flags: &[&str]) -> Comparison {
    let every: Vec<&str> = PolicyName::ALL.iter().map(|p| p.label()).collect();
    let every = every.join(",");
    let mut argv = vec!["prewarm", "simulate", "--burn-in", "0", "--threads", "2"];
    argv.extend_from_slice(&["--policies", &every]);
    argv.extend_from_slice(flags);
    let Command::Simulate(args) = Cli::try_parse_from(argv).unwrap().command else {
        unreachable!()
    };
    let setup = args.common.setup(args.common.lead_times()[0]).unwrap();
    let workload = Workload {
        name: kind.name().into(),
        source: Source::Scenario(Scenario {
            kind,
            seed: 1,
            rate_per_pod: 1.0,
            input_tokens: 1000,
            output_tokens: 200,
            days: 1,
        }),
        speed,
        scale,
        seed: 1,
        superpose: 1,
        rate_scale: 1.0,
        tokens_from: None,
    };
    compare(&workload, &setup, &|_| {}).unwrap()
}

fn check(cmp: &Comparison, what: &str) -> usize {
    let bound = cmp
        .rows
        .iter()
        .find(|r| r.policy == "lower-bound")
        .expect("the bound is reported");
    let ideal = cmp.rows.iter().find(|r| r.policy == "ideal").unwrap();
    assert!(
        bound.gpu_hours >= ideal.gpu_hours,
        "{what}: bound under the ideal packing"
    );
    let mut checked = 0;
    let mut points: Vec<(String, f64, f64)> = cmp
        .rows
        .iter()
        .filter(|r| r.policy != "lower-bound" && r.policy != "ideal")
        .map(|r| {
            (
                format!("{} ({})", r.policy, r.detail),
                r.max_wait_s,
                r.gpu_hours,
            )
        })
        .collect();
    for (policy, frontier) in &cmp.frontiers {
        for p in frontier {
            points.push((format!("{policy} at {}", p.knob), p.max_wait_s, p.gpu_hours));
        }
    }
    for (name, max_wait_s, gpu_hours) in points {
        if max_wait_s > 0.0 {
            continue;
        }
        checked += 1;
        assert!(
            gpu_hours >= bound.gpu_hours * (1.0 - 1e-9),
            "{what}: {name} spends {gpu_hours} GPU-h with no request waiting, under the lower bound's {}",
            bound.gpu_hours
        );
    }
    checked
}

#[test]
fn no_policy_that_makes_no_request_wait_spends_less_than_the_lower_bound() {
    // Each scenario's day compressed (speed) and thinned (scale) to run in seconds; both
    // startup profiles' shapes: 1-GPU replicas on 4-GPU nodes (default) and on 1-GPU nodes.
    let cases: [(ScenarioKind, f64, f64); 4] = [
        (ScenarioKind::Burst180, 1.0, 0.2),
        (ScenarioKind::Diurnal, 24.0, 0.05),
        (ScenarioKind::Bursty, 12.0, 0.2),
        (ScenarioKind::CronBursts, 8.0, 0.2),
    ];
    let mut checked = 0;
    for (kind, speed, scale) in cases {
        for flags in [
            &["--scenario", kind.name()][..],
            &[
                "--scenario",
                kind.name(),
                "--instance-type",
                "g5.xlarge",
                "--ca-instance-type",
                "g5.xlarge",
            ][..],
        ] {
            let cmp = run(kind, speed, scale, flags);
            checked += check(&cmp, &format!("{} {:?}", kind.name(), flags));
        }
    }
    eprintln!("{checked} points without a wait checked");
    // Not vacuous: the larger static fleets make no request wait on every scenario.
    assert!(
        checked >= 8,
        "only {checked} points without delay were checked"
    );
}
