//! Every view of an object, cut from its bytes, against the object built
//! without the field in the first place.

use bytes::{BufMut, Bytes, BytesMut};

use super::*;
use crate::cache::object::TypeInfo;

fn pods(drop_managed_fields: bool) -> TypeInfo {
    TypeInfo {
        drop_managed_fields,
        ..TypeInfo::for_tests("Pod", "v1", "pods")
    }
}

const MF: &str = r#""managedFields":[{"manager":"kubelet","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:status":{}}}]"#;

/// A pod's JSON, with managedFields or without them.
fn json_pod(with: bool) -> String {
    let mf = if with {
        format!(",{MF}")
    } else {
        String::new()
    };
    format!(
        r#"{{"kind":"Pod","apiVersion":"v1","metadata":{{"name":"p","namespace":"a","uid":"u-1","resourceVersion":"7","labels":{{"app":"x"}}{mf}}},"spec":{{"nodeName":"n1"}},"status":{{"phase":"Running"}}}}"#
    )
}

fn item(o: &CachedObject, view: View) -> Vec<u8> {
    let mut out = BytesMut::new();
    o.write_item_as(view, &mut out);
    out.to_vec()
}

#[test]
fn should_cut_json_as_if_never_written() {
    let t = pods(false);
    let with = t.parse(json_pod(true).as_bytes()).unwrap();
    let without = t.parse(json_pod(false).as_bytes()).unwrap();
    assert!(with.has_managed_fields() && !without.has_managed_fields());
    for metadata in [false, true] {
        let view = View {
            metadata,
            drop_managed: false,
        };
        let dropped = View {
            drop_managed: true,
            ..view
        };
        assert_eq!(with.body_as(dropped), without.body_as(view), "{view:?}");
        assert_eq!(item(&with, dropped), item(&without, view), "{view:?}");
        assert_eq!(
            with.watch_event_as("MODIFIED", dropped),
            without.watch_event_as("MODIFIED", view)
        );
        assert_ne!(with.body_as(view), without.body_as(view));
        // Nothing to drop: the same bytes either way.
        assert_eq!(without.body_as(dropped), without.body_as(view));
    }
    // The item's length is the one the list heads are sized by.
    assert_eq!(
        with.item_len_as(View::DROPPED),
        without.item_len_as(View::OBJECT)
    );
    // Stamped with a later version, the cut moves with the bytes.
    let later = crate::cache::event::at_version(&with, 9);
    let plain_later = crate::cache::event::at_version(&without, 9);
    assert_eq!(later.body_as(View::DROPPED), plain_later.body);
    // Kept without them (`cache.managed_fields = "drop"`): the bytes without.
    let kept = pods(true).parse(json_pod(true).as_bytes()).unwrap();
    assert_eq!(kept.body, without.body);
    assert_eq!(kept.label("app"), Some("x"));
    assert_eq!(kept.field("spec.nodeName"), "n1");
    let event = pods(true)
        .parse_event(json_pod(true).as_bytes(), Some("ADDED"))
        .unwrap();
    assert_eq!(
        event.framed_line("ADDED").unwrap(),
        &without.watch_event_as("ADDED", View::OBJECT)
    );
}

/// A `ManagedFieldsEntry` (manager 1, operation 2, apiVersion 3).
fn entry(manager: &str) -> BytesMut {
    let mut e = BytesMut::new();
    pb::bytes_field(&mut e, 1, manager.as_bytes());
    pb::bytes_field(&mut e, 2, b"Update");
    pb::bytes_field(&mut e, 3, b"v1");
    e
}

/// A pod's protobuf body from its metadata's fields, in the order given
/// (field 17s where they are), with minimal or padded length prefixes.
fn pb_pod(meta_fields: &[(u32, &[u8])], padded: bool) -> Bytes {
    let mut meta = BytesMut::new();
    for (n, v) in meta_fields {
        pb::bytes_field(&mut meta, *n, v);
    }
    let mut raw = BytesMut::new();
    if padded {
        // The metadata's length as a two-byte varint (legal, not minimal).
        raw.put_u8(0x0a);
        raw.put_u8((meta.len() as u8 & 0x7f) | 0x80);
        raw.put_u8((meta.len() >> 7) as u8);
        raw.put_slice(&meta);
    } else {
        pb::bytes_field(&mut raw, 1, &meta);
    }
    let mut spec = BytesMut::new();
    pb::bytes_field(&mut spec, 10, b"n1");
    pb::bytes_field(&mut raw, 2, &spec);
    pb::envelope("v1", "Pod", &[&raw])
}

#[test]
fn should_cut_protobuf_as_if_never_written() {
    let (a, b) = (entry("kubelet"), entry("kube-scheduler"));
    let base: [(u32, &[u8]); 4] = [(1, b"p"), (3, b"a"), (5, b"u-1"), (6, b"7")];
    let plain = pb_pod(&base, false);
    let with_mf = |order: &[(u32, &[u8])], padded| {
        pods(false)
            .parse_protobuf(&pb_pod(order, padded), true)
            .unwrap()
    };
    let without = pods(false).parse_protobuf(&plain, true).unwrap();
    let mut ordered = base.to_vec();
    ordered.extend([(17, &a[..]), (17, &b[..])]);
    // As Go writes it; managedFields between other fields; a padded length.
    let scattered = [
        (1, &b"p"[..]),
        (17, &a[..]),
        (3, b"a"),
        (5, b"u-1"),
        (17, &b[..]),
        (6, b"7"),
    ];
    for (what, o) in [
        ("ordered", with_mf(&ordered, false)),
        ("scattered", with_mf(&scattered, false)),
        ("padded", with_mf(&ordered, true)),
    ] {
        assert!(o.has_managed_fields(), "{what}");
        for metadata in [false, true] {
            let view = View {
                metadata,
                drop_managed: false,
            };
            let dropped = View {
                drop_managed: true,
                ..view
            };
            assert_eq!(o.body_as(dropped), without.body_as(view), "{what} {view:?}");
            assert_eq!(item(&o, dropped), item(&without, view), "{what} {view:?}");
            assert_eq!(o.item_len_as(dropped), without.item_len_as(view), "{what}");
            assert_eq!(
                o.watch_event_as("ADDED", dropped),
                without.watch_event_as("ADDED", view),
                "{what} {view:?}"
            );
        }
        assert_eq!(o.key.as_ref(), "a/p", "{what}");
    }
    // What r8s serves whole is the upstream's bytes where they were as Go
    // writes them.
    let ordered_body = pb_pod(&ordered, false);
    assert_eq!(with_mf(&ordered, false).body, ordered_body);
    // ... kept inside the event's frame, not rewritten (a long length, too).
    let event = pods(false)
        .parse_protobuf_event(&ordered_body, "ADDED")
        .unwrap();
    assert!(event.framed_line("ADDED").is_some());
    let long = [(1, &b"p"[..]), (6, b"7"), (17, &[b'x'; 300][..])];
    let event = pods(false)
        .parse_protobuf_event(&pb_pod(&long, false), "ADDED")
        .unwrap();
    assert!(event.has_managed_fields() && event.framed_line("ADDED").is_some());
    // Kept without them.
    let kept = pods(true).parse_protobuf(&ordered_body, true).unwrap();
    assert!(!kept.has_managed_fields());
    assert_eq!(kept.body, plain);
    assert_eq!(kept.field("spec.nodeName"), "n1");
}
