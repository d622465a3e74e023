//! A workload as the engine's request stream: a trace, scenario, history or rate input read,
//! transformed (speed, scale) and given service times by the model. Changes when a source is
//! added or the way a record becomes a request does.

use std::cell::RefCell;
use std::rc::Rc;

use crate::sim::engine::Request;
use crate::sim::model::Model;
use crate::sim::trace::{self, TraceError, TraceRecord};
use crate::sim::{history, scenario};

use super::{Source, Workload};

type Records = Box<dyn Iterator<Item = Result<TraceRecord, TraceError>>>;
type Requests = Box<dyn Iterator<Item = Request>>;
/// Where a stream puts the read error that ended it.
type ErrorSlot = Rc<RefCell<Option<TraceError>>>;

impl Workload {
    /// A fresh stream of the workload's requests; read errors end the stream and are kept in
    /// the returned slot (checked after the run).
    pub fn requests(&self, model: &Model) -> Result<(Requests, ErrorSlot), TraceError> {
        let slot = Rc::new(RefCell::new(None));
        if let Source::History { rows, service_s } = &self.source {
            let speed = self.speed;
            let reqs = history::requests(rows, *service_s)
                .into_iter()
                .map(move |r| Request {
                    arrival: r.arrival / speed,
                    ..r
                });
            return Ok((Box::new(reqs), slot));
        }
        let records: Records = match &self.source {
            Source::Trace(path) if self.superpose <= 1 => Box::new(trace::open(path)?),
            Source::Scenario(s) => Box::new(s.records().map(Ok)),
            Source::History { .. } => unreachable!("handled above"),
            _ => super::records(self)?,
        };
        let errors = slot.clone();
        let ok = records.map_while(move |r| match r {
            Ok(r) => Some(r),
            Err(e) => {
                *errors.borrow_mut() = Some(e);
                None
            }
        });
        let model = model.clone();
        let reqs =
            scenario::transform(ok, self.speed, self.scale, self.seed).map(move |r| Request {
                arrival: r.t,
                service_s: model.service_time(r.input_tokens, r.output_tokens),
                prefill_s: r.input_tokens as f64 / model.prefill_tokens_per_s,
                client: r.client,
            });
        Ok((Box::new(reqs), slot))
    }
}

pub fn check(slot: &ErrorSlot) -> Result<(), TraceError> {
    match slot.borrow_mut().take() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
