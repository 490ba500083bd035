//! Process shutdown: one trigger, many cheap listeners.
//!
//! Listeners stop accepting when it fires; long-lived streams (watches, followed
//! logs) end cleanly so that clients reconnect elsewhere, as kube-apiserver does.

use std::time::Duration;
use tokio::sync::watch;

/// Fires the shutdown.
#[derive(Debug)]
pub struct Trigger(watch::Sender<bool>);

/// Observes the shutdown; clone freely.
#[derive(Debug, Clone)]
pub struct Signal(watch::Receiver<bool>);

/// A connected trigger and signal.
pub fn channel() -> (Trigger, Signal) {
    let (tx, rx) = watch::channel(false);
    (Trigger(tx), Signal(rx))
}

impl Trigger {
    /// Starts the shutdown; every [`Signal`] resolves.
    pub fn fire(&self) {
        let _ = self.0.send(true);
    }
}

impl Signal {
    /// A signal that never fires (for tests and one-off servers).
    pub fn never() -> Self {
        let (tx, rx) = watch::channel(false);
        std::mem::forget(tx);
        Signal(rx)
    }

    /// Resolves once the shutdown has started.
    pub async fn wait(&self) {
        let mut rx = self.0.clone();
        let _ = rx.wait_for(|v| *v).await;
    }

    /// Whether the shutdown has started.
    pub fn fired(&self) -> bool {
        *self.0.borrow()
    }
}

/// Resolves on SIGTERM or SIGINT (Ctrl-C).
pub async fn os_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler installs");
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM received, shutting down"),
            _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received, shutting down"),
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// How long in-flight requests get to finish once shutdown starts, by default.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(30);

impl Signal {
    /// [`Signal::wait`], owning the signal (for `'static` futures).
    pub async fn wait_owned(self) {
        self.wait().await
    }
}

impl Signal {
    /// A signal that fires once this one or `other` does (a cache's own
    /// stop, or r8s's shutdown). Needs a tokio runtime: a task waits on both.
    pub fn or(&self, other: &Signal) -> Signal {
        if self.fired() || other.fired() {
            let (trigger, signal) = channel();
            trigger.fire();
            return signal;
        }
        let (trigger, signal) = channel();
        let (a, b) = (self.clone(), other.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = a.wait() => {}
                _ = b.wait() => {}
                _ = trigger.0.closed() => return,
            }
            trigger.fire();
        });
        signal
    }
}
