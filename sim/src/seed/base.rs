//! What every seed uses: timestamps as the apiserver writes them, an
//! object's metadata, and putting it in the sim's store.

use std::time::Duration;

use serde_json::{Value, json};

use crate::resources::find;
use crate::state::Sim;
use crate::store::{Mutation, key};
use crate::write::uuid;
use r8s::api::Gvr;

/// Now, as the apiserver writes a timestamp (RFC 3339, to the second).
pub(super) fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// A timestamp `ago_s` seconds before now (RFC 3339, as the apiserver writes them).
pub(super) fn ago(ago_s: u64) -> String {
    let t = std::time::SystemTime::now() - Duration::from_secs(ago_s);
    humantime::format_rfc3339_seconds(t).to_string()
}

/// Puts `v` in the store as the seeded object of `resource` in `ns`.
pub(super) fn put(
    sim: &Sim,
    resource: (&'static str, &'static str, &'static str),
    ns: Option<&str>,
    v: Value,
) {
    let res = find(&Gvr::from_static(resource.0, resource.1, resource.2))
        .expect("seeded resource is served");
    let name = v["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let _ = sim
        .store
        .mutate(res, &key(ns, &name), |_, _| Ok(Mutation::Put(v)));
}

/// An object's `metadata`: its name, a fresh uid, created now.
pub(super) fn meta(name: &str, ns: Option<&str>) -> Value {
    let mut m = json!({"name": name, "uid": uuid(), "creationTimestamp": now()});
    if let Some(ns) = ns {
        m["namespace"] = json!(ns);
    }
    m
}
