//! What r8s has seen of its upstream, shared by everything that talks to
//! it. The `/version` probe says when the upstream stops answering and when
//! it answers again; the reflectors waiting in backoff, and their watches
//! that went silent, act on the return at once instead of at their next
//! timer. r8s is one client standing in for many: it should be the first to
//! catch up when the apiserver comes back, not the last.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::metrics;
use crate::sync::MutexExt;

/// The upstream as the probe last saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// Whether the last probe was answered.
    pub answering: bool,
    /// When the current outage began (or, while answering, the last one).
    pub failing_since: Option<Instant>,
    /// When the upstream last answered again after an outage.
    pub returned_at: Option<Instant>,
    /// Returns so far: each wakes every waiter once.
    pub returns: u64,
}

/// The shared view: one writer (the probe), many waiters.
#[derive(Debug)]
pub struct Liveness {
    tx: watch::Sender<Seen>,
    /// Caches that have not yet caught up since the last return, and how
    /// many caches there are.
    owed: Mutex<(usize, usize)>,
}

impl Default for Liveness {
    fn default() -> Self {
        let (tx, _) = watch::channel(Seen {
            answering: true,
            failing_since: None,
            returned_at: None,
            returns: 0,
        });
        Liveness {
            tx,
            owed: Mutex::new((0, 0)),
        }
    }
}

impl Liveness {
    /// The probe found the upstream not answering.
    pub fn failed(&self) {
        self.tx.send_if_modified(|s| {
            if !s.answering {
                return false;
            }
            s.answering = false;
            s.failing_since = Some(Instant::now());
            true
        });
    }

    /// The probe found the upstream answering; the outage's length if this
    /// ends one (every waiter is woken).
    pub fn answered(&self) -> Option<Duration> {
        let mut ended = None;
        self.tx.send_if_modified(|s| {
            if s.answering {
                return false;
            }
            let now = Instant::now();
            s.answering = true;
            s.returned_at = Some(now);
            s.returns += 1;
            ended = s.failing_since.map(|t| now.duration_since(t));
            true
        });
        if ended.is_some() {
            let mut owed = self.owed.locked();
            owed.0 = owed.1;
        }
        ended
    }

    /// What was seen last.
    pub fn seen(&self) -> Seen {
        *self.tx.borrow()
    }

    /// A cache that catches up after each return: counted until it
    /// [`Returns::caught_up`] (or leaves for good).
    pub fn returns(self: &Arc<Self>) -> Returns {
        self.owed.locked().1 += 1;
        let rx = self.tx.subscribe();
        let seen = rx.borrow().returns;
        Returns {
            liveness: self.clone(),
            rx,
            seen,
            owing: None,
        }
    }

    /// One cache has caught up after the return at `returned_at`.
    fn settle(&self, returned_at: Instant) {
        let took = returned_at.elapsed();
        metrics::catch_up(took);
        let mut owed = self.owed.locked();
        if owed.0 > 0 {
            owed.0 -= 1;
            if owed.0 == 0 {
                tracing::info!(took = ?took, "every cache is current again after the upstream's return");
            }
        }
    }

    /// A cache left for good (uncacheable): no longer counted.
    fn leave(&self, owing: bool) {
        let mut owed = self.owed.locked();
        owed.1 = owed.1.saturating_sub(1);
        if owing {
            owed.0 = owed.0.saturating_sub(1);
        }
    }
}

/// A random delay of up to 250 ms, taken after a return before going to
/// the upstream, so that dozens of caches do not arrive in the same
/// millisecond.
pub fn spread() -> Duration {
    Duration::from_millis(fastrand::u64(..=250))
}

/// One cache's view of the upstream's returns.
#[derive(Debug)]
pub struct Returns {
    liveness: Arc<Liveness>,
    rx: watch::Receiver<Seen>,
    /// Returns already acted on.
    seen: u64,
    /// A return this cache has not caught up with yet (its time).
    owing: Option<Instant>,
}

impl Returns {
    /// Resolves at the next return after those already seen, with when the
    /// outage began (a watch quiet since before then is suspect). The
    /// caller waits [`spread`] before it goes to the upstream. The return
    /// is owed until [`Returns::caught_up`].
    pub async fn next(&mut self) -> Instant {
        loop {
            let s = *self.rx.borrow_and_update();
            if s.returns > self.seen {
                self.seen = s.returns;
                self.owing = s.returned_at;
                return s.failing_since.unwrap_or_else(Instant::now);
            }
            if self.rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// The cache is current again (its watch answered, or it never
    /// stopped): the time since the return is recorded once.
    pub fn caught_up(&mut self) {
        if let Some(at) = self.owing.take() {
            self.liveness.settle(at);
        }
    }
}

impl Drop for Returns {
    /// The cache leaves (for good, or at shutdown): no longer counted.
    fn drop(&mut self) {
        let owing = self.owing.take().is_some() || self.rx.borrow().returns > self.seen;
        self.liveness.leave(owing);
    }
}
