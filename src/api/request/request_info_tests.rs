//! The cases of kube-apiserver's `requestinfo_test.go`
//! (`k8s.io/apiserver/pkg/endpoints/request`: `TestGetAPIRequestInfo`,
//! `TestGetNonAPIRequestInfo`, `TestSelectorParsing`) as a table test of
//! [`ApiRequest::parse`]'s scope: the verb, group, version, namespace,
//! resource, subresource and name RequestInfo gives each request, and the
//! selectors it hands the authorizer.

use super::*;

fn parse(method: &str, url: &str) -> Option<ApiRequest> {
    let uri: Uri = url.parse().unwrap();
    ApiRequest::parse(&method.parse().unwrap(), &uri, &HeaderMap::new())
}

/// RequestInfo's fields as r8s derives them: verb, group, version,
/// namespace, resource, subresource, name.
fn info(method: &str, url: &str) -> [String; 7] {
    let r = parse(method, url).unwrap_or_else(|| panic!("{method} {url}: a resource request"));
    let g = &r.path.gvr;
    [
        r.scope.verb,
        g.group(),
        g.version(),
        &r.scope.namespace,
        g.resource(),
        &r.scope.subresource,
        &r.scope.name,
    ]
    .map(str::to_string)
}

#[test]
fn should_read_every_request_as_get_api_request_info_does() {
    #[rustfmt::skip]
    let cases: &[(&str, &str, [&str; 7])] = &[
        // resource paths
        ("GET", "/api/v1/namespaces", ["list", "", "v1", "", "namespaces", "", ""]),
        ("GET", "/api/v1/namespaces/other", ["get", "", "v1", "other", "namespaces", "", "other"]),
        ("GET", "/api/v1/namespaces/other/pods", ["list", "", "v1", "other", "pods", "", ""]),
        ("GET", "/api/v1/namespaces/other/pods/foo", ["get", "", "v1", "other", "pods", "", "foo"]),
        ("HEAD", "/api/v1/namespaces/other/pods/foo", ["get", "", "v1", "other", "pods", "", "foo"]),
        ("GET", "/api/v1/pods", ["list", "", "v1", "", "pods", "", ""]),
        ("HEAD", "/api/v1/pods", ["list", "", "v1", "", "pods", "", ""]),
        // special verbs
        ("GET", "/api/v1/proxy/namespaces/other/pods/foo", ["proxy", "", "v1", "other", "pods", "", "foo"]),
        ("GET", "/api/v1/proxy/namespaces/other/pods/foo/subpath/not/a/subresource", ["proxy", "", "v1", "other", "pods", "", "foo"]),
        ("GET", "/api/v1/watch/pods", ["watch", "", "v1", "", "pods", "", ""]),
        ("GET", "/api/v1/pods?watch=true", ["watch", "", "v1", "", "pods", "", ""]),
        ("GET", "/api/v1/pods?watch=false", ["list", "", "v1", "", "pods", "", ""]),
        ("GET", "/api/v1/watch/namespaces/other/pods", ["watch", "", "v1", "other", "pods", "", ""]),
        ("GET", "/api/v1/namespaces/other/pods?watch=1", ["watch", "", "v1", "other", "pods", "", ""]),
        ("GET", "/api/v1/namespaces/other/pods?watch=0", ["list", "", "v1", "other", "pods", "", ""]),
        // subresource identification
        ("GET", "/api/v1/namespaces/other/pods/foo/status", ["get", "", "v1", "other", "pods", "status", "foo"]),
        ("GET", "/api/v1/namespaces/other/pods/foo/proxy/subpath", ["get", "", "v1", "other", "pods", "proxy", "foo"]),
        ("PUT", "/api/v1/namespaces/other/finalize", ["update", "", "v1", "other", "namespaces", "finalize", "other"]),
        ("PUT", "/api/v1/namespaces/other/status", ["update", "", "v1", "other", "namespaces", "status", "other"]),
        // verb identification
        ("PATCH", "/api/v1/namespaces/other/pods/foo", ["patch", "", "v1", "other", "pods", "", "foo"]),
        ("DELETE", "/api/v1/namespaces/other/pods/foo", ["delete", "", "v1", "other", "pods", "", "foo"]),
        ("POST", "/api/v1/namespaces/other/pods", ["create", "", "v1", "other", "pods", "", ""]),
        // deletecollection verb identification
        ("DELETE", "/api/v1/nodes", ["deletecollection", "", "v1", "", "nodes", "", ""]),
        ("DELETE", "/api/v1/namespaces", ["deletecollection", "", "v1", "", "namespaces", "", ""]),
        ("DELETE", "/api/v1/namespaces/other/pods", ["deletecollection", "", "v1", "other", "pods", "", ""]),
        ("DELETE", "/apis/extensions/v1/namespaces/other/pods", ["deletecollection", "extensions", "v1", "other", "pods", "", ""]),
        // api group and version identification
        ("POST", "/apis/extensions/v1/namespaces/other/pods", ["create", "extensions", "v1", "other", "pods", "", ""]),
        ("POST", "/apis/extensions/v1beta3/namespaces/other/pods", ["create", "extensions", "v1beta3", "other", "pods", "", ""]),
    ];
    for (method, url, want) in cases {
        assert_eq!(
            info(method, url),
            want.map(str::to_string),
            "{method} {url}"
        );
    }
    // errorCases, and TestGetNonAPIRequestInfo's non-resource requests.
    for url in [
        "/",
        "/api/version/",
        "/apis/group/version/",
        "/badprefix/version/resource",
        "/apis/version/resource",
        "/not-api/version/resource",
        "/apis/extensions/v1beta1",
        "/apis/extensions/v1beta1/",
        "/api/version",
        "/api",
    ] {
        assert!(parse("GET", url).is_none(), "{url}: not a resource request");
    }
    for url in [
        "/api/version/resource",
        "/apis/group/version/resource/name/subresource",
        "/api/version/resource/name/subresource",
        "/apis/batch/v1/job",
        "/apis/batch/v1/job/foo",
        "/apis/batch/v1/job/foo/scale",
    ] {
        assert!(parse("GET", url).is_some(), "{url}: a resource request");
    }
}

#[test]
fn should_hand_the_authorizer_the_selectors_select_parsing_does() {
    // (name, method, url, name, verb, field selector, label selector): the
    // selectors RequestInfo reads, whose requirements r8s sends.
    #[rustfmt::skip]
    let cases: &[(&str, &str, &str, &str, &str, &str, &str)] = &[
        ("no selector", "GET", "/apis/group/version/resource", "", "list", "", ""),
        ("metadata.name selector", "GET", "/apis/group/version/resource?fieldSelector=metadata.name=name1", "name1", "list", "metadata.name=name1", ""),
        ("metadata.name selector with watch", "GET", "/apis/group/version/resource?watch=true&fieldSelector=metadata.name=name1", "name1", "watch", "metadata.name=name1", ""),
        ("random selector", "GET", "/apis/group/version/resource?fieldSelector=foo=bar&labelSelector=baz=qux", "", "list", "foo=bar", "baz=qux"),
        ("invalid selector with metadata.name", "GET", "/apis/group/version/resource?fieldSelector=metadata.name=name1,foo", "", "list", "metadata.name=name1,foo", ""),
        ("invalid selector with metadata.name with watch", "GET", "/apis/group/version/resource?fieldSelector=metadata.name=name1,foo&watch=true", "", "watch", "metadata.name=name1,foo", ""),
        ("invalid selector with metadata.name with watch false", "GET", "/apis/group/version/resource?fieldSelector=metadata.name=name1,foo&watch=false", "", "list", "metadata.name=name1,foo", ""),
        ("selector on deletecollection is honored", "DELETE", "/apis/group/version/resource?fieldSelector=foo=bar&labelSelector=baz=qux", "", "deletecollection", "foo=bar", "baz=qux"),
        ("selector on repeated param matches parsed param", "GET", "/apis/group/version/resource?fieldSelector=metadata.name=foo&fieldSelector=metadata.name=bar&labelSelector=foo=bar&labelSelector=foo=baz", "foo", "list", "metadata.name=foo", "foo=bar"),
        ("selector on other verb is ignored", "GET", "/apis/group/version/resource/name?fieldSelector=foo=bar&labelSelector=foo=bar", "name", "get", "", ""),
        ("selector on deprecated root type watch is not parsed", "GET", "/apis/group/version/watch/resource?fieldSelector=metadata.name=foo&labelSelector=foo=bar", "", "watch", "", ""),
        ("selector on deprecated root item watch is not parsed", "GET", "/apis/group/version/watch/resource/name?fieldSelector=metadata.name=foo&labelSelector=foo=bar", "name", "watch", "", ""),
    ];
    for (case, method, url, name, verb, fields, labels) in cases {
        let r = parse(method, url).unwrap();
        assert_eq!(
            (r.scope.name.as_str(), r.scope.verb),
            (*name, *verb),
            "{case}"
        );
        // What GetAuthorizerAttributes keeps of the raw selector: the
        // requirements of what parses (none of what does not).
        let want_fields = FieldSelector::parse_syntax(fields)
            .map(|f| f.review_requirements())
            .unwrap_or_default();
        let want_labels = LabelSelector::parse(labels)
            .map(|l| l.review_requirements())
            .unwrap_or_default();
        assert_eq!(r.scope.fields, want_fields, "{case}: field selector");
        assert_eq!(r.scope.labels, want_labels, "{case}: label selector");
        assert_eq!(
            r.scope.fields.is_empty(),
            fields.is_empty() || fields.ends_with(",foo"),
            "{case}"
        );
        assert_eq!(r.scope.labels.is_empty(), labels.is_empty(), "{case}");
    }
}
