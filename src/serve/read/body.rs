//! The body step: what a read of a snapshot sends. A get sends its object
//! (or a Table row of it), or the apiserver's 404; a list sends a page cut
//! from the snapshot ([`crate::serve::page`]) behind its head, written by
//! the codec of its encoding, items streamed as they were cached.

use std::sync::Arc;

use super::steps::{Built, Decided, Early, Payload, Read, Snapshot};
use crate::api::continue_token::ContinueToken;
use crate::api::media::Encoding;
use crate::api::status::Status;
use crate::cache::store::Version;
use crate::cache::view::{Shown, View};
use crate::codec::json::{self, ListBody, ListItem};
use crate::codec::{ListMeta, protobuf as pb};
use crate::serve::outcome::PassReason;
use crate::serve::page;
use crate::serve::table::TableItem;

/// The body of the read of `snapshot`.
pub(super) fn body(snapshot: Snapshot<'_>) -> Built {
    let payload = match snapshot.decided.read {
        Read::Get => object(&snapshot.decided, &snapshot.version),
        Read::List => list(&snapshot.decided, &snapshot.version, snapshot.resume),
    };
    Built {
        payload,
        reply: snapshot.decided.reply,
    }
}

/// The object a get names, shown as asked.
fn object(d: &Decided<'_>, version: &Version) -> Result<Payload, Early> {
    let name = d.path.name.as_deref().unwrap_or_default();
    let found = match &d.path.namespace {
        Some(ns) => version.objects.get(format!("{ns}/{name}").as_str()),
        None => version.objects.get(name),
    };
    match found {
        Some(o) => match &d.table {
            Some(t) => t
                .one(o)
                .map(Payload::Bytes)
                .ok_or(Early::Pass(PassReason::NoPrinter)),
            None => Ok(Payload::Bytes(o.body_as(d.view))),
        },
        // A scoped cache (a node's pods) holds only some: another's is the
        // upstream's to answer, never a 404 from here.
        None if !d.store.scope().is_whole() => Err(Early::Pass(PassReason::OutOfScope)),
        None => Err(Early::Status(Status::not_found_in(
            d.cache.resource.gvr.group(),
            d.cache.resource.gvr.resource(),
            name,
        ))),
    }
}

/// A list's page, from pre-serialized items in key order.
fn list(
    d: &Decided<'_>,
    version: &Arc<Version>,
    resume: Option<ContinueToken>,
) -> Result<Payload, Early> {
    let (cache, view) = (d.cache, d.view);
    let selectors = d
        .opts
        .selectors
        .as_ref()
        .map_err(|_| Early::Pass(PassReason::Invalid))?;
    let ask = page::Ask {
        namespace: d.path.namespace.as_deref(),
        resume,
        limit: d.opts.limit,
        selectors,
        view,
    };
    let page::Cut {
        picked,
        items_len,
        cont,
        remaining,
    } = page::cut(d.store, version, ask);
    // Every row is printed before the answer starts, or none is.
    if d.table.as_ref().is_some_and(|t| !t.prints(&picked)) {
        return Err(Early::Pass(PassReason::NoPrinter));
    }
    if let Some(ask) = &d.table {
        let head = ask.head(version.rv, cont.as_deref(), remaining);
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
    let (kind, api_version) = if view.metadata {
        ("PartialObjectMetadataList", json::META_API_VERSION.into())
    } else {
        (cache.list_kind.as_str(), cache.resource.gvr.api_version())
    };
    // `shardInfo` echoes the selector on built-in lists (1.36 writes none
    // on a custom resource's: its unstructured lists drop it).
    let shard = selectors
        .shard
        .as_ref()
        .filter(|_| cache.resource.gvr.is_builtin())
        .map(|s| s.canonical());
    let meta = ListMeta {
        rv: version.rv,
        cont: cont.as_deref(),
        remaining,
        shard,
    };
    let protobuf = d.reply.encoding == Encoding::Protobuf;
    let head = match protobuf {
        true => pb::list_head_of(&api_version, kind, &meta, items_len),
        false => json::list_head(kind, &api_version, &meta),
    };
    let filtered = !selectors.is_empty();
    Ok(if view == View::OBJECT {
        let list = ListBody::new(head, picked, items_len, protobuf);
        Payload::List(if filtered { list } else { list.contiguous() })
    } else {
        let items: Vec<Shown> = picked
            .into_iter()
            .map(|object| Shown { object, view })
            .collect();
        let list = ListBody::new(head, items, items_len, protobuf);
        Payload::Shown(if filtered { list } else { list.contiguous() })
    })
}
