//! Get and list served from the cache, following the resource version
//! semantics of kube-apiserver's watch cache (`cacher.GetList`: "Any" from
//! the current version, "Not older than" after waiting for it, "Exact" from a
//! retained version, pages of one version with continue tokens).
//!
//! Every request for a cached resource ends here answered from a cache
//! version, or with the reason it passes through. Anything the apiserver
//! would reject is passed through, so the client gets the apiserver's own
//! answer.

use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderValue, Response, StatusCode, header};

use super::outcome::PassReason;
use crate::api::continue_token::{ContinueToken, Format};
use crate::api::media::{Encoding, Shape};
use crate::api::params::{ListOptions, RvMatch};
use crate::api::path::ResourcePath;
use crate::api::request::{ApiRequest, Verb};
use crate::api::selector::Selectors;
use crate::api::status::Status;
use crate::body::{self, Body};
use crate::cache::ResourceCache;
use crate::cache::object::{CachedObject, MetadataItem};
use crate::cache::store::{Serving, Version};
use crate::codec::json::{self, GZIP_MIN, GzipListBody, ListBody, ListItem, gzip as gzip_bytes};
use crate::config::OnTooNew;

/// How cached reads behave.
#[derive(Debug, Clone)]
pub struct ReadPolicy {
    /// How long a "not older than" read waits for the cache.
    pub wait: Duration,
    /// What happens after that.
    pub on_too_new: OnTooNew,
}

/// Why `cache` cannot answer `ar` now, if it cannot (reads and watches alike).
pub fn unservable(cache: &ResourceCache, ar: &ApiRequest) -> Option<PassReason> {
    match cache.store.serving() {
        Serving::Ready => {}
        Serving::Syncing => return Some(PassReason::NotSynced),
        Serving::OverBudget => return Some(PassReason::OverBudget),
        Serving::Uncacheable => return Some(PassReason::NotCacheable),
    }
    match ar.media.media() {
        Some(m) if m.encoding == Encoding::Json => None,
        // Protobuf is not served from the cache yet; Table, YAML, CBOR, 406
        // are the upstream's.
        _ => Some(PassReason::MediaType),
    }
}

/// The shape a request of `verb` gets, if the cache gives it: the apiserver
/// answers a list asked as `PartialObjectMetadata` (or one object asked as a
/// list) with 406, which is the upstream's to give.
pub fn shape_for(ar: &ApiRequest) -> Option<Shape> {
    let shape = ar.media.media()?.shape;
    match (ar.verb, shape) {
        (Verb::Get | Verb::Watch, Shape::Object | Shape::Metadata) => Some(shape),
        (Verb::List, Shape::Object | Shape::MetadataList) => Some(shape),
        _ => None,
    }
}

/// The answer to a get or list from `cache`, or why the upstream must give it.
pub async fn answer(
    cache: &ResourceCache,
    ar: &ApiRequest,
    policy: &ReadPolicy,
) -> Result<Response<Body>, PassReason> {
    if !matches!(ar.verb, Verb::Get | Verb::List) || ar.path.subresource.is_some() {
        return Err(PassReason::Verb);
    }
    if let Some(reason) = unservable(cache, ar) {
        return Err(reason);
    }
    let shape = shape_for(ar).ok_or(PassReason::MediaType)?;
    let opts = ar.options.as_ref().map_err(|_| PassReason::Invalid)?;
    if opts.validate().is_err() {
        return Err(PassReason::Invalid);
    }
    let result = if ar.verb == Verb::Get {
        get(cache, &ar.path, opts, shape, policy).await
    } else {
        list(cache, &ar.path, opts, shape, policy).await
    };
    match result {
        Ok(payload) => Ok(respond(StatusCode::OK, payload, ar.pretty, ar.gzip)),
        Err(Early::Status(s)) => {
            let code = StatusCode::from_u16(s.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            Ok(respond(
                code,
                Payload::Bytes(s.to_bytes()),
                ar.pretty,
                false,
            ))
        }
        Err(Early::Pass(reason)) => Err(reason),
    }
}

/// How a read ends without a payload: the apiserver's error, answered from
/// the cache (a 404, a 410 for an expired continue token, a 504), or passed
/// through.
enum Early {
    Status(Status),
    Pass(PassReason),
}

/// What a hit sends: one object's bytes, or a streamed list.
enum Payload {
    Bytes(Bytes),
    List(ListBody<Arc<CachedObject>>),
    MetadataList(ListBody<MetadataItem>),
}

fn hit(code: StatusCode, body: Body, gzipped: bool) -> Response<Body> {
    let mut resp = crate::api::json_response(code, body);
    if gzipped {
        let h = resp.headers_mut();
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        h.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    }
    resp
}

/// The response for a hit: lists stream (gzipped when large and accepted);
/// pretty-printing (curl) materializes, off the fast path.
fn respond(code: StatusCode, payload: Payload, pretty: bool, gzip: bool) -> Response<Body> {
    let bytes = match payload {
        Payload::List(list) if !pretty => return stream(code, list, gzip),
        Payload::MetadataList(list) if !pretty => return stream(code, list, gzip),
        Payload::List(list) => list.collect(),
        Payload::MetadataList(list) => list.collect(),
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

/// A list streamed as it is written, gzipped when large and accepted.
fn stream<I: ListItem + Unpin + Send + 'static>(
    code: StatusCode,
    list: ListBody<I>,
    gzip: bool,
) -> Response<Body> {
    use http_body_util::BodyExt;
    if gzip && list.estimated_len() >= GZIP_MIN {
        hit(code, GzipListBody::new(list).boxed_unsync(), true)
    } else {
        hit(code, list.boxed_unsync(), false)
    }
}

/// The version a "not older than N" read may use, after waiting for it.
async fn not_older_than(
    cache: &ResourceCache,
    n: u64,
    policy: &ReadPolicy,
) -> Result<Arc<Version>, Early> {
    let cur = cache.store.current();
    if cur.rv >= n {
        return Ok(cur);
    }
    if cache.store.wait_for(n, policy.wait).await {
        return Ok(cache.store.current());
    }
    match policy.on_too_new {
        OnTooNew::Pass => Err(Early::Pass(PassReason::TooNew)),
        OnTooNew::Timeout => Err(Early::Status(Status::too_large_resource_version(
            n,
            cache.store.current().rv,
        ))),
    }
}

async fn get(
    cache: &ResourceCache,
    rp: &ResourcePath,
    opts: &ListOptions,
    shape: Shape,
    policy: &ReadPolicy,
) -> Result<Payload, Early> {
    let version = match opts.resource_version.as_str() {
        "" => return Err(Early::Pass(PassReason::MostRecent)),
        "0" => cache.store.current(),
        rv => {
            let n = rv
                .parse::<u64>()
                .map_err(|_| Early::Pass(PassReason::Invalid))?;
            not_older_than(cache, n, policy).await?
        }
    };
    let name = rp.name.as_deref().unwrap_or_default();
    let key = match &rp.namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    };
    match version.objects.get(key.as_str()) {
        Some(o) if shape == Shape::Metadata => Ok(Payload::Bytes(Bytes::from(
            json::partial_object_metadata(o.metadata()).concat(),
        ))),
        Some(o) => Ok(Payload::Bytes(o.json.clone())),
        None => Err(Early::Status(Status::not_found(
            cache.resource.gvr.resource(),
            name,
        ))),
    }
}

async fn list(
    cache: &ResourceCache,
    rp: &ResourcePath,
    opts: &ListOptions,
    shape: Shape,
    policy: &ReadPolicy,
) -> Result<Payload, Early> {
    let selectors = opts
        .selectors
        .as_ref()
        .map_err(|_| Early::Pass(PassReason::Invalid))?;
    let rv = opts.resource_version.as_str();
    let (version, start) = if !opts.continue_token.is_empty() {
        if !rv.is_empty() && rv != "0" {
            return Err(Early::Pass(PassReason::Invalid));
        }
        let tok = match ContinueToken::decode(&opts.continue_token, Format::R8S) {
            Ok(t) => t,
            Err(e) if e.is_foreign() => return Err(Early::Pass(PassReason::ForeignContinue)),
            Err(e) => return Err(Early::Status(e.into_status(Format::R8S))),
        };
        let version = if tok.rv < 0 {
            cache.store.current()
        } else {
            let expired = || Early::Status(tok.expired(Format::R8S));
            cache.store.at(tok.rv as u64).ok_or_else(expired)?
        };
        (version, Some(tok.start))
    } else if rv.is_empty() {
        return Err(Early::Pass(PassReason::MostRecent));
    } else if rv == "0" {
        (cache.store.current(), None)
    } else {
        let n = rv
            .parse::<u64>()
            .map_err(|_| Early::Pass(PassReason::Invalid))?;
        let exact = opts.rv_match() == Some(RvMatch::Exact)
            || (opts.rv_match().is_none() && opts.limit > 0);
        if exact {
            (
                cache
                    .store
                    .at(n)
                    .ok_or(Early::Pass(PassReason::NotRetained))?,
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
        selectors,
        shape,
    ))
}

/// The list response from pre-serialized items, in key order.
fn assemble(
    cache: &ResourceCache,
    version: &Version,
    namespace: Option<&str>,
    start: Option<String>,
    limit: i64,
    selectors: &Selectors,
    shape: Shape,
) -> Payload {
    let prefix = namespace.map(|ns| format!("{ns}/")).unwrap_or_default();
    let from: Arc<str> = Arc::from(format!("{prefix}{}", start.unwrap_or_default()));
    let mut iter = version
        .objects
        .range((Bound::Included(from), Bound::Unbounded))
        .take_while(|(k, _)| k.starts_with(&prefix));
    let filtered = !selectors.is_empty();
    let (kind, api_version) = match shape {
        Shape::MetadataList => ("PartialObjectMetadataList", json::META_API_VERSION.into()),
        _ => (cache.list_kind.as_str(), cache.resource.gvr.api_version()),
    };
    let head = format!(
        "{{\"kind\":\"{kind}\",\"apiVersion\":\"{api_version}\",\"metadata\":{{\"resourceVersion\":\"{}\"",
        version.rv
    );
    let mut picked = Vec::new();
    let mut last: Option<Arc<str>> = None;
    for (k, o) in iter.by_ref() {
        if filtered && !o.matches(selectors) {
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
            let tok =
                ContinueToken::after(version.rv as i64, &last[prefix.len()..]).encode(Format::R8S);
            out.put_slice(b",\"continue\":\"");
            out.put_slice(tok.as_bytes());
            out.put_u8(b'"');
            if !filtered {
                out.put_slice(format!(",\"remainingItemCount\":{remaining}").as_bytes());
            }
        }
    }
    out.put_slice(b"},\"items\":[");
    let items = picked.into_iter().cloned();
    match shape {
        Shape::MetadataList => Payload::MetadataList(ListBody::new(
            out.freeze(),
            items.map(MetadataItem).collect(),
        )),
        _ => Payload::List(ListBody::new(out.freeze(), items.collect())),
    }
}
