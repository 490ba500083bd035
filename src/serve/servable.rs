//! Whether the cache may answer a request for a cached resource, and from
//! what: the store of its negotiated encoding, the shape and view of its
//! answer, the fields it selects by; or why the upstream must answer. The
//! decision step of both cached paths, reads ([`super::read`]) and watches
//! ([`super::watch`]), so that they decide alike.

use std::sync::Arc;

use http::HeaderValue;

use super::outcome::PassReason;
use crate::api::media::{Choice, MediaType, Shape};
use crate::api::params::ListOptions;
use crate::api::request::{ApiRequest, Verb};
use crate::cache::ResourceCache;
use crate::cache::store::{Serving, Store};
use crate::cache::view::View;
use crate::upstream::proof::{Proofs, Unproven};

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

/// Whether a list or watch in `namespace` of `store` lies inside what it
/// holds: any for a whole resource; for a scoped one (a node's pods, one
/// object) one whose field selector requires the scope's field and value
/// (and its namespace). A get is inside when the object is held (the body
/// step passes the others).
pub fn in_scope(
    store: &Store,
    namespace: Option<&str>,
    opts: &ListOptions,
) -> Result<(), PassReason> {
    let scope = store.scope();
    if scope.is_whole() {
        return Ok(());
    }
    match &opts.selectors {
        Ok(s) if scope.covers(namespace, &s.fields) => Ok(()),
        _ => Err(PassReason::OutOfScope),
    }
}

/// Whether `n`, which the cache did not reach in time, is beyond the
/// upstream too: then r8s answers the 504 the upstream would give after the
/// same wait, instead of passing the read on to wait again (the client
/// would wait twice as long for the same answer). Where the upstream has
/// `n` (the cache lags), or cannot say, the read passes through.
pub async fn too_new_upstream(cache: &ResourceCache, n: u64, proofs: &Proofs) -> bool {
    proofs.upstream_reached(cache, n).await == Some(false)
}
