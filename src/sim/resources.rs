//! What the built-in upstream serves: its resource types and discovery documents.

use serde_json::{Value, json};

use crate::api::Gvr;

/// One served resource type.
#[derive(Debug)]
pub struct ResourceDef {
    /// Group, version and plural name.
    pub gvr: Gvr,
    /// Singular name.
    pub singular: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// kubectl short names.
    pub short_names: &'static [&'static str],
    /// Subresources (`status`, `log`, `exec`).
    pub subresources: &'static [&'static str],
    /// Whether list items carry `kind`/`apiVersion` (custom resources do, built-ins do not).
    pub items_typed: bool,
}

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "get",
    "list",
    "patch",
    "update",
    "watch",
    "deletecollection",
];

/// Every resource type the sim serves.
pub static RESOURCES: &[ResourceDef] = &[
    ResourceDef {
        gvr: Gvr::from_static("", "v1", "pods"),
        singular: "pod",
        kind: "Pod",
        namespaced: true,
        short_names: &["po"],
        subresources: &["status", "log", "exec"],
        items_typed: false,
    },
    ResourceDef {
        gvr: Gvr::from_static("", "v1", "configmaps"),
        singular: "configmap",
        kind: "ConfigMap",
        namespaced: true,
        short_names: &["cm"],
        subresources: &[],
        items_typed: false,
    },
    ResourceDef {
        gvr: Gvr::from_static("", "v1", "secrets"),
        singular: "secret",
        kind: "Secret",
        namespaced: true,
        short_names: &[],
        subresources: &[],
        items_typed: false,
    },
    ResourceDef {
        gvr: Gvr::from_static("", "v1", "services"),
        singular: "service",
        kind: "Service",
        namespaced: true,
        short_names: &["svc"],
        subresources: &["status"],
        items_typed: false,
    },
    ResourceDef {
        gvr: Gvr::from_static("", "v1", "endpoints"),
        singular: "endpoints",
        kind: "Endpoints",
        namespaced: true,
        short_names: &["ep"],
        subresources: &[],
        items_typed: false,
    },
    ResourceDef {
        gvr: Gvr::from_static("", "v1", "nodes"),
        singular: "node",
        kind: "Node",
        namespaced: false,
        short_names: &["no"],
        subresources: &["status"],
        items_typed: false,
    },
    ResourceDef {
        gvr: Gvr::from_static("", "v1", "namespaces"),
        singular: "namespace",
        kind: "Namespace",
        namespaced: false,
        short_names: &["ns"],
        subresources: &["status"],
        items_typed: false,
    },
    ResourceDef {
        gvr: Gvr::from_static("", "v1", "events"),
        singular: "event",
        kind: "Event",
        namespaced: true,
        short_names: &["ev"],
        subresources: &[],
        items_typed: false,
    },
    ResourceDef {
        gvr: Gvr::from_static("apps", "v1", "deployments"),
        singular: "deployment",
        kind: "Deployment",
        namespaced: true,
        short_names: &["deploy"],
        subresources: &["status"],
        items_typed: false,
    },
    ResourceDef {
        gvr: Gvr::from_static("example.r8s.dev", "v1", "widgets"),
        singular: "widget",
        kind: "Widget",
        namespaced: true,
        short_names: &["wd"],
        subresources: &[],
        items_typed: true,
    },
];

/// Index into [`RESOURCES`] of a group/version/resource.
pub fn find(gvr: &Gvr) -> Option<usize> {
    RESOURCES.iter().position(|r| r.gvr == *gvr)
}

/// Index of the core `namespaces` resource.
pub fn namespaces_idx() -> usize {
    find(&Gvr::from_static("", "v1", "namespaces")).expect("namespaces is served")
}

/// Index of the core `pods` resource.
pub fn pods_idx() -> usize {
    find(&Gvr::from_static("", "v1", "pods")).expect("pods is served")
}

fn groups() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in RESOURCES.iter().filter(|r| !r.gvr.group().is_empty()) {
        if !out.contains(&(r.gvr.group(), r.gvr.version())) {
            out.push((r.gvr.group(), r.gvr.version()));
        }
    }
    out.push(("authentication.k8s.io", "v1"));
    out.push(("authorization.k8s.io", "v1"));
    out
}

/// `/version` (of a 1.33 kube-apiserver, or a 1.30 one).
pub fn version(before_1_31: bool) -> Value {
    let (minor, git) = if before_1_31 {
        ("30", "v1.30.0-r8s-sim")
    } else {
        ("33", "v1.33.0-r8s-sim")
    };
    json!({
        "major": "1", "minor": minor, "gitVersion": git,
        "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.24", "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// `/api`.
pub fn core_versions(server_address: &str) -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"],
           "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]})
}

fn group_json(name: &str, version: &str) -> Value {
    let gv = json!({"groupVersion": format!("{name}/{version}"), "version": version});
    json!({"name": name, "versions": [gv.clone()], "preferredVersion": gv})
}

/// `/apis`.
pub fn group_list() -> Value {
    let groups: Vec<Value> = groups().iter().map(|(g, v)| group_json(g, v)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`.
pub fn group(name: &str) -> Option<Value> {
    let (g, v) = groups().into_iter().find(|(g, _)| *g == name)?;
    let mut doc = group_json(g, v);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

/// `/api/v1` or `/apis/{group}/{version}`.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    if !(groups().contains(&(group, version)) || (group.is_empty() && version == "v1")) {
        return None;
    }
    let mut resources = Vec::new();
    for r in RESOURCES
        .iter()
        .filter(|r| r.gvr.group() == group && r.gvr.version() == version)
    {
        resources.push(json!({
            "name": r.gvr.resource(), "singularName": r.singular, "namespaced": r.namespaced,
            "kind": r.kind, "verbs": VERBS, "shortNames": r.short_names,
        }));
        for sub in r.subresources {
            let verbs: &[&str] = match *sub {
                "log" => &["get"],
                "exec" => &["create", "get"],
                _ => &["get", "patch", "update"],
            };
            let kind = match *sub {
                "exec" => "PodExecOptions",
                "log" => "Pod",
                _ => r.kind,
            };
            resources.push(
                json!({"name": format!("{}/{sub}", r.gvr.resource()), "singularName": "",
                                  "namespaced": r.namespaced, "kind": kind, "verbs": verbs}),
            );
        }
    }
    match (group, version) {
        ("authentication.k8s.io", "v1") => resources.push(json!({"name": "tokenreviews",
            "singularName": "tokenreview", "namespaced": false, "kind": "TokenReview", "verbs": ["create"]})),
        ("authorization.k8s.io", "v1") => resources.push(json!({"name": "subjectaccessreviews",
            "singularName": "subjectaccessreview", "namespaced": false, "kind": "SubjectAccessReview", "verbs": ["create"]})),
        _ => {}
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: one document per group/version.
pub fn openapi_index() -> Value {
    let mut paths = serde_json::Map::new();
    let mut gvs: Vec<(&str, &str)> = vec![("", "v1")];
    gvs.extend(groups());
    for (g, v) in gvs {
        let p = gv_path(g, v);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash=sim")}),
        );
    }
    json!({"paths": paths})
}

/// `/openapi/v3/{api/v1 | apis/group/version}`: a permissive schema per kind
/// (`x-kubernetes-preserve-unknown-fields`), enough for kubectl's validation.
pub fn openapi_group(path: &str) -> Option<Value> {
    let mut schemas = serde_json::Map::new();
    let mut paths = serde_json::Map::new();
    for r in RESOURCES
        .iter()
        .filter(|r| gv_path(r.gvr.group(), r.gvr.version()) == path)
    {
        let gvk = json!({"group": r.gvr.group(), "kind": r.kind, "version": r.gvr.version()});
        let op = |verb: &str| {
            json!({
                "x-kubernetes-action": verb, "x-kubernetes-group-version-kind": gvk,
                "parameters": [{"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}}],
                "responses": {"200": {"description": "OK"}}
            })
        };
        let ns = if r.namespaced {
            "namespaces/{namespace}/"
        } else {
            ""
        };
        paths.insert(
            format!("/{path}/{ns}{}", r.gvr.resource()),
            json!({"post": op("post")}),
        );
        paths.insert(
            format!("/{path}/{ns}{}/{{name}}", r.gvr.resource()),
            json!({"put": op("put"), "patch": op("patch")}),
        );
        let name = format!(
            "{}.{}.{}",
            if r.gvr.group().is_empty() {
                "io.k8s.api.core"
            } else {
                r.gvr.group()
            },
            r.gvr.version(),
            r.kind
        );
        schemas.insert(name, json!({
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "x-kubernetes-group-version-kind": [{"group": r.gvr.group(), "kind": r.kind, "version": r.gvr.version()}]
        }));
    }
    if schemas.is_empty() && !openapi_index()["paths"].as_object()?.contains_key(path) {
        return None;
    }
    Some(
        json!({"openapi": "3.0.0", "info": {"title": "r8s sim", "version": "v1"}, "paths": paths,
                "components": {"schemas": schemas}}),
    )
}
