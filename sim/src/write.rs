//! Writes: create, update (with the `resourceVersion` precondition), patch
//! (JSON merge and JSON patch), delete (with preconditions), `status`;
//! each with `dryRun=All`, which answers what would be stored and stores nothing.

use bytes::Bytes;
use http::{Response, StatusCode, header};
use serde_json::{Value, json};

use crate::resources::{ResourceDef, namespaces_idx};
use crate::state::{Req, Sim, json_response, now_rfc3339, to_bytes};
use crate::store::{Mutation, Obj, key};
use r8s::api::path::ResourcePath;
use r8s::api::status::{Cause, Status};
use r8s::body::Body;
use std::sync::Arc;

/// Decodes a write's body: JSON, or the protobuf kubectl sends for typed creates.
fn decode_body(r: &Req, body: &Bytes) -> Result<Value, Status> {
    let ctype = r
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    match ctype.split(';').next().unwrap_or("").trim() {
        "application/vnd.kubernetes.protobuf" => super::protobuf::decode(body),
        "" | "application/json" | "*/*" => parse_object(body),
        other => Err(Status::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/vnd.kubernetes.protobuf (got {other})"
            ),
        )),
    }
}

fn parse_object(body: &Bytes) -> Result<Value, Status> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        Status::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
    })?;
    if !v.is_object() {
        return Err(Status::bad_request(
            "couldn't get version/kind; json parse error: not an object",
        ));
    }
    Ok(v)
}

fn check_type(def: &ResourceDef, v: &mut Value) -> Result<(), Status> {
    let want_av = def.gvr.api_version();
    match v.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => v["apiVersion"] = json!(want_av),
        Some(av) if av == want_av => {}
        Some(av) => {
            return Err(Status::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({want_av})"
            )));
        }
    }
    match v.get("kind").and_then(Value::as_str) {
        None | Some("") => v["kind"] = json!(def.kind),
        Some(k) if k == def.kind => {}
        Some(k) => {
            return Err(Status::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                def.kind
            )));
        }
    }
    if !v["metadata"].is_object() {
        v["metadata"] = json!({});
    }
    Ok(())
}

/// A DNS-1123 subdomain, as object names must be.
fn valid_name(name: &str) -> bool {
    name.len() <= 253
        && !name.is_empty()
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

fn invalid_name(def: &ResourceDef, name: &str) -> Status {
    Status::invalid(
        "",
        &def.kind,
        name,
        vec![Cause {
            reason: "FieldValueInvalid",
            message: format!(
                "Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            ),
            field: Some("metadata.name".into()),
        }],
    )
}

/// A random UUID (v4 layout).
pub fn uuid() -> String {
    let a = fastrand::u128(..);
    let h = format!("{a:032x}");
    format!(
        "{}-{}-4{}-a{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        &h[17..20],
        &h[20..32]
    )
}

fn stored(code: StatusCode, bytes: Bytes) -> Response<Body> {
    json_response(code, bytes)
}

/// The `dryRun` option of a write: absent, or `All` (the only value the
/// apiserver knows); anything else is its 422 naming the options' kind.
fn dry_run(r: &Req, options_kind: &str) -> Result<bool, Status> {
    let values: Vec<&str> = r.query.all("dryRun").collect();
    if values.iter().all(|v| *v == "All") {
        return Ok(!values.is_empty());
    }
    let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    Err(Status::invalid(
        "meta.k8s.io",
        options_kind,
        "",
        vec![Cause {
            reason: "FieldValueNotSupported",
            message: format!(
                "Unsupported value: []string{{{}}}: supported values: \"All\"",
                quoted.join(", ")
            ),
            field: Some("dryRun".into()),
        }],
    ))
}

/// Stores a change, or with `dryRun=All` only says what would be stored.
fn commit(
    sim: &Sim,
    res: usize,
    key: &str,
    dry: bool,
    f: impl FnOnce(Option<&Arc<Obj>>, u64) -> Result<Mutation, Status>,
) -> Result<Arc<Obj>, Status> {
    if dry {
        sim.store.mutate_dry(res, key, f)
    } else {
        Ok(sim.store.mutate(res, key, f)?.obj.clone())
    }
}

/// `POST` to a collection.
pub fn create(
    sim: &Sim,
    res: usize,
    rp: &ResourcePath,
    r: &Req,
    body: Bytes,
) -> Result<Response<Body>, Status> {
    let def = sim.resources.def(res);
    let def = &*def;
    let res = def.storage;
    let dry = dry_run(r, "CreateOptions")?;
    let mut v = decode_body(r, &body)?;
    check_type(def, &mut v)?;
    let meta = &mut v["metadata"];
    let mut name = meta["name"].as_str().unwrap_or_default().to_string();
    if name.is_empty() {
        let Some(prefix) = meta["generateName"].as_str() else {
            return Err(Status::invalid(
                "",
                &def.kind,
                "",
                vec![Cause {
                    reason: "FieldValueRequired",
                    message: "Required value: name or generateName is required".into(),
                    field: Some("metadata.name".into()),
                }],
            ));
        };
        let suffix: String = (0..5)
            .map(|_| *fastrand::choice(b"bcdfghjklmnpqrstvwxz2456789").expect("non-empty") as char)
            .collect();
        name = format!("{prefix}{suffix}");
        meta["name"] = json!(name);
    }
    if !valid_name(&name) {
        return Err(invalid_name(def, &name));
    }
    let ns = if def.namespaced {
        let Some(ns) = rp.namespace.clone() else {
            return Err(Status::method_not_allowed());
        };
        match meta["namespace"].as_str() {
            None | Some("") => meta["namespace"] = json!(ns),
            Some(b) if b == ns => {}
            Some(_) => {
                return Err(Status::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
        }
        if sim.store.get(namespaces_idx(), &ns).is_none() {
            return Err(Status::not_found("namespaces", &ns));
        }
        Some(ns)
    } else {
        if let Some(m) = meta.as_object_mut() {
            m.remove("namespace");
        }
        None
    };
    meta["uid"] = json!(uuid());
    meta["creationTimestamp"] = json!(now_rfc3339());
    if let Some(m) = meta.as_object_mut() {
        m.remove("resourceVersion");
        m.remove("deletionTimestamp");
    }
    if matches!(
        def.gvr.resource(),
        "deployments"
            | "replicasets"
            | "statefulsets"
            | "daemonsets"
            | "jobs"
            | "cronjobs"
            | "widgets"
            | "customresourcedefinitions"
    ) {
        meta["generation"] = json!(1);
    }
    match def.gvr.resource() {
        "pods" if v.get("status").is_none() => v["status"] = json!({"phase": "Pending"}),
        "namespaces" => {
            v["spec"] = json!({"finalizers": ["kubernetes"]});
            v["status"] = json!({"phase": "Active"});
        }
        "customresourcedefinitions" => super::crd::prepare(&mut v)?,
        _ => {}
    }
    let k = key(ns.as_deref(), &name);
    let obj = commit(sim, res, &k, dry, |cur, _| match cur {
        Some(_) => Err(Status::already_exists(def.gvr.resource(), &name)),
        None => Ok(Mutation::Put(v)),
    })?;
    Ok(stored(StatusCode::CREATED, obj.full.clone()))
}

/// Keeps server-owned fields of `cur` in `next`.
fn carry_over(def: &ResourceDef, cur: &Value, next: &mut Value, status_only: bool) -> Value {
    if status_only {
        let mut v = cur.clone();
        v["status"] = next.get("status").cloned().unwrap_or(Value::Null);
        return v;
    }
    for f in [
        "uid",
        "creationTimestamp",
        "namespace",
        "name",
        "generation",
    ] {
        if let Some(x) = cur["metadata"].get(f) {
            next["metadata"][f] = x.clone();
        }
    }
    if def.has_subresource("status")
        && let Some(s) = cur.get("status")
    {
        next["status"] = s.clone();
    }
    if matches!(
        def.gvr.resource(),
        "deployments"
            | "replicasets"
            | "statefulsets"
            | "daemonsets"
            | "jobs"
            | "cronjobs"
            | "widgets"
            | "customresourcedefinitions"
    ) && next.get("spec") != cur.get("spec")
    {
        let g = cur["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
        next["metadata"]["generation"] = json!(g);
    }
    next.clone()
}

fn precondition_rv(def: &ResourceDef, name: &str, next: &Value, cur_rv: u64) -> Result<(), Status> {
    match next["metadata"]["resourceVersion"].as_str() {
        None | Some("") => Ok(()),
        Some(rv) if rv == cur_rv.to_string() => Ok(()),
        Some(_) => Err(Status::conflict(def.gvr.resource(), name)),
    }
}

/// `PUT` on an object (or its `status`).
pub fn update(
    sim: &Sim,
    res: usize,
    rp: &ResourcePath,
    r: &Req,
    body: Bytes,
) -> Result<Response<Body>, Status> {
    let def = sim.resources.def(res);
    let def = &*def;
    let res = def.storage;
    let name = rp.name.clone().unwrap_or_default();
    let dry = dry_run(r, "UpdateOptions")?;
    let mut v = decode_body(r, &body)?;
    check_type(def, &mut v)?;
    if let Some(n) = v["metadata"]["name"].as_str().filter(|n| *n != name) {
        return Err(Status::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        )));
    }
    let status_only = rp.subresource.as_deref() == Some("status");
    let k = key(rp.namespace.as_deref(), &name);
    let obj = commit(sim, res, &k, dry, |cur, _| {
        let cur =
            cur.ok_or_else(|| Status::not_found_in(def.gvr.group(), def.gvr.resource(), &name))?;
        precondition_rv(def, &name, &v, cur.rv)?;
        Ok(Mutation::Put(carry_over(
            def,
            &cur.value(),
            &mut v,
            status_only,
        )))
    })?;
    Ok(stored(StatusCode::OK, obj.full.clone()))
}

/// `PATCH` on an object (or its `status`).
pub fn patch(
    sim: &Sim,
    res: usize,
    rp: &ResourcePath,
    r: &Req,
    body: Bytes,
) -> Result<Response<Body>, Status> {
    let def = sim.resources.def(res);
    let def = &*def;
    let res = def.storage;
    let name = rp.name.clone().unwrap_or_default();
    let dry = dry_run(r, "PatchOptions")?;
    let ctype = r
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    let unsupported = || {
        Status::new(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json".to_string(),
        )
    };
    let patch_doc: Value = match ctype.as_str() {
        "application/json-patch+json"
        | "application/merge-patch+json"
        | "application/strategic-merge-patch+json" => serde_json::from_slice(&body)
            .map_err(|e| Status::bad_request(format!("error decoding patch: {e}")))?,
        _ => return Err(unsupported()),
    };
    let status_only = rp.subresource.as_deref() == Some("status");
    let k = key(rp.namespace.as_deref(), &name);
    let obj = commit(sim, res, &k, dry, |cur, _| {
        let cur =
            cur.ok_or_else(|| Status::not_found_in(def.gvr.group(), def.gvr.resource(), &name))?;
        let mut v = cur.value();
        if ctype == "application/json-patch+json" {
            let p: json_patch::Patch = serde_json::from_value(patch_doc)
                .map_err(|e| Status::bad_request(format!("error decoding patch: {e}")))?;
            json_patch::patch(&mut v, &p).map_err(|e| {
                Status::new(
                    422,
                    "Invalid",
                    format!("the server rejected our request due to an error in our request: {e}"),
                )
            })?;
        } else {
            // Strategic merge patch is applied as a JSON merge patch (a sim approximation).
            json_patch::merge(&mut v, &patch_doc);
        }
        precondition_rv(def, &name, &v, cur.rv)?;
        check_type(def, &mut v)?;
        Ok(Mutation::Put(carry_over(
            def,
            &cur.value(),
            &mut v,
            status_only,
        )))
    })?;
    Ok(stored(StatusCode::OK, obj.full.clone()))
}

/// `DELETE` on an object.
pub fn delete(
    sim: &Sim,
    res: usize,
    rp: &ResourcePath,
    r: &Req,
    body: Bytes,
) -> Result<Response<Body>, Status> {
    let def = sim.resources.def(res);
    let def = &*def;
    let res = def.storage;
    let name = rp.name.clone().unwrap_or_default();
    let dry = dry_run(r, "DeleteOptions")?;
    let opts: Value = if body.is_empty() {
        json!({})
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| Status::bad_request(format!("error decoding DeleteOptions: {e}")))?
    };
    let k = key(rp.namespace.as_deref(), &name);
    let pre_rv = opts["preconditions"]["resourceVersion"]
        .as_str()
        .map(str::to_string);
    let pre_uid = opts["preconditions"]["uid"].as_str().map(str::to_string);
    if !dry && def.gvr.resource() == "namespaces" && sim.store.get(res, &k).is_some() {
        let mut emptied = std::collections::HashSet::new();
        for (_, d) in sim.resources.served() {
            // Versions of one custom resource share their objects.
            if !d.namespaced || !emptied.insert(d.storage) {
                continue;
            }
            for child in sim.store.keys_in_namespace(d.storage, &name) {
                let _ = sim.store.mutate(d.storage, &child, |cur, _| match cur {
                    Some(_) => Ok(Mutation::Delete),
                    None => Err(Status::not_found_in(
                        d.gvr.group(),
                        d.gvr.resource(),
                        &child,
                    )),
                });
            }
        }
    }
    let obj = commit(sim, res, &k, dry, |cur, _| {
        let cur =
            cur.ok_or_else(|| Status::not_found_in(def.gvr.group(), def.gvr.resource(), &name))?;
        let conflict = |what: &str, want: &str, have: &str| {
            Status::new(409, "Conflict", format!(
                "Operation cannot be fulfilled on {} \"{name}\": the {what} in the precondition ({want}) does not match the {what} in record ({have}). The object might have been modified",
                def.kind
            )).with_details(&name, &def.kind)
        };
        if let Some(p) = &pre_rv
            && *p != cur.rv.to_string()
        {
            return Err(conflict("ResourceVersion", p, &cur.rv.to_string()));
        }
        if let Some(p) = &pre_uid {
            let uid = cur.value()["metadata"]["uid"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if *p != uid {
                return Err(conflict("UID", p, &uid));
            }
        }
        Ok(Mutation::Delete)
    })?;
    if def.gvr.resource() == "pods" {
        return Ok(stored(StatusCode::OK, obj.full.clone()));
    }
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": {"name": name, "kind": def.gvr.resource(), "uid": obj.value()["metadata"]["uid"]}});
    Ok(stored(StatusCode::OK, to_bytes(&status)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn should_validate_names_as_dns_subdomains() {
        assert!(valid_name("pod-1.example"));
        assert!(!valid_name("Bad_Name"));
        assert!(!valid_name("-x"));
        assert_eq!(uuid().len(), 36);
    }
}
