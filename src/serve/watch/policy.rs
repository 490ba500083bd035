//! How cached watches behave (`watch.*`, `shutdown.watch_drain_seconds`,
//! `server.watchlist_compression`), shared by every watcher: settings only
//! (the slots of `watch.max_watchers` are `serve::slots`).

use std::time::Duration;

use crate::config::OnTooOld;

/// How cached watches behave.
#[derive(Debug, Clone)]
pub struct WatchPolicy {
    /// Interval between bookmarks (when the client allows them).
    pub bookmark_interval: Duration,
    /// Watches without `timeoutSeconds` end after a random time in [this, 2×this].
    pub min_timeout: Duration,
    /// A resume point older than the history: pass through, or the apiserver's 410.
    pub on_too_old: OnTooOld,
    /// On shutdown, watches close at random points over this span.
    pub drain: Duration,
    /// Gzip streaming lists for clients that accept it (`server.watchlist_compression`).
    pub compress_watch_lists: bool,
}
