//! Group, version, resource: the name of a resource type, shared by requests
//! (their path), the caches (their key) and the built-in upstream (its table
//! of served types).

use std::borrow::Cow;
use std::fmt;

/// A resource type's group, version and plural name (`apps`, `v1`,
/// `deployments`; the core group is `""`). Static names cost nothing, so the
/// sim's table is a `static` and a request's path owns its strings.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gvr {
    group: Cow<'static, str>,
    version: Cow<'static, str>,
    resource: Cow<'static, str>,
}

impl Gvr {
    /// From any strings.
    pub fn new(
        group: impl Into<Cow<'static, str>>,
        version: impl Into<Cow<'static, str>>,
        resource: impl Into<Cow<'static, str>>,
    ) -> Self {
        Gvr {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
        }
    }

    /// From static names (usable in `static` tables).
    pub const fn from_static(
        group: &'static str,
        version: &'static str,
        resource: &'static str,
    ) -> Self {
        Gvr {
            group: Cow::Borrowed(group),
            version: Cow::Borrowed(version),
            resource: Cow::Borrowed(resource),
        }
    }

    /// The API group (`""` for core).
    pub fn group(&self) -> &str {
        &self.group
    }

    /// The API version.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The plural resource name.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// Whether this is one of Kubernetes' own types (a group without a dot, or
    /// `*.k8s.io` but not the `*.x-k8s.io` groups of SIG projects' custom
    /// resources): those have a protobuf encoding, and their list items carry
    /// no `kind`/`apiVersion`.
    pub fn is_builtin(&self) -> bool {
        is_builtin_group(self.group())
    }

    /// `apiVersion` of its objects: `v1`, `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The collection path: `/api/v1/pods`, `/apis/apps/v1/deployments`.
    pub fn collection_path(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}/{}", self.version, self.resource)
        } else {
            format!("/apis/{}/{}/{}", self.group, self.version, self.resource)
        }
    }
}

/// `v1/pods`, `apps/v1/deployments`: the form of `cache.resources`, logs and
/// metric labels.
impl fmt::Display for Gvr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}/{}", self.version, self.resource)
        } else {
            write!(f, "{}/{}/{}", self.group, self.version, self.resource)
        }
    }
}

impl Gvr {
    /// Whether `cache.resources` entry `e` names this resource.
    pub fn named_by(&self, e: &crate::config::ResourceEntry) -> bool {
        e.names_in(self.group(), self.version(), self.resource())
    }
}

/// Whether the API group `g` is Kubernetes' own (see [`Gvr::is_builtin`]).
pub fn is_builtin_group(g: &str) -> bool {
    g.is_empty() || !g.contains('.') || (g.ends_with(".k8s.io") && !g.ends_with(".x-k8s.io"))
}

/// A resource type as discovery describes it: what r8s caches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiResource {
    /// Its name.
    pub gvr: Gvr,
    /// Kind of its objects (`Pod`).
    pub kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// A custom resource's `selectableFields` (field labels, `spec.color`),
    /// as its CRD names them for this version: read from the CRD when its
    /// cache starts (discovery does not say); empty for built-ins, and for
    /// a custom resource whose CRD r8s has not read.
    pub selectable: &'static [&'static str],
}

/// One `'static` copy of a list of field labels: a custom resource's, read
/// from its CRD. Each distinct list is made once for the daemon's life (as
/// many as its CRDs' distinct `selectableFields` ever are), so objects and
/// stores hold a plain reference, as they do a built-in's list.
pub fn intern_fields<'a>(names: impl Iterator<Item = &'a str>) -> &'static [&'static str] {
    static LISTS: std::sync::Mutex<Vec<&'static [&'static str]>> =
        std::sync::Mutex::new(Vec::new());
    let names: Vec<&str> = names.collect();
    let mut lists = LISTS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(l) = lists.iter().find(|l| **l == names.as_slice()) {
        return l;
    }
    let owned: Vec<&'static str> = names
        .iter()
        .map(|n| &*Box::leak(Box::<str>::from(*n)))
        .collect();
    let list: &'static [&'static str] = Box::leak(owned.into_boxed_slice());
    lists.push(list);
    list
}

/// The selectable fields a CRD (its JSON) names for `version`, as field
/// labels: each `selectableFields[].jsonPath` (a simple path, `.spec.color`)
/// without its first dot, as apiextensions-apiserver names them.
pub fn crd_selectable_fields(crd: &[u8], version: &str) -> &'static [&'static str] {
    #[derive(serde::Deserialize)]
    struct Crd {
        #[serde(default)]
        spec: Spec,
    }
    #[derive(serde::Deserialize, Default)]
    struct Spec {
        #[serde(default)]
        versions: Vec<Version>,
    }
    #[derive(serde::Deserialize)]
    struct Version {
        #[serde(default)]
        name: String,
        #[serde(default, rename = "selectableFields")]
        selectable_fields: Vec<Field>,
    }
    #[derive(serde::Deserialize)]
    struct Field {
        #[serde(default, rename = "jsonPath")]
        json_path: String,
    }
    let Ok(crd) = serde_json::from_slice::<Crd>(crd) else {
        return &[];
    };
    let found = crd.spec.versions.into_iter().find(|v| v.name == version);
    let fields = found.map(|v| v.selectable_fields).unwrap_or_default();
    intern_fields(
        fields
            .iter()
            .map(|f| f.json_path.strip_prefix('.').unwrap_or(&f.json_path)),
    )
}

impl ApiResource {
    /// Whether its store in `encoding` holds field `label`: one of
    /// [`ApiResource::fields`] (asked per request: no list made).
    pub fn holds(&self, encoding: crate::api::media::Encoding, label: &str) -> bool {
        if self.gvr.is_builtin() {
            return crate::api::selector::supported_fields(self.gvr.resource()).contains(&label);
        }
        label == "metadata.name"
            || (label == "metadata.namespace" && self.namespaced)
            || (encoding == crate::api::media::Encoding::Json && self.selectable.contains(&label))
    }

    /// The field labels a field selector may use on its objects, as held in
    /// `encoding`: a built-in's own; a custom resource's `metadata.name`,
    /// `metadata.namespace` (namespaced only: apiextensions-apiserver's
    /// `objectMetaFieldsSet`) and, in JSON, its selectable fields (its
    /// protobuf store holds `PartialObjectMetadata`, without them).
    pub fn fields(&self, encoding: crate::api::media::Encoding) -> &'static [&'static str] {
        use crate::api::selector::supported_fields;
        if self.gvr.is_builtin() {
            return supported_fields(self.gvr.resource());
        }
        let meta: &[&str] = if self.namespaced {
            &["metadata.name", "metadata.namespace"]
        } else {
            &["metadata.name"]
        };
        let custom = match encoding {
            crate::api::media::Encoding::Json => self.selectable,
            crate::api::media::Encoding::Protobuf => &[],
        };
        intern_fields(meta.iter().chain(custom).copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// What a request is checked against is what the stores were built with.
    #[test]
    fn should_hold_the_fields_its_stores_read() {
        use crate::api::media::Encoding;
        let widgets = |namespaced| ApiResource {
            gvr: Gvr::from_static("example.com", "v1", "widgets"),
            kind: "Widget".into(),
            namespaced,
            selectable: intern_fields(["spec.color", "status.x.y"].into_iter()),
        };
        let pods = ApiResource {
            gvr: Gvr::from_static("", "v1", "pods"),
            kind: "Pod".into(),
            namespaced: true,
            selectable: &[],
        };
        let labels = [
            "metadata.name",
            "metadata.namespace",
            "spec.color",
            "status.x.y",
            "spec.nodeName",
            "x",
        ];
        for r in [widgets(true), widgets(false), pods] {
            for e in [Encoding::Json, Encoding::Protobuf] {
                for l in labels {
                    assert_eq!(
                        r.holds(e, l),
                        r.fields(e).contains(&l),
                        "{} {e:?} {l}",
                        r.gvr
                    );
                }
            }
        }
        assert!(
            std::ptr::eq(
                widgets(true).fields(Encoding::Json),
                widgets(true).fields(Encoding::Json)
            ),
            "made once"
        );
    }

    #[test]
    fn should_name_core_and_grouped_resources() {
        let pods = Gvr::from_static("", "v1", "pods");
        let deploys = Gvr::new("apps".to_string(), "v1", "deployments".to_string());
        assert!(pods.is_builtin() && Gvr::from_static("apps", "v1", "deployments").is_builtin());
        assert!(
            Gvr::from_static("apiextensions.k8s.io", "v1", "customresourcedefinitions")
                .is_builtin()
        );
        assert!(!Gvr::from_static("example.r8s.dev", "v1", "widgets").is_builtin());
        assert!(!Gvr::from_static("cluster.x-k8s.io", "v1beta1", "machines").is_builtin());
        assert_eq!(
            (pods.api_version(), pods.collection_path(), pods.to_string()),
            ("v1".into(), "/api/v1/pods".into(), "v1/pods".into())
        );
        assert_eq!(
            (
                deploys.api_version(),
                deploys.collection_path(),
                deploys.to_string()
            ),
            (
                "apps/v1".into(),
                "/apis/apps/v1/deployments".into(),
                "apps/v1/deployments".into()
            )
        );
        let mut m = HashMap::new();
        m.insert(pods, 1);
        assert_eq!(
            m.get(&Gvr::new(
                String::new(),
                "v1".to_string(),
                "pods".to_string()
            )),
            Some(&1),
            "static and owned names are the same key"
        );
    }
}
