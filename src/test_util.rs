//! Helpers the unit tests of several modules share.

/// String pairs as owned keys and values (annotations, labels, an environment), collected into
/// the map the test needs.
pub(crate) fn string_map<M: FromIterator<(String, String)>>(pairs: &[(&str, &str)]) -> M {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
