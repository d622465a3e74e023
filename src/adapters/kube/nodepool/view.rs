//! What prewarm reads of a Karpenter NodePool: the view both the budgets freeze (`nodepool`) and
//! the spend cap (`limits`) plan from.

use std::collections::BTreeMap;

use serde_json::Value;

pub const SAVED_BUDGETS: &str = "prewarm.io/saved-budgets";

/// What prewarm reads of a NodePool.
#[derive(Clone, Debug, PartialEq)]
pub struct NodePoolView {
    pub name: String,
    pub resource_version: String,
    pub annotations: BTreeMap<String, String>,
    /// The whole `spec` as JSON.
    pub spec: Value,
}

impl NodePoolView {
    /// Whether prewarm's freeze is on (the user's budgets are saved).
    pub fn consolidation_frozen(&self) -> bool {
        self.annotations.contains_key(SAVED_BUDGETS)
    }

    pub(super) fn budgets(&self) -> Value {
        self.spec
            .pointer("/disruption/budgets")
            .cloned()
            .unwrap_or(Value::Null)
    }

    pub(super) fn consolidate_after(&self) -> std::result::Result<Value, String> {
        self.spec
            .pointer("/disruption/consolidateAfter")
            .cloned()
            .ok_or_else(|| {
                format!(
                    "NodePool {} has no spec.disruption.consolidateAfter to keep",
                    self.name
                )
            })
    }
}
