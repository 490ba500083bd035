//! The indexes against a scan: pods by node and by a label, in both
//! encodings, through every change a store's writer makes.

use std::sync::Arc;
use std::time::Duration;

use imbl::OrdMap;

use super::budget::Budget;
use super::index::{Index, IndexOn};
use super::object::{CachedObject, Objects, TypeInfo};
use super::serving::Serving;
use super::store::{Change, Options, Restored, Store, Version};
use super::store_tests::limits;
use crate::api::media::Encoding;
use crate::api::selector::{FieldSelector, LabelSelector, Selectors};
use crate::api::{ApiResource, Gvr};
use crate::codec::protobuf as pb;
use crate::metrics::StoreLabels;

fn by_node() -> IndexOn {
    IndexOn::parse("pods", "spec.nodeName").unwrap()
}

fn by_app() -> IndexOn {
    IndexOn::parse("pods", "label:app").unwrap()
}

/// A pod `ns/name` on `node` and labelled `app` (none: unscheduled,
/// unlabelled) at `rv`, in `encoding` as the upstream sends it.
fn pod_in(
    encoding: Encoding,
    ns: &str,
    name: &str,
    node: Option<&str>,
    app: Option<&str>,
    rv: u64,
) -> Arc<CachedObject> {
    let resource = ApiResource {
        gvr: Gvr::from_static("", "v1", "pods"),
        kind: "Pod".into(),
        namespaced: true,
        selectable: &[],
    };
    let info = TypeInfo::of(&resource, encoding);
    let o = match encoding {
        Encoding::Json => {
            let labels = app.map(|a| format!(r#","labels":{{"app":"{a}"}}"#));
            let spec = node.map(|n| format!(r#","spec":{{"nodeName":"{n}"}}"#));
            let json = format!(
                r#"{{"metadata":{{"name":"{name}","namespace":"{ns}","resourceVersion":"{rv}"{}}}{}}}"#,
                labels.unwrap_or_default(),
                spec.unwrap_or_default()
            );
            info.parse(json.as_bytes()).unwrap()
        }
        Encoding::Protobuf => {
            let mut meta = bytes::BytesMut::new();
            pb::bytes_field(&mut meta, 1, name.as_bytes());
            pb::bytes_field(&mut meta, 3, ns.as_bytes());
            pb::bytes_field(&mut meta, 6, rv.to_string().as_bytes());
            if let Some(app) = app {
                let mut label = bytes::BytesMut::new();
                pb::bytes_field(&mut label, 1, b"app");
                pb::bytes_field(&mut label, 2, app.as_bytes());
                pb::bytes_field(&mut meta, 11, &label);
            }
            let mut spec = bytes::BytesMut::new();
            if let Some(node) = node {
                pb::bytes_field(&mut spec, 10, node.as_bytes());
            }
            let mut raw = bytes::BytesMut::new();
            pb::bytes_field(&mut raw, 1, &meta);
            pb::bytes_field(&mut raw, 2, &spec);
            info.parse_protobuf(&raw, false).unwrap()
        }
    };
    Arc::new(o)
}

/// A JSON pod `ns/name` on `node` (none: unscheduled) at `rv`.
fn pod(ns: &str, name: &str, node: Option<&str>, rv: u64) -> Arc<CachedObject> {
    pod_in(Encoding::Json, ns, name, node, None, rv)
}

fn keys(index: &Index, values: &[&str], from: &str) -> Vec<String> {
    index
        .ranges(values, from)
        .map(|(k, _)| k.to_string())
        .collect()
}

/// The index moves an object with its node, forgets a removed one,
/// lists a node's objects in key order from a key, and counts its bytes.
#[test]
fn should_index_pods_by_node_as_they_move() {
    let mut v = Version::empty(&[by_node()]);
    v.insert(pod("a", "p1", Some("n1"), 1));
    v.insert(pod("b", "p2", Some("n1"), 2));
    v.insert(pod("a", "p3", Some("n2"), 3));
    v.insert(pod("a", "p4", None, 4));
    let at =
        |v: &Version, node: &str, from: &str| keys(v.index(&by_node()).unwrap(), &[node], from);
    assert_eq!(at(&v, "n1", ""), ["a/p1", "b/p2"]);
    assert_eq!(at(&v, "n1", "a/p2"), ["b/p2"]);
    assert_eq!(
        at(&v, "", ""),
        ["a/p4"],
        "unscheduled pods are a node of their own"
    );
    // p1 moves to n2 (a rescheduled pod keeps its key), p2 goes.
    v.insert(pod("a", "p1", Some("n2"), 5));
    v.remove(&Arc::from("b/p2"));
    assert!(at(&v, "n1", "").is_empty());
    assert_eq!(at(&v, "n2", ""), ["a/p1", "a/p3"]);
    let plain: usize = v.objects.values().map(|o| o.size()).sum();
    assert_eq!(
        v.bytes,
        plain + 3 * super::index::ENTRY_BYTES + "n2".len() * 2,
        "objects and index entries"
    );
    let mut again = Version::empty(&[by_node()]);
    again.replace(v.objects.clone());
    assert_eq!(again.bytes, v.bytes, "a relist counts the same bytes");
    assert_eq!(at(&again, "n2", ""), ["a/p1", "a/p3"]);
    assert!(Version::empty(&[]).index(&by_node()).is_none());
}

/// A label index holds the labelled objects only; a set selector's values
/// are merged in key order; a read walks the first index its selectors pin
/// and filters nothing itself (the read's filter does).
#[test]
fn should_walk_a_label_index_for_equality_and_set_selectors() {
    let mut v = Version::empty(&[by_node(), by_app()]);
    let put = |v: &mut Version, ns, name, node, app, rv| {
        v.insert(pod_in(Encoding::Json, ns, name, node, app, rv));
    };
    put(&mut v, "a", "p1", Some("n1"), Some("web"), 1);
    put(&mut v, "a", "p2", Some("n2"), Some("db"), 2);
    put(&mut v, "b", "p3", Some("n1"), Some("web"), 3);
    put(&mut v, "b", "p4", Some("n1"), None, 4);
    put(&mut v, "a", "p5", None, Some("cache"), 5);
    let app = v.index(&by_app()).unwrap();
    assert_eq!(keys(app, &["web"], ""), ["a/p1", "b/p3"]);
    assert_eq!(keys(app, &["db", "web"], ""), ["a/p1", "a/p2", "b/p3"]);
    assert_eq!(
        keys(app, &["cache", "db", "web"], "a/p2"),
        ["a/p2", "a/p5", "b/p3"]
    );
    let walk = |v: &Version, prefix: &str, labels: &str, fields: &str| -> Vec<String> {
        let s = Selectors {
            labels: LabelSelector::parse(labels).unwrap(),
            fields: FieldSelector::parse(fields, &["spec.nodeName"]).unwrap(),
            ..Default::default()
        };
        v.walk(prefix, prefix, &s)
            .map(|(k, _)| k.to_string())
            .collect()
    };
    assert_eq!(
        walk(&v, "", "app in (web,db,web)", ""),
        ["a/p1", "a/p2", "b/p3"]
    );
    assert_eq!(walk(&v, "a/", "app in (web,db)", ""), ["a/p1", "a/p2"]);
    assert_eq!(walk(&v, "b/", "app=web", ""), ["b/p3"]);
    assert_eq!(
        walk(&v, "", "app=web", "spec.nodeName=n1"),
        ["a/p1", "b/p3", "b/p4"],
        "the first index listed wins; the filter drops b/p4"
    );
    assert_eq!(
        walk(&v, "", "app!=web", "").len(),
        5,
        "not pinned: the key range"
    );
    // An object that loses its label leaves the index, and its bytes.
    let before = v.bytes;
    let old = v.objects[&Arc::from("b/p3")].size();
    put(&mut v, "b", "p3", Some("n1"), None, 6);
    let new = v.objects[&Arc::from("b/p3")].size();
    assert_eq!(keys(v.index(&by_app()).unwrap(), &["web"], ""), ["a/p1"]);
    assert_eq!(
        before - v.bytes,
        old - new + super::index::ENTRY_BYTES + "web".len()
    );
}

/// `cache.indexes` entries: a label key, or a field the resource's selectors
/// support; anything else refused with a reason naming it.
#[test]
fn should_parse_index_entries_and_refuse_what_cannot_be_indexed() {
    assert_eq!(by_node().to_string(), "spec.nodeName");
    assert_eq!(
        IndexOn::parse("deployments", "label:app.kubernetes.io/name")
            .unwrap()
            .to_string(),
        "label:app.kubernetes.io/name"
    );
    let e = IndexOn::parse("configmaps", "spec.nodeName").unwrap_err();
    assert!(
        e.contains("configmaps cannot be indexed by \"spec.nodeName\""),
        "{e}"
    );
    assert!(e.contains("metadata.name"), "names what can be: {e}");
    let e = IndexOn::parse("pods", "label:-bad-").unwrap_err();
    assert!(e.contains("invalid label key"), "{e}");
    assert!(
        IndexOn::parse("pods", "metadata.namespace")
            .unwrap_err()
            .contains("key range")
    );
    let config = std::collections::BTreeMap::from([
        (
            "pods".to_string(),
            vec!["status.phase".to_string(), "spec.bogus".to_string()],
        ),
        (
            "apps/v1/deployments".to_string(),
            vec!["label:app".to_string()],
        ),
        ("apps/deployments".to_string(), vec![]),
    ]);
    let errs = super::index::check(&config);
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert_eq!(errs[0].0, "cache.indexes.apps/deployments");
    assert!(
        errs[0].1.contains("bad key \"apps/deployments\""),
        "{errs:?}"
    );
    assert_eq!(errs[1].0, "cache.indexes.pods");
    assert!(
        errs[1]
            .1
            .contains("\"spec.bogus\" for key \"cache.indexes.pods\"")
    );
    let deployments = ApiResource {
        gvr: Gvr::from_static("apps", "v1", "deployments"),
        kind: "Deployment".into(),
        namespaced: true,
        selectable: &[],
    };
    assert_eq!(super::index::configured(&config, &deployments), [by_app()]);
}

/// A custom resource's entries: any field label passes the configuration's
/// check (its CRD is not read yet); its cache indexes those its CRD names
/// selectable, in its JSON store only (its protobuf one holds metadata).
#[test]
fn should_index_a_custom_resource_by_the_fields_its_crd_names() {
    let config = std::collections::BTreeMap::from([(
        "example.com/v1/widgets".to_string(),
        vec![
            "spec.nodeName".to_string(),
            "label:app".to_string(),
            "spec.other".to_string(),
        ],
    )]);
    assert!(super::index::check(&config).is_empty());
    for bad in ["spec..x", "metadata.namespace", "spec.a b"] {
        let config = std::collections::BTreeMap::from([(
            "example.com/v1/widgets".to_string(),
            vec![bad.to_string()],
        )]);
        assert_eq!(super::index::check(&config).len(), 1, "{bad}");
    }
    let widgets = |selectable| ApiResource {
        gvr: Gvr::from_static("example.com", "v1", "widgets"),
        kind: "Widget".into(),
        namespaced: true,
        selectable,
    };
    let node = IndexOn::Field("spec.nodeName".into());
    let read = widgets(crate::api::gvr::intern_fields(
        ["spec.nodeName"].into_iter(),
    ));
    assert_eq!(
        super::index::configured(&config, &read),
        [node.clone(), IndexOn::Label("app".into())],
        "spec.other: not selectable, left out (and logged)"
    );
    assert!(node.held_in(&read, Encoding::Json));
    assert!(!node.held_in(&read, Encoding::Protobuf));
    assert_eq!(
        super::index::configured(&config, &widgets(&[])),
        [IndexOn::Label("app".into())],
        "its CRD not read: no field to index"
    );
}

/// The values the churn below gives pods' nodes and `app` labels (`""`:
/// none).
const NODES: [&str; 6] = ["", "n0", "n1", "n2", "n3", "n4"];
const APPS: [&str; 4] = ["", "web", "db", "cache"];

/// A pod `ns/name` on a random node with a random `app` label (or none).
fn random_pod(
    rng: &mut fastrand::Rng,
    encoding: Encoding,
    name: &str,
    rv: u64,
) -> Arc<CachedObject> {
    let node = NODES[rng.usize(..NODES.len())];
    let app = APPS[rng.usize(..APPS.len())];
    let some = |s: &'static str| (!s.is_empty()).then_some(s);
    pod_in(encoding, "ns", name, some(node), some(app), rv)
}

/// Whether `v`'s indexes say what a scan of its objects says: each value's
/// keys in order, a set of values merged, and its bytes as a relist of its
/// objects would count them.
fn indexes_agree(v: &Version) -> Result<(), String> {
    let scan = |keep: &dyn Fn(&CachedObject) -> bool| -> Vec<String> {
        v.objects
            .iter()
            .filter(|(_, o)| keep(o))
            .map(|(k, _)| k.to_string())
            .collect()
    };
    let nodes = v.index(&by_node()).ok_or("no node index")?;
    let apps = v.index(&by_app()).ok_or("no app index")?;
    for node in NODES {
        let (index, scanned) = (
            keys(nodes, &[node], ""),
            scan(&|o| o.field("spec.nodeName") == node),
        );
        if index != scanned {
            return Err(format!(
                "at {}: node {node:?}: index {index:?}, scan {scanned:?}",
                v.rv
            ));
        }
    }
    for app in &APPS[1..] {
        let (index, scanned) = (
            keys(apps, &[app], ""),
            scan(&|o| o.label("app") == Some(app)),
        );
        if index != scanned {
            return Err(format!(
                "at {}: app {app:?}: index {index:?}, scan {scanned:?}",
                v.rv
            ));
        }
    }
    let (index, scanned) = (
        keys(apps, &["db", "web"], "ns/p2"),
        scan(&|o| &*o.key >= "ns/p2" && matches!(o.label("app"), Some("web" | "db"))),
    );
    if index != scanned {
        return Err(format!(
            "at {}: app in (db,web): index {index:?}, scan {scanned:?}",
            v.rv
        ));
    }
    let mut relisted = Version::empty(&[by_node(), by_app()]);
    relisted.replace(v.objects.clone());
    if relisted.bytes != v.bytes {
        return Err(format!(
            "at {}: {} bytes, a relist counts {}",
            v.rv, v.bytes, relisted.bytes
        ));
    }
    Ok(())
}

/// The indexes agree with a full scan of the objects after seeded random
/// churn (adds, moves between nodes and labels, deletes, bookmarks),
/// relists, resets after a divergence, snapshot restores and evictions over
/// the budget; at the current version and at every version the log can
/// still rewind to; in both encodings.
#[test]
fn should_keep_every_index_equal_to_a_scan_through_any_change() {
    for encoding in [Encoding::Json, Encoding::Protobuf] {
        let (mut w, s) = Store::new(Options {
            scope: Default::default(),
            limits: limits(64),
            budget: Arc::new(Budget::new(0, 0)),
            encoding,
            node_index: true,
            indexes: vec![by_node(), by_app()],
            labels: StoreLabels::new("v1/pods".into(), encoding.as_str()),
        });
        let mut rng = fastrand::Rng::with_seed(40);
        let mut rv = 1;
        w.apply(vec![Change::Replace(OrdMap::new(), rv)]);
        let mut rewound = 0;
        let random_objects = |rng: &mut fastrand::Rng, rv: u64| -> Objects {
            (0..rng.usize(0..30))
                .map(|i| random_pod(rng, encoding, &format!("p{i}"), rv))
                .map(|o| (o.key.clone(), o))
                .collect()
        };
        for step in 0..3_000 {
            rv += 1;
            let change = match rng.u8(..100) {
                0..=59 => {
                    let name = format!("p{}", rng.usize(..40));
                    Change::Put(random_pod(&mut rng, encoding, &name, rv))
                }
                60..=84 => Change::Delete(pod_in(
                    encoding,
                    "ns",
                    &format!("p{}", rng.usize(..40)),
                    None,
                    None,
                    rv,
                )),
                85..=94 => Change::Progress(rv),
                95..=96 => Change::Replace(random_objects(&mut rng, rv), rv),
                97 => Change::Reset(random_objects(&mut rng, rv), rv),
                98 => {
                    w.restore(Restored {
                        objects: random_objects(&mut rng, rv),
                        rv,
                        empty: None,
                        age: Duration::ZERO,
                    });
                    w.resumed();
                    continue;
                }
                _ => {
                    w.evict_over_budget();
                    w.clear_over_budget();
                    w.apply(vec![Change::Replace(random_objects(&mut rng, rv), rv)]);
                    continue;
                }
            };
            w.apply(vec![change]);
            let v = s.current();
            indexes_agree(&v).unwrap_or_else(|e| panic!("{encoding:?}, step {step}: {e}"));
            // A version the log rewinds to has indexes of its own.
            let back = rv.saturating_sub(rng.u64(1..20));
            if let Some(old) = s.at(back) {
                assert_eq!(old.rv, back);
                rewound += 1;
                indexes_agree(&old).unwrap_or_else(|e| {
                    panic!("{encoding:?}, step {step}, rewound to {back}: {e}")
                });
            }
        }
        assert_eq!(s.serving(), Serving::Ready);
        assert!(
            rewound > 1_000,
            "{encoding:?}: rewound versions checked: {rewound}"
        );
    }
}
