//! The cluster model's parameters: how long a request occupies a slot, how big replicas and nodes
//! are, what nodes cost, and how long capacity takes to arrive. Defaults and their sources are
//! documented on the command-line flags (src/cli/simulate.rs) and in docs/simulator.md.

use serde::Serialize;

/// An EC2 instance type the simulator can launch.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InstanceType {
    pub name: &'static str,
    pub gpus: u32,
    /// On-demand price, USD per hour (us-east-1, Linux, AWS price list).
    pub on_demand_usd_per_hour: f64,
}

/// The built-in catalogue: NVIDIA A10G instances of the g5 family (24 GB per GPU, enough for a
/// 7-8B model in fp16 per GPU) and p4d.24xlarge for a 70B model across 8 GPUs. Prices: us-east-1
/// on-demand Linux list prices.
pub const INSTANCE_TYPES: &[InstanceType] = &[
    InstanceType {
        name: "g5.xlarge",
        gpus: 1,
        on_demand_usd_per_hour: 1.006,
    },
    InstanceType {
        name: "g5.12xlarge",
        gpus: 4,
        on_demand_usd_per_hour: 5.672,
    },
    InstanceType {
        name: "g5.48xlarge",
        gpus: 8,
        on_demand_usd_per_hour: 16.288,
    },
    // 8 x A100 40 GB (320 GB: a 70B model in bf16, 140 GB, with room for its KV cache). The
    // us-east-1 on-demand list price from its launch until AWS's GPU price cuts of June 2025;
    // the price after the cut could not be checked (December 2026), so dollars for this type
    // are an upper bound.
    InstanceType {
        name: "p4d.24xlarge",
        gpus: 8,
        on_demand_usd_per_hour: 32.7726,
    },
];

pub fn instance_type(name: &str) -> Option<&'static InstanceType> {
    INSTANCE_TYPES.iter().find(|t| t.name == name)
}

/// How nodes of one provisioner arrive and leave.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Provisioner {
    pub instance: InstanceType,
    /// Seconds from "pods are pending" to the node being Ready (Karpenter: 41 s per the field
    /// report; Cluster Autoscaler: 4.2 min for the same burst).
    pub node_launch_s: f64,
    /// Pending pods are batched until none came for this long (Karpenter's BATCH_IDLE_DURATION
    /// default, 1 s)...
    pub batch_s: f64,
    /// ...or this long after the first (BATCH_MAX_DURATION default, 10 s).
    pub batch_max_s: f64,
    /// A node is removed after this long without a pod event (Karpenter `consolidateAfter`;
    /// Cluster Autoscaler `scale-down-unneeded-time`, empty nodes only).
    pub empty_after_s: f64,
    /// Karpenter's disruption controller (engine/disruption.rs); None: empty nodes are removed
    /// at `empty_after_s` one by one as they come (Cluster Autoscaler here).
    pub disruption: Option<Disruption>,
    /// Price multiplier: 1 for on-demand, the spot/on-demand ratio for spot.
    pub price_factor: f64,
}

/// A Karpenter NodePool's `spec.disruption`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Disruption {
    /// consolidationPolicy WhenEmptyOrUnderutilized (true) or WhenEmpty (false).
    pub underutilized: bool,
    /// budgets `nodes`: at most this many nodes disrupted at once (infra/k8s/nodepool-gpu.yaml:
    /// 1).
    pub budget_nodes: u32,
}

impl Provisioner {
    pub fn usd_per_node_hour(&self) -> f64 {
        self.instance.on_demand_usd_per_hour * self.price_factor
    }
}

/// Everything about one inference workload and the cluster that serves it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Model {
    /// Prompt tokens per second one request slot processes (prefill).
    pub prefill_tokens_per_s: f64,
    /// Generated tokens per second of one request slot (decode, under continuous batching).
    pub decode_tokens_per_s: f64,
    /// Requests one replica serves at once.
    pub slots_per_replica: u32,
    pub gpus_per_replica: u32,
    /// Pulling the image and model weights onto a fresh node (the pre-pull DaemonSet does it as
    /// soon as the node is Ready).
    pub image_pull_s: f64,
    /// Loading weights from local disk into the GPU until the replica serves.
    pub model_load_s: f64,
    /// Whether images and weights are pre-pulled on every new node (infra/k8s/prepull-daemonset);
    /// if not, the first inference pod on a node pulls them.
    pub prepull: bool,
    /// The HPA-like replica controller.
    pub hpa: Hpa,
}

impl Model {
    /// Seconds one request occupies a slot.
    pub fn service_time(&self, input_tokens: u32, output_tokens: u32) -> f64 {
        input_tokens as f64 / self.prefill_tokens_per_s
            + output_tokens as f64 / self.decode_tokens_per_s
    }
}

/// The replica controller every policy shares: a HorizontalPodAutoscaler (autoscaling/v2) on a
/// Pods metric, requests in the system (waiting + running) per pod. Its arithmetic is in
/// sim/hpa.rs; defaults are Kubernetes' (docs/simulator.md).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Hpa {
    /// Target fraction of slots in use: the metric's averageValue is slots x this.
    pub target_utilization: f64,
    /// The user's target, which a policy lowering `target_utilization` (hpa-target) leaves as
    /// is: the GPU-hour waterfall counts replicas above what an HPA at this target wants as warm
    /// excess.
    pub wanted_utilization: f64,
    /// Sync period (kube-controller-manager --horizontal-pod-autoscaler-sync-period, 15 s).
    pub sync_s: f64,
    /// No change while |ratio - 1| is at most this (--horizontal-pod-autoscaler-tolerance, 0.1).
    pub tolerance: f64,
    /// Seconds from a scrape until the HPA's metric query can see it (metric store and adapter).
    pub metrics_lag_s: f64,
    /// Scale-up stabilisation window (default 0 s): the lowest recommendation of the window.
    pub scale_up_window_s: f64,
    /// Scale-up policies, the larger wins (defaults 4 pods and 100 % per period).
    pub scale_up_pods: u32,
    pub scale_up_percent: f64,
    /// Scale-down stabilisation window (default 300 s): the highest recommendation of the window.
    pub scale_down_window_s: f64,
    /// Scale-down policy (default 100 % per period).
    pub scale_down_percent: f64,
    /// periodSeconds of every policy (default 15 s).
    pub policy_period_s: f64,
    pub min_replicas: u32,
    pub max_replicas: u32,
}

impl Hpa {
    /// Replicas for a steady `in_system` requests at the target, within the replica range: the
    /// warm start's fleet (not the controller's own formula, which is in sim/hpa.rs).
    pub fn raw_desired(&self, in_system: u64, slots: u32) -> u32 {
        let per_replica = slots as f64 * self.target_utilization;
        ((in_system as f64 / per_replica).ceil() as u32).clamp(self.min_replicas, self.max_replicas)
    }

    /// An HPA with Kubernetes' defaults (sync 15 s, tolerance 0.1, behaviour of autoscaling/v2)
    /// and no metric lag, for the given target and range.
    pub fn kubernetes_defaults(
        target_utilization: f64,
        min_replicas: u32,
        max_replicas: u32,
    ) -> Hpa {
        Hpa {
            target_utilization,
            wanted_utilization: target_utilization,
            sync_s: 15.0,
            tolerance: 0.1,
            metrics_lag_s: 0.0,
            scale_up_window_s: 0.0,
            scale_up_pods: 4,
            scale_up_percent: 100.0,
            scale_down_window_s: 300.0,
            scale_down_percent: 100.0,
            policy_period_s: 15.0,
            min_replicas,
            max_replicas,
        }
    }

    /// The metric's target: requests in the system per pod.
    pub fn target_per_pod(&self, slots: u32) -> f64 {
        f64::from(slots) * self.target_utilization
    }
}

/// The three parts of the provisioning lead time, scaled so they add up to `total`, keeping the
/// proportions of the given defaults. Used by `--lead-time`.
pub fn split_lead_time(total: f64, launch: f64, pull: f64, load: f64) -> (f64, f64, f64) {
    let sum = launch + pull + load;
    if sum <= 0.0 {
        return (total, 0.0, 0.0);
    }
    let k = total / sum;
    (launch * k, pull * k, load * k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_time_adds_prefill_and_decode() {
        let hpa = Hpa::kubernetes_defaults(0.5, 1, 10);
        let model = Model {
            prefill_tokens_per_s: 1000.0,
            decode_tokens_per_s: 50.0,
            slots_per_replica: 4,
            gpus_per_replica: 1,
            image_pull_s: 0.0,
            model_load_s: 0.0,
            prepull: true,
            hpa: hpa.clone(),
        };
        // 2000 prompt tokens at 1000/s + 100 generated at 50/s = 2 s + 2 s.
        assert_eq!(model.service_time(2000, 100), 4.0);
        // 4 slots at 50% utilisation = 2 requests per replica: 5 requests need 3 replicas.
        assert_eq!(hpa.raw_desired(5, 4), 3);
        assert_eq!(hpa.raw_desired(0, 4), 1, "min replicas");
        assert_eq!(hpa.raw_desired(1000, 4), 10, "max replicas");
    }

    #[test]
    fn lead_time_split_keeps_proportions() {
        let (a, b, c) = split_lead_time(90.0, 41.0, 109.0, 30.0);
        assert!((a + b + c - 90.0).abs() < 1e-9);
        assert!((a - 20.5).abs() < 1e-9 && (c - 15.0).abs() < 1e-9);
    }
}
