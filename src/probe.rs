//! The upstream probe behind readiness and `r8s_upstream_up`: `/version`
//! every few seconds (`upstream.probe_interval_seconds`), every second while
//! the upstream does not answer, so that its return wakes every cache at once.

use std::sync::Arc;
use std::time::Duration;

use crate::admin::Health;
use crate::config::Config;
use crate::shutdown::Signal;
use crate::upstream::{self, Upstream};

/// How often the probe asks for `/version`, and how long it waits
/// (`upstream.probe_interval_seconds`, `upstream.probe_timeout_seconds`).
#[derive(Clone, Copy, Debug)]
pub struct Probe {
    /// Between probes while the upstream answers and every cache has synced.
    pub interval: Duration,
    /// How long one probe waits before the upstream counts as not answering.
    pub timeout: Duration,
    /// `cache.serve_stale`: ready once every cache serves, from its snapshot
    /// if need be, though the upstream has not answered (a node-local r8s
    /// rebooted during a control-plane outage).
    pub ready_from_snapshots: bool,
}

impl From<&Config> for Probe {
    fn from(config: &Config) -> Self {
        Probe {
            interval: Duration::from_secs_f64(config.upstream.probe_interval_seconds),
            timeout: Duration::from_secs_f64(config.upstream.probe_timeout_seconds),
            ready_from_snapshots: config.cache.serve_stale,
        }
    }
}

/// Keeps readiness and `r8s_upstream_up` current: `/version` every few
/// seconds; ready once the upstream has answered and every cache has synced
/// (or, with `cache.serve_stale`, once every cache serves, from its snapshot
/// while the upstream does not answer). After that an upstream that stops answering is reported (log, metric,
/// `/readyz?verbose`), not made a reason to be unready; draining is.
pub async fn run(upstream: Arc<Upstream>, health: Arc<Health>, probe: Probe, shutdown: Signal) {
    let mut down_logged = false;
    loop {
        // A pooled connection black-holed with the upstream would hold the
        // probe for good: it has as long as a connection gets.
        let answered = match tokio::time::timeout(probe.timeout, upstream.probe()).await {
            Ok(a) => a,
            Err(_) => Err(upstream::RequestError::Failed {
                server: upstream.server_names().join(","),
                reason: format!("GET /version not answered within {:?}", probe.timeout),
            }),
        };
        match &answered {
            Ok(()) => {
                // After an outage: fresh connections (the old ones may be
                // black-holed), then every cache waiting to retry is woken,
                // and the watches silent since before it are restarted.
                if !upstream.liveness().seen().answering {
                    upstream.renew_connections();
                }
                let outage = upstream.liveness().answered();
                if down_logged {
                    tracing::info!(outage = ?outage, "the upstream answers /version again; every cache retries now");
                    down_logged = false;
                }
                // An evicted (over budget) cache passes through: it does
                // not hold readiness back.
                let settled = health.settled();
                if !health.is_synced() && settled {
                    tracing::info!("upstream answered /version and every cache has synced; ready");
                    health.set_synced();
                } else if !settled {
                    health.set_syncing("caches syncing (their requests pass through)".into());
                }
            }
            Err(e) => {
                upstream.liveness().failed();
                health.set_syncing(format!("the upstream does not answer /version: {e}"));
                if probe.ready_from_snapshots && !health.is_synced() && health.serving_all() {
                    tracing::warn!(error = %e, "every cache serves from its snapshot (persist.dir) and the upstream does not answer /version: ready, serving stale (cache.serve_stale)");
                    health.set_synced();
                }
                if !down_logged {
                    tracing::warn!(
                        error = %e,
                        ready = health.is_synced(),
                        "the upstream does not answer /version; cached reads and watches go on from the caches, other requests get 503"
                    );
                    down_logged = true;
                }
            }
        }
        health.set_upstream(answered.map_err(|e| e.to_string()));
        // Every second while the upstream is down, to see it back at once.
        let wait = if !upstream.liveness().seen().answering {
            probe.interval.min(Duration::from_secs(1))
        } else if health.is_synced() {
            probe.interval
        } else {
            probe.interval.min(Duration::from_millis(200))
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.wait() => {
                health.set_draining();
                return;
            }
        }
    }
}
