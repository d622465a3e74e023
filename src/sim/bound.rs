//! The true lower bound ("lower-bound" in reports): the fewest node-GPU-seconds any policy can
//! spend while no request waits, given that capacity cannot appear from nothing. A replica must
//! load its model before it serves, and a node must launch, pull the image and load the model
//! before its first replica serves; a clairvoyant places them exactly then and releases them
//! exactly when not needed.
//!
//! The demand is the ideal packing's curve (`ceil(in-flight / slots)` replicas, whole nodes),
//! cut into layers: layer k is on while at least k units (replicas, or nodes) are needed. Each time a layer
//! comes on after being off for `gap` seconds, the cheapest a clairvoyant can do is to keep the
//! unit through the gap or release it and start a new one `setup` seconds ahead, so the layer
//! costs `min(gap, setup)` on top of its on-time (the first time it comes on: `setup`). Summing
//! the layers is the optimum for identical units with a setup time (a unit kept through a gap
//! can always be the one of the lowest free layer), so no policy that serves every request on
//! arrival spends less. The node's setup is counted with a short launch, the launch model's 1st
//! percentile: a policy would need most of its launches among the luckiest 1 % to go under it.
//!
//! What it does not bound: a policy that lets requests wait can pack them into fewer replicas;
//! its GPU-hours are compared with the bound only as regret, never checked against it.

/// How long new capacity takes before it serves, and the longest wait the SLO allows, for the
/// true lower bounds (this file and wait_bound.rs).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Setups {
    /// A replica's model load on a Ready node.
    pub replica_s: f64,
    /// A node's shortest launch, image pull and model load.
    pub node_s: f64,
    /// The SLO's wait: "slo-bound" lets each request wait this long (0: it is "lower-bound").
    pub slo_wait_s: f64,
}

/// What a replica and a node hold.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    pub slots: u32,
    pub gpus_per_replica: u32,
    pub gpus_per_node: u32,
}

impl Shape {
    /// Replicas one node holds (at least 1).
    pub fn replicas_per_node(&self) -> u32 {
        (self.gpus_per_node / self.gpus_per_replica).max(1)
    }
}

/// Accumulates the setup costs of a layered demand curve (units per layer, setup in seconds).
#[derive(Clone, Debug)]
pub struct LayerBound {
    setup_s: f64,
    from_s: f64,
    /// For each layer: when it last went off (None: never on yet).
    last_off: Vec<Option<f64>>,
    /// Units on now.
    on: u32,
    /// Unit-seconds of setup and kept gaps counted from `from_s` on.
    pub extra_unit_seconds: f64,
}

impl LayerBound {
    /// Layers whose setup takes `setup_s`; only cost from `from_s` on is counted. Units on at
    /// the first call that are already on at t <= `from_s` are the warm start: free.
    pub fn new(setup_s: f64, from_s: f64) -> Self {
        LayerBound {
            setup_s: setup_s.max(0.0),
            from_s,
            last_off: Vec::new(),
            on: 0,
            extra_unit_seconds: 0.0,
        }
    }

    /// The demand becomes `units` at time `t` (calls in time order).
    pub fn set(&mut self, t: f64, units: u32) {
        if units > self.on {
            if self.last_off.len() < units as usize {
                self.last_off.resize(units as usize, None);
            }
            for layer in self.on..units {
                self.extra_unit_seconds += self.cost_of_coming_on(t, self.last_off[layer as usize]);
            }
        } else {
            for layer in units..self.on {
                self.last_off[layer as usize] = Some(t);
            }
        }
        self.on = units;
    }

    /// The scored part of the cheaper way to have a unit on at `t`: kept since it went off, or
    /// started `setup_s` earlier (never before it could have been: either way only the part
    /// after `from_s` is counted).
    fn cost_of_coming_on(&self, t: f64, last_off: Option<f64>) -> f64 {
        let restart = (t - self.from_s).clamp(0.0, self.setup_s);
        match last_off {
            Some(off) => (t - off.max(self.from_s)).max(0.0).min(restart),
            None => restart,
        }
    }
}

/// The layer sums of one demand curve given in requests in flight, at the replica level
/// (`ceil(in-flight / slots)` replicas, the model load as setup) and at the node level (whole
/// nodes of them, the node's setup), with the on-time of each from `from_s` on.
#[derive(Clone, Debug)]
pub struct CurveBound {
    shape: Shape,
    from_s: f64,
    last_t: f64,
    in_flight: u64,
    /// From `from_s` on: slot-seconds of the requests (the work), GPU-seconds of the replicas,
    /// of the nodes, and node-seconds.
    pub slot_seconds: f64,
    pub replica_gpu_seconds: f64,
    pub node_gpu_seconds: f64,
    pub node_seconds: f64,
    replicas: LayerBound,
    nodes: LayerBound,
}

impl CurveBound {
    pub fn new(shape: Shape, setups: Setups, from_s: f64) -> Self {
        CurveBound {
            shape,
            from_s,
            last_t: 0.0,
            in_flight: 0,
            slot_seconds: 0.0,
            replica_gpu_seconds: 0.0,
            node_gpu_seconds: 0.0,
            node_seconds: 0.0,
            replicas: LayerBound::new(setups.replica_s, from_s),
            nodes: LayerBound::new(setups.node_s, from_s),
        }
    }

    /// Replicas and nodes `in_flight` requests need.
    pub fn units(&self, in_flight: u64) -> (u32, u32) {
        let replicas = in_flight.div_ceil(u64::from(self.shape.slots)) as u32;
        (replicas, replicas.div_ceil(self.shape.replicas_per_node()))
    }

    /// The curve becomes `in_flight` at `t` (calls in time order).
    pub fn set(&mut self, t: f64, in_flight: u64) {
        if t > self.last_t {
            let (replicas, nodes) = self.units(self.in_flight);
            let dt = (t - self.last_t.max(self.from_s)).max(0.0);
            let s = &self.shape;
            self.slot_seconds += self.in_flight as f64 * dt;
            self.replica_gpu_seconds += f64::from(replicas * s.gpus_per_replica) * dt;
            self.node_gpu_seconds += f64::from(nodes * s.gpus_per_node) * dt;
            self.node_seconds += f64::from(nodes) * dt;
            self.last_t = t;
        }
        self.in_flight = in_flight;
        let (replicas, nodes) = self.units(in_flight);
        self.replicas.set(t, replicas);
        self.nodes.set(t, nodes);
    }

    /// The bound's node GPU-seconds: either level bounds the cost; the larger is the tighter.
    pub fn gpu_seconds(&self) -> f64 {
        let s = &self.shape;
        let by_replicas = self.replica_gpu_seconds
            + self.replicas.extra_unit_seconds * f64::from(s.gpus_per_replica);
        let by_nodes =
            self.node_gpu_seconds + self.nodes.extra_unit_seconds * f64::from(s.gpus_per_node);
        by_replicas.max(by_nodes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A situation: name, setup seconds, scoring start, demand changes (t, units), and the
    /// extra unit-seconds expected.
    type Case = (&'static str, f64, f64, &'static [(f64, u32)], f64);

    #[test]
    fn layer_costs_by_situation() {
        // A unit first needed at t = 10 with a 30 s setup started before t = 0, where scoring
        // begins: 10 s of it is counted.
        let table: &[Case] = &[
            (
                "warm start at t=0 is free",
                30.0,
                0.0,
                &[(0.0, 2), (100.0, 0)],
                0.0,
            ),
            (
                "one new unit pays its setup",
                30.0,
                0.0,
                &[(0.0, 1), (100.0, 2), (200.0, 1)],
                30.0,
            ),
            (
                "a short gap is kept",
                30.0,
                0.0,
                &[(0.0, 1), (10.0, 2), (20.0, 1), (25.0, 2)],
                10.0 + 5.0,
            ),
            (
                "a long gap restarts",
                30.0,
                0.0,
                &[(0.0, 1), (10.0, 2), (20.0, 1), (120.0, 2)],
                10.0 + 30.0,
            ),
            (
                "two layers at once pay twice",
                30.0,
                0.0,
                &[(0.0, 0), (50.0, 2)],
                60.0,
            ),
            (
                "setup before scoring is free",
                30.0,
                100.0,
                &[(0.0, 0), (110.0, 1)],
                10.0,
            ),
            (
                "a gap counts from scoring",
                30.0,
                100.0,
                &[(0.0, 1), (50.0, 0), (105.0, 1)],
                5.0,
            ),
            (
                "zero setup adds nothing",
                0.0,
                0.0,
                &[(0.0, 0), (10.0, 3), (11.0, 0), (12.0, 3)],
                0.0,
            ),
        ];
        for (name, setup, from, changes, want) in table {
            let mut b = LayerBound::new(*setup, *from);
            for (t, u) in changes.iter() {
                b.set(*t, *u);
            }
            assert!(
                (b.extra_unit_seconds - want).abs() < 1e-9,
                "{name}: got {} want {want}",
                b.extra_unit_seconds
            );
        }
    }
}
