//! systemd's service notifications (`Type=notify`): `READY=1` once r8s is
//! ready as `/readyz` defines it (the upstream answers and every cache has
//! synced or settled on passing through), `STOPPING=1` when it starts to
//! drain, and `WATCHDOG=1` at half the unit's `WatchdogSec` for as long as
//! the runtime runs. Outside systemd (no `NOTIFY_SOCKET`) it does nothing.

use std::sync::Arc;
use std::time::Duration;

use sd_notify::NotifyState;

use crate::admin::Health;
use crate::shutdown::Signal;

/// How often readiness is looked at until it is reached.
const POLL: Duration = Duration::from_millis(100);

fn send(states: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(false, states) {
        tracing::warn!(error = %e, "could not notify systemd (NOTIFY_SOCKET)");
    }
}

/// Tells systemd how r8s is doing until shutdown, then that it is stopping.
pub async fn run(health: Arc<Health>, shutdown: Signal) {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    let mut usec = 0;
    let watchdog = sd_notify::watchdog_enabled(false, &mut usec)
        .then(|| Duration::from_micros(usec / 2).max(Duration::from_millis(10)));
    let mut pet = tokio::time::interval(watchdog.unwrap_or(Duration::from_secs(3600)));
    let mut poll = tokio::time::interval(POLL);
    let mut ready = false;
    send(&[NotifyState::Status("starting: caches syncing")]);
    loop {
        tokio::select! {
            _ = poll.tick(), if !ready => {
                if health.readiness().is_ok() {
                    ready = true;
                    send(&[NotifyState::Ready, NotifyState::Status("serving")]);
                    tracing::info!("told systemd: ready");
                }
            }
            _ = pet.tick(), if watchdog.is_some() => send(&[NotifyState::Watchdog]),
            _ = shutdown.wait() => {
                send(&[NotifyState::Stopping, NotifyState::Status("draining")]);
                return;
            }
        }
    }
}
