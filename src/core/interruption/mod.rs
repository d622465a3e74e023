//! Interruption planning: notice kinds, per-kind actions, deadlines and drain plans.
//! (Implemented by the interruption owner.)
