//! The resource types a sim serves now, and their discovery documents: the
//! built-ins, then custom resources as their definitions come and go
//! (`sim::crd`). A type's index never changes and is never reused, so the
//! store and the events can name types by it.

use std::sync::{Arc, RwLock};

use serde_json::{Value, json};
use tokio::sync::watch;

use crate::resources::{ResourceDef, VERBS, builtins, group_json, gv_path};
use r8s::api::Gvr;
use r8s::sync::RwLockExt;

/// Where each custom resource definition's objects are kept in the store,
/// by its `metadata.uid` (a definition deleted and made again starts
/// empty); held while `sim::crd` brings the catalog in line.
#[derive(Default)]
pub struct Storages(pub(super) std::sync::Mutex<std::collections::HashMap<String, usize>>);

/// The resource types a sim serves, by index: the built-ins first.
pub struct Catalog {
    entries: RwLock<Vec<Entry>>,
    /// Groups left out of discovery while still served (an apiserver whose
    /// discovery is briefly incomplete, as mid-upgrade).
    hidden: RwLock<Vec<String>>,
    /// Bumped each time a type stops being served: its open watches end.
    retired: watch::Sender<u64>,
}

#[derive(Clone)]
struct Entry {
    def: Arc<ResourceDef>,
    served: bool,
}

impl Default for Catalog {
    fn default() -> Self {
        let entries = builtins()
            .into_iter()
            .map(|d| Entry {
                def: Arc::new(d),
                served: true,
            })
            .collect();
        Catalog {
            entries: RwLock::new(entries),
            hidden: RwLock::default(),
            retired: watch::channel(0).0,
        }
    }
}

impl Catalog {
    /// The served type named `gvr`, and its index.
    pub fn find(&self, gvr: &Gvr) -> Option<(usize, Arc<ResourceDef>)> {
        let entries = self.entries.reading();
        entries
            .iter()
            .position(|e| e.served && e.def.gvr == *gvr)
            .map(|i| (i, entries[i].def.clone()))
    }

    /// The type at index `res` (served or not).
    pub fn def(&self, res: usize) -> Arc<ResourceDef> {
        self.entries.reading()[res].def.clone()
    }

    /// Whether the type at index `res` is still served.
    pub fn is_served(&self, res: usize) -> bool {
        self.entries.reading()[res].served
    }

    /// Every served type, with its index.
    pub fn served(&self) -> Vec<(usize, Arc<ResourceDef>)> {
        self.entries
            .reading()
            .iter()
            .enumerate()
            .filter(|(_, e)| e.served)
            .map(|(i, e)| (i, e.def.clone()))
            .collect()
    }

    /// Whether each type's list items carry `kind`/`apiVersion`, by index.
    pub fn items_typed(&self) -> Vec<bool> {
        self.entries
            .reading()
            .iter()
            .map(|e| e.def.items_typed)
            .collect()
    }

    /// Serves `def` from now on; its index.
    pub fn add(&self, def: ResourceDef) -> usize {
        let mut entries = self.entries.writing();
        entries.push(Entry {
            def: Arc::new(def),
            served: true,
        });
        entries.len() - 1
    }

    /// Stops serving the type at `res`: its requests get 404 and its open
    /// watches end.
    pub fn retire(&self, res: usize) {
        self.entries.writing()[res].served = false;
        self.retired.send_modify(|n| *n += 1);
    }

    /// Changes whenever a type is retired (for watches to check theirs).
    pub fn retirements(&self) -> watch::Receiver<u64> {
        self.retired.subscribe()
    }

    /// Leaves `group` out of discovery (`hidden`), or lists it again; its
    /// resources are served all the while.
    pub fn hide_from_discovery(&self, group: &str, hidden: bool) {
        let mut h = self.hidden.writing();
        h.retain(|g| g != group);
        if hidden {
            h.push(group.to_string());
        }
    }

    /// The groups discovery lists (not the core one), each with its
    /// versions, preferred first.
    fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        let hidden = self.hidden.reading().clone();
        for e in self.entries.reading().iter().filter(|e| e.served) {
            let (g, v) = (e.def.gvr.group(), e.def.gvr.version());
            if g.is_empty() || hidden.iter().any(|h| h == g) {
                continue;
            }
            match out.iter_mut().find(|(name, _)| name == g) {
                Some((_, versions)) if versions.iter().any(|x| x == v) => {}
                Some((_, versions)) => versions.push(v.to_string()),
                None => out.push((g.to_string(), vec![v.to_string()])),
            }
        }
        for (_, versions) in &mut out {
            versions.sort_by_key(|v| std::cmp::Reverse(priority(v)));
        }
        out.push(("authentication.k8s.io".into(), vec!["v1".into()]));
        out.push(("authorization.k8s.io".into(), vec!["v1".into()]));
        out
    }

    fn serves_version(&self, group: &str, version: &str) -> bool {
        (group.is_empty() && version == "v1")
            || self
                .groups()
                .iter()
                .any(|(g, vs)| g == group && vs.iter().any(|v| v == version))
    }

    /// `/apis`.
    pub fn group_list(&self) -> Value {
        let groups: Vec<Value> = self
            .groups()
            .iter()
            .map(|(g, vs)| group_json(g, vs))
            .collect();
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    }

    /// `/apis/{group}`.
    pub fn group(&self, name: &str) -> Option<Value> {
        let (g, vs) = self.groups().into_iter().find(|(g, _)| g == name)?;
        let mut doc = group_json(&g, &vs);
        doc["kind"] = json!("APIGroup");
        doc["apiVersion"] = json!("v1");
        Some(doc)
    }

    /// `/api/v1` or `/apis/{group}/{version}`.
    pub fn resource_list(&self, group: &str, version: &str) -> Option<Value> {
        if !self.serves_version(group, version) {
            return None;
        }
        let mut resources = Vec::new();
        for (_, r) in self
            .served()
            .into_iter()
            .filter(|(_, r)| r.gvr.group() == group && r.gvr.version() == version)
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

    /// `/api` (`core`) or `/apis` as one aggregated discovery document
    /// (`APIGroupDiscoveryList`, `apidiscovery.k8s.io/` `version`): each
    /// group with its versions, preferred first, and their resources, as
    /// kube-apiserver 1.30+ answers clients that ask for it.
    pub fn aggregated(&self, core: bool, version: &str) -> Value {
        let groups = if core {
            vec![(String::new(), vec!["v1".to_string()])]
        } else {
            self.groups()
        };
        let items: Vec<Value> = groups
            .iter()
            .map(|(g, vs)| {
                let versions: Vec<Value> = vs
                    .iter()
                    .map(|v| {
                        let list = self.resource_list(g, v).unwrap_or_default();
                        let resources = aggregated_resources(&list["resources"]);
                        json!({"version": v, "resources": resources, "freshness": "Current"})
                    })
                    .collect();
                let mut meta = json!({"creationTimestamp": null});
                if !g.is_empty() {
                    meta["name"] = json!(g);
                }
                json!({"metadata": meta, "versions": versions})
            })
            .collect();
        json!({"kind": "APIGroupDiscoveryList", "apiVersion": format!("apidiscovery.k8s.io/{version}"),
               "metadata": {}, "items": items})
    }

    /// `/openapi/v3`: one document per group/version.
    pub fn openapi_index(&self) -> Value {
        let mut paths = serde_json::Map::new();
        let mut gvs: Vec<(String, String)> = vec![(String::new(), "v1".into())];
        for (g, vs) in self.groups() {
            gvs.extend(vs.into_iter().map(|v| (g.clone(), v)));
        }
        for (g, v) in gvs {
            let p = gv_path(&g, &v);
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
        for (_, r) in self
            .served()
            .into_iter()
            .filter(|(_, r)| gv_path(r.gvr.group(), r.gvr.version()) == path)
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
            let group = if r.gvr.group().is_empty() {
                "io.k8s.api.core"
            } else {
                r.gvr.group()
            };
            let name = format!("{group}.{}.{}", r.gvr.version(), &r.kind);
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

/// A group/version's resources as aggregated discovery lists them, from
/// its `APIResourceList`'s: each subresource (`pods/status`) under its
/// resource.
fn aggregated_resources(legacy: &Value) -> Vec<Value> {
    let all = legacy.as_array().cloned().unwrap_or_default();
    let kind = |r: &Value| json!({"group": "", "version": "", "kind": r["kind"]});
    let mut out: Vec<Value> = Vec::new();
    for r in &all {
        let name = r["name"].as_str().unwrap_or_default();
        if let Some((parent, sub)) = name.split_once('/') {
            let entry = json!({"subresource": sub, "responseKind": kind(r), "verbs": r["verbs"]});
            if let Some(p) = out.iter_mut().find(|p| p["resource"] == parent) {
                p["subresources"]
                    .as_array_mut()
                    .expect("made with subresources")
                    .push(entry);
            }
            continue;
        }
        let scope = if r["namespaced"] == true {
            "Namespaced"
        } else {
            "Cluster"
        };
        let mut entry = json!({"resource": name, "responseKind": kind(r), "scope": scope,
            "singularResource": r["singularName"], "verbs": r["verbs"], "subresources": []});
        if r["shortNames"].as_array().is_some_and(|a| !a.is_empty()) {
            entry["shortNames"] = r["shortNames"].clone();
        }
        out.push(entry);
    }
    for r in &mut out {
        if r["subresources"].as_array().is_some_and(|a| a.is_empty()) {
            r.as_object_mut().expect("an object").remove("subresources");
        }
    }
    out
}

/// kube's version priority: GA before beta before alpha, higher numbers
/// first; other names last.
fn priority(v: &str) -> (u8, u32, u32) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let Ok(major) = rest[..digits].parse::<u32>() else {
        return (0, 0, 0);
    };
    let (class, minor) = match &rest[digits..] {
        "" => (3, 0),
        s => match (s.strip_prefix("beta"), s.strip_prefix("alpha")) {
            (Some(n), _) => (2, n.parse().unwrap_or(0)),
            (_, Some(n)) => (1, n.parse().unwrap_or(0)),
            _ => return (0, 0, 0),
        },
    };
    (class, major, minor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn should_order_versions_as_kube_does() {
        let mut vs = vec!["v1alpha1", "v1", "v2beta1", "v1beta2", "v2", "foo", "v10"];
        vs.sort_by_key(|v| std::cmp::Reverse(priority(v)));
        assert_eq!(
            vs,
            ["v10", "v2", "v1", "v2beta1", "v1beta2", "v1alpha1", "foo"]
        );
    }

    #[test]
    fn should_stop_serving_a_retired_type() {
        let c = Catalog::default();
        let gvr = Gvr::new("late.example.com", "v1", "gadgets");
        let res = c.add(ResourceDef::custom(
            gvr.clone(),
            "gadget",
            "Gadget",
            true,
            0,
        ));
        assert_eq!(c.find(&gvr).map(|(i, _)| i), Some(res));
        assert!(c.group("late.example.com").is_some());
        let retired = c.retirements();
        c.retire(res);
        assert!(retired.has_changed().unwrap());
        assert!(c.find(&gvr).is_none());
        assert!(!c.is_served(res));
        assert!(c.group("late.example.com").is_none());
        assert!(c.resource_list("late.example.com", "v1").is_none());
        assert_eq!(c.def(res).gvr, gvr);
    }
}
