//! Startup profiles: a model on its node type, with the three parts of its provisioning lead
//! time (node boot, image and weight pull, model load including torch.compile and CUDA graph
//! capture) taken from published measurements. Changes when a profile is added or a source is
//! revised. Every figure's source, date, hardware and range is in docs/simulator.md ("Startup
//! profiles"); the comments here say only which figure is which.

use super::setup::ModelValues;

/// A published startup profile (`--startup-profile`). Without one the model flags apply as given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StartupProfile {
    /// Llama-3.1-8B (bf16, 16 GB) on one A10G: g5.xlarge, one GPU per replica.
    /// Lead time 75 + 330 + 82 = 487 s.
    #[value(name = "small-1gpu")]
    Small1Gpu,
    /// Llama-3-70B (bf16, 140 GB), tensor parallel 8 on p4d.24xlarge (8 x A100 40 GB).
    /// Lead time 90 + 540 + 220 = 850 s.
    #[value(name = "llama70b-8gpu")]
    Llama70b8Gpu,
}

/// What a profile sets: the node type, the replica's shape and speed, and the lead time's parts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProfileValues {
    pub instance_type: &'static str,
    /// Cluster Autoscaler's one large node type.
    pub ca_instance_type: &'static str,
    pub gpus_per_replica: u32,
    pub slots: u32,
    pub prefill_tokens_per_s: f64,
    pub decode_tokens_per_s: f64,
    pub node_launch: f64,
    pub image_pull: f64,
    pub model_load: f64,
}

impl StartupProfile {
    pub fn values(self) -> ProfileValues {
        match self {
            StartupProfile::Small1Gpu => ProfileValues {
                instance_type: "g5.xlarge",
                ca_instance_type: "g5.48xlarge",
                gpus_per_replica: 1,
                // The replica's speed and slots stay the default flags' (a 7-8B model on an A10G).
                slots: 8,
                prefill_tokens_per_s: 4000.0,
                decode_tokens_per_s: 40.0,
                // Pending pod to GPU allocatable: the middle of the 40-100 s reported.
                node_launch: 75.0,
                // ~12 GB vLLM image in 4-5 min (270 s) + 16 GB of weights in 61 s, one after
                // the other (rounded to 330).
                image_pull: 330.0,
                // Weights 18 + dynamo 10 + compile 13 + graph capture 7 + engine and imports 34,
                // with the compile cache kept.
                model_load: 82.0,
            },
            StartupProfile::Llama70b8Gpu => ProfileValues {
                instance_type: "p4d.24xlarge",
                ca_instance_type: "p4d.24xlarge",
                gpus_per_replica: 8,
                // Estimates (no A100 40 GB tensor-parallel-8 serving measurement found): per-request
                // speeds at 32 concurrent requests.
                slots: 32,
                prefill_tokens_per_s: 3000.0,
                decode_tokens_per_s: 30.0,
                // A GPU node added in 1-1.5 min.
                node_launch: 90.0,
                // The same image (270 s) + 140 GB of weights from object storage in 4-5 min (270 s).
                image_pull: 540.0,
                // Weights from local NVMe 40 (derived) + dynamo 15 + compile 70 + graph capture 60
                // + engine and imports 35.
                model_load: 220.0,
            },
        }
    }

    /// Sets the model values the profile names; the other values stay as given.
    pub fn apply(self, m: &mut ModelValues) {
        let p = self.values();
        m.instance_type = p.instance_type.to_string();
        m.ca_instance_type = p.ca_instance_type.to_string();
        m.gpus_per_replica = p.gpus_per_replica;
        m.slots = p.slots;
        m.prefill_tokens_per_s = p.prefill_tokens_per_s;
        m.decode_tokens_per_s = p.decode_tokens_per_s;
        m.node_launch = p.node_launch;
        m.image_pull = p.image_pull;
        m.model_load = p.model_load;
    }
}
