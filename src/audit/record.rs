//! One request's audit record: its events made at its stages, the last
//! when its response's body is done (or dropped: a client gone, a panic).

use std::borrow::Cow;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Response, Uri};
use http_body::{Body as HttpBody, Frame, SizeHint};
use http_body_util::BodyExt;

use crate::api::UserInfo;
use crate::api::request::ApiRequest;
use crate::api::status::Sent;
use crate::body::{Body, BoxError};
use crate::metrics::AuditLevel;

use super::auditor::Auditor;
use super::event::{self, Frozen, Meta, ObjectRef, ResponseStatus, Stamp};
use super::policy::{Attributes, Decision, Level, Stage, Target};

/// What a request is, as its events record it.
pub struct Facts<'a> {
    /// Its audit ID.
    pub id: &'a HeaderValue,
    /// Its method, path and query, headers.
    pub method: &'a Method,
    /// Its URI.
    pub uri: &'a Uri,
    /// Its headers.
    pub headers: &'a HeaderMap,
    /// Its peer's address.
    pub peer: IpAddr,
    /// When it arrived.
    pub received: SystemTime,
    /// Who sent it (`None`: not authenticated, or `auth.mode = "none"`).
    pub user: Option<Arc<UserInfo>>,
    /// Who it acts as, where that differs.
    pub impersonated: Option<Arc<UserInfo>>,
    /// The resource request, decoded (`None`: any other path).
    pub request: Option<&'a ApiRequest>,
}

/// What became of the request.
#[derive(Debug, Clone, Copy)]
pub enum Outcome {
    /// Answered from the cache.
    Hit,
    /// Refused by r8s's authorization.
    Refused,
    /// Passed to the upstream, for this reason (`""`: not a cached resource).
    Pass(&'static str),
}

/// r8s's authorization of the request, for its annotations.
#[derive(Debug, Clone)]
pub enum Authz {
    /// Allowed, with the authorizer's reason.
    Allow(Arc<str>),
    /// Forbidden, with the authorizer's reason.
    Forbid(Arc<str>),
    /// The review failed.
    Error,
}

/// A request being audited: what its events share, and what the policy said.
pub struct Pending {
    auditor: Arc<Auditor>,
    /// The fields its events share, written.
    frozen: Frozen,
    /// `requestReceivedTimestamp`, the time of its `RequestReceived` event.
    received: SystemTime,
    decision: Decision,
    long_running: bool,
    done: bool,
}

/// The verb as the apiserver's `RequestInfo` names it (borrowed but for an
/// unusual method).
fn verb(method: &Method, request: Option<&ApiRequest>) -> Cow<'static, str> {
    match request.map(|r| r.scope.verb) {
        // RequestInfo's verb, derived once with the request's scope.
        Some(v) if !v.is_empty() => Cow::Borrowed(v),
        Some(_) => Cow::Owned(method.as_str().to_ascii_lowercase()),
        None => match *method {
            Method::GET => Cow::Borrowed("get"),
            ref m => Cow::Owned(m.as_str().to_ascii_lowercase()),
        },
    }
}

impl Auditor {
    /// Starts a request's record, or `None` where the policy gives it level
    /// `None`. Made once the request is authenticated (a request that is
    /// not: [`Auditor::unauthenticated`]).
    pub fn begin(self: &Arc<Self>, f: Facts<'_>) -> Option<Pending> {
        let verb = verb(f.method, f.request);
        let subresource = f
            .request
            .and_then(|r| r.path.subresource.as_deref())
            .unwrap_or("");
        let object = f.request.map(|r| {
            let p = &r.path;
            ObjectRef {
                resource: p.gvr.resource(),
                namespace: &r.scope.namespace,
                name: &r.scope.name,
                api_group: p.gvr.group(),
                api_version: p.gvr.version(),
                subresource,
            }
        });
        let target = match &object {
            Some(o) => Target::Resource {
                group: o.api_group,
                resource: o.resource,
                subresource: o.subresource,
                namespace: o.namespace,
                name: o.name,
            },
            None => Target::Path(f.uri.path()),
        };
        let decision = self.policy.evaluate(&Attributes {
            user: f.user.as_deref(),
            verb: &verb,
            target,
        });
        self.counters.level(match decision.level {
            Level::None => AuditLevel::None,
            Level::Metadata => AuditLevel::Metadata,
            Level::Request => AuditLevel::Request,
            Level::RequestResponse => AuditLevel::RequestResponse,
        });
        if decision.level == Level::None {
            return None;
        }
        let long_running = verb == "watch"
            || verb == "proxy"
            || matches!(
                subresource,
                "attach" | "exec" | "proxy" | "log" | "portforward"
            );
        let id = match f.id.to_str() {
            Ok(id) => Cow::Borrowed(id),
            Err(_) => String::from_utf8_lossy(f.id.as_bytes()),
        };
        let user_agent = event::user_agent(f.headers);
        let source_ips = event::source_ips(f.headers, f.peer);
        let request_uri = f
            .uri
            .path_and_query()
            .map_or(f.uri.path(), |pq| pq.as_str());
        let frozen = Frozen::new(&Meta {
            id: &id,
            level: decision.level,
            request_uri,
            verb: &verb,
            user: f.user.as_deref(),
            impersonated: f.impersonated.as_deref(),
            source_ips: &source_ips,
            user_agent: &user_agent,
            object,
            received: f.received,
        });
        Some(Pending {
            auditor: self.clone(),
            frozen,
            received: f.received,
            decision,
            long_running,
            done: false,
        })
    }

    /// Records a request refused before it was authenticated, as the
    /// apiserver's failed-authentication audit does: one `ResponseStarted`
    /// event, no user.
    pub fn unauthenticated(self: &Arc<Self>, f: Facts<'_>, resp: &Response<Body>) {
        let Some(mut p) = self.begin(Facts { user: None, ..f }) else {
            return;
        };
        p.done = true;
        if p.decision.omit_stages.has(Stage::ResponseStarted) {
            return;
        }
        let status = status_of(resp);
        p.emit(Stage::ResponseStarted, Some(&status), None, &[]);
    }
}

/// An event written into this thread's buffer (kept from event to event:
/// no allocation a request), handed to `emit`.
fn written(frozen: &Frozen, stamp: &Stamp<'_>, emit: impl FnOnce(&[u8])) {
    thread_local! {
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BUF.with(|b| match b.try_borrow_mut() {
        Ok(mut buf) => {
            buf.clear();
            event::write(&mut buf, frozen, stamp);
            emit(&buf);
            // A RequestResponse answer's bytes are not kept past their event.
            if buf.capacity() > 1 << 20 {
                *buf = Vec::new();
            }
        }
        // (An event made while this thread makes one: its own buffer.)
        Err(_) => {
            let mut buf = Vec::with_capacity(1024);
            event::write(&mut buf, frozen, stamp);
            emit(&buf);
        }
    });
}

/// The response's `responseStatus`: a `Status` of r8s's own in full, else its code.
fn status_of(resp: &Response<Body>) -> ResponseStatus {
    match resp.extensions().get::<Sent>() {
        Some(Sent(s)) => ResponseStatus {
            code: s.code,
            status: "Failure",
            message: s.message.clone(),
            reason: s.reason,
            details: s.details_value().map(Box::new),
        },
        None => ResponseStatus::code(resp.status().as_u16()),
    }
}

impl Pending {
    fn emit(
        &self,
        stage: Stage,
        status: Option<&ResponseStatus>,
        body: Option<&[u8]>,
        annotations: &[(&str, &str)],
    ) {
        let stamp = Stamp {
            stage,
            status,
            response_object: body,
            at: SystemTime::now(),
            annotations,
        };
        written(&self.frozen, &stamp, |e| self.auditor.emit(e));
    }

    /// Records the response: `RequestReceived` (stamped when the request
    /// arrived), `ResponseStarted` for a long-running request, and
    /// `ResponseComplete` once the body is done, through the body it wraps.
    /// A request passed to the upstream is recorded only with
    /// `audit.passthrough`.
    pub fn finish(mut self, resp: &mut Response<Body>, outcome: Outcome, authz: Option<Authz>) {
        self.done = true;
        if matches!(outcome, Outcome::Pass(_)) && !self.auditor.passthrough {
            return;
        }
        let omit = self.decision.omit_stages;
        if !omit.has(Stage::RequestReceived) {
            let stamp = Stamp {
                stage: Stage::RequestReceived,
                status: None,
                response_object: None,
                at: self.received,
                annotations: &[],
            };
            written(&self.frozen, &stamp, |e| self.auditor.emit(e));
        }
        let annotations = Annotations { outcome, authz };
        let status = status_of(resp);
        if self.long_running && !omit.has(Stage::ResponseStarted) {
            let (a, n) = annotations.pairs();
            self.emit(Stage::ResponseStarted, Some(&status), None, &a[..n]);
        }
        if omit.has(Stage::ResponseComplete) {
            return;
        }
        let capture = self.decision.level >= Level::RequestResponse
            && matches!(outcome, Outcome::Hit)
            && !self.long_running
            && is_plain_json(resp);
        let body = std::mem::replace(resp.body_mut(), crate::body::empty());
        *resp.body_mut() = Completing {
            inner: body,
            captured: capture.then(Vec::new),
            complete: Some(Complete {
                pending: self,
                status,
                annotations,
            }),
        }
        .boxed_unsync();
    }
}

/// Whether the answer is JSON as sent, which an event can carry as it is.
fn is_plain_json(resp: &Response<Body>) -> bool {
    let h = resp.headers();
    h.get(http::header::CONTENT_ENCODING).is_none()
        && h.get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.starts_with("application/json"))
}

/// What a response's events annotate: r8s's authorization of the request
/// and what became of it.
struct Annotations {
    outcome: Outcome,
    authz: Option<Authz>,
}

impl Annotations {
    /// The annotations, sorted by key, borrowed (no allocation a request).
    fn pairs(&self) -> ([(&'static str, &str); 4], usize) {
        let mut a = [("", ""); 4];
        let mut n = 0;
        let mut add = |k: &'static str, v| {
            a[n] = (k, v);
            n += 1;
        };
        match &self.authz {
            Some(Authz::Allow(r)) => {
                add("authorization.k8s.io/decision", "allow");
                add("authorization.k8s.io/reason", r);
            }
            Some(Authz::Forbid(r)) => {
                add("authorization.k8s.io/decision", "forbid");
                add("authorization.k8s.io/reason", r);
            }
            Some(Authz::Error) => add("authorization.k8s.io/reason", "internal error"),
            None => {}
        }
        let (cache, why) = match self.outcome {
            Outcome::Hit => ("hit", ""),
            Outcome::Refused => ("refused", ""),
            Outcome::Pass(r) => ("pass", r),
        };
        add("r8s.io/cache", cache);
        if !why.is_empty() {
            add("r8s.io/pass-reason", why);
        }
        (a, n)
    }
}

impl Drop for Pending {
    /// A request that ends without its response recorded: a panic
    /// (`Panic`), or a client gone before the answer (`ResponseComplete`,
    /// as the apiserver records a connection closed early).
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let (stage, status) = if std::thread::panicking() {
            let s = ResponseStatus {
                code: 500,
                status: "Failure",
                message: "r8s panicked while answering the request".into(),
                reason: "InternalError",
                details: None,
            };
            (Stage::Panic, s)
        } else {
            let s = ResponseStatus {
                code: 200,
                status: "Success",
                message: "Connection closed early".into(),
                reason: "",
                details: None,
            };
            (Stage::ResponseComplete, s)
        };
        if !self.decision.omit_stages.has(stage) {
            self.emit(stage, Some(&status), None, &[]);
        }
    }
}

/// What the last event needs once the body is done.
struct Complete {
    pending: Pending,
    status: ResponseStatus,
    annotations: Annotations,
}

/// A response body that records `ResponseComplete` when it is done or dropped.
struct Completing {
    inner: Body,
    /// The body's bytes, for `responseObject`.
    captured: Option<Vec<u8>>,
    complete: Option<Complete>,
}

impl HttpBody for Completing {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let (Some(buf), Some(data)) = (self.captured.as_mut(), frame.data_ref())
        {
            buf.extend_from_slice(data);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Completing {
    fn drop(&mut self) {
        let Some(c) = self.complete.take() else {
            return;
        };
        let object = self
            .captured
            .take()
            .map(|b| response_object(b, c.pending.decision.omit_managed_fields));
        let (a, n) = c.annotations.pairs();
        c.pending.emit(
            Stage::ResponseComplete,
            Some(&c.status),
            object.as_deref(),
            &a[..n],
        );
    }
}

/// The answer's JSON as an event carries it: compact (no final newline),
/// without `metadata.managedFields` where the policy says so (the event's
/// writer escapes it as Go does).
fn response_object(body: Vec<u8>, omit_managed_fields: bool) -> Vec<u8> {
    let mut body = body;
    while body.last().is_some_and(u8::is_ascii_whitespace) {
        body.pop();
    }
    if omit_managed_fields && let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(&body) {
        let strip = |o: &mut serde_json::Value| {
            if let Some(m) = o.get_mut("metadata").and_then(|m| m.as_object_mut()) {
                m.remove("managedFields");
            }
        };
        strip(&mut v);
        if let Some(items) = v.get_mut("items").and_then(|i| i.as_array_mut()) {
            items.iter_mut().for_each(strip);
        }
        body = serde_json::to_vec(&v).unwrap_or(body);
    }
    body
}
