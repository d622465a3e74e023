//! K-way merge of request streams that are each in time order: a binary heap holds the next
//! request of every stream, so memory is one request per stream however long the streams are.
//! Every stream is one client (a ServeGen client file, a superposed copy), so each record comes
//! out tagged with its stream's index as its client.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::sim::trace::TraceRecord;

/// Merges streams into one in time order; ties go to the lower stream index (deterministic).
/// A record's `client` is the index of the stream it came from.
pub struct Merge<I> {
    streams: Vec<I>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    heads: Vec<Option<TraceRecord>>,
}

/// Order of non-negative finite times as integers (IEEE 754 bits of such numbers sort like them).
fn key(t: f64) -> u64 {
    debug_assert!(t >= 0.0, "stream times are seconds from the start");
    t.max(0.0).to_bits()
}

impl<I: Iterator<Item = TraceRecord>> Merge<I> {
    pub fn new(mut streams: Vec<I>) -> Self {
        let mut heap = BinaryHeap::with_capacity(streams.len());
        let mut heads = Vec::with_capacity(streams.len());
        for (i, s) in streams.iter_mut().enumerate() {
            let head = s.next();
            if let Some(r) = head {
                heap.push(Reverse((key(r.t), i)));
            }
            heads.push(head);
        }
        Merge {
            streams,
            heap,
            heads,
        }
    }
}

impl<I: Iterator<Item = TraceRecord>> Iterator for Merge<I> {
    type Item = TraceRecord;

    fn next(&mut self) -> Option<TraceRecord> {
        let mut top = self.heap.peek_mut()?;
        let i = top.0 .1;
        let mut out = self.heads[i]
            .take()
            .expect("a stream in the heap has a head");
        out.client = i as u32;
        match self.streams[i].next() {
            Some(r) => {
                // Replace in place: one sift-down instead of a pop and a push.
                *top = Reverse((key(r.t), i));
                self.heads[i] = Some(r);
            }
            None => {
                std::collections::binary_heap::PeekMut::pop(top);
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ts: &[f64]) -> std::vec::IntoIter<TraceRecord> {
        ts.iter()
            .map(|&t| TraceRecord {
                t,
                input_tokens: 0,
                output_tokens: 0,
                client: 0,
            })
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn merges_in_time_order_and_keeps_every_request() {
        let merged: Vec<(f64, u32)> =
            Merge::new(vec![at(&[0.0, 5.0, 9.0]), at(&[]), at(&[1.0, 5.0, 20.0])])
                .map(|r| (r.t, r.client))
                .collect();
        // Each request is tagged with its stream: the tie at 5 s goes to stream 0 first.
        assert_eq!(
            merged,
            vec![(0.0, 0), (1.0, 2), (5.0, 0), (5.0, 2), (9.0, 0), (20.0, 2)]
        );
    }
}
