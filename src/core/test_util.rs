//! Helpers the unit tests of several modules share.

use std::collections::BTreeMap;

/// String pairs as owned keys and values (annotations, limits, capacity).
pub(crate) fn string_map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
