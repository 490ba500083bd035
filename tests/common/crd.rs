//! Custom resource definitions for tests, and the requests that drive them:
//! a definition, a JSON write, a watch opened now and read to its end later.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

use super::{Resp, client, send};

/// Where definitions are written.
pub const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// A namespaced definition of `plural` (kind: its singular, capitalized) in
/// `group`, with `versions` as (name, served, storage), each accepting any
/// object.
pub fn crd(group: &str, plural: &str, versions: &[(&str, bool, bool)]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|(name, served, storage)| {
            json!({"name": name, "served": served, "storage": storage,
                   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
        })
        .collect();
    let singular = &plural[..plural.len() - 1];
    let kind = format!("{}{}", singular[..1].to_uppercase(), &singular[1..]);
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": plural, "singular": singular, "kind": kind, "listKind": format!("{kind}List")},
                 "versions": versions}
    })
}

/// `body` sent as JSON with `method` to `url`.
pub async fn write(method: &str, url: &str, body: &Value) -> Resp {
    let body = body.to_string();
    let headers = [("content-type", "application/json")];
    send(method, url, &headers, Some(&body)).await
}

/// Deletes the definition `name` through `base` (200 asserted).
pub async fn delete(base: &str, name: &str) {
    let url = format!("{base}{CRDS}/{name}");
    let gone = send("DELETE", &url, &[], None).await;
    assert_eq!(gone.status, 200, "{url}: {}", gone.text());
}

/// A watch opened (its headers in, 200 asserted), to be read later; and its
/// `X-R8s-Cache` header, if any.
pub async fn open_watch(url: &str) -> (hyper::body::Incoming, Option<String>) {
    let req = http::Request::get(url)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = client().request(req).await.unwrap();
    assert_eq!(resp.status(), 200, "{url}");
    let cache = resp
        .headers()
        .get("x-r8s-cache")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    (resp.into_body(), cache)
}

/// Reads a watch until it ends (panics if it does not within `limit`): its
/// events.
pub async fn until_end(mut body: hyper::body::Incoming, limit: Duration) -> Vec<Value> {
    let mut all = Vec::new();
    let read = async {
        while let Some(f) = body.frame().await {
            if let Ok(d) = f.unwrap().into_data() {
                all.extend_from_slice(&d);
            }
        }
    };
    tokio::time::timeout(limit, read)
        .await
        .expect("the watch ends");
    all.split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect()
}
