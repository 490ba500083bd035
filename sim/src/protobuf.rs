//! The sim's protobuf: its answers to protobuf clients (objects, lists,
//! metadata-only forms and bookmarks, encoded from its JSON through
//! [`super::schema`] in the layouts of reference 12), and just enough
//! decoding for kubectl's typed creates (kubectl sends `create configmap`,
//! `create secret` and `create namespace` as protobuf, and a real apiserver
//! accepts that).

use std::collections::BTreeMap;

use base64::Engine;
use prost::Message;
use serde_json::{Value, json};

use crate::resources::ResourceDef;
use crate::schema;
use crate::store::Obj;
use r8s::api::status::Status;
use r8s::codec::json::META_API_VERSION;
use r8s::codec::protobuf as pb;

#[derive(Clone, PartialEq, Message)]
struct TypeMeta {
    #[prost(string, tag = "1")]
    api_version: String,
    #[prost(string, tag = "2")]
    kind: String,
}

#[derive(Clone, PartialEq, Message)]
struct Unknown {
    #[prost(message, optional, tag = "1")]
    type_meta: Option<TypeMeta>,
    #[prost(bytes = "vec", tag = "2")]
    raw: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
struct ObjectMeta {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    generate_name: String,
    #[prost(string, tag = "3")]
    namespace: String,
    #[prost(string, tag = "6")]
    resource_version: String,
    #[prost(btree_map = "string, string", tag = "11")]
    labels: BTreeMap<String, String>,
    #[prost(btree_map = "string, string", tag = "12")]
    annotations: BTreeMap<String, String>,
}

#[derive(Clone, PartialEq, Message)]
struct ConfigMap {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(btree_map = "string, string", tag = "2")]
    data: BTreeMap<String, String>,
    #[prost(btree_map = "string, bytes", tag = "3")]
    binary_data: BTreeMap<String, Vec<u8>>,
}

#[derive(Clone, PartialEq, Message)]
struct Secret {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(btree_map = "string, bytes", tag = "2")]
    data: BTreeMap<String, Vec<u8>>,
    #[prost(string, tag = "3")]
    r#type: String,
}

#[derive(Clone, PartialEq, Message)]
struct Namespace {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
}

fn meta_json(m: Option<ObjectMeta>) -> Value {
    let m = m.unwrap_or_default();
    let mut v = json!({});
    for (k, s) in [
        ("name", m.name),
        ("generateName", m.generate_name),
        ("namespace", m.namespace),
        ("resourceVersion", m.resource_version),
    ] {
        if !s.is_empty() {
            v[k] = json!(s);
        }
    }
    if !m.labels.is_empty() {
        v["labels"] = json!(m.labels);
    }
    if !m.annotations.is_empty() {
        v["annotations"] = json!(m.annotations);
    }
    v
}

fn b64(map: BTreeMap<String, Vec<u8>>) -> BTreeMap<String, String> {
    let e = base64::engine::general_purpose::STANDARD;
    map.into_iter().map(|(k, v)| (k, e.encode(v))).collect()
}

/// Decodes a `k8s\0`-enveloped ConfigMap, Secret or Namespace into its JSON form.
pub fn decode(body: &[u8]) -> Result<Value, Status> {
    let unsupported = |what: String| {
        Status::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json ({what})"
            ),
        )
    };
    let rest = body
        .strip_prefix(b"k8s\0")
        .ok_or_else(|| unsupported("missing the k8s protobuf envelope".into()))?;
    let u = Unknown::decode(rest)
        .map_err(|e| Status::bad_request(format!("unable to decode protobuf: {e}")))?;
    let tm = u.type_meta.unwrap_or_default();
    let bad =
        |e: prost::DecodeError| Status::bad_request(format!("unable to decode {}: {e}", tm.kind));
    let mut v = match tm.kind.as_str() {
        "ConfigMap" => {
            let c = ConfigMap::decode(u.raw.as_slice()).map_err(bad)?;
            let mut v = json!({"metadata": meta_json(c.metadata)});
            if !c.data.is_empty() {
                v["data"] = json!(c.data);
            }
            if !c.binary_data.is_empty() {
                v["binaryData"] = json!(b64(c.binary_data));
            }
            v
        }
        "Secret" => {
            let s = Secret::decode(u.raw.as_slice()).map_err(bad)?;
            let mut v = json!({"metadata": meta_json(s.metadata), "type": s.r#type});
            if !s.data.is_empty() {
                v["data"] = json!(b64(s.data));
            }
            v
        }
        "Namespace" => {
            let n = Namespace::decode(u.raw.as_slice()).map_err(bad)?;
            json!({"metadata": meta_json(n.metadata)})
        }
        k => {
            return Err(unsupported(format!(
                "the sim decodes protobuf ConfigMap, Secret and Namespace only, not {k:?}"
            )));
        }
    };
    v["kind"] = json!(tm.kind);
    v["apiVersion"] = json!(tm.api_version);
    Ok(v)
}

/// A stored object's protobuf body (`k8s\0` + `runtime.Unknown`), encoded
/// once, if its kind has one.
pub fn body_of<'o>(def: &ResourceDef, o: &'o Obj) -> Option<&'o bytes::Bytes> {
    o.proto
        .get_or_init(|| object_body(def, &o.value()))
        .as_ref()
}

/// An object's protobuf body, if its kind has a protobuf encoding.
pub fn object_body(def: &ResourceDef, v: &Value) -> Option<bytes::Bytes> {
    if !def.gvr.is_builtin() {
        return None;
    }
    let raw = schema::encode(&def.kind, v)?;
    Some(pb::envelope(&def.gvr.api_version(), &def.kind, &[&raw]))
}

/// The raw of an object's `PartialObjectMetadata`: `{1 ObjectMeta}`, the
/// object's own field 1 where it has a body, else encoded from its JSON.
fn metadata_raw(def: &ResourceDef, o: &Obj) -> Vec<u8> {
    let meta = match body_of(def, o) {
        Some(body) => pb::unwrap(body)
            .ok()
            .and_then(|u| pb::find(u.raw, 1).ok().flatten())
            .map(<[u8]>::to_vec)
            .unwrap_or_default(),
        None => schema::encode("ObjectMeta", &o.value()["metadata"])
            .map(|m| m.to_vec())
            .unwrap_or_default(),
    };
    let mut raw = pb::partial_object_metadata_head(meta.len()).to_vec();
    raw.extend_from_slice(&meta);
    raw
}

/// An object's metadata-only body.
pub fn metadata_body(def: &ResourceDef, o: &Obj) -> bytes::Bytes {
    pb::envelope(
        META_API_VERSION,
        "PartialObjectMetadata",
        &[&metadata_raw(def, o)],
    )
}

/// A list body (`PodList`, or `PartialObjectMetadataList`): `ListMeta` and items.
pub fn list_body(
    def: &ResourceDef,
    metadata_only: bool,
    rv: &str,
    cont: Option<&str>,
    remaining: Option<usize>,
    shard_info: Option<&str>,
    items: &[std::sync::Arc<Obj>],
) -> Result<bytes::Bytes, Status> {
    let mut raws: Vec<Vec<u8>> = Vec::with_capacity(items.len());
    for o in items {
        if metadata_only {
            raws.push(metadata_raw(def, o));
        } else {
            let body = body_of(def, o).ok_or_else(|| no_protobuf(def))?;
            let u = pb::unwrap(body).map_err(|e| Status::internal(e.to_string()))?;
            raws.push(u.raw.to_vec());
        }
    }
    let (api_version, kind) = if metadata_only {
        (
            META_API_VERSION.to_string(),
            "PartialObjectMetadataList".to_string(),
        )
    } else {
        (def.gvr.api_version(), format!("{}List", def.kind))
    };
    let mut meta = pb::list_meta(rv, cont.unwrap_or(""), remaining.map(|n| n as u64));
    if let Some(s) = shard_info {
        pb::shard_info(&mut meta, s);
    }
    let items_len: usize = raws.iter().map(|r| pb::field_len(r.len())).sum();
    let mut out = bytes::BytesMut::from(&pb::list_head(&api_version, &kind, &meta, items_len)[..]);
    for r in &raws {
        pb::bytes_field(&mut out, 2, r);
    }
    out.extend_from_slice(pb::UNKNOWN_TAIL);
    Ok(out.freeze())
}

/// The 406 for protobuf of a kind the sim has no schema for.
pub fn no_protobuf(def: &ResourceDef) -> Status {
    Status::new(
        406,
        "NotAcceptable",
        format!("the sim has no protobuf encoding of {}", def.kind),
    )
}

/// A `BOOKMARK`'s body: the watched type empty but for its resource version
/// (and the annotations ending a streaming list's initial events).
pub fn bookmark_body(
    def: &ResourceDef,
    metadata_only: bool,
    rv: u64,
    initial_end: Option<r8s::codec::InitialEnd>,
) -> bytes::Bytes {
    let (api_version, kind, empty) = if metadata_only {
        let mut raw = bytes::BytesMut::new();
        pb::bytes_field(
            &mut raw,
            1,
            &schema::empty("ObjectMeta").unwrap_or_default(),
        );
        (META_API_VERSION.to_string(), "PartialObjectMetadata", raw)
    } else {
        (
            def.gvr.api_version(),
            def.kind.as_str(),
            schema::empty(&def.kind).unwrap_or_default(),
        )
    };
    pb::bookmark(Some(&empty), &api_version, kind, rv, initial_end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn should_decode_an_enveloped_configmap() {
        let cm = ConfigMap {
            metadata: Some(ObjectMeta {
                name: "c".into(),
                namespace: "default".into(),
                ..Default::default()
            }),
            data: [("a".to_string(), "b".to_string())].into(),
            binary_data: BTreeMap::new(),
        };
        let u = Unknown {
            type_meta: Some(TypeMeta {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
            }),
            raw: cm.encode_to_vec(),
        };
        let mut body = b"k8s\0".to_vec();
        body.extend(u.encode_to_vec());
        let v = decode(&body).unwrap();
        assert_eq!(v["metadata"]["name"], "c");
        assert_eq!(v["data"]["a"], "b");
        assert_eq!(v["kind"], "ConfigMap");
        assert!(decode(b"nope").is_err());
    }
}
