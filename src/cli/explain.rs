//! `prewarm explain --event FILE`: what the interruption handler would do with an SQS event or a
//! bare EventBridge event, one JSON line per record. Needs no cluster and no AWS access: it shows
//! the kind, the instances, the configured action and its deadline, or why the record is ignored
//! or treated as poison.

use std::path::PathBuf;

use serde_json::{json, Value};

use crate::adapters::events::{parse_event_document, Parsed};
use crate::core::interruption::{
    eviction_deadline, instance_end, state::format_time, Action, ActionTable, Notice,
};
use crate::error::{Error, Result};

#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// An SQS event (`{"Records": [...]}`) or a single EventBridge event, as JSON.
    #[arg(long)]
    pub event: PathBuf,
    /// Per-kind actions, as the handler's ACTIONS variable.
    #[arg(long, env = "ACTIONS", default_value = "")]
    pub actions: String,
    /// Seconds before the instance goes at which eviction starts at the latest.
    #[arg(long, env = "EVICTION_BUDGET_SECONDS", default_value_t = 30.0)]
    pub eviction_budget_seconds: f64,
}

pub fn run(args: ExplainArgs) -> Result<()> {
    let text = std::fs::read_to_string(&args.event).map_err(|e| {
        Error::config(
            "--event",
            format!("cannot read {}: {e}", args.event.display()),
        )
    })?;
    let actions =
        ActionTable::parse(&args.actions).map_err(|message| Error::config("ACTIONS", message))?;
    for line in explain(&text, &actions, args.eviction_budget_seconds)
        .map_err(|e| Error::config("--event", format!("{}: {e}", args.event.display())))?
    {
        println!("{line}");
    }
    Ok(())
}

/// One JSON object per record of the document.
pub fn explain(text: &str, actions: &ActionTable, eviction_budget_s: f64) -> Result<Vec<Value>> {
    Ok(parse_event_document(text)?
        .into_iter()
        .map(|(id, parsed)| explain_one(&id, &parsed, actions, eviction_budget_s))
        .collect())
}

fn explain_one(id: &str, parsed: &Parsed, actions: &ActionTable, budget: f64) -> Value {
    match parsed {
        Parsed::Poison { cause } => json!({
            "id": id,
            "verdict": "poison",
            "cause": cause,
            "outcome": "reported as a batch item failure; SQS moves it to the dead-letter queue after maxReceiveCount",
        }),
        Parsed::Ignored { event_id, reason } => json!({
            "id": id,
            "event_id": event_id,
            "verdict": "ignored",
            "reason": reason,
            "outcome": "acknowledged (deleted)",
        }),
        Parsed::Notice(n) => {
            let action = actions.for_kind(n.kind);
            let deadline = eviction_deadline(n, budget);
            json!({
                "id": id,
                "event_id": n.event_id,
                "verdict": if action == Action::Ignore { "ignored" } else { "act" },
                "kind": n.kind,
                "instance_ids": n.instance_ids,
                "notice_time": format_time(n.time),
                "instance_state": n.instance_state,
                "instance_end": instance_end(n).map(format_time),
                "eviction_deadline": deadline.map(format_time),
                "action": action,
                "plan": describe(action, n, deadline),
            })
        }
    }
}

fn describe(action: Action, n: &Notice, deadline: Option<f64>) -> String {
    let by = deadline
        .map(|d| format!("by {} at the latest", format_time(d)))
        .unwrap_or_else(|| "(no deadline; at most 30 minutes after the notice)".into());
    let nodes =
        "for each instance with a node in this cluster (others: acknowledged, not in this cluster)";
    match action {
        Action::Drain => format!(
            "{nodes}: cordon, taint prewarm.io/draining={}:NoSchedule, raise the NodePool's headroom by the node's GPUs, evict when the replacement is ready or {by}",
            n.kind
        ),
        Action::CordonPrewarm => format!(
            "{nodes}: cordon, taint prewarm.io/draining={}:NoSchedule, raise the NodePool's headroom by the node's GPUs; pods keep serving{}",
            n.kind,
            deadline.map(|d| format!(" until {}", format_time(d))).unwrap_or_default()
        ),
        Action::EvictNow => format!(
            "{nodes}: cordon, taint prewarm.io/draining={}:NoSchedule, raise the NodePool's headroom, evict at once",
            n.kind
        ),
        Action::Ignore => "ACTIONS says to ignore this kind: acknowledged, nothing done".into(),
    }
}
