//! `prewarm explain --event FILE`: what the interruption handler would do with an SQS event or a
//! bare EventBridge event, one JSON line per record. Needs no cluster and no AWS access: it shows
//! the kind, the instances, the configured action and its deadline (bounded by the record's
//! `SentTimestamp`, and how), and why the record is acted on, ignored or treated as poison.
//!
//! `prewarm explain --target NAME --since 7d` instead decomposes a running target's delayed
//! requests from its metric history (explain_target.rs).

use std::io::Write;
use std::path::PathBuf;

use serde_json::{json, Value};

use super::explain_replay::{replay, ReplaySettings};
use super::replay_state::ClusterState;
use crate::adapters::events::{parse_event_document, InstanceIdRule, Parsed};
use crate::adapters::kube::shape::CAPACITY_RESERVATION_LABEL as RESERVATION_LABEL;
use crate::config::{parse_targets, InterruptionSettings};
use crate::core::interruption::deadline::{
    CAPACITY_BLOCK_TERMINATION_LEAD_S, MAX_DELIVERY_DELAY_S, MAX_SCHEDULED_LEAD_S,
};
use crate::core::interruption::{
    eviction_deadline, instance_end, issued_at, state::format_time, state::parse_time, Action,
    ActionTable, Notice, NoticeKind, NoticeStatus,
};
use crate::error::{Error, Result};
use crate::handlers::interruption::drain_settings;

#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// An SQS event (`{"Records": [...]}`) or a single EventBridge event, as JSON.
    #[arg(long, required_unless_present = "target", conflicts_with = "target")]
    pub event: Option<PathBuf>,
    /// Decompose the delayed requests of this target (a name in PREWARM_TARGETS) from its
    /// metric source's history instead: forecastable, unforecastable at LEAD_TIME_SECONDS, and
    /// the constant reserve that removes the unforecastable part.
    #[arg(long)]
    pub target: Option<String>,
    /// With --target: how much history to read (7d, 36h, 90m, 600s).
    #[arg(long, default_value = "7d", value_parser = super::explain_target::since_seconds, requires = "target")]
    pub since: f64,
    /// With --target: end of the history, Unix seconds (default: now).
    #[arg(long, requires = "target")]
    pub until: Option<f64>,
    /// With --target: the first days of the history that learn the largest rise over one lead
    /// (the rest is scored).
    #[arg(long, default_value_t = 2.0, requires = "target")]
    pub train_days: f64,
    /// With --target: seconds between history points.
    #[arg(long, default_value_t = 60.0, requires = "target")]
    pub resolution: f64,
    /// With --target: a request waiting longer than this (seconds) is delayed.
    #[arg(long, default_value_t = crate::core::policy::residual::SLO_WAIT_S, requires = "target")]
    pub slo_wait: f64,
    /// With --target: the GPU-hour price of the reserve (default: GPU_HOUR_COST, else the
    /// simulator's default node, g5.12xlarge on demand, per GPU).
    #[arg(long, requires = "target")]
    pub usd_per_gpu_hour: Option<f64>,
    /// With --target: one JSON object instead of the table.
    #[arg(long, requires = "target")]
    pub json: bool,
    /// Per-kind actions, as the handler's ACTIONS variable.
    #[arg(long, env = "ACTIONS", default_value = "")]
    pub actions: String,
    /// Seconds before the instance goes at which eviction starts at the latest.
    #[arg(long, env = "EVICTION_BUDGET_SECONDS", default_value_t = 30.0)]
    pub eviction_budget_seconds: f64,
    /// Local stack only: also take the kwok provider's node names as instance ids.
    #[arg(long, env = "ACCEPT_KWOK_INSTANCE_IDS", default_value_t = false)]
    pub accept_kwok_instance_ids: bool,
    /// Replay the drain offline on this cluster state: `kubectl get node/NAME pods,pdb ... -o
    /// json` (a List holding the Node of the notice's instance, its pods, other Nodes of its
    /// pool, PodDisruptionBudgets, and for the surges the pods' Deployments, ReplicaSets and
    /// HPAs). Prints one JSON line per step instead of the records.
    #[arg(long, requires = "at")]
    pub cluster_state: Option<PathBuf>,
    /// With --cluster-state: the time of the first step (RFC 3339), e.g. when the notice came.
    #[arg(long, requires = "cluster_state")]
    pub at: Option<String>,
    /// With --cluster-state: also replay the next N checks at their planned times.
    #[arg(long, default_value_t = 0, requires = "cluster_state")]
    pub steps: u32,
    /// With --cluster-state: the targets, as the handler's PREWARM_TARGETS (where a drain's
    /// placeholder goes; without one managing the node's pool, no placeholder can be made).
    #[arg(long, env = "PREWARM_TARGETS", default_value = "")]
    pub targets: String,
}

pub async fn run(args: ExplainArgs) -> Result<()> {
    if let Some(target) = &args.target {
        if !(args.train_days >= 0.0 && args.resolution >= 1.0 && args.slo_wait >= 0.0) {
            return Err(Error::config(
                "--target",
                "--train-days and --slo-wait must not be negative, --resolution at least 1 s",
            ));
        }
        return super::explain_target::run(&super::explain_target::TargetExplain {
            target: target.clone(),
            since_s: args.since,
            until: args.until,
            train_days: args.train_days,
            step_s: args.resolution,
            slo_wait_s: args.slo_wait,
            usd_per_gpu_hour: args.usd_per_gpu_hour,
            json: args.json,
        })
        .await;
    }
    let event = args.event.clone().unwrap_or_default();
    let text = read(&event, "--event")?;
    let actions =
        ActionTable::parse(&args.actions).map_err(|message| Error::config("ACTIONS", message))?;
    let rule = if args.accept_kwok_instance_ids {
        InstanceIdRule::Ec2OrKwok
    } else {
        InstanceIdRule::Ec2
    };
    let lines = match &args.cluster_state {
        Some(path) => replay_lines(&args, &text, path, rule)?,
        None => explain(&text, &actions, args.eviction_budget_seconds, rule)
            .map_err(|e| Error::config("--event", format!("{}: {e}", event.display())))?,
    };
    let mut out = std::io::stdout().lock();
    for line in lines {
        // A reader that stops early (`| head`) is not an error; println! would panic on it.
        if let Err(e) = writeln!(out, "{line}") {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                return Ok(());
            }
            return Err(Error::config(
                "--event",
                format!("cannot write the output: {e}"),
            ));
        }
    }
    Ok(())
}

fn read(path: &std::path::Path, flag: &str) -> Result<String> {
    std::fs::read_to_string(path)
        .map_err(|e| Error::config(flag, format!("cannot read {}: {e}", path.display())))
}

/// The replay of the event's drain on the cluster state, with the handler's settings (its
/// environment, ACTIONS and EVICTION_BUDGET_SECONDS as given here), validated as at start-up.
fn replay_lines(
    args: &ExplainArgs,
    event: &str,
    state_path: &std::path::Path,
    rule: InstanceIdRule,
) -> Result<Vec<Value>> {
    let state = ClusterState::parse(&read(state_path, "--cluster-state")?)
        .map_err(|e| Error::config("--cluster-state", format!("{}: {e}", state_path.display())))?;
    let at = args.at.as_deref().unwrap_or_default();
    let at = parse_time(at)
        .ok_or_else(|| Error::config("--at", format!("must be an RFC 3339 time, got {at:?}")))?;
    let settings = InterruptionSettings::from_lookup(|key| match key {
        "ACTIONS" => Some(args.actions.clone()),
        "EVICTION_BUDGET_SECONDS" => Some(args.eviction_budget_seconds.to_string()),
        _ => std::env::var(key).ok(),
    })?;
    let targets = if args.targets.trim().is_empty() {
        Vec::new()
    } else {
        parse_targets(&args.targets)?
    };
    let replay_settings = ReplaySettings {
        drain: &drain_settings(&settings),
        placeholder: &settings.placeholder,
        targets: &targets,
        rule,
        surge: settings.surge,
    };
    replay(event, state, at, args.steps, &replay_settings)
        .map_err(|e| Error::config("--cluster-state", e))
}

/// One JSON object per record of the document.
pub fn explain(
    text: &str,
    actions: &ActionTable,
    eviction_budget_s: f64,
    rule: InstanceIdRule,
) -> Result<Vec<Value>> {
    Ok(parse_event_document(text, rule)?
        .into_iter()
        .map(|(id, parsed)| explain_one(&id, &parsed, actions, eviction_budget_s))
        .collect())
}

fn explain_one(id: &str, parsed: &Parsed, actions: &ActionTable, budget: f64) -> Value {
    match parsed {
        Parsed::Poison { cause } => json!({
            "id": id,
            "verdict": "poison",
            "why": cause,
            "cause": cause,
            "outcome": "reported as a batch item failure; SQS moves it to the dead-letter queue after maxReceiveCount",
        }),
        Parsed::Resume(r) => json!({
            "id": id,
            "verdict": "act",
            "why": format!("prewarm's resume-drain message (sent by the tick) for node {} / instance {}: \
                the drain on the node's own record is stepped, or un-drained if its reservation expired", r.node, r.instance),
            "kind": "resume-drain",
            "node": r.node,
            "instance_ids": [r.instance],
            "outcome": "one drain step from the node's drain annotations; a continuation while work is left",
        }),
        Parsed::Ignored { event_id, reason } => json!({
            "id": id,
            "event_id": event_id,
            "verdict": "ignored",
            "why": reason,
            "reason": reason,
            "outcome": "acknowledged (deleted)",
        }),
        Parsed::Notice(n) => {
            let action = actions.for_kind(n.kind);
            let deadline = eviction_deadline(n, budget);
            let closed = n.status == NoticeStatus::Closed;
            let verdict = if action == Action::Ignore {
                "ignored"
            } else {
                "act"
            };
            json!({
                "id": id,
                "event_id": n.event_id,
                "verdict": verdict,
                "why": why(n, action),
                "kind": n.kind,
                "status": n.status,
                "instance_count": n.instance_ids.len(),
                "instance_ids": n.instance_ids,
                "reservation_id": n.reservation_id,
                "reservation_end": n.reservation_end.map(format_time),
                "notice_time": format_time(n.time),
                "sent_time": n.sent_time.map(format_time),
                "issued_at": format_time(issued_at(n)),
                "time_bound": time_bound(n),
                "instance_state": n.instance_state,
                "window_start": n.window_start.map(format_time),
                "instance_end": instance_end(n).map(format_time),
                "eviction_deadline": deadline.map(format_time),
                "action": if closed { None } else { Some(action) },
                "plan": if closed && action != Action::Ignore { undrain_plan() } else { describe(action, n, deadline) },
            })
        }
    }
}

/// Why a notice is acted on (or ignored by ACTIONS), in one sentence.
fn why(n: &Notice, action: Action) -> String {
    let count = n.instance_ids.len();
    let what = match &n.reservation_id {
        Some(id) => format!(
            "{} notice naming capacity reservation {id} (its instances: the nodes labelled {}={id})",
            n.kind, RESERVATION_LABEL
        ),
        None => format!(
            "{} notice naming {count} instance{}",
            n.kind,
            if count == 1 { "" } else { "s" }
        ),
    };
    match (action, n.status) {
        (Action::Ignore, _) => format!("{what}; ACTIONS maps {} to ignore", n.kind),
        (_, NoticeStatus::Closed) => format!(
            "{what}, AWS Health statusCode closed: the maintenance is over or cancelled, so no drain is wanted"
        ),
        (action, NoticeStatus::Active) => format!(
            "{what}; ACTIONS maps {} to {}",
            n.kind,
            serde_json::to_value(action)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        ),
    }
}

/// How the body's times were bounded (`core::interruption::deadline`), when it matters.
fn time_bound(n: &Notice) -> String {
    let issued = issued_at(n);
    let mut out = match n.sent_time {
        None => "no SentTimestamp (not an SQS record): the envelope time is taken as it is".into(),
        Some(_) if issued < n.time => {
            "the envelope time is after SQS received the message: counted from SentTimestamp"
                .to_string()
        }
        Some(sent) if issued > n.time => format!(
            "the envelope time is more than {} h before SQS received the message: counted from SentTimestamp - {} h",
            MAX_DELIVERY_DELAY_S / 3600.0,
            MAX_DELIVERY_DELAY_S / 3600.0
        ) + &format!(" ({})", format_time(sent - MAX_DELIVERY_DELAY_S)),
        Some(_) => "the envelope time is within [SentTimestamp - 24 h, SentTimestamp]: used as it is"
            .into(),
    };
    let end = instance_end(n);
    match (n.kind, n.window_start, n.termination_time, end) {
        (NoticeKind::ScheduledChange, Some(start), _, Some(end)) if end < start => {
            out += &format!(
                "; the window start is more than {} days after the notice: counted as {}",
                MAX_SCHEDULED_LEAD_S / 86_400.0,
                format_time(end)
            )
        }
        (NoticeKind::CapacityReservation, _, Some(stated), Some(end)) if stated != end => {
            out += &format!(
                "; instance-termination-time {} is outside the two-minute warning: counted as {}",
                format_time(stated),
                format_time(end)
            )
        }
        (NoticeKind::CapacityBlock, _, _, Some(end)) => {
            let stated = n
                .reservation_end
                .map(|e| e - CAPACITY_BLOCK_TERMINATION_LEAD_S);
            if stated.is_some_and(|s| s != end) {
                out += &format!(
                    "; end-date {} - 30 min is outside the ten-minute warning: termination counted from {}",
                    n.reservation_end.map(format_time).unwrap_or_default(),
                    format_time(end)
                )
            }
        }
        _ => {}
    }
    out
}

fn undrain_plan() -> String {
    "for each instance with a node in this cluster drained for this maintenance: un-drain (uncordon, remove the taint and annotations, release the replacement); nothing is evicted".into()
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
