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
pub mod caller;
pub mod impersonation;
pub mod local;
pub mod review;

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http::{HeaderMap, Response, header};
use ring::hmac;

use crate::api::UserInfo;
use crate::api::media::ErrorEncoding;
use crate::api::request::ApiRequest;
use crate::api::status::{Status, Target};
use crate::body::Body;
use crate::config::{AuthConfig, AuthMode};
use crate::metrics;
use crate::metrics::{Authn, Authz, Cached};
use crate::sync::MutexExt;
use crate::tls::client::{ClientCertificate, Presented};
use crate::tls::x509::{GoStrings, Reading};
use crate::upstream::Upstream;
use crate::upstream::version::KubeVersion;
use cache::{Lookup, ReviewCache, ReviewError, StaleIfError, Ttls};
pub use caller::{Caller, Forwarding};
use impersonation::{Asked, Filter};
use review::{Attributes, Decision, TokenAnswer};

/// The authorization reason of a request from a `Trusted` caller
/// (`auth.mode = "none"`: the loopback guard let it act as r8s).
const TRUSTED: &str = "r8s: auth.mode is none";

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
    /// 500 in plain text, as Go's `http.Error` writes the apiserver's
    /// `responsewriters.InternalError` (impersonation without a user,
    /// before 1.35).
    Internal(String),
}

impl Refusal {
    /// The response the client gets, in the encoding it negotiated (as
    /// the apiserver's `ErrorNegotiated` writes its refusals).
    pub fn into_response(self, errors: ErrorEncoding) -> Response<Body> {
        let s = match self {
            Refusal::Internal(why) => return internal_error(&why),
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

/// Go's `http.Error(w, "Internal Server Error: ...", 500)`: plain text.
fn internal_error(why: &str) -> Response<Body> {
    let mut resp = Response::new(crate::body::full(format!("Internal Server Error: {why}\n")));
    *resp.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        http::HeaderValue::from_static("nosniff"),
    );
    resp
}

type DecisionKey = (Arc<UserInfo>, Attributes);

/// Authentication and authorization, with their caches.
pub struct Auth {
    mode: AuthMode,
    /// `none` mode's Host and path filters.
    local: local::LocalGuard,
    anonymous: Option<Arc<UserInfo>>,
    /// Where reviews go (`auth.review_kubeconfig`, else the upstream).
    upstream: Arc<Upstream>,
    /// Where requests pass to: its apiserver's version says how it reads a
    /// client certificate (`x509_reading`).
    passes_to: Arc<Upstream>,
    /// How long a review waits for the upstream (`auth.review_timeout_seconds`).
    review_timeout: Duration,
    token_key: hmac::Key,
    tokens: Arc<ReviewCache<[u8; 32], TokenAnswer>>,
    decisions: Arc<ReviewCache<DecisionKey, Decision>>,
    counters: metrics::AuthCounters,
    /// Whether the current outage's first reuse of a token review, then of
    /// an access review, was logged (cleared by the next review made).
    outage_logged: [AtomicBool; 2],
    /// `auth.impersonate_certificate_clients`.
    impersonate: bool,
    /// r8s's own user upstream, read from the certificate it presents (the
    /// certificate and the reading it was read with, to read again when
    /// either changes).
    own: std::sync::Mutex<Option<OwnUser>>,
}

/// r8s's own user upstream, and what it was read from.
type OwnUser = (Arc<[u8]>, Reading, Option<Arc<UserInfo>>);

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

/// Whether the headers ask anything of impersonation, as the apiserver's
/// filter reads them.
fn sends_impersonation(headers: &HeaderMap, filter: Filter) -> bool {
    !matches!(impersonation::read(headers, filter), Asked::Nothing)
}

impl Auth {
    /// Sets up the caches for `mode`; reviews go to `upstream` with r8s's
    /// credentials, requests pass to `passes_to`; in `none` mode, `local`
    /// filters every request.
    pub fn new(
        mode: AuthMode,
        cfg: &AuthConfig,
        local: local::LocalGuard,
        upstream: Arc<Upstream>,
        passes_to: Arc<Upstream>,
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
            passes_to,
            review_timeout: Duration::from_secs_f64(cfg.review_timeout_seconds),
            impersonate: cfg.impersonate_certificate_clients,
            own: std::sync::Mutex::new(None),
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
    /// presented `certificate` (verified here against `tls.client_ca_file`,
    /// as the apiserver's x509 authenticator verifies it per request). In
    /// `none` mode, whether the loopback guard lets it act as r8s.
    pub async fn authenticate(
        &self,
        uri: &http::Uri,
        headers: &HeaderMap,
        certificate: Option<&ClientCertificate>,
    ) -> Result<Caller, Refusal> {
        if self.mode == AuthMode::None {
            return match self.local.check(uri, headers) {
                Ok(()) => Ok(Caller::Trusted),
                Err(status) => Err(Refusal::Status(status)),
            };
        }
        // kube-apiserver tries the x509 authenticator before bearer tokens.
        // A certificate naming nobody leaves the caller to the token; one
        // that does not authenticate is the 401, unless a token does (an
        // error fails the anonymous authenticator after the union).
        let mut certificate_failed = false;
        if let Some(cert) = certificate {
            match cert.presented(x509_reading(self.passes_to.version())) {
                Presented::User(user) => {
                    self.counters.authn(Authn::Certificate, Cached::No);
                    let acting = self.impersonation(&user, headers).await?;
                    let by = (!Arc::ptr_eq(&acting, &user)).then(|| user.clone());
                    return Ok(Caller::Certificate { user: acting, by });
                }
                Presented::Nobody => {}
                Presented::Refused(why) => {
                    tracing::debug!(error = %why, "client certificate does not authenticate");
                    certificate_failed = true;
                }
            }
        }
        let filter = Filter::of(self.passes_to.version());
        let upstream_only = sends_impersonation(headers, filter) || websocket_token(headers);
        let token = match bearer_token(headers) {
            Bearer::Token(t) => t,
            Bearer::Unreadable => {
                // Bytes a TokenReview cannot carry as sent: no token r8s
                // could have reviewed, so none it accepts.
                self.counters.authn(Authn::Rejected, Cached::No);
                return Err(Refusal::Unauthorized);
            }
            Bearer::None => {
                // No bearer token (none, empty, or another scheme): anonymous,
                // unless the certificate failed.
                let Some(anon) = self.anonymous.as_ref().filter(|_| !certificate_failed) else {
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

    /// The impersonation filter of the upstream requests pass to.
    pub fn filter(&self) -> Filter {
        Filter::of(self.passes_to.version())
    }

    /// How a request passing through goes upstream as its caller: the
    /// filter, r8s's own user there (read again when its certificate
    /// rotates, or the upstream's version changes how it is read), and
    /// whether r8s may impersonate.
    pub fn forwarding(&self) -> Forwarding {
        let reading = x509_reading(self.passes_to.version());
        let own = self.passes_to.own_certificate().and_then(|der| {
            let mut last = self.own.locked();
            match &*last {
                Some((d, r, user)) if Arc::ptr_eq(d, &der) && *r == reading => user.clone(),
                _ => {
                    let user = caller::own_user(&der, reading).map(Arc::new);
                    *last = Some((der, reading, user.clone()));
                    user
                }
            }
        });
        Forwarding {
            filter: self.filter(),
            own,
            impersonate: self.impersonate,
        }
    }

    /// A certificate caller's `Impersonate-*` headers, read and checked as
    /// the apiserver's legacy impersonation filter does (`impersonate` on
    /// users or the service account, the UID, groups, extras); the user it
    /// acts as. 1.36 first asks its constrained impersonation modes
    /// (`impersonate-on:...`) and falls back to these: a caller granted
    /// only those is refused by r8s where 1.36 allows it, never the
    /// reverse (docs/security.md).
    async fn impersonation(
        &self,
        user: &Arc<UserInfo>,
        headers: &HeaderMap,
    ) -> Result<Arc<UserInfo>, Refusal> {
        let filter = Filter::of(self.passes_to.version());
        let wanted = match impersonation::read(headers, filter) {
            Asked::Nothing => return Ok(user.clone()),
            Asked::As(wanted) => wanted,
            Asked::WithoutUser(why) if filter.bad_request => {
                return Err(Refusal::Status(Status::bad_request(why)));
            }
            Asked::WithoutUser(why) => return Err(Refusal::Internal(why)),
            Asked::Unreadable(what) => {
                return Err(Refusal::Status(Status::new(
                    403,
                    "Forbidden",
                    format!("r8s cannot check this impersonation: {what}"),
                )));
            }
        };
        for check in impersonation::checks(&wanted) {
            self.decide(user, check).await?;
        }
        Ok(Arc::new(impersonation::acting_as(wanted)))
    }
}

/// What the apiserver that reported `version` makes of a client
/// certificate: the credential-id extra from 1.32, the UID attribute from
/// 1.33, T61Strings as Latin-1 from Go 1.25 (`tls::x509`). Before r8s has
/// read `/version`: the current apiserver's, strings aside.
pub fn x509_reading(version: Option<KubeVersion>) -> Reading {
    let Some(v) = version else {
        return Reading::CURRENT;
    };
    Reading {
        credential_id: v.at_least(1, 32),
        uid: v.at_least(1, 33),
        strings: match v.go {
            Some((1, minor)) if minor >= 25 => GoStrings::Latin1,
            Some((major, _)) if major > 1 => GoStrings::Latin1,
            Some(_) => GoStrings::Raw,
            None => GoStrings::Unknown,
        },
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
