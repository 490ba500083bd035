//! Request paths of the Kubernetes API: `/api/v1/...` and `/apis/{group}/{version}/...`.
//!
//! Pure parsing, shared by the proxy's router and the built-in upstream.

use super::gvr::Gvr;

/// A request for a resource (collection, object or subresource).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    /// Group, version and resource (plural), e.g. `v1` `pods`.
    pub gvr: Gvr,
    /// Namespace from the path, if any.
    pub namespace: Option<String>,
    /// Object name, if the path names one.
    pub name: Option<String>,
    /// Subresource, e.g. `status`, `log`, `exec`.
    pub subresource: Option<String>,
    /// The deprecated `/watch/` path prefix was used.
    pub watch_prefix: bool,
    /// The removed `/proxy/` path prefix was used (RequestInfo still reads
    /// it: verb `proxy`, no subresource; r8s never serves it).
    pub proxy_prefix: bool,
}

impl ResourcePath {
    /// The namespace an authorizer sees: the path's, and for a namespace
    /// object (`/api/v1/namespaces/X`, its `status` and `finalize`) the
    /// namespace X itself, as RequestInfo sets it, so a RoleBinding in X
    /// can grant reading X.
    pub fn authz_namespace(&self) -> &str {
        match (&self.namespace, &self.name) {
            (Some(ns), _) => ns,
            (None, Some(name)) if self.gvr.resource() == "namespaces" => name,
            (None, _) => "",
        }
    }

    /// Whether the apiserver routes this path for a resource that is
    /// `namespaced` or not: a cluster-scoped one has no namespaced paths, and
    /// a namespaced object is named only within its namespace (it answers
    /// either with its bare 404).
    pub fn routed(&self, namespaced: bool) -> bool {
        if namespaced {
            self.namespace.is_some() || self.name.is_none()
        } else {
            self.namespace.is_none()
        }
    }
}

/// What a path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiPath {
    /// A resource path.
    Resource(ResourcePath),
    /// Anything else (discovery, `/version`, `/openapi`, health, unknown).
    Other,
}

/// Parses a request path (without query) as kube-apiserver reads it: Go's
/// `URL.Path`, percent-decoded before it is split (so `cm-%78` is `cm-x`, and
/// `a%2Fb` two segments), then RequestInfo's `splitPath` (leading and
/// trailing slashes trimmed). A path that does not decode (a bad escape,
/// not UTF-8), has an empty segment (a leading `//` included), or a segment
/// no name may be (`.`, `..`, one with `%`) is `Other`: r8s does not serve
/// it, and the upstream answers it as itself.
///
/// Allowed difference: a `#fragment` in the request target is part of the
/// path or query to Go (`w-1#frag` a name, `resourceVersion=0#frag` a 500),
/// but hyper drops it before r8s sees the request, which r8s reads and
/// forwards without it. The caller gets the answer to the request it could
/// send without the fragment (clients never send one: RFC 9110 §4.2.4),
/// never more than the apiserver gives it (docs/security.md).
pub fn parse(path: &str) -> ApiPath {
    let decoded = match decode(path) {
        Some(d) => d,
        None => return ApiPath::Other,
    };
    // A path that begins with an empty segment (`//apis/...`) is one the
    // apiserver's router does not match (its 404): never served.
    if decoded.starts_with("//") {
        return ApiPath::Other;
    }
    let segs: Vec<&str> = decoded.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] if !rest.is_empty() => ("", *v, rest),
        ["apis", g, v, rest @ ..] if !rest.is_empty() => (*g, *v, rest),
        _ => return ApiPath::Other,
    };
    // RequestInfo's special verbs: `watch` and `proxy` (which takes no
    // subresource: what follows the name is a path it does not interpret).
    let (watch_prefix, proxy_prefix, rest) = match rest {
        ["watch", rest @ ..] if !rest.is_empty() => (true, false, rest),
        ["proxy", rest @ ..] if !rest.is_empty() => (false, true, rest),
        _ => (false, false, rest),
    };
    // Empty segments, and names the apiserver's handlers refuse as
    // parameters (`.`, `..`, a `%`: "Name parameter invalid", a 400 after
    // authorization): the upstream's to answer.
    if rest
        .iter()
        .any(|s| s.is_empty() || matches!(*s, "." | "..") || s.contains('%'))
    {
        return ApiPath::Other;
    }
    let mk = |ns: Option<&str>, res: &str, name: Option<&str>, sub: Option<String>| {
        ApiPath::Resource(ResourcePath {
            gvr: Gvr::new(group.to_string(), version.to_string(), res.to_string()),
            namespace: ns.map(str::to_string),
            name: name.map(str::to_string),
            subresource: sub.filter(|_| !proxy_prefix),
            watch_prefix,
            proxy_prefix,
        })
    };
    match rest {
        // /namespaces/{ns}/status and /finalize: the namespace's own
        // subresources (RequestInfo's namespaceSubresources).
        ["namespaces", ns, sub @ ("status" | "finalize"), more @ ..] => {
            let sub = std::iter::once(*sub).chain(more.iter().copied());
            mk(
                None,
                "namespaces",
                Some(ns),
                Some(sub.collect::<Vec<_>>().join("/")),
            )
        }
        // /namespaces/{ns}/{resource}[/{name}[/{sub...}]]
        ["namespaces", ns, res, tail @ ..] => match tail {
            [] => mk(Some(ns), res, None, None),
            [name] => mk(Some(ns), res, Some(name), None),
            [name, sub @ ..] => mk(Some(ns), res, Some(name), Some(sub.join("/"))),
        },
        // /{resource}[/{name}[/{sub...}]] (cluster-scoped, or across namespaces)
        [res] => mk(None, res, None, None),
        [res, name] => mk(None, res, Some(name), None),
        [res, name, sub @ ..] => mk(None, res, Some(name), Some(sub.join("/"))),
        [] => ApiPath::Other,
    }
}

/// A path percent-decoded as Go's `url.PathUnescape` decodes it (`+` is
/// itself); `None` for a malformed escape (Go's server answers 400 before
/// any handler) or bytes that are not UTF-8.
fn decode(path: &str) -> Option<std::borrow::Cow<'_, str>> {
    if !path.contains('%') {
        return Some(std::borrow::Cow::Borrowed(path));
    }
    let b = path.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3)?;
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    percent_encoding::percent_decode_str(path)
        .decode_utf8()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn should_route_only_the_paths_of_a_resources_scope() {
        let g = "/apis/example.com/v1";
        // Cluster-scoped: no namespaced path (kube-apiserver 1.36: 404).
        assert!(res(&format!("{g}/gizmos")).routed(false));
        assert!(res(&format!("{g}/gizmos/g-1")).routed(false));
        assert!(!res(&format!("{g}/namespaces/default/gizmos")).routed(false));
        assert!(!res(&format!("{g}/namespaces/default/gizmos/g-1")).routed(false));
        // Namespaced: listed anywhere, named only in its namespace.
        assert!(res(&format!("{g}/widgets")).routed(true));
        assert!(res(&format!("{g}/namespaces/ns-a/widgets/w-1")).routed(true));
        assert!(!res(&format!("{g}/widgets/w-1")).routed(true));
        // A namespace is itself cluster-scoped.
        assert!(res("/api/v1/namespaces/ns-a").routed(false));
    }

    fn res(p: &str) -> ResourcePath {
        match parse(p) {
            ApiPath::Resource(r) => r,
            ApiPath::Other => panic!("{p} should be a resource path"),
        }
    }

    #[test]
    fn should_parse_core_and_group_paths() {
        let r = res("/api/v1/namespaces/ns-1/pods/p/log");
        assert_eq!(r.gvr, Gvr::from_static("", "v1", "pods"));
        assert_eq!(r.namespace.as_deref(), Some("ns-1"));
        assert_eq!(r.name.as_deref(), Some("p"));
        assert_eq!(r.subresource.as_deref(), Some("log"));
        let r = res("/apis/apps/v1/deployments");
        assert_eq!((r.gvr.group(), r.namespace.is_none()), ("apps", true));
        let r = res("/api/v1/namespaces/ns-1");
        assert_eq!(
            (r.gvr.resource(), r.name.as_deref()),
            ("namespaces", Some("ns-1"))
        );
        let r = res("/api/v1/namespaces/ns-1/finalize");
        assert_eq!(
            (
                r.gvr.resource(),
                r.name.as_deref(),
                r.subresource.as_deref()
            ),
            ("namespaces", Some("ns-1"), Some("finalize"))
        );
        let r = res("/api/v1/watch/namespaces/ns-1/pods");
        assert!(r.watch_prefix);
    }

    #[test]
    fn should_decode_the_path_before_splitting_it_as_go_does() {
        let r = res("/api/v1/namespaces/ns-1/configmaps/cm-%78");
        assert_eq!(r.name.as_deref(), Some("cm-x"));
        let r = res("/apis/example.com/v1/namespaces/ns-a/widgets/w-1%2Fstatus");
        assert_eq!(
            (r.name.as_deref(), r.subresource.as_deref()),
            (Some("w-1"), Some("status"))
        );
        let r = res("/api/v1/namespaces/ns-1/pods/p/");
        assert_eq!((r.name.as_deref(), r.subresource), (Some("p"), None));
        assert_eq!(res("/api/v1/pods/a+b").name.as_deref(), Some("a+b"));
        for p in [
            "/api/v1/namespaces/ns-1/pods/%zz",
            "/api/v1/namespaces/ns-1/pods/%4",
            "/api/v1/namespaces/ns-1/pods/%ff",
            "/api/v1/namespaces/ns-1/pods//p",
            "/api/v1/namespaces/ns-1/pods/%2F/p",
            "/api/v1/namespaces/ns-1/pods/..",
            "/api/v1/namespaces/ns-1/pods/%2E",
            "/api/v1/namespaces/./pods/p",
            "/api/v1/namespaces/ns-1/pods/w%25x",
            // A leading empty segment: the apiserver's router answers 404.
            "//api/v1/namespaces/ns-1/pods/p",
            "///apis/example.com/v1/namespaces/ns-a/widgets/w-1",
            "/%2Fapis/example.com/v1/widgets",
        ] {
            assert_eq!(parse(p), ApiPath::Other, "{p}");
        }
    }

    #[test]
    fn should_leave_discovery_and_junk_alone() {
        for p in [
            "/api",
            "/api/v1",
            "/apis",
            "/apis/apps/v1",
            "/version",
            "/",
            "//",
            "/api/v1//x",
        ] {
            assert_eq!(parse(p), ApiPath::Other, "{p}");
        }
    }
}
