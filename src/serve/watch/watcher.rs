//! One cached watch: a cursor into the resource's event log plus its
//! filter, run as its own task. It starts ([`Start`]: the state first, or
//! the changes after a version), then goes live: it catches up with the
//! log, sends bookmarks when its [`BookmarkClock`] says, and sleeps until
//! an event concerns it, its clock ticks, the client leaves or r8s drains.

use std::sync::Arc;

use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::clock::BookmarkClock;
use super::filter::Filter;
use super::policy::WatchPolicy;
use crate::api::status::Status;
use crate::cache::ResourceCache;
use crate::cache::history::{Cursor, Trigger};
use crate::cache::serving::Serving;
use crate::cache::store::Store;
use crate::cache::view::View;
use crate::codec::crc::StreamCrc;
use crate::codec::gzip;
use crate::config::OnTooOld;
use crate::metrics::{EventCounts, EventType, WatchEnd, WatchMetrics};
use crate::serve::slots::{ListSlot, Preempt, WatchSlot};
use crate::shutdown::Signal;

/// Events a watcher takes from the log per read: bounds what a stalled watcher holds.
const BATCH: usize = 256;
/// One event in this many is timed for the delivery histogram.
const SAMPLE_EVERY: u64 = 16;
/// How often a watcher blocked on a slow client checks whether the log's tail passed it.
const STALL_CHECK: Duration = Duration::from_millis(500);

/// How a watch starts.
pub enum Start {
    /// ADDED for the current state (once it is at least this version), an
    /// optional end-of-initial-events bookmark, then every change.
    Initial {
        /// The version the state must be at least at.
        at_least: u64,
        /// Whether the initial events end with the annotated bookmark.
        end_bookmark: bool,
    },
    /// Every change after this version.
    After(u64),
    /// A streaming list of a version the cache did not reach in time: the
    /// apiserver's ERROR event (504 "Too large resource version"), then the end.
    TooLarge(u64),
}

/// How long a watch's final bookmark waits for room behind what its client
/// has not read yet, at shutdown (the connection is closed at
/// `shutdown.grace_seconds` in any case).
const FINAL_BOOKMARK_WAIT: Duration = Duration::from_secs(5);

/// A running watch.
pub struct Watcher {
    pub(super) cache: Arc<ResourceCache>,
    /// The store it reads (of its encoding).
    pub(super) store: Arc<Store>,
    pub(super) filter: Filter,
    /// What it reads: only the events of this trigger, or all of them.
    pub(super) trigger: Option<Trigger>,
    /// What wakes it: these triggers' events, or (`None`) every change.
    pub(super) wake_on: Option<Box<[Trigger]>>,
    pub(super) tx: mpsc::Sender<Bytes>,
    pub(super) bookmarks: bool,
    pub(super) view: View,
    pub(super) policy: WatchPolicy,
    pub(super) shutdown: Signal,
    pub(super) metrics: Arc<WatchMetrics>,
    /// Events sent since the last flush to the metrics, by type.
    pub(super) counts: EventCounts,
    /// A gzip stream's CRC-32 so far (a streaming list to a client that
    /// takes gzip): one gzip member, the initial events spliced from
    /// compressed runs, each later event compressed once for all watchers,
    /// this watcher's own lines (bookmarks, errors) stored.
    pub(super) gz: Option<StreamCrc>,
    /// How the streaming list's initial events end (the upstream's version's way).
    pub(super) initial_end: crate::codec::InitialEnd,
    /// A Table watch's printing (its events are this watcher's own lines).
    pub(super) table: Option<super::table::TableLines>,
    /// Says its slot was given to a watch of a level under its share
    /// (`serve::slots::WatchSlots`); set from its slot when it runs.
    pub(super) preempt: Option<Arc<Preempt>>,
}

/// Where a watcher is.
pub struct Progress {
    /// The next event to read.
    pub cursor: Cursor,
    /// Every change up to this version has been read (the bookmark RV).
    pub rv: u64,
    /// The version of the last event or bookmark the client got.
    pub sent: u64,
    /// The version the watch started from: bookmarks go out only once the
    /// cache is past it (the cacher's rule; one may repeat the version of
    /// the event just sent).
    pub start: u64,
    /// The watch ends here.
    pub deadline: Instant,
    /// Set on shutdown: the watch closes here, after a final bookmark.
    pub drain_at: Option<Instant>,
}

/// Resolves once `preempt` says the watch's slot was taken (never without one).
async fn taken(preempt: Option<Arc<Preempt>>) {
    match preempt {
        Some(p) => p.taken().await,
        None => std::future::pending().await,
    }
}

impl Progress {
    fn stop_at(&self) -> Instant {
        self.drain_at
            .map_or(self.deadline, |d| d.min(self.deadline))
    }
}

impl Watcher {
    /// Runs the watch until it ends, then counts how it ended. A zero
    /// `timeout` (a negative `timeoutSeconds`) ends it before it sends
    /// anything, as the apiserver's expired context does.
    /// Holds its watch slot until it ends, and `seat` (its costly initial
    /// events') until they are sent.
    pub async fn run(
        mut self,
        start: Start,
        timeout: Duration,
        (slot, seat): (WatchSlot, Option<ListSlot>),
    ) {
        let sharded = self.filter.selectors.shard.is_some();
        self.metrics.started(sharded);
        self.preempt = slot.preempt();
        let end = match timeout.is_zero() {
            true => WatchEnd::Timeout,
            false => self.serve(start, timeout, seat).await,
        };
        if let Some(crc) = &self.gz
            && !timeout.is_zero()
            && !matches!(end, WatchEnd::Client | WatchEnd::Error)
        {
            // A gzip stream ends whole, so the client reads a clean end (not
            // after a failure to compress: the client must see it broken).
            let end_of_stream = gzip::trailer(crc);
            let _ = tokio::time::timeout(Duration::from_secs(1), self.tx.send(end_of_stream)).await;
        }
        self.flush_counts();
        self.metrics.ended(end, sharded);
        drop(slot);
    }

    /// Counts an event sent, by type.
    pub(super) fn count(&mut self, t: EventType, n: u64) {
        self.counts.add(t, n);
    }

    fn flush_counts(&mut self) {
        self.metrics.sent(&mut self.counts);
    }

    /// The watch: its start, then live until it ends.
    async fn serve(&mut self, start: Start, timeout: Duration, seat: Option<ListSlot>) -> WatchEnd {
        let mut p = Progress {
            cursor: 0,
            rv: 0,
            sent: 0,
            start: 0,
            deadline: Instant::now() + timeout,
            drain_at: None,
        };
        if self.gz.is_some()
            && self
                .tx
                .send(Bytes::from_static(&gzip::HEADER))
                .await
                .is_err()
        {
            return WatchEnd::Client;
        }
        let started = match start {
            Start::TooLarge(n) => return self.too_large(n).await,
            Start::After(n) => self.after(n, &mut p).await,
            Start::Initial {
                at_least,
                end_bookmark,
            } => self.initial(at_least, end_bookmark, &mut p).await,
        };
        drop(seat);
        if let Err(e) = started {
            return self.ended(e, &mut p).await;
        }
        self.flush_counts();
        self.live(&mut p).await
    }

    /// Starts after version `n`: from the log, once the cache has reached
    /// it (a version the client listed elsewhere: as the apiserver does,
    /// no event up to it is sent).
    async fn after(&mut self, n: u64, p: &mut Progress) -> Result<(), WatchEnd> {
        p.rv = n;
        p.sent = n;
        p.start = n;
        let store = self.store.clone();
        if store.current().rv < n {
            let mut rx = store.subscribe();
            tokio::select! {
                _ = rx.wait_for(|rv| *rv >= n) => {}
                _ = tokio::time::sleep_until(p.deadline) => return Err(WatchEnd::Timeout),
                _ = self.shutdown.wait() => return Err(WatchEnd::Shutdown),
            }
        }
        match store.cursor_after(n) {
            Some(c) => {
                p.cursor = c;
                Ok(())
            }
            None => Err(WatchEnd::TooOld),
        }
    }

    /// Live: catches up with the log, sends due bookmarks, sleeps until
    /// something concerns it; until its deadline, the client's leaving or
    /// its drain point.
    async fn live(&mut self, p: &mut Progress) -> WatchEnd {
        let store = self.store.clone();
        let mut rx = store.subscribe();
        rx.borrow_and_update();
        let guard = self.wake_on.as_deref().map(|ts| store.register(ts));
        let mut clock = BookmarkClock::new(self.policy.bookmark_interval, p.deadline);
        let mut next_lag_sample = Instant::now();
        // Made once and re-armed, not made anew per event: each is a
        // registration (timer wheel, shutdown channel, the connection's
        // channel) that every watcher of a busy resource would otherwise
        // redo on every event.
        let mut wake = std::pin::pin!(tokio::time::sleep_until(p.stop_at()));
        let mut stop = std::pin::pin!(self.shutdown.clone().wait_owned());
        let tx = self.tx.clone();
        let mut closed = std::pin::pin!(tx.closed());
        let mut taken = std::pin::pin!(taken(self.preempt.clone()));
        loop {
            if store.serving() == Serving::Removed {
                return WatchEnd::Removed;
            }
            if let Err(e) = self.catch_up(p, &mut next_lag_sample).await {
                return self.live_ended(e, p).await;
            }
            let now = Instant::now();
            if now >= p.deadline {
                return WatchEnd::Timeout;
            }
            if p.drain_at.is_some_and(|d| now >= d) {
                return self.drained(p).await;
            }
            if self.bookmarks && clock.due(now) && p.rv > p.start {
                let line = self.bookmark_line(p.rv);
                let (line, c) = (self.framed(line), p.cursor);
                if let Err(e) = self.send(line, p, c).await {
                    return self.live_ended(e, p).await;
                }
                self.count(EventType::Bookmark, 1);
                p.sent = p.rv;
            }
            self.flush_counts();
            let mut wake_at = p.stop_at();
            if self.bookmarks {
                wake_at = wake_at.min(clock.next_due());
            }
            let woken = async {
                match &guard {
                    Some(g) => {
                        g.notify.notified().await;
                        true
                    }
                    None => rx.changed().await.is_ok(),
                }
            };
            if wake.deadline() != wake_at {
                wake.as_mut().reset(wake_at);
            }
            tokio::select! {
                alive = woken => if !alive { return WatchEnd::Shutdown },
                _ = &mut wake => {}
                _ = &mut closed => return WatchEnd::Client,
                _ = &mut taken => {
                    self.drained(p).await;
                    return WatchEnd::Preempted;
                }
                _ = &mut stop, if p.drain_at.is_none() => {
                    p.drain_at = Some(self.drain_point());
                }
            }
        }
    }

    /// Hands a frame to the connection. A client that does not read makes
    /// this wait, never anyone else; it gives up when the watch must end or
    /// the log's tail passes `resume` (the events after it are gone).
    pub(super) async fn send(
        &self,
        line: Bytes,
        p: &mut Progress,
        resume: Cursor,
    ) -> Result<(), WatchEnd> {
        let line = match self.tx.try_send(line) {
            Ok(()) => return Ok(()),
            Err(mpsc::error::TrySendError::Closed(_)) => return Err(WatchEnd::Client),
            Err(mpsc::error::TrySendError::Full(line)) => line,
        };
        loop {
            tokio::select! {
                permit = self.tx.reserve() => {
                    let Ok(permit) = permit else { return Err(WatchEnd::Client) };
                    permit.send(line);
                    return Ok(());
                }
                _ = tokio::time::sleep(STALL_CHECK) => {
                    if !self.store.holds(resume) {
                        return Err(WatchEnd::TooOld);
                    }
                }
                _ = tokio::time::sleep_until(p.stop_at()) => {
                    return Err(if p.drain_at.is_some() { WatchEnd::Shutdown } else { WatchEnd::Timeout });
                }
                _ = self.shutdown.wait(), if p.drain_at.is_none() => {
                    p.drain_at = Some(self.drain_point());
                }
                _ = taken(self.preempt.clone()) => return Err(WatchEnd::Preempted),
            }
        }
    }

    fn drain_point(&self) -> Instant {
        Instant::now() + self.policy.drain.mul_f64(fastrand::f64())
    }

    /// Ends a watcher the log's tail passed: the apiserver's ERROR 410, or
    /// (pass-through mode) a clean end, so the client resumes from its last
    /// version through r8s, which passes it to the upstream.
    async fn too_old(&mut self, p: &mut Progress) -> WatchEnd {
        if self.policy.on_too_old == OnTooOld::Gone {
            let s = Status::expired(format!(
                "too old resource version: {} ({})",
                p.sent,
                self.store.history_from()
            ));
            let line = self.error_line(&s);
            let line = self.framed(line);
            // Waits for room (the client may be stalled) until the watch would end anyway.
            tokio::select! {
                _ = self.tx.send(line) => {}
                _ = tokio::time::sleep_until(p.stop_at()) => {}
            }
        }
        WatchEnd::TooOld
    }

    /// Ends a streaming list whose version the cache did not reach in time
    /// with the cacher's ERROR event (504 "Too large resource version").
    pub(super) async fn too_large(&mut self, asked: u64) -> WatchEnd {
        let s = Status::too_large_resource_version(asked, self.store.current().rv);
        let line = self.error_line(&s);
        let line = self.framed(line);
        let _ = self.tx.send(line).await;
        WatchEnd::TooNew
    }

    /// Sends everything the log holds for this watcher after its cursor.
    async fn catch_up(
        &mut self,
        p: &mut Progress,
        next_lag_sample: &mut Instant,
    ) -> Result<(), WatchEnd> {
        let store = self.store.clone();
        let mut first = true;
        loop {
            let Some((batch, current)) = store.read(p.cursor, self.trigger, BATCH) else {
                return Err(WatchEnd::TooOld);
            };
            if first {
                first = false;
                let now = Instant::now();
                if now >= *next_lag_sample {
                    *next_lag_sample = now + Duration::from_secs(1);
                    self.metrics
                        .lag
                        .record((batch.behind + batch.events.len() as u64) as f64);
                }
            }
            for ev in &batch.events {
                if let Some((line, kind)) = self.line_for(ev)? {
                    // Compressed (once per event) only for a gzip stream.
                    let block = self.gz.as_ref().and_then(|_| ev.gzip_line(self.view, kind));
                    let (frame, piece) = match block {
                        Some(block) => (block.deflate.clone(), Some(&block.crc)),
                        None => (line, None),
                    };
                    self.send(frame, p, batch.next).await?;
                    // Counted in the stream's CRC once sent: a frame the
                    // watch ended before sending is not in its trailer.
                    if let (Some(crc), Some(piece)) = (&mut self.gz, piece) {
                        crc.append(piece);
                    }
                    self.count(kind.metric(), 1);
                    p.sent = ev.rv;
                    if ev.seq % SAMPLE_EVERY == 0 {
                        self.metrics
                            .delivery
                            .record(ev.arrived.elapsed().as_secs_f64());
                    }
                }
                p.rv = p.rv.max(ev.rv);
            }
            p.cursor = batch.next;
            if batch.caught_up {
                p.rv = p.rv.max(current);
                return Ok(());
            }
        }
    }

    /// Finishes a live watch that could not go on: one its drain point
    /// reached while it waited for the client to read gets its final
    /// bookmark all the same.
    async fn live_ended(&mut self, why: WatchEnd, p: &mut Progress) -> WatchEnd {
        match why {
            WatchEnd::Shutdown => self.drained(p).await,
            other => self.ended(other, p).await,
        }
    }

    /// Ends a live watch at its drain point with a final bookmark at the
    /// version everything was sent up to, unconditionally: the client
    /// resumes from it elsewhere, without relisting. The bookmark queues
    /// behind what the client has not read yet, for up to
    /// [`FINAL_BOOKMARK_WAIT`] (a busy client still gets it; one that reads
    /// nothing does not hold the drain).
    async fn drained(&mut self, p: &Progress) -> WatchEnd {
        if self.bookmarks {
            let line = self.bookmark_line(p.rv);
            let line = self.framed(line);
            let _ = tokio::time::timeout(FINAL_BOOKMARK_WAIT, self.tx.send(line)).await;
            self.count(EventType::Bookmark, 1);
        }
        WatchEnd::Shutdown
    }

    /// Finishes a watch that could not go on.
    pub(super) async fn ended(&mut self, why: WatchEnd, p: &mut Progress) -> WatchEnd {
        match why {
            WatchEnd::TooOld => self.too_old(p).await,
            other => other,
        }
    }
}
