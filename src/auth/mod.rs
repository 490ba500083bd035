//! Who is asking, and whether they may read it from the cache.
//!
//! In `delegated` mode every request is authenticated the way kube-apiserver
//! would (bearer token by `TokenReview`, verified client certificate, or
//! `system:anonymous`) and every request served from cache is authorized by a
//! `SubjectAccessReview` against the upstream. Both answers are cached
//! ([`cache::ReviewCache`]); tokens only as an HMAC of the token under a key
//! that lives as long as the process. Requests passed through keep the
//! client's own identity: its `Authorization` as sent, or, for a certificate
//! (which cannot be forwarded), r8s's credentials plus `Impersonate-*` headers.

pub mod cache;
pub mod local;
pub mod review;

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue, Response, header};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use ring::hmac;

use crate::api::UserInfo;
use crate::api::media::ErrorEncoding;
use crate::api::request::{ApiRequest, Scope};
use crate::api::status::{Status, Target};
use crate::body::Body;
use crate::config::{AuthConfig, AuthMode};
use crate::metrics;
use crate::metrics::{Authn, Authz, Cached};
use crate::upstream::{Creds, Upstream};
use cache::{Lookup, ReviewCache, ReviewError, StaleIfError, Ttls};
use review::{Attributes, Decision, TokenAnswer};

/// The authorization reason of a request from a `Trusted` caller
/// (`auth.mode = "none"`: the loopback guard let it act as r8s).
const TRUSTED: &str = "r8s: auth.mode is none";

/// Who a request comes from, once authenticated.
#[derive(Debug, Clone)]
pub enum Caller {
    /// `auth.mode = "none"`: no checks; passed through as it came.
    Trusted,
    /// A bearer token or no credentials: passed through with its own
    /// credentials. `upstream_only`: it sent what only the upstream can
    /// judge (`Impersonate-*` headers, a token in a WebSocket subprotocol),
    /// so it is never served from cache.
    Client {
        /// The user the token (or its absence) stands for.
        user: Arc<UserInfo>,
        /// Whether it sent credentials or identity headers r8s does not judge.
        upstream_only: bool,
    },
    /// A verified client certificate (after any impersonation it was allowed):
    /// passed through as r8s impersonating `user`.
    Certificate {
        /// Who it acts as.
        user: Arc<UserInfo>,
        /// The certificate's own user, where it impersonates `user`.
        by: Option<Arc<UserInfo>>,
    },
}

impl Caller {
    /// Whether a request from this caller may be answered from cache at all.
    pub fn cacheable(&self) -> bool {
        !matches!(
            self,
            Caller::Client {
                upstream_only: true,
                ..
            }
        )
    }

    /// The user it acts as (`None`: `Trusted`).
    pub fn user(&self) -> Option<&Arc<UserInfo>> {
        match self {
            Caller::Trusted => None,
            Caller::Client { user, .. } | Caller::Certificate { user, .. } => Some(user),
        }
    }

    /// Who an audit event names: the user who sent the request, and the one
    /// it acts as where that differs (`user`, `impersonatedUser`).
    pub fn audit_users(&self) -> (Option<Arc<UserInfo>>, Option<Arc<UserInfo>>) {
        match self {
            Caller::Trusted => (None, None),
            Caller::Client { user, .. } => (Some(user.clone()), None),
            Caller::Certificate { user, by: None } => (Some(user.clone()), None),
            Caller::Certificate { user, by: Some(by) } => (Some(by.clone()), Some(user.clone())),
        }
    }

    /// Rewrites a pass-through request's headers for this caller's identity;
    /// says whose credentials it goes with.
    pub fn forward_as(&self, headers: &mut HeaderMap) -> Creds {
        match self {
            Caller::Trusted if headers.contains_key(header::AUTHORIZATION) => Creds::Client,
            Caller::Trusted => Creds::Own,
            Caller::Client { .. } => Creds::Client,
            Caller::Certificate { user, .. } => {
                impersonate(headers, user);
                Creds::Own
            }
        }
    }
}

/// Why a request is refused.
#[derive(Debug)]
pub enum Refusal {
    /// 401: bad token, or no credentials with `auth.anonymous = false`.
    Unauthorized,
    /// 403 (or 400 for malformed impersonation) in the apiserver's words.
    Status(Status),
    /// 403: the authorizer said no, for this reason (often empty).
    Forbidden {
        /// The apiserver's 403 for it.
        status: Status,
        /// The authorizer's reason.
        reason: Arc<str>,
    },
    /// 503: the upstream could not review (not cached; the client retries).
    Unavailable(ReviewError),
}

impl Refusal {
    /// The response the client gets, in the encoding it negotiated (as
    /// the apiserver's `ErrorNegotiated` writes its refusals).
    pub fn into_response(self, errors: ErrorEncoding) -> Response<Body> {
        let s = match self {
            Refusal::Unauthorized => Status::unauthorized(),
            Refusal::Status(s) | Refusal::Forbidden { status: s, .. } => s,
            Refusal::Unavailable(e) => {
                let mut s = Status::unavailable(format!(
                    "r8s could not check this request with the upstream: {e}"
                ));
                s.retry_after = Some(1);
                s
            }
        };
        s.into_response_as(errors)
    }
}

type DecisionKey = (Arc<UserInfo>, Attributes);

/// Authentication and authorization, with their caches.
pub struct Auth {
    mode: AuthMode,
    /// `none` mode's Host and path filters.
    local: local::LocalGuard,
    anonymous: Option<Arc<UserInfo>>,
    upstream: Arc<Upstream>,
    /// How long a review waits for the upstream (`auth.review_timeout_seconds`).
    review_timeout: Duration,
    token_key: hmac::Key,
    tokens: Arc<ReviewCache<[u8; 32], TokenAnswer>>,
    decisions: Arc<ReviewCache<DecisionKey, Decision>>,
    counters: metrics::AuthCounters,
    /// Whether the current outage's first reuse of a token review, then of
    /// an access review, was logged (cleared by the next review made).
    outage_logged: [AtomicBool; 2],
}

const IMPERSONATE_USER: &str = "impersonate-user";
const IMPERSONATE_GROUP: &str = "impersonate-group";
const IMPERSONATE_UID: &str = "impersonate-uid";
const IMPERSONATE_EXTRA: &str = "impersonate-extra-";

fn is_identity_header(name: &HeaderName) -> bool {
    let n = name.as_str();
    n.starts_with("impersonate-") || n.starts_with("x-remote-")
}

/// Replaces whatever identity headers the client sent with r8s's
/// impersonation of `user` (the certificate path: r8s's own credentials).
fn impersonate(headers: &mut HeaderMap, user: &UserInfo) {
    let names: Vec<HeaderName> = headers
        .keys()
        .filter(|n| is_identity_header(n))
        .cloned()
        .collect();
    for n in names {
        headers.remove(n);
    }
    headers.remove(header::AUTHORIZATION);
    let mut add = |name: HeaderName, value: &str| match HeaderValue::from_str(value) {
        Ok(v) => {
            headers.append(name, v);
        }
        Err(_) => {
            tracing::warn!(header = %name, "identity value not sendable as a header; left out")
        }
    };
    add(HeaderName::from_static(IMPERSONATE_USER), &user.name);
    for g in &user.groups {
        add(HeaderName::from_static(IMPERSONATE_GROUP), g);
    }
    if !user.uid.is_empty() {
        add(HeaderName::from_static(IMPERSONATE_UID), &user.uid);
    }
    for (k, values) in &user.extra {
        let Ok(name) = HeaderName::from_bytes(extra_header(k).as_bytes()) else {
            continue;
        };
        for v in values {
            add(name.clone(), v);
        }
    }
}

/// What a header name cannot carry of an extra key (RFC 7230 token characters pass).
const NOT_TOKEN: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// `Impersonate-Extra-<key>`, the key percent-encoded as the apiserver expects.
fn extra_header(key: &str) -> String {
    format!(
        "{IMPERSONATE_EXTRA}{}",
        utf8_percent_encode(&key.to_ascii_lowercase(), NOT_TOKEN)
    )
}

fn percent_decode(s: &str) -> String {
    percent_decode_str(s).decode_utf8_lossy().into_owned()
}

fn values(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect()
}

/// What a request's `Authorization` header holds for the bearer-token
/// authenticator.
#[derive(Debug, PartialEq, Eq)]
pub enum Bearer<'a> {
    /// A token to review.
    Token(&'a str),
    /// None: anonymous, as far as tokens go.
    None,
    /// A token r8s cannot read as text (bytes beyond visible ASCII).
    Unreadable,
}

/// The bearer token as kube-apiserver's authenticator reads it
/// (`bearertoken.Authenticator`): the first `Authorization` header, trimmed;
/// split on single spaces into at most three parts; the scheme `bearer` in
/// any case; the token the second part, so `Bearer  t` (two spaces) has an
/// empty token and is anonymous, and `Bearer t x` is the token `t`.
pub fn bearer_token(headers: &HeaderMap) -> Bearer<'_> {
    let Some(v) = headers.get(header::AUTHORIZATION) else {
        return Bearer::None;
    };
    let Ok(v) = v.to_str() else {
        // Go's scheme check still applies to the bytes before the first space.
        let b = v.as_bytes().trim_ascii();
        let is_bearer = b.len() > 7 && b[..6].eq_ignore_ascii_case(b"bearer") && b[6] == b' ';
        return if is_bearer && b.get(7).is_some_and(|c| *c != b' ') {
            Bearer::Unreadable
        } else {
            Bearer::None
        };
    };
    let mut parts = v.trim().splitn(3, ' ');
    let (Some(scheme), Some(token)) = (parts.next(), parts.next()) else {
        return Bearer::None;
    };
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Bearer::None;
    }
    Bearer::Token(token)
}

/// Whether a WebSocket request carries a token in its subprotocols
/// (`base64url.bearer.authorization.k8s.io.<token>`), which kube-apiserver
/// authenticates where no `Authorization` header does.
fn websocket_token(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .any(|v| {
            v.as_bytes()
                .windows(34)
                .any(|w| w.eq_ignore_ascii_case(b"base64url.bearer.authorization.k8s"))
        })
}

fn sends_impersonation(headers: &HeaderMap) -> bool {
    headers
        .keys()
        .any(|n| n.as_str().starts_with("impersonate-"))
}

impl Auth {
    /// Sets up the caches for `mode`; reviews go to `upstream` with r8s's
    /// credentials; in `none` mode, `local` filters every request.
    pub fn new(
        mode: AuthMode,
        cfg: &AuthConfig,
        local: local::LocalGuard,
        upstream: Arc<Upstream>,
    ) -> Self {
        // At least 1 once validated; a hand-built config still gets a working cache.
        let size = NonZeroUsize::new(cfg.cache_size).unwrap_or(NonZeroUsize::MIN);
        let secs = Duration::from_secs;
        Auth {
            mode,
            local,
            counters: metrics::AuthCounters::new(),
            anonymous: cfg.anonymous.then(|| Arc::new(UserInfo::anonymous())),
            upstream,
            review_timeout: Duration::from_secs_f64(cfg.review_timeout_seconds),
            token_key: hmac::Key::new(hmac::HMAC_SHA256, &random_key()),
            tokens: ReviewCache::new(
                size,
                Ttls {
                    positive: secs(cfg.token_ttl_seconds),
                    negative: secs(cfg.token_rejected_ttl_seconds),
                },
                |a, t| match a {
                    TokenAnswer::Authenticated(_) => t.positive,
                    TokenAnswer::Rejected => t.negative,
                },
                StaleIfError {
                    window: secs(cfg.stale_if_error_seconds),
                    reusable: |a| matches!(a, TokenAnswer::Authenticated(_)),
                },
            ),
            decisions: ReviewCache::new(
                size,
                Ttls {
                    positive: secs(cfg.decision_ttl_seconds),
                    negative: secs(cfg.decision_denied_ttl_seconds),
                },
                |d, t| match d {
                    Decision::Allowed(_) => t.positive,
                    Decision::Denied(_) => t.negative,
                },
                StaleIfError {
                    window: secs(cfg.stale_if_error_seconds),
                    reusable: |d| matches!(d, Decision::Allowed(_)),
                },
            ),
            outage_logged: [AtomicBool::new(false), AtomicBool::new(false)],
        }
    }

    /// Notes how a review was found: a reuse in an outage is counted, and
    /// the first of each outage logged; a review made ends the outage.
    fn noted(&self, how: Lookup, access: bool) {
        let logged = &self.outage_logged[usize::from(access)];
        match how {
            Lookup::Stale => {
                self.counters.stale(if access {
                    metrics::Review::Access
                } else {
                    metrics::Review::Token
                });
                if !logged.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        review = if access { "access" } else { "token" },
                        "the upstream cannot review; reusing allowing reviews made within auth.stale_if_error_seconds (denials are never reused)"
                    );
                }
            }
            Lookup::Reviewed => {
                if logged.swap(false, Ordering::Relaxed) {
                    tracing::info!(
                        review = if access { "access" } else { "token" },
                        "the upstream reviews again"
                    );
                }
            }
            Lookup::Cached => {}
        }
    }

    /// Who sent a request to `uri` with these headers over a connection that
    /// presented `certificate` (already verified against `tls.client_ca_file`).
    /// In `none` mode, whether the loopback guard lets it act as r8s.
    pub async fn authenticate(
        &self,
        uri: &http::Uri,
        headers: &HeaderMap,
        certificate: Option<&Arc<UserInfo>>,
    ) -> Result<Caller, Refusal> {
        if self.mode == AuthMode::None {
            return match self.local.check(uri, headers) {
                Ok(()) => Ok(Caller::Trusted),
                Err(status) => Err(Refusal::Status(status)),
            };
        }
        // kube-apiserver tries the x509 authenticator before bearer tokens.
        if let Some(user) = certificate {
            self.counters.authn(Authn::Certificate, Cached::No);
            let acting = self.impersonation(user, headers).await?;
            let by = (!Arc::ptr_eq(&acting, user)).then(|| user.clone());
            return Ok(Caller::Certificate { user: acting, by });
        }
        let upstream_only = sends_impersonation(headers) || websocket_token(headers);
        let token = match bearer_token(headers) {
            Bearer::Token(t) => t,
            Bearer::Unreadable => {
                // Bytes a TokenReview cannot carry as sent: no token r8s
                // could have reviewed, so none it accepts.
                self.counters.authn(Authn::Rejected, Cached::No);
                return Err(Refusal::Unauthorized);
            }
            Bearer::None => {
                // No bearer token (none, empty, or another scheme): anonymous.
                let Some(anon) = &self.anonymous else {
                    self.counters.authn(Authn::Rejected, Cached::No);
                    return Err(Refusal::Unauthorized);
                };
                self.counters.authn(Authn::Anonymous, Cached::No);
                return Ok(Caller::Client {
                    user: anon.clone(),
                    upstream_only,
                });
            }
        };
        let tag = hmac::sign(&self.token_key, token.as_bytes());
        let mut key = [0u8; 32];
        key.copy_from_slice(tag.as_ref());
        let (answer, how) = self
            .tokens
            .get_or_review(&key, || {
                review::token(
                    self.upstream.clone(),
                    token.to_string(),
                    self.review_timeout,
                )
            })
            .await;
        if answer.is_ok() {
            self.noted(how, false);
        }
        match answer {
            Ok(TokenAnswer::Authenticated(user)) => {
                self.counters.authn(Authn::Authenticated, how.label());
                Ok(Caller::Client {
                    user,
                    upstream_only,
                })
            }
            Ok(TokenAnswer::Rejected) => {
                self.counters.authn(Authn::Rejected, how.label());
                Err(Refusal::Unauthorized)
            }
            Err(e) => {
                self.counters.authn(Authn::Error, how.label());
                tracing::warn!(error = %e, "token review failed");
                Err(Refusal::Unavailable(e))
            }
        }
    }

    /// May `caller` do what `req` asks (a cache read, with its selectors for
    /// a list or watch)? Asked with the namespace and name RequestInfo gives
    /// it (a `metadata.name` field selector names the object; a namespace
    /// object is in itself). `Trusted` always may. Allowed: the authorizer's
    /// reason (for the audit log).
    pub async fn authorize(&self, caller: &Caller, req: &ApiRequest) -> Result<Arc<str>, Refusal> {
        let user = match caller {
            Caller::Trusted => return Ok(Arc::from(TRUSTED)),
            Caller::Client { user, .. } | Caller::Certificate { user, .. } => user,
        };
        let attrs = Attributes::of(req);
        self.decide(user, attrs).await
    }

    async fn decide(&self, user: &Arc<UserInfo>, attrs: Attributes) -> Result<Arc<str>, Refusal> {
        let key = (user.clone(), attrs);
        let (decision, how) = self
            .decisions
            .get_or_review(&key, || {
                review::access(
                    self.upstream.clone(),
                    user.clone(),
                    key.1.clone(),
                    self.review_timeout,
                )
            })
            .await;
        if decision.is_ok() {
            self.noted(how, true);
        }
        match decision {
            Ok(Decision::Allowed(reason)) => {
                self.counters.authz(Authz::Allowed, how.label());
                Ok(reason)
            }
            Ok(Decision::Denied(reason)) => {
                self.counters.authz(Authz::Denied, how.label());
                let a = &key.1;
                let target = Target {
                    group: &a.group,
                    resource: &a.resource,
                    subresource: Some(a.scope.subresource.as_str()),
                    namespace: Some(a.scope.namespace.as_str()),
                    name: Some(a.scope.name.as_str()),
                };
                Err(Refusal::Forbidden {
                    status: Status::forbidden(&user.name, a.scope.verb, &target, &reason),
                    reason,
                })
            }
            Err(e) => {
                self.counters.authz(Authz::Error, how.label());
                tracing::warn!(error = %e, "access review failed");
                Err(Refusal::Unavailable(e))
            }
        }
    }

    /// A certificate caller's `Impersonate-*` headers, checked as the
    /// apiserver's impersonation filter does (`impersonate` on users, groups,
    /// uids, userextras); the user it acts as.
    async fn impersonation(
        &self,
        user: &Arc<UserInfo>,
        headers: &HeaderMap,
    ) -> Result<Arc<UserInfo>, Refusal> {
        if !sends_impersonation(headers) {
            return Ok(user.clone());
        }
        let as_user = values(headers, IMPERSONATE_USER);
        let groups = values(headers, IMPERSONATE_GROUP);
        let uid = values(headers, IMPERSONATE_UID);
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, v) in headers {
            if let Some(k) = name.as_str().strip_prefix(IMPERSONATE_EXTRA)
                && let Ok(v) = v.to_str()
            {
                extra
                    .entry(percent_decode(k))
                    .or_default()
                    .push(v.to_string());
            }
        }
        let Some(name) = as_user.first().cloned() else {
            return Err(Refusal::Status(Status::bad_request(
                "requested impersonation of groups, uid or extra without impersonating a user",
            )));
        };
        // As the apiserver's legacy impersonation check asks (version `v1`
        // of core's users and groups, authentication.k8s.io's uids and
        // userextras). 1.36 asks its constrained impersonation modes
        // (`impersonate-on:...`) first and falls back to these: a caller
        // granted only those is refused by r8s where 1.36 allows it, never
        // the reverse (docs/security.md).
        let check = |verb_group: &str, resource: &str, sub: &str, name: &str| Attributes {
            group: verb_group.to_string(),
            version: "v1".to_string(),
            resource: resource.to_string(),
            scope: Scope {
                verb: "impersonate",
                subresource: sub.to_string(),
                name: name.to_string(),
                ..Scope::default()
            },
        };
        let mut checks = vec![check("", "users", "", &name)];
        checks.extend(groups.iter().map(|g| check("", "groups", "", g)));
        checks.extend(
            uid.iter()
                .map(|u| check("authentication.k8s.io", "uids", "", u)),
        );
        for (k, vs) in &extra {
            checks.extend(
                vs.iter()
                    .map(|v| check("authentication.k8s.io", "userextras", k, v)),
            );
        }
        for c in checks {
            self.decide(user, c).await?;
        }
        let mut groups = groups;
        if !groups.iter().any(|g| g == "system:authenticated") && name != "system:anonymous" {
            groups.push("system:authenticated".into());
        }
        Ok(Arc::new(UserInfo {
            name,
            uid: uid.into_iter().next().unwrap_or_default(),
            groups,
            extra,
        }))
    }
}

fn random_key() -> [u8; 32] {
    let mut key = [0u8; 32];
    if ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut key).is_err() {
        // No OS randomness: the key still differs per process.
        for chunk in key.chunks_mut(8) {
            chunk.copy_from_slice(&fastrand::u64(..).to_le_bytes());
        }
    }
    key
}

#[cfg(test)]
mod tests;
