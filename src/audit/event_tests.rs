//! Events byte for byte as the 1.36 kit's apiserver wrote them (its lines
//! below, recorded from its `--audit-log-path`).

use std::collections::BTreeMap;

use super::*;
use crate::audit::policy::{Level, Stage};

fn at(s: &str) -> SystemTime {
    humantime::parse_rfc3339(s).unwrap()
}

fn admin() -> UserInfo {
    UserInfo {
        name: "admin".into(),
        uid: "admin".into(),
        groups: vec!["system:masters".into(), "system:authenticated".into()],
        extra: BTreeMap::new(),
    }
}

#[test]
fn should_write_a_list_event_as_the_apiserver_does() {
    let want = r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"eefeecac-88fa-4abb-8686-52e695d8e03b","stage":"ResponseStarted","requestURI":"/apis/example.com/v1/namespaces/default/widgets?watch=1\u0026resourceVersion=0\u0026timeoutSeconds=1","verb":"watch","user":{"username":"admin","uid":"admin","groups":["system:masters","system:authenticated"]},"sourceIPs":["127.0.0.1"],"userAgent":"curl/7.88.1","objectRef":{"resource":"widgets","namespace":"default","apiGroup":"example.com","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-28T15:17:01.255109Z","stageTimestamp":"2026-11-28T15:17:01.255525Z","annotations":{"authorization.k8s.io/decision":"allow","authorization.k8s.io/reason":""}}"#;
    let admin = admin();
    let meta = Meta {
        id: "eefeecac-88fa-4abb-8686-52e695d8e03b",
        level: Level::Metadata,
        request_uri: "/apis/example.com/v1/namespaces/default/widgets?watch=1&resourceVersion=0&timeoutSeconds=1",
        verb: "watch",
        user: Some(&admin),
        impersonated: None,
        source_ips: &["127.0.0.1".parse().unwrap()],
        user_agent: "curl/7.88.1",
        object: Some(ObjectRef {
            resource: "widgets",
            namespace: "default",
            api_group: "example.com",
            api_version: "v1",
            ..Default::default()
        }),
        received: at("2026-11-28T15:17:01.255109Z"),
    };
    let mut out = Vec::new();
    write(
        &mut out,
        &Frozen::new(&meta),
        &Stamp {
            stage: Stage::ResponseStarted,
            status: Some(&ResponseStatus::code(200)),
            response_object: None,
            at: at("2026-11-28T15:17:01.255525Z"),
            annotations: &[
                ("authorization.k8s.io/decision", "allow"),
                ("authorization.k8s.io/reason", ""),
            ],
        },
    );
    assert_eq!(String::from_utf8(out).unwrap(), format!("{want}\n"));
}

#[test]
fn should_write_a_failure_and_an_unauthenticated_user_as_the_apiserver_does() {
    let want = r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"f81fab5d-fc21-478e-a497-24ee0a06b307","stage":"ResponseStarted","requestURI":"/apis/example.com/v1/namespaces/default/widgets?resourceVersion=0","verb":"list","user":{},"sourceIPs":["127.0.0.1"],"userAgent":"curl/7.88.1","objectRef":{"resource":"widgets","namespace":"default","apiGroup":"example.com","apiVersion":"v1"},"responseStatus":{"metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401},"requestReceivedTimestamp":"2026-11-28T15:17:01.192254Z","stageTimestamp":"2026-11-28T15:17:01.234452Z"}"#;
    let meta = Meta {
        id: "f81fab5d-fc21-478e-a497-24ee0a06b307",
        level: Level::Metadata,
        request_uri: "/apis/example.com/v1/namespaces/default/widgets?resourceVersion=0",
        verb: "list",
        user: None,
        impersonated: None,
        source_ips: &["127.0.0.1".parse().unwrap()],
        user_agent: "curl/7.88.1",
        object: Some(ObjectRef {
            resource: "widgets",
            namespace: "default",
            api_group: "example.com",
            api_version: "v1",
            ..Default::default()
        }),
        received: at("2026-11-28T15:17:01.192254Z"),
    };
    let status = ResponseStatus {
        code: 401,
        status: "Failure",
        message: "Unauthorized".into(),
        reason: "Unauthorized",
        details: None,
    };
    let mut out = Vec::new();
    write(
        &mut out,
        &Frozen::new(&meta),
        &Stamp {
            stage: Stage::ResponseStarted,
            status: Some(&status),
            response_object: None,
            at: at("2026-11-28T15:17:01.234452Z"),
            annotations: &[],
        },
    );
    assert_eq!(String::from_utf8(out).unwrap(), format!("{want}\n"));
}

#[test]
fn should_escape_strings_as_go_does() {
    let mut out = Vec::new();
    go_string(&mut out, "a<b>&c\"d\\e\n\u{1}\u{2028}é");
    assert_eq!(
        String::from_utf8(out).unwrap(),
        r#""a\u003cb\u003e\u0026c\"d\\e\n\u0001\u2028é""#
    );
    // An answer's JSON as `responseObject`: only what Go adds to valid JSON.
    let mut raw = Vec::new();
    go_escaped(
        &mut raw,
        "{\"a\":\"<x> & \\\"\u{2029}\u{2013}\"}".as_bytes(),
        false,
    );
    assert_eq!(
        String::from_utf8(raw).unwrap(),
        r#"{"a":"\u003cx\u003e \u0026 \"\u2029–"}"#
    );
}

#[test]
fn should_list_source_ips_as_the_apiserver_does() {
    let mut h = HeaderMap::new();
    let peer: IpAddr = "10.0.0.9".parse().unwrap();
    assert_eq!(source_ips(&h, peer), vec![peer]);
    h.insert("x-forwarded-for", "1.2.3.4, bad, 10.0.0.9".parse().unwrap());
    h.insert("x-real-ip", "1.2.3.4".parse().unwrap());
    let want: Vec<IpAddr> = vec!["1.2.3.4".parse().unwrap(), peer];
    assert_eq!(source_ips(&h, peer), want);
    let mapped: IpAddr = "::ffff:10.0.0.8".parse().unwrap();
    h.remove("x-forwarded-for");
    let got = source_ips(&h, mapped);
    assert_eq!(got[1].to_string(), "10.0.0.8");
}

#[test]
fn should_make_random_version_4_ids() {
    let a = new_id();
    assert_eq!(a.len(), 36);
    assert_eq!(&a[14..15], "4");
    assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"), "{a}");
    assert_ne!(a, new_id());
    let mut h = HeaderMap::new();
    h.insert("user-agent", "x".repeat(1100).parse().unwrap());
    assert_eq!(user_agent(&h), format!("{}...TRUNCATED", "x".repeat(1024)));
}
