//! Get and list served from the cache, following the resource version
//! semantics of kube-apiserver's watch cache (`cacher.GetList`: "Any" from
//! the current version, "Not older than" after waiting for it, "Exact" from
//! the state at that version (current, pinned, or rewound with the watch
//! log), pages of one pinned version with continue tokens).
//!
//! Every request for a cached resource ends here answered from a cache
//! version, or with the reason it passes through. Anything the apiserver
//! would reject is passed through, so the client gets the apiserver's own
//! answer.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderValue, Response, StatusCode, header};

use super::outcome::PassReason;
use super::page;
use super::table::{self, TableAsk, TableItem};
use crate::api::continue_token::{ContinueToken, Format};
use crate::api::media::{Choice, Encoding, ErrorEncoding, MediaType, Shape};
use crate::api::params::{ListOptions, RvMatch};
use crate::api::path::ResourcePath;
use crate::api::request::{ApiRequest, Verb};
use crate::api::status::Status;
use crate::body::{self, Body};
use crate::cache::ResourceCache;
use crate::cache::object::CachedObject;
use crate::cache::store::{Serving, Store, Version};
use crate::cache::view::{Shown, View};
use crate::codec::gzip::{GzipList, gzip as gzip_bytes};
use crate::codec::json::{self, GZIP_MIN, ListBody, ListItem};
use crate::codec::protobuf as pb;
use crate::config::OnTooNew;
use crate::upstream::proof::{ConsistentKind, Proofs, Unproven};

/// How cached reads behave.
#[derive(Debug, Clone)]
pub struct ReadPolicy {
    /// How long a "not older than" read waits for the cache.
    pub wait: Duration,
    /// What happens after that.
    pub on_too_new: OnTooNew,
    /// Slots for large lists streaming at once (`read.max_inflight_lists`);
    /// past them a large list is answered 429, as the apiserver's priority
    /// and fairness answers a request it has no seat for.
    pub lists: Arc<tokio::sync::Semaphore>,
}

/// A list at least this large (its estimated bytes) is large: it holds one
/// of `read.max_inflight_lists` slots while it streams. Smaller ones cost
/// too little to count, and are never refused.
pub const LARGE_LIST: usize = 1 << 20;

/// The store that answers `ar` from `cache` (the one holding its negotiated
/// encoding), or why the upstream must (reads and watches alike): the one
/// place that decides whether the cache may answer. A cache stale past
/// `cache.max_staleness_seconds` passes, unless `cache.serve_stale` says to
/// serve it anyway; then the answer carries the returned `Warning`.
pub fn serving_store<'c>(
    cache: &'c ResourceCache,
    ar: &ApiRequest,
) -> Result<(&'c Arc<Store>, Option<HeaderValue>), PassReason> {
    // Tables are printed from the JSON cache; YAML, CBOR and 406 are the
    // upstream's.
    let media = match ar.media {
        Choice::Table(_) => MediaType::JSON,
        m => m.media().ok_or(PassReason::MediaType)?,
    };
    let store = cache
        .store_for(media.encoding)
        .ok_or(PassReason::Encoding)?;
    match store.serving() {
        Serving::Ready if store.staleness().stale() => {
            // An upstream that cannot be heard is asked, not guessed at,
            // unless the operator chose a stale answer over none.
            if !store.staleness().serves_stale() {
                return Err(PassReason::Stale);
            }
            Ok((store, Some(stale_warning(&cache.label, store))))
        }
        Serving::Ready => Ok((store, None)),
        Serving::Syncing => Err(PassReason::NotSynced),
        Serving::OverBudget => Err(PassReason::OverBudget),
        Serving::Uncacheable => Err(PassReason::NotCacheable),
        Serving::Removed => Err(PassReason::Removed),
    }
}

/// The `Warning` on an answer from a stale cache (`cache.serve_stale`), in
/// the form kube-apiserver gives its own warnings (`299 - "..."`), which
/// client-go logs and kubectl prints.
fn stale_warning(label: &str, store: &Store) -> HeaderValue {
    let v = format!(
        "299 - \"r8s: served from a cache of {label} that has heard nothing from the upstream for {} s (cache.serve_stale); it may be out of date\"",
        store.staleness().since().as_secs()
    );
    HeaderValue::from_str(&v).unwrap_or(HeaderValue::from_static(
        "299 - \"r8s: served from a stale cache (cache.serve_stale)\"",
    ))
}

/// The shape a request of `verb` gets, if the cache gives it: the apiserver
/// answers a list asked as `PartialObjectMetadata` (or one object asked as a
/// list) with 406, which is the upstream's to give.
pub fn shape_for(ar: &ApiRequest) -> Option<Shape> {
    let shape = match ar.media {
        // Tables are printed from the objects.
        Choice::Table(_) => Shape::Object,
        m => m.media()?.shape,
    };
    match (ar.verb, shape) {
        (Verb::Get | Verb::Watch, Shape::Object | Shape::Metadata) => Some(shape),
        (Verb::List, Shape::Object | Shape::MetadataList) => Some(shape),
        _ => None,
    }
}

/// What a request whose answer has `shape` shows of each object: its
/// metadata only for metadata-only shapes; without managedFields where the
/// negotiated clause says `drop=metadata.managedFields` (a Table, printed
/// from the objects, shows them whole).
pub fn view_for(ar: &ApiRequest, shape: Shape) -> View {
    View {
        metadata: shape != Shape::Object,
        drop_managed: ar.media.media().is_some_and(|m| m.drop_managed_fields),
    }
}

/// Why a consistent read passes through, as a [`PassReason`].
pub fn unproven(u: Unproven) -> PassReason {
    match u {
        Unproven::Off => PassReason::MostRecent,
        Unproven::Unprovable => PassReason::Unprovable,
        Unproven::Failed => PassReason::Unproven,
    }
}

/// What the cache would answer a get or list from: its store and shape,
/// with its options checked; or why the upstream must answer.
type Servable<'c> = (&'c Arc<Store>, Option<HeaderValue>, View, &'c ListOptions);

fn servable<'c>(cache: &'c ResourceCache, ar: &'c ApiRequest) -> Result<Servable<'c>, PassReason> {
    if !matches!(ar.verb, Verb::Get | Verb::List) || ar.path.subresource.is_some() {
        return Err(PassReason::Verb);
    }
    let (store, warning) = serving_store(cache, ar)?;
    let shape = shape_for(ar).ok_or(PassReason::MediaType)?;
    let opts = ar.options.as_ref().map_err(|_| PassReason::Invalid)?;
    // A request naming an object answered with that object alone (every
    // parsed request is; this is the check that it stays so).
    if opts.validate().is_err() || !ar.confined() {
        return Err(PassReason::Invalid);
    }
    fields_held(cache, store, opts)?;
    Ok((store, warning, view_for(ar, shape), opts))
}

/// Whether `store` holds every field the field selector names. A built-in's
/// fields were checked as the request was parsed. A custom resource's are
/// `metadata.name`, `metadata.namespace` (namespaced only) and the
/// selectable fields its CRD named when its cache started, in its JSON
/// store (its protobuf one holds metadata only): any other passes, for the
/// upstream to select by, or to refuse as not supported.
pub fn fields_held(
    cache: &ResourceCache,
    store: &Store,
    opts: &ListOptions,
) -> Result<(), PassReason> {
    let Ok(selectors) = &opts.selectors else {
        return Ok(());
    };
    let r = &cache.resource;
    match r.gvr.is_builtin()
        || selectors
            .fields
            .labels()
            .all(|l| r.holds(store.encoding(), l))
    {
        true => Ok(()),
        false => Err(PassReason::FieldSelector),
    }
}

/// The answer to a get or list from `cache`, or why the upstream must give
/// it. A consistent LIST (no `resourceVersion`, no `continue`) is answered
/// only once `proofs` show the cache as fresh as the upstream was when it
/// arrived (`read.consistent_lists`), a consistent GET likewise
/// (`read.consistent_gets`).
pub async fn answer(
    cache: &ResourceCache,
    ar: &ApiRequest,
    policy: &ReadPolicy,
    proofs: &Proofs,
) -> Result<Response<Body>, PassReason> {
    let table = table::ask(ar, cache)?;
    let (store, warning, view, opts) = servable(cache, ar)?;
    let encoding = store.encoding();
    let at = Source {
        cache,
        store: store.as_ref(),
        proofs,
        table: table.as_ref(),
    };
    // A consistent read (no version; a list not continuing a page) is
    // answered once proven, at least at the version the proof found.
    let (kind, consistent) = match ar.verb {
        Verb::Get => (ConsistentKind::Get, opts.resource_version.is_empty()),
        _ => (
            ConsistentKind::List,
            opts.resource_version.is_empty() && opts.continue_token.is_empty(),
        ),
    };
    let proven = if consistent {
        Some(proofs.prove(cache, store, kind).await.map_err(unproven)?)
    } else {
        None
    };
    let result = if ar.verb == Verb::Get {
        get(at, &ar.path, opts, view, policy, proven).await
    } else {
        list(at, &ar.path, opts, view, policy, proven).await
    };
    let pretty = ar.pretty && encoding == Encoding::Json;
    let mut resp = answered(result, &policy.lists, encoding, pretty, ar)?;
    if let Some(w) = warning {
        resp.headers_mut().insert(header::WARNING, w);
    }
    Ok(resp)
}

/// The response for a read's result.
fn answered(
    result: Result<Payload, Early>,
    slots: &Arc<tokio::sync::Semaphore>,
    encoding: Encoding,
    pretty: bool,
    ar: &ApiRequest,
) -> Result<Response<Body>, PassReason> {
    match result.and_then(|payload| admit(payload, slots)) {
        Ok(payload) => Ok(respond(StatusCode::OK, payload, encoding, pretty, ar.gzip)),
        // Errors negotiate as `ErrorNegotiated` does (no `as=` transform);
        // curl's are pretty-printed JSON, as the apiserver's.
        Err(Early::Status(s)) if !(pretty && ar.errors == ErrorEncoding::Json) => {
            Ok(s.into_response_as(ar.errors))
        }
        Err(Early::Status(s)) => {
            let code = StatusCode::from_u16(s.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut resp = respond(
                code,
                Payload::Bytes(s.to_bytes()),
                Encoding::Json,
                true,
                false,
            );
            if let Some(secs) = s.retry_after {
                resp.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(secs));
            }
            Ok(resp)
        }
        Err(Early::Pass(reason)) => Err(reason),
    }
}

/// A large list takes a slot of `read.max_inflight_lists` for as long as
/// it streams, or is answered 429 when none is free.
fn admit(payload: Payload, slots: &Arc<tokio::sync::Semaphore>) -> Result<Payload, Early> {
    let len = match &payload {
        Payload::List(l) => l.estimated_len(),
        Payload::Shown(l) => l.estimated_len(),
        Payload::Table(l) => l.estimated_len(),
        Payload::Bytes(_) => return Ok(payload),
    };
    if len < LARGE_LIST {
        return Ok(payload);
    }
    let Ok(slot) = slots.clone().try_acquire_owned() else {
        crate::metrics::list_rejected();
        return Err(Early::Status(Status::too_many_requests()));
    };
    Ok(match payload {
        Payload::List(l) => Payload::List(l.holding(slot)),
        Payload::Shown(l) => Payload::Shown(l.holding(slot)),
        Payload::Table(l) => Payload::Table(l.holding(slot)),
        Payload::Bytes(b) => Payload::Bytes(b),
    })
}

/// The resource and the one of its stores a read is answered from.
#[derive(Clone, Copy)]
struct Source<'c> {
    cache: &'c ResourceCache,
    store: &'c Store,
    /// Asked whether the upstream has a version the store has not reached.
    proofs: &'c Proofs,
    /// The Table asked for, if one was.
    table: Option<&'c TableAsk>,
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
    Shown(ListBody<Shown>),
    Table(ListBody<TableItem>),
}

fn hit(code: StatusCode, body: Body, encoding: Encoding, gzipped: bool) -> Response<Body> {
    let mut resp = crate::api::json_response(code, body);
    if encoding == Encoding::Protobuf {
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(crate::api::media::PROTOBUF),
        );
    }
    if gzipped {
        crate::api::media::mark_gzipped(resp.headers_mut());
    }
    resp
}

/// The response for a hit: lists stream (gzipped when large and accepted);
/// pretty-printing (curl) materializes, off the fast path.
fn respond(
    code: StatusCode,
    payload: Payload,
    encoding: Encoding,
    pretty: bool,
    gzip: bool,
) -> Response<Body> {
    let bytes = match payload {
        Payload::List(list) if !pretty => return stream(code, list, encoding, gzip),
        Payload::Shown(list) if !pretty => return stream(code, list, encoding, gzip),
        Payload::Table(list) if !pretty => return stream(code, list, encoding, gzip),
        Payload::List(list) => list.collect(),
        Payload::Shown(list) => list.collect(),
        Payload::Table(list) => list.collect(),
        Payload::Bytes(b) => b,
    };
    let compress = gzip && bytes.len() >= GZIP_MIN;
    // JSON ends with a newline, as Go's encoder ends every body (a streamed
    // list's comes with its tail).
    let bytes = match encoding {
        Encoding::Protobuf => bytes,
        Encoding::Json if pretty => match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Ok(v) => {
                let mut s = serde_json::to_vec_pretty(&v).expect("JSON serializes");
                s.push(b'\n');
                Bytes::from(s)
            }
            Err(_) => bytes,
        },
        Encoding::Json if !compress => return hit(code, body::full_line(bytes), encoding, false),
        Encoding::Json => {
            let mut line = Vec::with_capacity(bytes.len() + 1);
            line.extend_from_slice(&bytes);
            line.push(b'\n');
            Bytes::from(line)
        }
    };
    if gzip && bytes.len() >= GZIP_MIN {
        return hit(code, body::full(gzip_bytes(&bytes)), encoding, true);
    }
    hit(code, body::full(bytes), encoding, false)
}

/// A list streamed as it is written, gzipped when large and accepted.
fn stream<I: ListItem + Unpin + Send + 'static>(
    code: StatusCode,
    list: ListBody<I>,
    encoding: Encoding,
    gzip: bool,
) -> Response<Body> {
    use http_body_util::BodyExt;
    if gzip && list.estimated_len() >= GZIP_MIN {
        hit(code, GzipList::new(list).boxed_unsync(), encoding, true)
    } else {
        hit(code, list.boxed_unsync(), encoding, false)
    }
}

/// The version a "not older than N" read may use, after waiting for it.
async fn not_older_than(
    at: Source<'_>,
    n: u64,
    policy: &ReadPolicy,
) -> Result<Arc<Version>, Early> {
    let store = at.store;
    let cur = store.current();
    if cur.rv >= n {
        return Ok(cur);
    }
    if store.wait_for(n, policy.wait).await {
        return Ok(store.current());
    }
    let too_large = || Status::too_large_resource_version(n, store.current().rv);
    match policy.on_too_new {
        OnTooNew::Pass if too_new_upstream(at.cache, n, at.proofs).await => {
            Err(Early::Status(too_large()))
        }
        OnTooNew::Pass => Err(Early::Pass(PassReason::TooNew)),
        OnTooNew::Timeout => Err(Early::Status(too_large())),
    }
}

/// Whether `n`, which the cache did not reach in time, is beyond the
/// upstream too: then r8s answers the 504 the upstream would give after the
/// same wait, instead of passing the read on to wait again (the client
/// would wait twice as long for the same answer). Where the upstream has
/// `n` (the cache lags), or cannot say, the read passes through.
pub(super) async fn too_new_upstream(cache: &ResourceCache, n: u64, proofs: &Proofs) -> bool {
    proofs.upstream_reached(cache, n).await == Some(false)
}

async fn get(
    at: Source<'_>,
    rp: &ResourcePath,
    opts: &ListOptions,
    view: View,
    policy: &ReadPolicy,
    proven: Option<u64>,
) -> Result<Payload, Early> {
    let version = match opts.resource_version.as_str() {
        "" => {
            let x = proven.ok_or(Early::Pass(PassReason::MostRecent))?;
            not_older_than(at, x, policy).await?
        }
        "0" => at.store.current(),
        rv => {
            let n = rv
                .parse::<u64>()
                .map_err(|_| Early::Pass(PassReason::Invalid))?;
            not_older_than(at, n, policy).await?
        }
    };
    let name = rp.name.as_deref().unwrap_or_default();
    let key = match &rp.namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    };
    match version.objects.get(key.as_str()) {
        Some(o) if at.table.is_some() => at
            .table
            .and_then(|t| t.one(o))
            .map(Payload::Bytes)
            .ok_or(Early::Pass(PassReason::NoPrinter)),
        Some(o) => Ok(Payload::Bytes(o.body_as(view))),
        None => Err(Early::Status(Status::not_found_in(
            at.cache.resource.gvr.group(),
            at.cache.resource.gvr.resource(),
            name,
        ))),
    }
}

/// A list; `proven`: a consistent one's proof, the version it must be "not
/// older than".
async fn list(
    at: Source<'_>,
    rp: &ResourcePath,
    opts: &ListOptions,
    view: View,
    policy: &ReadPolicy,
    proven: Option<u64>,
) -> Result<Payload, Early> {
    let selectors = opts
        .selectors
        .as_ref()
        .map_err(|_| Early::Pass(PassReason::Invalid))?;
    let rv = opts.resource_version.as_str();
    let (version, resume) = if !opts.continue_token.is_empty() {
        // The token is read first, as the apiserver's storage does
        // (`storage.ValidateListOptions`): a foreign one is the upstream's
        // to judge, one of r8s's with a version gets the apiserver's 400.
        let tok = match ContinueToken::decode(&opts.continue_token, Format::R8S) {
            Ok(t) => t,
            Err(e) if e.is_foreign() => return Err(Early::Pass(PassReason::ForeignContinue)),
            Err(e) => return Err(Early::Status(e.into_status(Format::R8S))),
        };
        if !rv.is_empty() && rv != "0" {
            return Err(Early::Status(Status::bad_request(
                "specifying resource version is not allowed when using continue",
            )));
        }
        let version = if tok.rv < 0 {
            at.store.current()
        } else {
            let expired = || Early::Status(tok.expired(Format::R8S));
            at.store.at(tok.rv as u64).ok_or_else(expired)?
        };
        (version, Some(tok))
    } else if rv.is_empty() {
        let x = proven.ok_or(Early::Pass(PassReason::MostRecent))?;
        (not_older_than(at, x, policy).await?, None)
    } else if rv == "0" {
        (at.store.current(), None)
    } else {
        let n = rv
            .parse::<u64>()
            .map_err(|_| Early::Pass(PassReason::Invalid))?;
        let exact = opts.rv_match() == Some(RvMatch::Exact)
            || (opts.rv_match().is_none() && opts.limit > 0);
        if exact {
            (
                at.store.at(n).ok_or(Early::Pass(PassReason::NotRetained))?,
                None,
            )
        } else {
            (not_older_than(at, n, policy).await?, None)
        }
    };
    let ask = page::Ask {
        namespace: rp.namespace.as_deref(),
        resume,
        limit: opts.limit,
        selectors,
        view,
    };
    assemble(at, &version, ask)
}

/// The list response from pre-serialized items, in key order.
fn assemble(at: Source<'_>, version: &Arc<Version>, ask: page::Ask<'_>) -> Result<Payload, Early> {
    let (cache, encoding, view) = (at.cache, at.store.encoding(), ask.view);
    let filtered = !ask.selectors.is_empty();
    let shard = ask.selectors.shard.as_ref();
    let page::Cut {
        picked,
        items_len,
        cont,
        remaining: remaining_count,
    } = page::cut(at.store, version, ask);
    let (kind, api_version) = if view.metadata {
        ("PartialObjectMetadataList", json::META_API_VERSION.into())
    } else {
        (cache.list_kind.as_str(), cache.resource.gvr.api_version())
    };
    // Every row is printed before the answer starts, or none is.
    if at.table.is_some_and(|t| !t.prints(&picked)) {
        return Err(Early::Pass(PassReason::NoPrinter));
    }
    // `shardInfo` echoes the selector on built-in lists (1.36 writes none
    // on a custom resource's: its unstructured lists drop it).
    let shard_info = shard
        .filter(|_| cache.resource.gvr.is_builtin())
        .map(|s| s.canonical());
    let head = |items_len: usize| match encoding {
        Encoding::Json => {
            let mut out = BytesMut::with_capacity(256);
            out.put_slice(
                format!(
                    "{{\"kind\":\"{kind}\",\"apiVersion\":\"{api_version}\",\"metadata\":{{\"resourceVersion\":\"{}\"",
                    version.rv
                )
                .as_bytes(),
            );
            if let Some(tok) = &cont {
                out.put_slice(b",\"continue\":\"");
                out.put_slice(tok.as_bytes());
                out.put_u8(b'"');
            }
            if let Some(n) = remaining_count {
                out.put_slice(format!(",\"remainingItemCount\":{n}").as_bytes());
            }
            if let Some(selector) = shard_info {
                // (A canonical selector has nothing JSON escapes.)
                out.put_slice(b",\"shardInfo\":{\"selector\":\"");
                out.put_slice(selector.as_bytes());
                out.put_slice(b"\"}");
            }
            out.put_slice(b"},\"items\":[");
            out.freeze()
        }
        Encoding::Protobuf => {
            let mut meta = pb::list_meta(
                &version.rv.to_string(),
                cont.as_deref().unwrap_or(""),
                remaining_count,
            );
            if let Some(selector) = shard_info {
                pb::shard_info(&mut meta, selector);
            }
            pb::list_head(&api_version, kind, &meta, items_len)
        }
    };
    if let Some(ask) = at.table {
        let head = ask.head(version.rv, cont.as_deref(), remaining_count);
        let items: Vec<TableItem> = picked
            .into_iter()
            .map(|object| TableItem {
                object,
                ask: ask.clone(),
            })
            .collect();
        let len = items.iter().map(ListItem::item_len).sum();
        return Ok(Payload::Table(ListBody::new(head, items, len, false)));
    }
    let protobuf = encoding == Encoding::Protobuf;
    Ok(if view == View::OBJECT {
        let list = ListBody::new(head(items_len), picked, items_len, protobuf);
        Payload::List(if filtered { list } else { list.contiguous() })
    } else {
        let items: Vec<Shown> = picked
            .into_iter()
            .map(|object| Shown { object, view })
            .collect();
        let list = ListBody::new(head(items_len), items, items_len, protobuf);
        Payload::Shown(if filtered { list } else { list.contiguous() })
    })
}
