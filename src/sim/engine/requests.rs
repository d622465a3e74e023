//! Requests: arrival, the FIFO queue, slots of serving replicas, completion.

use super::events::Kind;
use super::pods::Phase;
use super::{Request, Sim};
use crate::sim::classes::Class;

#[derive(Clone, Copy, Debug)]
pub(super) struct Waiting {
    pub(super) arrival: f64,
    pub(super) service_s: f64,
    pub(super) prefill_s: f64,
    pub(super) class: Class,
}

impl Sim<'_> {
    /// The serving replica with a free slot on top of the free list, dropping stale entries.
    pub(super) fn free_replica(&mut self) -> Option<usize> {
        let slots = self.slots();
        while let Some(&pod) = self.free.last() {
            let p = &self.pods[pod];
            if matches!(p.phase, Phase::Serving { .. }) && !p.draining && p.active < slots {
                return Some(pod);
            }
            self.free.pop();
        }
        None
    }

    pub(super) fn start(&mut self, pod: usize, w: Waiting) {
        let wait = self.now - w.arrival;
        self.record_wait(w.arrival, wait, w.prefill_s, w.class);
        let service_s = w.service_s * self.batch_slowdown(self.pods[pod].active + 1);
        // The servers' completion counter and end-to-end latency histogram (queueing included)
        // are recorded now for the scrape after the request ends: its end time is known here.
        self.record_completion(self.now + service_s, wait + service_s);
        let slots = self.slots();
        let p = &mut self.pods[pod];
        if p.active == 0 {
            p.busy_since = self.now;
        }
        p.active += 1;
        let full = p.active == slots;
        self.active_total += 1;
        if full && self.free.last() == Some(&pod) {
            self.free.pop();
        }
        let done = self.now + service_s;
        self.push(done, Kind::Completion { pod });
    }

    pub(super) fn on_arrival(&mut self, r: Request) {
        self.result.requests += 1;
        self.residual_arrival(r.arrival, r.service_s);
        let w = Waiting {
            arrival: r.arrival,
            service_s: r.service_s,
            prefill_s: r.prefill_s,
            class: self.class_of(r.client),
        };
        if self.queue.is_empty() {
            if let Some(pod) = self.free_replica() {
                self.start(pod, w);
                return;
            }
        }
        self.queued_by_class[w.class as usize] += 1;
        self.queue.push_back(w);
    }

    /// The oldest waiting request, out of the queue.
    fn dequeue(&mut self) -> Option<Waiting> {
        let w = self.queue.pop_front()?;
        self.queued_by_class[w.class as usize] -= 1;
        Some(w)
    }

    pub(super) fn on_completion(&mut self, pod: usize) {
        let slots = self.slots();
        let gpr = self.gpr() as f64;
        self.active_total -= 1;
        let was_full;
        {
            let p = &mut self.pods[pod];
            was_full = p.active == slots;
            p.active -= 1;
            if p.active == 0 {
                let from = p.busy_since.max(self.cfg.score_from_s);
                self.result.scored.gpu.busy += gpr * (self.now - from).max(0.0);
            }
        }
        let p = &self.pods[pod];
        if p.draining {
            if p.active == 0 {
                if let Phase::Serving { node } = p.phase {
                    self.pods[pod].phase = Phase::Gone;
                    self.release(node);
                }
            }
            return;
        }
        if let Some(w) = self.dequeue() {
            // FIFO: the slot just freed takes the oldest waiting request.
            self.start(pod, w);
        } else if was_full {
            self.free.push(pod);
        }
    }

    pub(super) fn drain_queue(&mut self) {
        while !self.queue.is_empty() {
            let Some(pod) = self.free_replica() else {
                return;
            };
            let w = self.dequeue().expect("queue is not empty");
            self.start(pod, w);
        }
    }
}
