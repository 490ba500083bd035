//! A custom resource's `selectableFields` (KEP-4358, GA in 1.32) against
//! Kubernetes 1.36: r8s, in front of the kit's apiserver, answers lists and
//! watches whose field selectors use them from its cache, with the objects
//! 1.36 selects (strings, integers, booleans, absent and `null` values),
//! for a CRD read at startup (indexed by one of them) and for one defined
//! while r8s runs; a field
//! the CRD does not name, and the metadata-only protobuf store, pass to
//! 1.36's own answer. The kit is the oracle: answers are read with
//! serde_json only. Skipped, saying so, without the kit
//! (`KUBE_APISERVER_136_KIT`).

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::answers::{events, names};
use crate::common::kube136::Kube136;
use crate::common::*;

const LIMIT: Duration = Duration::from_secs(30);

/// A namespaced CRD `plural`.example.com, with four selectable fields of
/// the three types a selectable field may have.
fn definition(plural: &str, kind: &str) -> Value {
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "color": {"type": "string"}, "size": {"type": "integer"}, "on": {"type": "boolean"},
            "deep": {"type": "object", "properties": {"tier": {"type": "string", "nullable": true}}}}}}}});
    let selectable = json!([{"jsonPath": ".spec.color"}, {"jsonPath": ".spec.size"},
                            {"jsonPath": ".spec.on"}, {"jsonPath": ".spec.deep.tier"}]);
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": format!("{plural}.example.com")},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind,
                              "listKind": format!("{kind}List")},
                    "versions": [{"name": "v1", "served": true, "storage": true,
                                  "schema": schema, "selectableFields": selectable}]}})
}

/// Object `i` of `plural`: a color (or none), a size, a switch (or none),
/// a tier (a string, `null`, or none), a label.
fn object(plural: &str, kind: &str, i: usize) -> (String, Value) {
    let ns = ["ns-a", "ns-b"][i % 2];
    let mut spec = json!({"size": i % 5});
    if i % 4 != 3 {
        spec["color"] = json!(["red", "green", "blue"][i % 3]);
    }
    if i % 3 != 2 {
        spec["on"] = json!(i.is_multiple_of(2));
    }
    match i % 3 {
        0 => spec["deep"] = json!({"tier": format!("t{}", i % 2)}),
        1 => spec["deep"] = json!({"tier": null}),
        _ => {}
    }
    let o = json!({"apiVersion": "example.com/v1", "kind": kind,
                   "metadata": {"name": format!("o-{i:02}"), "namespace": ns,
                                "labels": {"half": if i < 15 { "low" } else { "high" }}},
                   "spec": spec});
    (format!("/apis/example.com/v1/namespaces/{ns}/{plural}"), o)
}

/// The items' `namespace/name`s, sorted.
fn items(r: &Resp, who: &str) -> Vec<String> {
    assert_eq!(r.status, 200, "{who}: {}", r.text());
    let v: Value = serde_json::from_str(&r.text()).unwrap();
    let mut out = names(v["items"].as_array().unwrap());
    out.sort();
    out
}

/// The same list of `plural` with `selector` from 1.36 and through r8s:
/// equal, and from r8s's cache.
async fn same_list(kube: &Kube136, r8s: &R8s, plural: &str, selector: &str) -> Vec<String> {
    let path = format!("/apis/example.com/v1/{plural}?resourceVersion=0&{selector}");
    let theirs = kube.send("GET", &path, &[], None, LIMIT).await;
    let ours = send("GET", &format!("{}{path}", r8s.url()), &[], None).await;
    let want = items(&theirs, &format!("1.36 {selector}"));
    assert_eq!(
        ours.headers["x-r8s-cache"],
        "hit",
        "{selector}: {}",
        ours.text()
    );
    assert_eq!(items(&ours, &format!("r8s {selector}")), want, "{selector}");
    want
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn should_select_by_a_custom_resources_selectable_fields_as_kube_136_does() {
    let Some(kube) = Kube136::start("kube136_fields") else {
        return;
    };
    let n = 30;
    let gadgets: Vec<_> = (0..n).map(|i| object("gadgets", "Gadget", i)).collect();
    kube.define_and_create_all(&definition("gadgets", "Gadget"), &gadgets)
        .await;
    // `*`: the CRDs are cached too (the follower reads them while r8s runs).
    let r8s = kube
        .r8s()
        .with(|c| {
            c.cache.resources = vec!["*".into()];
            // Reads by color go through an index; the others walk.
            c.cache
                .indexes
                .insert("example.com/v1/gadgets".into(), vec!["spec.color".into()]);
        })
        .start()
        .await;
    let all = format!(
        "{}/apis/example.com/v1/gadgets?resourceVersion=0",
        r8s.url()
    );
    caches_all(&all, n).await;
    // Its CRD was read at startup: no selector here waits for a restart.
    let mut seen = std::collections::BTreeSet::new();
    for selector in [
        "fieldSelector=spec.color%3Dred",
        "fieldSelector=spec.color%21%3Dred",
        "fieldSelector=spec.color%3D%3Dblue",
        "fieldSelector=spec.color%3D",
        "fieldSelector=spec.size%3D3",
        "fieldSelector=spec.size%21%3D0,spec.color%3Dgreen",
        "fieldSelector=spec.on%3Dtrue",
        "fieldSelector=spec.on%3Dfalse",
        "fieldSelector=spec.on%3D",
        "fieldSelector=spec.deep.tier%3Dt0",
        "fieldSelector=spec.deep.tier%3D",
        "fieldSelector=spec.deep.tier%21%3D",
        "fieldSelector=spec.color%3Dred,metadata.namespace%3Dns-b",
        "fieldSelector=spec.color%3Dblue&labelSelector=half%3Dhigh",
    ] {
        let got = same_list(&kube, &r8s, "gadgets", selector).await;
        assert!(
            got.len() < n || selector.contains("!="),
            "{selector} selects"
        );
        seen.extend(got);
    }
    assert_eq!(seen.len(), n, "every gadget selected by some selector");
    // Pages of 2, as kubectl asks (a consistent list, then its continue
    // tokens): every page from the cache, together 1.36's list.
    let want = same_list(&kube, &r8s, "gadgets", "fieldSelector=spec.size%3D1").await;
    let (mut paged, mut cont) = (Vec::new(), String::new());
    loop {
        let page = format!(
            "{}/apis/example.com/v1/gadgets?limit=2&fieldSelector=spec.size%3D1{}",
            r8s.url(),
            if cont.is_empty() {
                String::new()
            } else {
                format!("&continue={}", query_escape(&cont))
            }
        );
        let r = send("GET", &page, &[], None).await;
        assert_eq!(r.headers["x-r8s-cache"], "hit", "{page}: {}", r.text());
        let got = items(&r, &page);
        assert!(got.len() <= 2, "{page}");
        paged.extend(got);
        cont = r.json()["metadata"]["continue"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if cont.is_empty() {
            break;
        }
    }
    paged.sort();
    assert_eq!(paged, want, "paged");
    // A namespace's list.
    let path = "/apis/example.com/v1/namespaces/ns-a/gadgets?resourceVersion=0&fieldSelector=spec.on%3Dtrue";
    let theirs = kube.send("GET", path, &[], None, LIMIT).await;
    let ours = send("GET", &format!("{}{path}", r8s.url()), &[], None).await;
    assert_eq!(ours.headers["x-r8s-cache"], "hit");
    assert_eq!(items(&ours, "r8s"), items(&theirs, "1.36"));
    // A consistent streaming list (client-go's first sync) by a field.
    let stream = "/apis/example.com/v1/gadgets?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1&fieldSelector=spec.on%3Dtrue";
    let ours_url = format!("{}{stream}", r8s.url());
    let (theirs, ours) = tokio::join!(
        kube.send("GET", stream, &[], None, LIMIT),
        send("GET", &ours_url, &[], None)
    );
    assert_eq!(ours.headers["x-r8s-cache"], "hit", "streaming list");
    let added = |r: &Resp| {
        let mut keys: Vec<String> = events(r, false)
            .into_iter()
            .filter(|(t, ..)| t == "ADDED")
            .map(|(_, key, ..)| key)
            .collect();
        keys.sort();
        keys
    };
    let want = added(&theirs);
    assert!(!want.is_empty());
    assert_eq!(added(&ours), want, "streaming list");
    assert!(
        events(&ours, false).iter().any(|(t, ..)| t == "BOOKMARK"),
        "its end"
    );
    // What r8s does not hold passes, to 1.36's answer: a field the CRD does
    // not name (its 400), and the protobuf metadata-only store.
    for (selector, accept) in [
        ("spec.bogus%3D1", "application/json"),
        ("metadata.uid%3Dx", "application/json"),
        (
            "spec.color%3Dred",
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
        ),
    ] {
        let path =
            format!("/apis/example.com/v1/gadgets?resourceVersion=0&fieldSelector={selector}");
        let headers = [("accept", accept)];
        let theirs = kube.send("GET", &path, &headers, None, LIMIT).await;
        let ours = send("GET", &format!("{}{path}", r8s.url()), &headers, None).await;
        assert_eq!(ours.headers["x-r8s-cache"], "pass", "{selector}");
        assert_eq!(
            (ours.status, ours.text()),
            (theirs.status, theirs.text()),
            "{selector}"
        );
    }

    // Watches: objects entering and leaving a selection, side by side from
    // the same version, once r8s has every change (each reads the log).
    let from = r8s_list_rv(&all).await;
    let patches: [(usize, Value); 5] = [
        (0, json!({"spec": {"color": "blue"}})),
        (1, json!({"spec": {"color": "red"}})),
        (3, json!({"spec": {"color": "red", "size": 3}})),
        (6, json!({"spec": {"size": 4}})),
        (9, json!({"spec": {"color": null}})),
    ];
    let mut last = 0;
    for (i, patch) in &patches {
        let (coll, o) = object("gadgets", "Gadget", *i);
        let name = o["metadata"]["name"].as_str().unwrap();
        let r = kube.write("PATCH", &format!("{coll}/{name}"), patch).await;
        assert_eq!(r.status, 200, "{}", r.text());
        last = r.json()["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
    }
    eventually("r8s has every change", HANG, || async {
        (r8s_list_rv(&all).await >= last).then_some(())
    })
    .await;
    for selector in ["spec.color%3Dred", "spec.size%21%3D3", "spec.color%3D"] {
        let path = format!(
            "/apis/example.com/v1/gadgets?watch=1&resourceVersion={from}&timeoutSeconds=1&fieldSelector={selector}"
        );
        let ours_url = format!("{}{path}", r8s.url());
        let (theirs, ours) = tokio::join!(
            kube.send("GET", &path, &[], None, LIMIT),
            send("GET", &ours_url, &[], None)
        );
        assert_eq!(ours.headers["x-r8s-cache"], "hit", "watch {selector}");
        let shown = |r: &Resp| {
            events(r, false)
                .into_iter()
                .map(|(t, key, rv, _)| format!("{t} {key} {rv}"))
                .collect::<Vec<_>>()
        };
        let want = shown(&theirs);
        assert!(!want.is_empty(), "watch {selector}: 1.36 sent nothing");
        assert_eq!(shown(&ours), want, "watch {selector}");
    }

    // A CRD defined while r8s runs: its cache starts with its fields.
    let doodads: Vec<_> = (0..10).map(|i| object("doodads", "Doodad", i)).collect();
    kube.define_and_create_all(&definition("doodads", "Doodad"), &doodads)
        .await;
    let url = format!(
        "{}/apis/example.com/v1/doodads?resourceVersion=0",
        r8s.url()
    );
    caches_all(&url, 10).await;
    for selector in [
        "fieldSelector=spec.color%3Dgreen",
        "fieldSelector=spec.on%3Dfalse",
    ] {
        same_list(&kube, &r8s, "doodads", selector).await;
    }
}

/// Until r8s answers `url` (a list) from its cache with `n` items.
async fn caches_all(url: &str, n: usize) {
    eventually(&format!("r8s caches {n} at {url}"), HANG, || async {
        let r = send("GET", url, &[], None).await;
        (r.status == 200
            && r.headers["x-r8s-cache"] == "hit"
            && r.json()["items"].as_array()?.len() == n)
            .then_some(())
    })
    .await;
}

/// The version of r8s's list at `url`.
async fn r8s_list_rv(url: &str) -> u64 {
    let r = send("GET", url, &[], None).await;
    r.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}
