//! r8s against a current kube-apiserver: the same requests sent to the
//! Kubernetes 1.36.3 kit directly and through r8s in front of it (over TLS,
//! with the kit's kubeconfig, `cache.resources = ["*"]`), and the answers
//! compared as a client reads them. The kit is the oracle: nothing here uses
//! r8s's parsers to judge r8s (bodies are read with serde_json and with
//! protobuf messages declared below).
//!
//! Every difference is a failure, except those [`ALLOWED`] lists with the
//! document that allows them. Skips (saying so) where `KUBE_APISERVER_136_KIT`
//! is unset; `.ci/run` sets it.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::answers::{Floor, compare, compare_watch, header, names, rv_of};
use crate::common::kube136::Kube136;
use crate::common::*;
use serde_json::{Value, json};

const GROUP: &str = "example.com";
const NAMESPACES: [&str; 3] = ["ns-a", "ns-b", "ns-c"];
pub(crate) const JSON: &str = "application/json";
const META: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
const META_LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
const META_PB: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
const META_LIST_PB: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

/// Differences r8s may show, each with what allows it: the case's name
/// holds every one of the first strings, and the difference starts with
/// one of the second.
const ALLOWED: &[(&[&str], &[&str], &str)] = &[
    (
        &["resourceVersion=0", "limit="],
        &[
            "items",
            "pages",
            "paged items",
            "protobuf items",
            "protobuf pages",
        ],
        "kube-apiserver 1.36 ignores `limit` with resourceVersion=0 (it answers from its \
         watch cache, whole); r8s pages (every page of one version: the pages' items, \
         followed to the end, are compared and must be equal). The API concepts document \
         allows both: the server returns 'up to limit' items, and with resourceVersion=0 \
         any version ('Any').",
    ),
    (
        &["continue rv=0"],
        &["items", "pages"],
        "The same with a continue token of r8s's (its first page is a consistent list \
         it proved and served): kube-apiserver 1.36 answered the rest whole, ignoring \
         `limit` with resourceVersion=0; r8s goes on paging its token's version. Both \
         are 'up to limit' items of a version not older than asked.",
    ),
    (
        &[""],
        &["list resourceVersion"],
        "An 'Any' or 'Not older than' read may be served at any version not older than \
         asked (resource-version.md, 'Not older than'; api-concepts, 'Any'): a list's \
         version is checked against that floor, not against the apiserver's.",
    ),
];

/// A namespaced CRD with two versions (v1 stored), printer columns and a
/// selectable field; and a cluster-scoped one with a selectable field.
pub(crate) fn definitions() -> [Value; 2] {
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "size": {"type": "integer"}, "color": {"type": "string"}, "notes": {"type": "string"}}}}}});
    let columns = json!([
        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
        {"name": "Color", "type": "string", "jsonPath": ".spec.color", "priority": 1},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    ]);
    let selectable = json!([{"jsonPath": ".spec.color"}]);
    let version = |name: &str, storage: bool| {
        json!({"name": name, "served": true, "storage": storage, "schema": schema,
               "additionalPrinterColumns": columns, "selectableFields": selectable})
    };
    let crd = |plural: &str, kind: &str, scope: &str, versions: Value| {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": format!("{plural}.{GROUP}")},
               "spec": {"group": GROUP, "scope": scope,
                        "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind,
                                  "listKind": format!("{kind}List")},
                        "versions": versions}})
    };
    [
        crd(
            "widgets",
            "Widget",
            "Namespaced",
            json!([version("v1", true), version("v2", false)]),
        ),
        crd("gizmos", "Gizmo", "Cluster", json!([version("v1", true)])),
    ]
}

/// Widget `i`: in one of three namespaces, two label values, three colors,
/// and enough notes that 300 of them make a list the apiserver gzips.
fn widget(i: usize) -> Value {
    let colors = ["red", "green", "blue"];
    json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Widget",
           "metadata": {"name": format!("w-{i:03}"), "namespace": NAMESPACES[i % 3],
                        "labels": {"tier": if i.is_multiple_of(2) { "a" } else { "b" }}},
           "spec": {"size": i, "color": colors[i % 3], "notes": "n".repeat(400)}})
}

fn gizmo(i: usize) -> Value {
    let colors = ["red", "green"];
    json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Gizmo",
           "metadata": {"name": format!("g-{i:02}"), "labels": {"tier": "a"}},
           "spec": {"size": i, "color": colors[i % 2]}})
}

/// The apiserver, r8s in front of it, and the state written.
pub(crate) struct Rig {
    pub(crate) kube: Kube136,
    pub(crate) r8s: R8s,
    /// The resource version of every write, in order.
    writes: Vec<u64>,
    /// What was found, case by case.
    diffs: Vec<String>,
    cases: usize,
    /// `X-R8s-Cache` of r8s's answers: hit or pass, counted.
    served: BTreeMap<String, usize>,
}

/// Sets up the apiserver with both definitions and their objects, then r8s.
pub(crate) async fn rig(test: &str, widgets: usize) -> Option<Rig> {
    let kube = Kube136::start(test)?;
    let mut writes = Vec::new();
    for d in definitions() {
        let r = kube
            .write(
                "POST",
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                &d,
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text());
    }
    // Established and served (the apiserver's own bound: a minute).
    for path in [
        "/apis/example.com/v1/widgets",
        "/apis/example.com/v2/widgets",
        "/apis/example.com/v1/gizmos",
    ] {
        let guard = HangGuard::new();
        while kube
            .send("GET", path, &[], None, Duration::from_secs(10))
            .await
            .status
            != 200
        {
            guard.check(|| format!("{path} not served"));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    for i in 0..widgets {
        let ns = NAMESPACES[i % 3];
        let r = kube
            .write(
                "POST",
                &format!("/apis/{GROUP}/v1/namespaces/{ns}/widgets"),
                &widget(i),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text());
        writes.push(rv_of(&r.json()));
    }
    for i in 0..10 {
        let r = kube
            .write("POST", &format!("/apis/{GROUP}/v1/gizmos"), &gizmo(i))
            .await;
        assert_eq!(r.status, 201, "{}", r.text());
        writes.push(rv_of(&r.json()));
    }
    let r8s = kube
        .r8s()
        .with(|c| c.cache.resources = vec!["*".into()])
        .start()
        .await;
    let rig = Rig {
        kube,
        r8s,
        writes,
        diffs: Vec::new(),
        cases: 0,
        served: BTreeMap::new(),
    };
    rig.caught_up().await;
    Some(rig)
}

impl Rig {
    /// The newest write.
    pub(crate) fn last(&self) -> u64 {
        *self.writes.last().unwrap()
    }

    /// Waits until every cache the tests read holds what the apiserver
    /// holds (a cache's version moves only with its resource's events and
    /// bookmarks, so its version is no measure of having every write).
    async fn caught_up(&self) {
        for path in [
            "/apis/example.com/v1/widgets",
            "/apis/example.com/v2/widgets",
            "/apis/example.com/v1/gizmos",
        ] {
            let theirs = self
                .kube
                .send("GET", path, &[], None, Duration::from_secs(10))
                .await
                .json();
            let url = format!("{}{path}?resourceVersion=0", self.r8s.url());
            let guard = HangGuard::new();
            loop {
                let r = get(&url).await;
                if r.status == 200
                    && r.headers.get("x-r8s-cache").is_some_and(|h| h == "hit")
                    && r.json()["items"] == theirs["items"]
                {
                    break;
                }
                guard.check(|| format!("{path}: r8s did not catch up: {}", r.text()));
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// Writes through the apiserver (a change r8s's caches will see).
    async fn touch(&mut self, i: usize, size: usize) {
        let ns = NAMESPACES[i % 3];
        let r = self
            .kube
            .write(
                "PATCH",
                &format!("/apis/{GROUP}/v1/namespaces/{ns}/widgets/w-{i:03}"),
                &json!({"spec": {"size": size}}),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        self.writes.push(rv_of(&r.json()));
    }

    /// `path` asked of both at once, with `accept` (and gzip where asked).
    pub(crate) async fn ask(
        &self,
        path: &str,
        accept: &str,
        gzip: bool,
        limit: Duration,
    ) -> (Resp, Resp) {
        let mut headers = vec![("accept", accept)];
        if gzip {
            headers.push(("accept-encoding", "gzip"));
        }
        let url = format!("{}{path}", self.r8s.url());
        tokio::join!(
            self.kube.send("GET", path, &headers, None, limit),
            send("GET", &url, &headers, None)
        )
    }

    /// Counts a case and how r8s answered it (`X-R8s-Cache`).
    pub(crate) fn count(&mut self, ours: &Resp) {
        let how = ours
            .headers
            .get("x-r8s-cache")
            .map_or("none".to_string(), |h| h.to_str().unwrap().to_string());
        *self.served.entry(how).or_default() += 1;
        self.cases += 1;
    }

    /// [`Rig::ask`], counted.
    async fn both(
        &mut self,
        path: &str,
        accept: &str,
        gzip: bool,
        limit: Duration,
    ) -> (Resp, Resp) {
        let r = self.ask(path, accept, gzip, limit).await;
        self.count(&r.1);
        r
    }

    /// A read of a version beyond the upstream's: r8s waits for it, then
    /// answers the apiserver's 504 itself (passing it on would make the
    /// client wait a second time for the same answer).
    fn answered_beyond_upstream(&mut self, case: &str, ours: &Resp) {
        if header(ours, "x-r8s-cache") != "hit" {
            self.differ(
                case,
                "a version beyond the upstream's passed through (two waits)".into(),
            );
        }
    }

    /// Records each difference `found` in `case`, unless [`ALLOWED`] allows it.
    fn record(&mut self, case: &str, found: Vec<String>) {
        for what in found {
            self.differ(case, what);
        }
    }

    /// Records a difference unless [`ALLOWED`] allows it.
    fn differ(&mut self, case: &str, what: String) {
        let allowed = ALLOWED.iter().any(|(cs, ws, _)| {
            cs.iter().all(|c| case.contains(c)) && ws.iter().any(|w| what.starts_with(w))
        });
        if !allowed {
            self.diffs.push(format!("{case}: {what}"));
        }
    }

    /// Records a difference no [`ALLOWED`] entry can excuse: a case's
    /// answer that is not what is expected of it.
    pub(crate) fn fail(&mut self, what: String) {
        self.diffs.push(what);
    }

    /// Fails with every difference found.
    pub(crate) fn verdict(self, test: &str) {
        eprintln!(
            "{test}: {} cases, r8s answered {:?}, {} differences",
            self.cases,
            self.served,
            self.diffs.len()
        );
        assert!(
            self.diffs.is_empty(),
            "{} of {} answers differ from kube-apiserver 1.36:\n{}",
            self.diffs.len(),
            self.cases,
            self.diffs.join("\n")
        );
    }
}

/// Every page of a list, each server following its own continue tokens:
/// the items, and how many pages.
async fn pages(rig: &Rig, path: &str, sep: char, ours: bool) -> (Vec<Value>, usize, Option<Resp>) {
    let mut items = Vec::new();
    let mut token = String::new();
    for n in 1..100 {
        let p = if token.is_empty() {
            path.to_string()
        } else {
            format!("{path}{sep}continue={token}")
        };
        let r = if ours {
            get(&format!("{}{p}", rig.r8s.url())).await
        } else {
            rig.kube
                .send("GET", &p, &[], None, Duration::from_secs(10))
                .await
        };
        if r.status != 200 {
            return (items, n, Some(r));
        }
        let v = r.json();
        items.extend(v["items"].as_array().cloned().unwrap_or_default());
        token = v["metadata"]["continue"].as_str().unwrap_or("").to_string();
        if token.is_empty() {
            return (items, n, None);
        }
    }
    panic!("{path}: more than 100 pages");
}

#[tokio::test(flavor = "multi_thread")]
async fn should_answer_gets_and_lists_as_kube_apiserver_1_36_does() {
    let Some(mut rig) = rig("kube136 gets and lists", 30).await else {
        return;
    };
    // A version in the middle of the writes, and the newest.
    let mid = rig.writes[14];
    let last = rig.last();
    let future = last + 1_000_000;
    // Every collection: namespaced across namespaces, in one, the second
    // version, the cluster-scoped one.
    let collections = [
        "/apis/example.com/v1/widgets",
        "/apis/example.com/v1/namespaces/ns-b/widgets",
        "/apis/example.com/v2/widgets",
        "/apis/example.com/v1/gizmos",
    ];
    // resourceVersion × resourceVersionMatch × limit (continue below).
    let rvs: [(&str, String); 5] = [
        ("unset", String::new()),
        ("0", "0".into()),
        ("mid", mid.to_string()),
        ("last", last.to_string()),
        ("bad", "abc".into()),
    ];
    for coll in collections {
        for (rv_name, rv) in &rvs {
            for rvm in ["", "NotOlderThan", "Exact", "Newest"] {
                for limit in [None, Some(4)] {
                    let mut q = Vec::new();
                    if !rv.is_empty() {
                        q.push(format!("resourceVersion={rv}"));
                    }
                    if !rvm.is_empty() {
                        q.push(format!("resourceVersionMatch={rvm}"));
                    }
                    if let Some(l) = limit {
                        q.push(format!("limit={l}"));
                    }
                    let path = format!("{coll}?{}", q.join("&"));
                    let case = format!("{path} ({rv_name})");
                    let exact = rvm == "Exact"
                        || (rvm.is_empty()
                            && limit.is_some()
                            && !matches!(*rv_name, "0" | "unset"));
                    let floor = match rv.parse::<u64>() {
                        Ok(n) if n > 0 && exact => Floor::Exact(n),
                        Ok(n) => Floor::AtLeast(n),
                        Err(_) => Floor::AtLeast(last),
                    };
                    let (t, o) = rig.both(&path, JSON, false, Duration::from_secs(15)).await;
                    rig.record(&case, compare(&t, &o, floor));
                    if limit.is_some() && t.status == 200 {
                        // Every page, each side following its own tokens.
                        let (ti, tn, te) = pages(&rig, &path, '&', false).await;
                        let (oi, on, oe) = pages(&rig, &path, '&', true).await;
                        rig.cases += 1;
                        if ti != oi {
                            rig.differ(
                                &case,
                                format!("paged items {:?} against {:?}", names(&oi), names(&ti)),
                            );
                        }
                        if tn != on {
                            rig.differ(&case, format!("pages {on} against {tn}"));
                        }
                        if let (Some(te), Some(oe)) = (te, oe) {
                            rig.record(
                                &format!("{case} pages"),
                                compare(&te, &oe, Floor::AtLeast(0)),
                            );
                        }
                    }
                }
            }
        }
    }
    // Continue tokens: each side's own with every resourceVersion; a
    // malformed one; the other side's (foreign to r8s, and r8s's to the
    // apiserver as a client would never send it).
    let coll = "/apis/example.com/v1/widgets";
    let first = |r: &Resp| {
        r.json()["metadata"]["continue"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    let theirs = first(
        &rig.kube
            .send(
                "GET",
                &format!("{coll}?limit=4"),
                &[],
                None,
                Duration::from_secs(10),
            )
            .await,
    );
    let ours = first(&get(&format!("{}{coll}?limit=4", rig.r8s.url())).await);
    assert!(!theirs.is_empty() && !ours.is_empty());
    for (rv_name, rv) in &rvs {
        for rvm in ["", "NotOlderThan", "Exact"] {
            let mut q = "limit=4".to_string();
            if !rv.is_empty() {
                q += &format!("&resourceVersion={rv}");
            }
            if !rvm.is_empty() {
                q += &format!("&resourceVersionMatch={rvm}");
            }
            let case = format!("{coll} continue rv={rv_name} match={rvm}");
            let t = rig
                .kube
                .send(
                    "GET",
                    &format!("{coll}?{q}&continue={theirs}"),
                    &[],
                    None,
                    Duration::from_secs(10),
                )
                .await;
            let o = get(&format!("{}{coll}?{q}&continue={ours}", rig.r8s.url())).await;
            rig.cases += 1;
            rig.record(&case, compare(&t, &o, Floor::AtLeast(0)));
        }
    }
    for (name, token) in [
        ("malformed", "garbage".to_string()),
        ("apiserver's", theirs.clone()),
    ] {
        let path = format!("{coll}?limit=4&continue={token}");
        let (t, o) = rig.both(&path, JSON, false, Duration::from_secs(10)).await;
        rig.record(
            &format!("{coll} {name} token"),
            compare(&t, &o, Floor::AtLeast(0)),
        );
    }
    // Gets: present, missing (from the cache and not), in the wrong scope.
    for (path, floor) in [
        (
            "/apis/example.com/v1/namespaces/ns-a/widgets/w-000?resourceVersion=0",
            0,
        ),
        ("/apis/example.com/v2/namespaces/ns-a/widgets/w-003", 0),
        (
            "/apis/example.com/v1/namespaces/ns-a/widgets/nope?resourceVersion=0",
            0,
        ),
        ("/apis/example.com/v1/namespaces/ns-a/widgets/nope", 0),
        ("/apis/example.com/v1/gizmos/g-01?resourceVersion=0", 0),
        ("/apis/example.com/v1/gizmos/nope?resourceVersion=0", 0),
        (
            "/apis/example.com/v1/namespaces/default/gizmos?resourceVersion=0",
            0,
        ),
        (
            "/apis/example.com/v1/namespaces/default/gizmos/g-01?resourceVersion=0",
            0,
        ),
        ("/apis/example.com/v1/widgets/w-000?resourceVersion=0", 0),
        (
            "/apis/example.com/v1/namespaces/ns-a/widgets/w-000?resourceVersion=MID",
            mid,
        ),
        (
            "/apis/example.com/v1/namespaces/ns-a/widgets/w-000?resourceVersion=FUTURE",
            0,
        ),
        ("/apis/example.com/v1/gizmos?resourceVersion=FUTURE", 0),
    ] {
        let path = path
            .replace("MID", &mid.to_string())
            .replace("FUTURE", &future.to_string());
        let (t, o) = rig.both(&path, JSON, false, Duration::from_secs(15)).await;
        rig.record(&path, compare(&t, &o, Floor::AtLeast(floor)));
        if path.contains(&future.to_string()) {
            rig.answered_beyond_upstream(&path, &o);
        }
    }
    // Selectors: labels, the selectable field, metadata fields, bad ones.
    for q in [
        "labelSelector=tier%3Da",
        "labelSelector=tier%21%3Da,tier",
        "labelSelector=tier+in+(a,b)",
        "fieldSelector=spec.color%3Dred",
        "fieldSelector=spec.color%21%3Dred",
        "fieldSelector=metadata.name%3Dw-004",
        "fieldSelector=metadata.namespace%3Dns-c",
        "fieldSelector=spec.size%3D3",
        "labelSelector=%3D%3D%3D",
        "fieldSelector=spec.color%3Dred&labelSelector=tier%3Db&limit=3",
    ] {
        for coll in [
            "/apis/example.com/v1/widgets",
            "/apis/example.com/v1/gizmos",
        ] {
            let path = format!("{coll}?resourceVersion=0&{q}");
            let (t, o) = rig.both(&path, JSON, false, Duration::from_secs(10)).await;
            rig.record(&path, compare(&t, &o, Floor::AtLeast(0)));
        }
    }
    // Content: metadata-only (JSON and protobuf), protobuf where the
    // apiserver has none for custom resources, Table, YAML, gzip.
    for (accept, what) in [
        (META_LIST, "PartialObjectMetadataList"),
        (META_LIST_PB, "protobuf PartialObjectMetadataList"),
        ("application/vnd.kubernetes.protobuf", "protobuf only"),
        (
            "application/vnd.kubernetes.protobuf,application/json",
            "protobuf, then JSON",
        ),
        (TABLE, "Table"),
        // kube-apiserver transforms to a Table in JSON or YAML only
        // (`RequestScope.AllowsMediaTypeTransform`): a 406 from both.
        (
            "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io",
            "protobuf Table",
        ),
        ("application/yaml", "YAML"),
        ("text/html", "unacceptable"),
    ] {
        for q in ["resourceVersion=0", "resourceVersion=0&limit=4", ""] {
            let path = format!("/apis/example.com/v1/widgets?{q}");
            let (t, o) = rig
                .both(&path, accept, false, Duration::from_secs(10))
                .await;
            let floor = Floor::AtLeast(if q.is_empty() { last } else { 0 });
            rig.record(&format!("{path} as {what}"), compare(&t, &o, floor));
        }
        let path = "/apis/example.com/v1/namespaces/ns-a/widgets/w-000?resourceVersion=0";
        let accept = accept.replace("List", "");
        let (t, o) = rig
            .both(path, &accept, false, Duration::from_secs(10))
            .await;
        rig.record(
            &format!("{path} as {what}"),
            compare(&t, &o, Floor::AtLeast(0)),
        );
    }
    // Tables of custom resources, printed by r8s from their definitions'
    // columns (an integer, a wide string, a date; a cluster-scoped kind;
    // another version), listed and got, in each `includeObject` form.
    for q in [
        "",
        "&includeObject=None",
        "&includeObject=Object",
        "&includeObject=Metadata",
    ] {
        for path in [
            "/apis/example.com/v1/widgets?resourceVersion=0",
            "/apis/example.com/v2/namespaces/ns-b/widgets?resourceVersion=0",
            "/apis/example.com/v1/gizmos?resourceVersion=0",
            "/apis/example.com/v1/namespaces/ns-a/widgets/w-000?resourceVersion=0",
            // The definitions themselves: the apiserver's default convertor.
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?resourceVersion=0",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gizmos.example.com?resourceVersion=0",
        ] {
            let path = format!("{path}{q}");
            let (t, o) = rig.both(&path, TABLE, false, Duration::from_secs(10)).await;
            if header(&o, "x-r8s-cache") != "hit" {
                rig.differ(&path, "a Table of a custom resource passed through".into());
            }
            rig.record(
                &format!("{path} as Table"),
                compare(&t, &o, Floor::AtLeast(0)),
            );
        }
    }
    rig.verdict("gets and lists");
}

#[tokio::test(flavor = "multi_thread")]
async fn should_gzip_and_discover_as_kube_apiserver_1_36_does() {
    let Some(mut rig) = rig("kube136 gzip and discovery", 300).await else {
        return;
    };
    // Over 128 KiB: the apiserver gzips a list for a client that accepts it.
    for (accept, q) in [
        (JSON, "resourceVersion=0"),
        (JSON, ""),
        (META_LIST, "resourceVersion=0"),
        (META_LIST_PB, "resourceVersion=0"),
        (JSON, "resourceVersion=0&labelSelector=tier%3Da"),
    ] {
        let path = format!("/apis/example.com/v1/widgets?{q}");
        let (t, o) = rig.both(&path, accept, true, Duration::from_secs(15)).await;
        assert!(t.body.len() > 1000);
        let floor = Floor::AtLeast(if q.is_empty() { rig.last() } else { 0 });
        rig.record(&format!("{path} gzip as {accept}"), compare(&t, &o, floor));
    }
    // Discovery, plain and aggregated: passed through, the same.
    for (path, accept) in [
        ("/apis", JSON),
        ("/apis/example.com", JSON),
        ("/apis/example.com/v1", JSON),
        ("/apis/example.com/v2", JSON),
        ("/api", JSON),
        ("/api/v1", JSON),
        ("/version", JSON),
        (
            "/apis",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
        ),
    ] {
        let (t, o) = rig.both(path, accept, false, Duration::from_secs(10)).await;
        rig.record(
            &format!("{path} as {accept}"),
            compare(&t, &o, Floor::AtLeast(0)),
        );
    }
    rig.verdict("gzip and discovery");
}

#[tokio::test(flavor = "multi_thread")]
async fn should_watch_and_stream_lists_as_kube_apiserver_1_36_does() {
    let Some(mut rig) = rig("kube136 watches", 30).await else {
        return;
    };
    let before = rig.last();
    for i in 0..6 {
        rig.touch(i * 5, 100 + i).await;
    }
    rig.caught_up().await;
    let last = rig.last();
    let future = last + 1_000_000;
    let w = "/apis/example.com/v1/widgets?watch=1&timeoutSeconds=2";
    let mut cases: Vec<(String, &str, Floor)> = vec![
        (
            format!("{w}&resourceVersion={before}"),
            JSON,
            Floor::AtLeast(before),
        ),
        (
            format!("{w}&resourceVersion={before}&allowWatchBookmarks=true"),
            JSON,
            Floor::AtLeast(before),
        ),
        (
            format!("{w}&resourceVersion={before}&fieldSelector=metadata.name%3Dw-010"),
            JSON,
            Floor::AtLeast(before),
        ),
        (
            format!("{w}&resourceVersion={before}&labelSelector=tier%3Da"),
            JSON,
            Floor::AtLeast(before),
        ),
        (
            format!("{w}&resourceVersion={before}&fieldSelector=spec.color%3Dred"),
            JSON,
            Floor::AtLeast(before),
        ),
        (
            format!("{w}&resourceVersion={before}"),
            META,
            Floor::AtLeast(before),
        ),
        (format!("{w}&resourceVersion=0"), JSON, Floor::AtLeast(0)),
        (
            format!("{w}&resourceVersion=0&fieldSelector=metadata.name%3Dw-010"),
            JSON,
            Floor::AtLeast(0),
        ),
        (format!("{w}&resourceVersion=abc"), JSON, Floor::AtLeast(0)),
        (
            format!("{w}&resourceVersion={before}&resourceVersionMatch=NotOlderThan"),
            JSON,
            Floor::AtLeast(0),
        ),
    ];
    // Streaming lists: consistent, 0 and N; selectors; metadata-only in
    // JSON and protobuf; a version in the future; without bookmarks.
    let sl = format!("{w}&sendInitialEvents=true&resourceVersionMatch=NotOlderThan");
    for (q, floor) in [
        (
            "&allowWatchBookmarks=true".to_string(),
            Floor::AtLeast(last),
        ),
        (
            "&allowWatchBookmarks=true&resourceVersion=0".to_string(),
            Floor::AtLeast(0),
        ),
        (
            format!("&allowWatchBookmarks=true&resourceVersion={before}"),
            Floor::AtLeast(before),
        ),
        (
            format!("&allowWatchBookmarks=true&resourceVersion={last}"),
            Floor::AtLeast(last),
        ),
        (
            "&allowWatchBookmarks=true&labelSelector=tier%3Db".to_string(),
            Floor::AtLeast(last),
        ),
        (
            "&allowWatchBookmarks=true&fieldSelector=spec.color%3Dblue".to_string(),
            Floor::AtLeast(last),
        ),
        ("&resourceVersion=0".to_string(), Floor::AtLeast(0)),
        (
            format!("&allowWatchBookmarks=true&resourceVersion={future}"),
            Floor::AtLeast(0),
        ),
    ] {
        cases.push((format!("{sl}{q}"), JSON, floor));
        cases.push((format!("{sl}{q}"), META, floor));
        cases.push((format!("{sl}{q}"), META_PB, floor));
    }
    cases.push((
        format!("{sl}&allowWatchBookmarks=true&resourceVersion=0"),
        JSON,
        Floor::AtLeast(0),
    ));
    // The cluster-scoped resource (and a path it does not have), the second version.
    for path in [
        "/apis/example.com/v1/gizmos?watch=1&timeoutSeconds=2&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true".to_string(),
        format!("/apis/example.com/v2/widgets?watch=1&timeoutSeconds=2&resourceVersion={before}"),
        "/apis/example.com/v1/namespaces/default/gizmos?watch=1&timeoutSeconds=2&resourceVersion=0".to_string(),
    ] {
        cases.push((path, JSON, Floor::AtLeast(0)));
    }
    // Tables (kubectl get -w): from a version, and streaming lists, in each
    // includeObject form; the column definitions with the first event only;
    // the definitions' (the default convertor's, its bookmark's zero time).
    cases.push((
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?watch=1&timeoutSeconds=2&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true".to_string(),
        TABLE,
        Floor::AtLeast(0),
    ));
    for include in ["", "&includeObject=None", "&includeObject=Object"] {
        cases.push((
            format!("{w}&resourceVersion={before}{include}"),
            TABLE,
            Floor::AtLeast(before),
        ));
        cases.push((
            format!("{sl}&allowWatchBookmarks=true&resourceVersion={last}{include}"),
            TABLE,
            Floor::AtLeast(last),
        ));
    }
    // All at once: each ends after its 2 s.
    let asked = futures_util::future::join_all(cases.iter().flat_map(|(path, accept, floor)| {
        let rig = &rig;
        [false, true].map(|gzip| async move {
            let case = format!("{path} as {accept}{}", if gzip { " gzip" } else { "" });
            (
                case,
                *floor,
                rig.ask(path, accept, gzip, Duration::from_secs(20)).await,
            )
        })
    }))
    .await;
    for (case, floor, (t, o)) in asked {
        rig.count(&o);
        rig.record(&case, compare_watch(&t, &o, floor));
        if case.contains(&format!("resourceVersion={future}")) {
            rig.answered_beyond_upstream(&case, &o);
        }
    }
    rig.verdict("watches");
}
