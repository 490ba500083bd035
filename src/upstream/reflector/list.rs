//! Listing: the `Relisting`, `Paging` and `Initial` steps. A paged LIST
//! reads one page per step at one consistent version; a streaming list
//! (`sendInitialEvents=true`, Kubernetes 1.32+) collects its ADDED events
//! up to the bookmark marked `initial-events-end`, applies them at once,
//! and the same stream goes on as a watch.

use std::sync::Arc;
use std::time::Duration;

use imbl::OrdMap;

use super::{
    Failed, Initial, ListWith, Pages, Reflector, Retry, State, Step, StepError, Stream, Watching,
};
use crate::api::query;
use crate::cache::object::{ObjectError, Objects};
use crate::shutdown::Signal;
use crate::upstream::decode::Decoded;

/// How long the initial phase of a streaming list may go without an event
/// before the upstream is taken to ignore `sendInitialEvents`.
const INITIAL_EVENTS_QUIET: Duration = Duration::from_secs(10);

/// A list step's failure: a list starts again.
fn relist(diverged: bool) -> impl Fn(StepError) -> Failed {
    move |error| Failed {
        error,
        retry: Retry::Relist { diverged },
    }
}

/// One event of a streaming list's initial phase into `objects`; `Some(rv)` at its end.
fn initial_event(ev: Decoded, objects: &mut Objects) -> Result<Option<u64>, StepError> {
    match ev {
        Decoded::Put("ADDED", o) => {
            objects.insert(o.key.clone(), Arc::new(o));
            Ok(None)
        }
        Decoded::Bookmark { rv, end, .. } => Ok(end.then_some(rv)),
        Decoded::Put(kind, _) => Err(StepError::StreamingUnsupported(format!(
            "{kind} event before the initial-events-end bookmark"
        ))),
        Decoded::Deleted(_) => Err(StepError::StreamingUnsupported(
            "DELETED event before the initial-events-end bookmark".into(),
        )),
    }
}

impl Reflector {
    /// Starts a relist, as the upstream allows: a streaming list, or the
    /// first of a paged LIST's pages.
    pub(super) async fn relist(&mut self, diverged: bool) -> Step {
        match self.lists {
            ListWith::Streaming => self.open_streaming_list(diverged).await,
            ListWith::Pages => Ok(State::Paging(Pages {
                objects: OrdMap::new(),
                next: None,
                scratch: Vec::new(),
                diverged,
            })),
        }
    }

    /// Reads the next page of a paged LIST; after the last, applies the
    /// state at the version it was read at and watches from there.
    pub(super) async fn page(&mut self, mut pages: Pages) -> Step {
        let fail = relist(pages.diverged);
        let limit = self.config.page_size.to_string();
        let mut pairs = vec![("limit", limit.as_str())];
        if let Some(c) = &pages.next {
            pairs.push(("continue", c.as_str()));
        }
        let reply = self.get(&query::encode(pairs)).await.map_err(&fail)?;
        let server = reply.server();
        let mut body = reply.reader();
        pages.scratch.clear();
        let patience = self.patience();
        loop {
            let piece = tokio::time::timeout(patience, body.chunk())
                .await
                .map_err(|_| StepError::Silent {
                    server,
                    why: format!("a LIST page stalled for {patience:?}"),
                })
                .map_err(&fail)?;
            let Some(piece) = piece.map_err(|e| fail(StepError::Failed(e.to_string())))? else {
                break;
            };
            self.writer.heard();
            pages.scratch.extend_from_slice(piece);
        }
        let mut first = pages.next.is_none();
        let (rv_s, next) = self
            .decoder
            .page(&pages.scratch, &mut pages.objects, &mut first)
            .map_err(|e| fail(e.into()))?;
        let rv: u64 = rv_s.parse().map_err(|_| {
            fail(StepError::Uncacheable(ObjectError::BadResourceVersion(
                rv_s.to_string(),
            )))
        })?;
        if let Some(c) = next.filter(|c| !c.is_empty()) {
            pages.next = Some(c);
            return Ok(State::Paging(pages));
        }
        let v = self
            .apply_relist(pages.objects, rv, pages.diverged, "a LIST")
            .map_err(&fail)?;
        tracing::info!(resource = %self.labels(), objects = v.objects.len(), rv, "cache synced");
        Ok(State::Opening {
            rv,
            resuming: false,
        })
    }

    /// Opens a streaming list. It asks for a state not older than the one
    /// the store has (any state, the first time), which kube-apiserver and
    /// an upstream r8s both serve from their watch caches: the upstream is
    /// spared the LIST's memory, and a tier of r8s costs the apiserver
    /// nothing.
    async fn open_streaming_list(&mut self, diverged: bool) -> Step {
        let fail = relist(diverged);
        let timeout = self.watch_timeout();
        // Not older than what the store holds: a proof may have moved it
        // past what this reflector applied.
        let q = format!(
            "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion={}&allowWatchBookmarks=true&timeoutSeconds={timeout}",
            self.writer.store().current().rv
        );
        let reply = self.get_streaming_list(&q).await.map_err(&fail)?;
        let stream = Stream::new(reply, self.encoding(), timeout, self.patience());
        Ok(State::Initial(Initial {
            stream,
            objects: OrdMap::new(),
            diverged,
        }))
    }

    /// Collects a streaming list's initial events up to the end bookmark,
    /// applies them as the new state, and goes on watching the same stream.
    pub(super) async fn initial(&mut self, initial: Initial, shutdown: &Signal) -> Step {
        let Initial {
            mut stream,
            mut objects,
            diverged,
        } = initial;
        let fail = relist(diverged);
        // An upstream that ignores sendInitialEvents never sends the end bookmark.
        let mut quiet = std::pin::pin!(tokio::time::sleep(INITIAL_EVENTS_QUIET));
        let relisted = self.relist.clone();
        let mut relisted = std::pin::pin!(relisted.notified());
        loop {
            let unit = tokio::select! {
                u = stream.units.next() => u,
                _ = shutdown.wait() => return Ok(State::Stopped),
                _ = &mut relisted => return Err(fail(StepError::Diverged)),
                _ = &mut quiet => {
                    return Err(fail(StepError::StreamingUnsupported("no initial-events-end bookmark".into())));
                }
                _ = &mut stream.deadline => return Err(fail(stream.silent())),
            };
            self.writer.heard();
            let unit = match unit {
                Ok(Some(unit)) => unit,
                Ok(None) => {
                    return Err(fail(StepError::StreamingUnsupported(
                        "stream ended before the initial-events-end bookmark".into(),
                    )));
                }
                Err(e) => return Err(fail(StepError::Failed(e.to_string()))),
            };
            let ev = self
                .decoder
                .event(&unit, self.writer.wants_empty_object())
                .map_err(|e| fail(e.into()))?;
            if let Decoded::Bookmark { empty: Some(e), .. } = &ev {
                self.writer.learn_empty_object(e);
            }
            quiet
                .as_mut()
                .reset(tokio::time::Instant::now() + INITIAL_EVENTS_QUIET);
            if let Some(end) = initial_event(ev, &mut objects).map_err(&fail)? {
                let v = self
                    .apply_relist(objects, end, diverged, "a streaming list")
                    .map_err(&fail)?;
                tracing::info!(resource = %self.labels(), objects = v.objects.len(), rv = end, "cache synced (streaming list)");
                return Ok(State::Watching(Watching { stream, rv: end }));
            }
        }
    }
}
