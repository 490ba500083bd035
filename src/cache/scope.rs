//! What part of a resource a cache holds: all of it, or the objects one
//! field selects (a node-local r8s's pods and its Node, `node.name`). The
//! reflector lists and watches with it, a proof probes with it, snapshots
//! are kept under it, and the cache answers only the requests inside it.

use std::fmt;

use crate::api::Gvr;
use crate::api::selector::FieldSelector;

/// The objects of a resource a cache holds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CacheScope {
    /// Every object.
    #[default]
    Whole,
    /// The objects whose `field` is `value` (`spec.nodeName=node-1`), as
    /// the upstream's field selector selects them.
    Field {
        /// A field the resource's selectors support.
        field: &'static str,
        /// Its value.
        value: String,
    },
    /// One object (a configmap or secret a node's pods reference, as its
    /// kubelet watches it): listed and watched in its namespace by
    /// `metadata.name`, as the node authorizer allows a node to.
    Object {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

impl CacheScope {
    /// The scope of `gvr`'s cache in an r8s scoped to `node` (`node.name`):
    /// the core pods bound to it (`spec.nodeName`) and its own Node
    /// (`metadata.name`); any other resource whole.
    pub fn of_node(node: Option<&str>, gvr: &Gvr) -> Self {
        let field = match (gvr.group(), gvr.resource()) {
            ("", "pods") => "spec.nodeName",
            ("", "nodes") => "metadata.name",
            _ => return CacheScope::Whole,
        };
        match node.filter(|n| !n.is_empty()) {
            Some(value) => CacheScope::Field {
                field,
                value: value.to_string(),
            },
            None => CacheScope::Whole,
        }
    }

    /// Whether the cache holds every object.
    pub fn is_whole(&self) -> bool {
        matches!(self, CacheScope::Whole)
    }

    /// The `fieldSelector` the upstream is asked with, if any.
    pub fn field_selector(&self) -> Option<String> {
        match self {
            CacheScope::Whole => None,
            CacheScope::Field { field, value } => Some(format!("{field}={value}")),
            CacheScope::Object { name, .. } => Some(format!("metadata.name={name}")),
        }
    }

    /// The collection `gvr`'s objects in this scope are listed and watched
    /// at: an object's namespace's, else every namespace's.
    pub fn collection_path(&self, gvr: &Gvr) -> String {
        match self {
            CacheScope::Object { namespace, .. } => {
                let all = gvr.collection_path();
                let (head, resource) = all.rsplit_once('/').unwrap_or(("", &all));
                format!("{head}/namespaces/{namespace}/{resource}")
            }
            _ => gvr.collection_path(),
        }
    }

    /// `&fieldSelector=...` (URL-encoded) for a query of the upstream;
    /// empty when whole.
    pub fn query_suffix(&self) -> String {
        match self.field_selector() {
            None => String::new(),
            Some(s) => format!(
                "&{}",
                crate::api::query::encode([("fieldSelector", s.as_str())])
            ),
        }
    }

    /// Whether a list or watch in `namespace` (`None`: every namespace)
    /// selecting by `fields` asks only for objects inside this scope: it
    /// requires the scope's field and value (a further requirement only
    /// narrows it), in the object's namespace for one object.
    pub fn covers(&self, namespace: Option<&str>, fields: &FieldSelector) -> bool {
        match self {
            CacheScope::Whole => true,
            CacheScope::Field { field, value } => fields.requires(field, value),
            CacheScope::Object {
                namespace: ns,
                name,
            } => namespace == Some(ns.as_str()) && fields.requires("metadata.name", name),
        }
    }
}

/// `whole`, the field selector (`spec.nodeName=node-1`), or one object
/// (`ns/name`): logs and snapshot identities.
impl fmt::Display for CacheScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheScope::Object { namespace, name } => write!(f, "{namespace}/{name}"),
            _ => match self.field_selector() {
                None => f.write_str("whole"),
                Some(s) => f.write_str(&s),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(s: &str) -> FieldSelector {
        FieldSelector::parse_syntax(s).unwrap()
    }

    #[test]
    fn should_scope_pods_and_nodes_to_the_node_and_nothing_else() {
        let pods = Gvr::new("", "v1", "pods");
        let nodes = Gvr::new("", "v1", "nodes");
        let scope = CacheScope::of_node(Some("n1"), &pods);
        assert_eq!(scope.to_string(), "spec.nodeName=n1");
        assert_eq!(scope.query_suffix(), "&fieldSelector=spec.nodeName%3Dn1");
        assert_eq!(
            CacheScope::of_node(Some("n1"), &nodes).to_string(),
            "metadata.name=n1"
        );
        for (g, r) in [("", "services"), ("example.com", "pods"), ("apps", "nodes")] {
            assert!(CacheScope::of_node(Some("n1"), &Gvr::new(g, "v1", r)).is_whole());
        }
        assert!(CacheScope::of_node(None, &pods).is_whole());
        assert!(CacheScope::of_node(Some(""), &pods).is_whole());
        assert_eq!(CacheScope::Whole.query_suffix(), "");
    }

    #[test]
    fn should_cover_only_selectors_that_require_the_scope() {
        let scope = CacheScope::of_node(Some("n1"), &Gvr::new("", "v1", "pods"));
        for (sel, want) in [
            ("spec.nodeName=n1", true),
            ("spec.nodeName==n1", true),
            ("spec.nodeName=n1,status.phase=Running", true),
            ("spec.nodeName=n1,spec.nodeName=n2", true),
            ("spec.nodeName=n2", false),
            ("spec.nodeName!=n1", false),
            ("spec.nodeName!=n2", false),
            ("metadata.name=n1", false),
            ("", false),
        ] {
            assert_eq!(scope.covers(None, &fields(sel)), want, "{sel:?}");
        }
        assert!(CacheScope::Whole.covers(None, &fields("")));
    }

    #[test]
    fn should_cover_one_object_in_its_namespace_by_name() {
        let cm = Gvr::new("", "v1", "configmaps");
        let scope = CacheScope::Object {
            namespace: "ns-1".into(),
            name: "app".into(),
        };
        assert_eq!(
            scope.collection_path(&cm),
            "/api/v1/namespaces/ns-1/configmaps"
        );
        assert_eq!(scope.query_suffix(), "&fieldSelector=metadata.name%3Dapp");
        assert_eq!(scope.to_string(), "ns-1/app");
        let by_name = fields("metadata.name=app");
        assert!(scope.covers(Some("ns-1"), &by_name));
        assert!(!scope.covers(Some("ns-2"), &by_name));
        assert!(!scope.covers(None, &by_name));
        assert!(!scope.covers(Some("ns-1"), &fields("metadata.name=other")));
        assert!(!scope.covers(Some("ns-1"), &fields("")));
        let apps = Gvr::new("apps", "v1", "deployments");
        assert_eq!(
            CacheScope::Object {
                namespace: "a".into(),
                name: "b".into()
            }
            .collection_path(&apps),
            "/apis/apps/v1/namespaces/a/deployments"
        );
    }
}
