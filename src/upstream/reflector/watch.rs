//! Watching: the `Opening` and `Watching` steps. A watch from a version
//! (with bookmarks) applies each event as it comes; one that ends on time
//! is opened again from the last version applied.

use std::sync::Arc;
use std::time::Instant;

use super::{Failed, Reflector, Retry, State, Step, StepError, Stream, Watching};
use crate::cache::store::Change;
use crate::metrics::EventType;
use crate::shutdown::Signal;
use crate::upstream::decode::Decoded;
use crate::upstream::liveness;

impl Reflector {
    /// Opens a watch from `rv`; the first after a snapshot was restored
    /// makes the store serve once the upstream answers it.
    pub(super) async fn open(&mut self, rv: u64, resuming: bool) -> Step {
        let fail = |error| Failed {
            error,
            retry: Retry::Watch { rv, resuming },
        };
        let timeout = self.watch_timeout();
        let q = format!(
            "watch=1&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds={timeout}"
        );
        let reply = self.get(&q).await.map_err(fail)?;
        self.returns.caught_up();
        if resuming {
            self.writer.resumed();
            self.record(&self.writer.store().current());
            tracing::info!(resource = %self.labels(), rv, "watch resumed from the snapshot's version; serving");
        }
        let stream = Stream::new(reply, self.encoding(), timeout, self.patience());
        Ok(State::Watching(Watching { stream, rv }))
    }

    /// Applies a watch's events until it ends: on time (open it again
    /// from the last version applied), or not.
    pub(super) async fn watch(&mut self, watching: Watching, shutdown: &Signal) -> Step {
        let Watching { mut stream, mut rv } = watching;
        // Made once for the stream, not per event.
        let relisted = self.relist.clone();
        let mut relisted = std::pin::pin!(relisted.notified());
        let mut stop = std::pin::pin!(shutdown.clone().wait_owned());
        // When the stream last carried anything (an event, a bookmark).
        let mut heard = Instant::now();
        loop {
            let unit = tokio::select! {
                u = stream.units.next() => u,
                _ = &mut stop => return Ok(State::Stopped),
                _ = &mut relisted => return Err(failed(StepError::Diverged, rv)),
                _ = &mut stream.deadline => return Err(failed(stream.silent(), rv)),
                since = self.returns.next() => {
                    if heard < since {
                        // Quiet since before the outage began: likely a
                        // connection that died with it. Resume, never relist.
                        tracing::info!(resource = %self.labels(), rv, "the upstream is back and this watch carried nothing since before it went away; resuming it from its version");
                        tokio::time::sleep(liveness::spread()).await;
                        self.series.watch_restart();
                        return Ok(State::Opening { rv, resuming: false });
                    }
                    self.returns.caught_up();
                    continue;
                }
            };
            heard = Instant::now();
            self.writer.heard();
            let unit = match unit {
                Ok(Some(unit)) => unit,
                Ok(None) => {
                    self.backoff.succeeded();
                    self.series.watch_restart();
                    return Ok(State::Opening {
                        rv,
                        resuming: false,
                    });
                }
                Err(e) => return Err(failed(StepError::Failed(e.to_string()), rv)),
            };
            let ev = self
                .decoder
                .event(&unit, self.writer.wants_empty_object())
                .map_err(|e| failed(e.into(), rv))?;
            if let Decoded::Bookmark { empty: Some(e), .. } = &ev {
                self.writer.learn_empty_object(e);
            }
            rv = self.apply_event(ev, rv).map_err(|e| failed(e, rv))?;
        }
    }

    /// Applies one watch event after `rv` (the last version applied); the
    /// version applied now.
    fn apply_event(&mut self, ev: Decoded, rv: u64) -> Result<u64, StepError> {
        // Versions only go forward in a watch; a DELETED a relist found
        // carries the relist's version, which its last change may share.
        let went_back = match &ev {
            Decoded::Put(_, o) => (o.rv <= rv).then_some(o.rv),
            Decoded::Deleted(o) => (o.rv < rv).then_some(o.rv),
            Decoded::Bookmark { .. } => None,
        };
        if let Some(at) = went_back {
            return Err(StepError::Malformed(format!(
                "an event at resource version {at} after {rv}: versions went back"
            )));
        }
        let change = match ev {
            Decoded::Put(kind, o) => {
                self.series.event(if kind == "ADDED" {
                    EventType::Added
                } else {
                    EventType::Modified
                });
                Change::Put(Arc::new(o))
            }
            Decoded::Deleted(o) => {
                self.series.event(EventType::Deleted);
                Change::Delete(Arc::new(o))
            }
            Decoded::Bookmark { rv, .. } => {
                self.series.event(EventType::Bookmark);
                Change::Progress(rv)
            }
        };
        let v = self.writer.apply(vec![change]);
        // Trimmed first, so the sizes recorded are the ones kept.
        let fits = self.writer.fit_budget();
        self.record(&v);
        if !fits {
            return Err(StepError::OverBudget);
        }
        Ok(v.rv.max(rv))
    }
}

/// A watch step's failure: the watch retries from `rv`, the last version applied.
fn failed(error: StepError, rv: u64) -> Failed {
    Failed {
        error,
        retry: Retry::Watch {
            rv,
            resuming: false,
        },
    }
}
