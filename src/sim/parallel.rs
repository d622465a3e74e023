//! Runs independent simulations on every core: a shared counter hands out the jobs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// `f` over `jobs` on `threads` workers (at least one); results in the jobs' order. Jobs are
/// taken in order, so a job may wait for one listed before it.
pub fn map<J: Sync, R: Send>(jobs: &[J], threads: usize, f: impl Fn(&J) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<R>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, jobs.len().max(1)) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                let r = f(job);
                out.lock().expect("no worker panicked")[i] = Some(r);
            });
        }
    });
    out.into_inner()
        .expect("no worker panicked")
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

/// The per-request callback of a run: reports to `progress` in batches of 8192 requests, so
/// the workers do not contend for the progress bar on every request.
pub fn batched(progress: &(dyn Fn(u64) + Sync)) -> impl FnMut() + '_ {
    let mut pending = 0u64;
    move || {
        pending += 1;
        if pending == 8192 {
            progress(pending);
            pending = 0;
        }
    }
}

/// Waits until another job has set `cell`.
pub fn wait_for<T: Clone>(cell: &OnceLock<T>) -> T {
    loop {
        if let Some(v) = cell.get() {
            return v.clone();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_the_jobs_order_and_later_jobs_can_wait_for_earlier_ones() {
        let first: OnceLock<u32> = OnceLock::new();
        let jobs = [0u32, 1, 2, 3, 4];
        let out = map(&jobs, 2, |&j| {
            if j == 0 {
                let _ = first.set(10);
            }
            if j == 4 {
                return wait_for(&first) + j;
            }
            j * 2
        });
        assert_eq!(out, vec![0, 2, 4, 6, 14]);
    }
}
