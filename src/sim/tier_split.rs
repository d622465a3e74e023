//! The split of one NodePool's spare between loaded replicas (a floor per target) and warm
//! nodes (shared by every target of the pool).
//!
//! Both tiers cost GPUs; they differ in what a burst still waits for. A loaded replica serves
//! at once but only its own model; a warm node serves whichever model bursts but still leaves
//! the model load in the request path. So:
//! - each target's floor holds its central forecast at the lead: the part its model will surely
//!   need, which only a loaded replica of that model serves without a model load;
//! - the uncertainty above the central forecasts is pooled: forecast errors of different
//!   models add in quadrature when independent (risk pooling), so the band of the pool's sum is
//!   below the sum of the targets' bands, and one warm node covers whichever model is above its
//!   forecast. The warm nodes hold the pooled band, in GPUs, minus the slack the floors already
//!   hold (their rounding up to whole replicas), in whole nodes.
//!
//! The split is taken only when it costs fewer GPUs than covering every band with replicas
//! (each floor at its own upper band): at equal GPUs the replicas win, as they leave no model
//! load. With one target, or errors that move together (`correlation` 1), pooling saves
//! nothing and the floors sit at the upper bands, as without a pool.
//!
//! Only the simulator's pool engine uses it (`--models K`): it lives here until the tick does.

/// One target of the pool at the lead time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TargetDemand {
    /// Replicas the central forecast needs at the lead (fractional: before rounding).
    pub central: f64,
    /// Replicas the forecast's upper band needs at the lead (at least `central`).
    pub upper: f64,
    /// GPUs one replica of the target takes (at least 1, at most the node's).
    pub gpus_per_replica: u32,
}

/// Which tier holds the band.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    /// Every band in loaded replicas: floors at the upper bands, no warm node.
    Replicas,
    /// Floors at the central forecasts, the pooled band in warm nodes.
    Split,
}

/// The pool's spare, split.
#[derive(Clone, Debug, PartialEq)]
pub struct TierSplit {
    /// Replica floor per target, in the order given.
    pub floors: Vec<u32>,
    /// Warm nodes of the pool (balloons or a capacity buffer of whole nodes).
    pub warm_nodes: u32,
    pub tier: Tier,
    /// The band of the pool's sum, in GPUs.
    pub pooled_band_gpus: f64,
    /// GPUs the two choices cost: every band in replicas, and the split.
    pub replicas_gpus: u32,
    pub split_gpus: u32,
}

/// Splits the pool's spare (see the module's notes). `correlation` is the correlation of the
/// targets' forecast errors, in [0, 1] (0: independent; 1: they move together, no pooling).
pub fn split(targets: &[TargetDemand], node_gpus: u32, correlation: f64) -> TierSplit {
    let rho = correlation.clamp(0.0, 1.0);
    let clean: Vec<TargetDemand> = targets
        .iter()
        .map(|t| {
            let central = t.central.max(0.0);
            TargetDemand {
                central,
                upper: t.upper.max(central),
                gpus_per_replica: t.gpus_per_replica.max(1),
            }
        })
        .collect();
    let whole = |x: f64| (x - 1e-9).ceil().max(0.0) as u32;
    let upper_floors: Vec<u32> = clean.iter().map(|t| whole(t.upper)).collect();
    let central_floors: Vec<u32> = clean.iter().map(|t| whole(t.central)).collect();
    let gpus_of = |floors: &[u32]| -> u32 {
        floors
            .iter()
            .zip(&clean)
            .map(|(&f, t)| f * t.gpus_per_replica)
            .sum()
    };

    // Band of each target in GPUs; the pool's band: sqrt(sum b_i^2 + rho sum_{i != j} b_i b_j).
    let bands: Vec<f64> = clean
        .iter()
        .map(|t| (t.upper - t.central) * t.gpus_per_replica as f64)
        .collect();
    let sum: f64 = bands.iter().sum();
    let squares: f64 = bands.iter().map(|b| b * b).sum();
    let pooled_band_gpus = (squares + rho * (sum * sum - squares)).max(0.0).sqrt();
    // What the central floors hold above the central forecasts (rounding up).
    let slack: f64 = clean
        .iter()
        .zip(&central_floors)
        .map(|(t, &f)| (f as f64 - t.central) * t.gpus_per_replica as f64)
        .sum();
    let node = node_gpus.max(1);
    let warm_nodes = whole((pooled_band_gpus - slack).max(0.0) / node as f64);

    let replicas_gpus = gpus_of(&upper_floors);
    let split_gpus = gpus_of(&central_floors) + warm_nodes * node;
    if split_gpus < replicas_gpus {
        TierSplit {
            floors: central_floors,
            warm_nodes,
            tier: Tier::Split,
            pooled_band_gpus,
            replicas_gpus,
            split_gpus,
        }
    } else {
        TierSplit {
            floors: upper_floors,
            warm_nodes: 0,
            tier: Tier::Replicas,
            pooled_band_gpus,
            replicas_gpus,
            split_gpus,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(central: f64, upper: f64, gpus_per_replica: u32) -> TargetDemand {
        TargetDemand {
            central,
            upper,
            gpus_per_replica,
        }
    }

    struct Case {
        name: &'static str,
        targets: Vec<TargetDemand>,
        node_gpus: u32,
        correlation: f64,
        floors: Vec<u32>,
        warm_nodes: u32,
        tier: Tier,
        replicas_gpus: u32,
        split_gpus: u32,
    }

    #[allow(clippy::too_many_arguments)]
    fn case(
        name: &'static str,
        targets: Vec<TargetDemand>,
        node_gpus: u32,
        correlation: f64,
        floors: Vec<u32>,
        warm_nodes: u32,
        tier: Tier,
        replicas_gpus: u32,
        split_gpus: u32,
    ) -> Case {
        Case {
            name,
            targets,
            node_gpus,
            correlation,
            floors,
            warm_nodes,
            tier,
            replicas_gpus,
            split_gpus,
        }
    }

    /// Each expectation is computed by hand in the comment above it.
    #[test]
    fn split_table() {
        use Tier::*;
        let cases = vec![
            // One target: pooled band = its own band 8 GPUs = 1 node; split 8*3 + 8 = 32,
            // replicas 8*4 = 32: a tie goes to the replicas (no model load).
            case(
                "one target",
                vec![t(3.0, 4.0, 8)],
                8,
                0.0,
                vec![4],
                0,
                Replicas,
                32,
                32,
            ),
            // Four 8-GPU targets, band 1 replica each: pooled sqrt(4 * 64) = 16 GPUs = 2 nodes;
            // split 4*3*8 + 16 = 112 < replicas 4*4*8 = 128.
            case(
                "four independent",
                vec![t(3.0, 4.0, 8); 4],
                8,
                0.0,
                vec![3; 4],
                2,
                Split,
                128,
                112,
            ),
            // The same errors moving together: pooled = 32 GPUs = 4 nodes; split 96 + 32 = 128,
            // no cheaper than the replicas: replicas.
            case(
                "four correlated",
                vec![t(3.0, 4.0, 8); 4],
                8,
                1.0,
                vec![4; 4],
                0,
                Replicas,
                128,
                128,
            ),
            // 1-GPU replicas on 8-GPU nodes, bands 3, 4, 0 replicas: pooled sqrt(9 + 16) = 5
            // GPUs; central floors 10, 6, 2 hold no slack; 5 GPUs -> 1 node. Split 18 + 8 = 26,
            // replicas 13 + 10 + 2 = 25: replicas.
            case(
                "small replicas, node too coarse",
                vec![t(10.0, 13.0, 1), t(6.0, 10.0, 1), t(2.0, 2.0, 1)],
                8,
                0.0,
                vec![13, 10, 2],
                0,
                Replicas,
                25,
                26,
            ),
            // Nine 1-GPU targets with band 4 each: pooled sqrt(9 * 16) = 12 GPUs -> 2 nodes of 8;
            // split 9*5 + 16 = 61 < replicas 9*9 = 81.
            case(
                "nine small",
                vec![t(5.0, 9.0, 1); 9],
                8,
                0.0,
                vec![5; 9],
                2,
                Split,
                81,
                61,
            ),
            // Fractional forecasts: central 2.5 and 2.5 (floors 3 and 3 hold slack 0.5 * 8 = 4
            // GPUs each, 8 in all), bands 1.5 replicas = 12 GPUs each: pooled sqrt(288) = 16.97,
            // minus 8 = 8.97 GPUs -> 2 nodes. Split 48 + 16 = 64 = replicas 4*8 + 4*8: replicas.
            case(
                "fractional, slack counted",
                vec![t(2.5, 4.0, 8), t(2.5, 4.0, 8)],
                8,
                0.0,
                vec![4, 4],
                0,
                Replicas,
                64,
                64,
            ),
            // Mixed sizes: an 8-GPU target with band 2 replicas (16 GPUs) and three 2-GPU ones
            // with band 4 replicas (8 GPUs): pooled sqrt(256 + 3 * 64) = 21.17 GPUs -> 3 nodes.
            // Split 8*2 + 3*2*3 + 24 = 58 < replicas 8*4 + 3*2*7 = 74.
            case(
                "mixed sizes",
                vec![
                    t(2.0, 4.0, 8),
                    t(3.0, 7.0, 2),
                    t(3.0, 7.0, 2),
                    t(3.0, 7.0, 2),
                ],
                8,
                0.0,
                vec![2, 3, 3, 3],
                3,
                Split,
                74,
                58,
            ),
            // No band at all: floors at the forecast, nothing warm.
            case(
                "no band",
                vec![t(3.0, 3.0, 8); 3],
                8,
                0.0,
                vec![3; 3],
                0,
                Replicas,
                72,
                72,
            ),
            // An upper below the central is read as no band; a negative forecast as none.
            case(
                "upper below central",
                vec![t(2.0, 1.0, 4), t(-1.0, -1.0, 4)],
                8,
                0.0,
                vec![2, 0],
                0,
                Replicas,
                8,
                8,
            ),
            // No target: nothing.
            case("empty", vec![], 8, 0.0, vec![], 0, Replicas, 0, 0),
        ];
        for c in cases {
            let s = split(&c.targets, c.node_gpus, c.correlation);
            assert_eq!(s.floors, c.floors, "{}: floors", c.name);
            assert_eq!(s.warm_nodes, c.warm_nodes, "{}: warm nodes", c.name);
            assert_eq!(s.tier, c.tier, "{}: tier", c.name);
            assert_eq!(
                s.replicas_gpus, c.replicas_gpus,
                "{}: replicas GPUs",
                c.name
            );
            assert_eq!(s.split_gpus, c.split_gpus, "{}: split GPUs", c.name);
        }
    }

    #[test]
    fn pooled_band_adds_in_quadrature() {
        // Bands 3 and 4 GPUs: independent 5, half correlated sqrt(9 + 16 + 0.5 * 24) = sqrt(37),
        // together 7.
        let targets = [t(0.0, 3.0, 1), t(0.0, 4.0, 1)];
        for (rho, want) in [(0.0, 5.0), (0.5, 37f64.sqrt()), (1.0, 7.0), (2.0, 7.0)] {
            let got = split(&targets, 8, rho).pooled_band_gpus;
            assert!((got - want).abs() < 1e-9, "rho {rho}: {got} != {want}");
        }
    }
}
