//! What the built-in upstream serves: its resource types and discovery documents.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::api::Gvr;

/// One served resource type.
#[derive(Debug)]
pub struct ResourceDef {
    /// Group, version and plural name.
    pub gvr: Gvr,
    /// Singular name.
    pub singular: String,
    /// Kind.
    pub kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// kubectl short names.
    pub short_names: Vec<String>,
    /// Subresources (`status`, `log`, `exec`).
    pub subresources: Vec<String>,
    /// Whether list items carry `kind`/`apiVersion` (custom resources do, built-ins do not).
    pub items_typed: bool,
}

impl ResourceDef {
    /// Whether it has the subresource `sub`.
    pub fn has_subresource(&self, sub: &str) -> bool {
        self.subresources.iter().any(|s| s == sub)
    }
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

/// A built-in type: group, version, plural, singular, kind, namespaced,
/// short names, subresources, items typed.
type Builtin = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    &'static [&'static str],
    &'static [&'static str],
    bool,
);

/// The types every sim serves, at these indexes in its [`Catalog`].
const BUILTINS: [Builtin; 10] = [
    (
        "",
        "v1",
        "pods",
        "pod",
        "Pod",
        true,
        &["po"],
        &["status", "log", "exec"],
        false,
    ),
    (
        "",
        "v1",
        "configmaps",
        "configmap",
        "ConfigMap",
        true,
        &["cm"],
        &[],
        false,
    ),
    (
        "",
        "v1",
        "secrets",
        "secret",
        "Secret",
        true,
        &[],
        &[],
        false,
    ),
    (
        "",
        "v1",
        "services",
        "service",
        "Service",
        true,
        &["svc"],
        &["status"],
        false,
    ),
    (
        "",
        "v1",
        "endpoints",
        "endpoints",
        "Endpoints",
        true,
        &["ep"],
        &[],
        false,
    ),
    (
        "",
        "v1",
        "nodes",
        "node",
        "Node",
        false,
        &["no"],
        &["status"],
        false,
    ),
    (
        "",
        "v1",
        "namespaces",
        "namespace",
        "Namespace",
        false,
        &["ns"],
        &["status"],
        false,
    ),
    (
        "",
        "v1",
        "events",
        "event",
        "Event",
        true,
        &["ev"],
        &[],
        false,
    ),
    (
        "apps",
        "v1",
        "deployments",
        "deployment",
        "Deployment",
        true,
        &["deploy"],
        &["status"],
        false,
    ),
    (
        "example.r8s.dev",
        "v1",
        "widgets",
        "widget",
        "Widget",
        true,
        &["wd"],
        &[],
        true,
    ),
];

/// The resource types every sim serves, in [`Catalog`] order.
pub fn builtins() -> Vec<ResourceDef> {
    let strings = |s: &[&str]| s.iter().map(|s| s.to_string()).collect();
    BUILTINS
        .iter()
        .map(
            |&(g, v, r, singular, kind, namespaced, short, subs, typed)| ResourceDef {
                gvr: Gvr::from_static(g, v, r),
                singular: singular.to_string(),
                kind: kind.to_string(),
                namespaced,
                short_names: strings(short),
                subresources: strings(subs),
                items_typed: typed,
            },
        )
        .collect()
}

/// Index of a built-in type (the same in every sim's [`Catalog`]).
pub fn find(gvr: &Gvr) -> Option<usize> {
    BUILTINS
        .iter()
        .position(|b| (b.0, b.1, b.2) == (gvr.group(), gvr.version(), gvr.resource()))
}

/// Index of the core `namespaces` resource.
pub fn namespaces_idx() -> usize {
    find(&Gvr::from_static("", "v1", "namespaces")).expect("namespaces is served")
}

/// Index of the core `pods` resource.
pub fn pods_idx() -> usize {
    find(&Gvr::from_static("", "v1", "pods")).expect("pods is served")
}

/// The resource types a sim serves, by index (what its store and events
/// name them by): the built-ins first.
pub struct Catalog {
    defs: Vec<Arc<ResourceDef>>,
}

impl Default for Catalog {
    fn default() -> Self {
        Catalog {
            defs: builtins().into_iter().map(Arc::new).collect(),
        }
    }
}

impl Catalog {
    /// The served type named `gvr`, and its index.
    pub fn find(&self, gvr: &Gvr) -> Option<(usize, Arc<ResourceDef>)> {
        self.defs
            .iter()
            .position(|d| d.gvr == *gvr)
            .map(|i| (i, self.defs[i].clone()))
    }

    /// The type at index `res`.
    pub fn def(&self, res: usize) -> Arc<ResourceDef> {
        self.defs[res].clone()
    }

    /// Every served type, with its index.
    pub fn served(&self) -> Vec<(usize, Arc<ResourceDef>)> {
        self.defs.iter().cloned().enumerate().collect()
    }

    /// Whether each type's list items carry `kind`/`apiVersion`, by index.
    pub fn items_typed(&self) -> Vec<bool> {
        self.defs.iter().map(|d| d.items_typed).collect()
    }

    fn groups(&self) -> Vec<(&str, &str)> {
        let mut out: Vec<(&str, &str)> = Vec::new();
        for r in self.defs.iter().filter(|r| !r.gvr.group().is_empty()) {
            if !out.contains(&(r.gvr.group(), r.gvr.version())) {
                out.push((r.gvr.group(), r.gvr.version()));
            }
        }
        out.push(("authentication.k8s.io", "v1"));
        out.push(("authorization.k8s.io", "v1"));
        out
    }

    /// `/apis`.
    pub fn group_list(&self) -> Value {
        let groups: Vec<Value> = self
            .groups()
            .iter()
            .map(|(g, v)| group_json(g, v))
            .collect();
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    }

    /// `/apis/{group}`.
    pub fn group(&self, name: &str) -> Option<Value> {
        let (g, v) = self.groups().into_iter().find(|(g, _)| *g == name)?;
        let mut doc = group_json(g, v);
        doc["kind"] = json!("APIGroup");
        doc["apiVersion"] = json!("v1");
        Some(doc)
    }

    /// `/api/v1` or `/apis/{group}/{version}`.
    pub fn resource_list(&self, group: &str, version: &str) -> Option<Value> {
        if !(self.groups().contains(&(group, version)) || (group.is_empty() && version == "v1")) {
            return None;
        }
        let mut resources = Vec::new();
        for r in self
            .defs
            .iter()
            .filter(|r| r.gvr.group() == group && r.gvr.version() == version)
        {
            resources.push(json!({
                "name": r.gvr.resource(), "singularName": r.singular, "namespaced": r.namespaced,
                "kind": r.kind, "verbs": VERBS, "shortNames": r.short_names,
            }));
            for sub in &r.subresources {
                let verbs: &[&str] = match sub.as_str() {
                    "log" => &["get"],
                    "exec" => &["create", "get"],
                    _ => &["get", "patch", "update"],
                };
                let kind = match sub.as_str() {
                    "exec" => "PodExecOptions",
                    "log" => "Pod",
                    _ => r.kind.as_str(),
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

    /// `/openapi/v3`: one document per group/version.
    pub fn openapi_index(&self) -> Value {
        let mut paths = serde_json::Map::new();
        let mut gvs: Vec<(&str, &str)> = vec![("", "v1")];
        gvs.extend(self.groups());
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
    pub fn openapi_group(&self, path: &str) -> Option<Value> {
        let mut schemas = serde_json::Map::new();
        let mut paths = serde_json::Map::new();
        for r in self
            .defs
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
                &r.kind
            );
            schemas.insert(name, json!({
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": true,
                "x-kubernetes-group-version-kind": [{"group": r.gvr.group(), "kind": r.kind, "version": r.gvr.version()}]
            }));
        }
        if schemas.is_empty()
            && !self.openapi_index()["paths"]
                .as_object()?
                .contains_key(path)
        {
            return None;
        }
        Some(
            json!({"openapi": "3.0.0", "info": {"title": "r8s sim", "version": "v1"}, "paths": paths,
                    "components": {"schemas": schemas}}),
        )
    }
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

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}
