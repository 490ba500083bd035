use std::collections::BTreeSet;

use super::*;

/// A gauge of no registry's (the tests count waiters with `waiting`).
fn queued() -> ::metrics::Gauge {
    ::metrics::Gauge::noop()
}

fn queuing(queues: u32, hand_size: u32, queue_length_limit: u32) -> Option<Queuing> {
    Some(Queuing {
        queues,
        hand_size,
        queue_length_limit,
    })
}

#[test]
fn should_deal_each_flow_distinct_queues_of_the_deck() {
    for flow in (0..2000u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)) {
        let hand = deal(flow, 64, 6);
        assert_eq!(hand.len(), 6);
        assert_eq!(hand.iter().collect::<BTreeSet<_>>().len(), 6, "{hand:?}");
        assert!(hand.iter().all(|&q| q < 64));
        assert_eq!(hand, deal(flow, 64, 6), "the same flow, the same hand");
    }
    assert_eq!(deal(7, 4, 9).len(), 4, "no more than the deck");
}

#[tokio::test(start_paused = true)]
async fn should_seat_at_once_while_free_then_in_turn_by_queue() {
    // One seat; eight queues, a hand of one: each flow its own queue.
    let set = QueueSet::new(1, queuing(8, 1, 10));
    let first = set.seat(1, queued()).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    // Flow 1 queues four requests, then flow 2 four.
    for (flow, n) in [(1u64, 4), (2u64, 4)] {
        for i in 0..n {
            let (set, tx) = (set.clone(), tx.clone());
            tokio::spawn(async move {
                let seat = set.seat(flow, queued()).await.unwrap();
                tx.send((flow, i)).unwrap();
                tokio::time::sleep(Duration::from_millis(10)).await;
                drop(seat);
            });
            tokio::task::yield_now().await;
        }
    }
    assert_eq!(set.waiting(), 8);
    drop(first);
    let mut order = Vec::new();
    while order.len() < 8 {
        order.push(rx.recv().await.unwrap().0);
    }
    // Queues take turns: the flows alternate, whatever each queued.
    assert_eq!(order, [1, 2, 1, 2, 1, 2, 1, 2], "{order:?}");
    assert_eq!(set.waiting(), 0);
    let again = set.seat(3, queued()).await;
    assert!(again.is_ok(), "every seat given back");
}

#[tokio::test(start_paused = true)]
async fn should_refuse_past_the_queue_limit_and_at_once_where_a_level_does_not_queue() {
    let set = QueueSet::new(1, queuing(4, 1, 2));
    let _held = set.seat(9, queued()).await.unwrap();
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let set = set.clone();
            tokio::spawn(async move { set.seat(9, queued()).await.map(|_| ()) })
        })
        .collect();
    tokio::task::yield_now().await;
    assert_eq!(set.waiting(), 2);
    assert_eq!(set.seat(9, queued()).await.unwrap_err(), Refused::QueueFull);
    // Waited too long: refused, and counted so.
    tokio::time::sleep(QUEUE_WAIT + Duration::from_millis(1)).await;
    for w in waiters {
        assert_eq!(w.await.unwrap(), Err(Refused::TimedOut));
    }
    assert_eq!(set.waiting(), 0, "who gave up left its queue");
    let reject = QueueSet::new(1, None);
    let _one = reject.seat(1, queued()).await.unwrap();
    assert_eq!(
        reject.seat(1, queued()).await.unwrap_err(),
        Refused::ConcurrencyLimit
    );
    assert_eq!(Refused::TimedOut.reason(), "time-out");
}

#[tokio::test(start_paused = true)]
async fn should_give_back_a_seat_whose_waiter_went_away() {
    let set = QueueSet::new(1, queuing(4, 1, 5));
    let held = set.seat(1, queued()).await.unwrap();
    // A waiter that goes away before its turn, and one that is gone
    // after its seat was sent, but before it took it.
    let gone = tokio::spawn({
        let set = set.clone();
        async move { set.seat(1, queued()).await.map(|_| ()) }
    });
    tokio::task::yield_now().await;
    gone.abort();
    let _ = gone.await;
    let mut late = Box::pin(set.seat(2, queued()));
    assert!(futures_poll_once(&mut late).await.is_none());
    drop(held);
    drop(late);
    // Both seats are free again: the set is whole.
    let a = set.seat(3, queued()).await;
    assert!(a.is_ok());
    assert_eq!(set.state.locked().in_use, 1);
}

/// Polls `f` once: its output, if ready.
async fn futures_poll_once<F: std::future::Future + Unpin>(f: &mut F) -> Option<F::Output> {
    std::future::poll_fn(|cx| {
        std::task::Poll::Ready(match std::pin::Pin::new(&mut *f).poll(cx) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        })
    })
    .await
}
