//! The differential conformance suite: one table of requests, each sent
//! straight to a sim and through r8s to an identically seeded sim. Every case
//! states what kube-apiserver answers (status, reason, message, as recorded
//! from a real apiserver), and the two answers must be identical once random
//! uids and timestamps are masked.

use std::time::Duration;

use crate::common::*;
use r8s::api::continue_token::{ContinueToken, Format};
use r8s_sim::SimHandle;
use serde_json::Value;

/// What a case expects beyond "identical on both paths".
#[derive(Clone, Copy)]
enum Want {
    /// HTTP status only.
    Status(u16),
    /// A `Status` failure with this code, reason and a message containing the text.
    Failure(u16, &'static str, &'static str),
    /// A 200 list of this kind with exactly this many items.
    Items(&'static str, usize),
    /// A 200 watch stream whose event types are these, in order.
    Events(&'static [&'static str]),
}

struct Case {
    name: &'static str,
    method: &'static str,
    path: String,
    headers: Vec<(&'static str, &'static str)>,
    body: Option<String>,
    want: Want,
}

fn case(name: &'static str, method: &'static str, path: impl Into<String>, want: Want) -> Case {
    Case {
        name,
        method,
        path: path.into(),
        headers: vec![],
        body: None,
        want,
    }
}

impl Case {
    fn header(mut self, k: &'static str, v: &'static str) -> Self {
        self.headers.push((k, v));
        self
    }
    fn body(mut self, b: impl Into<String>) -> Self {
        self.body = Some(b.into());
        self
    }
}

/// Masks what differs between two identically seeded sims (uids, timestamps,
/// the server address) so the rest can be compared exactly.
fn normalize(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("serverAddressByClientCIDRs");
            // r8s issues its own continue tokens (same meaning, its own format).
            if let Some(c) = m.get_mut("continue") {
                *c = Value::String("<continue>".into());
            }
            for (k, x) in m.iter_mut() {
                if matches!(
                    k.as_str(),
                    "uid" | "creationTimestamp" | "lastTransitionTime" | "startTime"
                ) {
                    *x = Value::String("<masked>".into());
                } else {
                    normalize(x);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(normalize),
        Value::String(s) if s.len() == 20 && s.ends_with('Z') && s.as_bytes()[10] == b'T' => {
            *s = "<time>".into();
        }
        _ => {}
    }
}

/// A protobuf body as a JSON document: its kind, a list's `ListMeta` (the
/// continue token masked: r8s issues its own) and items, a `Status`'s
/// fields, an object's name and version. `exact`: each object's bytes in
/// hex (for comparing with the very sim r8s caches); otherwise only their
/// length (twin sims differ in uids and timestamps, never in lengths).
fn protobuf_doc(body: &[u8], exact: bool) -> Value {
    use r8s::codec::protobuf as pb;
    let u = pb::unwrap(body).expect("a k8s protobuf body");
    let text = |b: Option<&[u8]>| String::from_utf8_lossy(b.unwrap_or_default()).into_owned();
    let kind = text(Some(u.kind));
    let object = |raw: &[u8]| {
        let meta = pb::find(raw, 1).unwrap().unwrap_or_default();
        let annotations: Vec<Value> = pb::fields(meta)
            .map(Result::unwrap)
            .filter(|f| f.number == 12)
            .map(|f| {
                let e = f.value.bytes().unwrap();
                Value::String(text(pb::find(e, 1).unwrap()))
            })
            .collect();
        let mut o = serde_json::json!({
            "metadata": {
                "name": text(pb::find(meta, 1).unwrap()),
                "namespace": text(pb::find(meta, 3).unwrap()),
                "resourceVersion": text(pb::find(meta, 6).unwrap()),
                "annotations": annotations,
            },
            "len": raw.len(),
        });
        if exact {
            o["hex"] = Value::String(raw.iter().map(|b| format!("{b:02x}")).collect());
        }
        o
    };
    let mut doc = serde_json::json!({"kind": kind, "apiVersion": text(Some(u.api_version))});
    if kind == "Status" {
        doc["status"] = Value::String(text(pb::find(u.raw, 2).unwrap()));
        doc["message"] = Value::String(text(pb::find(u.raw, 3).unwrap()));
        doc["reason"] = Value::String(text(pb::find(u.raw, 4).unwrap()));
        if let Ok(Some(pb::Value::Varint(c))) = pb::find_path(u.raw, &[6]) {
            doc["code"] = c.into();
        }
        doc["raw"] = Value::String(format!("{:?}", u.raw));
    } else if kind.ends_with("List") {
        let lm = pb::find(u.raw, 1).unwrap().unwrap_or_default();
        let cont = text(pb::find(lm, 3).unwrap());
        doc["metadata"] = serde_json::json!({
            "selfLink": pb::find(lm, 1).unwrap().map(|_| ""),
            "resourceVersion": text(pb::find(lm, 2).unwrap()),
            "continue": if cont.is_empty() { "" } else { "<continue>" },
            "remainingItemCount": format!("{:?}", pb::find_path(lm, &[4]).unwrap()),
        });
        let items: Vec<Value> = pb::fields(u.raw)
            .map(Result::unwrap)
            .filter(|f| f.number == 2)
            .map(|f| object(f.value.bytes().unwrap()))
            .collect();
        doc["items"] = Value::Array(items);
    } else if let Value::Object(o) = object(u.raw) {
        doc.as_object_mut().unwrap().extend(o);
    }
    doc
}

/// A protobuf watch stream: each frame's type and object.
fn protobuf_events(body: &[u8], exact: bool) -> Vec<Value> {
    use r8s::codec::protobuf as pb;
    let mut buf = bytes::BytesMut::from(body);
    let mut out = Vec::new();
    while let Some(frame) = pb::next_frame_raw(&mut buf) {
        let (t, o) = pb::watch_event(&frame).expect("a WatchEvent");
        out.push(serde_json::json!({"type": String::from_utf8_lossy(t), "object": protobuf_doc(o, exact)}));
    }
    assert!(buf.is_empty(), "a watch stream of whole frames");
    out
}

/// A comparable view of a response: status, content type, and the body as
/// normalized JSON documents (one per line for watch streams; protobuf
/// bodies through [`protobuf_doc`]).
fn view(r: &Resp) -> (u16, String, Vec<Value>) {
    view_as(r, false)
}

/// [`view`], with protobuf objects' bytes in full where `exact`.
fn view_as(r: &Resp, exact: bool) -> (u16, String, Vec<Value>) {
    let ctype = r
        .headers
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    if ctype.starts_with("application/vnd.kubernetes.protobuf") {
        let docs = if ctype.ends_with(";stream=watch") {
            protobuf_events(&r.body, exact)
        } else {
            vec![protobuf_doc(&r.body, exact)]
        };
        return (r.status.as_u16(), ctype, docs);
    }
    let text = r.text();
    let docs = if text.trim().is_empty() {
        vec![]
    } else if text.trim_start().starts_with('{') {
        match serde_json::from_str::<Value>(&text) {
            Ok(v) => vec![v],
            Err(_) => text
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| serde_json::from_str(l).unwrap())
                .collect(),
        }
    } else {
        vec![Value::String(text)]
    };
    let docs = docs
        .into_iter()
        .map(|mut d| {
            normalize(&mut d);
            d
        })
        .collect();
    (r.status.as_u16(), ctype, docs)
}

fn check(c: &Case, r: &Resp) {
    let (status, _, docs) = view(r);
    let ctx = format!(
        "case {:?}: {} {}\n  got {status}: {}",
        c.name,
        c.method,
        c.path,
        r.text().chars().take(600).collect::<String>()
    );
    match c.want {
        Want::Status(s) => assert_eq!(status, s, "{ctx}"),
        Want::Failure(code, reason, msg) => {
            assert_eq!(status, code, "{ctx}");
            let s = &docs[0];
            assert_eq!(s["kind"], "Status", "{ctx}");
            assert_eq!(s["status"], "Failure", "{ctx}");
            assert_eq!(s["code"], code, "{ctx}");
            assert_eq!(
                s.get("reason").and_then(Value::as_str).unwrap_or(""),
                reason,
                "{ctx}"
            );
            assert!(s["message"].as_str().unwrap().contains(msg), "{ctx}");
        }
        Want::Items(kind, n) => {
            assert_eq!(status, 200, "{ctx}");
            assert_eq!(docs[0]["kind"], kind, "{ctx}");
            assert_eq!(docs[0]["items"].as_array().map(Vec::len), Some(n), "{ctx}");
        }
        Want::Events(types) => {
            assert_eq!(status, 200, "{ctx}");
            let got: Vec<&str> = docs
                .iter()
                .map(|d| d["type"].as_str().unwrap_or("?"))
                .collect();
            assert_eq!(got, types, "{ctx}");
        }
    }
}

/// Whether a body is pretty-printed (kube-apiserver indents for curl).
fn indented(r: &Resp) -> bool {
    r.body.starts_with(b"{\n")
}

/// Sends a case straight to the sim and through r8s.
/// Whether a read's query is "Any" (`resourceVersion=0`) or "not older
/// than" N (not Exact, not paged): what the cache answers.
fn any_or_newer(q: &str) -> bool {
    q.contains("resourceVersion=0")
        || (q.contains("resourceVersion=")
            && !q.contains("continue")
            && !q.contains("limit=")
            && !q.contains("Exact"))
}

/// Two identically seeded sims keeping `history` events: one asked straight,
/// one behind an r8s caching `cached` (nothing: pass-through only).
async fn twins(history: usize, cached: &[&str]) -> (SimHandle, SimHandle, R8s) {
    let mut cfg = sim_config();
    cfg.history = history;
    let direct = start_sim(cfg.clone()).await;
    let behind = start_sim(cfg).await;
    // Consistent lists are proven (`read.consistent_lists = "auto"`, the
    // default): a busy machine's proof waits as long as it takes rather than
    // passes the list through.
    let r8s = r8s_in_front_of(behind.url())
        .caching(cached)
        .with(|c| c.read.prove_timeout_seconds = 60.0)
        .start()
        .await;
    (direct, behind, r8s)
}

async fn both(direct: &str, via: &str, c: &Case) -> (Resp, Resp) {
    let a = send(
        c.method,
        &format!("{direct}{}", c.path),
        &c.headers,
        c.body.as_deref(),
    )
    .await;
    let b = send(
        c.method,
        &format!("{via}{}", c.path),
        &c.headers,
        c.body.as_deref(),
    )
    .await;
    (a, b)
}

fn cases(cur: u64, oldest_watchable: u64) -> Vec<Case> {
    use Want::*;
    let tok = |rv: i64, start: &str| ContinueToken::after(rv, start).encode(Format::APISERVER);
    let cur_i = cur as i64;
    let pods = "/api/v1/namespaces/ns-1/pods";
    let table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    let cm = |name: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}},"data":{{"a":"1"}}}}"#
        )
    };
    vec![
        // Discovery.
        case("version", "GET", "/version", Status(200)),
        case("core versions", "GET", "/api", Status(200)),
        case("core resources", "GET", "/api/v1", Status(200)),
        case("groups", "GET", "/apis", Status(200)),
        case("apps resources", "GET", "/apis/apps/v1", Status(200)),
        case("custom group resources", "GET", "/apis/example.r8s.dev/v1", Status(200)),
        case("unknown group", "GET", "/apis/nope.example/v1", Failure(404, "NotFound", "could not find")),
        case("openapi v2 absent", "GET", "/openapi/v2", Status(404)),
        case("unknown resource", "GET", "/api/v1/bogus", Failure(404, "NotFound", "could not find")),
        // Lists: resource versions, paging, validation.
        case("list namespace", "GET", pods, Items("PodList", 13)),
        case("list all RV=0", "GET", "/api/v1/pods?resourceVersion=0", Items("PodList", 40)),
        case("list limit=2", "GET", format!("{pods}?limit=2"), Items("PodList", 2)),
        case("list limit=-5 means all", "GET", format!("{pods}?limit=-5"), Items("PodList", 13)),
        case("limit=abc", "GET", format!("{pods}?limit=abc"), Failure(400, "BadRequest", "strconv.ParseInt: parsing \"abc\": invalid syntax")),
        case("rvMatch without RV", "GET", format!("{pods}?resourceVersionMatch=NotOlderThan"), Failure(422, "Invalid", "resourceVersionMatch is forbidden unless resourceVersion is provided")),
        case("Exact without RV", "GET", format!("{pods}?resourceVersionMatch=Exact&limit=5"), Failure(422, "Invalid", "resourceVersionMatch is forbidden unless resourceVersion is provided")),
        case("rvMatch Bogus", "GET", format!("{pods}?resourceVersion=10&resourceVersionMatch=Bogus"), Failure(422, "Invalid", "Unsupported value: \"Bogus\": supported values: \"Exact\", \"NotOlderThan\", \"\"")),
        case("Exact at RV=0", "GET", format!("{pods}?resourceVersion=0&resourceVersionMatch=Exact&limit=2"), Failure(422, "Invalid", "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"")),
        case("RV=abc list", "GET", format!("{pods}?resourceVersion=abc"), Failure(400, "BadRequest", "invalid resource version: resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax")),
        case("RV=abc limit", "GET", format!("{pods}?resourceVersion=abc&limit=5"), Failure(400, "BadRequest", "invalid resource version: resourceVersion: Invalid value: \"abc\"")),
        case("Exact current with limit", "GET", format!("{pods}?resourceVersion={cur}&resourceVersionMatch=Exact&limit=2"), Items("PodList", 2)),
        case("Exact current no limit", "GET", format!("{pods}?resourceVersion={cur}&resourceVersionMatch=Exact"), Items("PodList", 13)),
        case("Exact compacted", "GET", format!("{pods}?resourceVersion=1&resourceVersionMatch=Exact&limit=2"), Failure(410, "Expired", "The resourceVersion for the provided list is too old.")),
        case("limit with compacted RV", "GET", format!("{pods}?resourceVersion=1&limit=2"), Failure(410, "Expired", "too old")),
        case("Exact future", "GET", format!("{pods}?resourceVersion={}&resourceVersionMatch=Exact&limit=1", cur + 1000), Failure(504, "Timeout", "Too large resource version")),
        case("not older than future", "GET", format!("/api/v1/pods?resourceVersion={}", cur + 1000), Failure(504, "Timeout", "Too large resource version")),
        case("NotOlderThan future", "GET", format!("{pods}?resourceVersion={}&resourceVersionMatch=NotOlderThan", cur + 1000), Failure(504, "Timeout", "Too large resource version")),
        case("not older than current", "GET", format!("{pods}?resourceVersion={cur}"), Items("PodList", 13)),
        case("NotOlderThan with limit", "GET", format!("{pods}?resourceVersion={cur}&resourceVersionMatch=NotOlderThan&limit=3"), Items("PodList", 3)),
        // Continue tokens.
        case("continue garbage", "GET", format!("{pods}?limit=5&continue=garbage!!"), Failure(400, "BadRequest", "illegal base64 data at input byte 7")),
        case("continue valid", "GET", format!("{pods}?limit=5&continue={}", tok(cur_i, "pod-00010")), Items("PodList", 5)),
        case("continue + RV=0", "GET", format!("{pods}?limit=2&resourceVersion=0&continue={}", tok(cur_i, "pod-00010")), Items("PodList", 2)),
        case("continue + RV", "GET", format!("{pods}?limit=2&resourceVersion={cur}&continue={}", tok(cur_i, "pod-00010")), Failure(400, "BadRequest", "specifying resource version is not allowed when using continue")),
        case("continue + rvMatch", "GET", format!("{pods}?limit=2&resourceVersion={cur}&resourceVersionMatch=Exact&continue={}", tok(cur_i, "pod-00010")), Failure(422, "Invalid", "resourceVersionMatch is forbidden when continue is provided")),
        case("continue without limit", "GET", format!("{pods}?continue={}", tok(cur_i, "pod-00010")), Items("PodList", 9)),
        case("continue expired", "GET", format!("{pods}?limit=5&continue={}", tok(1, "pod-00010")), Failure(410, "Expired", "The provided continue parameter is too old")),
        case("continue inconsistent (rv -1)", "GET", format!("{pods}?limit=5&continue={}", tok(-1, "pod-00010")), Items("PodList", 5)),
        case("continue v0", "GET", format!("{pods}?limit=5&continue=eyJ2IjoibWV0YS5rOHMuaW8vdjAiLCJydiI6MTU4MjEsInN0YXJ0IjoicG9kLTAwMTAyXHUwMDAwIn0"), Failure(400, "BadRequest", "server does not recognize this encoded version meta.k8s.io/v0")),
        case("continue escaping prefix", "GET", format!("{pods}?limit=5&continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTU4MjEsInN0YXJ0IjoiLi4vbnMtMy9wb2QtMDAxMDMifQ"), Failure(400, "BadRequest", "continue key is not valid: ../ns-3/pod-00103")),
        case("sendInitialEvents on list", "GET", format!("{pods}?sendInitialEvents=true"), Failure(422, "Invalid", "sendInitialEvents is forbidden for list")),
        // Selectors.
        case("label selector", "GET", "/api/v1/pods?labelSelector=app%3Dapp-1", Items("PodList", 2)),
        case("label set selector", "GET", "/api/v1/pods?labelSelector=tier%20in%20(batch,cache)", Items("PodList", 20)),
        case("label exists/not", "GET", "/api/v1/pods?labelSelector=!nope,app", Items("PodList", 40)),
        case("label selector malformed", "GET", "/api/v1/pods?labelSelector=app%20in%20(a", Failure(400, "BadRequest", "unable to parse requirement: found '', expected: ',' or ')'")),
        case("field nodeName", "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-00", Items("PodList", 20)),
        case("field unscheduled", "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3D", Items("PodList", 20)),
        case("field name", "GET", "/api/v1/pods?fieldSelector=metadata.name%3Dpod-00007", Items("PodList", 1)),
        case("field phase", "GET", "/api/v1/pods?fieldSelector=status.phase%3DPending", Items("PodList", 20)),
        case("field unsupported", "GET", "/api/v1/pods?fieldSelector=spec.containers.name%3Dmain", Failure(400, "BadRequest", "field label not supported: spec.containers.name")),
        case("field value unescaped =", "GET", "/api/v1/namespaces/ns-1/configmaps?resourceVersion=0&fieldSelector=metadata.name%3Da%3Db", Failure(400, "BadRequest", "invalid field selector: unescaped character in value: 61")),
        case("field value bad escape", "GET", "/api/v1/pods?resourceVersion=0&fieldSelector=metadata.name%3Da%5Cx", Failure(400, "BadRequest", "invalid field selector: invalid escape sequence: \\x")),
        case("field value escaped", "GET", "/api/v1/pods?resourceVersion=0&fieldSelector=metadata.name%3Da%5C%3Db", Items("PodList", 0)),
        case("field malformed", "GET", "/api/v1/pods?fieldSelector=spec.nodeName%20in%20(a)", Failure(400, "BadRequest", "invalid selector: 'spec.nodeName in (a)'")),
        case("selector paging has no remainingItemCount", "GET", "/api/v1/pods?labelSelector=tier%3Dbatch&limit=2", Items("PodList", 2)),
        case("missing namespace lists empty", "GET", "/api/v1/namespaces/nope/pods?resourceVersion=0", Items("PodList", 0)),
        case("cluster-scoped list", "GET", "/api/v1/nodes", Items("NodeList", 1)),
        case("cluster-scoped under namespace", "GET", "/api/v1/namespaces/ns-0/nodes", Failure(404, "NotFound", "could not find")),
        case("deployments", "GET", "/apis/apps/v1/deployments", Items("DeploymentList", 3)),
        case("widgets", "GET", "/apis/example.r8s.dev/v1/widgets", Items("WidgetList", 1)),
        // Content negotiation.
        case("table list", "GET", format!("{pods}?limit=2"), Status(200)).header("accept", table),
        case("table v1beta1", "GET", "/api/v1/namespaces/ns-1/pods/pod-00001", Status(200)).header("accept", "application/json;as=Table;v=v1beta1;g=meta.k8s.io"),
        case("not acceptable", "GET", pods, Failure(406, "NotAcceptable", "only the following media types are accepted")).header("accept", "text/html"),
        case("pretty for curl", "GET", "/api/v1/namespaces/ns-1/pods/pod-00001", Status(200)).header("user-agent", "curl/8.0"),
        case("pretty for curl, any version", "GET", "/api/v1/namespaces/ns-1/pods/pod-00001?resourceVersion=0", Status(200)).header("user-agent", "curl/8.0"),
        case("pretty list for curl, any version", "GET", format!("{pods}?resourceVersion=0&limit=2"), Status(200)).header("user-agent", "curl/8.0"),
        case("pretty=false for curl", "GET", format!("{pods}?resourceVersion=0&pretty=false"), Status(200)).header("user-agent", "curl/8.0"),
        case("pretty=true", "GET", format!("{pods}?resourceVersion=0&pretty=true"), Status(200)),
        // Get.
        case("get pod", "GET", "/api/v1/namespaces/ns-1/pods/pod-00001", Status(200)),
        case("get missing", "GET", "/api/v1/namespaces/ns-1/pods/does-not-exist", Failure(404, "NotFound", "pods \"does-not-exist\" not found")),
        case("get missing RV=0", "GET", "/api/v1/namespaces/ns-1/pods/does-not-exist?resourceVersion=0", Failure(404, "NotFound", "pods \"does-not-exist\" not found")),
        case("get future RV", "GET", format!("/api/v1/namespaces/ns-1/pods/pod-00001?resourceVersion={}", cur + 1000), Failure(504, "Timeout", "Too large resource version")),
        case("get namespace", "GET", "/api/v1/namespaces/ns-1", Status(200)),
        case("get pod status", "GET", "/api/v1/namespaces/ns-1/pods/pod-00001/status", Status(200)),
        // Watch.
        case("watch RV=0 one object", "GET", "/api/v1/namespaces/ns-1/pods?watch=1&resourceVersion=0&fieldSelector=metadata.name%3Dpod-00001&timeoutSeconds=1", Events(&["ADDED"])),
        case("watch too old", "GET", "/api/v1/pods?watch=1&resourceVersion=1", Events(&["ERROR"])),
        case("watch just outside window", "GET", format!("/api/v1/pods?watch=1&resourceVersion={}", oldest_watchable - 1), Events(&["ERROR"])),
        case("watch from current, idle", "GET", format!("{pods}?watch=1&resourceVersion={cur}&timeoutSeconds=1"), Events(&[])),
        case("watch RV=-5", "GET", "/api/v1/pods?watch=1&resourceVersion=-5", Failure(500, "", "strconv.ParseUint: parsing \"-5\": invalid syntax")),
        case("watch RV=abc", "GET", "/api/v1/pods?watch=1&resourceVersion=abc", Failure(500, "", "parsing \"abc\"")),
        case("watch rvMatch without sendInitialEvents", "GET", format!("{pods}?watch=1&resourceVersion=0&resourceVersionMatch=NotOlderThan"), Failure(422, "Invalid", "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided")),
        case("watch sendInitialEvents without rvMatch", "GET", format!("{pods}?watch=1&sendInitialEvents=true"), Failure(422, "Invalid", "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")),
        case("streaming list", "GET", "/api/v1/namespaces/ns-1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&fieldSelector=metadata.name%3Dpod-00001&timeoutSeconds=1", Events(&["ADDED", "BOOKMARK"])),
        case("streaming list of a future version", "GET", format!("{pods}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion={}&timeoutSeconds=10", cur + 1000), Events(&["ERROR"])),
        case("table watch", "GET", "/api/v1/namespaces/ns-1/pods?watch=1&fieldSelector=metadata.name%3Dpod-00004&timeoutSeconds=1", Events(&["ADDED"])).header("accept", table),
        // Writes (same sequence on both sims).
        case("create", "POST", "/api/v1/namespaces/default/configmaps", Status(201)).body(cm("c1")),
        case("create again", "POST", "/api/v1/namespaces/default/configmaps", Failure(409, "AlreadyExists", "configmaps \"c1\" already exists")).body(cm("c1")),
        case("create invalid name", "POST", "/api/v1/namespaces/default/configmaps", Failure(422, "Invalid", "a lowercase RFC 1123 subdomain")).body(cm("Bad_Name")),
        case("create in missing namespace", "POST", "/api/v1/namespaces/nope/configmaps", Failure(404, "NotFound", "namespaces \"nope\" not found")).body(cm("c2")),
        case("create malformed", "POST", "/api/v1/namespaces/default/configmaps", Failure(400, "BadRequest", "json parse error")).body("{nope"),
        case("update stale RV", "PUT", "/api/v1/namespaces/default/configmaps/c1", Failure(409, "Conflict", "the object has been modified")).body(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c1","resourceVersion":"1"},"data":{"a":"2"}}"#),
        case("update unconditional", "PUT", "/api/v1/namespaces/default/configmaps/c1", Status(200)).body(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c1"},"data":{"a":"2"}}"#),
        case("update missing", "PUT", "/api/v1/namespaces/default/configmaps/nope", Failure(404, "NotFound", "configmaps \"nope\" not found")).body(r#"{"metadata":{"name":"nope"}}"#),
        case("merge patch", "PATCH", "/api/v1/namespaces/default/configmaps/c1", Status(200)).header("content-type", "application/merge-patch+json").body(r#"{"data":{"b":"3"}}"#),
        case("json patch", "PATCH", "/api/v1/namespaces/default/configmaps/c1", Status(200)).header("content-type", "application/json-patch+json").body(r#"[{"op":"add","path":"/data/c","value":"4"}]"#),
        case("patch unsupported type", "PATCH", "/api/v1/namespaces/default/configmaps/c1", Failure(415, "UnsupportedMediaType", "unknown format")).header("content-type", "text/plain").body("x"),
        case("delete stale precondition", "DELETE", "/api/v1/namespaces/default/configmaps/c1", Failure(409, "Conflict", "the ResourceVersion in the precondition (1) does not match")).body(r#"{"preconditions":{"resourceVersion":"1"}}"#),
        case("delete", "DELETE", "/api/v1/namespaces/default/configmaps/c1", Status(200)),
        case("delete again", "DELETE", "/api/v1/namespaces/default/configmaps/c1", Failure(404, "NotFound", "configmaps \"c1\" not found")),
        case("watch sees the writes", "GET", format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={cur}&timeoutSeconds=1"), Events(&["ADDED", "MODIFIED", "MODIFIED", "MODIFIED", "DELETED"])),
    ]
}

/// Every cell of the API concepts' get and list tables (resource version × match × limit), across namespaces and
/// selectors: the answers must match the sim's exactly (the sim is static, so
/// an "Any" read from a synced cache is the current state).
fn table_cases(cur: u64) -> Vec<Case> {
    let mut out = Vec::new();
    let rvs: Vec<(&'static str, String)> = vec![
        ("unset", String::new()),
        ("any", "resourceVersion=0".into()),
        ("not older than", format!("resourceVersion={cur}")),
        (
            "NotOlderThan",
            format!("resourceVersion={cur}&resourceVersionMatch=NotOlderThan"),
        ),
        (
            "Exact",
            format!("resourceVersion={cur}&resourceVersionMatch=Exact"),
        ),
        (
            "older not-older-than",
            format!("resourceVersion={}", cur - 3),
        ),
    ];
    let scopes = [
        "/api/v1/pods",
        "/api/v1/namespaces/ns-0/pods",
        "/api/v1/namespaces/ns-2/pods",
        "/apis/apps/v1/deployments",
        "/api/v1/namespaces/default/configmaps",
        "/apis/example.r8s.dev/v1/namespaces/default/widgets",
    ];
    let selectors = [
        "",
        "labelSelector=tier%3Dbackend",
        "labelSelector=tier%20notin%20(backend,cache),team",
        "fieldSelector=metadata.name%3Dpod-00004",
        "fieldSelector=spec.nodeName%3Dnode-00,status.phase%3DRunning",
    ];
    for scope in scopes {
        for (i, sel) in selectors.iter().enumerate() {
            if i > 0 && !scope.ends_with("pods") {
                continue;
            }
            for (_, rv) in &rvs {
                for limit in ["", "limit=3"] {
                    let q: Vec<&str> = [rv.as_str(), sel, limit]
                        .into_iter()
                        .filter(|x| !x.is_empty())
                        .collect();
                    out.push(case(
                        "table cell",
                        "GET",
                        format!("{scope}?{}", q.join("&")),
                        Want::Status(200),
                    ));
                }
            }
        }
    }
    for (_, rv) in &rvs[..3] {
        for obj in [
            "/api/v1/namespaces/ns-0/pods/pod-00000",
            "/api/v1/namespaces/ns-0/pods/nope",
            "/api/v1/nodes/node-00",
            "/api/v1/namespaces/ns-1",
            "/apis/example.r8s.dev/v1/namespaces/default/widgets/sprocket",
        ] {
            let want = if obj.ends_with("nope") {
                Want::Failure(404, "NotFound", "pods \"nope\" not found")
            } else {
                Want::Status(200)
            };
            out.push(case("get cell", "GET", format!("{obj}?{rv}"), want));
        }
    }
    out
}

/// The `Accept` headers that matter: kubectl and kube-rs (JSON), client-go's
/// typed clients (protobuf first, up to 1.31 and from 1.32), its
/// metadata-only informers (protobuf first, then JSON), and metadata-only
/// JSON. For each: what a get and a list send, and whether r8s answers it
/// from the cache today for a built-in resource and for a custom one (for a
/// custom resource the apiserver answers a protobuf-first Accept with JSON).
struct Accept {
    name: &'static str,
    get: Option<&'static str>,
    list: Option<&'static str>,
    /// Whether built-in resources are answered in protobuf.
    protobuf: bool,
    builtin_hit: bool,
    custom_hit: bool,
}

const ACCEPTS: &[Accept] = &[
    Accept {
        name: "json",
        get: None,
        list: None,
        protobuf: false,
        builtin_hit: true,
        custom_hit: true,
    },
    Accept {
        name: "client-go up to 1.31",
        get: Some("application/vnd.kubernetes.protobuf, */*"),
        list: Some("application/vnd.kubernetes.protobuf, */*"),
        protobuf: true,
        builtin_hit: true,
        custom_hit: true,
    },
    Accept {
        name: "client-go 1.32+",
        get: Some("application/vnd.kubernetes.protobuf,application/json"),
        list: Some("application/vnd.kubernetes.protobuf,application/json"),
        protobuf: true,
        builtin_hit: true,
        custom_hit: true,
    },
    Accept {
        name: "metadata-only JSON",
        get: Some("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"),
        list: Some("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"),
        protobuf: false,
        builtin_hit: true,
        custom_hit: true,
    },
    Accept {
        name: "client-go metadata informer",
        get: Some(
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json",
        ),
        list: Some(
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
        ),
        protobuf: true,
        builtin_hit: true,
        custom_hit: true,
    },
];

#[tokio::test(flavor = "multi_thread")]
async fn should_answer_every_accept_identically_from_the_cache() {
    let (direct, behind, r8s) = twins(30, CACHED).await;
    let cur = direct.sim.store.current_rv();
    let mut hits = 0;
    let mut refused_406 = 0;
    for accept in ACCEPTS.iter().skip(1) {
        let mut all = table_cases(cur);
        for c in &mut all {
            let h = if c.name == "get cell" {
                accept.get
            } else {
                accept.list
            };
            c.headers.extend(h.map(|h| ("accept", h)));
        }
        // A list asked as one object's metadata, and one object as a list: the apiserver's 406.
        let mismatched = [
            (
                "/api/v1/namespaces/ns-0/pods?resourceVersion=0",
                "PartialObjectMetadata",
                "a list (*core.PodList)",
            ),
            (
                "/api/v1/namespaces/ns-0/pods/pod-00000?resourceVersion=0",
                "PartialObjectMetadataList",
                "not a list (*core.Pod)",
            ),
            (
                "/apis/example.r8s.dev/v1/namespaces/default/widgets/sprocket?resourceVersion=0",
                "PartialObjectMetadataList",
                "not a list (*unstructured.Unstructured)",
            ),
        ];
        for (path, kind, msg) in mismatched {
            let h = Box::leak(
                format!("application/json;as={kind};g=meta.k8s.io;v=v1").into_boxed_str(),
            );
            all.push(
                case(
                    "mismatched shape",
                    "GET",
                    path,
                    Want::Failure(406, "NotAcceptable", msg),
                )
                .header("accept", h),
            );
        }
        for c in &all {
            let (a, b) = both(&direct.url(), &r8s.url(), c).await;
            check(c, &a);
            assert_eq!(
                view(&a),
                view(&b),
                "{}: case {:?} {}: straight vs through r8s's cache differ",
                accept.name,
                c.name,
                c.path
            );
            // Byte for byte against the sim r8s caches (the same objects).
            let (under, b2) = both(&behind.url(), &r8s.url(), c).await;
            refused_406 += u64::from(b.status == 406) + u64::from(b2.status == 406);
            assert_eq!(
                view_as(&under, true),
                view_as(&b2, true),
                "{}: case {:?} {}: the cached sim vs through r8s's cache differ",
                accept.name,
                c.name,
                c.path
            );
            if a.status == 200 && accept.name.contains("metadata") {
                let kind = if c.name == "get cell" {
                    "PartialObjectMetadata"
                } else {
                    "PartialObjectMetadataList"
                };
                assert_eq!(view(&b).2[0]["kind"], kind, "{}: {}", accept.name, c.path);
            }
            if accept.protobuf && a.status == 200 && !c.path.contains("example.r8s.dev") {
                assert_eq!(
                    view(&b).1,
                    "application/vnd.kubernetes.protobuf",
                    "{}: {}",
                    accept.name,
                    c.path
                );
            }
            let q = c.path.split('?').nth(1).unwrap_or("");
            let any_or_newer = any_or_newer(q) && !q.contains("older");
            let answered = if c.path.contains("example.r8s.dev") {
                accept.custom_hit
            } else {
                accept.builtin_hit
            };
            let served = b.headers.get("x-r8s-cache").map(|v| v.to_str().unwrap());
            // A list or get with no version is a consistent one, proven and
            // served (`read.consistent_lists`, `read.consistent_gets`).
            let consistent =
                matches!(c.name, "table cell" | "get cell") && !q.contains("resourceVersion=");
            if c.name.ends_with("cell")
                && (!answered || (!q.contains("resourceVersion=") && !consistent))
            {
                assert_eq!(served, Some("pass"), "{}: {}", accept.name, c.path);
            } else if c.name.ends_with("cell") && (any_or_newer || consistent) {
                assert_eq!(served, Some("hit"), "{}: {}", accept.name, c.path);
            }
            hits += usize::from(served == Some("hit"));
        }
    }
    assert!(
        hits >= 100,
        "cells served from the cache in other Accepts: {hits}"
    );
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    let passes = |reason: &str| -> u64 {
        m.lines()
            .filter(|l| {
                l.starts_with("r8s_cache_requests_total")
                    && l.contains(&format!("result=\"{reason}\""))
            })
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum()
    };
    // Every protobuf and metadata-only cell the cache answers was a hit
    // (above); the mismatched shapes (the apiserver's 406) pass as
    // media_type. The recorder is the process's, shared with the tests
    // running beside this one (Tables pass as media_type too): at least.
    assert!(refused_406 > 0);
    assert!(
        passes("media_type") >= refused_406,
        "the 406s pass as media_type: {m}"
    );
    assert_eq!(
        passes("encoding"),
        0,
        "every encoding asked is cached (custom resources' protobuf metadata too): {m}"
    );
    r8s.stop().await;
    direct.stop().await;
    behind.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_answer_identically_from_the_cache() {
    let (direct, behind, r8s) = twins(30, CACHED).await;
    let cur = direct.sim.store.current_rv();
    let mut all = table_cases(cur);
    let generated = all.len();
    assert!(
        generated >= 80,
        "at least 80 get/list table cases, have {generated}"
    );
    all.extend(cases(cur, direct.sim.store.compacted()));
    let mut hits = 0;
    for c in &all {
        let (a, b) = both(&direct.url(), &r8s.url(), c).await;
        assert_eq!(indented(&a), indented(&b), "case {:?}: formatting", c.name);
        if c.name.starts_with("pretty") {
            assert_eq!(
                indented(&a),
                !c.name.contains("pretty=false"),
                "case {:?}",
                c.name
            );
        }
        check(c, &a);
        assert_eq!(
            view(&a),
            view(&b),
            "case {:?} {}: straight vs through r8s's cache differ",
            c.name,
            c.path
        );
        let served = b
            .headers
            .get("x-r8s-cache")
            .map(|v| v.to_str().unwrap().to_string());
        let q = c.path.split('?').nth(1).unwrap_or("");
        let any_or_newer = any_or_newer(q);
        if c.method == "GET" && c.name.ends_with("cell") && any_or_newer && !q.contains("older") {
            assert_eq!(
                served.as_deref(),
                Some("hit"),
                "case {}: served from cache",
                c.path
            );
        }
        if c.method == "GET" && c.name.ends_with("cell") && !q.contains("resourceVersion=") {
            // A list or get with no version is proven and served (a
            // consistent LIST, a consistent GET).
            assert_eq!(
                served.as_deref(),
                Some("hit"),
                "case {}: most recent: proven and served",
                c.path
            );
        }
        hits += usize::from(served.as_deref() == Some("hit"));
    }
    assert!(hits >= 60, "most table cells are cache hits: {hits}");
    r8s.stop().await;
    direct.stop().await;
    behind.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_answer_identically_straight_and_through_r8s() {
    let (direct, behind, r8s) = twins(30, &[]).await;
    let cur = direct.sim.store.current_rv();
    assert_eq!(
        cur,
        behind.sim.store.current_rv(),
        "identically seeded sims"
    );
    let oldest = direct.sim.store.compacted();
    assert!(
        oldest > 1,
        "the compaction window must have moved for the 410 cases"
    );
    let all = cases(cur, oldest);
    assert!(all.len() >= 60, "at least 60 cases, have {}", all.len());
    for c in &all {
        let (a, b) = both(&direct.url(), &r8s.url(), c).await;
        assert_eq!(indented(&a), indented(&b), "case {:?}: formatting", c.name);
        if c.name.starts_with("pretty") {
            assert_eq!(
                indented(&a),
                !c.name.contains("pretty=false"),
                "case {:?}",
                c.name
            );
        }
        check(c, &a);
        assert_eq!(
            view(&a),
            view(&b),
            "case {:?}: straight vs through r8s differ",
            c.name
        );
        assert_eq!(
            b.headers.get("x-r8s-cache").map(|v| v.to_str().unwrap()),
            Some("pass"),
            "case {:?}",
            c.name
        );
        assert!(a.headers.get("x-r8s-cache").is_none());
        for h in ["content-type", "cache-control", "retry-after"] {
            assert_eq!(
                a.headers.get(h),
                b.headers.get(h),
                "case {:?}: header {h}",
                c.name
            );
        }
    }
    r8s.stop().await;
    direct.stop().await;
    behind.stop().await;
}

/// Every cell of the API concepts' watch table served from the cache (RV 0, N,
/// current, sendInitialEvents with and without bookmarks), across scopes and
/// selectors, after writes that move objects into and out of selectors: the
/// streams must equal the sim's event for event.
#[tokio::test(flavor = "multi_thread")]
async fn should_watch_identically_from_the_cache() {
    let (direct, behind, r8s) = twins(500, CACHED).await;
    let cur0 = direct.sim.store.current_rv();
    let merge = ("content-type", "application/merge-patch+json");
    let writes = [
        // pod-00001 (ns-1, tier=backend) leaves tier=backend, pod-00002 (ns-2) enters it,
        // pod-00001 comes back; a configmap is born, changes and dies; a pod is deleted.
        case(
            "leave",
            "PATCH",
            "/api/v1/namespaces/ns-1/pods/pod-00001",
            Want::Status(200),
        )
        .header(merge.0, merge.1)
        .body(r#"{"metadata":{"labels":{"tier":"frontend"}}}"#),
        case(
            "enter",
            "PATCH",
            "/api/v1/namespaces/ns-2/pods/pod-00002",
            Want::Status(200),
        )
        .header(merge.0, merge.1)
        .body(r#"{"metadata":{"labels":{"tier":"backend"}}}"#),
        case(
            "return",
            "PATCH",
            "/api/v1/namespaces/ns-1/pods/pod-00001",
            Want::Status(200),
        )
        .header(merge.0, merge.1)
        .body(r#"{"metadata":{"labels":{"tier":"backend"}}}"#),
        case(
            "create",
            "POST",
            "/api/v1/namespaces/default/configmaps",
            Want::Status(201),
        )
        .body(
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"w1"},"data":{"a":"1"}}"#,
        ),
        case(
            "update",
            "PATCH",
            "/api/v1/namespaces/default/configmaps/w1",
            Want::Status(200),
        )
        .header(merge.0, merge.1)
        .body(r#"{"data":{"a":"2"}}"#),
        case(
            "delete cm",
            "DELETE",
            "/api/v1/namespaces/default/configmaps/w1",
            Want::Status(200),
        ),
        case(
            "delete pod",
            "DELETE",
            "/api/v1/namespaces/ns-1/pods/pod-00004",
            Want::Status(200),
        ),
    ];
    for w in &writes {
        let (a, b) = both(&direct.url(), &r8s.url(), w).await;
        check(w, &a);
        assert_eq!(a.status, b.status, "write {:?}", w.name);
    }
    let cur = direct.sim.store.current_rv();
    assert_eq!(cur, behind.sim.store.current_rv());
    // The cache has every write before the cells start.
    for coll in ["/api/v1/pods", "/api/v1/namespaces/default/configmaps"] {
        let guard = HangGuard::new();
        loop {
            let l = get(&format!("{}{coll}?resourceVersion=0&limit=1", r8s.url())).await;
            let at: u64 = l.json()["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            if at >= cur - 1 || (coll.contains("pods") && at >= cur) {
                break;
            }
            guard.check(|| format!("the cache caught up on {coll}"));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let scopes: [(&str, &[&str]); 3] = [
        (
            "/api/v1/pods",
            &[
                "",
                "labelSelector=tier%3Dbackend",
                "fieldSelector=metadata.name%3Dpod-00001",
                "fieldSelector=spec.nodeName%3Dnode-00",
            ],
        ),
        (
            "/api/v1/namespaces/ns-1/pods",
            &[
                "",
                "labelSelector=tier%3Dbackend",
                "fieldSelector=metadata.name%3Dpod-00004",
                "labelSelector=tier%20notin%20(backend)",
            ],
        ),
        ("/api/v1/namespaces/default/configmaps", &[""]),
    ];
    let starts = [
        "resourceVersion=0".to_string(),
        format!("resourceVersion={cur0}"),
        format!("resourceVersion={cur0}&allowWatchBookmarks=true"),
        format!("resourceVersion={}", cur0 + 2),
        format!("resourceVersion={cur}&allowWatchBookmarks=true"),
        format!(
            "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion={cur0}&allowWatchBookmarks=true"
        ),
        "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0".to_string(),
    ];
    let mut cells = Vec::new();
    for (scope, sels) in scopes {
        for sel in sels {
            for start in &starts {
                let q = [start.as_str(), sel, "timeoutSeconds=1"]
                    .into_iter()
                    .filter(|x| !x.is_empty())
                    .collect::<Vec<_>>()
                    .join("&");
                cells.push((true, format!("{scope}?watch=1&{q}"), None));
                // Metadata-only informers (JSON, and client-go's protobuf
                // first) and client-go's typed informers (protobuf).
                if !sel.is_empty() || scope.ends_with("configmaps") {
                    for accept in [
                        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
                        "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json",
                        "application/vnd.kubernetes.protobuf, */*",
                    ] {
                        cells.push((true, format!("{scope}?watch=1&{q}"), Some(accept)));
                    }
                }
            }
        }
    }
    cells.push((
        true,
        format!("/api/v1/pods?watch=1&resourceVersion={cur0}&timeoutSeconds=1"),
        Some("application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"),
    ));
    // A custom resource's metadata informer: protobuf PartialObjectMetadata
    // (the only protobuf the apiserver has of a custom resource).
    for start in [
        "resourceVersion=0",
        "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0&allowWatchBookmarks=true",
    ] {
        cells.push((
            true,
            format!("/apis/example.r8s.dev/v1/widgets?watch=1&{start}&timeoutSeconds=1"),
            Some("application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"),
        ));
    }
    // Passed through, answered by the upstream: too old, and most recent.
    cells.push((
        false,
        "/api/v1/pods?watch=1&resourceVersion=1&timeoutSeconds=1".into(),
        None,
    ));
    cells.push((false, "/api/v1/namespaces/ns-1/pods?watch=1&timeoutSeconds=1&fieldSelector=metadata.name%3Dpod-00001".into(), None));
    assert!(
        cells.len() >= 40,
        "at least 40 watch cells, have {}",
        cells.len()
    );
    let mut tasks = Vec::new();
    for (cached, path, accept) in cells {
        let mut c = case("watch cell", "GET", path, Want::Status(200));
        c.headers.extend(accept.map(|a| ("accept", a)));
        let (d, v) = (direct.url(), r8s.url());
        tasks.push(tokio::spawn(async move {
            let (a, b) = both(&d, &v, &c).await;
            (cached, c, a, b)
        }));
    }
    let mut moved = 0;
    for t in tasks {
        let (cached, c, a, b) = t.await.unwrap();
        check(&c, &a);
        let (mut va, mut vb) = (view(&a), view(&b));
        // A bookmark carries the cache's version, which may trail the sim's
        // global revision when the last write was to another resource (the
        // apiserver's per-resource watch cache behaves the same way): it must
        // be at least every event sent before it and at most the sim's.
        for (da, db) in va.2.iter_mut().zip(vb.2.iter_mut()) {
            if da["type"] == "BOOKMARK" && db["type"] == "BOOKMARK" {
                let rv = |d: &Value| -> u64 {
                    d["object"]["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap()
                        .parse()
                        .unwrap()
                };
                assert!(
                    rv(db) <= rv(da),
                    "watch cell {}: bookmark ahead of the upstream",
                    c.path
                );
                db["object"]["metadata"]["resourceVersion"] =
                    da["object"]["metadata"]["resourceVersion"].clone();
                // A protobuf bookmark's length follows its version's digits.
                if let Some(len) = da["object"].get("len").cloned() {
                    db["object"]["len"] = len;
                }
            }
        }
        let brief = |v: &(u16, String, Vec<Value>)| -> Vec<String> {
            v.2.iter()
                .map(|d| {
                    format!(
                        "{} {}",
                        d["type"].as_str().unwrap_or("?"),
                        d["object"]["metadata"]["resourceVersion"]
                    )
                })
                .collect()
        };
        assert_eq!(
            brief(&va),
            brief(&vb),
            "watch cell {}: event types and versions",
            c.path
        );
        assert_eq!(
            va, vb,
            "watch cell {}: straight vs from r8s's cache differ",
            c.path
        );
        if c.headers
            .iter()
            .any(|(_, v)| v.starts_with("application/vnd.kubernetes.protobuf"))
        {
            assert_eq!(
                vb.1, "application/vnd.kubernetes.protobuf;stream=watch",
                "watch cell {}",
                c.path
            );
        }
        if c.headers.iter().any(|(_, v)| v.contains(";as=")) {
            for d in &vb.2 {
                assert_eq!(
                    d["object"]["kind"], "PartialObjectMetadata",
                    "watch cell {} (metadata-only): {d}",
                    c.path
                );
                assert!(d["object"].get("spec").is_none(), "{d}");
            }
        }
        assert_eq!(
            b.headers.get("x-r8s-cache").map(|v| v.to_str().unwrap()),
            Some(if cached { "hit" } else { "pass" }),
            "watch cell {}",
            c.path
        );
        let types: Vec<&str> =
            va.2.iter()
                .map(|d| d["type"].as_str().unwrap_or("?"))
                .collect();
        if c.path.contains("tier%3Dbackend")
            && c.path.contains(&format!("resourceVersion={cur0}&"))
            && !c.path.contains("sendInitialEvents")
        {
            // Out and back in: DELETED then ADDED for pod-00001, ADDED for pod-00002.
            assert!(
                types.contains(&"DELETED") && types.contains(&"ADDED"),
                "{}: {types:?}",
                c.path
            );
            moved += 1;
        }
    }
    assert!(
        moved >= 2,
        "cells with objects moving across selectors ran: {moved}"
    );
    r8s.stop().await;
    direct.stop().await;
    behind.stop().await;
}
