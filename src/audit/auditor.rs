//! The auditor: the policy and the backends every request's record writes
//! through, started from `audit.*`, and their writers, waited for at
//! shutdown.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::config::AuditConfig;
use crate::metrics::{AuditBackend, AuditCounters};

use super::{policy, rotate, sink, spool, webhook};

/// The policy and the backends: what a request's record (`super::Pending`) writes through.
pub struct Auditor {
    pub(super) policy: policy::Policy,
    /// The log file's (or standard output's).
    log: Option<spool::Spool>,
    /// The webhook's.
    webhook: Option<sink::Queue>,
    pub(super) counters: Arc<AuditCounters>,
    /// `audit.passthrough`: requests passed to the upstream are audited too.
    pub(super) passthrough: bool,
}

/// The backends' writers, to be waited for at shutdown.
pub struct Writers {
    log: Option<std::thread::JoinHandle<()>>,
    webhook: Option<tokio::task::JoinHandle<()>>,
}

/// Why auditing could not start (a message naming the key).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct AuditError(pub String);

impl Auditor {
    /// Starts the backends `cfg` names; `None` when auditing is off.
    pub async fn start(cfg: &AuditConfig) -> Result<Option<(Arc<Auditor>, Writers)>, AuditError> {
        let Some(policy_file) = &cfg.policy_file else {
            return Ok(None);
        };
        let (policy, warning) = policy::Policy::load(policy_file)
            .map_err(|e| AuditError(format!("audit.policy_file: {e}")))?;
        if let Some(w) = warning {
            tracing::warn!(file = %policy_file.display(), "Audit policy contains errors, falling back to lenient decoding: {w}");
        }
        // Started before `run` installs the recorder: install it now, or
        // the counters would record nowhere.
        crate::metrics::install();
        let counters = Arc::new(AuditCounters::new());
        let (mut log, mut webhook) = (None, None);
        let mut writers = Writers {
            log: None,
            webhook: None,
        };
        if let Some(path) = &cfg.log_path {
            let target = if spool::is_stdout(path) {
                spool::LogTarget::Stdout
            } else {
                spool::LogTarget::File(
                    path.clone(),
                    rotate::Rotation {
                        max_bytes: cfg.log_maxsize.saturating_mul(1 << 20),
                        max_backups: cfg.log_maxbackup,
                        max_age_days: cfg.log_maxage,
                        compress: cfg.log_compress,
                    },
                )
            };
            let started = spool::Spool::start(&target, cfg.log_buffer_size, counters.clone());
            let (spooled, thread) = started.map_err(|e| {
                AuditError(format!(
                    "audit.log_path: cannot open {}: {e}",
                    path.display()
                ))
            })?;
            writers.log = Some(thread);
            log = Some(spooled);
        }
        if let Some(file) = &cfg.webhook_config_file {
            let target = webhook::Target::from_kubeconfig(file).await.map_err(|e| {
                AuditError(format!(
                    "audit.webhook_config_file: {}: {e}",
                    file.display()
                ))
            })?;
            let (q, rx) = sink::Queue::new(
                AuditBackend::Webhook,
                cfg.webhook_batch_buffer_size,
                counters.clone(),
            );
            let batching = webhook::Batching {
                max_size: cfg.webhook_batch_max_size,
                max_wait: Duration::from_secs_f64(cfg.webhook_batch_max_wait_seconds),
                throttle_qps: if cfg.webhook_batch_throttle_enable {
                    cfg.webhook_batch_throttle_qps
                } else {
                    0.0
                },
                throttle_burst: cfg.webhook_batch_throttle_burst,
                initial_backoff: Duration::from_secs_f64(cfg.webhook_initial_backoff_seconds),
            };
            writers.webhook = Some(tokio::spawn(webhook::run(
                Arc::new(target),
                rx,
                batching,
                counters.clone(),
            )));
            webhook = Some(q);
        }
        tracing::info!(
            policy = %policy_file.display(),
            log = ?cfg.log_path.as_deref().map(Path::display).map(|d| d.to_string()),
            webhook = ?cfg.webhook_config_file.as_deref().map(Path::display).map(|d| d.to_string()),
            passthrough = cfg.passthrough,
            "auditing the requests r8s answers"
        );
        let auditor = Auditor {
            policy,
            log,
            webhook,
            counters,
            passthrough: cfg.passthrough,
        };
        Ok(Some((Arc::new(auditor), writers)))
    }

    /// Whether requests passed to the upstream are audited too (`audit.passthrough`).
    pub fn audits_passes(&self) -> bool {
        self.passthrough
    }

    /// Hands one event to every backend.
    pub(super) fn emit(&self, event: &[u8]) {
        if let Some(log) = &self.log {
            log.push(event);
        }
        if let Some(q) = &self.webhook {
            q.send(Bytes::copy_from_slice(event));
        }
    }
}

impl Writers {
    /// Waits, up to `grace`, for the backends to write what they hold (the
    /// auditor and every request's record gone: their queues closed).
    pub async fn finish(self, grace: Duration) {
        let log = self.log;
        let done = async move {
            if let Some(w) = self.webhook {
                let _ = w.await;
            }
            if let Some(t) = log {
                let _ = tokio::task::spawn_blocking(move || t.join()).await;
            }
        };
        if tokio::time::timeout(grace, done).await.is_err() {
            tracing::warn!(
                "the audit backends did not write out their queues within {grace:?}; the rest is lost"
            );
        }
    }
}
