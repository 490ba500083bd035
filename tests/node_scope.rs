//! A node-local r8s (`node.name`) caches its node's pods and its own Node,
//! and nothing more of either; it answers only the requests inside that
//! scope, and every answer equals the upstream's: seeded random requests
//! (lists, gets, watches; in and out of scope; at any version and
//! consistent) while the sim writes, then again with the writes paused,
//! each compared with the sim.

use std::collections::BTreeMap;

use crate::common::*;

const NODE: &str = "node-01";

/// The `namespace/name` → resourceVersion of a JSON list.
fn items(list: &serde_json::Value) -> BTreeMap<String, u64> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|it| (key_of(it), rv_of(it)))
        .collect()
}

fn list_rv(list: &serde_json::Value) -> u64 {
    list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// One request of the generator: its path, and whether it lies inside
/// the scope (a list whose field selector requires the node; a get is
/// inside when the cache holds the object, which the caller judges).
struct Ask {
    path: String,
    list: bool,
    inside: bool,
}

/// A random read of pods or nodes, in or out of `NODE`'s scope.
fn ask(rng: &mut fastrand::Rng, pods: &[String]) -> Ask {
    let rv = ["0", ""][rng.usize(..2)];
    let rv_q = |sep: char| match rv {
        "" => String::new(),
        v => format!("{sep}resourceVersion={v}"),
    };
    match rng.u8(..4) {
        // A list of pods, of a namespace or all.
        0 | 1 => {
            let fields = [
                ("", false),
                ("spec.nodeName=node-01", true),
                ("spec.nodeName==node-01", true),
                ("spec.nodeName=node-01,status.phase=Running", true),
                ("spec.nodeName=node-01,metadata.namespace=ns-1", true),
                ("spec.nodeName=node-02", false),
                ("spec.nodeName!=node-01", false),
                ("status.phase=Pending", false),
                ("metadata.name=pod-00003", false),
            ];
            let (f, inside) = fields[rng.usize(..fields.len())];
            let labels = ["", "tier=web", "tier!=db"][rng.usize(..3)];
            let ns = ["", "namespaces/ns-1/"][rng.usize(..2)];
            let mut q = vec![];
            if !f.is_empty() {
                q.push(format!("fieldSelector={}", query_escape(f)));
            }
            if !labels.is_empty() {
                q.push(format!("labelSelector={}", query_escape(labels)));
            }
            if !rv.is_empty() {
                q.push(format!("resourceVersion={rv}"));
            }
            Ask {
                path: format!("/api/v1/{ns}pods?{}", q.join("&")),
                list: true,
                inside,
            }
        }
        // A get of a pod: of this node, of another, or none at all.
        2 => {
            let name = match rng.u8(..8) {
                0 => "ns-0/pod-99999".to_string(),
                _ => pods[rng.usize(..pods.len())].clone(),
            };
            let (ns, name) = name.split_once('/').unwrap();
            Ask {
                path: format!("/api/v1/namespaces/{ns}/pods/{name}{}", rv_q('?')),
                list: false,
                inside: false,
            }
        }
        // Nodes: a list by name, or a get.
        _ => {
            let node = ["node-01", "node-02", "node-99"][rng.usize(..3)];
            match rng.bool() {
                true => Ask {
                    path: format!(
                        "/api/v1/nodes?fieldSelector=metadata.name%3D{node}{}",
                        rv_q('&')
                    ),
                    list: true,
                    inside: node == NODE,
                },
                false => Ask {
                    path: format!("/api/v1/nodes/{node}{}", rv_q('?')),
                    list: false,
                    inside: false,
                },
            }
        }
    }
}

/// Whether r8s's answer to `a` came from where its scope says: a list
/// inside is a hit at any version (a consistent one may pass, unproven),
/// one outside passes; a get of an object the cache does not hold passes.
fn check_source(a: &Ask, cache: &str, held: bool, rv_any: bool) {
    let inside = a.inside || (!a.list && held);
    match cache {
        "hit" => assert!(
            inside,
            "{}: answered from the cache, outside its scope",
            a.path
        ),
        "pass" if inside && rv_any => panic!("{}: passed, inside the scope", a.path),
        "pass" => {}
        other => panic!("{}: X-R8s-Cache {other:?}", a.path),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn should_hold_only_its_nodes_pods_and_answer_only_inside_that_as_the_upstream() {
    let mut cfg = sim_config();
    cfg.pods = 120;
    cfg.nodes = 4;
    cfg.churn = 40.0;
    cfg.history = 100_000;
    let sim = start_sim(cfg).await;
    let r8s = r8s_in_front_of(sim.url())
        .caching(&["pods", "nodes", "configmaps"])
        .with(|c| c.node.name = NODE.into())
        .start()
        .await;
    let (base, truth) = (r8s.url(), sim.url());
    let mut rng = fastrand::Rng::with_seed(0x0de1_5c0e);
    let all = get(&format!("{truth}/api/v1/pods")).await.json();
    let names: Vec<String> = items(&all).into_keys().collect();

    // Phase 1, the sim writing: every hit equals the sim's state at the
    // version it says it is at; every pass is one.
    for i in 0..150 {
        // Pending pods bound to the node now and then: they enter its scope.
        if i % 30 == 0 {
            let pending = get(&format!(
                "{truth}/api/v1/pods?fieldSelector=spec.nodeName%3D"
            ))
            .await
            .json();
            if let Some(p) = pending["items"].as_array().unwrap().first() {
                let (ns, name) = (&p["metadata"]["namespace"], &p["metadata"]["name"]);
                sim.bind(ns.as_str().unwrap(), name.as_str().unwrap(), NODE);
            }
        }
        let a = ask(&mut rng, &names);
        let r = get(&format!("{base}{}", a.path)).await;
        let cache = r.headers["x-r8s-cache"].to_str().unwrap().to_string();
        let rv_any = a.path.contains("resourceVersion=0");
        if cache != "hit" {
            check_source(&a, &cache, false, a.list && rv_any);
            continue;
        }
        assert_eq!(r.status, 200, "{}: {}", a.path, r.text());
        let body = r.json();
        if a.list {
            check_source(&a, &cache, false, rv_any);
            let (path, query) = a.path.split_once('?').unwrap();
            let selectors: String = query
                .split('&')
                .filter(|p| !p.starts_with("resourceVersion="))
                .map(|p| format!("&{p}"))
                .collect();
            let at = list_rv(&body);
            assert_eq!(
                items(&body),
                truth_at(&truth, path, &selectors, at).await,
                "{}: r8s's list is not the upstream's at {at}",
                a.path
            );
        } else {
            // A get from the cache: an object it holds, in its scope, as
            // the upstream had it at its version.
            let (kind, field, value) = match body["kind"].as_str().unwrap() {
                "Pod" => ("pods", "spec.nodeName", body["spec"]["nodeName"].clone()),
                _ => ("nodes", "metadata.name", body["metadata"]["name"].clone()),
            };
            assert_eq!(value, NODE, "{}: {field} outside the scope", a.path);
            let (name, rv) = (body["metadata"]["name"].as_str().unwrap(), rv_of(&body));
            let collection = match body["metadata"]["namespace"].as_str() {
                Some(ns) => format!("/api/v1/namespaces/{ns}/{kind}"),
                None => format!("/api/v1/{kind}"),
            };
            let at = truth_at(
                &truth,
                &collection,
                &format!("&fieldSelector=metadata.name%3D{name}"),
                rv,
            )
            .await;
            assert_eq!(
                at.values().next(),
                Some(&rv),
                "{}: no such version upstream",
                a.path
            );
        }
    }

    // Phase 2, the writes paused and the cache caught up: every answer
    // equals the sim's own answer to the same request, status and items.
    sim.sim.pause_churn(true);
    let mine = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-01";
    let held: BTreeMap<String, u64> = eventually("the node's pods cached", HANG, || async {
        let ours = get(&format!("{base}{mine}&resourceVersion=0")).await.json();
        let theirs = get(&format!("{truth}{mine}")).await.json();
        (items(&ours) == items(&theirs)).then(|| items(&ours))
    })
    .await;
    assert!(held.len() > 10, "the node has pods to hold: {}", held.len());
    // The pods cache holds the node's pods, and nothing else.
    let objects = scrape(
        &format!("{}/metrics", r8s.admin_url()),
        "r8s_cache_objects{resource=\"v1/pods\",encoding=\"json\"}",
    )
    .await;
    assert_eq!(objects as usize, held.len(), "pods held: the node's only");
    let nodes = scrape(
        &format!("{}/metrics", r8s.admin_url()),
        "r8s_cache_objects{resource=\"v1/nodes\",encoding=\"json\"}",
    )
    .await;
    assert_eq!(nodes, 1.0, "nodes held: its own only");
    for _ in 0..150 {
        let a = ask(&mut rng, &names);
        let ours = get(&format!("{base}{}", a.path)).await;
        let theirs = get(&format!("{truth}{}", a.path)).await;
        let cache = ours.headers["x-r8s-cache"].to_str().unwrap().to_string();
        // A get's object: `ns/name` of a pod, or the node.
        let object = a.path.split('?').next().unwrap();
        let held_here = match object.strip_prefix("/api/v1/namespaces/") {
            Some(p) => held.contains_key(&p.replace("/pods/", "/")),
            None => object == "/api/v1/nodes/node-01",
        };
        let rv_any = a.path.contains("resourceVersion=0");
        check_source(&a, &cache, held_here, rv_any);
        assert_eq!(
            ours.status,
            theirs.status,
            "{}: {} vs {}",
            a.path,
            ours.text(),
            theirs.text()
        );
        if ours.status != 200 {
            assert_eq!(ours.json()["reason"], theirs.json()["reason"], "{}", a.path);
            continue;
        }
        let (o, t) = (ours.json(), theirs.json());
        match a.list {
            true => assert_eq!(items(&o), items(&t), "{}", a.path),
            false => assert_eq!(o, t, "{}", a.path),
        }
    }
    sim.sim.pause_churn(false);

    // A watch of the node's pods is served, and sees a pod bound to it; a
    // watch of every pod passes.
    let pending = get(&format!(
        "{truth}/api/v1/pods?fieldSelector=spec.nodeName%3D"
    ))
    .await
    .json();
    let p = &pending["items"].as_array().unwrap()[0]["metadata"];
    let (ns, name) = (
        p["namespace"].as_str().unwrap(),
        p["name"].as_str().unwrap(),
    );
    let start = get(&format!("{base}{mine}&resourceVersion=0")).await;
    assert_eq!(start.headers["x-r8s-cache"], "hit");
    let url = format!(
        "{base}{mine}&watch=1&resourceVersion={}",
        list_rv(&start.json())
    );
    let (replay, task) = follow(url, Replay::from_list(&start.json()), "watch".into());
    sim.bind(ns, name, NODE);
    let key = format!("{ns}/{name}");
    eventually("the bound pod's ADDED", HANG, || async {
        replay
            .lock()
            .unwrap()
            .state
            .contains_key(&key)
            .then_some(())
    })
    .await;
    task.abort();
    let whole = send(
        "GET",
        &format!("{base}/api/v1/pods?watch=1&resourceVersion=0&timeoutSeconds=1"),
        &[],
        None,
    )
    .await;
    assert_eq!(whole.headers["x-r8s-cache"], "pass");
    r8s.stop().await;
    sim.stop().await;
}

/// The configmaps and secrets a node's pods reference (issue 75, item 2):
/// cached one by one when first asked for, by name in their namespace, as
/// a kubelet watches them, and answered as the upstream answers; an object
/// no pod of the node references passes, never cached; one no longer
/// referenced is dropped.
#[tokio::test(flavor = "multi_thread")]
async fn should_cache_the_objects_its_nodes_pods_reference_and_drop_them_after() {
    let mut cfg = sim_config();
    cfg.pods = 40;
    cfg.nodes = 4;
    let sim = start_sim(cfg).await;
    let r8s = r8s_in_front_of(sim.url())
        .caching(&["pods"])
        .with(|c| c.node.name = NODE.into())
        .start()
        .await;
    let (base, truth) = (r8s.url(), sim.url());
    let json = [("content-type", "application/json")];
    let hit = |path: String| {
        let base = base.clone();
        async move {
            let r = get(&format!("{base}{path}")).await;
            (r.headers["x-r8s-cache"] == "hit").then_some(r)
        }
    };
    // Every pod mounts its namespace's kube-root-ca.crt (a projected volume):
    // a kubelet's single-object list, then its watch, from the cache.
    let node_pod = get(&format!(
        "{truth}/api/v1/pods?fieldSelector=spec.nodeName%3D{NODE}"
    ))
    .await
    .json()["items"][0]
        .clone();
    let ns = node_pod["metadata"]["namespace"]
        .as_str()
        .unwrap()
        .to_string();
    let by_name = |name: &str| {
        format!("/api/v1/namespaces/{ns}/configmaps?fieldSelector=metadata.name%3D{name}")
    };
    let ca = by_name("kube-root-ca.crt");
    let ours = eventually("kube-root-ca.crt from the cache", HANG, || {
        hit(format!("{ca}&resourceVersion=0"))
    })
    .await;
    let theirs = get(&format!("{truth}{ca}")).await;
    assert_eq!(items(&ours.json()), items(&theirs.json()));
    let one = format!("/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt?resourceVersion=0");
    let got = hit(one.clone()).await.expect("a get of it from the cache");
    assert_eq!(got.json(), get(&format!("{truth}{one}")).await.json());
    // Its watch sees it change.
    let rv = list_rv(&ours.json());
    let (replay, task) = follow(
        format!("{base}{ca}&watch=1&resourceVersion={rv}"),
        Replay::from_list(&ours.json()),
        "the configmap's watch".into(),
    );
    let mut changed = theirs.json()["items"][0].clone();
    changed["data"]["extra"] = "1".into();
    let path = format!("/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt");
    let put = send(
        "PUT",
        &format!("{truth}{path}"),
        &json,
        Some(&changed.to_string()),
    )
    .await;
    assert_eq!(put.status, 200, "{}", put.text());
    let new_rv = rv_of(&put.json());
    eventually("the change through the cache", HANG, || async {
        let r = replay.lock().unwrap();
        (r.state.values().any(|v| *v == new_rv)).then_some(())
    })
    .await;
    task.abort();

    // A configmap no pod of the node references: passes, and is never cached.
    let other = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "unreferenced", "namespace": ns}, "data": {"a": "b"}});
    let made = send(
        "POST",
        &format!("{truth}/api/v1/namespaces/{ns}/configmaps"),
        &json,
        Some(&other.to_string()),
    )
    .await;
    assert_eq!(made.status, 201, "{}", made.text());
    for _ in 0..3 {
        let r = get(&format!(
            "{base}{}&resourceVersion=0",
            by_name("unreferenced")
        ))
        .await;
        assert_eq!(r.headers["x-r8s-cache"], "pass");
        assert_eq!(r.status, 200);
    }

    // A secret a new pod of the node references: cached; the pod gone,
    // dropped (its requests pass again).
    let secret = serde_json::json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "app-secret", "namespace": ns}, "data": {"k": "dg=="}});
    let made = send(
        "POST",
        &format!("{truth}/api/v1/namespaces/{ns}/secrets"),
        &json,
        Some(&secret.to_string()),
    )
    .await;
    assert_eq!(made.status, 201, "{}", made.text());
    let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "uses-secret", "namespace": ns},
        "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "app:1",
            "env": [{"name": "K", "valueFrom": {"secretKeyRef": {"name": "app-secret", "key": "k"}}}]}]}});
    let made = send(
        "POST",
        &format!("{truth}/api/v1/namespaces/{ns}/pods"),
        &json,
        Some(&pod.to_string()),
    )
    .await;
    assert_eq!(made.status, 201, "{}", made.text());
    let secret_path = format!(
        "/api/v1/namespaces/{ns}/secrets?fieldSelector=metadata.name%3Dapp-secret&resourceVersion=0"
    );
    let ours = eventually("the secret from the cache", HANG, || {
        hit(secret_path.clone())
    })
    .await;
    assert_eq!(
        items(&ours.json()),
        items(&get(&format!("{truth}{secret_path}")).await.json())
    );
    let gone = send(
        "DELETE",
        &format!("{truth}/api/v1/namespaces/{ns}/pods/uses-secret"),
        &[],
        None,
    )
    .await;
    assert_eq!(gone.status, 200, "{}", gone.text());
    eventually("the secret's cache dropped", HANG, || async {
        let r = get(&format!("{base}{secret_path}")).await;
        (r.headers["x-r8s-cache"] == "pass").then_some(())
    })
    .await;
    r8s.stop().await;
    sim.stop().await;
}
