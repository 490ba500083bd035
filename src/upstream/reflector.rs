//! The reflector: keeps one resource's cache equal to the upstream.
//!
//! A state machine: `List` (paginated, at one consistent resource version)
//! → `Watch` from that version (with bookmarks) → on stream end `Watch` again
//! from the last version seen; on 410 Gone, malformed data or a failure,
//! `List` again. Backoff with jitter lives outside the states.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use imbl::OrdMap;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::Upstream;
use super::discovery::Resolved;
use crate::cache::object::{ObjectError, TypeInfo};
use crate::cache::store::{Change, Objects, Store};
use crate::metrics;
use crate::shutdown::Signal;

/// The reflector's next step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// (Re)list, then watch.
    List,
    /// Watch from this resource version.
    Watch(u64),
    /// The resource cannot be cached (its resource versions are not integers).
    Uncacheable,
    /// Over its byte budget: evicted; relist after a pause.
    OverBudget,
}

/// Why a list or watch step failed, and what follows.
#[derive(Debug, thiserror::Error)]
enum StepError {
    /// 410: the version is gone; relist.
    #[error("resource version expired")]
    Expired,
    /// Undecodable data; relist (never serve a half-applied state).
    #[error("malformed upstream data: {0}")]
    Malformed(String),
    /// Resource versions are not integers; stop caching.
    #[error("{0}")]
    Uncacheable(ObjectError),
    /// Transport or status failure; back off and retry the same step.
    #[error("{0}")]
    Failed(String),
}

/// Tunables.
#[derive(Debug, Clone)]
pub struct ReflectorConfig {
    /// Items per LIST page.
    pub page_size: usize,
}

/// Keeps `store` equal to the upstream's state of `resource`.
pub struct Reflector {
    upstream: Arc<Upstream>,
    resource: Resolved,
    info: TypeInfo,
    store: Arc<Store>,
    config: ReflectorConfig,
    label: String,
    /// The newest resource version applied (where a failed watch resumes).
    last_rv: u64,
}

#[derive(Deserialize)]
struct ListMeta<'a> {
    #[serde(borrow, default, rename = "resourceVersion")]
    resource_version: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default, rename = "continue")]
    cont: Option<std::borrow::Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ListPage<'a> {
    #[serde(borrow)]
    metadata: ListMeta<'a>,
    #[serde(borrow, default)]
    items: Vec<&'a RawValue>,
}

#[derive(Deserialize)]
struct WatchEvent<'a> {
    #[serde(rename = "type")]
    kind: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    object: &'a RawValue,
}

#[derive(Deserialize)]
struct RvOnly<'a> {
    #[serde(borrow)]
    metadata: ListMeta<'a>,
}

impl Reflector {
    /// A reflector for `resource` feeding `store`.
    pub fn new(
        upstream: Arc<Upstream>,
        resource: Resolved,
        store: Arc<Store>,
        config: ReflectorConfig,
    ) -> Self {
        let info = TypeInfo {
            kind: resource.kind.clone(),
            api_version: resource.api_version(),
            resource: resource.resource.clone(),
            items_typed: false,
        };
        let label = resource.label();
        Reflector {
            upstream,
            resource,
            info,
            store,
            config,
            label,
            last_rv: 0,
        }
    }

    async fn get(&self, query: &str) -> Result<http::Response<Incoming>, StepError> {
        let uri = format!("{}?{query}", self.resource.path());
        let (parts, ()) = Request::get(uri)
            .header("accept", "application/json")
            .body(())
            .map_err(|e| StepError::Failed(e.to_string()))?
            .into_parts();
        let resp = self
            .upstream
            .send(parts, None)
            .await
            .map_err(|e| StepError::Failed(e.to_string()))?;
        match resp.status() {
            StatusCode::OK => Ok(resp),
            StatusCode::GONE => Err(StepError::Expired),
            s => Err(StepError::Failed(format!(
                "GET {}: HTTP {s}",
                self.resource.path()
            ))),
        }
    }

    /// Paginated LIST at one consistent version; returns the objects and that version.
    async fn list(&mut self) -> Result<(Objects, u64), StepError> {
        let mut objects = OrdMap::new();
        let mut cont = String::new();
        // One page buffer reused for every page: objects are copied out at
        // their exact size, so no page-sized garbage is left behind.
        let mut scratch: Vec<u8> = Vec::new();
        let mut first = true;
        loop {
            let mut q = format!("limit={}", self.config.page_size);
            if !cont.is_empty() {
                q.push_str("&continue=");
                q.extend(form_urlencoded::byte_serialize(cont.as_bytes()));
            }
            let mut resp = self.get(&q).await?.into_body();
            scratch.clear();
            while let Some(frame) = resp.frame().await {
                if let Ok(data) = frame
                    .map_err(|e| StepError::Failed(e.to_string()))?
                    .into_data()
                {
                    scratch.extend_from_slice(&data);
                }
            }
            let body = &scratch[..];
            let page: ListPage =
                serde_json::from_slice(body).map_err(|e| StepError::Malformed(e.to_string()))?;
            if first {
                self.info.items_typed = page
                    .items
                    .first()
                    .is_some_and(|i| i.get().contains("\"kind\""));
                first = false;
            }
            for item in &page.items {
                let o = self
                    .info
                    .parse(item.get().as_bytes())
                    .map_err(|e| match e {
                        ObjectError::BadResourceVersion(_) => StepError::Uncacheable(e),
                        e => StepError::Malformed(e.to_string()),
                    })?;
                objects.insert(o.key.clone(), Arc::new(o));
            }
            let rv_s = page.metadata.resource_version.as_deref().unwrap_or("");
            let rv: u64 = rv_s.parse().map_err(|_| {
                StepError::Uncacheable(ObjectError::BadResourceVersion(rv_s.to_string()))
            })?;
            match page.metadata.cont.as_deref() {
                Some(c) if !c.is_empty() => cont = c.to_string(),
                _ => return Ok((objects, rv)),
            }
        }
    }

    /// One watch stream from `rv`; returns the last version seen when it ends cleanly.
    async fn watch(&mut self, mut rv: u64, shutdown: &Signal) -> Result<u64, StepError> {
        let timeout = 240 + fastrand::u64(..120);
        let q = format!(
            "watch=1&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds={timeout}"
        );
        let mut body = self.get(&q).await?.into_body();
        let mut buf = BytesMut::new();
        loop {
            let frame = tokio::select! {
                f = body.frame() => f,
                _ = shutdown.wait() => return Ok(rv),
            };
            let Some(frame) = frame else { return Ok(rv) };
            let frame = frame.map_err(|e| StepError::Failed(e.to_string()))?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            buf.extend_from_slice(&data);
            while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
                let line = buf.split_to(nl + 1).freeze();
                let line = line.slice(..nl);
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                rv = self.apply_event(&line, rv)?;
            }
        }
    }

    fn apply_event(&mut self, line: &Bytes, rv: u64) -> Result<u64, StepError> {
        let ev: WatchEvent =
            serde_json::from_slice(line).map_err(|e| StepError::Malformed(e.to_string()))?;
        metrics::reflector_event(&self.label, &ev.kind);
        let parse = |raw: &RawValue| {
            self.info.parse(raw.get().as_bytes()).map_err(|e| match e {
                ObjectError::BadResourceVersion(_) => StepError::Uncacheable(e),
                e => StepError::Malformed(e.to_string()),
            })
        };
        let change =
            match &*ev.kind {
                "ADDED" | "MODIFIED" => {
                    let o = parse(ev.object)?;
                    Change::Put(Arc::new(o))
                }
                "DELETED" => {
                    let o = parse(ev.object)?;
                    Change::Delete(o.key.clone(), o.rv)
                }
                "BOOKMARK" => {
                    let m: RvOnly = serde_json::from_str(ev.object.get())
                        .map_err(|e| StepError::Malformed(e.to_string()))?;
                    let s = m.metadata.resource_version.as_deref().unwrap_or("");
                    Change::Progress(s.parse().map_err(|_| {
                        StepError::Malformed(format!("bookmark resourceVersion {s:?}"))
                    })?)
                }
                "ERROR" => {
                    let s: serde_json::Value =
                        serde_json::from_str(ev.object.get()).unwrap_or_default();
                    return Err(if s["code"] == 410 {
                        StepError::Expired
                    } else {
                        StepError::Failed(format!("watch ERROR event: {}", s["message"]))
                    });
                }
                other => {
                    return Err(StepError::Malformed(format!(
                        "unknown watch event type {other:?}"
                    )));
                }
            };
        let v = self.store.apply(vec![change]);
        metrics::cache_state(&self.label, &v, true);
        self.last_rv = v.rv.max(rv);
        if self.store.exceeds_budget() {
            return Err(StepError::Failed(
                "the cache grew over its byte budget".into(),
            ));
        }
        Ok(self.last_rv)
    }

    /// Runs until shutdown.
    pub async fn run(mut self, shutdown: Signal) {
        let mut state = State::List;
        let mut backoff = Duration::from_millis(200);
        loop {
            if shutdown.fired() {
                return;
            }
            if !matches!(state, State::OverBudget | State::Uncacheable)
                && self.store.exceeds_budget()
            {
                tracing::warn!(
                    resource = %self.label,
                    bytes = self.store.current().bytes,
                    "cache over its byte budget (cache.max_bytes_*); evicted, its requests pass through; retrying in 60 s"
                );
                self.store.evict_over_budget();
                metrics::cache_synced(&self.label, false);
                metrics::over_budget(&self.label, true);
                state = State::OverBudget;
            }
            let result = match state {
                State::Uncacheable => return,
                State::OverBudget => {
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(60)) => {}
                        _ = shutdown.wait() => return,
                    }
                    Ok(State::List)
                }
                State::List => match self.list().await {
                    Ok((objects, rv)) => {
                        let v = self.store.apply(vec![Change::Replace(objects, rv)]);
                        if !self.store.exceeds_budget() {
                            self.store.clear_over_budget();
                            metrics::over_budget(&self.label, false);
                        }
                        metrics::cache_state(&self.label, &v, true);
                        tracing::info!(resource = %self.label, objects = v.objects.len(), rv, "cache synced");
                        self.last_rv = rv;
                        Ok(State::Watch(rv))
                    }
                    Err(e) => Err(e),
                },
                State::Watch(rv) => match self.watch(rv, &shutdown).await {
                    Ok(last) => {
                        metrics::watch_restart(&self.label);
                        Ok(State::Watch(last))
                    }
                    Err(e) => Err(e),
                },
            };
            state = match result {
                Ok(next) => {
                    backoff = Duration::from_millis(200);
                    next
                }
                Err(StepError::Expired) => {
                    metrics::relist(&self.label, "expired");
                    State::List
                }
                Err(StepError::Malformed(m)) => {
                    tracing::warn!(resource = %self.label, error = %m, "malformed upstream data; relisting");
                    metrics::relist(&self.label, "malformed");
                    State::List
                }
                Err(StepError::Uncacheable(e)) => {
                    tracing::warn!(resource = %self.label, error = %e, "not cacheable; its requests pass through");
                    self.store.set_uncacheable();
                    metrics::cache_synced(&self.label, false);
                    State::Uncacheable
                }
                Err(StepError::Failed(m)) => {
                    tracing::warn!(resource = %self.label, error = %m, ?backoff, "list/watch failed; retrying");
                    let jitter = backoff.mul_f64(fastrand::f64() * 0.5);
                    tokio::select! {
                        _ = tokio::time::sleep(backoff + jitter) => {}
                        _ = shutdown.wait() => return,
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                    match state {
                        State::Watch(_) => {
                            metrics::watch_restart(&self.label);
                            State::Watch(self.last_rv)
                        }
                        other => other,
                    }
                }
            };
        }
    }
}
