//! The webhook backend: events POSTed as an `audit.k8s.io/v1` `EventList`
//! to the server of a kubeconfig file (`audit.webhook_config_file`, the
//! format of `--audit-webhook-config-file`), batched and throttled as the
//! apiserver's batch mode does, each batch retried with the apiserver's
//! backoff (`initial_backoff`, ×1.5, 20 % jitter, 5 tries) and then dropped
//! and counted.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use crate::metrics::{AuditBackend, AuditCounters, AuditDrop};

/// How events are batched and sent (`audit.webhook_*`).
#[derive(Debug, Clone, Copy)]
pub struct Batching {
    /// Events per batch at most.
    pub max_size: usize,
    /// How long a batch waits to fill before it is sent.
    pub max_wait: Duration,
    /// Batches per second, on average (0: unthrottled).
    pub throttle_qps: f64,
    /// Batches sent at once when the rate has not been used.
    pub throttle_burst: u32,
    /// The wait before a failed batch's first retry.
    pub initial_backoff: Duration,
}

/// Tries per batch, as the apiserver's webhook backoff makes them.
const TRIES: u32 = 5;

/// The webhook's server.
pub struct Target {
    client: kube::Client,
    /// The server URL's path (`/` if none): where batches are POSTed.
    path: String,
}

impl Target {
    /// Reads the kubeconfig at `file` (its current context's cluster and
    /// user: CA, client certificate, token); an error says what is wrong.
    pub async fn from_kubeconfig(file: &Path) -> Result<Target, String> {
        let kc = kube::config::Kubeconfig::read_from(file).map_err(|e| e.to_string())?;
        let mut cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let url = cfg.cluster_url.clone();
        let path = url.path().to_string();
        let base = format!(
            "{}://{}/",
            url.scheme_str().unwrap_or("https"),
            url.authority().map(|a| a.as_str()).unwrap_or("")
        );
        cfg.cluster_url = base.parse().map_err(|e| format!("server {url}: {e}"))?;
        // The apiserver's backoff below is the only retry.
        cfg.default_retry = false;
        let client = kube::Client::try_from(cfg).map_err(|e| e.to_string())?;
        Ok(Target {
            client,
            path: if path.is_empty() { "/".into() } else { path },
        })
    }

    /// POSTs one batch; `Err(retry)` says whether trying again may help.
    async fn post(&self, batch: &[Bytes]) -> Result<(), (bool, String)> {
        let mut body = Vec::with_capacity(batch.iter().map(Bytes::len).sum::<usize>() + 96);
        body.extend_from_slice(
            br#"{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":["#,
        );
        for (i, e) in batch.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(e.strip_suffix(b"\n").unwrap_or(e));
        }
        body.extend_from_slice(b"]}");
        let req = http::Request::post(self.path.as_str())
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(kube::client::Body::from(body))
            .map_err(|e| (false, e.to_string()))?;
        match self.client.send(req).await {
            Ok(resp) if resp.status().is_success() => Ok(()),
            Ok(resp) => {
                let s = resp.status();
                let retry = s.is_server_error() || s == http::StatusCode::TOO_MANY_REQUESTS;
                Err((retry, format!("the webhook answered {s}")))
            }
            Err(e) => Err((true, e.to_string())),
        }
    }
}

/// A token bucket: `qps` batches a second, `burst` at once.
struct Throttle {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl Throttle {
    async fn wait(&mut self) {
        if self.qps <= 0.0 {
            return;
        }
        let now = Instant::now();
        self.tokens =
            (self.tokens + now.duration_since(self.last).as_secs_f64() * self.qps).min(self.burst);
        self.last = now;
        if self.tokens < 1.0 {
            let wait = Duration::from_secs_f64((1.0 - self.tokens) / self.qps);
            tokio::time::sleep(wait).await;
            self.tokens = 1.0;
            self.last = Instant::now();
        }
        self.tokens -= 1.0;
    }
}

/// Sends the queue's events in batches until every sender is gone and the
/// queue is sent out (or counted dropped).
pub async fn run(
    target: Arc<Target>,
    mut rx: super::sink::Intake,
    batching: Batching,
    counters: Arc<AuditCounters>,
) {
    let mut throttle = Throttle {
        qps: batching.throttle_qps,
        burst: f64::from(batching.throttle_burst.max(1)),
        tokens: f64::from(batching.throttle_burst.max(1)),
        last: Instant::now(),
    };
    let max = batching.max_size.max(1);
    let mut failing = false;
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        let deadline = Instant::now() + batching.max_wait;
        while batch.len() < max {
            tokio::select! {
                e = rx.recv() => match e {
                    Some(e) => batch.push(e),
                    None => break,
                },
                _ = tokio::time::sleep_until(deadline) => break,
            }
        }
        throttle.wait().await;
        let n = batch.len() as u64;
        match send(&target, &batch, batching.initial_backoff).await {
            Ok(()) => {
                counters.written(AuditBackend::Webhook, n);
                if std::mem::take(&mut failing) {
                    tracing::info!("the audit webhook takes events again");
                }
            }
            Err(e) => {
                counters.dropped(AuditBackend::Webhook, AuditDrop::SendFailed, n);
                if !std::mem::replace(&mut failing, true) {
                    tracing::error!(error = %e, events = n, "the audit webhook did not take a batch through every retry; its events are dropped (r8s_audit_events_dropped_total)");
                }
            }
        }
    }
}

/// One batch, tried [`TRIES`] times with the apiserver's backoff.
async fn send(target: &Target, batch: &[Bytes], initial: Duration) -> Result<(), String> {
    let mut wait = initial;
    let mut last = String::new();
    for attempt in 1..=TRIES {
        match target.post(batch).await {
            Ok(()) => return Ok(()),
            Err((retry, e)) => {
                last = e;
                if !retry || attempt == TRIES {
                    break;
                }
            }
        }
        let jitter = 1.0 + 0.2 * fastrand::f64();
        tokio::time::sleep(wait.mul_f64(jitter)).await;
        wait = wait.mul_f64(1.5);
    }
    Err(last)
}

#[cfg(test)]
mod tests;
