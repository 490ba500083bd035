//! How long a cache has gone without word from its upstream.
//!
//! The store's writer marks every sign of life (a response head, a frame of a
//! list or watch, a watch that ended on time); requests and `/readyz` read
//! it. One atomic: marking is a store, reading a load, on any thread.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

// The runtime's clock (the system's outside tests): paused in the unit
// tests, so the bound is checked to the millisecond whatever the load.
use tokio::time::Instant;

/// The process's clock origin (staleness is a difference of two readings).
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// Milliseconds added to every reading, so that a moment before the
/// process started (a snapshot's age, [`Staleness::heard_ago`]) has one.
const BIAS_MS: u64 = 10 * 365 * 86_400_000;

fn now_ms() -> u64 {
    BIAS_MS + origin().elapsed().as_millis() as u64
}

/// When a cache last heard from its upstream, and how long it may go without.
#[derive(Debug)]
pub struct Staleness {
    heard_ms: AtomicU64,
    max: Duration,
    serve_stale: bool,
}

impl Staleness {
    /// Heard just now; stale after `max` of silence (zero: never stale).
    pub fn new(max: Duration) -> Self {
        Staleness {
            heard_ms: AtomicU64::new(now_ms()),
            max,
            serve_stale: false,
        }
    }

    /// The same, but served even when stale (`cache.serve_stale`).
    pub fn serving_stale(self, serve_stale: bool) -> Self {
        Staleness {
            serve_stale,
            ..self
        }
    }

    /// Whether the cache is served past `max` (with a warning) rather than passed.
    pub fn serves_stale(&self) -> bool {
        self.serve_stale
    }

    /// The upstream just said something (its store's writer says so).
    pub(super) fn heard(&self) {
        self.heard_ms.store(now_ms(), Ordering::Relaxed);
    }

    /// The upstream last said something `ago` (a cache restored from a
    /// snapshot is as old as the snapshot).
    pub(super) fn heard_ago(&self, ago: Duration) {
        let ms = u64::try_from(ago.as_millis()).unwrap_or(u64::MAX);
        self.heard_ms
            .store(now_ms().saturating_sub(ms), Ordering::Relaxed);
    }

    /// Time since the upstream last said something.
    pub fn since(&self) -> Duration {
        Duration::from_millis(now_ms().saturating_sub(self.heard_ms.load(Ordering::Relaxed)))
    }

    /// How long the cache may go without word before it is stale.
    pub fn max(&self) -> Duration {
        self.max
    }

    /// Silent for longer than allowed.
    pub fn stale(&self) -> bool {
        !self.max.is_zero() && self.since() > self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stale just past its bound, not at it; fresh the moment it hears;
    /// a zero bound never stale; a snapshot's age counts.
    #[tokio::test(start_paused = true)]
    async fn should_turn_stale_after_its_bound_and_fresh_when_heard() {
        let s = Staleness::new(Duration::from_secs(8));
        assert!(!s.stale());
        tokio::time::advance(Duration::from_secs(8)).await;
        assert!(!s.stale(), "at the bound: not yet");
        assert_eq!(s.since(), Duration::from_secs(8));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(s.stale(), "past the bound");
        s.heard();
        assert!(!s.stale());
        assert_eq!(s.since(), Duration::ZERO);
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(s.since(), Duration::from_secs(5));
        assert!(!Staleness::new(Duration::ZERO).stale());
        s.heard_ago(Duration::from_secs(3600));
        assert!(s.stale());
        assert_eq!(s.since(), Duration::from_secs(3600));
    }
}
