//! The one task that writes `persist.dir`: every `persist.interval_seconds`
//! it appends what each store applied to the store's log, and when a log
//! outgrows `persist.compaction_ratio` of its snapshot (or a store has no
//! log it can continue) it compacts: a full snapshot, one at a time, at the
//! pace of `persist.max_write_bytes_per_second`.
//!
//! A compaction of version V starts a new log segment after V, so that the
//! files on disk are always a snapshot and a chain of segments that follow
//! it, whatever moment a crash picks:
//!
//! ```text
//!   snapshot S ── segment (base B ≤ S) ── … ── segment (base V)   [compaction of V running]
//!   snapshot V ── segment (base V)                                 [done: older segments removed]
//! ```
//!
//! The appender reads the store's own event log with a cursor, so it never
//! holds the store up: a disk too slow for the change rate makes the log
//! fall behind (the store's event log moves past the cursor), which is
//! counted and logged, and a compaction follows. Appends are not paced.

use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::log::{self, Entry, LogHeader};
use super::{Pace, Persist, Tail, Target, unix_ms};
use crate::cache::history::Cursor;
use crate::cache::store::{EventKind, Serving, Version};
use crate::metrics::{PersistKind, PersistSeries};
use crate::shutdown::Signal;
use crate::sync::MutexExt;

/// A log is synced to the disk at most this often (a crash of the process
/// loses nothing written; a power loss, at most this much of the log).
const SYNC_EVERY: Duration = Duration::from_secs(5);
/// A log smaller than this is never compacted (a small store's snapshot
/// would be rewritten for every few changes).
const MIN_COMPACTION: u64 = 64 << 10;
/// After failed compactions, the longest wait before the next try (the
/// first waits one `persist.interval_seconds`, each next twice as long).
const MAX_RETRY: Duration = Duration::from_secs(60);

/// The log segment a store's changes are appended to.
struct Segment {
    file: File,
    path: PathBuf,
    bytes: u64,
    /// Written since the last sync.
    dirty: bool,
    synced: Instant,
}

impl Segment {
    /// A new segment of `target`'s store after `base`.
    fn create(p: &Persist, target: &Target, base: u64) -> io::Result<Segment> {
        let path = p.segment(&target.identity, base);
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)?;
        let header = LogHeader {
            identity: target.identity.clone(),
            base,
            created_unix_ms: unix_ms(SystemTime::now()),
        };
        let bytes = log::write_header(&mut file, &header)?;
        target.series.wrote(PersistKind::Log, bytes);
        Ok(Segment {
            file,
            path,
            bytes,
            dirty: true,
            synced: Instant::now(),
        })
    }

    /// The segment a load ended in, its uncommitted tail cut off.
    fn reopen(path: PathBuf, committed: u64) -> io::Result<Segment> {
        let mut file = OpenOptions::new().write(true).open(&path)?;
        file.set_len(committed)?;
        file.seek(SeekFrom::Start(committed))?;
        Ok(Segment {
            file,
            path,
            bytes: committed,
            dirty: true,
            synced: Instant::now(),
        })
    }

    fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file.write_all(buf)?;
        self.bytes += buf.len() as u64;
        self.dirty = true;
        Ok(())
    }

    /// Syncs what was written, if due (or `now`).
    fn sync(&mut self, now: bool) -> io::Result<()> {
        if self.dirty && (now || self.synced.elapsed() >= SYNC_EVERY) {
            self.file.sync_data()?;
            self.dirty = false;
            self.synced = Instant::now();
        }
        Ok(())
    }
}

/// Where a store's files stand.
enum Files {
    /// Not serving yet: once it serves (its watch resumed, or its first
    /// list), appending goes on from what its load left, if anything.
    Starting,
    /// Nothing on disk that the store's changes can follow: a full
    /// snapshot is due (a cold start, or a log that fell behind).
    Unsynced,
    /// Appending the store's events after `cursor` to `log`; the store was
    /// at `at` after the last group.
    Appending {
        log: Segment,
        cursor: Cursor,
        at: u64,
    },
}

/// One store, as the writer sees it.
struct Saved {
    target: Target,
    files: Files,
    /// Bytes of its snapshot on disk (0: none yet).
    snapshot_bytes: u64,
    /// When that snapshot was written.
    snapshot_written: Option<SystemTime>,
    /// Bytes of its log segments before the current one.
    older_log: u64,
    /// No compaction before this (after a failed one).
    retry_after: Option<Instant>,
    /// Compactions failed in a row.
    failures: u32,
}

impl Saved {
    /// `target`, with nothing written for it yet.
    fn new(target: Target) -> Self {
        Saved {
            target,
            files: Files::Starting,
            snapshot_bytes: 0,
            snapshot_written: None,
            older_log: 0,
            retry_after: None,
            failures: 0,
        }
    }

    /// A compaction failed: the next waits longer.
    fn failed(&mut self, interval: Duration) {
        let wait = interval
            .saturating_mul(1 << self.failures.min(16))
            .min(MAX_RETRY);
        self.failures += 1;
        self.retry_after = Some(Instant::now() + wait);
    }
}

impl Saved {
    fn series(&self) -> &PersistSeries {
        &self.target.series
    }

    fn log_bytes(&self) -> u64 {
        let current = match &self.files {
            Files::Appending { log, .. } => log.bytes,
            _ => 0,
        };
        self.older_log + current
    }

    /// Whether a compaction is due: no log to append to, or a log past its
    /// share of the snapshot.
    fn wants_compaction(&self, ratio: f64) -> bool {
        if self.retry_after.is_some_and(|t| Instant::now() < t) {
            return false;
        }
        match self.files {
            Files::Unsynced => true,
            Files::Starting => false,
            Files::Appending { .. } => {
                let log = self.log_bytes();
                self.snapshot_bytes == 0
                    || (log >= MIN_COMPACTION && log as f64 > ratio * self.snapshot_bytes as f64)
            }
        }
    }

    /// Appends the store's events after the cursor, up to its current
    /// version, and a mark at that version. Returns that version, or `None`
    /// when the log cannot follow the store any more (its event log moved
    /// past the cursor, or restarted): the log fell behind.
    fn append(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<Arc<Version>>> {
        let Files::Appending { log, cursor, at } = &mut self.files else {
            return Ok(None);
        };
        let store = &self.target.store;
        let (v, end) = store.snapshot_with_cursor();
        if end == *cursor && v.rv == *at {
            return Ok(Some(v));
        }
        let n = end.saturating_sub(*cursor) as usize;
        let events = match store.read(*cursor, None, n) {
            Some((b, _)) if b.next == end => b.events,
            _ => return Ok(None),
        };
        if v.rv < *at {
            return Ok(None);
        }
        buf.clear();
        for e in &events {
            if e.rv <= *at {
                return Ok(None);
            }
            let (key, rv) = (&*e.object.key, e.rv);
            let entry = match e.kind {
                EventKind::Deleted => Entry::Delete { key, rv },
                EventKind::Added | EventKind::Modified => Entry::Put {
                    key,
                    rv,
                    body: &e.object.body,
                },
            };
            log::encode(buf, &entry)?;
        }
        let unix_ms = unix_ms(SystemTime::now());
        log::encode(buf, &Entry::Mark { rv: v.rv, unix_ms })?;
        log.append(buf)?;
        self.target.series.wrote(PersistKind::Log, buf.len() as u64);
        *cursor = end;
        *at = v.rv;
        Ok(Some(v))
    }
}

/// A compaction in progress: a full snapshot of one store at `rv`.
struct Compaction {
    /// Which store.
    index: usize,
    rv: u64,
    started: Instant,
    /// Whether the store had a snapshot before (a shutdown can stop this
    /// one; without, it must finish).
    replaces: bool,
    done: tokio::task::JoinHandle<io::Result<u64>>,
}

/// The writer's state, moved to a blocking thread for each round of I/O.
struct Writer {
    persist: Arc<Persist>,
    saved: Vec<Saved>,
    compaction: Option<Compaction>,
    buf: Vec<u8>,
}

impl Persist {
    /// Appends every target's changes every `persist.interval_seconds`,
    /// compacts as due, and when `shutdown` fires appends and syncs the
    /// last changes (a compaction the next start does not need is stopped).
    /// Saves the targets sent on `added` (each cache as it is launched:
    /// those launched before this task began from its first round, later
    /// ones from the next round on) until each is retired.
    pub async fn run(
        self: Arc<Self>,
        mut added: tokio::sync::mpsc::UnboundedReceiver<Target>,
        shutdown: Signal,
    ) {
        let mut saved = Vec::new();
        while let Ok(t) = added.try_recv() {
            saved.push(Saved::new(t));
        }
        let mut w = Writer {
            persist: self.clone(),
            saved,
            compaction: None,
            buf: Vec::new(),
        };
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            let compacting = async {
                match w.compaction.as_mut() {
                    Some(c) => joined((&mut c.done).await),
                    None => std::future::pending().await,
                }
            };
            let (finished, round, last) = tokio::select! {
                _ = tick.tick() => (None, true, false),
                r = compacting => (Some(r), false, false),
                _ = shutdown.wait() => {
                    // A compaction the next start needs (the store has no
                    // other snapshot it can continue from) is finished, unpaced;
                    // any other is stopped: its log stays.
                    let r = match w.compaction.as_mut() {
                        Some(c) => {
                            if c.replaces {
                                self.pace.stop();
                            } else {
                                self.pace.hurry();
                            }
                            Some(joined((&mut c.done).await))
                        }
                        None => None,
                    };
                    (r, true, true)
                }
            };
            while let Ok(t) = added.try_recv() {
                w.saved.push(Saved::new(t));
            }
            let step = tokio::task::spawn_blocking(move || {
                if let Some(result) = finished
                    && let Some(c) = w.compaction.take()
                {
                    w.compacted(c.index, c.rv, c.started, result);
                }
                w.prune();
                if round {
                    w.round(last);
                }
                if !last {
                    w.start_compaction();
                }
                w
            });
            match step.await {
                Ok(next) => w = next,
                Err(e) => {
                    tracing::error!(error = %e, "the snapshot writer failed; caches are no longer saved");
                    return;
                }
            }
            if last {
                return;
            }
        }
    }
}

/// A compaction's result, a panic in it as an error.
fn joined(r: Result<io::Result<u64>, tokio::task::JoinError>) -> io::Result<u64> {
    r.unwrap_or_else(|e| Err(io::Error::other(e)))
}

impl Writer {
    /// One round: every serving store's changes appended, logs synced as
    /// due; at shutdown (`last`), synced now, and a snapshot written
    /// unpaced for every store with no log to continue.
    fn round(&mut self, last: bool) {
        let p = self.persist.clone();
        for i in 0..self.saved.len() {
            let s = &mut self.saved[i];
            if let Some(at) = s.snapshot_written {
                let age = SystemTime::now().duration_since(at).unwrap_or_default();
                s.series().snapshot_age(age);
            }
            if s.target.store.serving() != Serving::Ready {
                continue;
            }
            if let Files::Starting = s.files {
                // Its load (if any) is over: the store serves what it restored.
                let tail = p.tails.locked().remove(&p.file(&s.target.identity));
                s.files = match tail {
                    Some(tail) => s.resume(&p, tail),
                    None => Files::Unsynced,
                };
            }
            let appended = s.append(&mut self.buf);
            let behind = matches!(appended, Ok(None)) && matches!(s.files, Files::Appending { .. });
            if let Err(e) = appended.and_then(|_| match &mut s.files {
                Files::Appending { log, .. } => log.sync(last),
                _ => Ok(()),
            }) {
                tracing::warn!(resource = %s.target.store.labels(), error = %e, "could not append to the cache's log (serving is unaffected; a full snapshot follows); check the disk's space and r8s's permissions on persist.dir");
                s.series().written(None);
                s.lose_place();
            } else if behind {
                tracing::warn!(resource = %s.target.store.labels(), "the cache's log fell behind its changes (the disk is slower than the change rate, or the cache relisted from scratch); a full snapshot follows");
                s.series().behind();
                s.lose_place();
            }
            s.series().log_bytes(s.log_bytes());
            if last && matches!(s.files, Files::Unsynced) && self.compaction.is_none() {
                let pace = Pace::new(u64::MAX);
                pace.hurry();
                let v = s.target.store.current();
                let started = Instant::now();
                let empty = s.target.store.empty_object();
                let result = p.save(&s.target.identity, &v, empty.as_deref(), pace);
                self.compacted(i, v.rv, started, result);
            }
        }
    }

    /// Forgets the stores retired (their resource no longer served, or
    /// their cache restarted), when no compaction runs: their segments are
    /// closed, and their files removed (a restarted cache's old state is
    /// not to be loaded) unless a store saved under the same identity (the
    /// cache that replaced it) has begun writing them.
    fn prune(&mut self) {
        if self.compaction.is_some() {
            return;
        }
        let retired = |s: &Saved| s.target.retired();
        if !self.saved.iter().any(retired) {
            return;
        }
        let (gone, kept): (Vec<Saved>, Vec<Saved>) = self.saved.drain(..).partition(retired);
        self.saved = kept;
        for s in gone {
            let twin = |k: &Saved| {
                let written = !matches!(k.files, Files::Starting | Files::Unsynced)
                    || k.snapshot_written.is_some();
                written && k.target.identity == s.target.identity
            };
            if !self.saved.iter().any(twin) {
                self.persist.discard(&s.target.identity);
            }
        }
    }

    /// Starts the compaction most due, if none is running.
    fn start_compaction(&mut self) {
        if self.compaction.is_some() {
            return;
        }
        let ratio = self.persist.compaction_ratio;
        let due = self
            .saved
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                s.target.store.serving() == Serving::Ready && s.wants_compaction(ratio)
            })
            .max_by_key(|(_, s)| {
                let unsynced = matches!(s.files, Files::Unsynced);
                (unsynced, s.log_bytes())
            })
            .map(|(i, _)| i);
        let Some(i) = due else { return };
        let p = self.persist.clone();
        let s = &mut self.saved[i];
        // The compacted version is where the current segment ends: append
        // up to it, then start the next segment after it.
        let (v, cursor) = match (s.append(&mut self.buf), &s.files) {
            (Ok(Some(v)), Files::Appending { cursor, .. }) => (v, *cursor),
            _ => {
                s.lose_place();
                s.target.store.snapshot_with_cursor()
            }
        };
        let replaces = s.snapshot_bytes > 0 && !matches!(s.files, Files::Unsynced);
        let next = Segment::create(&p, &s.target, v.rv);
        let Ok(log) = next else {
            if let Err(e) = next {
                tracing::warn!(resource = %s.target.store.labels(), error = %e, "could not start a log segment; check the disk's space and r8s's permissions on persist.dir");
            }
            s.series().written(None);
            s.failed(p.interval);
            return;
        };
        if let Files::Appending { log: old, .. } = std::mem::replace(
            &mut s.files,
            Files::Appending {
                log,
                cursor,
                at: v.rv,
            },
        ) {
            let mut old = old;
            let _ = old.sync(true);
            s.older_log += old.bytes;
        }
        let (target, pace, rv) = (s.target.clone(), p.pace.clone(), v.rv);
        let started = Instant::now();
        tracing::debug!(resource = %target.store.labels(), rv, "compaction started");
        let done = tokio::task::spawn_blocking(move || {
            let empty = target.store.empty_object();
            p.save(&target.identity, &v, empty.as_deref(), pace)
        });
        self.compaction = Some(Compaction {
            index: i,
            rv,
            started,
            replaces,
            done,
        });
    }

    /// A compaction of store `i` at `rv` ended with `result`: on success,
    /// the segments before `rv` are removed.
    fn compacted(&mut self, i: usize, rv: u64, started: Instant, result: io::Result<u64>) {
        let p = self.persist.clone();
        let s = &mut self.saved[i];
        match result {
            Ok(bytes) => {
                s.snapshot_bytes = bytes;
                s.snapshot_written = Some(SystemTime::now());
                s.retry_after = None;
                s.failures = 0;
                s.series().written(Some(bytes));
                s.series().wrote(PersistKind::Compaction, bytes);
                let older: Vec<_> = p
                    .segments(&s.target.identity)
                    .into_iter()
                    .filter(|(base, _)| *base < rv)
                    .collect();
                p.remove(&older);
                s.older_log = p
                    .segments(&s.target.identity)
                    .iter()
                    .filter(|(base, path)| {
                        *base >= rv && !matches!(&s.files, Files::Appending { log, .. } if log.path == *path)
                    })
                    .filter_map(|(_, path)| std::fs::metadata(path).ok())
                    .map(|m| m.len())
                    .sum();
                tracing::debug!(resource = %s.target.store.labels(), rv, bytes, took = ?started.elapsed(), "compaction written");
            }
            Err(e) if super::pace::stopped(&e) => {
                tracing::info!(resource = %s.target.store.labels(), "compaction stopped by the shutdown; its log is kept");
            }
            Err(e) => {
                s.series().written(None);
                s.failed(p.interval);
                tracing::warn!(
                    resource = %s.target.store.labels(),
                    dir = %p.dir.display(),
                    error = %e,
                    "could not write a snapshot (the last one and its log stay; serving is unaffected); check the disk's space and r8s's permissions on persist.dir"
                );
            }
        }
    }
}

impl Saved {
    /// Goes on from what a load left once the store serves: appends to the
    /// segment the load ended in (after its last whole group), or to a new
    /// one. `Unsynced` when the store has moved past what its event log
    /// can tell (it relisted from scratch).
    fn resume(&mut self, p: &Persist, tail: Tail) -> Files {
        self.snapshot_bytes = tail.snapshot_bytes;
        self.snapshot_written = Some(tail.snapshot_written);
        self.older_log = tail.log_bytes - tail.segment.as_ref().map_or(0, |s| s.2);
        let Some(cursor) = self.target.store.cursor_after(tail.rv) else {
            self.series().behind();
            return Files::Unsynced;
        };
        let log = match tail.segment {
            Some((path, _, committed)) => Segment::reopen(path, committed),
            None => Segment::create(p, &self.target, tail.rv),
        };
        match log {
            Ok(log) => Files::Appending {
                log,
                cursor,
                at: tail.rv,
            },
            Err(e) => {
                tracing::warn!(resource = %self.target.store.labels(), error = %e, "could not reopen the cache's log; a full snapshot follows");
                Files::Unsynced
            }
        }
    }

    /// The log cannot follow the store: what is on disk stays (a true past
    /// state) and a full snapshot is due.
    fn lose_place(&mut self) {
        if let Files::Appending { mut log, .. } =
            std::mem::replace(&mut self.files, Files::Unsynced)
        {
            let _ = log.sync(true);
            self.older_log += log.bytes;
        }
    }
}
