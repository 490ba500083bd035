//! The suite's cast: the callers (their certificates and headers), the
//! grants both kits are given, the namespaces and tokens.

use serde_json::{Value, json};

use super::Kit;
use crate::common::forge::{self, Attr, CN, O, UID, Use, bmp, utf8};

/// One caller: its certificate (by name in `Setup::identities`), extra headers.
pub struct Caller {
    pub label: &'static str,
    pub cert: Option<&'static str>,
    pub headers: Vec<(&'static str, Vec<u8>)>,
}

fn caller(label: &'static str, cert: &'static str, headers: &[(&'static str, &[u8])]) -> Caller {
    Caller {
        label,
        cert: Some(cert),
        headers: headers.iter().map(|(k, v)| (*k, v.to_vec())).collect(),
    }
}

/// The certificates: a file name, a subject, a use; `other_ca`: signed by
/// a CA the kit does not trust.
pub fn certificates() -> Vec<(&'static str, Vec<Vec<Attr>>, Use, bool)> {
    let one = |cn: &str| vec![vec![utf8(CN, cn)]];
    let t61 = |bytes: &[u8]| (CN, forge::T61, bytes.to_vec());
    vec![
        ("dave", one("dave"), Use::Client, false),
        ("carol", one("carol"), Use::Client, false),
        ("erin", one("erin"), Use::Client, false),
        ("gina", one("gina"), Use::Client, false),
        ("frank", one("frank"), Use::Client, false),
        ("hank", one("hank"), Use::Client, false),
        (
            "masters-space",
            vec![vec![utf8(O, " system:masters")], vec![utf8(CN, "mallory")]],
            Use::Client,
            false,
        ),
        (
            "masters-tab",
            vec![vec![utf8(O, "system:masters\t")], vec![utf8(CN, "mallory")]],
            Use::Client,
            false,
        ),
        ("cn-space", one(" dave"), Use::Client, false),
        ("cn-tab", one("dave\t"), Use::Client, false),
        (
            "two-cns",
            vec![vec![utf8(CN, "dave")], vec![utf8(CN, "alice")]],
            Use::Client,
            false,
        ),
        (
            "two-cns-rev",
            vec![vec![utf8(CN, "alice")], vec![utf8(CN, "dave")]],
            Use::Client,
            false,
        ),
        (
            "multi-rdn",
            vec![vec![utf8(CN, "dave"), utf8(CN, "alice")]],
            Use::Client,
            false,
        ),
        ("bmp", vec![vec![bmp(CN, "dave")]], Use::Client, false),
        ("t61", vec![vec![t61(b"dave")]], Use::Client, false),
        ("t61-latin", vec![vec![t61(b"d\xe9ve")]], Use::Client, false),
        (
            "universal",
            vec![vec![(CN, forge::UNIVERSAL, b"\0\0\0d".to_vec())]],
            Use::Client,
            false,
        ),
        (
            "empty-cn",
            vec![vec![utf8(O, "system:masters")], vec![utf8(CN, "")]],
            Use::Client,
            false,
        ),
        ("non-ascii", one("dävid"), Use::Client, false),
        (
            "uid",
            vec![vec![utf8(CN, "carol")], vec![utf8(UID, "u-1")]],
            Use::Client,
            false,
        ),
        (
            "two-uids",
            vec![
                vec![utf8(CN, "carol")],
                vec![utf8(UID, "u-1")],
                vec![utf8(UID, "u-2")],
            ],
            Use::Client,
            false,
        ),
        (
            "anonymous",
            vec![vec![utf8(O, "team")], vec![utf8(CN, "system:anonymous")]],
            Use::Client,
            false,
        ),
        ("expired", one("dave"), Use::Expired, false),
        ("server-only", one("dave"), Use::ServerOnly, false),
        ("stranger", one("dave"), Use::Client, true),
        ("bad-serial", one("dave"), Use::MalformedSerial, false),
    ]
}

pub fn callers() -> Vec<Caller> {
    let auth = "authorization";
    let u = "impersonate-user";
    let g = "impersonate-group";
    vec![
        caller("dave (every namespace)", "dave", &[]),
        caller(MASTERS_SPACE, "masters-space", &[]),
        caller(
            "mallory, O=system:masters\\t (whitespace, tab)",
            "masters-tab",
            &[],
        ),
        caller("CN= dave (whitespace, leading space)", "cn-space", &[]),
        caller("CN=dave\\t (whitespace, tab)", "cn-tab", &[]),
        caller("/CN=dave/CN=alice (two CNs)", "two-cns", &[]),
        caller("/CN=alice/CN=dave (two CNs)", "two-cns-rev", &[]),
        caller("CN=dave+CN=alice (multi-valued RDN)", "multi-rdn", &[]),
        caller("BMPString CN", "bmp", &[]),
        caller("T61String CN", "t61", &[]),
        caller("T61String CN beyond ASCII", "t61-latin", &[]),
        caller("UniversalString CN", "universal", &[]),
        caller("empty CN with O=system:masters", "empty-cn", &[]),
        caller("CN=dävid (UTF-8)", "non-ascii", &[]),
        caller("CN=carol with a UID", "uid", &[]),
        caller("CN=carol with two UIDs", "two-uids", &[]),
        caller("CN=system:anonymous", "anonymous", &[]),
        caller("expired", "expired", &[]),
        caller("server-auth only", "server-only", &[]),
        caller("another CA", "stranger", &[]),
        caller("a serial number Go refuses", "bad-serial", &[]),
        caller(
            "another CA with dave's token",
            "stranger",
            &[(auth, b"Bearer davetok")],
        ),
        caller("erin impersonating carol", "erin", &[(u, b"carol")]),
        caller(
            "gina (users only) impersonating a service account",
            "gina",
            &[(u, b"system:serviceaccount:ns-sa:sa-1")],
        ),
        caller(
            "frank impersonating the service account",
            "frank",
            &[(u, b"system:serviceaccount:ns-sa:sa-1")],
        ),
        caller(
            "hank impersonating ghost in system:unauthenticated",
            "hank",
            &[(u, b"ghost"), (g, b"system:unauthenticated")],
        ),
        caller(
            "hank impersonating system:anonymous",
            "hank",
            &[(u, b"system:anonymous")],
        ),
        caller(
            "hank impersonating carol, extra %53cope",
            "hank",
            &[(u, b"carol"), ("impersonate-extra-%53cope", b"x")],
        ),
        caller(
            "hank impersonating carol, two UIDs",
            "hank",
            &[
                (u, b"carol"),
                ("impersonate-uid", b"u-1"),
                ("impersonate-uid", b"u-2"),
            ],
        ),
        caller(
            "hank with Impersonate-Foo",
            "hank",
            &[("impersonate-foo", b"x")],
        ),
        caller(
            "hank impersonating dävid",
            "hank",
            &[(u, "dävid".as_bytes())],
        ),
        caller(
            "hank impersonating a group that is not UTF-8",
            "hank",
            &[(u, b"carol"), (g, b"\xff")],
        ),
        caller(
            "hank: a group without a user",
            "hank",
            &[(u, b""), (g, b"system:masters")],
        ),
        caller(
            "hank impersonating carol, first of two",
            "hank",
            &[(u, b"carol"), (u, b"dave")],
        ),
    ]
}

/// Who may do what, as (users, groups, verbs, resources, names, namespaces).
type Rule = (
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
);

const READ: &[&str] = &["get", "list", "watch"];
pub const SA: &str = "system:serviceaccount:ns-sa:sa-1";

/// The grants, the same on both kits (`RES` is the kit's resource).
fn rules() -> Vec<Rule> {
    vec![
        (
            &["dave"],
            &[],
            &["get", "list", "watch", "create"],
            &["RES"],
            &[],
            &[],
        ),
        (
            &["carol", "dävid"],
            &[],
            &["get", "list", "watch", "create"],
            &["RES"],
            &[],
            &["ns-a"],
        ),
        (&[SA], &[], READ, &["RES"], &[], &["ns-b"]),
        (
            &[],
            &["system:authenticated"],
            READ,
            &["RES"],
            &[],
            &["ns-auth"],
        ),
        (
            &[],
            &["system:unauthenticated"],
            READ,
            &["RES"],
            &[],
            &["ns-unauth"],
        ),
        (
            &["erin"],
            &[],
            &["impersonate"],
            &["users"],
            &["carol"],
            &[],
        ),
        (&["gina"], &[], &["impersonate"], &["users"], &[], &[]),
        (
            &["frank"],
            &[],
            &["impersonate"],
            &["serviceaccounts"],
            &["sa-1"],
            &["ns-sa"],
        ),
        (
            &["hank"],
            &[],
            &["impersonate"],
            &["users", "groups"],
            &[],
            &[],
        ),
        (
            &["hank"],
            &[],
            &["impersonate"],
            &["uids", "userextras/Scope"],
            &[],
            &[],
        ),
    ]
}

/// The namespaces the requests read.
pub const NAMESPACES: &[&str] = &["ns-a", "ns-b", "ns-auth", "ns-unauth"];

/// The caller of the first cause: `O= system:masters`.
pub const MASTERS_SPACE: &str = "mallory, O= system:masters (whitespace, leading space)";

pub const TOKENS: &str = "admintok,admin,admin,\"system:masters\"\ndavetok,dave,dave\n";

/// The kit's grants, as the shim's rules (which the 1.21 kit's RBAC
/// objects are made from; `RES` is the kit's resource).
pub fn rules_json(kit: Kit) -> Value {
    let res = match kit {
        Kit::V136 => "widgets",
        Kit::V121 => "configmaps",
    };
    let rules: Vec<Value> = rules()
        .into_iter()
        .map(|(users, groups, verbs, resources, names, nss)| {
            let resources: Vec<&str> = resources
                .iter()
                .map(|r| if *r == "RES" { res } else { r })
                .collect();
            let groups_api = match resources[0] {
                "uids" | "userextras/Scope" => "authentication.k8s.io",
                "widgets" => "example.com",
                _ => "",
            };
            json!({"users": users, "groups": groups, "verbs": verbs,
                    "apiGroups": [groups_api], "resources": resources,
                    "resourceNames": names, "namespaces": nss})
        })
        .collect();
    Value::Array(rules)
}
