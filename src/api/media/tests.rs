//! `Accept` negotiation and the media types' parameters, against the
//! cases kube-apiserver's and client-go's own tests use.

use super::*;

const PROTOBUF: MediaType = MediaType::of(Encoding::Protobuf, Shape::Object);

fn media(encoding: Encoding, shape: Shape) -> Choice {
    Choice::Media(MediaType::of(encoding, shape))
}

#[test]
fn should_negotiate_what_client_go_and_kubectl_ask_for() {
    let json = Choice::Media(MediaType::JSON);
    let cases: &[(Option<&str>, Offer, Choice)] = &[
        (None, Offer::Builtin, json),
        (Some(""), Offer::Builtin, json),
        (Some("application/json"), Offer::Builtin, json),
        (Some("*/*"), Offer::Builtin, json),
        (Some("application/*"), Offer::Builtin, json),
        (Some("application/json;charset=utf-8"), Offer::Builtin, json),
        // client-go up to 1.31, and 1.32+ typed clients.
        (
            Some("application/vnd.kubernetes.protobuf, */*"),
            Offer::Builtin,
            Choice::Media(PROTOBUF),
        ),
        (
            Some("application/vnd.kubernetes.protobuf,application/json"),
            Offer::Builtin,
            Choice::Media(PROTOBUF),
        ),
        // A custom resource has no protobuf: the apiserver answers JSON.
        (
            Some("application/vnd.kubernetes.protobuf, */*"),
            Offer::Custom,
            json,
        ),
        (
            Some("application/vnd.kubernetes.protobuf,application/json"),
            Offer::Custom,
            json,
        ),
        (
            Some("application/vnd.kubernetes.protobuf"),
            Offer::Custom,
            Choice::NotAcceptable,
        ),
        // q-values order the clauses.
        (
            Some("application/vnd.kubernetes.protobuf;q=0.5, application/json"),
            Offer::Builtin,
            json,
        ),
        (
            Some("application/json;q=0.1, application/vnd.kubernetes.protobuf;q=0.9"),
            Offer::Builtin,
            Choice::Media(PROTOBUF),
        ),
        // Specific before wildcard at equal q; q=0 still counts, last.
        (
            Some("*/*, application/vnd.kubernetes.protobuf"),
            Offer::Builtin,
            Choice::Media(PROTOBUF),
        ),
        (
            Some("text/html, application/json;q=0"),
            Offer::Builtin,
            json,
        ),
        // Metadata-only informers.
        (
            Some(
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
            ),
            Offer::Builtin,
            media(Encoding::Protobuf, Shape::MetadataList),
        ),
        (
            Some("application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"),
            Offer::Custom,
            media(Encoding::Protobuf, Shape::Metadata),
        ),
        (
            Some("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"),
            Offer::Custom,
            media(Encoding::Json, Shape::Metadata),
        ),
        (
            Some("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1"),
            Offer::Builtin,
            Choice::Other,
        ),
        // Table (kubectl get), YAML, watch streams, what no one serves.
        (
            Some(
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json",
            ),
            Offer::Builtin,
            Choice::Table("meta.k8s.io/v1"),
        ),
        (
            Some("application/json;as=Table;g=meta.k8s.io;v=v2, application/json"),
            Offer::Builtin,
            json,
        ),
        (
            Some("application/json;as=Table;g=meta.k8s.io;v=v2"),
            Offer::Builtin,
            Choice::NotAcceptable,
        ),
        (
            Some("application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1"),
            Offer::Builtin,
            Choice::NotAcceptable,
        ),
        (
            Some("application/json;as=Pod;g=;v=v1"),
            Offer::Builtin,
            Choice::NotAcceptable,
        ),
        (Some("application/yaml"), Offer::Builtin, Choice::Yaml),
        (Some("application/json;stream=watch"), Offer::Builtin, json),
        (
            Some("application/yaml;stream=watch, application/json"),
            Offer::Builtin,
            json,
        ),
        (
            Some("application/json;stream=other"),
            Offer::Builtin,
            Choice::NotAcceptable,
        ),
        (
            Some("application/json;pretty=1"),
            Offer::Builtin,
            Choice::Other,
        ),
        (
            Some("application/cbor, application/json"),
            Offer::Builtin,
            Choice::Other,
        ),
        (Some("text/html"), Offer::Builtin, Choice::NotAcceptable),
        (Some("   "), Offer::Builtin, Choice::NotAcceptable),
    ];
    for (accept, offer, want) in cases {
        assert_eq!(negotiate(*accept, *offer), *want, "{accept:?} on {offer:?}");
    }
}

/// KEP-5958's `drop` parameter, as kubernetes' negotiation test and
/// client-go's `TestDropManagedFieldsAccept` write it: on the clause
/// chosen, targets joined by `+`, unknown ones ignored.
#[test]
fn should_drop_managed_fields_where_the_chosen_clause_says_so() {
    let dropped = |encoding, shape| {
        Choice::Media(MediaType {
            encoding,
            shape,
            drop_managed_fields: true,
        })
    };
    let (j, p) = (Encoding::Json, Encoding::Protobuf);
    let cases: &[(&str, Offer, Choice)] = &[
        (
            "application/json;drop=metadata.managedFields",
            Offer::Builtin,
            dropped(j, Shape::Object),
        ),
        // client-go's default Accept with the client gate on.
        (
            "application/json; drop=metadata.managedFields,*/*; drop=metadata.managedFields",
            Offer::Custom,
            dropped(j, Shape::Object),
        ),
        (
            "application/vnd.kubernetes.protobuf;drop=metadata.managedFields, application/json",
            Offer::Builtin,
            dropped(p, Shape::Object),
        ),
        // Protobuf refused for a custom resource: the JSON clause, without drop.
        (
            "application/vnd.kubernetes.protobuf;drop=metadata.managedFields, application/json",
            Offer::Custom,
            Choice::Media(MediaType::JSON),
        ),
        (
            "application/json; as=PartialObjectMetadata; drop=metadata.managedFields; g=meta.k8s.io; q=0.9; v=v1",
            Offer::Custom,
            dropped(j, Shape::Metadata),
        ),
        (
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1;drop=metadata.managedFields",
            Offer::Builtin,
            dropped(p, Shape::MetadataList),
        ),
        (
            "application/json;drop=spec.someFutureField+metadata.managedFields",
            Offer::Builtin,
            dropped(j, Shape::Object),
        ),
        // Unknown targets, and near misses, are ignored.
        (
            "application/json;drop=spec.someFutureField",
            Offer::Builtin,
            Choice::Media(MediaType::JSON),
        ),
        (
            "application/json;drop=metadata.managedfields",
            Offer::Builtin,
            Choice::Media(MediaType::JSON),
        ),
        (
            "application/json;drop=",
            Offer::Builtin,
            Choice::Media(MediaType::JSON),
        ),
        (
            "application/json;as=Table;g=meta.k8s.io;v=v1;drop=metadata.managedFields",
            Offer::Builtin,
            Choice::Table("meta.k8s.io/v1"),
        ),
    ];
    for (accept, offer, want) in cases {
        assert_eq!(
            negotiate(Some(accept), *offer),
            *want,
            "{accept:?} on {offer:?}"
        );
    }
    // The answer's Content-Type does not carry the parameter.
    let Choice::Media(m) = dropped(p, Shape::Object) else {
        unreachable!()
    };
    assert_eq!(m.content_type(false), PROTOBUF.content_type(false));
}

#[test]
fn should_name_content_types_as_the_apiserver() {
    assert_eq!(MediaType::JSON.content_type(true), "application/json");
    assert_eq!(
        PROTOBUF.content_type(false),
        "application/vnd.kubernetes.protobuf"
    );
    assert_eq!(
        PROTOBUF.content_type(true),
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
}

#[test]
fn should_negotiate_errors_as_error_negotiated_does() {
    let cases: &[(Option<&str>, ErrorEncoding)] = &[
        (None, ErrorEncoding::Json),
        (Some("application/json"), ErrorEncoding::Json),
        (
            Some("application/vnd.kubernetes.protobuf, */*"),
            ErrorEncoding::Protobuf,
        ),
        // client-go's metadata client: the protobuf clause is a transform.
        (
            Some(
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json",
            ),
            ErrorEncoding::Json,
        ),
        (
            Some(
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
            ),
            ErrorEncoding::Raw,
        ),
        (
            Some("application/json;as=Table;v=v1;g=meta.k8s.io,application/json"),
            ErrorEncoding::Json,
        ),
        (
            Some("application/json;as=Table;v=v1;g=meta.k8s.io"),
            ErrorEncoding::Raw,
        ),
        (
            Some("application/vnd.kubernetes.protobuf;stream=watch"),
            ErrorEncoding::Protobuf,
        ),
        (Some("application/json;sv=v1"), ErrorEncoding::Raw),
        (Some("text/html"), ErrorEncoding::Raw),
    ];
    for (accept, want) in cases {
        assert_eq!(negotiate_error(*accept), *want, "{accept:?}");
    }
}

#[test]
fn should_take_gzip_unless_refused() {
    let with = |v: &str| {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT_ENCODING, v.parse().unwrap());
        h
    };
    assert!(accepts_gzip(&with("br, gzip")));
    assert!(!accepts_gzip(&with("gzip;q=0")));
    assert!(!accepts_gzip(&HeaderMap::new()));
}
