//! What one warm execution environment remembers between invocations, per target: the band
//! calibrations (`core::policy::calibration_cache` decides what is kept and when to read) and
//! the seasonal history (`core::policy::season_cache`). Changes when where that memory lives
//! changes.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::core::policy::calibration_cache::CalibrationCache;
use crate::core::policy::season_cache::SeasonCache;

/// One kind of memory, per target name. A cold start begins empty: the first tick reads once.
#[derive(Debug)]
pub struct PerTarget<T>(Mutex<HashMap<String, T>>);

/// The calibrations (or the headroom object's while it is fresh).
pub type Calibrations = PerTarget<CalibrationCache>;
/// The seasons read ahead.
pub type Seasons = PerTarget<SeasonCache>;

impl<T> Default for PerTarget<T> {
    fn default() -> Self {
        PerTarget(Mutex::new(HashMap::new()))
    }
}

impl<T: Clone + Default> PerTarget<T> {
    /// The target's memory as of now (empty when none was kept).
    pub fn get(&self, target: &str) -> T {
        self.lock().get(target).cloned().unwrap_or_default()
    }

    pub fn put(&self, target: &str, memory: T) {
        self.lock().insert(target.to_string(), memory);
    }

    /// A panic elsewhere while the lock was held leaves plain data behind: still usable.
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, T>> {
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
