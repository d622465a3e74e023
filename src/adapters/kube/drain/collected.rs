//! What the tick's reservation collection (`handlers::tick::reservations`) did for one item: the shape the
//! collections of replacements (`drain::replacement`) and surges (`drain::surge`) report in.

use crate::core::interruption::ReservationVerdict;

/// What the collection did for one reservation or drain.
#[derive(Clone, Debug, PartialEq)]
pub struct Collected {
    pub instance: String,
    pub node: Option<String>,
    pub verdict: ReservationVerdict,
    /// What was done, or why it failed.
    pub outcome: std::result::Result<String, String>,
}
