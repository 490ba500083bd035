//! The pace of compactions (`persist.max_write_bytes_per_second`): a full
//! snapshot is written at a bounded rate and flushed to the disk as it goes,
//! so that it never lands on the disk in one burst of dirty pages. On a
//! control-plane node that disk is etcd's, whose fsync latency is the
//! cluster's write latency.

use std::fs::File;
use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Bytes between two waits for the pace.
const STEP: u64 = 256 << 10;
/// Bytes written between two flushes of the file's data to the disk.
const FLUSH_EVERY: u64 = 4 << 20;

/// How fast a compaction may write, shared with whoever may hurry or stop
/// it (a graceful shutdown).
#[derive(Debug)]
pub struct Pace {
    bytes_per_second: u64,
    unpaced: AtomicBool,
    stopped: AtomicBool,
}

impl Pace {
    /// A pace of `bytes_per_second`.
    pub fn new(bytes_per_second: u64) -> Arc<Self> {
        Arc::new(Pace {
            bytes_per_second: bytes_per_second.max(1),
            unpaced: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
        })
    }

    /// From now on, writes go as fast as the disk takes them (a shutdown
    /// finishing a snapshot it needs).
    pub fn hurry(&self) {
        self.unpaced.store(true, Ordering::Relaxed);
    }

    /// Makes the compaction in progress fail at its next step (a shutdown
    /// that does not need it: the log it would replace stays).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
    }

    /// Whether [`Pace::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }
}

/// The error of a write stopped by [`Pace::stop`].
#[derive(Debug, thiserror::Error)]
#[error("stopped by the shutdown")]
pub struct Stopped;

/// Whether `e` is a write stopped by [`Pace::stop`].
pub fn stopped(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|e| e.is::<Stopped>())
}

/// A file written at a [`Pace`], its data flushed every few MiB.
pub struct Paced {
    file: File,
    pace: Arc<Pace>,
    started: Instant,
    written: u64,
    since_wait: u64,
    since_flush: u64,
}

impl Paced {
    /// `file`, written at `pace` from now.
    pub fn new(file: File, pace: Arc<Pace>) -> Self {
        Paced {
            file,
            pace,
            started: Instant::now(),
            written: 0,
            since_wait: 0,
            since_flush: 0,
        }
    }

    /// The file, its data not yet synced.
    pub fn into_inner(self) -> File {
        self.file
    }

    fn step(&mut self) -> io::Result<()> {
        if self.pace.is_stopped() {
            return Err(io::Error::other(Stopped));
        }
        if self.since_flush >= FLUSH_EVERY {
            self.file.sync_data()?;
            self.since_flush = 0;
        }
        if !self.pace.unpaced.load(Ordering::Relaxed) {
            let due =
                Duration::from_secs_f64(self.written as f64 / self.pace.bytes_per_second as f64);
            if let Some(wait) = due.checked_sub(self.started.elapsed()) {
                std::thread::sleep(wait);
            }
        }
        self.since_wait = 0;
        Ok(())
    }
}

impl Write for Paced {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.since_wait >= STEP {
            self.step()?;
        }
        let n = self.file.write(buf)?;
        self.written += n as u64;
        self.since_wait += n as u64;
        self.since_flush += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn should_write_no_faster_than_its_pace() {
        let dir = std::env::temp_dir().join(format!("r8s-pace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("paced");
        let pace = Pace::new(8 << 20);
        let mut w = Paced::new(File::create(&path).unwrap(), pace.clone());
        let started = Instant::now();
        let block = vec![7u8; 64 << 10];
        for _ in 0..64 {
            w.write_all(&block).unwrap();
        }
        // 4 MiB at 8 MiB/s: the last wait is due at 3.75 MiB written.
        assert!(
            started.elapsed() >= Duration::from_millis(450),
            "{:?}",
            started.elapsed()
        );
        pace.stop();
        let e = (0..8).try_for_each(|_| w.write_all(&block)).unwrap_err();
        assert!(stopped(&e), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
