//! The review caches: a bounded LRU of answers, each kept for a TTL that
//! depends on the answer, and one review in flight per key however many
//! requests ask for it at once (no thundering herd on the upstream).

use std::collections::HashMap;
use std::hash::Hash;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::sync::MutexExt;
use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};
use lru::LruCache;

/// Why a review could not be made (never cached: the next request retries).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ReviewError(pub String);

/// How an answer was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// From the cache.
    Cached,
    /// From a review (this request's, or one it joined while in flight).
    Reviewed,
}

impl Lookup {
    /// The `cached` metric label.
    pub fn label(self) -> &'static str {
        match self {
            Lookup::Cached => "true",
            Lookup::Reviewed => "false",
        }
    }
}

type Pending<V> = Shared<BoxFuture<'static, Result<V, ReviewError>>>;

/// A bounded answer cache with per-answer TTLs and single-flight misses.
pub struct ReviewCache<K, V> {
    entries: Mutex<LruCache<K, (V, Instant)>>,
    inflight: Mutex<HashMap<K, Pending<V>>>,
    ttl: fn(&V, &Ttls) -> Duration,
    ttls: Ttls,
}

/// The two TTLs of a cache: for a positive and a negative answer.
#[derive(Debug, Clone, Copy)]
pub struct Ttls {
    /// Authenticated / allowed.
    pub positive: Duration,
    /// Rejected / denied.
    pub negative: Duration,
}

impl<K, V> ReviewCache<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    /// A cache of at most `size` answers; `ttl` picks the TTL for an answer.
    pub fn new(size: NonZeroUsize, ttls: Ttls, ttl: fn(&V, &Ttls) -> Duration) -> Arc<Self> {
        Arc::new(ReviewCache {
            entries: Mutex::new(LruCache::new(size)),
            inflight: Mutex::new(HashMap::new()),
            ttl,
            ttls,
        })
    }

    fn fresh(&self, key: &K) -> Option<V> {
        let mut entries = self.entries.locked();
        match entries.get(key) {
            Some((v, until)) if *until > Instant::now() => Some(v.clone()),
            Some(_) => {
                entries.pop(key);
                None
            }
            None => None,
        }
    }

    /// The cached answer for `key`, or the answer of the review `make` starts
    /// (called only on a miss, at most once per key at a time; the review runs
    /// to the end even if every asker leaves).
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
                            let until = Instant::now() + (this.ttl)(v, &this.ttls);
                            this.entries.locked().put(k.clone(), (v.clone(), until));
                        }
                        this.inflight.locked().remove(&k);
                        r
                    });
                    let p = async move {
                        task.await
                            .unwrap_or_else(|e| Err(ReviewError(format!("review failed: {e}"))))
                    }
                    .boxed()
                    .shared();
                    inflight.insert(key.clone(), p.clone());
                    p
                }
            }
        };
        (pending.await, Lookup::Reviewed)
    }

    /// Answers held (fresh or not yet evicted).
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
        ReviewCache::new(
            NonZeroUsize::new(size).unwrap(),
            Ttls {
                positive: Duration::from_millis(pos_ms),
                negative: Duration::from_millis(neg_ms),
            },
            |v, t| if *v { t.positive } else { t.negative },
        )
    }

    #[tokio::test]
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

    #[tokio::test]
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
        let err = c
            .get_or_review(&3, || async { Err(ReviewError("down".into())) })
            .await;
        assert_eq!(err.0, Err(ReviewError("down".into())));
        assert_eq!(
            c.get_or_review(&3, || async { Ok(true) }).await,
            (Ok(true), Lookup::Reviewed)
        );
    }

    #[tokio::test]
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
