//! Fuzz targets of who a caller is: a client certificate's subject, read as
//! Go's `parseName` and the x509 authenticator read it, and `Impersonate-*`
//! headers, read as the apiserver's filter reads them and on their way out.

use http::{HeaderMap, HeaderName, HeaderValue};
use r8s::auth::impersonation::{self, Asked, Filter, Forwarded};
use r8s::tls::x509::{CertUser, GoStrings, Reading, Subject};

use super::target::{Target, toks};

/// A DER element.
fn tlv(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    if contents.len() < 128 {
        out.push(contents.len() as u8);
    } else {
        out.extend([0x82, (contents.len() >> 8) as u8, contents.len() as u8]);
    }
    out.extend_from_slice(contents);
    out
}

/// A `Name` of single-valued RDNs: (OID contents, tag, value).
fn name(attrs: &[(&[u8], u8, &[u8])]) -> Vec<u8> {
    let rdns: Vec<u8> = attrs
        .iter()
        .flat_map(|(oid, tag, v)| {
            let atav = [tlv(0x06, oid), tlv(*tag, v)].concat();
            tlv(0x31, &tlv(0x30, &atav))
        })
        .collect();
    tlv(0x30, &rdns)
}

/// The subject parsed, then read by every reading: a user is never named
/// by an empty CommonName, and always in one of the authenticated groups
/// unless named `system:anonymous`.
fn subject(input: &[u8]) {
    let Ok(s) = Subject::parse(input) else {
        return;
    };
    for strings in [GoStrings::Latin1, GoStrings::Raw, GoStrings::Unknown] {
        for (credential_id, uid) in [(false, false), (true, true)] {
            let reading = Reading {
                credential_id,
                uid,
                strings,
            };
            if let CertUser::User(u) = s.user("00", reading) {
                assert!(!u.name.is_empty(), "a user named by an empty CN");
                assert!(
                    u.name == "system:anonymous"
                        || u.groups
                            .iter()
                            .any(|g| g == "system:authenticated" || g == "system:unauthenticated"),
                    "{u:?} in no authenticated group"
                );
            }
        }
    }
}

/// Headers as `name\0value\0name\0value...`: read by both filters; an
/// identity asked for, made into its user and sent on, reads back as that
/// very user (or is refused).
fn headers(input: &[u8]) {
    let mut h = HeaderMap::new();
    let mut parts = input.split(|b| *b == 0);
    while let (Some(k), Some(v)) = (parts.next(), parts.next()) {
        if let (Ok(k), Ok(v)) = (HeaderName::from_bytes(k), HeaderValue::from_bytes(v)) {
            h.append(k, v);
        }
    }
    let old = Filter {
        uid: false,
        bad_request: false,
    };
    for filter in [Filter::CURRENT, old] {
        let Asked::As(w) = impersonation::read(&h, filter) else {
            continue;
        };
        let _ = impersonation::checks(&w);
        let user = impersonation::acting_as(w);
        if let Ok(sent) = (Forwarded {
            user: &user,
            filter,
        })
        .headers()
        {
            match impersonation::read(&sent, filter) {
                Asked::As(again) => assert_eq!(impersonation::acting_as(again), user),
                other => panic!("{user:?} sent as {sent:?}, read back as {other:?}"),
            }
        }
    }
}

/// The two targets.
pub fn targets() -> Vec<Target> {
    const CN: &[u8] = &[0x55, 0x04, 0x03];
    const O: &[u8] = &[0x55, 0x04, 0x0a];
    const UID: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x83, 0xc2, 0x53, 0x02];
    vec![
        Target {
            name: "certificate subject (Go's parseName, the x509 authenticator)",
            seeds: vec![
                name(&[(O, 12, b"system:masters"), (CN, 12, b"admin")]),
                name(&[(CN, 12, b"dave"), (CN, 19, b"alice")]),
                name(&[(O, 12, b" system:masters"), (CN, 20, b"d\xe9ve")]),
                name(&[
                    (CN, 30, b"\0d\0a\0v\0e"),
                    (UID, 12, b"u-1"),
                    (UID, 22, b"u-2"),
                ]),
                name(&[(CN, 12, b""), (O, 18, b"12 34")]),
            ],
            dict: vec![
                vec![0x30],
                vec![0x31],
                vec![0x06, 0x03, 0x55, 0x04, 0x03],
                vec![0x0c],
                vec![0x13],
                vec![0x14],
                vec![0x1e],
                vec![0x16],
                vec![0x12],
                vec![0x1c],
                vec![0x81],
                vec![0x82],
                vec![0x80],
                vec![0xff],
                vec![0x00, 0x00],
                vec![0xd8, 0x00],
            ],
            run: subject,
        },
        Target {
            name: "impersonation headers (the filter's reading, the way out)",
            seeds: toks(&[
                "impersonate-user\0carol\0impersonate-group\0devs",
                "impersonate-user\0system:serviceaccount:ns:sa\0impersonate-uid\0u-1\0impersonate-uid\0u-2",
                "impersonate-user\0system:anonymous\0impersonate-extra-%53cope\0x\0impersonate-extra-a%2fb\0y",
                "impersonate-user\0\0impersonate-group\0system:unauthenticated",
                "impersonate-user\0 d\tave \0impersonate-foo\0x",
            ]),
            dict: toks(&[
                "impersonate-user",
                "impersonate-group",
                "impersonate-uid",
                "impersonate-extra-",
                "\0",
                "%",
                "%2f",
                "%zz",
                "%C3%A4",
                " ",
                "\t",
                "system:",
                "serviceaccount:",
                "anonymous",
                "unauthenticated",
                "authenticated",
                ":",
                "\u{e4}",
                "\u{7f}",
                "A",
            ]),
            run: headers,
        },
    ]
}
