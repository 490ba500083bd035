//! The webhook's intake: a bounded queue of written events, which its task
//! batches as the apiserver's does ([`super::webhook`]). (The log file's:
//! [`super::spool`].)
//!
//! The policy for a full queue is to drop: a request never waits for the
//! audit log. Every event is either written (`r8s_audit_events_total`) or
//! counted as dropped (`r8s_audit_events_dropped_total`, by reason), and
//! the first drop of a run of them is logged.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::metrics::{AuditBackend, AuditCounters, AuditDrop};

/// The bytes of events one queue holds at most, whatever their count: a
/// `RequestResponse` event carries a whole answer (a list of 10,000 pods is
/// 45 MB), and a slow backend must not let them pile up in memory.
pub const MAX_QUEUED_BYTES: usize = 256 << 20;

/// One backend's intake.
pub struct Queue {
    tx: mpsc::Sender<Bytes>,
    /// Bytes of the events queued now (the consumer takes off what it takes).
    queued: Arc<std::sync::atomic::AtomicUsize>,
    backend: AuditBackend,
    counters: Arc<AuditCounters>,
    /// Whether the current run of full-queue drops was logged.
    full_logged: AtomicBool,
}

impl Queue {
    /// A queue of `capacity` events and its receiving end.
    pub fn new(
        backend: AuditBackend,
        capacity: usize,
        counters: Arc<AuditCounters>,
    ) -> (Queue, Intake) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let queued = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let q = Queue {
            tx,
            queued: queued.clone(),
            backend,
            counters,
            full_logged: AtomicBool::new(false),
        };
        (q, Intake { rx, queued })
    }

    /// Hands one event (a JSON line) to the backend, or counts it dropped.
    pub fn send(&self, event: Bytes) {
        let len = event.len();
        let over = self.queued.fetch_add(len, Ordering::Relaxed) + len > MAX_QUEUED_BYTES;
        let sent = if over {
            Err(mpsc::error::TrySendError::Full(event))
        } else {
            self.tx.try_send(event)
        };
        if sent.is_err() {
            self.queued.fetch_sub(len, Ordering::Relaxed);
        }
        match sent {
            Ok(()) => {
                if self.full_logged.load(Ordering::Relaxed) {
                    self.full_logged.store(false, Ordering::Relaxed);
                }
            }
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.counters.dropped(self.backend, AuditDrop::QueueFull, 1);
                if !self.full_logged.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        backend = self.backend.as_str(),
                        "audit events dropped: the backend's queue is full (counted in r8s_audit_events_dropped_total)"
                    );
                }
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.counters.dropped(self.backend, AuditDrop::Closed, 1);
            }
        }
    }
}

/// A queue's receiving end: events in order, their bytes let go as taken.
pub struct Intake {
    rx: mpsc::Receiver<Bytes>,
    queued: Arc<std::sync::atomic::AtomicUsize>,
}

impl Intake {
    fn took(&self, e: Bytes) -> Bytes {
        self.queued.fetch_sub(e.len(), Ordering::Relaxed);
        e
    }

    /// The next event, waiting for one; `None` once every sender is gone.
    pub async fn recv(&mut self) -> Option<Bytes> {
        let e = self.rx.recv().await?;
        Some(self.took(e))
    }

    /// The next event, waiting for one on this (non-async) thread.
    pub fn blocking_recv(&mut self) -> Option<Bytes> {
        let e = self.rx.blocking_recv()?;
        Some(self.took(e))
    }

    /// The next event if one is queued.
    pub fn try_recv(&mut self) -> Option<Bytes> {
        let e = self.rx.try_recv().ok()?;
        Some(self.took(e))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The counters' values, from a recorder of the test's own.
    pub(crate) fn counted(
        handle: &metrics_exporter_prometheus::PrometheusHandle,
        series: &str,
    ) -> f64 {
        handle
            .render()
            .lines()
            .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or(0.0)
    }

    #[tokio::test]
    async fn should_drop_and_count_what_a_full_queue_cannot_take() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let counters = metrics::with_local_recorder(&recorder, || Arc::new(AuditCounters::new()));
        let (q, mut rx) = Queue::new(AuditBackend::Webhook, 2, counters);
        for i in 0..5 {
            q.send(Bytes::from(format!("{i}\n")));
        }
        let dropped = r#"r8s_audit_events_dropped_total{backend="webhook",reason="queue_full"}"#;
        assert_eq!(counted(&handle, dropped), 3.0);
        // The first two were kept, in order.
        assert_eq!(rx.recv().await.unwrap(), "0\n");
        assert_eq!(rx.recv().await.unwrap(), "1\n");
        drop(rx);
        q.send(Bytes::from_static(b"late\n"));
        let closed = r#"r8s_audit_events_dropped_total{backend="webhook",reason="closed"}"#;
        assert_eq!(counted(&handle, closed), 1.0);
    }

    #[tokio::test]
    async fn should_bound_the_bytes_queued_too() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let counters = metrics::with_local_recorder(&recorder, || Arc::new(AuditCounters::new()));
        let (q, mut rx) = Queue::new(AuditBackend::Webhook, 100, counters);
        let big = Bytes::from(vec![b'x'; MAX_QUEUED_BYTES / 2 + 1]);
        q.send(big.clone());
        q.send(big.clone());
        let dropped = r#"r8s_audit_events_dropped_total{backend="webhook",reason="queue_full"}"#;
        assert_eq!(
            counted(&handle, dropped),
            1.0,
            "the second is over the bytes"
        );
        // Taken, its bytes are let go.
        assert_eq!(rx.recv().await.unwrap().len(), big.len());
        q.send(big);
        assert_eq!(counted(&handle, dropped), 1.0);
    }
}
