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
        let g = self.group();
        g.is_empty() || !g.contains('.') || (g.ends_with(".k8s.io") && !g.ends_with(".x-k8s.io"))
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

/// A resource type as discovery describes it: what r8s caches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiResource {
    /// Its name.
    pub gvr: Gvr,
    /// Kind of its objects (`Pod`).
    pub kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

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
