//! One request for a resource, decoded once: what kube-apiserver's
//! RequestInfo (`k8s.io/apiserver/pkg/endpoints/request`) and its handlers'
//! option decoding make of the method, path, query and headers. The API
//! listener and the built-in upstream both start from it.

use std::borrow::Cow;

use http::{HeaderMap, Method, Uri, header};

use super::media::{self, Choice, Offer};
use super::params::ListOptions;
use super::path::{self, ApiPath, ResourcePath};
use super::query::Query;
use super::selector::{FieldSelector, LabelSelector, ReviewRequirement};
use super::status::Status;

/// kube-apiserver's verbs (RequestInfo's), as an authorizer and metrics see them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// `GET` of one object (or its subresource).
    Get,
    /// `GET` of a collection.
    List,
    /// `GET` of a collection with `watch=true` (or the `/watch/` prefix).
    Watch,
    /// `POST`.
    Create,
    /// `PUT`.
    Update,
    /// `PATCH`.
    Patch,
    /// `DELETE` of one object.
    Delete,
    /// `DELETE` of a collection.
    DeleteCollection,
    /// `exec`, `attach`, `portforward`.
    Connect,
    /// The `proxy` subresource.
    Proxy,
    /// Anything else (other methods; non-resource paths).
    Other,
}

impl Verb {
    /// The verb's name (`get`, `deletecollection`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
            Verb::Connect => "connect",
            Verb::Proxy => "proxy",
            Verb::Other => "other",
        }
    }

    /// r8s's verb for a request whose RequestInfo verb is `info`
    /// ([`info_verb`]): that verb, but for what r8s routes apart (`exec`,
    /// `attach`, `portforward` and `proxy` subresources, the `/proxy/`
    /// prefix) and a `/watch/` path asked by another method than GET (only
    /// GET is routed: the upstream's to answer).
    fn of(method: &Method, rp: &ResourcePath, info: &str) -> Self {
        match rp.subresource.as_deref() {
            _ if rp.proxy_prefix => return Verb::Proxy,
            Some("exec" | "attach" | "portforward") => return Verb::Connect,
            Some("proxy") => return Verb::Proxy,
            _ if rp.watch_prefix && !matches!(*method, Method::GET | Method::HEAD) => {
                return Verb::Other;
            }
            _ => {}
        }
        match info {
            "get" => Verb::Get,
            "list" => Verb::List,
            "watch" => Verb::Watch,
            "create" => Verb::Create,
            "update" => Verb::Update,
            "patch" => Verb::Patch,
            "delete" => Verb::Delete,
            "deletecollection" => Verb::DeleteCollection,
            _ => Verb::Other,
        }
    }
}

/// A request for a resource, decoded once.
#[derive(Debug, Clone)]
pub struct ApiRequest {
    /// What RequestInfo calls the verb.
    pub verb: Verb,
    /// Group/version/resource, namespace, name, subresource.
    pub path: ResourcePath,
    /// The query string, decoded.
    pub query: Query,
    /// Its get/list/watch options with their selectors parsed, or the
    /// apiserver's 400 for the first bad value. A named watch's selectors
    /// hold its name (`metadata.name=X`), as the apiserver's handler makes
    /// them, or they are the 400 for a field selector naming another.
    pub options: Result<ListOptions, Status>,
    /// What an authorizer is asked about it (RequestInfo's attributes),
    /// derived once here: what r8s authorizes, audits and bounds a cached
    /// answer by.
    pub scope: Scope,
    /// Whether a JSON answer is pretty-printed.
    pub pretty: bool,
    /// Whether the answer is a long-lived stream (a watch, a followed log).
    pub streaming: bool,
    /// What kube-apiserver answers its `Accept` with.
    pub media: Choice,
    /// Whether the client takes gzip.
    pub gzip: bool,
    /// What r8s's own errors for it are written in (`ErrorNegotiated`).
    pub errors: media::ErrorEncoding,
}

impl ApiRequest {
    /// The request for a resource that `method`, `uri` and `headers` make;
    /// `None` for other paths (discovery, `/version`, `/openapi`, health).
    pub fn parse(method: &Method, uri: &Uri, headers: &HeaderMap) -> Option<Self> {
        let ApiPath::Resource(path) = path::parse(uri.path()) else {
            return None;
        };
        let query = Query::parse(uri.query());
        let info = info_verb(method, &path, &query);
        let verb = Verb::of(method, &path, info);
        let fields = path
            .gvr
            .is_builtin()
            .then(|| super::selector::supported_fields(path.gvr.resource()));
        let mut options = ListOptions::parse(&query, fields);
        let scope = Scope::of(info, verb, &path, &query, options.as_ref().ok());
        if let (Verb::Watch, Some(name), Ok(o)) = (verb, &path.name, &mut options) {
            name_the_watch(name, o);
        }
        let pretty = match &options {
            Ok(o) => o
                .pretty
                .unwrap_or_else(|| verb != Verb::Watch && from_curl(headers)),
            Err(_) => from_curl(headers),
        };
        let path_builtin = path.gvr.is_builtin();
        // A watch however asked (a POST to a `/watch/` path streams too).
        let streaming =
            info == "watch" || (path.subresource.as_deref() == Some("log") && query.flag("follow"));
        Some(ApiRequest {
            verb,
            path,
            query,
            options,
            scope,
            pretty,
            streaming,
            media: media::negotiate(
                headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()),
                if path_builtin {
                    Offer::Builtin
                } else {
                    Offer::Custom
                },
            ),
            gzip: media::accepts_gzip(headers),
            errors: media::negotiate_error(
                headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()),
            ),
        })
    }

    /// The encoding its answers, errors included, come in: the negotiated
    /// one, JSON where the answer is none the cache gives (Table, YAML, 406).
    pub fn encoding(&self) -> media::Encoding {
        self.media
            .media()
            .map_or(media::Encoding::Json, |m| m.encoding)
    }

    /// The resource as metrics label it: `pods`, or `pods/log` for a subresource.
    pub fn resource_label(&self) -> Cow<'_, str> {
        match &self.path.subresource {
            Some(s) => Cow::Owned(format!("{}/{s}", self.path.gvr.resource())),
            None => Cow::Borrowed(self.path.gvr.resource()),
        }
    }
}

/// What an authorizer is asked about a request besides who asks and the
/// resource: kube-apiserver's RequestInfo (`NewRequestInfo`) and
/// `GetAuthorizerAttributes`, derived once per request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Scope {
    /// RequestInfo's verb (`get`, `list`, `watch`, `create`, `proxy`, ...;
    /// empty for a method it does not know): for the cached reads, the
    /// same as [`Verb::as_str`].
    pub verb: &'static str,
    /// RequestInfo's subresource: the first segment after the name (none
    /// under the `/proxy/` prefix).
    pub subresource: String,
    /// The namespace (empty: cluster scope, or every namespace).
    pub namespace: String,
    /// The object's name (empty: a collection).
    pub name: String,
    /// The `fieldSelector`'s requirements (lists, watches and
    /// deletecollections not asked by the `/watch/` prefix).
    pub fields: Vec<ReviewRequirement>,
    /// The `labelSelector`'s requirements (the same requests).
    pub labels: Vec<ReviewRequirement>,
}

impl Scope {
    /// The scope of a request for `rp` whose RequestInfo verb is `info`
    /// (r8s's: `verb`), with `query`, whose options decoded as `options`
    /// (`None`: they did not).
    fn of(
        info: &'static str,
        verb: Verb,
        rp: &ResourcePath,
        query: &Query,
        options: Option<&ListOptions>,
    ) -> Self {
        let mut scope = Scope {
            verb: info,
            subresource: rp
                .subresource
                .as_deref()
                .and_then(|s| s.split('/').next())
                .unwrap_or_default()
                .to_string(),
            namespace: rp.authz_namespace().to_string(),
            name: authz_name(verb, rp, options).into_owned(),
            ..Scope::default()
        };
        // RequestInfo reads the selectors straight from the query (their
        // first values), and GetAuthorizerAttributes keeps what parses:
        // none for a request by the `/watch/` prefix.
        let with_selectors = matches!(scope.verb, "list" | "watch" | "deletecollection")
            && !rp.watch_prefix
            && !rp.proxy_prefix;
        if !with_selectors {
            return scope;
        }
        // The options' selectors are these same first values, parsed once
        // already; read again only where they were refused.
        match options.map(|o| &o.selectors) {
            Some(Ok(sel)) => {
                scope.fields = sel.fields.review_requirements();
                scope.labels = sel.labels.review_requirements();
            }
            _ => {
                if let Some(Ok(f)) = query.get("fieldSelector").map(FieldSelector::parse_syntax) {
                    scope.fields = f.review_requirements();
                }
                if let Some(Ok(l)) = query.get("labelSelector").map(LabelSelector::parse) {
                    scope.labels = l.review_requirements();
                }
            }
        }
        scope
    }
}

impl ApiRequest {
    /// Whether a cached answer to it can only hold what its scope names:
    /// a read naming an object (by its path or its field selector) is a GET
    /// of that object, or a list or watch whose field selector requires
    /// that name (other verbs the cache never answers). Every request
    /// `parse` makes is, but those whose options do not decode (which the
    /// cache passes); the cache paths check it anyway, and pass one that
    /// is not.
    pub fn confined(&self) -> bool {
        if self.scope.name.is_empty() {
            return true;
        }
        match self.verb {
            Verb::Get => self.path.name.as_deref() == Some(self.scope.name.as_str()),
            Verb::List | Verb::Watch => self.options.as_ref().is_ok_and(|o| {
                o.selectors.as_ref().is_ok_and(|s| {
                    s.fields.exact("metadata.name") == Some(self.scope.name.as_str())
                })
            }),
            // Never answered from the cache (it reads, and only reads).
            _ => true,
        }
    }
}

/// RequestInfo's verb for a request: the path's special verb, else the
/// method's, a GET or HEAD without a name a `list` or (its `watch`
/// parameter set) a `watch`, a DELETE without one a `deletecollection`.
fn info_verb(method: &Method, rp: &ResourcePath, query: &Query) -> &'static str {
    if rp.watch_prefix {
        return "watch";
    }
    if rp.proxy_prefix {
        return "proxy";
    }
    let named = rp.name.is_some();
    match *method {
        Method::POST => "create",
        Method::GET | Method::HEAD if named => "get",
        Method::GET | Method::HEAD if query.flag("watch") => "watch",
        Method::GET | Method::HEAD => "list",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => "",
    }
}

/// A named watch (`/watch/.../{name}`) selects its object as the
/// apiserver's list handler does: no field selector becomes
/// `metadata.name={name}`; one that does not require that name is its 400.
fn name_the_watch(name: &str, o: &mut ListOptions) {
    let Ok(sel) = &mut o.selectors else {
        return;
    };
    if sel.fields.is_empty() {
        sel.fields = FieldSelector::name_only(name);
    } else if sel.fields.exact("metadata.name") != Some(name) {
        o.selectors = Err(Status::bad_request(
            "fieldSelector metadata.name doesn't match requested name",
        ));
    }
}

/// The object name an authorizer sees for a request, as RequestInfo sets
/// it: the path's, or for a list or watch of a collection (not asked by
/// the `/watch/` prefix) the name its field selector requires
/// (`metadata.name=X`, the first such term in sorted order, when X is a
/// valid path segment), so RBAC `resourceNames` apply to single-object
/// informers. `options`: `None` when they did not decode, where
/// RequestInfo reads no name either.
fn authz_name<'a>(verb: Verb, rp: &'a ResourcePath, options: Option<&ListOptions>) -> Cow<'a, str> {
    if let Some(name) = &rp.name {
        return Cow::Borrowed(name);
    }
    let Some(o) = options.filter(|_| matches!(verb, Verb::List | Verb::Watch) && !rp.watch_prefix)
    else {
        return Cow::Borrowed("");
    };
    if o.field_selector.is_empty() {
        return Cow::Borrowed("");
    }
    // The selectors as decoded once; only when they were refused is the
    // field selector read again, for the one refusal RequestInfo does not
    // share: a field the resource does not support (DecodeParameters fails
    // as a whole on a bad label selector or bad field syntax).
    let reparsed;
    let fields = match &o.selectors {
        Ok(sel) => &sel.fields,
        Err(_) if LabelSelector::parse(&o.label_selector).is_err() => return Cow::Borrowed(""),
        Err(_) => match FieldSelector::parse_syntax(&o.field_selector) {
            Ok(f) => {
                reparsed = f;
                &reparsed
            }
            Err(_) => return Cow::Borrowed(""),
        },
    };
    match fields.exact("metadata.name") {
        Some(n) if !matches!(n, "." | "..") && !n.contains(['/', '%']) => Cow::Owned(n.into()),
        _ => Cow::Borrowed(""),
    }
}

/// Whether a JSON answer to a non-resource path (discovery) is pretty-printed.
pub fn pretty_non_resource(query: &Query, headers: &HeaderMap) -> bool {
    query.pretty().unwrap_or_else(|| from_curl(headers))
}

/// kube-apiserver pretty-prints JSON for `curl` unless told `pretty=false`.
fn from_curl(headers: &HeaderMap) -> bool {
    headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ua| ua.starts_with("curl/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: &str, uri: &str) -> ApiRequest {
        let uri: Uri = uri.parse().unwrap();
        ApiRequest::parse(&method.parse().unwrap(), &uri, &HeaderMap::new()).unwrap()
    }

    #[test]
    fn should_classify_like_request_info() {
        for (method, uri, verb) in [
            ("GET", "/api/v1/pods?watch=1", Verb::Watch),
            ("GET", "/api/v1/pods?watch=bogus", Verb::Watch),
            ("GET", "/api/v1/pods?watch=false", Verb::List),
            ("GET", "/api/v1/namespaces/a/pods", Verb::List),
            ("GET", "/api/v1/watch/namespaces/a/pods", Verb::Watch),
            ("GET", "/api/v1/namespaces/a/pods/p?watch=1", Verb::Get),
            ("DELETE", "/api/v1/namespaces/a/pods/p", Verb::Delete),
            (
                "DELETE",
                "/api/v1/namespaces/a/pods",
                Verb::DeleteCollection,
            ),
            ("POST", "/api/v1/namespaces/a/pods/p/exec", Verb::Connect),
            ("OPTIONS", "/api/v1/pods", Verb::Other),
        ] {
            assert_eq!(req(method, uri).verb, verb, "{method} {uri}");
        }
        assert!(req("GET", "/api/v1/pods?watch=1").streaming);
        let l = req("GET", "/api/v1/namespaces/a/pods/p/log?follow=true");
        assert_eq!(
            (l.verb, l.resource_label(), l.streaming),
            (Verb::Get, "pods/log".into(), true)
        );
        let uri: Uri = "/apis/apps/v1".parse().unwrap();
        assert!(ApiRequest::parse(&Method::GET, &uri, &HeaderMap::new()).is_none());
    }

    #[test]
    fn should_decode_options_and_selectors_once() {
        let r = req(
            "GET",
            "/api/v1/pods?labelSelector=app%3Dweb&fieldSelector=spec.nodeName%3Dn1&limit=5",
        );
        let o = r.options.as_ref().unwrap();
        assert_eq!(
            (o.limit, o.field_selector.as_str()),
            (5, "spec.nodeName=n1")
        );
        let s = o.selectors.as_ref().unwrap();
        assert_eq!(s.fields.exact("spec.nodeName"), Some("n1"));
        let bad = req("GET", "/api/v1/pods?fieldSelector=spec.bogus%3D1");
        assert_eq!(
            bad.options.unwrap().selectors.unwrap_err().message,
            "field label not supported: spec.bogus"
        );
        assert!(req("GET", "/api/v1/pods?limit=x").options.is_err());
    }

    #[test]
    fn should_name_the_object_a_request_is_for_as_request_info() {
        let name = |method: &str, uri: &str| {
            let r = req(method, uri);
            r.scope.name
        };
        for (method, uri, want) in [
            ("GET", "/api/v1/namespaces/a/configmaps/cm", "cm"),
            (
                "GET",
                "/api/v1/namespaces/a/configmaps?fieldSelector=metadata.name%3Dcm",
                "cm",
            ),
            (
                "GET",
                "/api/v1/configmaps?watch=1&fieldSelector=metadata.name%3D%3Dcm",
                "cm",
            ),
            // The first exact term in sorted order; `!=` requires no name.
            (
                "GET",
                "/api/v1/pods?fieldSelector=metadata.name%3Db,metadata.name%3Da",
                "a",
            ),
            ("GET", "/api/v1/pods?fieldSelector=metadata.name!%3Dcm", ""),
            // An unsupported field is the handler's 400, after RequestInfo.
            (
                "GET",
                "/api/v1/pods?fieldSelector=metadata.name%3Dp,spec.bogus%3D1",
                "p",
            ),
            (
                "GET",
                "/api/v1/pods?fieldSelector=metadata.name%3Dp&labelSelector=a%20in",
                "",
            ),
            (
                "GET",
                "/api/v1/pods?fieldSelector=metadata.name%3Da%2Fb",
                "",
            ),
            ("GET", "/api/v1/pods?fieldSelector=metadata.name%3D..", ""),
            (
                "GET",
                "/api/v1/pods?fieldSelector=metadata.name%3Dp&limit=x",
                "",
            ),
            (
                "DELETE",
                "/api/v1/namespaces/a/pods?fieldSelector=metadata.name%3Dp",
                "",
            ),
        ] {
            assert_eq!(name(method, uri), want, "{method} {uri}");
        }
        let ns = |uri: &str| req("GET", uri).scope.namespace;
        assert_eq!(ns("/api/v1/namespaces/ns-2"), "ns-2");
        assert_eq!(ns("/api/v1/namespaces/ns-2/status"), "ns-2");
        assert_eq!(ns("/api/v1/namespaces/ns-2/pods"), "ns-2");
        assert_eq!(
            ns("/api/v1/namespaces?fieldSelector=metadata.name%3Dns-2"),
            ""
        );
        assert_eq!(ns("/api/v1/nodes/n1"), "");
    }

    /// The findings of issue 69, each as the 1.36 apiserver reads it.
    #[test]
    fn should_bound_a_named_watch_to_its_name_as_the_list_handler_does() {
        let g = "/apis/example.com/v1";
        // The legacy named watch: the name, in the scope and the selector.
        let r = req(
            "GET",
            &format!("{g}/watch/namespaces/ns-1/widgets/w-1?resourceVersion=0"),
        );
        assert_eq!((r.verb, r.scope.name.as_str()), (Verb::Watch, "w-1"));
        let sel = r.options.as_ref().unwrap().selectors.as_ref().unwrap();
        assert_eq!(sel.fields.exact("metadata.name"), Some("w-1"));
        assert!(r.confined());
        // A selector naming another: the handler's 400.
        let r = req(
            "GET",
            &format!("{g}/watch/namespaces/ns-1/widgets/w-1?fieldSelector=metadata.name%3Dw-2"),
        );
        let err = r.options.as_ref().unwrap().selectors.as_ref().unwrap_err();
        assert_eq!(
            err.message,
            "fieldSelector metadata.name doesn't match requested name"
        );
        assert!(!r.confined());
        // One that names it, with more: kept whole.
        let r = req(
            "GET",
            &format!(
                "{g}/watch/namespaces/ns-1/widgets/w-1?fieldSelector=metadata.name%3Dw-1,metadata.namespace%3Dns-1"
            ),
        );
        assert!(r.confined());
        // A selector on another field only: the 400 too.
        let r = req(
            "GET",
            &format!(
                "{g}/watch/namespaces/ns-1/widgets/w-1?fieldSelector=metadata.namespace%3Dns-1"
            ),
        );
        assert!(r.options.as_ref().unwrap().selectors.is_err());
        // The legacy collection watch: no name and no selectors for the
        // authorizer, whatever its field selector says.
        let r = req(
            "GET",
            &format!(
                "{g}/watch/namespaces/ns-1/widgets?fieldSelector=metadata.name%3Dw-1&labelSelector=a%3Db"
            ),
        );
        assert_eq!(
            r.scope,
            Scope {
                verb: "watch",
                namespace: "ns-1".into(),
                ..Scope::default()
            }
        );
        // The same as a watch parameter: named, with its requirements.
        let r = req(
            "GET",
            &format!(
                "{g}/namespaces/ns-1/widgets?watch=1&fieldSelector=metadata.name%3Dw-1&labelSelector=b%20in%20(z,y),a%3D1,!c,d,e!%3D3,f%3E2"
            ),
        );
        assert_eq!(r.scope.name, "w-1");
        let labels: Vec<(String, &str, Vec<String>)> = r
            .scope
            .labels
            .iter()
            .map(|q| (q.key.clone(), q.op.as_str(), q.values.clone()))
            .collect();
        let v = |vs: &[&str]| vs.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            labels,
            [
                ("a".to_string(), "In", v(&["1"])),
                ("b".to_string(), "In", v(&["y", "z"])),
                ("c".to_string(), "DoesNotExist", v(&[])),
                ("d".to_string(), "Exists", v(&[])),
                ("e".to_string(), "NotIn", v(&["3"])),
            ]
        );
        // A percent-encoded name is the name (Go decodes the path first).
        let r = req(
            "GET",
            "/api/v1/namespaces/ns-1/configmaps/cm-%78?resourceVersion=0",
        );
        assert_eq!(r.scope.name, "cm-x");
        // A GET whose `watch` is set is a GET of that object.
        assert_eq!(
            req("GET", &format!("{g}/namespaces/ns-1/widgets/w-1?watch=1")).verb,
            Verb::Get
        );
        // Selectors that do not parse: what does parse still counts (1.36
        // keeps the field requirements when the label selector fails).
        let r = req(
            "GET",
            &format!("{g}/widgets?fieldSelector=metadata.name%3Dw-2&labelSelector=a%20in"),
        );
        assert_eq!(
            (
                r.scope.name.as_str(),
                r.scope.fields.len(),
                r.scope.labels.len()
            ),
            ("", 1, 0)
        );
        // Duplicates: the first value counts.
        let r = req(
            "GET",
            &format!(
                "{g}/widgets?fieldSelector=metadata.name%3D%3Dw-2&fieldSelector=metadata.name%3Dw-1"
            ),
        );
        assert_eq!(r.scope.name, "w-2");
    }
}

#[cfg(test)]
mod request_info_tests;
