//! Get and list served from the cache, following the seeds' tables.
//!
//! Every request for a cached resource ends here in a decision: served from a
//! cache version (`hit`), or passed through with a reason. Anything the
//! apiserver would reject is passed through, so the client gets the
//! apiserver's own answer.

use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, header};

use crate::api::params::{ListOptions, RvMatch};
use crate::api::path::ResourcePath;
use crate::api::selector::{FieldSelector, LabelSelector, supported_fields};
use crate::api::status::Status;
use crate::body::{self, Body};
use crate::cache::ResourceCache;
use crate::cache::object::CachedObject;
use crate::cache::store::{Serving, Version};
use crate::cache::token::Token;
use crate::codec::json::{GZIP_MIN, GzipListBody, ListBody, gzip as gzip_bytes};
use crate::config::OnTooNew;

/// How cached reads behave.
#[derive(Debug, Clone)]
pub struct ReadPolicy {
    /// How long a "not older than" read waits for the cache.
    pub wait: Duration,
    /// What happens after that.
    pub on_too_new: OnTooNew,
}

/// The outcome for one request.
pub enum Decision {
    /// Served by r8s.
    Hit(Response<Body>),
    /// Passed through, for this reason.
    Pass(&'static str),
}

/// Whether the client prefers plain JSON (absent Accept and `*/*` count).
fn accepts_json(headers: &HeaderMap) -> bool {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let first = accept.split(',').next().unwrap_or("").trim();
    if first.is_empty() {
        return true;
    }
    let mut parts = first.split(';').map(str::trim);
    let mime = parts.next().unwrap_or("");
    let params_ok = parts.all(|p| p.starts_with("q=") || p.starts_with("charset="));
    params_ok && matches!(mime, "application/json" | "*/*" | "application/*")
}

/// Why a cache cannot serve this client now, if it cannot.
pub fn unservable(cache: &ResourceCache, headers: &HeaderMap) -> Option<&'static str> {
    match cache.store.serving() {
        Serving::Ready => {}
        Serving::Syncing => return Some("not_synced"),
        Serving::OverBudget => return Some("over_budget"),
        Serving::Uncacheable => return Some("not_cacheable"),
    }
    if !accepts_json(headers) {
        Some("media_type")
    } else {
        None
    }
}

/// Tries to answer `req` from `cache`.
pub async fn decide<B>(
    cache: &ResourceCache,
    req: &Request<B>,
    rp: &ResourcePath,
    verb: &str,
    policy: &ReadPolicy,
) -> Decision {
    if !matches!(verb, "get" | "list") || rp.subresource.is_some() {
        return Decision::Pass("verb");
    }
    if let Some(reason) = unservable(cache, req.headers()) {
        return Decision::Pass(reason);
    }
    let Ok(opts) = ListOptions::parse(req.uri().query()) else {
        return Decision::Pass("invalid");
    };
    if opts.validate().is_err() {
        return Decision::Pass("invalid");
    }
    let pretty = crate::api::params::pretty(opts.pretty, false, req.headers());
    let gzip = accepts_gzip(req.headers());
    let result = if verb == "get" {
        get(cache, rp, &opts, policy).await
    } else {
        list(cache, rp, &opts, policy).await
    };
    match result {
        Ok(payload) => Decision::Hit(respond(StatusCode::OK, payload, pretty, gzip)),
        Err(Outcome::Status(s)) => {
            let code = StatusCode::from_u16(s.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            Decision::Hit(respond(code, Payload::Bytes(s.to_bytes()), pretty, false))
        }
        Err(Outcome::Pass(reason)) => Decision::Pass(reason),
    }
}

enum Outcome {
    Status(Status),
    Pass(&'static str),
}

/// What a hit sends: one object's bytes, or a streamed list.
enum Payload {
    Bytes(Bytes),
    List(ListBody<CachedObject>),
}

fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|e| {
            let mut p = e.split(';').map(str::trim);
            p.next() == Some("gzip") && p.all(|q| q != "q=0")
        })
}

fn hit(code: StatusCode, body: Body, gzipped: bool) -> Response<Body> {
    let mut resp = crate::api::json_response(code, body);
    let h = resp.headers_mut();
    h.insert(
        super::passthrough::CACHE_HEADER,
        HeaderValue::from_static("hit"),
    );
    if gzipped {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        h.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    }
    resp
}

/// The response for a hit: lists stream (gzipped when large and accepted);
/// pretty-printing (curl) materializes, off the fast path.
fn respond(code: StatusCode, payload: Payload, pretty: bool, gzip: bool) -> Response<Body> {
    use http_body_util::BodyExt;
    let bytes = match payload {
        Payload::List(list) if !pretty => {
            return if gzip && list.estimated_len() >= GZIP_MIN {
                hit(code, GzipListBody::new(list).boxed_unsync(), true)
            } else {
                hit(code, list.boxed_unsync(), false)
            };
        }
        Payload::List(list) => list.collect(),
        Payload::Bytes(b) => b,
    };
    let bytes = if pretty {
        match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Ok(v) => {
                let mut s = serde_json::to_vec_pretty(&v).expect("JSON serializes");
                s.push(b'\n');
                Bytes::from(s)
            }
            Err(_) => bytes,
        }
    } else {
        bytes
    };
    if gzip && bytes.len() >= GZIP_MIN {
        return hit(code, body::full(gzip_bytes(&bytes)), true);
    }
    hit(code, body::full(bytes), false)
}

/// The version a "not older than N" read may use, after waiting for it.
async fn not_older_than(
    cache: &ResourceCache,
    n: u64,
    policy: &ReadPolicy,
) -> Result<Arc<Version>, Outcome> {
    let cur = cache.store.current();
    if cur.rv >= n {
        return Ok(cur);
    }
    if cache.store.wait_for(n, policy.wait).await {
        return Ok(cache.store.current());
    }
    match policy.on_too_new {
        OnTooNew::Pass => Err(Outcome::Pass("too_new")),
        OnTooNew::Timeout => Err(Outcome::Status(Status::too_large_resource_version(
            n,
            cache.store.current().rv,
        ))),
    }
}

async fn get(
    cache: &ResourceCache,
    rp: &ResourcePath,
    opts: &ListOptions,
    policy: &ReadPolicy,
) -> Result<Payload, Outcome> {
    let version = match opts.resource_version.as_str() {
        "" => return Err(Outcome::Pass("most_recent")),
        "0" => cache.store.current(),
        rv => {
            let n = rv.parse::<u64>().map_err(|_| Outcome::Pass("invalid"))?;
            not_older_than(cache, n, policy).await?
        }
    };
    let name = rp.name.as_deref().unwrap_or_default();
    let key = match &rp.namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    };
    match version.objects.get(key.as_str()) {
        Some(o) => Ok(Payload::Bytes(o.json.clone())),
        None => Err(Outcome::Status(Status::not_found(
            cache.resource.gvr.resource(),
            name,
        ))),
    }
}

async fn list(
    cache: &ResourceCache,
    rp: &ResourcePath,
    opts: &ListOptions,
    policy: &ReadPolicy,
) -> Result<Payload, Outcome> {
    let labels =
        LabelSelector::parse(&opts.label_selector).map_err(|_| Outcome::Pass("invalid"))?;
    let fields = FieldSelector::parse(
        &opts.field_selector,
        supported_fields(cache.resource.gvr.resource()),
    )
    .map_err(|_| Outcome::Pass("invalid"))?;
    let rv = opts.resource_version.as_str();
    let (version, start) = if !opts.continue_token.is_empty() {
        if !rv.is_empty() && rv != "0" {
            return Err(Outcome::Pass("invalid"));
        }
        let tok = match Token::decode(&opts.continue_token) {
            Ok(Some(t)) => t,
            Ok(None) => return Err(Outcome::Pass("foreign_continue")),
            Err(s) => return Err(Outcome::Status(s)),
        };
        let version = if tok.rv < 0 {
            cache.store.current()
        } else {
            cache.store.at(tok.rv as u64).ok_or_else(|| {
                let mut s = crate::api::continue_token::expired(
                    &crate::api::continue_token::ContinueToken {
                        rv: tok.rv,
                        start: tok.start.clone(),
                    },
                );
                s.continue_token = Some(
                    Token {
                        rv: -1,
                        start: tok.start.clone(),
                    }
                    .encode(),
                );
                Outcome::Status(s)
            })?
        };
        (version, Some(tok.start))
    } else if rv.is_empty() {
        return Err(Outcome::Pass("most_recent"));
    } else if rv == "0" {
        (cache.store.current(), None)
    } else {
        let n = rv.parse::<u64>().map_err(|_| Outcome::Pass("invalid"))?;
        let exact = opts.rv_match() == Some(RvMatch::Exact)
            || (opts.rv_match().is_none() && opts.limit > 0);
        if exact {
            (
                cache.store.at(n).ok_or(Outcome::Pass("not_retained"))?,
                None,
            )
        } else {
            (not_older_than(cache, n, policy).await?, None)
        }
    };
    Ok(assemble(
        cache,
        &version,
        rp.namespace.as_deref(),
        start,
        opts.limit,
        &labels,
        &fields,
    ))
}

/// The list response from pre-serialized items, in key order.
fn assemble(
    cache: &ResourceCache,
    version: &Version,
    namespace: Option<&str>,
    start: Option<String>,
    limit: i64,
    labels: &LabelSelector,
    fields: &FieldSelector,
) -> Payload {
    let prefix = namespace.map(|ns| format!("{ns}/")).unwrap_or_default();
    let from: Arc<str> = Arc::from(format!("{prefix}{}", start.unwrap_or_default()));
    let mut iter = version
        .objects
        .range((Bound::Included(from), Bound::Unbounded))
        .take_while(|(k, _)| k.starts_with(&prefix));
    let filtered = !(labels.is_empty() && fields.is_empty());
    let head = format!(
        "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{{\"resourceVersion\":\"{}\"",
        cache.list_kind,
        cache.resource.gvr.api_version(),
        version.rv
    );
    let mut picked = Vec::new();
    let mut last: Option<Arc<str>> = None;
    for (k, o) in iter.by_ref() {
        if filtered && !o.matches(labels, fields) {
            continue;
        }
        picked.push(o);
        if limit > 0 && picked.len() as i64 >= limit {
            last = Some(k.clone());
            break;
        }
    }
    let mut out = BytesMut::with_capacity(head.len() + 256);
    out.put_slice(head.as_bytes());
    if let Some(last) = last {
        let remaining = iter.count();
        if remaining > 0 {
            let tok = Token::after(version.rv, &last[prefix.len()..]).encode();
            out.put_slice(b",\"continue\":\"");
            out.put_slice(tok.as_bytes());
            out.put_u8(b'"');
            if !filtered {
                out.put_slice(format!(",\"remainingItemCount\":{remaining}").as_bytes());
            }
        }
    }
    out.put_slice(b"},\"items\":[");
    Payload::List(ListBody::new(
        out.freeze(),
        picked.into_iter().cloned().collect(),
    ))
}
