//! The attacker's suite (issue 69): r8s in front of the Kubernetes 1.36 kit,
//! `auth.mode = "delegated"`, both judged by one authorizer (the kit's shim
//! with RBAC-like grants; r8s's reviews go to a second shim with the same
//! rules and their own log). Several hundred requests, each sent to the kit
//! and to r8s with the same credentials, as callers with no credentials, no
//! grants, one object granted by name, one namespace, every namespace, and
//! header tricks; r8s holding the kit's client-certificate kubeconfig, then a
//! token kubeconfig.
//!
//! It passes when, for every request: no answer from r8s names an object the
//! kit's answer does not (a leak), the statuses are equal, the objects are
//! equal, and every SubjectAccessReview r8s made for it is one the kit's
//! apiserver made for it. Differences that are allowed are in [`ALLOWED`],
//! each with its reason. The oracle is the kit: bodies are read with
//! serde_json, reviews from the shims' logs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use crate::common::kube136::{Grants, Identity, Kube136, delegated_r8s};
use crate::common::*;
use serde_json::{Value, json};

const WIDGETS: &str = "/apis/example.com/v1";

/// Requests whose answers may differ, and why. (A request's label holds
/// the first string; the difference is of the second kind.)
const ALLOWED: &[(&[&str], &str, &str)] = &[(
    &["resourceVersion=0", "limit="],
    "objects",
    "kube-apiserver 1.36 ignores `limit` with resourceVersion=0 (it answers from its watch \
     cache, whole); r8s pages. The API concepts document allows both: the server returns \
     'up to limit' items (tests/kube136.rs follows r8s's pages to the end and finds the \
     same items). r8s's page is still a subset of what the apiserver returned (no leak).",
)];

/// One caller: a label, and the headers it sends.
struct Caller {
    label: &'static str,
    headers: Vec<(&'static str, String)>,
    /// The user whose client certificate (signed by the kit's CA) it presents.
    cert: Option<&'static str>,
}

fn callers() -> Vec<Caller> {
    let with = |label, headers: &[(&'static str, &str)]| Caller {
        label,
        headers: headers.iter().map(|(k, v)| (*k, v.to_string())).collect(),
        cert: None,
    };
    let cert = |label, user, headers: &[(&'static str, &str)]| Caller {
        cert: Some(user),
        ..with(label, headers)
    };
    let auth = "authorization";
    vec![
        with("anonymous", &[]),
        with("alice (no grants)", &[(auth, "Bearer alicetok")]),
        with("bob (w-1 by name)", &[(auth, "Bearer bobtok")]),
        with("carol (namespace ns-a)", &[(auth, "Bearer carotok")]),
        with("dave (every namespace)", &[(auth, "Bearer davetok")]),
        // The header tricks.
        with("bob's token after two spaces", &[(auth, "Bearer  bobtok")]),
        with(
            "lower-case scheme, a third part",
            &[(auth, "bearer bobtok extra")],
        ),
        with(
            "two Authorization headers",
            &[(auth, "Bearer alicetok"), (auth, "Bearer davetok")],
        ),
        with("Basic scheme", &[(auth, "Basic ZGF2ZTpkYXZl")]),
        with(
            "bob impersonating dave",
            &[(auth, "Bearer bobtok"), ("impersonate-user", "dave")],
        ),
        with(
            "front-proxy headers, anonymous",
            &[
                ("x-remote-user", "dave"),
                ("x-remote-group", "system:masters"),
            ],
        ),
        // Certificate callers (r8s passes them as itself impersonating them).
        cert("bob's client certificate", "bob", &[]),
        cert(
            "erin's certificate impersonating carol",
            "erin",
            &[("impersonate-user", "carol")],
        ),
        cert(
            "bob's certificate impersonating dave",
            "bob",
            &[("impersonate-user", "dave")],
        ),
        cert(
            "bob's certificate with dave's token",
            "bob",
            &[(auth, "Bearer davetok")],
        ),
    ]
}

fn grants() -> Grants {
    let read = json!(["get", "list", "watch"]);
    Grants {
        tokens_csv: "admintok,admin,admin,\"system:masters\"\nalicetok,alice,alice\n\
                     bobtok,bob,bob\ncarotok,carol,carol\ndavetok,dave,dave\n"
            .into(),
        rules: json!([
            {"users": ["bob"], "verbs": read, "apiGroups": ["example.com"],
             "resources": ["widgets", "gizmos"], "resourceNames": ["w-1", "g-1"]},
            {"users": ["carol"], "verbs": ["get", "list", "watch", "create", "patch", "delete"],
             "apiGroups": ["example.com"], "resources": ["widgets", "gizmos"],
             "namespaces": ["ns-a"]},
            {"users": ["dave"], "verbs": read, "apiGroups": ["example.com"],
             "resources": ["widgets", "gizmos"]},
            {"users": ["erin"], "verbs": ["impersonate"], "apiGroups": [""],
             "resources": ["users"], "resourceNames": ["carol"]},
        ]),
    }
}

/// One request: method, path and query, extra headers, body.
type Request = (
    &'static str,
    String,
    Vec<(&'static str, &'static str)>,
    Option<String>,
);

/// The requests: (method, path and query, extra headers, body).
fn requests() -> Vec<Request> {
    let ns = format!("{WIDGETS}/namespaces/ns-a/widgets");
    let w = format!("{WIDGETS}/watch/namespaces/ns-a/widgets");
    let t = "timeoutSeconds=1";
    let get = |p: String| ("GET", p, vec![], None);
    let mut r = vec![
        get(format!("{ns}/w-1?resourceVersion=0")),
        get(format!("{ns}/w-%31?resourceVersion=0")),
        get(format!("{ns}/w-2?resourceVersion=0")),
        get(format!("{ns}/w-1")),
        get(format!("{ns}/w-1/?resourceVersion=0")),
        get(format!("{ns}/w-1/status?resourceVersion=0")),
        get(format!("{ns}/w-1%2Fstatus?resourceVersion=0")),
        get(format!("{ns}/..?resourceVersion=0")),
        get(format!("{ns}//w-1?resourceVersion=0")),
        get(format!("{WIDGETS}/widgets/w-1?resourceVersion=0")),
        get(format!("{ns}?resourceVersion=0")),
        get(ns.clone()),
        get(format!(
            "{ns}?resourceVersion=0&fieldSelector=metadata.name%3Dw-1"
        )),
        get(format!("{ns}?fieldSelector=metadata.name%3Dw-1")),
        get(format!(
            "{WIDGETS}/widgets?resourceVersion=0&fieldSelector=metadata.name%3Dw-1"
        )),
        get(format!("{WIDGETS}/widgets?resourceVersion=0")),
        get(format!(
            "{ns}?resourceVersion=0&fieldSelector=metadata.name%3Dw-1&fieldSelector=metadata.name%3Dw-2"
        )),
        get(format!(
            "{ns}?resourceVersion=0&fieldSelector=metadata.name%3Dw-1,metadata.name%3Dw-2"
        )),
        get(format!(
            "{ns}?resourceVersion=0&fieldSelector=metadata.name%3D%3Dw-1&labelSelector=app%3Dx"
        )),
        get(format!(
            "{ns}?resourceVersion=0&fieldSelector=metadata.name!%3Dw-1"
        )),
        get(format!(
            "{ns}?resourceVersion=0&labelSelector=app%20in%20(x,y),!gone"
        )),
        get(format!(
            "{ns}?resourceVersion=0&fieldSelector=metadata.name%3Dw-1&limit=x"
        )),
        get(format!("{ns}?resourceVersion=0&limit=1")),
        get(format!(
            "{ns}?resourceVersion=0&resourceVersionMatch=NotOlderThan&fieldSelector=metadata.name%3Dw-1"
        )),
        get(format!("{w}/w-1?resourceVersion=0&{t}")),
        get(format!(
            "{w}/w-1?resourceVersion=0&fieldSelector=metadata.name%3Dw-2&{t}"
        )),
        get(format!(
            "{w}?resourceVersion=0&fieldSelector=metadata.name%3Dw-1&{t}"
        )),
        get(format!("{w}/w-1?{t}")),
        get(format!(
            "{ns}?watch=1&resourceVersion=0&fieldSelector=metadata.name%3Dw-1&{t}"
        )),
        get(format!(
            "{ns}?watch=bogus&resourceVersion=0&fieldSelector=metadata.name%3Dw-1&{t}"
        )),
        get(format!("{ns}?watch=1&resourceVersion=0&{t}")),
        get(format!(
            "{ns}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&fieldSelector=metadata.name%3Dw-1&{t}"
        )),
        get(format!("{ns}/w-1?watch=1&resourceVersion=0&{t}")),
        // Issue 74's smaller differences: a leading empty segment (404), a
        // pair with a `;` (left out by Go's ParseQuery). (A negative
        // timeout is not compared: 1.36's answer races, its watch's context
        // done before it starts, with or without its initial events; r8s
        // ends it at once, tests/watch.rs.)
        get(format!("/{ns}/w-1?resourceVersion=0")),
        get(format!("//{ns}?resourceVersion=0")),
        get(format!(
            "{ns}?resourceVersion=0&fieldSelector=metadata.name%3Dw-1;"
        )),
    ];
    // A cluster-scoped resource, by its path and under a namespace (which
    // the apiserver does not route), and a namespaced one by the cluster path.
    let g = format!("{WIDGETS}/gizmos");
    r.push(get(format!("{g}/g-1?resourceVersion=0")));
    r.push(get(format!("{g}/g-2?resourceVersion=0")));
    r.push(get(format!(
        "{WIDGETS}/namespaces/ns-a/gizmos/g-1?resourceVersion=0"
    )));
    r.push(get(format!(
        "{WIDGETS}/namespaces/ns-a/gizmos?resourceVersion=0"
    )));
    r.push(get(format!("{g}?resourceVersion=0")));
    r.push(get(format!(
        "{g}?resourceVersion=0&fieldSelector=metadata.name%3Dg-1"
    )));
    r.push(get(format!(
        "{WIDGETS}/watch/gizmos/g-1?resourceVersion=0&{t}"
    )));
    // Continue tokens (dave's): for the query they came from, another
    // query, and a read from the cache.
    let c = format!("continue={CONTINUE}");
    r.push(get(format!("{ns}?limit=1&{c}")));
    r.push(get(format!("{WIDGETS}/widgets?limit=1&{c}")));
    r.push(get(format!("{ns}?limit=1&resourceVersion=0&{c}")));
    r.push(get(format!(
        "{ns}?limit=1&fieldSelector=metadata.name%3Dw-1&{c}"
    )));
    // Media types and encodings, on a get and a named list from the cache.
    for accept in [
        "application/json;as=Table;v=v1;g=meta.k8s.io",
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
        "application/vnd.kubernetes.protobuf,application/json",
        "application/yaml",
    ] {
        r.push((
            "GET",
            format!(
                "{ns}?resourceVersion=0&fieldSelector=metadata.name%3Dw-1&includeObject=Object"
            ),
            vec![("accept", accept)],
            None,
        ));
    }
    r.push((
        "GET",
        format!("{ns}/w-1?resourceVersion=0"),
        vec![(
            "accept",
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        )],
        None,
    ));
    r.push((
        "GET",
        format!("{ns}?resourceVersion=0"),
        vec![("accept-encoding", "gzip")],
        None,
    ));
    // Writes (dry runs: nothing changes), and a write to the watch path.
    let widget = |name: &str| {
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": name, "namespace": "ns-a"}, "spec": {"color": "red"}})
        .to_string()
    };
    let ct = ("content-type", "application/json");
    r.push((
        "POST",
        format!("{ns}?dryRun=All"),
        vec![ct],
        Some(widget("w-new")),
    ));
    r.push((
        "PATCH",
        format!("{ns}/w-1?dryRun=All"),
        vec![("content-type", "application/merge-patch+json")],
        Some(r#"{"spec":{"color":"blue"}}"#.into()),
    ));
    r.push(("DELETE", format!("{ns}/w-2?dryRun=All"), vec![], None));
    r.push((
        "POST",
        // (The apiserver routes it as a watch: RequestInfo's verb is `watch`.)
        format!("{w}?dryRun=All&{t}"),
        vec![ct],
        Some(widget("w-new")),
    ));
    r
}

/// r8s's third credential: an exec plugin that hands it the kit's client
/// certificate (as cloud providers' plugins hand out certificates).
const EXEC: &str = "exec plugin's client certificate";

/// Where a request's continue token goes (each side its own).
const CONTINUE: &str = "CONTINUE-TOKEN";

/// Generated requests a user sends besides the written ones.
const GENERATED: usize = 40;

/// `n` requests drawn (seeded) from the path forms, names, selectors and
/// versions a read can combine: what their answers hold is checked against
/// the grants themselves, as well as against the apiserver's answers.
fn generated(n: usize, seed: u64) -> Vec<Request> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut pick = |options: &[&'static str]| options[rng.usize(..options.len())];
    (0..n)
        .map(|_| {
            let watch = pick(&["", "", "", "watch/"]);
            let ns = pick(&["namespaces/ns-a/", "namespaces/ns-b/", ""]);
            let name = if ns.is_empty() && watch.is_empty() {
                ""
            } else {
                pick(&["", "", "/w-1", "/w-2", "/w-%31", "/w-1/", "/nope"])
            };
            let mut query = vec![pick(&["resourceVersion=0", "resourceVersion=0", ""])];
            query.push(pick(&[
                "",
                "fieldSelector=metadata.name%3Dw-1",
                "fieldSelector=metadata.name%3Dw-2",
                "fieldSelector=metadata.name%3D%3Dw-1",
                "fieldSelector=metadata.name!%3Dw-1",
                "fieldSelector=metadata.namespace%3Dns-a,metadata.name%3Dw-1",
                "fieldSelector=metadata.name%3Dw-1&fieldSelector=metadata.name%3Dw-2",
            ]));
            query.push(pick(&[
                "",
                "",
                "labelSelector=app%3Dx",
                "labelSelector=!app",
            ]));
            if watch.is_empty() {
                query.push(pick(&["", "", "", "watch=1", "watch=true", "watch=0"]));
            }
            query.push("timeoutSeconds=1");
            let query: Vec<&str> = query.into_iter().filter(|q| !q.is_empty()).collect();
            let path = format!("{WIDGETS}/{watch}{ns}widgets{name}?{}", query.join("&"));
            ("GET", path, vec![], None)
        })
        .collect()
}

/// What a header trick is tried on: the requests that name an object or a
/// namespace, a consistent read, and a write (each caller of the first five
/// is sent every request).
fn tricked(path: &str, method: &str) -> bool {
    method != "GET"
        || path.ends_with("/w-1?resourceVersion=0")
        || path.ends_with("/widgets/w-1")
        || path.ends_with("widgets?resourceVersion=0&fieldSelector=metadata.name%3Dw-1")
        || path.contains("/watch/namespaces/ns-a/widgets/w-1?resourceVersion=0&timeout")
}

/// The objects an answer names (`namespace/name`): a list's items, a
/// Table's rows, one object, a watch's events; none for a `Status`.
pub(crate) fn objects(body: &[u8]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut add = |v: &Value| {
        if v["kind"] == "Status" {
            return;
        }
        let m = &v["metadata"];
        if let Some(name) = m["name"].as_str() {
            out.insert(format!("{}/{name}", m["namespace"].as_str().unwrap_or("")));
        }
    };
    let whole = serde_json::from_slice::<Value>(body);
    let values: Vec<Value> = match whole {
        Ok(v) => vec![v],
        // A watch: a JSON value a line.
        Err(_) => body
            .split(|b| *b == b'\n')
            .filter_map(|l| serde_json::from_slice(l).ok())
            .collect(),
    };
    for v in &values {
        if let Some(items) = v["items"].as_array() {
            items.iter().for_each(&mut add);
        } else if let Some(rows) = v["rows"].as_array() {
            rows.iter().for_each(|r| add(&r["object"]));
        } else if v["type"].is_string() {
            if v["type"] != "BOOKMARK" {
                add(&v["object"]);
            }
        } else {
            add(v);
        }
    }
    out
}

/// `body`, inflated when it came gzip-encoded.
pub(crate) fn inflated(resp: &Resp) -> Vec<u8> {
    let gz = resp
        .headers
        .get("content-encoding")
        .is_some_and(|v| v == "gzip");
    if !gz {
        return resp.body.to_vec();
    }
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&resp.body[..]), &mut out)
        .expect("a gzip body inflates");
    out
}

/// Lines in a review log now.
pub(crate) fn lines(log: &Path) -> usize {
    std::fs::read_to_string(log).map_or(0, |t| t.lines().count())
}

/// The reviews logged from line `from` on, of `user` (`None`: anyone's).
fn reviews(log: &Path, from: usize, user: Option<&str>) -> Vec<Value> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .skip(from)
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| v["spec"].clone())
        .filter(|spec| user.is_none_or(|u| spec["user"] == u))
        .collect()
}

/// How many requests were sent to each, and how r8s answered them.
#[derive(Debug, Default)]
struct Tally {
    sent: usize,
    /// Answered from r8s's cache.
    hits: usize,
    /// Answered 403 (by r8s's own authorization, or passed).
    forbidden: usize,
}

impl Tally {
    fn add(&mut self, t: Tally) {
        self.sent += t.sent;
        self.hits += t.hits;
        self.forbidden += t.forbidden;
    }
}

/// Where the reviews of one r8s go, and which credential it holds.
struct Setup<'a> {
    kube: &'a Kube136,
    r8s: &'a R8s,
    log: &'a Path,
    credential: &'a str,
    /// A continue token of the kit's and of r8s's, from the same list.
    tokens: (String, String),
    /// The client certificates of the callers that present one, by user.
    identities: BTreeMap<&'static str, Identity>,
}

/// One caller's requests, each to the kit and to r8s at once; the
/// differences found. `user`: whose reviews are this caller's (`None`:
/// every review made meanwhile, where no other caller runs beside it).
async fn run_caller(
    s: &Setup<'_>,
    caller: &Caller,
    requests: Vec<Request>,
    user: Option<&str>,
    policy: Option<fn(&str) -> bool>,
) -> (Vec<String>, Tally) {
    let limit = Duration::from_secs(30);
    let mut found = Vec::new();
    let mut tally = Tally::default();
    for (method, path, extra, body) in requests {
        let mut headers: Vec<(&str, &str)> = caller
            .headers
            .iter()
            .map(|(k, v)| (*k, v.as_str()))
            .collect();
        headers.extend(extra.iter().copied());
        let label = format!(
            "[{}] {} {method} {path} {extra:?}",
            s.credential, caller.label
        );
        let (k0, r0) = (lines(&s.kube.review_log()), lines(s.log));
        // A continue token is its issuer's: each side gets its own.
        let kit_path = path.replace(CONTINUE, &s.tokens.0);
        let r8s_path = path.replace(CONTINUE, &s.tokens.1);
        let id = caller.cert.map(|u| &s.identities[u]);
        let (kit, r8s) = (s.kube.port, s.r8s.addr.port());
        let b = body.as_deref();
        let (theirs, ours) = tokio::join!(
            s.kube
                .send_tls(kit, id, method, &kit_path, &headers, b, limit),
            s.kube
                .send_tls(r8s, id, method, &r8s_path, &headers, b, limit),
        );
        tally.sent += 1;
        if ours.headers.get("x-r8s-cache").is_some_and(|v| v == "hit") {
            tally.hits += 1;
        }
        if ours.status == 403 {
            tally.forbidden += 1;
        }
        let kube_reviews = reviews(&s.kube.review_log(), k0, user);
        let r8s_reviews = reviews(s.log, r0, user);
        let allowed = |kind: &str| {
            ALLOWED
                .iter()
                .any(|(has, k, _)| has.iter().all(|h| label.contains(h)) && *k == kind)
        };
        let (theirs_objects, ours_objects) =
            (objects(&inflated(&theirs)), objects(&inflated(&ours)));
        let leaked: Vec<&String> = ours_objects.difference(&theirs_objects).collect();
        if let Some(allows) = policy.filter(|_| ours.status.is_success()) {
            let beyond: Vec<&String> = ours_objects.iter().filter(|o| !allows(o)).collect();
            if !beyond.is_empty() {
                found.push(format!(
                    "LEAK {label}: r8s answered {beyond:?}, beyond the grants"
                ));
            }
        }
        if !leaked.is_empty() && ours.status.is_success() {
            found.push(format!(
                "LEAK {label}: r8s answered {leaked:?} the apiserver did not"
            ));
        }
        let same_status = ours.status == theirs.status;
        let text = |r: &Resp| {
            String::from_utf8_lossy(&r.body)
                .chars()
                .take(160)
                .collect::<String>()
        };
        if !same_status {
            found.push(format!(
                "{label}: status {} through r8s ({}), {} from the apiserver ({})",
                ours.status,
                text(&ours),
                theirs.status,
                text(&theirs),
            ));
        } else if ours_objects != theirs_objects && !allowed("objects") {
            found.push(format!(
                "{label}: objects {ours_objects:?} through r8s, {theirs_objects:?} from the apiserver"
            ));
        }
        for spec in &r8s_reviews {
            if !kube_reviews.contains(spec) {
                found.push(format!(
                    "{label}: r8s asked {spec}, the apiserver asked {kube_reviews:?}"
                ));
            }
        }
    }
    (found, tally)
}

/// Every caller's requests against the kit and r8s: the five users side by
/// side (their reviews told apart by user), then the header tricks one by
/// one; the differences found (empty: none).
async fn attack(s: &Setup<'_>) -> Vec<String> {
    let callers = callers();
    if s.credential == EXEC {
        // What differs with an exec plugin's certificate is only whose
        // connection a passed request takes: the callers without grants, on
        // the writes and the named reads.
        let mut found = Vec::new();
        let mut tally = Tally::default();
        for c in &callers[..2] {
            let some = requests()
                .into_iter()
                .filter(|(method, path, ..)| tricked(path, method))
                .collect();
            let (f, t) = run_caller(s, c, some, None, Some(|_: &str| false)).await;
            found.extend(f);
            tally.add(t);
        }
        eprintln!(
            "kube136_attack [{EXEC}]: {tally:?}, {} differences",
            found.len()
        );
        assert!(tally.forbidden > 10, "{tally:?}");
        return found;
    }
    let (users, tricks) = callers.split_at(5);
    let names = ["system:anonymous", "alice", "bob", "carol", "dave"];
    // What each user's grants allow them to read (the shim's rules).
    let policies: [fn(&str) -> bool; 5] = [
        |_| false,
        |_| false,
        |o| o.ends_with("/w-1") || o == "/g-1",
        |o| o.starts_with("ns-a/"),
        |_| true,
    ];
    let runs = users
        .iter()
        .zip(names)
        .zip(policies)
        .enumerate()
        .map(|(i, ((c, user), policy))| {
            let mut all = requests();
            all.extend(generated(GENERATED, i as u64 + 1));
            run_caller(s, c, all, Some(user), Some(policy))
        });
    let mut found = Vec::new();
    let mut tally = Tally::default();
    for (f, t) in futures_util::future::join_all(runs).await {
        found.extend(f);
        tally.add(t);
    }
    for c in tricks {
        let some = requests()
            .into_iter()
            .filter(|(method, path, ..)| tricked(path, method))
            .collect();
        let (f, t) = run_caller(s, c, some, None, None).await;
        found.extend(f);
        tally.add(t);
    }
    // A suite where r8s answered nothing would compare nothing of its own.
    assert!(
        tally.hits > 100 && tally.forbidden > 100,
        "[{}] too few answers from r8s's cache to judge: {tally:?}",
        s.credential
    );
    eprintln!(
        "kube136_attack [{}]: {tally:?}, {} differences",
        s.credential,
        found.len()
    );
    for f in &found {
        eprintln!("  {f}");
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn should_give_no_caller_more_than_kube_136_gives_them() {
    // The kit's apiserver asks for every request (no decision reused), so
    // each of its reviews is in the log beside the request that made it.
    let extra = "--authorization-webhook-cache-authorized-ttl=1ns \
                 --authorization-webhook-cache-unauthorized-ttl=1ns \
                 --authentication-token-webhook-cache-ttl=1ns";
    let Some(kube) = Kube136::start_granting("kube136_attack", extra, &grants()) else {
        return;
    };
    let crd: Value = serde_json::from_str(
        &std::fs::read_to_string(kube.kit().join("examples/widgets-crd.json")).unwrap(),
    )
    .unwrap();
    let widget = |ns: &str, name: &str| {
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": "x"}},
            "spec": {"color": "red"}})
    };
    let objects: Vec<(String, Value)> = ["ns-a", "ns-b"]
        .iter()
        .flat_map(|ns| {
            ["w-1", "w-2", "w-3"]
                .map(|n| (format!("{WIDGETS}/namespaces/{ns}/widgets"), widget(ns, n)))
        })
        .collect();
    kube.define_and_create_all(&crd, &objects).await;
    let gizmos: Vec<(String, Value)> = ["g-1", "g-2"]
        .iter()
        .map(|n| {
            let g = json!({"apiVersion": "example.com/v1", "kind": "Gizmo",
                "metadata": {"name": n}, "spec": {"size": 1, "color": "red"}});
            (format!("{WIDGETS}/gizmos"), g)
        })
        .collect();
    kube.define_and_create_all(&crate::kube136::definitions()[1], &gizmos)
        .await;
    let dir = std::env::temp_dir().join(format!("r8s-attack-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let mut differences = Vec::new();
    let identities: BTreeMap<&str, Identity> = ["bob", "erin"]
        .into_iter()
        .map(|u| (u, kube.client_cert(u, &[])))
        .collect();
    // r8s serving TLS with the kit's certificate, verifying client
    // certificates against the kit's CA, as the kit does.
    let (cert, key, ca) = kube.serving_tls();
    // r8s holding the kit's client certificate, then a bearer token.
    for credential in ["client certificate", "token", EXEC] {
        let log = dir.join(format!("r8s-reviews-{}.jsonl", credential.len()));
        let (_reviewer, reviewer_kubeconfig) = kube.second_reviewer(&log);
        let (cert, key, ca) = (cert.clone(), key.clone(), ca.clone());
        let kubeconfig = match credential {
            "token" => kube.token_kubeconfig("admintok"),
            EXEC => kube.exec_kubeconfig(),
            _ => kube.kubeconfig(),
        };
        let resources = ["example.com/v1/widgets", "example.com/v1/gizmos"];
        let review = Some(reviewer_kubeconfig);
        let r8s = delegated_r8s(kubeconfig, &resources, review, (cert, key, ca))
            .start()
            .await;
        // A continue token each, from dave's consistent list of ns-a by ones.
        let first = format!("{WIDGETS}/namespaces/ns-a/widgets?limit=1");
        let dave = [("authorization", "Bearer davetok")];
        let kit_page = kube
            .send_tls(kube.port, None, "GET", &first, &dave, None, HANG)
            .await;
        let r8s_page = kube
            .send_tls(r8s.addr.port(), None, "GET", &first, &dave, None, HANG)
            .await;
        let token = |r: &Resp| {
            r.json()["metadata"]["continue"]
                .as_str()
                .unwrap()
                .to_string()
        };
        let setup = Setup {
            kube: &kube,
            r8s: &r8s,
            log: &log,
            credential,
            tokens: (token(&kit_page), token(&r8s_page)),
            identities: identities.clone(),
        };
        differences.extend(attack(&setup).await);
        r8s.stop().await;
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        differences.is_empty(),
        "{} differences between r8s and kube-apiserver 1.36:\n{}",
        differences.len(),
        differences.join("\n")
    );
}
