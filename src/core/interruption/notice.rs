//! An interruption notice in prewarm's own terms, independent of how it arrived (SQS record or
//! bare EventBridge event). Parsing lives in `adapters::events`.

use serde::Serialize;

/// The kinds of notice prewarm acts on. The string forms are the keys of `ACTIONS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NoticeKind {
    /// `aws.ec2` / EC2 Spot Instance Interruption Warning: two minutes' notice.
    SpotInterruption,
    /// `aws.ec2` / EC2 Instance Rebalance Recommendation: elevated risk, no deadline.
    Rebalance,
    /// `aws.ec2` / EC2 Instance State-change Notification (stopping, stopped, shutting-down,
    /// terminated): the instance is already going.
    StateChange,
    /// `aws.health` / AWS Health Event, EC2 scheduledChange: a maintenance window ahead.
    ScheduledChange,
    /// `aws.ec2` / EC2 Capacity Reservation Instance Interruption Warning: two minutes' notice.
    CapacityReservation,
    /// `aws.ec2` / Capacity Block (Reservation) Expiration Warning: forty minutes before a
    /// Capacity Block ends, its instances begin to terminate ten minutes later. It names the
    /// reservation, not instances: the handler finds them by their nodes' reservation label.
    CapacityBlock,
}

impl NoticeKind {
    pub const ALL: [NoticeKind; 6] = [
        NoticeKind::SpotInterruption,
        NoticeKind::Rebalance,
        NoticeKind::StateChange,
        NoticeKind::ScheduledChange,
        NoticeKind::CapacityReservation,
        NoticeKind::CapacityBlock,
    ];

    /// The stable name used in `ACTIONS`, logs, annotations and EMF dimensions.
    pub fn as_str(self) -> &'static str {
        match self {
            NoticeKind::SpotInterruption => "spot-interruption",
            NoticeKind::Rebalance => "rebalance",
            NoticeKind::StateChange => "state-change",
            NoticeKind::ScheduledChange => "scheduled-change",
            NoticeKind::CapacityReservation => "capacity-reservation",
            NoticeKind::CapacityBlock => "capacity-block",
        }
    }

    pub fn parse(name: &str) -> Option<NoticeKind> {
        NoticeKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl std::fmt::Display for NoticeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a notice stands. AWS Health updates one event as a maintenance moves through
/// `upcoming`, `open` and `closed`; EC2 notices are always `Active`.
// Serialize because `Notice` is serialised (explain output, logs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NoticeStatus {
    #[default]
    Active,
    /// Health `statusCode: closed`: the maintenance is over or was cancelled; no drain is wanted.
    Closed,
}

/// One notice: which instances, what kind, and the times that set its deadline.
/// Times are seconds since the Unix epoch.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Notice {
    /// The notice's identity, marking the node's drain state so re-deliveries and updates are
    /// recognised: the EventBridge event id for EC2 notices; for AWS Health the `eventArn`
    /// (each update of one Health event is a new EventBridge event with a new id).
    pub event_id: String,
    // (`time` below tells a newer update of the same Health event from an older one.)
    pub kind: NoticeKind,
    /// EC2 instance ids, validated and without duplicates, in the order the event names them
    /// (one for EC2 notices; every affected instance of a Health event, possibly thousands, which
    /// the drain works through in chunks; none for a Capacity Block warning, which names its
    /// reservation instead).
    pub instance_ids: Vec<String>,
    /// The envelope's `time`: when AWS issued the notice, as the body claims it. Deadlines use
    /// it only bounded by `sent_time` (`deadline::issued_at`).
    pub time: f64,
    /// State-change only: the new instance state.
    pub instance_state: Option<String>,
    /// Health only: the start of the maintenance window.
    pub window_start: Option<f64>,
    /// Capacity reservation only: `instance-termination-time`, when AWS states it.
    pub termination_time: Option<f64>,
    /// Capacity Block only: the reservation (`cr-` and 8 or 17 hex digits), whose instances are
    /// the nodes labelled `karpenter.k8s.aws/capacity-reservation-id` with it.
    pub reservation_id: Option<String>,
    /// Capacity Block only: the reservation's `end-date`, when AWS states it (termination starts
    /// 30 minutes before it, `deadline::instance_end`).
    pub reservation_end: Option<f64>,
    /// Health only: `statusCode` (`upcoming`/`open` are `Active`, `closed` is `Closed`).
    pub status: NoticeStatus,
    /// When SQS received the message (`SentTimestamp`, seconds since the epoch); bounds `time`.
    pub sent_time: Option<f64>,
    /// The handler itself scheduled this delivery (a drain's continuation, the retry of a failed
    /// step), rather than AWS or a redelivery of AWS's message. It carries the drain on and is
    /// never a duplicate, however early it comes. Not part of the notice's text.
    #[serde(skip)]
    pub scheduled: bool,
}

impl Notice {
    /// An active notice of `kind` issued at `time`, naming no instance and no window yet: what
    /// every notice starts as before its kind's fields are read.
    pub fn new(event_id: impl Into<String>, kind: NoticeKind, time: f64) -> Notice {
        Notice {
            event_id: event_id.into(),
            kind,
            instance_ids: Vec::new(),
            time,
            instance_state: None,
            window_start: None,
            termination_time: None,
            reservation_id: None,
            reservation_end: None,
            status: NoticeStatus::Active,
            sent_time: None,
            scheduled: false,
        }
    }
}
