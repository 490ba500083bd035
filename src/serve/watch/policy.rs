//! How cached watches behave (`watch.*`, `shutdown.watch_drain_seconds`,
//! `server.watchlist_compression`), shared by every watcher.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
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
    /// Open cached watches beyond which new ones get 429.
    pub max_watchers: usize,
    /// Cached watches open now (all resources).
    pub active: Arc<AtomicUsize>,
    /// Gzip streaming lists for clients that accept it (`server.watchlist_compression`).
    pub compress_watch_lists: bool,
}
