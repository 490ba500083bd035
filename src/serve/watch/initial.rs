//! A watch's initial events (`sendInitialEvents=true`, or a watch from
//! version 0): ADDED for every object of the current state that passes the
//! filter, read from one consistent version, then (for a streaming list)
//! the bookmark marking their end. To a client that takes gzip, the ADDED
//! events are spliced from the compressed runs gzip lists keep.

use super::watcher::{Progress, Watcher};
use crate::cache::history::Cursor;
use crate::cache::view::AddedItem;
use crate::codec::gzip::GzipList;
use crate::metrics::{EventType, WatchEnd};

impl Watcher {
    /// Sends the state at a version of at least `at_least` as ADDED events
    /// (and the end bookmark with `end_bookmark`); the watch goes on from
    /// that version.
    pub(super) async fn initial(
        &mut self,
        at_least: u64,
        end_bookmark: bool,
        p: &mut Progress,
    ) -> Result<(), WatchEnd> {
        let store = self.store.clone();
        if store.current().rv < at_least {
            // Only when the plan was not settled: answer as if it had been.
            return Err(self.too_large(at_least).await);
        }
        let (v, c) = store.snapshot_with_cursor();
        p.cursor = c;
        let prefix = self
            .filter
            .namespace
            .as_ref()
            .map(|ns| format!("{ns}/"))
            .unwrap_or_default();
        // A streaming list its selectors pin to an index (a node's pods)
        // walks what is under those values only.
        let objects = v
            .walk(&prefix, &prefix, &self.filter.selectors)
            .map(|(_, o)| o)
            .filter(|o| self.filter.passes(o));
        if self.gz.is_some() {
            let view = self.view;
            let items: Vec<AddedItem> = objects
                .map(|o| AddedItem {
                    object: o.clone(),
                    view,
                })
                .collect();
            // Boxed: its state (a compressor's) would otherwise be part of
            // every watcher's task, idle plain ones too.
            Box::pin(self.send_compressed(items, p, c)).await?;
        } else {
            for o in objects {
                self.send(self.added_line(o)?, p, c).await?;
                // (The field itself: `objects` borrows the filter.)
                self.counts.add(EventType::Added, 1);
            }
        }
        if end_bookmark {
            let line = self.bookmark(v.rv, true);
            let line = self.framed(line);
            self.send(line, p, c).await?;
            self.count(EventType::Bookmark, 1);
        }
        p.rv = v.rv;
        p.sent = v.rv;
        p.start = at_least;
        Ok(())
    }

    /// Sends a gzip streaming list's initial events: the compressed runs
    /// gzip lists keep (of the events' form), spliced where they fit.
    async fn send_compressed(
        &mut self,
        items: Vec<AddedItem>,
        p: &mut Progress,
        resume: Cursor,
    ) -> Result<(), WatchEnd> {
        let n = items.len() as u64;
        let mut list = GzipList::initial_events(items, self.filter.selectors.is_empty());
        loop {
            match list.next_chunk() {
                Ok(Some(chunk)) => {
                    if !chunk.is_empty() {
                        self.send(chunk, p, resume).await?;
                    }
                    if list.busy() {
                        tokio::task::yield_now().await;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::error!(error = %e, "compressing a streaming list failed; ending it");
                    return Err(WatchEnd::Error);
                }
            }
        }
        if let Some(crc) = &mut self.gz {
            crc.extend(&list.take_crc());
        }
        self.count(EventType::Added, n);
        Ok(())
    }
}
