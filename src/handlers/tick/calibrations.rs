//! The band calibrations one warm execution environment remembers between invocations, per
//! target (`core::policy::calibration_cache` decides what is kept and when to read). Changes
//! when where that memory lives changes.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::core::policy::calibration_cache::CalibrationCache;

/// Per target name. A cold start begins empty: the first tick reads the history once (or uses
/// the headroom object's calibration while it is fresh).
#[derive(Debug, Default)]
pub struct Calibrations(Mutex<HashMap<String, CalibrationCache>>);

impl Calibrations {
    /// The target's cache as of now (empty when none was kept).
    pub fn get(&self, target: &str) -> CalibrationCache {
        self.lock().get(target).cloned().unwrap_or_default()
    }

    pub fn put(&self, target: &str, cache: CalibrationCache) {
        self.lock().insert(target.to_string(), cache);
    }

    /// A panic elsewhere while the lock was held leaves plain data behind: still usable.
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, CalibrationCache>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each target keeps its own cache: a failure backed off for one is not the other's, and a
    /// target never seen starts empty.
    #[test]
    fn each_target_keeps_its_own_cache() {
        let caches = Calibrations::default();
        let backing_off = CalibrationCache {
            calibration: None,
            failures: 2,
            retry_at: Some(1_000.0),
        };
        caches.put("llama", backing_off.clone());
        assert_eq!(caches.get("llama"), backing_off);
        assert_eq!(caches.get("mistral"), CalibrationCache::default());
        caches.put("llama", CalibrationCache::default());
        assert_eq!(caches.get("llama"), CalibrationCache::default());
    }
}
