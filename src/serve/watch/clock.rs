//! When a watcher sends a bookmark: every `watch.bookmark_interval_seconds`,
//! and once 2 s before the watch's end (kube-apiserver's cacher does the
//! same, so a client resumes from a version no older than that).

use std::time::Duration;

use tokio::time::Instant;

/// Bookmarks go out this long before the server ends a watch (kube-apiserver's margin).
const FINAL_BOOKMARK_MARGIN: Duration = Duration::from_secs(2);

/// A watcher's bookmark schedule.
pub struct BookmarkClock {
    interval: Duration,
    next: Instant,
    /// When the watch ends.
    deadline: Instant,
    /// Whether the one before the end is sent (or not due at all).
    final_sent: bool,
}

impl BookmarkClock {
    /// The schedule of a watch ending at `deadline`. Like the cacher, no
    /// final bookmark is scheduled when the point 2 s before the end has
    /// already passed (watches of 2 s or less get none).
    pub fn new(interval: Duration, deadline: Instant) -> Self {
        Self::at(Instant::now(), interval, deadline)
    }

    /// The schedule as it is at `now`.
    fn at(now: Instant, interval: Duration, deadline: Instant) -> Self {
        BookmarkClock {
            interval,
            next: now + interval,
            deadline,
            final_sent: deadline
                .checked_sub(FINAL_BOOKMARK_MARGIN)
                .is_none_or(|t| t <= now),
        }
    }

    /// Whether a bookmark is due at `now`; if so, the next is scheduled.
    pub fn due(&mut self, now: Instant) -> bool {
        let near_end = !self.final_sent && self.deadline - now <= FINAL_BOOKMARK_MARGIN;
        if now >= self.next || near_end {
            self.final_sent |= near_end;
            self.next = now + self.interval;
            return true;
        }
        false
    }

    /// When the next bookmark is due.
    pub fn next_due(&self) -> Instant {
        if self.final_sent {
            self.next
        } else {
            self.next.min(self.deadline - FINAL_BOOKMARK_MARGIN)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every interval, and once 2 s before the end, not again after it.
    #[test]
    fn should_tick_every_interval_and_once_before_the_end() {
        let start = Instant::now();
        let mut c = BookmarkClock::at(
            start,
            Duration::from_secs(10),
            start + Duration::from_secs(25),
        );
        assert!(!c.due(start + Duration::from_secs(1)));
        assert_eq!(c.next_due(), start + Duration::from_secs(10));
        assert!(c.due(start + Duration::from_secs(10)));
        assert!(c.due(start + Duration::from_secs(20)));
        assert_eq!(c.next_due(), start + Duration::from_secs(23));
        assert!(c.due(start + Duration::from_secs(23)), "2 s before the end");
        assert!(!c.due(start + Duration::from_secs(24)), "only once");
        let short = BookmarkClock::at(
            start,
            Duration::from_secs(10),
            start + Duration::from_secs(2),
        );
        assert_eq!(
            short.next_due(),
            short.next,
            "a 2 s watch has no final bookmark"
        );
    }
}
