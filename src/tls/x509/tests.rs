//! The subject read as Go and kube-apiserver read it: the cases of Go's
//! `crypto/x509` `TestParseASN1String` (with Go 1.25's T61String and
//! BMPString cases), of `pkix.Name.FillFromRDNSequence`, and of the
//! apiserver's `x509_test.go` (`TestX509`'s users, UIDs and groups).

use super::*;

/// A DER element: tag, definite length, contents.
fn tlv(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let n = contents.len();
    if n < 128 {
        out.push(n as u8);
    } else {
        let len = (n as u32).to_be_bytes();
        let skip = len.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (4 - skip) as u8);
        out.extend_from_slice(&len[skip..]);
    }
    out.extend_from_slice(contents);
    out
}

/// One attribute: its OID's contents, its value's tag and bytes.
type Attr<'a> = (&'a [u8], u8, &'a [u8]);

/// A `Name` of these RDNs (each a SET of its attributes).
fn name(rdns: &[&[Attr]]) -> Vec<u8> {
    let mut seq = Vec::new();
    for rdn in rdns {
        let mut set = Vec::new();
        for (oid, tag, value) in *rdn {
            let atav = [tlv(OID, oid), tlv(*tag, value)].concat();
            set.extend(tlv(SEQUENCE, &atav));
        }
        seq.extend(tlv(SET, &set));
    }
    tlv(SEQUENCE, &seq)
}

fn cn(v: &str) -> Attr<'_> {
    (CN, UTF8, v.as_bytes())
}

fn org(v: &str) -> Attr<'_> {
    (O, UTF8, v.as_bytes())
}

const LATEST: Reading = Reading {
    credential_id: true,
    uid: true,
    strings: GoStrings::Latin1,
};

fn user_of(rdns: &[&[Attr]], reading: Reading) -> CertUser {
    Subject::parse(&name(rdns))
        .expect("the name parses")
        .user("abc", reading)
}

/// The user's name and groups, for the cases that only name them.
fn named(rdns: &[&[Attr]]) -> (String, Vec<String>) {
    match user_of(rdns, LATEST) {
        CertUser::User(u) => (u.name, u.groups),
        other => panic!("{other:?}"),
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn should_decode_each_string_type_as_go_does() {
    // (tag, bytes, Go's string, or its error); Go's TestParseASN1String and
    // Go 1.25's cases for T61String and BMPString.
    let cases: &[(u8, &[u8], Result<&str, &str>)] = &[
        (T61, &[80, 81, 82], Ok("PQR")),
        (T61, &[0xbf, 0x61, 0x3f], Ok("¿a?")),
        (PRINTABLE, &[80, 81, 82], Ok("PQR")),
        (PRINTABLE, &[1, 2, 3], Err("invalid PrintableString")),
        (PRINTABLE, b"*.example&co", Ok("*.example&co")),
        (PRINTABLE, b"a_b", Err("invalid PrintableString")),
        (UTF8, &[80, 81, 82], Ok("PQR")),
        (UTF8, &[255], Err("invalid UTF-8 string")),
        (BMP, &[80, 81], Ok("偑")),
        (BMP, &[255], Err("invalid BMPString")),
        (BMP, &[0, 80, 0, 81, 0, 0], Ok("PQ")),
        (BMP, &[0xd8, 0x3d, 0xde, 0x00], Err("invalid BMPString")),
        (BMP, &[0xff, 0xfe], Err("invalid BMPString")),
        (BMP, &[0xfd, 0xd0], Err("invalid BMPString")),
        (IA5, &[80, 81], Ok("PQ")),
        (IA5, &[255], Err("invalid IA5String")),
        (IA5, b" a\tb\n", Ok(" a\tb\n")),
        (NUMERIC, &[49, 50], Ok("12")),
        (NUMERIC, &[80], Err("invalid NumericString")),
    ];
    for (tag, bytes, want) in cases {
        let got = Value::checked(*tag, bytes)
            .map_err(|e| e.to_string())
            .and_then(|v| v.decode(GoStrings::Latin1));
        match (got, want) {
            (Ok(s), Ok(w)) => assert_eq!(s, *w, "tag {tag} {bytes:?}"),
            (Err(e), Err(w)) => assert!(e.ends_with(w), "tag {tag} {bytes:?}: {e}"),
            (got, want) => panic!("tag {tag} {bytes:?}: {got:?}, Go: {want:?}"),
        }
    }
    // Any other type fails the parse (Go up to 1.26: "unsupported string type").
    for tag in [28 /* UniversalString */, 2 /* INTEGER */, 4, 0x2c] {
        assert_eq!(Value::checked(tag, b"x"), Err(NameError::Unsupported(tag)));
    }
}

#[test]
fn should_read_a_t61_string_as_the_upstreams_go_reads_it() {
    let v = Value::checked(T61, &[0x64, 0xe9]).unwrap();
    assert_eq!(v.decode(GoStrings::Latin1).unwrap(), "dé");
    // Go before 1.25 takes the bytes, here not UTF-8: no name r8s can hold.
    assert!(v.decode(GoStrings::Raw).is_err());
    assert!(v.decode(GoStrings::Unknown).is_err());
    // Bytes that happen to be UTF-8 are that text to the older Go.
    let utf8 = Value::checked(T61, "dé".as_bytes()).unwrap();
    assert_eq!(utf8.decode(GoStrings::Raw).unwrap(), "dé");
    assert_eq!(utf8.decode(GoStrings::Latin1).unwrap(), "dÃ©");
    // ASCII reads the same everywhere.
    let ascii = Value::checked(T61, b"dave").unwrap();
    assert_eq!(ascii.decode(GoStrings::Unknown).unwrap(), "dave");
}

#[test]
fn should_take_the_last_common_name_and_every_organization_untrimmed() {
    // FillFromRDNSequence overwrites CommonName: the last one wins, also
    // within a multi-valued RDN, in the order the RDNs come.
    assert_eq!(named(&[&[cn("dave")], &[cn("alice")]]).0, "alice");
    assert_eq!(named(&[&[cn("dave"), cn("alice")]]).0, "alice");
    assert_eq!(named(&[&[cn("alice"), org("x")], &[cn("dave")]]).0, "dave");
    // Nothing is trimmed.
    let (n, g) = named(&[&[org(" system:masters")], &[cn(" dave\t")]]);
    assert_eq!(n, " dave\t");
    assert_eq!(g, strings(&[" system:masters", "system:authenticated"]));
    // Every Organization, in order, an empty one too; OUs are not groups.
    let ou: Attr = (&[0x55, 0x04, 0x0b], UTF8, b"unit");
    let (_, g) = named(&[&[org("b"), org("")], &[ou], &[org("a")], &[cn("x")]]);
    assert_eq!(g, strings(&["b", "", "a", "system:authenticated"]));
    // Strings of every type name users.
    let bmp: Attr = (CN, BMP, &[0, b'b', 0, b'o', 0, b'b']);
    assert_eq!(named(&[&[bmp]]).0, "bob");
    let t61: Attr = (CN, T61, b"bob");
    assert_eq!(named(&[&[t61]]).0, "bob");
}

#[test]
fn should_authenticate_nobody_by_an_empty_common_name() {
    assert_eq!(
        user_of(&[&[org("system:masters")]], LATEST),
        CertUser::Nobody
    );
    assert_eq!(user_of(&[&[cn("")]], LATEST), CertUser::Nobody);
    // The last CommonName is the one: an empty one after a name.
    assert_eq!(
        user_of(&[&[cn("dave")], &[cn("")]], LATEST),
        CertUser::Nobody
    );
    assert_eq!(user_of(&[], LATEST), CertUser::Nobody);
}

#[test]
fn should_add_the_authenticated_group_as_the_apiserver_does() {
    let (_, g) = named(&[&[cn("dave")]]);
    assert_eq!(g, strings(&["system:authenticated"]));
    let (_, g) = named(&[&[org("system:authenticated"), org("x")], &[cn("dave")]]);
    assert_eq!(g, strings(&["system:authenticated", "x"]));
    let (_, g) = named(&[&[org("system:unauthenticated")], &[cn("dave")]]);
    assert_eq!(g, strings(&["system:unauthenticated"]));
    let (_, g) = named(&[&[org("x")], &[cn("system:anonymous")]]);
    assert_eq!(
        g,
        strings(&["x"]),
        "system:anonymous is never authenticated"
    );
}

#[test]
fn should_read_the_uid_and_credential_id_of_the_upstreams_version() {
    let uid = |v: &'static str| -> Attr<'static> { (UID, UTF8, v.as_bytes()) };
    // kube-apiserver's TestX509: "common name and UID".
    match user_of(
        &[&[org("My Org")], &[cn("client_cn")], &[uid("client_id")]],
        LATEST,
    ) {
        CertUser::User(u) => {
            assert_eq!(u.uid, "client_id");
            assert_eq!(u.extra[CREDENTIAL_ID], vec!["X509SHA256=abc".to_string()]);
        }
        other => panic!("{other:?}"),
    }
    // "ca with empty UID", "ca with multiple UIDs".
    let err = |rdns: &[&[Attr]]| match user_of(rdns, LATEST) {
        CertUser::Error(e) => e,
        other => panic!("{other:?}"),
    };
    assert!(err(&[&[cn("c")], &[uid("")]]).contains("UID cannot be an empty string"));
    let many = err(&[&[cn("c")], &[uid("client_uid1")], &[uid("client_uid2")]]);
    assert!(
        many.contains("expected 1 UID, but found multiple"),
        "{many}"
    );
    // Before 1.33 no UID is read; before 1.32 no credential-id is given.
    let old = Reading {
        credential_id: false,
        uid: false,
        strings: GoStrings::Raw,
    };
    match user_of(&[&[cn("c")], &[uid("a")], &[uid("b")]], old) {
        CertUser::User(u) => assert!(u.uid.is_empty() && u.extra.is_empty(), "{u:?}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn should_refuse_what_gos_parser_refuses() {
    // A value of another type than the six strings.
    let n = name(&[&[(CN, 28, b"\0\0\0a")]]);
    assert_eq!(Subject::parse(&n), Err(NameError::Unsupported(28)));
    // DER Go's cryptobyte does not read: a long-form length that fits the
    // short form, a truncated element, a high tag number.
    let mut long = vec![SEQUENCE, 0x81, 0x05];
    long.extend(tlv(SET, &tlv(SEQUENCE, &[])));
    assert_eq!(Subject::parse(&long), Err(NameError::Malformed));
    assert_eq!(
        Subject::parse(&[SEQUENCE, 0x05, 0x31]),
        Err(NameError::Malformed)
    );
    assert_eq!(
        Subject::parse(&tlv(SEQUENCE, &[0x1f, 0x01, 0x00])),
        Err(NameError::Malformed)
    );
    // An RDN that is not a SET, an attribute without an OID.
    let not_set = tlv(SEQUENCE, &tlv(SEQUENCE, &[]));
    assert_eq!(Subject::parse(&not_set), Err(NameError::Malformed));
    let no_oid = tlv(SEQUENCE, &tlv(SET, &tlv(SEQUENCE, &tlv(UTF8, b"x"))));
    assert_eq!(Subject::parse(&no_oid), Err(NameError::Malformed));
    // OIDs: a leading 0x80 in a component, one too long, one unended.
    assert!(valid_oid(CN) && valid_oid(O) && valid_oid(UID));
    assert!(!valid_oid(&[0x55, 0x80, 0x01]));
    assert!(
        valid_oid(&[0x55, 0x81, 0x80, 0x80, 0x80, 0x00]),
        "five bytes"
    );
    assert!(
        !valid_oid(&[0x55, 0x81, 0x80, 0x80, 0x80, 0x80, 0x00]),
        "six"
    );
    assert!(
        !valid_oid(&[0x55, 0x90, 0x80, 0x80, 0x80, 0x00]),
        "past 31 bits"
    );
    assert!(!valid_oid(&[0x55, 0x84]));
    assert!(!valid_oid(&[]));
    // An empty RDN SET parses (Go skips it).
    let empty_set = tlv(
        SEQUENCE,
        &[tlv(SET, &[]), name(&[&[cn("x")]])[2..].to_vec()].concat(),
    );
    assert!(Subject::parse(&empty_set).is_ok());
}

#[test]
fn should_refuse_serial_numbers_gos_parser_refuses() {
    assert!(go_serial(&[0x01]) && go_serial(&[0x00]) && go_serial(&[0x00, 0x80, 0x01]));
    assert!(go_serial(&[0x7f, 0xff]));
    assert!(!go_serial(&[]), "empty");
    assert!(!go_serial(&[0x00, 0x7f]), "a leading zero not needed");
    assert!(!go_serial(&[0x80]), "negative");
    assert!(!go_serial(&[0xff, 0x80]), "negative, and not minimal");
}
