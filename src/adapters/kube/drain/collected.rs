//! What the tick's lease collection (`handlers::tick::leases`) did for one item: the shape the
//! collections of replacements (`drain::replacement`) and surges (`drain::surge`) report in.

use crate::core::interruption::LeaseVerdict;

/// What the collection did for one lease or drain.
#[derive(Clone, Debug, PartialEq)]
pub struct Collected {
    pub instance: String,
    pub node: Option<String>,
    pub verdict: LeaseVerdict,
    /// What was done, or why it failed.
    pub outcome: std::result::Result<String, String>,
}
