//! The log backend's intake: events appended to one buffer, which the
//! writer thread swaps out and writes (a burst in one `write`), to a file
//! rotated by size or to standard output.
//!
//! A request appends its event and goes on; only the first event of a burst
//! wakes the writer, which lets the burst gather for [`LINGER`] first. Where
//! each event was a queued allocation, freed on the writer's thread, and a
//! wake-up, those cost a cached GET more than the rest of its auditing
//! (BENCHMARKS.md, "Issue 54"). The spool holds at most `log_buffer_size`
//! events and [`MAX_QUEUED_BYTES`]; past either, events are dropped and
//! counted, never waited for. A write that fails (a full disk) drops its
//! events, counted, and is logged once until one succeeds.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::metrics::{AuditBackend, AuditCounters, AuditDrop};
use crate::sync::MutexExt;

use super::rotate::{Rotating, Rotation};
use super::sink::MAX_QUEUED_BYTES;

/// How long the writer lets a burst gather after its first event.
const LINGER: Duration = Duration::from_millis(5);

/// Events appended and not yet written.
#[derive(Default)]
struct Held {
    bytes: Vec<u8>,
    events: u64,
    /// No more events come (shutdown): write what is held and end.
    closed: bool,
}

/// What the requests and the writer share.
struct Shared {
    held: Mutex<Held>,
    /// Signalled at a burst's first event, and at close.
    woken: Condvar,
}

/// The requests' end of the spool (the writer's is its thread).
pub struct Spool {
    shared: Arc<Shared>,
    max_events: u64,
    counters: Arc<AuditCounters>,
    /// Whether the current run of full-spool drops was logged.
    full_logged: AtomicBool,
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

/// The writer's end of a spool, before its thread starts.
pub struct Drain {
    shared: Arc<Shared>,
    counters: Arc<AuditCounters>,
}

impl Spool {
    /// Opens where the log goes and starts its writer thread, which ends
    /// once the spool is dropped and what it held is written. Holds at most
    /// `max_events` events. Fails if the file cannot be opened.
    pub fn start(
        target: &LogTarget,
        max_events: usize,
        counters: Arc<AuditCounters>,
    ) -> std::io::Result<(Spool, std::thread::JoinHandle<()>)> {
        let (spool, drain) = Spool::new(max_events, counters);
        Ok((spool, drain.spawn(target)?))
    }

    /// A spool of at most `max_events` events, and its writer's end.
    pub fn new(max_events: usize, counters: Arc<AuditCounters>) -> (Spool, Drain) {
        let shared = Arc::new(Shared {
            held: Mutex::new(Held::default()),
            woken: Condvar::new(),
        });
        let drain = Drain {
            shared: shared.clone(),
            counters: counters.clone(),
        };
        let spool = Spool {
            shared,
            max_events: max_events.max(1) as u64,
            counters,
            full_logged: AtomicBool::new(false),
        };
        (spool, drain)
    }

    /// Appends one event (a JSON line), or counts it dropped.
    pub fn push(&self, event: &[u8]) {
        let mut held = self.shared.held.locked();
        let full =
            held.events >= self.max_events || held.bytes.len() + event.len() > MAX_QUEUED_BYTES;
        if full {
            drop(held);
            self.counters
                .dropped(AuditBackend::Log, AuditDrop::QueueFull, 1);
            if !self.full_logged.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "audit events dropped: the log's spool is full (audit.log_buffer_size; counted in r8s_audit_events_dropped_total)"
                );
            }
            return;
        }
        let first = held.events == 0;
        held.bytes.extend_from_slice(event);
        held.events += 1;
        drop(held);
        if first {
            self.shared.woken.notify_one();
        }
        if self.full_logged.load(Ordering::Relaxed) {
            self.full_logged.store(false, Ordering::Relaxed);
        }
    }
}

impl Drop for Spool {
    /// No more events: the writer writes what is held, and ends.
    fn drop(&mut self) {
        self.shared.held.locked().closed = true;
        self.shared.woken.notify_one();
    }
}

impl Drain {
    /// Opens where the log goes and starts the thread that writes there.
    pub fn spawn(self, target: &LogTarget) -> std::io::Result<std::thread::JoinHandle<()>> {
        let out: Writer = match target {
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
            .spawn(move || write_out(&self.shared, out, &shown, &self.counters))
    }
}

/// The writer thread: waits for a burst, lets it gather, swaps it out,
/// writes it; until the spool closes.
fn write_out(shared: &Shared, mut out: Writer, shown: &str, counters: &AuditCounters) {
    let mut spare = Vec::with_capacity(64 << 10);
    let mut failing = false;
    loop {
        let mut held = shared.held.locked();
        while held.events == 0 && !held.closed {
            held = shared.woken.wait(held).unwrap_or_else(|p| p.into_inner());
        }
        if held.events == 0 {
            return;
        }
        if !held.closed {
            drop(held);
            std::thread::sleep(LINGER);
            held = shared.held.locked();
        }
        spare.clear();
        std::mem::swap(&mut held.bytes, &mut spare);
        let n = std::mem::take(&mut held.events);
        drop(held);
        match out(&spare) {
            Ok(()) => {
                counters.written(AuditBackend::Log, n);
                if std::mem::take(&mut failing) {
                    tracing::info!(path = %shown, "the audit log is written again");
                }
            }
            Err(e) => {
                counters.dropped(AuditBackend::Log, AuditDrop::WriteError, n);
                if !std::mem::replace(&mut failing, true) {
                    tracing::error!(path = %shown, error = %e, "cannot write the audit log; its events are dropped (r8s_audit_events_dropped_total) until it can, and r8s goes on serving");
                }
            }
        }
    }
}

/// Whether `path` names standard output.
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::sink::tests::counted;

    fn recorder() -> (
        metrics_exporter_prometheus::PrometheusHandle,
        Arc<AuditCounters>,
    ) {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let counters = metrics::with_local_recorder(&recorder, || Arc::new(AuditCounters::new()));
        (handle, counters)
    }

    #[test]
    fn should_write_what_the_file_takes_and_count_the_rest() {
        let (handle, counters) = recorder();
        let dir = std::env::temp_dir().join(format!("r8s-spool-{}", fastrand::u64(..)));
        let path = dir.join("audit.log");
        let target = LogTarget::File(path.clone(), Rotation::default());
        let (spool, writer) = Spool::start(&target, 100, counters).unwrap();
        for i in 0..10 {
            spool.push(format!("{{\"n\":{i}}}\n").as_bytes());
        }
        drop(spool);
        writer.join().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let ns: Vec<String> = text.lines().map(str::to_string).collect();
        assert_eq!(ns.len(), 10);
        assert_eq!(ns[9], "{\"n\":9}", "in order");
        let written = r#"r8s_audit_events_total{backend="log"}"#;
        assert_eq!(counted(&handle, written), 10.0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn should_drop_and_count_what_a_full_spool_cannot_hold() {
        let (handle, counters) = recorder();
        let dir = std::env::temp_dir().join(format!("r8s-spool-{}", fastrand::u64(..)));
        let target = LogTarget::File(dir.join("audit.log"), Rotation::default());
        let dropped = r#"r8s_audit_events_dropped_total{backend="log",reason="queue_full"}"#;
        let written = r#"r8s_audit_events_total{backend="log"}"#;
        // Its writer not started yet: nothing leaves the spool.
        let (spool, drain) = Spool::new(3, counters);
        for i in 0..5 {
            spool.push(format!("{i}\n").as_bytes());
        }
        assert_eq!(counted(&handle, dropped), 2.0, "3 events held at most");
        let writer = drain.spawn(&target).unwrap();
        drop(spool);
        writer.join().unwrap();
        assert_eq!(counted(&handle, written), 3.0);
        // Over the bytes: dropped whatever the count.
        let (handle, counters) = recorder();
        let (spool, drain) = Spool::new(100, counters);
        spool.push(&vec![b'x'; MAX_QUEUED_BYTES]);
        spool.push(b"x\n");
        assert_eq!(counted(&handle, dropped), 1.0);
        let writer = drain.spawn(&target).unwrap();
        drop(spool);
        writer.join().unwrap();
        assert_eq!(counted(&handle, written), 1.0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
