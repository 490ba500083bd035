//! The wait between a reflector's failed step and its retry: exponential
//! from 200 ms up to `upstream.max_backoff_seconds` (5 s), with full jitter
//! (a random wait up to that), cut short when the upstream is seen
//! answering again. It lives outside the reflector's states: a state says
//! where to retry, this says when.
//!
//! client-go's reflectors back off up to 30 s because thousands of them
//! share one apiserver; r8s is one client per cache standing in for all of
//! them, so it can afford to come back within seconds, and must: while its
//! caches sit in backoff they serve a state the upstream has left.

use std::time::Duration;

use crate::shutdown::Signal;
use crate::upstream::liveness::{self, Returns};

/// The first wait, and the wait again after a success.
const FIRST: Duration = Duration::from_millis(200);

/// The next wait, and whether the upstream answered since the last failure.
#[derive(Debug)]
pub struct Backoff {
    next: Duration,
    /// The longest wait (`upstream.max_backoff_seconds`).
    max: Duration,
    /// A list or watch was answered 200 since the last failure: a failure
    /// after that (a watch cut after it ran) backs off from the start
    /// again, not from where the last outage left the backoff.
    answered: bool,
}

impl Backoff {
    /// A backoff of at most `max`.
    pub fn new(max: Duration) -> Self {
        Backoff {
            next: FIRST.min(max),
            max,
            answered: false,
        }
    }

    /// The upstream answered a list or watch 200.
    pub fn answered(&mut self) {
        self.answered = true;
    }

    /// A cycle completed (a relist applied, a watch ended on time): the
    /// next failure waits the least.
    pub fn succeeded(&mut self) {
        self.next = FIRST.min(self.max);
    }

    /// The wait the next retry would take.
    pub fn next(&self) -> Duration {
        self.next
    }

    /// A list or watch failed: from the start again if the upstream had
    /// answered since the last failure. The wait [`Backoff::wait`] takes.
    pub fn failed(&mut self) -> Duration {
        if std::mem::take(&mut self.answered) {
            self.next = FIRST.min(self.max);
        }
        self.next
    }

    /// The upstream answered, but with an older state than the cache's:
    /// that answer does not count, the wait keeps growing.
    pub async fn behind(&mut self, shutdown: &Signal, returns: &mut Returns) -> bool {
        self.answered = false;
        self.wait(shutdown, returns).await
    }

    /// Waits out the next wait, or until the upstream is seen answering
    /// again after an outage (then a small random delay), and doubles it,
    /// up to the maximum; false if shutdown came first.
    pub async fn wait(&mut self, shutdown: &Signal, returns: &mut Returns) -> bool {
        let wait = self.take();
        tokio::select! {
            _ = tokio::time::sleep(wait) => true,
            _ = returns.next() => {
                tokio::select! {
                    _ = tokio::time::sleep(liveness::spread()) => true,
                    _ = shutdown.wait() => false,
                }
            }
            _ = shutdown.wait() => false,
        }
    }

    /// The next wait, with full jitter (anything up to it); the one after
    /// is twice as long, up to the maximum.
    fn take(&mut self) -> Duration {
        let wait = self.next.mul_f64(fastrand::f64());
        self.next = (self.next * 2).min(self.max);
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Doubling up to its maximum with full jitter; a 200 since the last
    /// failure starts it over, a behind upstream's answer does not.
    #[tokio::test]
    async fn should_double_and_start_over_once_answered() {
        let max = Duration::from_secs(5);
        let mut b = Backoff::new(max);
        for want in [200, 400, 800, 1600] {
            assert_eq!(b.failed(), Duration::from_millis(want));
            let wait = b.take();
            assert!(wait <= Duration::from_millis(want), "{wait:?}");
        }
        b.answered();
        assert_eq!(b.failed(), FIRST, "answered since the last failure");
        for _ in 0..12 {
            b.take();
        }
        assert_eq!(b.next(), max);
        b.answered();
        let liveness = std::sync::Arc::new(crate::upstream::liveness::Liveness::default());
        let mut returns = liveness.returns();
        let (trigger, shutdown) = crate::shutdown::channel();
        trigger.fire();
        assert!(
            !b.behind(&shutdown, &mut returns).await,
            "shutdown ends the wait"
        );
        assert_eq!(b.failed(), max, "a behind answer does not count");
        b.succeeded();
        assert_eq!(b.next(), FIRST);
    }

    /// The upstream's return cuts a long wait short: the retry comes after
    /// the return and the spread (≤ 250 ms), not at the backoff's timer
    /// (paused time: exact, whatever the machine's load).
    #[tokio::test(start_paused = true)]
    async fn should_retry_at_once_when_the_upstream_returns() {
        let mut b = Backoff::new(Duration::from_secs(300));
        for _ in 0..20 {
            b.take();
        }
        let liveness = std::sync::Arc::new(crate::upstream::liveness::Liveness::default());
        let mut returns = liveness.returns();
        let (_trigger, shutdown) = crate::shutdown::channel();
        liveness.failed();
        // The wait drawn is a long one (seeded): only the return ends it soon.
        fastrand::seed(7);
        assert!(fastrand::f64() > 0.1);
        fastrand::seed(7);
        let started = tokio::time::Instant::now();
        let waiting = tokio::spawn(async move { b.wait(&shutdown, &mut returns).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(liveness.answered().is_some());
        assert!(waiting.await.unwrap());
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(50) && waited <= Duration::from_millis(300),
            "{waited:?}"
        );
    }
}
