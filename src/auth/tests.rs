//! `auth`'s unit tests: identity headers, bearer tokens as the apiserver reads them.
use super::*;
use crate::upstream::Creds;
use http::HeaderValue;
use std::collections::BTreeMap;

/// Forwarding as the current apiserver reads it: r8s is `own` upstream (a
/// certificate's user) and may impersonate where `impersonate`.
fn how(own: Option<&UserInfo>, impersonate: bool) -> Forwarding {
    Forwarding {
        filter: Filter::CURRENT,
        own: own.cloned().map(Arc::new),
        impersonate,
    }
}

fn values(h: &HeaderMap, name: &str) -> Vec<String> {
    h.get_all(name)
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect()
}

#[test]
fn should_replace_identity_headers_when_impersonating() {
    let mut h = HeaderMap::new();
    h.insert("impersonate-user", HeaderValue::from_static("root"));
    h.insert("x-remote-user", HeaderValue::from_static("root"));
    h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer x"));
    h.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
    let mut extra = BTreeMap::new();
    extra.insert(
        "scopes.example/Key".to_string(),
        vec!["a".into(), "b".into()],
    );
    let user = UserInfo {
        name: "carol".into(),
        uid: "u-1".into(),
        groups: vec!["devs".into(), "system:authenticated".into()],
        extra,
    };
    assert_eq!(
        Caller::Certificate {
            user: Arc::new(user),
            by: None
        }
        .forward_as(&mut h, &how(None, true)),
        Ok(Creds::Own)
    );
    assert_eq!(values(&h, "impersonate-user"), vec!["carol"]);
    assert_eq!(
        values(&h, "impersonate-group"),
        vec!["devs", "system:authenticated"]
    );
    assert_eq!(values(&h, "impersonate-uid"), vec!["u-1"]);
    // The key's upper-case K encoded, so that the filter's lower-casing
    // does not make it another key.
    assert_eq!(
        values(&h, "impersonate-extra-scopes.example%2f%4bey"),
        vec!["a", "b"]
    );
    assert!(h.get("x-remote-user").is_none() && h.get(header::AUTHORIZATION).is_none());
    assert!(h.get(header::ACCEPT).is_some());
}

/// Case by case, kube-apiserver's bearer-token authenticator
/// (`k8s.io/apiserver/pkg/authentication/request/bearertoken`, its tests).
#[test]
fn should_read_bearer_tokens_as_the_apiserver_does() {
    let read = |values: &[&[u8]]| {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(header::AUTHORIZATION, HeaderValue::from_bytes(v).unwrap());
        }
        match bearer_token(&h) {
            Bearer::Token(t) => Ok(t.to_string()),
            Bearer::None => Err("none"),
            Bearer::Unreadable => Err("unreadable"),
        }
    };
    let tok = |t: &str| Ok(t.to_string());
    assert_eq!(read(&[]), Err("none"));
    assert_eq!(read(&[b"Bearer abc"]), tok("abc"));
    assert_eq!(read(&[b"bEaReR abc"]), tok("abc"));
    assert_eq!(read(&[b"  Bearer abc  "]), tok("abc"));
    // Two spaces: the token is the empty second part (anonymous).
    assert_eq!(read(&[b"Bearer  abc"]), Err("none"));
    assert_eq!(read(&[b"Bearer abc def"]), tok("abc"));
    assert_eq!(read(&[b"Bearer"]), Err("none"));
    assert_eq!(read(&[b"Bearer "]), Err("none"));
    assert_eq!(read(&[b"Basic YWxhZGRpbjpvcGVuc2VzYW1l"]), Err("none"));
    assert_eq!(read(&[b"Bearer\tabc"]), Err("none"));
    assert_eq!(read(&[b""]), Err("none"));
    // Only the first header counts (Go's Header.Get).
    assert_eq!(read(&[b"Basic x", b"Bearer abc"]), Err("none"));
    assert_eq!(read(&[b"Bearer abc", b"Bearer def"]), tok("abc"));
    assert_eq!(read(&[b"Bearer \xe2\x82\xac"]), Err("unreadable"));
    assert_eq!(read(&[b"Basic \xe2\x82\xac"]), Err("none"));
    let mut ws = HeaderMap::new();
    ws.insert(
        header::SEC_WEBSOCKET_PROTOCOL,
        HeaderValue::from_static("v5.channel.k8s.io, base64url.bearer.authorization.k8s.io.dG9r"),
    );
    assert!(websocket_token(&ws));
    assert!(!websocket_token(&HeaderMap::new()));
}

#[test]
fn should_forward_clients_with_their_own_credentials() {
    let mut h = HeaderMap::new();
    h.insert("impersonate-user", HeaderValue::from_static("root"));
    let c = Caller::Client {
        user: Arc::new(UserInfo::anonymous()),
        upstream_only: true,
    };
    assert_eq!(c.forward_as(&mut h, &how(None, true)), Ok(Creds::Client));
    assert_eq!(values(&h, "impersonate-user"), vec!["root"]);
    assert!(!c.cacheable());
    assert_eq!(
        Caller::Trusted.forward_as(&mut HeaderMap::new(), &how(None, false)),
        Ok(Creds::Own)
    );
}

/// A node's kubelet behind its node-local r8s, which presents the node's
/// own certificate upstream: the kubelet's requests go as r8s, nothing
/// added (even without the grant to impersonate); another node's are
/// refused where r8s may not impersonate, and impersonated where it may;
/// r8s's own identity impersonating someone goes as it asked.
#[test]
fn should_pass_r8s_own_identity_as_itself_and_no_other_without_the_grant() {
    let node = |name: &str, digest: &str| {
        let mut extra = BTreeMap::new();
        extra.insert(
            crate::tls::x509::CREDENTIAL_ID.to_string(),
            vec![format!("X509SHA256={digest}")],
        );
        UserInfo {
            name: format!("system:node:{name}"),
            uid: String::new(),
            groups: vec!["system:nodes".into(), "system:authenticated".into()],
            extra,
        }
    };
    // The kubelet's rotated certificate: another digest, the same node.
    let (own, kubelet, other) = (node("n1", "aa"), node("n1", "bb"), node("n2", "cc"));
    let cert = |user: &UserInfo, by: Option<&UserInfo>| Caller::Certificate {
        user: Arc::new(user.clone()),
        by: by.cloned().map(Arc::new),
    };
    for impersonate in [false, true] {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer x"));
        h.insert("x-remote-user", HeaderValue::from_static("root"));
        let c = cert(&kubelet, None);
        assert_eq!(
            c.forward_as(&mut h, &how(Some(&own), impersonate)),
            Ok(Creds::Own)
        );
        assert!(
            h.is_empty(),
            "nothing of the client's identity, nothing added: {h:?}"
        );
    }
    let mut h = HeaderMap::new();
    let refused = cert(&other, None)
        .forward_as(&mut h, &how(Some(&own), false))
        .unwrap_err();
    assert_eq!(refused.code, 403);
    assert!(
        refused.message.contains("system:node:n2")
            && refused
                .message
                .contains("auth.impersonate_certificate_clients"),
        "{}",
        refused.message
    );
    assert!(h.is_empty());
    assert_eq!(
        cert(&other, None).forward_as(&mut h, &how(Some(&own), true)),
        Ok(Creds::Own)
    );
    assert_eq!(values(&h, "impersonate-user"), vec!["system:node:n2"]);
    // Without a certificate of its own, r8s is nobody's identity.
    let mut h = HeaderMap::new();
    assert!(
        cert(&kubelet, None)
            .forward_as(&mut h, &how(None, false))
            .is_err()
    );
    // r8s's own identity impersonating: as it asked, judged upstream as
    // that identity's own request.
    let mut h = HeaderMap::new();
    assert_eq!(
        cert(&other, Some(&kubelet)).forward_as(&mut h, &how(Some(&own), false)),
        Ok(Creds::Own)
    );
    assert_eq!(values(&h, "impersonate-user"), vec!["system:node:n2"]);
    assert!(!caller::same_principal(&own, &other));
    let mut renamed = own.clone();
    renamed.groups.push("system:masters".into());
    assert!(!caller::same_principal(&own, &renamed), "groups count");
}

#[test]
fn should_read_certificates_as_the_upstreams_version_does() {
    let reading = |body: &[u8]| x509_reading(KubeVersion::parse(body));
    assert_eq!(
        reading(br#"{"major":"1","minor":"21","goVersion":"go1.21.13"}"#),
        Reading {
            credential_id: false,
            uid: false,
            strings: GoStrings::Raw
        }
    );
    let v132 = reading(br#"{"major":"1","minor":"32","goVersion":"go1.23.4"}"#);
    assert!(v132.credential_id && !v132.uid && v132.strings == GoStrings::Raw);
    let v135 = reading(br#"{"major":"1","minor":"35","goVersion":"go1.25.1"}"#);
    assert!(v135.credential_id && v135.uid && v135.strings == GoStrings::Latin1);
    assert_eq!(
        reading(br#"{"major":"1","minor":"36"}"#).strings,
        GoStrings::Unknown
    );
    assert_eq!(x509_reading(None), Reading::CURRENT);
}
