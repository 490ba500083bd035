//! What the built-in upstream serves: its resource types and discovery documents.

use serde_json::{Value, json};

use r8s::api::Gvr;

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
    /// Where its objects are kept in the store: its own index for a
    /// built-in; one place for every version of a custom resource.
    pub storage: usize,
    /// A version of a custom resource: its objects are served in it
    /// whichever version they were written in (conversion `None`).
    pub custom: bool,
    /// A custom resource whose definition names a conversion webhook: the
    /// sim plays the webhook, which marks what it converts
    /// ([`CONVERTED_BY_WEBHOOK`]).
    pub webhook: bool,
    /// A custom resource's definition as this version was served from (a
    /// hash of its `spec` and accepted names): any change to it recreates
    /// the version's storage, as kube-apiserver's CRD handler does.
    pub definition: u64,
    /// A custom resource's printer columns for this version
    /// (`additionalPrinterColumns`, as its definition has them; none: the
    /// default `Age`).
    pub columns: Vec<serde_json::Value>,
}

/// The annotation the sim's stand-in for a conversion webhook adds to each
/// object it converts to another version (a real webhook may change any
/// field; this one changes one that clients can see).
pub const CONVERTED_BY_WEBHOOK: &str = "sim.r8s.dev/converted-by-webhook";

impl ResourceDef {
    /// A version of a custom resource whose objects are kept at `storage`.
    pub fn custom(gvr: Gvr, singular: &str, kind: &str, namespaced: bool, storage: usize) -> Self {
        ResourceDef {
            gvr,
            singular: singular.to_string(),
            kind: kind.to_string(),
            namespaced,
            short_names: Vec::new(),
            subresources: Vec::new(),
            items_typed: true,
            storage,
            custom: true,
            webhook: false,
            definition: 0,
            columns: Vec::new(),
        }
    }

    /// Whether it has the subresource `sub`.
    pub fn has_subresource(&self, sub: &str) -> bool {
        self.subresources.iter().any(|s| s == sub)
    }
}

/// The verbs discovery lists for every resource type.
pub(super) const VERBS: [&str; 8] = [
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
const BUILTINS: [Builtin; 32] = [
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
    (
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "customresourcedefinition",
        "CustomResourceDefinition",
        false,
        &["crd", "crds"],
        &["status"],
        false,
    ),
    (
        "apps",
        "v1",
        "replicasets",
        "replicaset",
        "ReplicaSet",
        true,
        &["rs"],
        &["status"],
        false,
    ),
    (
        "apps",
        "v1",
        "statefulsets",
        "statefulset",
        "StatefulSet",
        true,
        &["sts"],
        &["status"],
        false,
    ),
    (
        "apps",
        "v1",
        "daemonsets",
        "daemonset",
        "DaemonSet",
        true,
        &["ds"],
        &["status"],
        false,
    ),
    (
        "batch",
        "v1",
        "jobs",
        "job",
        "Job",
        true,
        &[],
        &["status"],
        false,
    ),
    (
        "batch",
        "v1",
        "cronjobs",
        "cronjob",
        "CronJob",
        true,
        &["cj"],
        &["status"],
        false,
    ),
    (
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "networkpolicy",
        "NetworkPolicy",
        true,
        &["netpol"],
        &[],
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "roles",
        "role",
        "Role",
        true,
        &[],
        &[],
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "clusterrole",
        "ClusterRole",
        false,
        &[],
        &[],
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "rolebinding",
        "RoleBinding",
        true,
        &[],
        &[],
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "clusterrolebinding",
        "ClusterRoleBinding",
        false,
        &[],
        &[],
        false,
    ),
    (
        "coordination.k8s.io",
        "v1",
        "leases",
        "lease",
        "Lease",
        true,
        &[],
        &[],
        false,
    ),
    (
        "storage.k8s.io",
        "v1",
        "storageclasses",
        "storageclass",
        "StorageClass",
        false,
        &["sc"],
        &[],
        false,
    ),
    (
        "",
        "v1",
        "persistentvolumes",
        "persistentvolume",
        "PersistentVolume",
        false,
        &["pv"],
        &["status"],
        false,
    ),
    (
        "",
        "v1",
        "persistentvolumeclaims",
        "persistentvolumeclaim",
        "PersistentVolumeClaim",
        true,
        &["pvc"],
        &["status"],
        false,
    ),
    (
        "policy",
        "v1",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        "PodDisruptionBudget",
        true,
        &["pdb"],
        &["status"],
        false,
    ),
    (
        "networking.k8s.io",
        "v1",
        "ingresses",
        "ingress",
        "Ingress",
        true,
        &["ing"],
        &["status"],
        false,
    ),
    (
        "discovery.k8s.io",
        "v1",
        "endpointslices",
        "endpointslice",
        "EndpointSlice",
        true,
        &[],
        &[],
        false,
    ),
    (
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "horizontalpodautoscaler",
        "HorizontalPodAutoscaler",
        true,
        &["hpa"],
        &["status"],
        false,
    ),
    (
        "",
        "v1",
        "serviceaccounts",
        "serviceaccount",
        "ServiceAccount",
        true,
        &["sa"],
        &[],
        false,
    ),
    (
        "flowcontrol.apiserver.k8s.io",
        "v1",
        "flowschemas",
        "flowschema",
        "FlowSchema",
        false,
        &[],
        &["status"],
        false,
    ),
    (
        "flowcontrol.apiserver.k8s.io",
        "v1",
        "prioritylevelconfigurations",
        "prioritylevelconfiguration",
        "PriorityLevelConfiguration",
        false,
        &[],
        &["status"],
        false,
    ),
];

/// The resource types every sim serves, in [`Catalog`] order.
pub fn builtins() -> Vec<ResourceDef> {
    let strings = |s: &[&str]| s.iter().map(|s| s.to_string()).collect();
    BUILTINS
        .iter()
        .enumerate()
        .map(
            |(storage, &(g, v, r, singular, kind, namespaced, short, subs, typed))| ResourceDef {
                gvr: Gvr::from_static(g, v, r),
                singular: singular.to_string(),
                kind: kind.to_string(),
                namespaced,
                short_names: strings(short),
                subresources: strings(subs),
                items_typed: typed,
                storage,
                custom: false,
                webhook: false,
                definition: 0,
                columns: Vec::new(),
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

/// Index of `customresourcedefinitions` (whose writes change the catalog).
pub fn crds_idx() -> usize {
    find(&Gvr::from_static(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
    ))
    .expect("customresourcedefinitions is served")
}

/// Index of the core `pods` resource.
pub fn pods_idx() -> usize {
    find(&Gvr::from_static("", "v1", "pods")).expect("pods is served")
}

/// `/version` of a kube-apiserver 1.`minor`, built with the Go its
/// release was (1.36 with Go 1.26, 1.24 with Go 1.22: ten behind).
pub fn version(minor: u16) -> Value {
    let git = format!("v1.{minor}.0-r8s-sim");
    let go = format!("go1.{}.0", minor.saturating_sub(10));
    let minor = minor.to_string();
    json!({
        "major": "1", "minor": minor, "gitVersion": git,
        "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z", "goVersion": go, "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// `/api`.
pub fn core_versions(server_address: &str) -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"],
           "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]})
}

/// An `APIGroup`'s versions, preferred first.
pub(super) fn group_json(name: &str, versions: &[String]) -> Value {
    let gvs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    let preferred = gvs.first().cloned().unwrap_or(Value::Null);
    json!({"name": name, "versions": gvs, "preferredVersion": preferred})
}

/// The discovery path of a group/version: `api/v1`, `apis/apps/v1`.
pub(super) fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}
