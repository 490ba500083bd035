//! The Kubernetes API listener: classifies each request, answers it (from the
//! upstream for now; from the cache from the cache issue on) and records it.

pub mod passthrough;
pub mod read;
pub mod watch;

use std::sync::Arc;
use std::time::Instant;

use http::{Request, Response};
use hyper::body::Incoming;

use crate::api::params::{parse_bool, query_pairs};
use crate::api::path::{self, ApiPath};
use crate::auth::{Caller, Refusal};
use crate::body::Body;
use crate::metrics;
use crate::server::Peer;
use crate::shutdown::Signal;
use crate::upstream::Upstream;

/// Everything the API listener needs.
pub struct Api {
    /// Who is asking, and may they read from the cache.
    pub auth: crate::auth::Auth,
    /// The upstream.
    pub upstream: Arc<Upstream>,
    /// The caches, by group/version/resource.
    pub caches: crate::cache::Caches,
    /// How cached reads behave.
    pub policy: read::ReadPolicy,
    /// How cached watches behave.
    pub watch_policy: watch::WatchPolicy,
    /// Ends streams at shutdown.
    pub shutdown: Signal,
}

/// What a request is, for routing and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classified {
    /// kube-apiserver's verb (`get`, `list`, `watch`, ..., or `other` for non-resource paths).
    pub verb: &'static str,
    /// Resource (with subresource), or the first path segment for non-resource paths.
    pub resource: String,
    /// Whether the response is a long-lived stream (watch, followed log).
    pub streaming: bool,
}

/// Classifies a request from its method, path and query alone.
pub fn classify<B>(req: &Request<B>) -> Classified {
    classify_parsed(req, &path::parse(req.uri().path()))
}

/// [`classify`] for a path already parsed.
pub fn classify_parsed<B>(req: &Request<B>, parsed: &ApiPath) -> Classified {
    let q = query_pairs(req.uri().query());
    let flag = |name: &str| {
        q.iter()
            .any(|(k, v)| k == name && parse_bool(v).unwrap_or(false))
    };
    match parsed {
        ApiPath::Resource(rp) => {
            let verb = rp.verb(req.method(), flag("watch"));
            let resource = match &rp.subresource {
                Some(s) => format!("{}/{s}", rp.gvr.resource()),
                None => rp.gvr.resource().to_string(),
            };
            let streaming =
                verb == "watch" || (rp.subresource.as_deref() == Some("log") && flag("follow"));
            Classified {
                verb,
                resource,
                streaming,
            }
        }
        ApiPath::Other => {
            let first = req
                .uri()
                .path()
                .trim_start_matches('/')
                .split('/')
                .next()
                .unwrap_or("");
            Classified {
                verb: "other",
                resource: format!("/{first}"),
                streaming: false,
            }
        }
    }
}

impl Api {
    /// Answers one API request from `peer`.
    pub async fn handle(
        self: Arc<Self>,
        req: Request<Incoming>,
        peer: Arc<Peer>,
    ) -> Response<Body> {
        let start = Instant::now();
        let parsed = path::parse(req.uri().path());
        let c = classify_parsed(&req, &parsed);
        let caller = match self
            .auth
            .authenticate(req.headers(), peer.certificate.as_ref())
            .await
        {
            Ok(caller) => caller,
            Err(refusal) => return refused(refusal, &c, start),
        };
        if let ApiPath::Resource(rp) = &parsed
            && caller.cacheable()
        {
            if let Some(cache) = self.caches.get(&rp.gvr) {
                let decision = match self
                    .answer_from_cache(cache, &req, rp, c.verb, &caller)
                    .await
                {
                    Ok(d) => d,
                    Err(refusal) => {
                        metrics::cache_request(&cache.label, c.verb, "refused");
                        return refused(refusal, &c, start);
                    }
                };
                match decision {
                    read::Decision::Hit(resp) => {
                        metrics::cache_request(&cache.label, c.verb, "hit");
                        metrics::request(
                            c.verb,
                            &c.resource,
                            resp.status().as_u16(),
                            "hit",
                            start.elapsed(),
                        );
                        return resp;
                    }
                    read::Decision::Pass(reason) => {
                        metrics::cache_request(&cache.label, c.verb, reason)
                    }
                }
            }
        }
        let resp =
            passthrough::forward(&self.upstream, req, c.streaming, &self.shutdown, &caller).await;
        metrics::request(
            c.verb,
            &c.resource,
            resp.status().as_u16(),
            "pass",
            start.elapsed(),
        );
        resp
    }
}

impl Api {
    /// Answers from `cache` if it can and `caller` may see the answer.
    /// Authorized only once the cache would answer, so requests passed through
    /// cost no review: a watch before its watcher starts, a read after its
    /// answer is built (dropped unsent if the caller may not see it).
    async fn answer_from_cache<B>(
        &self,
        cache: &Arc<crate::cache::ResourceCache>,
        req: &Request<B>,
        rp: &path::ResourcePath,
        verb: &'static str,
        caller: &Caller,
    ) -> Result<read::Decision, Refusal> {
        let query = req.uri().query();
        if verb == "watch" && rp.subresource.is_none() {
            return match watch::plan(cache, req, rp, &self.watch_policy) {
                Ok(plan) => {
                    self.auth.authorize(caller, verb, rp, query).await?;
                    Ok(read::Decision::Hit(
                        plan.start(&self.watch_policy, &self.shutdown),
                    ))
                }
                Err(reason) => Ok(read::Decision::Pass(reason)),
            };
        }
        let decision = read::decide(cache, req, rp, verb, &self.policy).await;
        if let read::Decision::Hit(_) = &decision {
            self.auth.authorize(caller, verb, rp, query).await?;
        }
        Ok(decision)
    }
}

/// A request r8s's auth layer refused (401, 403, 503): recorded with cache result `auth`.
fn refused(refusal: Refusal, c: &Classified, start: Instant) -> Response<Body> {
    let resp = refusal.into_response();
    metrics::request(
        c.verb,
        &c.resource,
        resp.status().as_u16(),
        "auth",
        start.elapsed(),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(method: &str, uri: &str) -> Classified {
        classify(&Request::builder().method(method).uri(uri).body(()).unwrap())
    }

    #[test]
    fn should_classify_like_request_info() {
        assert_eq!(c("GET", "/api/v1/pods?watch=1").verb, "watch");
        assert!(c("GET", "/api/v1/pods?watch=1").streaming);
        assert_eq!(c("GET", "/api/v1/namespaces/a/pods").verb, "list");
        assert_eq!(c("DELETE", "/api/v1/namespaces/a/pods/p").verb, "delete");
        let l = c("GET", "/api/v1/namespaces/a/pods/p/log?follow=true");
        assert_eq!(
            (l.verb, l.resource.as_str(), l.streaming),
            ("get", "pods/log", true)
        );
        assert_eq!(c("GET", "/apis/apps/v1").resource, "/apis");
    }
}
