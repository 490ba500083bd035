//! Custom resources defined while the sim runs, as kube-apiserver's
//! apiextensions server serves them: a `CustomResourceDefinition` written
//! through the API is established at once; each of its served versions is
//! then a resource type (in discovery, routing, OpenAPI), all versions
//! sharing one set of objects; a version no longer served is gone (404, its
//! open watches end); a deleted definition takes its objects with it
//! (their DELETED events go out first, then the watches end).
//!
//! A change to a definition's spec (a version added, the storage version
//! flipped, a conversion webhook named) recreates each served version's
//! storage, as the apiserver's handler does: its open watches end, and its
//! clients relist.
//!
//! Where it is simpler than the apiserver: a deleted definition goes at once
//! (no `deletionTimestamp` while the `customresourcecleanup` finalizer
//! deletes the objects); `status.storedVersions` is set at creation and not
//! extended when the storage version changes; a conversion webhook is not
//! called: every version is served by rewriting `apiVersion` (the `None`
//! strategy), and with the `Webhook` strategy the sim, standing in for the
//! webhook, also marks each object it converts to another version than it
//! was written in ([`super::resources::CONVERTED_BY_WEBHOOK`]); the
//! protobuf of a definition leaves out the versions' schemas.

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::resources::ResourceDef;
use crate::state::Sim;
use crate::store::Mutation;
use r8s::api::Gvr;
use r8s::api::status::{Cause, Status};
use r8s::sync::MutexExt;

/// What the sim reads of a definition.
struct Spec {
    uid: String,
    group: String,
    plural: String,
    singular: String,
    kind: String,
    short_names: Vec<String>,
    namespaced: bool,
    /// Served versions, each with whether it has the status subresource,
    /// and its printer columns.
    versions: Vec<(String, bool, Vec<Value>)>,
    /// Whether its conversion strategy is `Webhook`.
    webhook: bool,
    /// A hash of its `spec` and `status.acceptedNames` (what the
    /// apiserver's handler compares before recreating the storage).
    definition: u64,
}

impl Spec {
    fn of(crd: &Value) -> Option<Spec> {
        let spec = &crd["spec"];
        let names = &spec["names"];
        let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let versions = spec["versions"]
            .as_array()?
            .iter()
            .filter(|v| v["served"].as_bool().unwrap_or(false))
            .map(|v| {
                let columns = v["additionalPrinterColumns"].as_array().cloned();
                (
                    s(&v["name"]),
                    v["subresources"].get("status").is_some(),
                    columns.unwrap_or_default(),
                )
            })
            .collect();
        Some(Spec {
            uid: s(&crd["metadata"]["uid"]),
            group: s(&spec["group"]),
            plural: s(&names["plural"]),
            singular: s(&names["singular"]),
            kind: s(&names["kind"]),
            short_names: names["shortNames"]
                .as_array()
                .map(|a| a.iter().map(s).collect())
                .unwrap_or_default(),
            namespaced: spec["scope"] == "Namespaced",
            versions,
            webhook: spec["conversion"]["strategy"] == "Webhook",
            definition: {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                spec.to_string().hash(&mut h);
                crd["status"]["acceptedNames"].to_string().hash(&mut h);
                h.finish()
            },
        })
    }

    fn def(&self, version: &str, status: bool, columns: &[Value], storage: usize) -> ResourceDef {
        let gvr = Gvr::new(self.group.clone(), version.to_string(), self.plural.clone());
        let mut def =
            ResourceDef::custom(gvr, &self.singular, &self.kind, self.namespaced, storage);
        def.short_names = self.short_names.clone();
        def.webhook = self.webhook;
        def.definition = self.definition;
        def.columns = columns.to_vec();
        if status {
            def.subresources = vec!["status".into()];
        }
        def
    }
}

/// Checks a definition being created and sets what the apiserver sets:
/// its status (names accepted, established at once, the stored version).
pub fn prepare(v: &mut Value) -> Result<(), Status> {
    let name = v["metadata"]["name"].as_str().unwrap_or_default();
    let spec = &v["spec"];
    let (group, plural) = (
        spec["group"].as_str().unwrap_or_default(),
        spec["names"]["plural"].as_str().unwrap_or_default(),
    );
    let invalid = |field: &str, message: String| {
        Status::invalid(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            name,
            vec![Cause {
                reason: "FieldValueInvalid",
                message,
                field: Some(field.into()),
            }],
        )
    };
    if group.is_empty() || plural.is_empty() || name != format!("{plural}.{group}") {
        return Err(invalid(
            "metadata.name",
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    let storage: Vec<&str> = versions
        .iter()
        .filter(|v| v["storage"].as_bool().unwrap_or(false))
        .filter_map(|v| v["name"].as_str())
        .collect();
    if storage.len() != 1 {
        return Err(invalid(
            "spec.versions",
            "Invalid value: must have exactly one version marked as storage version".into(),
        ));
    }
    let now = super::state::now_rfc3339();
    let condition = |t: &str, reason: &str, message: &str| json!({"type": t, "status": "True", "lastTransitionTime": now, "reason": reason, "message": message});
    v["status"] = json!({
        "acceptedNames": spec["names"],
        "conditions": [
            condition("NamesAccepted", "NoConflicts", "no conflicts found"),
            condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "storedVersions": [storage[0]],
    });
    Ok(())
}

/// Brings the served types in line with the stored definitions (after
/// every write of one): new served versions are added, versions no longer
/// served and definitions deleted are retired, a deleted definition's
/// objects deleted first.
pub fn sync(sim: &Sim) {
    // Held from the read of the definitions on: two writes' syncs apply in
    // turn, the later one from the later state.
    let mut storages = sim.crds.0.locked();
    let crds = super::resources::crds_idx();
    let (_, specs) = sim.store.with_current(crds, |m| {
        m.values()
            .filter_map(|o| Spec::of(&o.value()))
            .collect::<Vec<_>>()
    });
    let mut wanted: Vec<(Gvr, usize)> = Vec::new();
    let mut live = HashSet::new();
    for spec in &specs {
        live.insert(spec.uid.clone());
        let storage = *storages
            .entry(spec.uid.clone())
            .or_insert_with(|| sim.store.add_resource(true));
        for (version, status, columns) in &spec.versions {
            let def = spec.def(version, *status, columns, storage);
            wanted.push((def.gvr.clone(), storage));
            match sim.resources.find(&def.gvr) {
                // A built-in (the seeded widgets, whose definition is
                // stored as a cluster serving them has it) stays as it is.
                Some((_, cur)) if !cur.custom => {}
                Some((_, cur)) if same(&cur, &def) => {}
                Some((i, _)) => {
                    sim.resources.retire(i);
                    sim.resources.add(def);
                }
                None => {
                    sim.resources.add(def);
                }
            }
        }
    }
    // A deleted definition's objects go first (their watchers hear of it).
    storages.retain(|uid, storage| {
        if live.contains(uid) {
            return true;
        }
        for key in sim.store.keys(*storage) {
            let _ = sim.store.mutate(*storage, &key, |cur, _| match cur {
                Some(_) => Ok(Mutation::Delete),
                None => Err(Status::internal("gone")),
            });
        }
        false
    });
    for (i, d) in sim.resources.served() {
        if d.custom && !wanted.contains(&(d.gvr.clone(), d.storage)) {
            sim.resources.retire(i);
        }
    }
}

/// Whether two versions of a custom resource are served alike: from the
/// same storage and the same definition (kube-apiserver recreates a CRD's
/// storage, ending its watches, on any change to its spec or accepted names).
fn same(a: &ResourceDef, b: &ResourceDef) -> bool {
    a.storage == b.storage
        && a.definition == b.definition
        && a.kind == b.kind
        && a.singular == b.singular
        && a.namespaced == b.namespaced
        && a.short_names == b.short_names
        && a.subresources == b.subresources
}
