//! `TokenReview` and `SubjectAccessReview` against the upstream, with r8s's
//! own credentials: the request and answer shapes of authentication.k8s.io/v1
//! and authorization.k8s.io/v1, and nothing of them kept but the answer.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::Deserialize;
use serde_json::json;

use super::cache::ReviewError;
use crate::api::UserInfo;
use crate::api::request::{ApiRequest, Scope};
use crate::metrics;
use crate::upstream::Upstream;

/// What a TokenReview said of a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenAnswer {
    /// The token is valid: this is its user.
    Authenticated(Arc<UserInfo>),
    /// The token is not valid (or expired, or revoked).
    Rejected,
}

/// What a SubjectAccessReview decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed, with the authorizer's reason (often empty).
    Allowed(Arc<str>),
    /// Not allowed, with the authorizer's reason (often empty).
    Denied(Arc<str>),
}

/// The attributes an authorizer decides on (`authorizer.Attributes`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Attributes {
    /// API group (empty: core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Resource (plural).
    pub resource: String,
    /// Verb, subresource, namespace, name and selectors, as RequestInfo and
    /// `GetAuthorizerAttributes` give them (derived once per request).
    pub scope: Scope,
}

impl Attributes {
    /// What r8s asks about `req` before answering it from the cache: its
    /// verb, resource and the scope it was parsed with, which is also what
    /// the cache read is bounded by.
    pub fn of(req: &ApiRequest) -> Self {
        let rp = &req.path;
        Attributes {
            group: rp.gvr.group().to_string(),
            version: rp.gvr.version().to_string(),
            resource: rp.gvr.resource().to_string(),
            scope: req.scope.clone(),
        }
    }
}

#[derive(Deserialize)]
struct Answer<S> {
    status: Option<S>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct TokenStatus {
    authenticated: bool,
    user: TokenUser,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct TokenUser {
    username: String,
    uid: String,
    groups: Vec<String>,
    extra: BTreeMap<String, Vec<String>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct AccessStatus {
    allowed: bool,
    reason: String,
}

async fn post<S: for<'de> Deserialize<'de>>(
    upstream: &Arc<Upstream>,
    path: &str,
    review: metrics::Review,
    body: Bytes,
    limit: Duration,
) -> Result<S, ReviewError> {
    let kind = review.as_str();
    let start = Instant::now();
    let result = tokio::time::timeout(limit, upstream.post_json(path, body)).await;
    metrics::auth_review(review, start.elapsed());
    let (status, bytes) = result
        .map_err(|_| {
            ReviewError::unavailable(format!(
                "{kind} review: no answer from the upstream within {limit:?} (auth.review_timeout_seconds)"
            ))
        })?
        .map_err(|e| ReviewError::unavailable(format!("{kind} review failed: {e}")))?;
    if !status.is_success() {
        let message = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_string))
            .unwrap_or_default();
        // 5xx (and 429): the upstream is in trouble, an outage; any other
        // answer is r8s's own problem to fix, never papered over.
        if status.is_server_error() || status == http::StatusCode::TOO_MANY_REQUESTS {
            return Err(ReviewError::unavailable(format!(
                "the upstream answered {status} to r8s's {kind} review ({message})"
            )));
        }
        return Err(ReviewError::refused(format!(
            "the upstream answered {status} to r8s's {kind} review ({message}); r8s needs `create` on it (see deploy/kubernetes/rbac.yaml)"
        )));
    }
    serde_json::from_slice::<Answer<S>>(&bytes)
        .map_err(|e| ReviewError::refused(format!("{kind} review: unreadable answer: {e}")))?
        .status
        .ok_or_else(|| ReviewError::refused(format!("{kind} review: the answer has no status")))
}

/// Asks the upstream who `token` belongs to.
pub async fn token(
    upstream: Arc<Upstream>,
    token: String,
    limit: Duration,
) -> Result<TokenAnswer, ReviewError> {
    let body = json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token},
    });
    drop(token);
    let body = Bytes::from(serde_json::to_vec(&body).expect("JSON serializes"));
    let s: TokenStatus = post(
        &upstream,
        "/apis/authentication.k8s.io/v1/tokenreviews",
        metrics::Review::Token,
        body,
        limit,
    )
    .await?;
    if !s.authenticated || s.user.username.is_empty() {
        return Ok(TokenAnswer::Rejected);
    }
    let mut user = UserInfo {
        name: s.user.username,
        uid: s.user.uid,
        groups: s.user.groups,
        extra: s.user.extra,
    };
    // As the apiserver's authenticator chain adds it to a token's user.
    user.add_authenticated_group();
    Ok(TokenAnswer::Authenticated(Arc::new(user)))
}

/// A SubjectAccessReview's `spec` for `user` doing `attrs`, as kube-apiserver's
/// webhook authorizer writes it (`resourceAttributesFrom`): empty attributes
/// left out; selectors as parsed `requirements`, never `rawSelector`.
pub fn access_spec(user: &UserInfo, attrs: &Attributes) -> serde_json::Value {
    let mut ra = serde_json::Map::new();
    let sc = &attrs.scope;
    for (k, v) in [
        ("namespace", &sc.namespace),
        ("group", &attrs.group),
        ("version", &attrs.version),
        ("resource", &attrs.resource),
        ("subresource", &sc.subresource),
        ("name", &sc.name),
    ] {
        if !v.is_empty() {
            ra.insert(k.into(), json!(v));
        }
    }
    ra.insert("verb".into(), json!(sc.verb));
    // authorization.k8s.io/v1 since Kubernetes 1.31; older upstreams ignore
    // them and decide without, as they would for the request itself.
    for (k, reqs) in [("fieldSelector", &sc.fields), ("labelSelector", &sc.labels)] {
        if reqs.is_empty() {
            continue;
        }
        let reqs: Vec<serde_json::Value> = reqs
            .iter()
            .map(|r| {
                let mut o = json!({"key": r.key, "operator": r.op.as_str()});
                if !r.values.is_empty() {
                    o["values"] = json!(r.values);
                }
                o
            })
            .collect();
        ra.insert(k.into(), json!({ "requirements": reqs }));
    }
    let mut spec = json!({
        "resourceAttributes": ra,
        "user": user.name,
        "groups": user.groups,
    });
    if !user.uid.is_empty() {
        spec["uid"] = json!(user.uid);
    }
    if !user.extra.is_empty() {
        spec["extra"] = json!(user.extra);
    }
    spec
}

/// Asks the upstream whether `user` may do `attrs`.
pub async fn access(
    upstream: Arc<Upstream>,
    user: Arc<UserInfo>,
    attrs: Attributes,
    limit: Duration,
) -> Result<Decision, ReviewError> {
    let spec = access_spec(&user, &attrs);
    let body = json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": spec,
    });
    let body = Bytes::from(serde_json::to_vec(&body).expect("JSON serializes"));
    let s: AccessStatus = post(
        &upstream,
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        metrics::Review::Access,
        body,
        limit,
    )
    .await?;
    // As kube-apiserver's webhook authorizer: not allowed (denied, or no
    // opinion, with or without an evaluation error) is a 403.
    if s.allowed {
        Ok(Decision::Allowed(s.reason.into()))
    } else {
        Ok(Decision::Denied(s.reason.into()))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use http::Response;

    use super::*;
    use crate::body;
    use crate::config::UpstreamConfig;

    /// An upstream whose every answer starts and never ends (a black hole
    /// past the connection), the requests it was sent held open.
    async fn silent() -> (Arc<Upstream>, Arc<Mutex<Vec<impl Send>>>) {
        let upstream = Upstream::new(&UpstreamConfig {
            servers: vec!["http://127.0.0.1:1".into()],
            ..Default::default()
        })
        .await
        .unwrap();
        let held = Arc::new(Mutex::new(Vec::new()));
        let keep = held.clone();
        upstream.answer_with(Arc::new(move |_| {
            let (tx, body) = body::channel(1);
            keep.lock().unwrap().push(tx);
            Response::new(body)
        }));
        (Arc::new(upstream), held)
    }

    /// The spec kube-apiserver 1.36 sent for `?fieldSelector=metadata.namespace=ns-b,metadata.name=w-2`
    /// and a label selector (the kit's shim's review log), byte for byte
    /// once parsed: `requirements`, never `rawSelector`.
    #[test]
    fn should_write_selectors_as_requirements_as_1_36_does() {
        let uri: http::Uri = "/apis/example.com/v1/widgets?fieldSelector=metadata.namespace%3Dns-b,metadata.name%3Dw-2&labelSelector=b%20in%20(z,y),!c"
            .parse()
            .unwrap();
        let ar = ApiRequest::parse(&http::Method::GET, &uri, &http::HeaderMap::new()).unwrap();
        let user = UserInfo {
            name: "dave".into(),
            uid: "dave".into(),
            groups: vec!["system:authenticated".into()],
            extra: BTreeMap::new(),
        };
        let got = access_spec(&user, &Attributes::of(&ar));
        let want = json!({"resourceAttributes": {"verb": "list", "group": "example.com", "version": "v1",
            "resource": "widgets", "name": "w-2",
            "fieldSelector": {"requirements": [
                {"key": "metadata.name", "operator": "In", "values": ["w-2"]},
                {"key": "metadata.namespace", "operator": "In", "values": ["ns-b"]}]},
            "labelSelector": {"requirements": [
                {"key": "b", "operator": "In", "values": ["y", "z"]},
                {"key": "c", "operator": "DoesNotExist"}]}},
            "user": "dave", "groups": ["system:authenticated"], "uid": "dave"});
        assert_eq!(got, want);
    }

    /// A review the upstream never answers fails as an outage after exactly
    /// `auth.review_timeout_seconds`, so an earlier allowing answer may be
    /// reused, instead of holding the cached read that waits on it.
    #[tokio::test(start_paused = true)]
    async fn should_give_up_on_a_review_the_upstream_never_answers() {
        let (upstream, held) = silent().await;
        let limit = Duration::from_secs(3);
        let began = tokio::time::Instant::now();
        let e = token(upstream.clone(), "t".into(), limit)
            .await
            .unwrap_err();
        assert!(e.unavailable, "{e}");
        assert!(e.message.contains("auth.review_timeout_seconds"), "{e}");
        assert_eq!(began.elapsed(), limit);

        let began = tokio::time::Instant::now();
        let attrs = Attributes {
            group: String::new(),
            version: "v1".into(),
            resource: "pods".into(),
            scope: Scope {
                verb: "list",
                ..Scope::default()
            },
        };
        let e = access(upstream, Arc::new(UserInfo::anonymous()), attrs, limit)
            .await
            .unwrap_err();
        assert!(e.unavailable, "{e}");
        assert_eq!(began.elapsed(), limit);
        assert_eq!(held.lock().unwrap().len(), 2, "both reviews were sent");
    }
}
