//! The sim serves custom resources defined while it runs, as kube-apiserver
//! does: a definition written through the API is established at once, each
//! served version is a resource in discovery, versions share their objects,
//! a version no longer served answers 404 and its watches end, and a
//! deleted definition's objects go with it (DELETED, then the stream ends).

use std::time::Duration;

use crate::common::crd::{self, CRDS, crd, write};
use crate::common::*;
use serde_json::{Value, json};

/// The definition these tests change: gadgets in late.example.com.
fn gadgets(versions: &[(&str, bool, bool)]) -> Value {
    crd("late.example.com", "gadgets", versions)
}

/// A watch opened (its headers in), to be read later.
async fn open_watch(url: &str) -> hyper::body::Incoming {
    crd::open_watch(url).await.0
}

/// Reads a watch until it ends (panics if it does not within 10 s): its
/// events.
async fn until_end(body: hyper::body::Incoming) -> Vec<Value> {
    crd::until_end(body, Duration::from_secs(10)).await
}

#[tokio::test(flavor = "multi_thread")]
async fn should_serve_custom_resources_defined_changed_and_deleted_at_runtime() {
    let sim = start_sim(sim_config()).await;
    let base = sim.url();
    let v1 = format!("{base}/apis/late.example.com/v1/namespaces/ns-0/gadgets");
    let v2 = format!("{base}/apis/late.example.com/v2/namespaces/ns-0/gadgets");
    assert_eq!(get(&v1).await.status, 404);

    // Defined: established at once, in discovery, served.
    let made = write(
        "POST",
        &format!("{base}{CRDS}"),
        &gadgets(&[("v1", true, true)]),
    )
    .await;
    assert_eq!(made.status, 201, "{:?}", made.body);
    let made = made.json();
    let established = made["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["type"] == "Established" && c["status"] == "True");
    assert!(established, "{made}");
    let groups = get(&format!("{base}/apis")).await.json();
    assert!(
        groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "late.example.com")
    );
    let list = get(&format!("{base}/apis/late.example.com/v1"))
        .await
        .json();
    assert_eq!(list["resources"][0]["name"], "gadgets", "{list}");
    let g = json!({"apiVersion": "late.example.com/v1", "kind": "Gadget", "metadata": {"name": "g1"}, "spec": {"size": 3}});
    assert_eq!(write("POST", &v1, &g).await.status, 201);
    let listed = get(&v1).await.json();
    assert_eq!(listed["items"][0]["metadata"]["name"], "g1");
    assert_eq!(listed["items"][0]["apiVersion"], "late.example.com/v1");
    let rv = listed["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();

    // A second version: the same objects, served in it; preferred (v2 > v1).
    let mut crd2 = made.clone();
    crd2["spec"] = gadgets(&[("v1", true, true), ("v2", true, false)])["spec"].clone();
    let put = write(
        "PUT",
        &format!("{base}{CRDS}/gadgets.late.example.com"),
        &crd2,
    )
    .await;
    assert_eq!(put.status, 200, "{:?}", put.body);
    let got = get(&format!("{v2}/g1")).await.json();
    assert_eq!(got["apiVersion"], "late.example.com/v2");
    assert_eq!(got["spec"]["size"], 3);
    let group = get(&format!("{base}/apis/late.example.com")).await.json();
    assert_eq!(group["preferredVersion"]["version"], "v2", "{group}");
    assert_eq!(group["versions"].as_array().unwrap().len(), 2);
    // Written in v2, read in v1.
    let g2 =
        json!({"apiVersion": "late.example.com/v2", "kind": "Gadget", "metadata": {"name": "g2"}});
    assert_eq!(write("POST", &v2, &g2).await.status, 201);
    assert_eq!(
        get(&format!("{v1}/g2")).await.json()["apiVersion"],
        "late.example.com/v1"
    );

    // v1 no longer served: 404, and its open watch ends; v2 goes on.
    let watching_v1 = open_watch(&format!("{v1}?watch=1&resourceVersion={rv}")).await;
    let put = get(&format!("{base}{CRDS}/gadgets.late.example.com"))
        .await
        .json();
    let mut crd3 = put.clone();
    crd3["spec"]["versions"][0]["served"] = json!(false);
    let put = write(
        "PUT",
        &format!("{base}{CRDS}/gadgets.late.example.com"),
        &crd3,
    )
    .await;
    assert_eq!(put.status, 200, "{:?}", put.body);
    let events = until_end(watching_v1).await;
    assert!(
        events
            .iter()
            .all(|e| e["object"]["apiVersion"] == "late.example.com/v1"),
        "{events:?}"
    );
    assert_eq!(get(&v1).await.status, 404);
    assert_eq!(get(&v2).await.json()["items"].as_array().unwrap().len(), 2);

    // Deleted: its objects' DELETED events, then the watch ends; 404 after.
    let watching_v2 = open_watch(&format!("{v2}?watch=1&resourceVersion={rv}")).await;
    crd::delete(&base, "gadgets.late.example.com").await;
    let events = until_end(watching_v2).await;
    let deleted: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "DELETED")
        .map(|e| e["object"]["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(deleted, ["g1", "g2"], "{events:?}");
    assert_eq!(get(&v2).await.status, 404);
    assert_eq!(
        get(&format!("{base}/apis/late.example.com")).await.status,
        404
    );

    // Made again: a new definition, empty.
    let again = write(
        "POST",
        &format!("{base}{CRDS}"),
        &gadgets(&[("v1", true, true)]),
    )
    .await;
    assert_eq!(again.status, 201);
    assert_eq!(get(&v1).await.json()["items"].as_array().unwrap().len(), 0);
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_refuse_a_definition_named_unlike_its_resource() {
    let sim = start_sim(sim_config()).await;
    let mut bad = gadgets(&[("v1", true, true)]);
    bad["metadata"]["name"] = json!("gizmos.late.example.com");
    let r = write("POST", &format!("{}{CRDS}", sim.url()), &bad).await;
    assert_eq!(r.status, 422, "{:?}", r.body);
    let two_storage = gadgets(&[("v1", true, true), ("v2", true, true)]);
    let r = write("POST", &format!("{}{CRDS}", sim.url()), &two_storage).await;
    assert_eq!(r.status, 422, "{:?}", r.body);
    sim.stop().await;
}
