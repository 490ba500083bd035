//! Get and list with kube-apiserver's resource version semantics, paging,
//! selectors and Table output.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use http::{Response, StatusCode};
use serde_json::{Value, json};

use crate::resources::ResourceDef;
use crate::schema;
use crate::state::{Req, Sim, json_response, to_bytes};
use crate::store::{Obj, key};
use crate::table::{IncludeObject, table};
use r8s::api::continue_token::{ContinueToken, Format as TokenFormat};
use r8s::api::media::{Choice, Encoding, Shape};
use r8s::api::params::{ListOptions, RvMatch, parse_rv};
use r8s::api::path::ResourcePath;
use r8s::api::selector::{FieldSelector, LabelSelector, field_value, supported_fields};
use r8s::api::shard::{ShardKey, ShardSelector, fnv1a};
use r8s::api::status::Status;
use r8s::body::Body;
use r8s::codec::json::{META_API_VERSION, partial_object_metadata, top_level_value};

/// The representation a client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Plain JSON objects.
    Json,
    /// Only their metadata: `PartialObjectMetadata` (a list's items, a watch's
    /// objects) in a `PartialObjectMetadataList` for a list.
    Metadata,
    /// Objects in protobuf.
    Protobuf,
    /// Only their metadata, in protobuf.
    ProtobufMetadata,
    /// `meta.k8s.io` Table (`v1` or `v1beta1`), with row objects as given.
    Table(&'static str, IncludeObject),
}

/// What the request's `Accept` gets (as kube-apiserver negotiates it; the sim
/// answers YAML and what it does not implement with 406) for one object (`list`: false; a watch's events are objects) or a
/// list. Asking for the wrong metadata-only shape is the apiserver's 406.
pub fn negotiate(r: &Req, def: &ResourceDef, list: bool) -> Result<Format, Status> {
    let include = match r.query.get("includeObject") {
        Some("None") => IncludeObject::None,
        Some("Object") => IncludeObject::Object,
        _ => IncludeObject::Metadata,
    };
    let not_acceptable = |m: String| Status::new(406, "NotAcceptable", m);
    match r.media {
        Choice::Media(m) => match (m.shape, list) {
            (Shape::Object, _) if m.encoding == Encoding::Protobuf => {
                if !schema::knows(&def.kind) {
                    return Err(super::protobuf::no_protobuf(def));
                }
                Ok(Format::Protobuf)
            }
            (Shape::Object, _) => Ok(Format::Json),
            (Shape::Metadata, false) | (Shape::MetadataList, true)
                if m.encoding == Encoding::Protobuf =>
            {
                Ok(Format::ProtobufMetadata)
            }
            (Shape::Metadata, false) | (Shape::MetadataList, true) => Ok(Format::Metadata),
            (Shape::Metadata, true) => Err(not_acceptable(format!(
                "you requested PartialObjectMetadata, but the requested object is a list ({})",
                go_type(def, true)
            ))),
            (Shape::MetadataList, false) => Err(not_acceptable(format!(
                "you requested PartialObjectMetadataList, but the requested object is not a list ({})",
                go_type(def, false)
            ))),
        },
        Choice::Table(v) => Ok(Format::Table(v, include)),
        Choice::Yaml | Choice::Other | Choice::NotAcceptable => Err(not_acceptable(
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf".into(),
        )),
    }
}

/// The Go type kube-apiserver names in a 406 for a metadata-only shape
/// (`%T` of its storage's object: `*core.PodList`, `*unstructured.Unstructured`).
fn go_type(def: &ResourceDef, list: bool) -> String {
    let suffix = if list { "List" } else { "" };
    if !def.gvr.is_builtin() {
        return format!("*unstructured.Unstructured{suffix}");
    }
    let pkg = match def.gvr.group() {
        "" => "core",
        g => g.split('.').next().unwrap_or(g),
    };
    format!("*{pkg}.{}{suffix}", def.kind)
}

/// An object's `PartialObjectMetadata`: its metadata bytes, not re-serialized.
pub fn metadata_form(full: &[u8]) -> Bytes {
    let range = top_level_value(full, "metadata").unwrap_or(0..0);
    Bytes::from(partial_object_metadata(&full[range]).concat())
}

/// Whether the request's negotiated clause says `drop=metadata.managedFields`
/// (a Table's objects are shown whole).
pub fn drops_managed_fields(r: &Req) -> bool {
    r.media.media().is_some_and(|m| m.drop_managed_fields)
}

/// A request's selectors: labels, fields, and the shard (`shardSelector`,
/// served as 1.36 serves it with `ShardedListAndWatch` on).
pub struct Selectors {
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `shardSelector`, where given.
    pub shard: Option<ShardSelector>,
}

impl Selectors {
    /// Whether an object passes them.
    pub fn pass(&self, obj: &Value) -> bool {
        passes(obj, &self.labels, &self.fields)
            && self.shard.as_ref().is_none_or(|s| {
                let field = match s.key() {
                    ShardKey::Uid => "uid",
                    ShardKey::Namespace => "namespace",
                };
                s.selects(fnv1a(obj["metadata"][field].as_str().unwrap_or("")))
            })
    }

    /// Whether they pass everything.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty() && self.shard.is_none()
    }
}

/// Parses the selectors of a request (400 on bad syntax or unsupported
/// fields; a bad shard selector is 1.36's reason-less 500).
pub fn selectors(def: &ResourceDef, opts: &ListOptions) -> Result<Selectors, Status> {
    let shard = match &opts.shard_selector {
        Ok(s) => s.clone(),
        Err(bad) => return Err(Status::internal(bad.message.clone())),
    };
    let (labels, fields) = label_and_field(def, opts)?;
    Ok(Selectors {
        labels,
        fields,
        shard,
    })
}

fn label_and_field(
    def: &ResourceDef,
    opts: &ListOptions,
) -> Result<(LabelSelector, FieldSelector), Status> {
    let l = LabelSelector::parse(&opts.label_selector).map_err(Status::bad_request)?;
    let f = FieldSelector::parse(&opts.field_selector, supported_fields(def.gvr.resource()))
        .map_err(Status::bad_request)?;
    // A cluster-scoped custom resource has no namespace field
    // (apiextensions-apiserver's `objectMetaFieldsSet`).
    if !def.namespaced && !def.gvr.is_builtin() && f.names("metadata.namespace") {
        return Err(Status::bad_request(
            "field label not supported: metadata.namespace",
        ));
    }
    Ok((l, f))
}

/// Whether an object passes a request's selectors.
pub fn passes(obj: &Value, l: &LabelSelector, f: &FieldSelector) -> bool {
    l.matches_object(obj) && f.matches(|k| field_value(obj, k))
}

/// Waits for a "not older than" revision, then 504s like the watch cache.
async fn wait_not_older_than(sim: &Sim, rv: u64) -> Result<(), Status> {
    if rv <= sim.store.current_rv() {
        return Ok(());
    }
    if sim.store.wait_for_rv(rv, sim.config.future_rv_wait).await {
        Ok(())
    } else {
        Err(Status::too_large_resource_version(
            rv,
            sim.store.current_rv(),
        ))
    }
}

/// `GET .../{name}` (and `.../{name}/status`).
pub async fn get(
    sim: &Sim,
    res: usize,
    rp: &ResourcePath,
    r: &Req,
    opts: &ListOptions,
) -> Result<Response<Body>, Status> {
    let def = sim.resources.def(res);
    let def = &*def;
    let res = def.storage;
    let name = rp.name.as_deref().unwrap_or_default();
    let format = negotiate(r, def, false)?;
    match opts.resource_version.as_str() {
        "" | "0" => {}
        rv => wait_not_older_than(sim, parse_rv(rv).map_err(Status::internal)?).await?,
    }
    let obj = sim
        .store
        .get(res, &key(rp.namespace.as_deref(), name))
        .ok_or_else(|| Status::not_found_in(def.gvr.group(), def.gvr.resource(), name))?
        .shown(def, drops_managed_fields(r));
    let bytes = match format {
        Format::Json => obj.full.clone(),
        Format::Metadata => metadata_form(&obj.full),
        Format::Protobuf => {
            let body = super::protobuf::body_of(def, &obj)
                .ok_or_else(|| super::protobuf::no_protobuf(def))?;
            return Ok(protobuf_response(body.clone()));
        }
        Format::ProtobufMetadata => {
            return Ok(protobuf_response(super::protobuf::metadata_body(def, &obj)));
        }
        Format::Table(v, inc) => to_bytes(&table(def, v, inc, &obj.rv.to_string(), None, &[obj])),
    };
    Ok(json_response(StatusCode::OK, bytes))
}

/// Which state a list reads.
enum ReadAt {
    Current,
    Exact(u64),
    Continue(ContinueToken),
}

/// `GET` on a collection.
pub async fn list(
    sim: &Sim,
    res: usize,
    rp: &ResourcePath,
    r: &Req,
    opts: &ListOptions,
) -> Result<Response<Body>, Status> {
    let def = sim.resources.def(res);
    let def = &*def;
    let res = def.storage;
    opts.validate()?;
    let format = negotiate(r, def, true)?;
    let sel = selectors(def, opts)?;
    let rv = opts.resource_version.as_str();
    let at = if !opts.continue_token.is_empty() {
        // The token first, then the version (`storage.ValidateListOptions`).
        let tok = ContinueToken::decode(&opts.continue_token, TokenFormat::APISERVER)
            .map_err(|e| e.into_status(TokenFormat::APISERVER))?;
        if !rv.is_empty() && rv != "0" {
            return Err(Status::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        ReadAt::Continue(tok)
    } else if rv.is_empty() || rv == "0" {
        ReadAt::Current
    } else {
        let exact = opts.rv_match() == Some(RvMatch::Exact)
            || (opts.rv_match().is_none() && opts.limit > 0);
        // As 1.36's cacher answers both (1.21's etcd read answered 500s:
        // the bare parse error, and "required revision is a future revision").
        let n = parse_rv(rv)
            .map_err(|m| Status::bad_request(format!("invalid resource version: {m}")))?;
        if exact {
            if n > sim.store.current_rv() {
                wait_not_older_than(sim, n).await?;
            }
            ReadAt::Exact(n)
        } else {
            wait_not_older_than(sim, n).await?;
            ReadAt::Current
        }
    };
    let everything = sel.is_empty();
    let keep = |o: &Obj| everything || sel.pass(&o.value());
    let ns = rp.namespace.as_deref();
    let (list_rv, snapshot, start) = match at {
        // The current state is paged where it lies, as etcd reads a key
        // range with a limit (no copy of the whole resource per request).
        ReadAt::Current => {
            let (rv, page) = sim
                .store
                .with_current(res, |m| paginate(m, ns, None, opts.limit, keep));
            if opts.resource_version.is_empty() {
                sim.consistent_read(rv);
            }
            return list_answer(def, format, drops_managed_fields(r), rv, page, &sel);
        }
        ReadAt::Exact(n) => match sim.store.snapshot(res, Some(n)) {
            Ok((rv, m)) => (rv, m, None),
            Err(_) => {
                return Err(Status::expired(
                    "The resourceVersion for the provided list is too old.",
                ));
            }
        },
        ReadAt::Continue(tok) => {
            let at = (tok.rv > 0).then_some(tok.rv as u64);
            match sim.store.snapshot(res, at) {
                Ok((rv, m)) => (rv, m, Some(tok.start)),
                Err(_) => return Err(tok.expired(TokenFormat::APISERVER)),
            }
        }
    };
    let page = paginate(&snapshot, ns, start, opts.limit, keep);
    list_answer(def, format, drops_managed_fields(r), list_rv, page, &sel)
}

/// The answer to a list: one page of the state at `list_rv`, in `format`.
fn list_answer(
    def: &ResourceDef,
    format: Format,
    drop: bool,
    list_rv: u64,
    page: Page,
    sel: &Selectors,
) -> Result<Response<Body>, Status> {
    let mut page = page;
    if def.custom || drop {
        for o in &mut page.items {
            *o = o.shown(def, drop);
        }
    }
    let cont = page
        .last_key
        .as_ref()
        .map(|k| ContinueToken::after(list_rv as i64, k).encode(TokenFormat::APISERVER));
    // 1.36 counts the whole collection's rest with only a shard selector.
    let remaining = if sel.labels.is_empty() && sel.fields.is_empty() {
        page.remaining
    } else {
        None
    };
    // `shardInfo` on a built-in's list (1.36's unstructured lists drop it).
    let shard_info = sel
        .shard
        .as_ref()
        .filter(|_| !def.custom)
        .map(|s| s.canonical());
    let bytes = match format {
        Format::Protobuf | Format::ProtobufMetadata => {
            return Ok(protobuf_response(super::protobuf::list_body(
                def,
                format == Format::ProtobufMetadata,
                &list_rv.to_string(),
                cont.as_deref(),
                remaining,
                shard_info,
                &page.items,
            )?));
        }
        Format::Json | Format::Metadata => list_json(
            def,
            format == Format::Metadata,
            &list_rv.to_string(),
            cont.as_deref(),
            remaining,
            shard_info,
            &page.items,
        ),
        Format::Table(v, inc) => {
            let mut t = table(
                def,
                v,
                inc,
                &list_rv.to_string(),
                cont.as_deref(),
                &page.items,
            );
            if let Some(n) = remaining {
                t["metadata"]["remainingItemCount"] = json!(n);
            }
            to_bytes(&t)
        }
    };
    Ok(json_response(StatusCode::OK, bytes))
}

/// A 200 with a protobuf body.
fn protobuf_response(body: Bytes) -> Response<Body> {
    let mut resp = r8s::api::json_response(StatusCode::OK, r8s::body::full(body));
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(r8s::api::media::PROTOBUF),
    );
    resp
}

/// One page of a list.
pub struct Page {
    /// The items, in key order.
    pub items: Vec<Arc<Obj>>,
    /// Key (relative to the list prefix) of the last item, when more follow.
    pub last_key: Option<String>,
    /// Keys after the last item, when more follow.
    pub remaining: Option<usize>,
}

/// Walks `map` in key order within `namespace`, from `start` (inclusive, relative
/// key), keeping up to `limit` (≤ 0: all) matching objects.
pub fn paginate(
    map: &BTreeMap<String, Arc<Obj>>,
    namespace: Option<&str>,
    start: Option<String>,
    limit: i64,
    keep: impl Fn(&Obj) -> bool,
) -> Page {
    let prefix = namespace.map(|ns| format!("{ns}/")).unwrap_or_default();
    let from = format!("{prefix}{}", start.unwrap_or_default());
    let mut iter = map
        .range::<String, _>((Bound::Included(&from), Bound::Unbounded))
        .take_while(|(k, _)| k.starts_with(&prefix));
    let mut items = Vec::new();
    let mut last = None;
    for (k, o) in iter.by_ref() {
        if keep(o) {
            items.push(o.clone());
            last = Some(k.clone());
            if limit > 0 && items.len() as i64 >= limit {
                break;
            }
        }
    }
    let more = limit > 0 && items.len() as i64 >= limit;
    let remaining = if more { iter.count() } else { 0 };
    if more && remaining > 0 {
        Page {
            items,
            last_key: last.map(|k| k[prefix.len()..].to_string()),
            remaining: Some(remaining),
        }
    } else {
        Page {
            items,
            last_key: None,
            remaining: None,
        }
    }
}

/// `{"kind":"PodList",...,"items":[...]}` from pre-serialized items.
pub fn list_json(
    def: &ResourceDef,
    metadata_only: bool,
    rv: &str,
    cont: Option<&str>,
    remaining: Option<usize>,
    shard_info: Option<&str>,
    items: &[Arc<Obj>],
) -> Bytes {
    let mut meta = serde_json::Map::new();
    meta.insert("resourceVersion".into(), json!(rv));
    if let Some(c) = cont {
        meta.insert("continue".into(), json!(c));
    }
    if let Some(n) = remaining {
        meta.insert("remainingItemCount".into(), json!(n));
    }
    if let Some(s) = shard_info {
        meta.insert("shardInfo".into(), json!({ "selector": s }));
    }
    let (kind, api_version) = if metadata_only {
        (
            "PartialObjectMetadata".to_string(),
            META_API_VERSION.to_string(),
        )
    } else {
        (def.kind.to_string(), def.gvr.api_version())
    };
    let head = format!(
        "{{\"kind\":\"{kind}List\",\"apiVersion\":\"{api_version}\",\"metadata\":{},\"items\":[",
        Value::Object(meta)
    );
    let size: usize = items.iter().map(|o| o.item_len() + 1).sum();
    let mut out = BytesMut::with_capacity(head.len() + size + 2);
    out.put_slice(head.as_bytes());
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            out.put_u8(b',');
        }
        if metadata_only {
            out.put_slice(&metadata_form(&o.full));
        } else {
            o.write_item(&mut out);
        }
    }
    out.put_slice(b"]}");
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Mutation, Store};

    #[test]
    fn should_page_in_key_order_with_remaining_count() {
        let s = Store::new(100, crate::catalog::Catalog::default().items_typed());
        for (ns, n) in [("a", "x"), ("a", "y"), ("a-b", "z"), ("b", "w")] {
            let v = json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": n, "namespace": ns}});
            s.mutate(1, &key(Some(ns), n), |_, _| Ok(Mutation::Put(v)))
                .unwrap();
        }
        let (_, m) = s.snapshot(1, None).unwrap();
        let p = paginate(&m, None, None, 2, |_| true);
        let names: Vec<_> = p
            .items
            .iter()
            .map(|o| o.value()["metadata"]["name"].clone())
            .collect();
        assert_eq!(
            names,
            vec![json!("z"), json!("x")],
            "a-b/z sorts before a/x"
        );
        assert_eq!(p.last_key.as_deref(), Some("a/x"));
        assert_eq!(p.remaining, Some(2));
        let p = paginate(&m, Some("a"), Some("x\u{0}".into()), 5, |_| true);
        assert_eq!(p.items.len(), 1);
        assert!(p.last_key.is_none());
    }
}
