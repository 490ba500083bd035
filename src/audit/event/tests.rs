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

#[test]
fn should_find_every_word_that_may_need_escaping() {
    // Seeded: words of bytes drawn from the specials and their neighbours,
    // and of any bytes at all.
    let mut rng = fastrand::Rng::with_seed(54);
    let near = [
        0x00, 0x1f, 0x20, 0x21, b'"', b'\\', b'<', b'>', b'&', 0xE2, 0xE1, 0xE3, 0x7f, 0x80, 0xff,
        b'a', b'=', b'?', b'%', b';', b'[', b']',
    ];
    for round in 0..200_000 {
        let bytes: [u8; 8] = std::array::from_fn(|_| {
            if round % 2 == 0 {
                near[rng.usize(..near.len())]
            } else {
                rng.u8(..)
            }
        });
        let word = u64::from_le_bytes(bytes);
        for (quoted, table) in [(true, &SPECIAL[0]), (false, &SPECIAL[1])] {
            let any = bytes.iter().any(|b| table[usize::from(*b)]);
            assert_eq!(may_escape(word, quoted), any, "{bytes:?} quoted={quoted}");
        }
    }
}

#[test]
fn should_escape_long_strings_as_byte_by_byte() {
    let mut rng = fastrand::Rng::with_seed(2028);
    let pieces = [
        "a",
        "<",
        ">",
        "&",
        "\"",
        "\\",
        "\n",
        "\u{1}",
        "\u{2028}",
        "\u{2029}",
        "é",
        "€",
        "xyzxyzxyz",
    ];
    for _ in 0..20_000 {
        let s: String = (0..rng.usize(0..40))
            .map(|_| pieces[rng.usize(..pieces.len())])
            .collect();
        let mut fast = Vec::new();
        go_string(&mut fast, &s);
        let mut slow = vec![b'"'];
        for c in s.chars() {
            let mut one = Vec::new();
            go_escaped(&mut one, c.encode_utf8(&mut [0; 4]).as_bytes(), true);
            slow.extend_from_slice(&one);
        }
        slow.push(b'"');
        assert_eq!(
            String::from_utf8(fast).unwrap(),
            String::from_utf8(slow).unwrap(),
            "{s:?}"
        );
    }
}

#[test]
fn should_write_times_as_rfc_3339_with_microseconds() {
    let mut rng = fastrand::Rng::with_seed(1970);
    let mut at = vec![
        SystemTime::UNIX_EPOCH,
        at("2000-02-29T23:59:59.999999Z"),
        at("2026-11-28T15:17:01.255109Z"),
        at("2100-03-01T00:00:00Z"),
        at("9999-12-31T23:59:59.999999Z"),
    ];
    for _ in 0..100_000 {
        let us = rng.u64(..253_402_300_800_000_000);
        at.push(SystemTime::UNIX_EPOCH + std::time::Duration::from_micros(us));
    }
    for t in at {
        let mut out = Vec::new();
        rfc3339_micros(&mut out, t);
        let want = humantime::format_rfc3339_micros(t).to_string();
        assert_eq!(String::from_utf8(out).unwrap(), want);
    }
}

#[test]
fn should_stamp_request_received_with_its_arrival_and_write_any_code() {
    let t = at("2026-11-28T15:17:01.000042Z");
    let meta = Meta {
        id: "x",
        level: Level::Metadata,
        request_uri: "/api",
        verb: "get",
        user: None,
        impersonated: None,
        source_ips: &[],
        user_agent: "",
        object: None,
        received: t,
    };
    let frozen = Frozen::new(&meta);
    for code in [0, 7, 42, 404, 65535] {
        let mut out = Vec::new();
        let status = ResponseStatus::code(code);
        write(
            &mut out,
            &frozen,
            &Stamp {
                stage: Stage::RequestReceived,
                status: Some(&status),
                response_object: None,
                at: t,
                annotations: &[],
            },
        );
        let line = String::from_utf8(out).unwrap();
        assert!(line.contains(&format!("\"code\":{code}}}")), "{line}");
        assert!(
            line.ends_with(r#""requestReceivedTimestamp":"2026-11-28T15:17:01.000042Z","stageTimestamp":"2026-11-28T15:17:01.000042Z"}
"#),
            "{line}"
        );
    }
}

#[test]
fn should_write_addresses_as_display_does() {
    // Seeded: every octet's width, and the edges.
    let mut rng = fastrand::Rng::with_seed(541);
    let mut ips: Vec<IpAddr> = vec![
        "0.0.0.0".parse().unwrap(),
        "255.255.255.255".parse().unwrap(),
        "10.0.100.9".parse().unwrap(),
        "::1".parse().unwrap(),
        "2001:db8::ff00:42:8329".parse().unwrap(),
    ];
    ips.extend((0..10_000).map(|_| IpAddr::from(rng.u32(..).to_be_bytes())));
    for ip in ips {
        let mut out = Vec::new();
        address(&mut out, ip);
        assert_eq!(String::from_utf8(out).unwrap(), ip.to_string());
    }
}
