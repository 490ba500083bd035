//! Just enough of Kubernetes protobuf for kubectl's typed creates: kubectl
//! sends `create configmap`, `create secret` and `create namespace` as
//! `application/vnd.kubernetes.protobuf` (the `k8s\0` envelope), and a real
//! apiserver accepts that. The sim decodes these three kinds into JSON.

use std::collections::BTreeMap;

use base64::Engine;
use prost::Message;
use serde_json::{Value, json};

use crate::api::status::Status;

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
