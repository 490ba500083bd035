//! Objects, snapshots and logs for the tests of this module's readers.

use std::collections::BTreeMap;

use super::format::{self, Header};
use super::log;
use crate::cache::object::{Objects, TypeInfo};

/// The store the tests' files are of.
pub(super) use super::format::test_identity as identity;

/// Its objects' type.
pub fn info() -> TypeInfo {
    TypeInfo::for_tests("Pod", "v1", "pods")
}

/// A pod `name` at `rv`, padded to about `pad` bytes.
pub fn pod(name: &str, rv: u64, pad: usize) -> Vec<u8> {
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"a","resourceVersion":"{rv}"}},"spec":{{"nodeName":"n-{}"}},"status":{{"message":"{}"}}}}"#,
        rv % 7,
        "x".repeat(pad)
    )
    .into_bytes()
}

/// A snapshot at `rv` of `objects` (key: version, body).
pub fn snapshot(rv: u64, objects: &BTreeMap<String, (u64, Vec<u8>)>) -> Vec<u8> {
    let header = Header {
        identity: identity(),
        resource_version: rv,
        written_unix_ms: 1,
        written_by: "test".into(),
    };
    let mut out = Vec::new();
    let items = || objects.iter().map(|(k, (rv, b))| (k.as_str(), *rv, &b[..]));
    format::write(&mut out, &header, None, items).unwrap();
    out
}

/// A log starting after `base`, of `entries`.
pub fn log_of(base: u64, entries: &[log::Entry<'_>]) -> Vec<u8> {
    let header = log::LogHeader {
        identity: identity(),
        base,
        created_unix_ms: 1,
    };
    let mut out = Vec::new();
    log::write_header(&mut out, &header).unwrap();
    for e in entries {
        log::encode(&mut out, e).unwrap();
    }
    out
}

/// What the store holds: each key's version and body.
pub fn held(objects: &Objects) -> BTreeMap<String, (u64, Vec<u8>)> {
    objects
        .iter()
        .map(|(k, o)| (k.to_string(), (o.rv, o.body.to_vec())))
        .collect()
}
