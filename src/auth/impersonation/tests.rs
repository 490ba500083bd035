//! The impersonation filter's own table (`impersonation_test.go`,
//! `TestImpersonationFilter`, kube-apiserver 1.36) with its authorizer, the
//! differences the attacker's suite found, and the way out.

use super::*;

/// `impersonateAuthorizer` of `impersonation_test.go`: may `u` do `a`?
fn authorize(u: &UserInfo, a: &Attributes) -> bool {
    let g = |i: usize| u.groups.get(i).map(String::as_str);
    let (verb, res, sub, name, group) = (
        a.scope.verb,
        a.resource.as_str(),
        a.scope.subresource.as_str(),
        a.scope.name.as_str(),
        a.group.as_str(),
    );
    let imp = verb == "impersonate";
    match u.name.as_str() {
        "system:admin" => return true,
        "tester" | "deny-me" => return false,
        _ => {}
    }
    (g(0) == Some("wheel") && imp && res == "users")
        || (g(0) == Some("sa-impersonater") && imp && res == "serviceaccounts")
        || (g(0) == Some("regular-impersonater") && imp && res == "users")
        || (g(1) == Some("group-impersonater") && imp && res == "groups")
        || (g(1) == Some("extra-setter-scopes") && imp && res == "userextras" && sub == "scopes")
        || matches!(g(1), Some("escaped-scopes" | "almost-escaped-scopes"))
        || (g(1) == Some("extra-setter-particular-scopes")
            && imp
            && res == "userextras"
            && sub == "scopes"
            && name == "scope-a"
            && group == "authentication.k8s.io")
        || (g(1) == Some("extra-setter-project")
            && imp
            && res == "userextras"
            && sub == "project"
            && group == "authentication.k8s.io")
        || (g(0) == Some("everything-impersonater")
            && imp
            && ((res == "users" && group.is_empty())
                || (res == "uids" && name == "some-uid" && group == "authentication.k8s.io")
                || (res == "groups" && group.is_empty())
                || (res == "userextras" && sub == "scopes" && group == "authentication.k8s.io")))
}

fn user(name: &str, groups: &[&str]) -> UserInfo {
    UserInfo {
        name: name.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        ..Default::default()
    }
}

/// The filter over `headers` for `requestor`: the status, and who the
/// request then acts as.
fn filter(requestor: &UserInfo, headers: &[(&str, &[u8])]) -> (u16, UserInfo) {
    let mut h = HeaderMap::new();
    for (k, v) in headers {
        h.append(
            HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_bytes(v).unwrap(),
        );
    }
    match read(&h, Filter::CURRENT) {
        Asked::Nothing => (200, requestor.clone()),
        Asked::WithoutUser(_) => (400, requestor.clone()),
        Asked::Unreadable(_) => (403, requestor.clone()),
        Asked::As(w) => {
            if checks(&w).iter().all(|a| authorize(requestor, a)) {
                (200, acting_as(w))
            } else {
                (403, requestor.clone())
            }
        }
    }
}

fn with_extra(mut u: UserInfo, extra: &[(&str, &[&str])]) -> UserInfo {
    for (k, vs) in extra {
        u.extra
            .insert(k.to_string(), vs.iter().map(|v| v.to_string()).collect());
    }
    u
}

const U: &str = "impersonate-user";
const G: &str = "impersonate-group";
const I: &str = "impersonate-uid";

#[test]
fn should_impersonate_as_the_filters_own_table_does() {
    let tester = user("tester", &[]);
    let wheel = user("dev", &["wheel"]);
    let groups = user("dev", &["wheel", "group-impersonater"]);
    let admin = user("system:admin", &[]);
    let everything = user("dev", &["everything-impersonater"]);
    let scopes = ("impersonate-extra-scopes", b"scope-a".as_slice());
    let scope_b = ("impersonate-extra-scopes", b"scope-b".as_slice());
    #[allow(clippy::type_complexity)]
    let cases: Vec<(&str, UserInfo, Vec<(&str, &[u8])>, u16, UserInfo)> = vec![
        (
            "not-impersonating",
            tester.clone(),
            vec![],
            200,
            tester.clone(),
        ),
        (
            "impersonating-error",
            tester.clone(),
            vec![(U, b"anyone")],
            403,
            tester.clone(),
        ),
        (
            "impersonating-group-without-user",
            tester.clone(),
            vec![(G, b"some-group")],
            400,
            tester.clone(),
        ),
        (
            "impersonating-extra-without-user",
            tester.clone(),
            vec![scopes],
            400,
            tester.clone(),
        ),
        (
            "impersonating-uid-without-user",
            tester.clone(),
            vec![(I, b"some-uid")],
            400,
            tester.clone(),
        ),
        (
            "disallowed-group",
            wheel.clone(),
            vec![(U, b"system:admin"), (G, b"some-group")],
            403,
            wheel.clone(),
        ),
        (
            "allowed-group",
            groups.clone(),
            vec![(U, b"system:admin"), (G, b"some-group")],
            200,
            user("system:admin", &["some-group", "system:authenticated"]),
        ),
        (
            "disallowed-userextra-1",
            wheel.clone(),
            vec![(U, b"system:admin"), (G, b"some-group"), scopes],
            403,
            wheel.clone(),
        ),
        (
            "disallowed-userextra-2",
            user("dev", &["wheel", "extra-setter-project"]),
            vec![(U, b"system:admin"), (G, b"some-group"), scopes],
            403,
            user("dev", &["wheel", "extra-setter-project"]),
        ),
        (
            "disallowed-userextra-3",
            user("dev", &["wheel", "extra-setter-particular-scopes"]),
            vec![(U, b"system:admin"), (G, b"some-group"), scopes, scope_b],
            403,
            user("dev", &["wheel", "extra-setter-particular-scopes"]),
        ),
        (
            "allowed-userextras",
            user("dev", &["wheel", "extra-setter-scopes"]),
            vec![(U, b"system:admin"), scopes, scope_b],
            200,
            with_extra(
                user("system:admin", &["system:authenticated"]),
                &[("scopes", &["scope-a", "scope-b"])],
            ),
        ),
        (
            "percent-escaped-userextras",
            user("dev", &["wheel", "escaped-scopes"]),
            vec![
                (U, b"system:admin"),
                (
                    "impersonate-extra-example.com%2fescaped%e1%9b%84scopes",
                    b"scope-a",
                ),
                (
                    "impersonate-extra-example.com%2fescaped%e1%9b%84scopes",
                    b"scope-b",
                ),
            ],
            200,
            with_extra(
                user("system:admin", &["system:authenticated"]),
                &[("example.com/escapedᛄscopes", &["scope-a", "scope-b"])],
            ),
        ),
        (
            "almost-percent-escaped-userextras",
            user("dev", &["wheel", "almost-escaped-scopes"]),
            vec![
                (U, b"system:admin"),
                ("impersonate-extra-almost%zzpercent%xxencoded", b"scope-a"),
                ("impersonate-extra-almost%zzpercent%xxencoded", b"scope-b"),
            ],
            200,
            with_extra(
                user("system:admin", &["system:authenticated"]),
                &[("almost%zzpercent%xxencoded", &["scope-a", "scope-b"])],
            ),
        ),
        (
            "allowed-users-impersonation",
            user("dev", &["regular-impersonater"]),
            vec![(U, b"tester")],
            200,
            user("tester", &["system:authenticated"]),
        ),
        (
            "disallowed-impersonating",
            user("dev", &["sa-impersonater"]),
            vec![(U, b"tester")],
            403,
            user("dev", &["sa-impersonater"]),
        ),
        (
            "allowed-sa-impersonating",
            user("dev", &["sa-impersonater"]),
            vec![(U, b"system:serviceaccount:foo:default")],
            200,
            user(
                "system:serviceaccount:foo:default",
                &[
                    "system:serviceaccounts",
                    "system:serviceaccounts:foo",
                    "system:authenticated",
                ],
            ),
        ),
        (
            "anonymous-username-prevents-adding-authenticated-group",
            admin.clone(),
            vec![(U, b"system:anonymous")],
            200,
            user("system:anonymous", &["system:unauthenticated"]),
        ),
        (
            "unauthenticated-group-prevents-adding-authenticated-group",
            admin.clone(),
            vec![(U, b"unknown"), (G, b"system:unauthenticated")],
            200,
            user("unknown", &["system:unauthenticated"]),
        ),
        (
            "unauthenticated-group-prevents-double-adding-authenticated-group",
            admin.clone(),
            vec![(U, b"unknown"), (G, b"system:authenticated")],
            200,
            user("unknown", &["system:authenticated"]),
        ),
        (
            "specified-authenticated-group-prevents-double-adding-authenticated-group",
            groups.clone(),
            vec![
                (U, b"system:admin"),
                (G, b"some-group"),
                (G, b"system:authenticated"),
            ],
            200,
            user("system:admin", &["some-group", "system:authenticated"]),
        ),
        (
            "anonymous-user-prevents-double-adding-unauthenticated-group",
            admin.clone(),
            vec![(U, b"system:anonymous"), (G, b"system:unauthenticated")],
            200,
            user("system:anonymous", &["system:unauthenticated"]),
        ),
        (
            "allowed-user-impersonation-with-uid",
            everything.clone(),
            vec![(U, b"tester"), (I, b"some-uid")],
            200,
            UserInfo {
                uid: "some-uid".into(),
                ..user("tester", &["system:authenticated"])
            },
        ),
        (
            "disallowed-user-impersonation-with-uid",
            everything.clone(),
            vec![(U, b"tester"), (I, b"disallowed-uid")],
            403,
            everything.clone(),
        ),
        (
            "allowed-impersonation-with-all-headers",
            everything.clone(),
            vec![
                (U, b"tester"),
                (I, b"some-uid"),
                (G, b"system:authenticated"),
                scopes,
                scope_b,
            ],
            200,
            UserInfo {
                uid: "some-uid".into(),
                ..with_extra(
                    user("tester", &["system:authenticated"]),
                    &[("scopes", &["scope-a", "scope-b"])],
                )
            },
        ),
    ];
    for (name, requestor, headers, code, want) in cases {
        let (got_code, got) = filter(&requestor, &headers);
        assert_eq!((got_code, &got), (code, &want), "{name}");
    }
}

#[test]
fn should_read_headers_as_gos_net_http_does() {
    let admin = user("system:admin", &[]);
    // The first Impersonate-User and Impersonate-Uid; an empty first one is none.
    let (_, u) = filter(&admin, &[(U, b"a"), (U, b"b"), (I, b"1"), (I, b"2")]);
    assert_eq!((u.name.as_str(), u.uid.as_str()), ("a", "1"));
    assert_eq!(
        filter(&admin, &[(U, b""), (U, b"b")]).1,
        admin,
        "no user asked"
    );
    assert_eq!(filter(&admin, &[(U, b""), (G, b"g")]).0, 400);
    // Headers the filter does not know are no impersonation.
    assert_eq!(
        filter(&admin, &[("impersonate-foo", b"x")]),
        (200, admin.clone())
    );
    // `%53cope` is `Scope`: the key is decoded after it is lower-cased.
    let (_, u) = filter(&admin, &[(U, b"a"), ("impersonate-extra-%53cope", b"x")]);
    assert_eq!(u.extra.keys().collect::<Vec<_>>(), ["Scope"]);
    // Values are bytes, kept whole: UTF-8 as it is, anything else refused.
    let (_, u) = filter(&admin, &[(U, "dävid".as_bytes()), (G, b" padded ")]);
    assert_eq!(u.name, "dävid");
    assert_eq!(u.groups, [" padded ", "system:authenticated"]);
    assert_eq!(filter(&admin, &[(U, b"d\xe4vid")]).0, 403);
    assert_eq!(filter(&admin, &[(U, b"a"), (G, b"\xff")]).0, 403);
    // A decoded key that is not UTF-8.
    assert_eq!(
        filter(&admin, &[(U, b"a"), ("impersonate-extra-%ff", b"x")]).0,
        403
    );
}

#[test]
fn should_check_service_accounts_as_service_accounts() {
    // Allowed to impersonate users but not service accounts: refused (the
    // attacker's suite read and wrote as ns-sa/sa-1 through r8s before).
    let users_only = user("dev", &["regular-impersonater"]);
    let sa = b"system:serviceaccount:ns-sa:sa-1".as_slice();
    assert_eq!(filter(&users_only, &[(U, sa)]).0, 403);
    let w = Wanted {
        name: "system:serviceaccount:ns-sa:sa-1".into(),
        ..Wanted::default()
    };
    let c = &checks(&w)[0];
    assert_eq!(
        (
            c.resource.as_str(),
            c.scope.namespace.as_str(),
            c.scope.name.as_str()
        ),
        ("serviceaccounts", "ns-sa", "sa-1")
    );
    // Asked groups replace the service account's.
    let sa_imp = user("dev", &["sa-impersonater", "group-impersonater"]);
    let (code, u) = filter(&sa_imp, &[(U, sa), (G, b"g")]);
    assert_eq!(
        (code, u.groups),
        (200, vec!["g".to_string(), "system:authenticated".into()])
    );
    // Names that are not a service account's are users.
    for name in [
        "system:serviceaccount:NS:sa",
        "system:serviceaccount:ns:sa:extra",
        "system:serviceaccount::sa",
        "system:serviceaccount:ns:",
        "system:serviceaccount:ns:-sa",
    ] {
        assert_eq!(service_account(name), None, "{name}");
    }
    assert_eq!(
        service_account("system:serviceaccount:a-1:b.c"),
        Some(("a-1", "b.c"))
    );
}

fn forwarded(u: &UserInfo) -> Result<HeaderMap, Unforwardable> {
    let filter = Filter::CURRENT;
    Forwarded { user: u, filter }.headers()
}

#[test]
fn should_forward_only_identities_that_arrive_unchanged() {
    let mut dave = with_extra(
        user("dave", &["team-a", "system:authenticated"]),
        &[(
            "authentication.kubernetes.io/credential-id",
            &["X509SHA256=ab"],
        )],
    );
    dave.uid = "u-1".into();
    let h = forwarded(&dave).expect("an ordinary identity goes");
    assert_eq!(h.get_all(G).iter().count(), 2);
    assert!(h.contains_key("impersonate-extra-authentication.kubernetes.io%2fcredential-id"));
    // Upper-case extra keys are encoded, so that they are not lower-cased away.
    let scoped = with_extra(dave.clone(), &[("Scope", &["x"])]);
    let h = forwarded(&scoped).unwrap();
    assert!(h.contains_key("impersonate-extra-%53cope"), "{h:?}");
    // Whitespace at either end would be trimmed into another identity.
    for (name, groups) in [
        (" dave", vec!["system:authenticated"]),
        ("dave\t", vec!["system:authenticated"]),
        ("dave", vec![" system:masters", "system:authenticated"]),
        ("dave", vec!["system:masters\t", "system:authenticated"]),
    ] {
        let u = user(name, &groups);
        assert!(
            matches!(forwarded(&u), Err(Unforwardable::Changed(_))),
            "{name:?} {groups:?}"
        );
    }
    // Bytes no header can carry.
    for name in ["da\nve", "da\rve", "da\0ve", "da\u{7f}ve"] {
        let u = user(name, &["system:authenticated"]);
        assert!(
            matches!(forwarded(&u), Err(Unforwardable::NotAHeader(_))),
            "{name:?}"
        );
    }
    // A tab inside, and text beyond ASCII, arrive as they are.
    assert!(forwarded(&user("da\tve", &["system:authenticated"])).is_ok());
    assert!(forwarded(&user("dävid", &["system:authenticated"])).is_ok());
    // Groups the filter would add or leave out: a certificate's
    // system:anonymous without system:unauthenticated, a user not in
    // system:authenticated.
    assert!(forwarded(&user("system:anonymous", &["x"])).is_err());
    assert!(forwarded(&user("dave", &["x"])).is_err());
    assert!(forwarded(&user("dave", &["system:unauthenticated"])).is_ok());
    // A service account's name with its own groups.
    let sa = user(
        "system:serviceaccount:ns:sa",
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:ns",
            "system:authenticated",
        ],
    );
    assert!(forwarded(&sa).is_ok());
}

#[test]
fn should_read_as_the_upstreams_filter_does() {
    let v = |minor: u16| {
        Some(KubeVersion {
            major: 1,
            minor,
            go: None,
        })
    };
    assert_eq!(
        Filter::of(v(21)),
        Filter {
            uid: false,
            bad_request: false
        }
    );
    assert_eq!(
        Filter::of(v(22)),
        Filter {
            uid: true,
            bad_request: false
        }
    );
    assert_eq!(Filter::of(v(35)), Filter::CURRENT);
    assert_eq!(Filter::of(None), Filter::CURRENT);
    // Before 1.22 Impersonate-Uid is no header of the filter's: a UID alone
    // asks nothing, beside a user it is not read, and a user with a UID
    // cannot be sent there unchanged.
    let old = Filter::of(v(21));
    let mut h = HeaderMap::new();
    h.insert(UID, HeaderValue::from_static("u-1"));
    assert_eq!(read(&h, old), Asked::Nothing);
    assert!(matches!(read(&h, Filter::CURRENT), Asked::WithoutUser(_)));
    h.insert(USER, HeaderValue::from_static("carol"));
    let Asked::As(w) = read(&h, old) else {
        panic!()
    };
    assert!(w.uid.is_empty());
    let mut carol = user("carol", &["system:authenticated"]);
    assert!(
        Forwarded {
            user: &carol,
            filter: old
        }
        .headers()
        .is_ok()
    );
    carol.uid = "u-1".into();
    assert!(
        Forwarded {
            user: &carol,
            filter: old
        }
        .headers()
        .is_err()
    );
}
