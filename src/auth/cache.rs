//! The review caches: a bounded LRU of answers, each kept for a TTL that
//! depends on the answer, and one review in flight per key however many
//! requests ask for it at once (no thundering herd on the upstream). When a
//! review cannot be made because the upstream is down, the last allowing
//! answer for the key is reused for a bounded while (stale-if-error);
//! denials and rejections never are.

use std::collections::HashMap;
use std::hash::Hash;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

// The runtime's clock: paused in the tests, so TTLs and windows are
// checked to the millisecond whatever the machine's load.
use tokio::time::Instant;

use crate::sync::MutexExt;
use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};
use lru::LruCache;

/// Why a review could not be made (never cached: the next request retries).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ReviewError {
    /// What failed, for the client's 503 and the log.
    pub message: String,
    /// Whether the upstream was unreachable, timed out or answered 5xx: an
    /// outage, during which a recent allowing answer may be reused. Any
    /// other failure (4xx, an unreadable answer) is never papered over.
    pub unavailable: bool,
}

impl ReviewError {
    /// The upstream could not be asked (down, timed out, 5xx).
    pub fn unavailable(message: impl Into<String>) -> Self {
        ReviewError {
            message: message.into(),
            unavailable: true,
        }
    }

    /// The upstream answered, but not with a usable review.
    pub fn refused(message: impl Into<String>) -> Self {
        ReviewError {
            message: message.into(),
            unavailable: false,
        }
    }
}

/// How an answer was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// From the cache.
    Cached,
    /// From a review (this request's, or one it joined while in flight).
    Reviewed,
    /// An expired allowing answer, reused because the review failed with the
    /// upstream unavailable (within the stale-if-error window).
    Stale,
}

impl Lookup {
    /// The `cached` metric label.
    pub fn label(self) -> crate::metrics::Cached {
        match self {
            Lookup::Cached | Lookup::Stale => crate::metrics::Cached::Yes,
            Lookup::Reviewed => crate::metrics::Cached::No,
        }
    }
}

type Pending<V> = Shared<BoxFuture<'static, Result<V, ReviewError>>>;

/// One answer: until when it is fresh, and when it was reviewed.
struct Entry<V> {
    value: V,
    until: Instant,
    reviewed: Instant,
}

/// A bounded answer cache with per-answer TTLs and single-flight misses.
pub struct ReviewCache<K, V> {
    entries: Mutex<LruCache<K, Entry<V>>>,
    inflight: Mutex<HashMap<K, Pending<V>>>,
    ttl: fn(&V, &Ttls) -> Duration,
    ttls: Ttls,
    stale: StaleIfError<V>,
}

/// The two TTLs of a cache: for a positive and a negative answer.
#[derive(Debug, Clone, Copy)]
pub struct Ttls {
    /// Authenticated / allowed.
    pub positive: Duration,
    /// Rejected / denied.
    pub negative: Duration,
}

/// Which answers outlive an outage, and for how long after their review.
#[derive(Debug, Clone, Copy)]
pub struct StaleIfError<V> {
    /// How long after its review an answer may be reused (zero: never).
    pub window: Duration,
    /// Whether an answer may be reused at all (allowing ones only).
    pub reusable: fn(&V) -> bool,
}

impl<K, V> ReviewCache<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    /// A cache of at most `size` answers; `ttl` picks the TTL for an answer,
    /// `stale` which ones an outage may reuse.
    pub fn new(
        size: NonZeroUsize,
        ttls: Ttls,
        ttl: fn(&V, &Ttls) -> Duration,
        stale: StaleIfError<V>,
    ) -> Arc<Self> {
        Arc::new(ReviewCache {
            entries: Mutex::new(LruCache::new(size)),
            inflight: Mutex::new(HashMap::new()),
            ttl,
            ttls,
            stale,
        })
    }

    /// Whether an entry may still be reused in an outage at `now`.
    fn keeps(&self, e: &Entry<V>, now: Instant) -> bool {
        (self.stale.reusable)(&e.value) && now < e.reviewed + self.stale.window
    }

    /// The fresh answer for `key`; an expired one is dropped unless an
    /// outage could still reuse it.
    fn fresh(&self, key: &K) -> Option<V> {
        let mut entries = self.entries.locked();
        let now = Instant::now();
        match entries.get(key) {
            Some(e) if e.until > now => Some(e.value.clone()),
            Some(e) => {
                if !self.keeps(e, now) {
                    entries.pop(key);
                }
                None
            }
            None => None,
        }
    }

    /// The last answer for `key` if an outage may reuse it now.
    fn stale(&self, key: &K) -> Option<V> {
        let entries = self.entries.locked();
        let e = entries.peek(key)?;
        self.keeps(e, Instant::now()).then(|| e.value.clone())
    }

    /// The cached answer for `key`, or the answer of the review `make` starts
    /// (called only on a miss, at most once per key at a time; the review runs
    /// to the end even if every asker leaves). If that review fails with the
    /// upstream unavailable, the last reusable answer within the window.
    pub async fn get_or_review<F>(
        self: &Arc<Self>,
        key: &K,
        make: impl FnOnce() -> F,
    ) -> (Result<V, ReviewError>, Lookup)
    where
        F: std::future::Future<Output = Result<V, ReviewError>> + Send + 'static,
    {
        if let Some(v) = self.fresh(key) {
            return (Ok(v), Lookup::Cached);
        }
        let pending = {
            let mut inflight = self.inflight.locked();
            // An answer stored between the check above and this lock.
            if let Some(v) = self.fresh(key) {
                return (Ok(v), Lookup::Cached);
            }
            match inflight.get(key) {
                Some(p) => p.clone(),
                None => {
                    let this = self.clone();
                    let k = key.clone();
                    let review = make();
                    let task = tokio::spawn(async move {
                        let r = review.await;
                        if let Ok(v) = &r {
                            let reviewed = Instant::now();
                            let until = reviewed + (this.ttl)(v, &this.ttls);
                            let entry = Entry {
                                value: v.clone(),
                                until,
                                reviewed,
                            };
                            this.entries.locked().put(k.clone(), entry);
                        }
                        this.inflight.locked().remove(&k);
                        r
                    });
                    let p = async move {
                        task.await.unwrap_or_else(|e| {
                            Err(ReviewError::refused(format!("review failed: {e}")))
                        })
                    }
                    .boxed()
                    .shared();
                    inflight.insert(key.clone(), p.clone());
                    p
                }
            }
        };
        match pending.await {
            Err(e) if e.unavailable => match self.stale(key) {
                Some(v) => (Ok(v), Lookup::Stale),
                None => (Err(e), Lookup::Reviewed),
            },
            r => (r, Lookup::Reviewed),
        }
    }

    /// Answers held (fresh, kept for an outage, or not yet evicted).
    pub fn len(&self) -> usize {
        self.entries.locked().len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn cache(size: usize, pos_ms: u64, neg_ms: u64) -> Arc<ReviewCache<u32, bool>> {
        stale_cache(size, pos_ms, neg_ms, 0)
    }

    /// `true` allows; allowing answers may be reused `stale_ms` after review.
    fn stale_cache(
        size: usize,
        pos_ms: u64,
        neg_ms: u64,
        stale_ms: u64,
    ) -> Arc<ReviewCache<u32, bool>> {
        ReviewCache::new(
            NonZeroUsize::new(size).unwrap(),
            Ttls {
                positive: Duration::from_millis(pos_ms),
                negative: Duration::from_millis(neg_ms),
            },
            |v, t| if *v { t.positive } else { t.negative },
            StaleIfError {
                window: Duration::from_millis(stale_ms),
                reusable: |v| *v,
            },
        )
    }

    fn down() -> ReviewError {
        ReviewError::unavailable("upstream 127.0.0.1:1 is unreachable")
    }

    #[tokio::test(start_paused = true)]
    async fn should_reuse_an_expired_allowing_answer_while_the_upstream_is_down() {
        let c = stale_cache(10, 20, 20, 60_000);
        assert_eq!(c.get_or_review(&1, || async { Ok(true) }).await.0, Ok(true));
        tokio::time::sleep(Duration::from_millis(40)).await;
        // Expired: a review is attempted; it fails with the upstream down.
        assert_eq!(
            c.get_or_review(&1, || async { Err(down()) }).await,
            (Ok(true), Lookup::Stale)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn should_never_reuse_a_denial_or_an_answer_refused_by_the_upstream() {
        let c = stale_cache(10, 20, 20, 60_000);
        assert_eq!(
            c.get_or_review(&1, || async { Ok(false) }).await.0,
            Ok(false)
        );
        tokio::time::sleep(Duration::from_millis(40)).await;
        assert_eq!(
            c.get_or_review(&1, || async { Err(down()) }).await,
            (Err(down()), Lookup::Reviewed),
            "a denial is never extended"
        );
        // An allow replaced by a later denial: the denial is what counts.
        c.get_or_review(&2, || async { Ok(true) }).await.0.unwrap();
        tokio::time::sleep(Duration::from_millis(40)).await;
        c.get_or_review(&2, || async { Ok(false) }).await.0.unwrap();
        tokio::time::sleep(Duration::from_millis(40)).await;
        assert!(
            c.get_or_review(&2, || async { Err(down()) })
                .await
                .0
                .is_err()
        );
        // Not an outage: the upstream answered 403 to r8s's own review.
        c.get_or_review(&3, || async { Ok(true) }).await.0.unwrap();
        tokio::time::sleep(Duration::from_millis(40)).await;
        let refused = ReviewError::refused("the upstream answered 403 Forbidden");
        let r = refused.clone();
        assert_eq!(
            c.get_or_review(&3, || async move { Err(r) }).await,
            (Err(refused), Lookup::Reviewed)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn should_fail_a_key_never_reviewed_while_the_upstream_is_down() {
        let c = stale_cache(10, 20, 20, 60_000);
        assert_eq!(
            c.get_or_review(&9, || async { Err(down()) }).await,
            (Err(down()), Lookup::Reviewed)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn should_stop_reusing_once_the_window_after_the_review_has_passed() {
        let c = stale_cache(10, 20, 20, 100);
        c.get_or_review(&1, || async { Ok(true) }).await.0.unwrap();
        tokio::time::sleep(Duration::from_millis(40)).await;
        assert_eq!(
            c.get_or_review(&1, || async { Err(down()) }).await.1,
            Lookup::Stale
        );
        tokio::time::sleep(Duration::from_millis(80)).await;
        assert_eq!(
            c.get_or_review(&1, || async { Err(down()) }).await,
            (Err(down()), Lookup::Reviewed),
            "reviewed 120 ms ago, the window is 100 ms"
        );
        // A window of zero turns reuse off.
        let off = stale_cache(10, 20, 20, 0);
        off.get_or_review(&1, || async { Ok(true) })
            .await
            .0
            .unwrap();
        tokio::time::sleep(Duration::from_millis(40)).await;
        assert!(
            off.get_or_review(&1, || async { Err(down()) })
                .await
                .0
                .is_err()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn should_review_as_before_while_the_upstream_is_healthy() {
        let c = stale_cache(10, 20, 20, 60_000);
        c.get_or_review(&1, || async { Ok(true) }).await.0.unwrap();
        // Fresh: cached, no review.
        assert_eq!(
            c.get_or_review(&1, || async { Ok(false) }).await,
            (Ok(true), Lookup::Cached)
        );
        tokio::time::sleep(Duration::from_millis(40)).await;
        // Expired: the upstream's new answer counts, even against a kept allow.
        assert_eq!(
            c.get_or_review(&1, || async { Ok(false) }).await,
            (Ok(false), Lookup::Reviewed)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn should_share_one_review_between_concurrent_misses() {
        let c = cache(10, 60_000, 60_000);
        let calls = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..50 {
            let (c, calls) = (c.clone(), calls.clone());
            tasks.push(tokio::spawn(async move {
                c.get_or_review(&7, || async move {
                    calls.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Ok(true)
                })
                .await
            }));
        }
        for t in tasks {
            assert_eq!(t.await.unwrap().0, Ok(true));
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let (v, how) = c.get_or_review(&7, || async { Ok(false) }).await;
        assert_eq!((v, how), (Ok(true), Lookup::Cached));
    }

    #[tokio::test(start_paused = true)]
    async fn should_expire_by_answer_and_not_cache_errors() {
        let c = cache(10, 60_000, 30);
        assert_eq!(
            c.get_or_review(&1, || async { Ok(false) }).await.0,
            Ok(false)
        );
        assert_eq!(c.get_or_review(&2, || async { Ok(true) }).await.0, Ok(true));
        tokio::time::sleep(Duration::from_millis(60)).await;
        // The negative answer expired; the positive one did not.
        assert_eq!(c.get_or_review(&1, || async { Ok(true) }).await.0, Ok(true));
        assert_eq!(
            c.get_or_review(&2, || async { Ok(false) }).await.1,
            Lookup::Cached
        );
        let err = c.get_or_review(&3, || async { Err(down()) }).await;
        assert_eq!(err.0, Err(down()));
        assert_eq!(
            c.get_or_review(&3, || async { Ok(true) }).await,
            (Ok(true), Lookup::Reviewed)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn should_stay_within_its_size() {
        let c = cache(3, 60_000, 60_000);
        for k in 0..10 {
            c.get_or_review(&k, || async { Ok(true) }).await.0.unwrap();
        }
        assert_eq!(c.len(), 3);
        assert_eq!(
            c.get_or_review(&0, || async { Ok(false) }).await.1,
            Lookup::Reviewed
        );
    }
}
