//! The "resume drain" message: what the tick puts on the interruption queue when it finds a drain
//! nobody drives (its owner's message lost or dead-lettered) or one to un-drain (an expired
//! cordon-prewarm, a node that outlived its notice). The tick only detects; the interruption
//! function, which alone may write nodes and evict, does the work through the same step as for a
//! notice (`handlers::interruption::step`).
//!
//! The body is small and versioned so a later format can be told apart:
//! `{"prewarm": "resume-drain", "version": 1, "node": "<node name>", "instance": "<instance id>"}`.
//! A body with the `prewarm` key that does not match this exactly (another version, a missing or
//! bad field) is poison, like any malformed record: it goes to the DLQ.

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::detail::shorten;
use super::instance_id::{self, InstanceIdRule};
use crate::core::names::is_dns1123_subdomain;

/// The value of the `prewarm` key that marks a resume-drain body.
pub const KIND: &str = "resume-drain";
/// The only version this build reads and writes.
pub const VERSION: u64 = 1;

/// A drain to carry on (or un-drain) from the node's own record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ResumeDrain {
    /// The node's name when the tick saw it (for logs and to notice a replaced node).
    pub node: String,
    /// The instance id: how the node is found again (by spec.providerID), as for a notice.
    pub instance: String,
}

impl ResumeDrain {
    /// The message body.
    pub fn body(&self) -> String {
        json!({"prewarm": KIND, "version": VERSION, "node": self.node, "instance": self.instance})
            .to_string()
    }
}

/// Whether a JSON object is meant as a prewarm message (it has the `prewarm` key).
pub(super) fn is_prewarm_message(object: &Map<String, Value>) -> bool {
    object.contains_key("prewarm")
}

/// Reads a prewarm message; `Err` names what is wrong (the record is then poison).
pub(super) fn parse(
    object: &Map<String, Value>,
    rule: InstanceIdRule,
) -> Result<ResumeDrain, String> {
    match object.get("prewarm") {
        Some(Value::String(k)) if k == KIND => {}
        other => {
            return Err(format!(
                "prewarm message of unknown kind {}",
                shorten(&other.map_or("null".into(), Value::to_string))
            ))
        }
    }
    match object.get("version").and_then(Value::as_u64) {
        Some(VERSION) => {}
        _ => {
            return Err(format!(
                "resume-drain message version {} is not {VERSION}",
                shorten(
                    &object
                        .get("version")
                        .map_or("(none)".into(), Value::to_string)
                )
            ))
        }
    }
    let field = |name: &str| -> Result<String, String> {
        object
            .get(name)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| format!("resume-drain message has no {name} string"))
    };
    let node = field("node")?;
    if !is_dns1123_subdomain(&node) {
        return Err(format!(
            "resume-drain node {:?} is not a node name",
            shorten(&node)
        ));
    }
    let instance = field("instance")?;
    instance_id::check(&instance, rule).map_err(|e| format!("resume-drain instance {e}"))?;
    Ok(ResumeDrain { node, instance })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn the_body_round_trips() {
        let r = ResumeDrain {
            node: "ip-10-0-1-5.ec2.internal".into(),
            instance: "i-0123456789abcdef0".into(),
        };
        let v: Value = serde_json::from_str(&r.body()).unwrap();
        assert_eq!(
            v,
            json!({"prewarm": "resume-drain", "version": 1,
                   "node": "ip-10-0-1-5.ec2.internal", "instance": "i-0123456789abcdef0"})
        );
        assert_eq!(parse(&object(v), InstanceIdRule::Ec2), Ok(r));
    }

    #[test]
    fn malformed_messages_name_what_is_wrong() {
        let ok = json!({"prewarm": "resume-drain", "version": 1, "node": "n-1",
                        "instance": "i-0123456789abcdef0"});
        let with = |k: &str, v: Value| {
            let mut o = object(ok.clone());
            if v.is_null() {
                o.remove(k);
            } else {
                o.insert(k.into(), v);
            }
            o
        };
        let cases = [
            (with("prewarm", json!("stop-drain")), "unknown kind"),
            (with("version", json!(2)), "version 2 is not 1"),
            (with("version", Value::Null), "version (none)"),
            (with("node", Value::Null), "no node string"),
            (with("node", json!("Node_1")), "not a node name"),
            (
                with("instance", json!("fargate-ip-1")),
                "resume-drain instance",
            ),
            (with("instance", Value::Null), "no instance string"),
        ];
        for (o, needle) in cases {
            let err = parse(&o, InstanceIdRule::Ec2).unwrap_err();
            assert!(err.contains(needle), "{o:?}: {err}");
        }
    }
}
