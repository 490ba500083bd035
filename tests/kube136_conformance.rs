//! `tests/conformance.rs`'s expectations held against Kubernetes 1.36: each
//! case custom resources can express, sent to the kit's apiserver directly
//! and through r8s (`tests/kube136.rs`'s rig), both answers checked against
//! what the case expects. Skips (saying so) where `KUBE_APISERVER_136_KIT`
//! is unset; `.ci/run` sets it.

use std::time::Duration;

use serde_json::Value;

use crate::common::Resp;
use crate::common::answers::events;
use crate::kube136::{JSON, rig};

/// What `tests/conformance.rs` expects of a case (held there against the
/// sim): here each one that custom resources can express is held against
/// kube-apiserver 1.36 itself, straight and through r8s. The sim shares
/// r8s's parsers; the apiserver does not. Left out: "unknown group" (the
/// kit, a standalone apiextensions-apiserver, answers its router's bare
/// `404 page not found` where kube-apiserver's aggregator answers a
/// `Status`), and the cases that need a compacted etcd or a pod's fields.
enum Want {
    /// This status.
    Status(u16),
    /// A `Status` failure: code, reason, a piece of its message.
    Failure(u16, &'static str, &'static str),
    /// A watch whose events are of these types.
    Events(&'static [&'static str]),
}

#[rustfmt::skip]
fn conformance_cases(cur: u64, theirs_token: &str) -> Vec<(&'static str, String, Option<&'static str>, Want)> {
    use Want::*;
    let w = "/apis/example.com/v1/namespaces/ns-b/widgets";
    let future = cur + 1_000_000;
    // Tokens as the apiserver's storage writes them (base64url of its JSON).
    let v0 = "eyJ2IjoibWV0YS5rOHMuaW8vdjAiLCJydiI6MTU4MjEsInN0YXJ0IjoicG9kLTAwMTAyXHUwMDAwIn0";
    let escaping = "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTU4MjEsInN0YXJ0IjoiLi4vbnMtMy9wb2QtMDAxMDMifQ";
    vec![
        ("list limit=-5 means all", format!("{w}?limit=-5"), None, Status(200)),
        ("limit=abc", format!("{w}?limit=abc"), None, Failure(400, "BadRequest", "strconv.ParseInt: parsing \"abc\": invalid syntax")),
        ("rvMatch without RV", format!("{w}?resourceVersionMatch=NotOlderThan"), None, Failure(422, "Invalid", "resourceVersionMatch is forbidden unless resourceVersion is provided")),
        ("Exact without RV", format!("{w}?resourceVersionMatch=Exact&limit=5"), None, Failure(422, "Invalid", "resourceVersionMatch is forbidden unless resourceVersion is provided")),
        ("rvMatch Bogus", format!("{w}?resourceVersion=10&resourceVersionMatch=Bogus"), None, Failure(422, "Invalid", "Unsupported value: \"Bogus\": supported values: \"Exact\", \"NotOlderThan\", \"\"")),
        ("Exact at RV=0", format!("{w}?resourceVersion=0&resourceVersionMatch=Exact&limit=2"), None, Failure(422, "Invalid", "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"")),
        ("RV=abc list", format!("{w}?resourceVersion=abc"), None, Failure(400, "BadRequest", "invalid resource version: resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax")),
        ("RV=abc limit", format!("{w}?resourceVersion=abc&limit=5"), None, Failure(400, "BadRequest", "invalid resource version: resourceVersion: Invalid value: \"abc\"")),
        ("Exact future", format!("{w}?resourceVersion={future}&resourceVersionMatch=Exact&limit=1"), None, Failure(504, "Timeout", "Too large resource version")),
        ("NotOlderThan future", format!("{w}?resourceVersion={future}&resourceVersionMatch=NotOlderThan"), None, Failure(504, "Timeout", "Too large resource version")),
        ("not older than current", format!("{w}?resourceVersion={cur}"), None, Status(200)),
        ("continue garbage", format!("{w}?limit=5&continue=garbage!!"), None, Failure(400, "BadRequest", "illegal base64 data at input byte 7")),
        ("continue + RV", format!("{w}?limit=2&resourceVersion={cur}&continue={theirs_token}"), None, Failure(400, "BadRequest", "specifying resource version is not allowed when using continue")),
        ("continue + rvMatch", format!("{w}?limit=2&resourceVersion={cur}&resourceVersionMatch=Exact&continue={theirs_token}"), None, Failure(422, "Invalid", "resourceVersionMatch is forbidden when continue is provided")),
        ("continue v0", format!("{w}?limit=5&continue={v0}"), None, Failure(400, "BadRequest", "server does not recognize this encoded version meta.k8s.io/v0")),
        ("continue escaping prefix", format!("{w}?limit=5&continue={escaping}"), None, Failure(400, "BadRequest", "continue key is not valid: ../ns-3/pod-00103")),
        ("sendInitialEvents on list", format!("{w}?sendInitialEvents=true"), None, Failure(422, "Invalid", "sendInitialEvents is forbidden for list")),
        ("label selector malformed", format!("{w}?labelSelector=app%20in%20(a"), None, Failure(400, "BadRequest", "unable to parse requirement: found '', expected: ',' or ')'")),
        ("field unsupported", format!("{w}?fieldSelector=spec.containers.name%3Dmain"), None, Failure(400, "BadRequest", "field label not supported: spec.containers.name")),
        ("field value unescaped =", format!("{w}?resourceVersion=0&fieldSelector=metadata.name%3Da%3Db"), None, Failure(400, "BadRequest", "invalid field selector: unescaped character in value: 61")),
        ("field value bad escape", format!("{w}?resourceVersion=0&fieldSelector=metadata.name%3Da%5Cx"), None, Failure(400, "BadRequest", "invalid field selector: invalid escape sequence: \\x")),
        ("field malformed", format!("{w}?fieldSelector=metadata.name%20in%20(a)"), None, Failure(400, "BadRequest", "invalid selector: 'metadata.name in (a)'")),
        ("missing namespace lists empty", "/apis/example.com/v1/namespaces/nope/widgets?resourceVersion=0".into(), None, Status(200)),
        ("cluster-scoped under namespace", "/apis/example.com/v1/namespaces/ns-a/gizmos?resourceVersion=0".into(), None, Status(404)),
        ("not acceptable", w.into(), Some("text/html"), Failure(406, "NotAcceptable", "only the following media types are accepted")),
        ("get missing", format!("{w}/does-not-exist"), None, Failure(404, "NotFound", "widgets.example.com \"does-not-exist\" not found")),
        ("get missing RV=0", format!("{w}/does-not-exist?resourceVersion=0"), None, Failure(404, "NotFound", "widgets.example.com \"does-not-exist\" not found")),
        ("get future RV", format!("{w}/w-001?resourceVersion={future}"), None, Failure(504, "Timeout", "Too large resource version")),
        ("watch RV=0 one object", format!("{w}?watch=1&resourceVersion=0&fieldSelector=metadata.name%3Dw-001&timeoutSeconds=1"), None, Events(&["ADDED"])),
        ("watch from current, idle", format!("{w}?watch=1&resourceVersion={cur}&timeoutSeconds=1"), None, Events(&[])),
        ("watch RV=-5", format!("{w}?watch=1&resourceVersion=-5"), None, Failure(500, "", "strconv.ParseUint: parsing \"-5\": invalid syntax")),
        ("watch RV=abc", format!("{w}?watch=1&resourceVersion=abc"), None, Failure(500, "", "parsing \"abc\"")),
        ("watch rvMatch without sendInitialEvents", format!("{w}?watch=1&resourceVersion=0&resourceVersionMatch=NotOlderThan"), None, Failure(422, "Invalid", "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided")),
        ("watch sendInitialEvents without rvMatch", format!("{w}?watch=1&sendInitialEvents=true"), None, Failure(422, "Invalid", "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")),
        ("streaming list", format!("{w}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&fieldSelector=metadata.name%3Dw-001&timeoutSeconds=1"), None, Events(&["ADDED", "BOOKMARK"])),
        ("streaming list of a future version", format!("{w}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion={future}&timeoutSeconds=10"), None, Events(&["ERROR"])),
    ]
}

/// Whether `r` is what `want` says; why not.
fn meets(r: &Resp, want: &Want) -> Result<(), String> {
    let got = format!(
        "{} {}",
        r.status,
        r.text().chars().take(400).collect::<String>()
    );
    match want {
        Want::Status(s) if r.status == *s => Ok(()),
        Want::Failure(code, reason, msg) if r.status == *code => {
            let s: Value = serde_json::from_slice(&r.body).map_err(|_| got.clone())?;
            let ok = s["kind"] == "Status"
                && s["status"] == "Failure"
                && s["code"] == *code
                && s.get("reason").and_then(Value::as_str).unwrap_or("") == *reason
                && s["message"].as_str().is_some_and(|m| m.contains(msg));
            if ok { Ok(()) } else { Err(got) }
        }
        Want::Events(types) if r.status == 200 => {
            let seen: Vec<String> = events(r, false).into_iter().map(|e| e.0).collect();
            if seen == *types {
                Ok(())
            } else {
                Err(format!("events {seen:?}"))
            }
        }
        _ => Err(got),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn should_hold_the_conformance_expectations_against_kube_apiserver_1_36() {
    let Some(mut rig) = rig("kube136 conformance expectations", 30).await else {
        return;
    };
    let cur = rig.last();
    let path = "/apis/example.com/v1/namespaces/ns-b/widgets?limit=2";
    let token = rig
        .kube
        .send("GET", path, &[], None, Duration::from_secs(10))
        .await
        .json()["metadata"]["continue"]
        .as_str()
        .unwrap()
        .to_string();
    let cases = conformance_cases(cur, &token);
    let asked = futures_util::future::join_all(cases.iter().map(|(_, path, accept, _)| {
        rig.ask(path, accept.unwrap_or(JSON), false, Duration::from_secs(20))
    }))
    .await;
    for ((name, path, _, want), (theirs, ours)) in cases.iter().zip(asked) {
        rig.count(&ours);
        if let Err(e) = meets(&theirs, want) {
            rig.fail(format!("{name} ({path}): kube-apiserver 1.36 answers {e}"));
        }
        if let Err(e) = meets(&ours, want) {
            rig.fail(format!("{name} ({path}): r8s answers {e}"));
        }
    }
    rig.verdict("conformance expectations");
}
