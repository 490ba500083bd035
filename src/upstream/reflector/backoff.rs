//! The wait between a reflector's failed step and its retry: exponential,
//! from 200 ms up to 30 s, with up to half again of jitter. It lives
//! outside the reflector's states: a state says where to retry, this says
//! when.

use std::time::Duration;

use crate::shutdown::Signal;

/// The first wait, and the wait again after a success.
const FIRST: Duration = Duration::from_millis(200);
/// The longest wait.
const MAX: Duration = Duration::from_secs(30);

/// The next wait, and whether the upstream answered since the last failure.
#[derive(Debug)]
pub struct Backoff {
    next: Duration,
    /// A list or watch was answered 200 since the last failure: a failure
    /// after that (a watch cut after it ran) backs off from the start
    /// again, not from where the last outage left the backoff.
    answered: bool,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            next: FIRST,
            answered: false,
        }
    }
}

impl Backoff {
    /// The upstream answered a list or watch 200.
    pub fn answered(&mut self) {
        self.answered = true;
    }

    /// A cycle completed (a relist applied, a watch ended on time): the
    /// next failure waits the least.
    pub fn succeeded(&mut self) {
        self.next = FIRST;
    }

    /// The wait the next retry would take.
    pub fn next(&self) -> Duration {
        self.next
    }

    /// A list or watch failed: from the start again if the upstream had
    /// answered since the last failure. The wait [`Backoff::wait`] takes.
    pub fn failed(&mut self) -> Duration {
        if std::mem::take(&mut self.answered) {
            self.next = FIRST;
        }
        self.next
    }

    /// The upstream answered, but with an older state than the cache's:
    /// that answer does not count, the wait keeps growing.
    pub async fn behind(&mut self, shutdown: &Signal) -> bool {
        self.answered = false;
        self.wait(shutdown).await
    }

    /// Waits out the next wait (with up to half again of jitter) and
    /// doubles it, up to [`MAX`]; false if shutdown came first.
    pub async fn wait(&mut self, shutdown: &Signal) -> bool {
        let wait = self.take();
        tokio::select! {
            _ = tokio::time::sleep(wait) => true,
            _ = shutdown.wait() => false,
        }
    }

    /// The next wait with up to half again of jitter; the one after is
    /// twice as long, up to [`MAX`].
    fn take(&mut self) -> Duration {
        let wait = self.next + self.next.mul_f64(fastrand::f64() * 0.5);
        self.next = (self.next * 2).min(MAX);
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Doubling up to 30 s with up to half again of jitter; a 200 since the
    /// last failure starts it over, a behind upstream's answer does not.
    #[tokio::test]
    async fn should_double_and_start_over_once_answered() {
        let mut b = Backoff::default();
        for want in [200, 400, 800, 1600] {
            assert_eq!(b.failed(), Duration::from_millis(want));
            let wait = b.take();
            let want = Duration::from_millis(want);
            assert!(wait >= want && wait <= want.mul_f64(1.5), "{wait:?}");
        }
        b.answered();
        assert_eq!(b.failed(), FIRST, "answered since the last failure");
        for _ in 0..12 {
            b.take();
        }
        assert_eq!(b.next(), MAX);
        b.answered();
        let (trigger, shutdown) = crate::shutdown::channel();
        trigger.fire();
        assert!(!b.behind(&shutdown).await, "shutdown ends the wait");
        assert_eq!(b.failed(), MAX, "a behind answer does not count");
        b.succeeded();
        assert_eq!(b.next(), FIRST);
    }
}
