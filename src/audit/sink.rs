//! Where events go: each backend behind a bounded queue of written events.
//!
//! The policy for a full queue is to drop: a request never waits for the
//! audit log. Every event is either written (`r8s_audit_events_total`) or
//! counted as dropped (`r8s_audit_events_dropped_total`, by reason), and
//! the first drop of a run of them is logged. The log backend writes from a
//! thread of its own (a slow or full disk stalls no request); the webhook's
//! task batches as the apiserver's does ([`super::webhook`]).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::metrics::{AuditBackend, AuditCounters, AuditDrop};

use super::rotate::{Rotating, Rotation};

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

/// Where the log backend writes.
#[derive(Debug, Clone)]
pub enum LogTarget {
    /// Standard output (`-`).
    Stdout,
    /// A file, rotated.
    File(PathBuf, Rotation),
}

/// Writes a batch of events where the log goes.
type Writer = Box<dyn FnMut(&[u8]) -> std::io::Result<()> + Send>;

/// Events written at most per write call: one syscall for a burst.
const BATCH: usize = 4096;

/// How long the writer lets a burst gather after its first event: one
/// wake-up and one write for all of them, where waking for each event cost
/// a cached GET more than the rest of its auditing (BENCHMARKS.md, "What
/// auditing costs").
const LINGER: std::time::Duration = std::time::Duration::from_millis(5);

/// Starts the log backend's writer thread; it ends once every sender is
/// gone and the queue is written out. Fails if the file cannot be opened.
pub fn spawn_log(
    target: &LogTarget,
    mut rx: Intake,
    counters: Arc<AuditCounters>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let mut out: Writer = match target {
        LogTarget::Stdout => Box::new(|b: &[u8]| {
            let mut s = std::io::stdout().lock();
            s.write_all(b)?;
            s.flush()
        }),
        LogTarget::File(path, rotation) => {
            let mut f = Rotating::open(path, *rotation)?;
            Box::new(move |b: &[u8]| f.write(b))
        }
    };
    let shown = match target {
        LogTarget::Stdout => "-".to_string(),
        LogTarget::File(p, _) => p.display().to_string(),
    };
    std::thread::Builder::new()
        .name("r8s-audit-log".into())
        .spawn(move || {
            let mut buf = Vec::with_capacity(64 << 10);
            let mut failing = false;
            while let Some(first) = rx.blocking_recv() {
                std::thread::sleep(LINGER);
                buf.clear();
                buf.extend_from_slice(&first);
                let mut n = 1;
                while n < BATCH {
                    match rx.try_recv() {
                        Some(e) => {
                            buf.extend_from_slice(&e);
                            n += 1;
                        }
                        None => break,
                    }
                }
                match out(&buf) {
                    Ok(()) => {
                        counters.written(AuditBackend::Log, n as u64);
                        if std::mem::take(&mut failing) {
                            tracing::info!(path = %shown, "the audit log is written again");
                        }
                    }
                    Err(e) => {
                        counters.dropped(AuditBackend::Log, AuditDrop::WriteError, n as u64);
                        if !std::mem::replace(&mut failing, true) {
                            tracing::error!(path = %shown, error = %e, "cannot write the audit log; its events are dropped (r8s_audit_events_dropped_total) until it can, and r8s goes on serving");
                        }
                    }
                }
            }
        })
}

/// Whether `path` names standard output.
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
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
        let (q, mut rx) = Queue::new(AuditBackend::Log, 2, counters);
        for i in 0..5 {
            q.send(Bytes::from(format!("{i}\n")));
        }
        let dropped = r#"r8s_audit_events_dropped_total{backend="log",reason="queue_full"}"#;
        assert_eq!(counted(&handle, dropped), 3.0);
        // The first two were kept, in order.
        assert_eq!(rx.recv().await.unwrap(), "0\n");
        assert_eq!(rx.recv().await.unwrap(), "1\n");
        drop(rx);
        q.send(Bytes::from_static(b"late\n"));
        let closed = r#"r8s_audit_events_dropped_total{backend="log",reason="closed"}"#;
        assert_eq!(counted(&handle, closed), 1.0);
    }

    #[tokio::test]
    async fn should_bound_the_bytes_queued_too() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let counters = metrics::with_local_recorder(&recorder, || Arc::new(AuditCounters::new()));
        let (q, mut rx) = Queue::new(AuditBackend::Log, 100, counters);
        let big = Bytes::from(vec![b'x'; MAX_QUEUED_BYTES / 2 + 1]);
        q.send(big.clone());
        q.send(big.clone());
        let dropped = r#"r8s_audit_events_dropped_total{backend="log",reason="queue_full"}"#;
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

    #[test]
    fn should_write_what_the_file_takes_and_count_the_rest() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let counters = metrics::with_local_recorder(&recorder, || Arc::new(AuditCounters::new()));
        let dir = std::env::temp_dir().join(format!("r8s-sink-{}", fastrand::u64(..)));
        let path = dir.join("audit.log");
        let (q, rx) = Queue::new(AuditBackend::Log, 100, counters.clone());
        let target = LogTarget::File(path.clone(), Rotation::default());
        let writer = spawn_log(&target, rx, counters).unwrap();
        for i in 0..10 {
            q.send(Bytes::from(format!("{{\"n\":{i}}}\n")));
        }
        drop(q);
        writer.join().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 10);
        let written = r#"r8s_audit_events_total{backend="log"}"#;
        assert_eq!(counted(&handle, written), 10.0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
