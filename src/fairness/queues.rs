//! Fair queuing within a priority level, as kube-apiserver's queue sets do
//! it: a level has its seats; a request that finds none free waits in one
//! of the level's `queues`, the shortest of the `handSize` its flow is dealt
//! (shuffle sharding: one heavy flow fills at most its hand, and two flows
//! rarely share a whole hand); a freed seat goes to the head of the next
//! non-empty queue in turn, so queues, not requests, take turns. A request
//! whose chosen queue already holds `queueLengthLimit`, or that waits
//! longer than [`QUEUE_WAIT`], or of a level that does not queue
//! (`Reject`), is refused, for the apiserver's reasons.
//!
//! One [`QueueSet`] per level, behind a lock held only to count and to move
//! a waiter; a [`Seat`] gives itself back when dropped.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;

use super::schema::Queuing;
use crate::sync::MutexExt;

/// The longest a request waits in its queue before it is refused (the
/// apiserver's default, a quarter of its 60 s request timeout).
pub const QUEUE_WAIT: Duration = Duration::from_secs(15);

/// One level's seats and queues.
#[derive(Debug)]
pub struct QueueSet {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    seats: usize,
    in_use: usize,
    /// None for a level that does not queue. Each waiter by its number,
    /// with the gauge it is counted in while it waits
    /// (`r8s_flowcontrol_current_inqueue_requests` of its level and schema).
    queues: Vec<VecDeque<(u64, oneshot::Sender<()>, ::metrics::Gauge)>>,
    hand_size: usize,
    limit: usize,
    /// The queue whose turn is next.
    next: usize,
    /// The next waiter's number.
    numbered: u64,
}

/// A seat of a level, given back (to the next waiter, or free) when dropped.
#[derive(Debug)]
pub struct Seat {
    set: Arc<QueueSet>,
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.set.release();
    }
}

/// Why a request got no seat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Every queue of its hand was full.
    QueueFull,
    /// Its level does not queue (or, for a watch, holds its share of
    /// watches) and has no seat free.
    ConcurrencyLimit,
    /// It waited [`QUEUE_WAIT`] in its queue.
    TimedOut,
}

impl Refused {
    /// The apiserver's `reason` label for it (one of
    /// [`crate::metrics::REJECT_REASONS`]).
    pub fn reason(self) -> &'static str {
        let [full, limit, timed_out] = crate::metrics::REJECT_REASONS;
        match self {
            Refused::QueueFull => full,
            Refused::ConcurrencyLimit => limit,
            Refused::TimedOut => timed_out,
        }
    }
}

/// A place in a queue: the seat it is given, or nothing. Dropped before
/// its seat arrives (its client gone, its wait over), it gives back a seat
/// sent in the meantime.
struct Waiting {
    rx: oneshot::Receiver<()>,
    set: Arc<QueueSet>,
    /// Its queue, and its number there.
    place: (usize, u64),
    /// Its seat arrived and was taken as a [`Seat`].
    seated: bool,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if self.seated {
            return;
        }
        // Still queued: it leaves its queue. Already sent a seat: the
        // seat is given back.
        {
            let mut s = self.set.state.locked();
            let (q, n) = self.place;
            if let Some(at) = s.queues[q].iter().position(|(m, ..)| *m == n)
                && let Some((.., queued)) = s.queues[q].remove(at)
            {
                queued.decrement(1.0);
                return;
            }
        }
        self.rx.close();
        if self.rx.try_recv().is_ok() {
            self.set.release();
        }
    }
}

impl QueueSet {
    /// `seats` seats of a level, queued as `queuing` says (`None`: refused
    /// at once when none is free).
    pub fn new(seats: usize, queuing: Option<Queuing>) -> Arc<QueueSet> {
        let (queues, hand_size, limit) = match queuing {
            Some(q) => {
                let n = (q.queues as usize).max(1);
                (
                    n,
                    (q.hand_size as usize).clamp(1, n),
                    q.queue_length_limit as usize,
                )
            }
            None => (0, 0, 0),
        };
        Arc::new(QueueSet {
            state: Mutex::new(State {
                seats,
                in_use: 0,
                queues: (0..queues).map(|_| VecDeque::new()).collect(),
                hand_size,
                limit,
                next: 0,
                numbered: 0,
            }),
        })
    }

    /// A seat for a request of `flow`: at once if one is free, else after
    /// its turn in the shortest queue of its hand (counted in `queued`
    /// while it waits), or refused.
    pub async fn seat(
        self: &Arc<Self>,
        flow: u64,
        queued: ::metrics::Gauge,
    ) -> Result<Seat, Refused> {
        let rx = {
            let mut s = self.state.locked();
            if s.in_use < s.seats {
                s.in_use += 1;
                return Ok(Seat { set: self.clone() });
            }
            if s.queues.is_empty() {
                return Err(Refused::ConcurrencyLimit);
            }
            let hand = deal(flow, s.queues.len(), s.hand_size);
            let q = hand
                .into_iter()
                .min_by_key(|&i| s.queues[i].len())
                .expect("a hand of at least one");
            if s.queues[q].len() >= s.limit {
                return Err(Refused::QueueFull);
            }
            let (tx, rx) = oneshot::channel();
            let n = s.numbered;
            s.numbered += 1;
            queued.increment(1.0);
            s.queues[q].push_back((n, tx, queued));
            (rx, (q, n))
        };
        let (rx, place) = rx;
        let mut waiting = Waiting {
            rx,
            set: self.clone(),
            place,
            seated: false,
        };
        match tokio::time::timeout(QUEUE_WAIT, &mut waiting.rx).await {
            Ok(Ok(())) => {
                waiting.seated = true;
                Ok(Seat { set: self.clone() })
            }
            _ => Err(Refused::TimedOut),
        }
    }

    /// A seat given back: to the head of the next non-empty queue in turn
    /// (one whose waiter is gone is skipped), or free.
    fn release(&self) {
        let mut s = self.state.locked();
        let n = s.queues.len();
        for step in 0..n {
            let i = (s.next + step) % n;
            while let Some((_, tx, queued)) = s.queues[i].pop_front() {
                queued.decrement(1.0);
                if tx.send(()).is_ok() {
                    s.next = (i + 1) % n;
                    return;
                }
            }
        }
        s.in_use = s.in_use.saturating_sub(1);
    }

    /// Requests waiting in its queues now.
    pub fn waiting(&self) -> usize {
        self.state.locked().queues.iter().map(VecDeque::len).sum()
    }
}

/// The `hand` distinct queues of `deck` that `flow` is dealt, as the
/// apiserver's shuffle-sharding `Dealer` deals them: the hash read as
/// digits of falling bases, each digit then moved past the cards before it.
fn deal(flow: u64, deck: usize, hand: usize) -> Vec<usize> {
    let hand = hand.min(deck);
    let mut h = flow;
    let remainders: Vec<usize> = (0..hand)
        .map(|i| {
            let base = (deck - i) as u64;
            let r = (h % base) as usize;
            h /= base;
            r
        })
        .collect();
    (0..hand)
        .map(|i| {
            let mut card = remainders[i];
            for j in (1..=i).rev() {
                if card >= remainders[j - 1] {
                    card += 1;
                }
            }
            card
        })
        .collect()
}

#[cfg(test)]
mod tests;
