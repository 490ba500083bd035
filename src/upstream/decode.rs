//! What the upstream's list pages and watch streams say, in JSON or
//! protobuf: objects parsed into cached objects, bookmarks' versions, ERROR
//! events' meaning. The reflector decides what follows; this only reads.

use std::sync::Arc;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::api::media::Encoding;
use crate::cache::object::{CachedObject, ObjectError, Objects, TypeInfo};
use crate::codec::protobuf as pb;

/// Why upstream data cannot be taken as it is.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Undecodable data: relist (never serve a half-applied state).
    #[error("malformed upstream data: {0}")]
    Malformed(String),
    /// Resource versions are not integers: stop caching.
    #[error("{0}")]
    Uncacheable(ObjectError),
    /// An ERROR event with 410: the version is gone.
    #[error("resource version expired")]
    Expired,
    /// Any other ERROR event.
    #[error("watch ERROR event: {0}")]
    Failed(String),
}

#[derive(Deserialize)]
struct BookmarkMeta {
    #[serde(default, rename = "resourceVersion")]
    resource_version: Option<String>,
    #[serde(default)]
    annotations: Option<std::collections::HashMap<String, String>>,
}

#[derive(Deserialize)]
struct Bookmark {
    metadata: BookmarkMeta,
}

#[derive(Deserialize)]
struct ListMeta<'a> {
    #[serde(borrow, default, rename = "resourceVersion")]
    resource_version: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default, rename = "continue")]
    cont: Option<std::borrow::Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ListPage<'a> {
    #[serde(borrow)]
    metadata: ListMeta<'a>,
    #[serde(borrow, default)]
    items: Vec<&'a RawValue>,
}

/// Whether a list item carries its own `kind` (custom resources' do).
#[derive(Deserialize)]
struct Typed<'a> {
    #[serde(borrow, default)]
    kind: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct WatchEvent<'a> {
    #[serde(rename = "type")]
    kind: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    object: &'a RawValue,
}

/// A JSON watch line of an object's change written as the apiserver writes
/// it (`{"type":"MODIFIED","object":` + the object + `}`): its type and what
/// should be the object, unchecked (its parse checks that it is all of it).
fn split_json_event(unit: &[u8]) -> Option<(&'static str, &[u8])> {
    const HEAD: &[u8] = b"{\"type\":\"";
    const OBJECT: &[u8] = b"\",\"object\":";
    let rest = unit.strip_prefix(HEAD)?;
    let (kind, rest) = ["ADDED", "MODIFIED", "DELETED"]
        .into_iter()
        .find_map(|k| Some((k, rest.strip_prefix(k.as_bytes())?.strip_prefix(OBJECT)?)))?;
    Some((kind, rest.strip_suffix(b"}")?))
}

/// One watch event, decoded as far as the cache needs.
pub enum Decoded {
    /// ADDED or MODIFIED: the object's new state.
    Put(&'static str, CachedObject),
    /// DELETED: its last state.
    Deleted(CachedObject),
    /// A BOOKMARK at this version; `end`: it ends a streaming list's initial
    /// events; `empty`: (protobuf, when asked) the type's empty object it
    /// carries, without annotations: the template of r8s's own bookmarks.
    Bookmark {
        /// Its resource version.
        rv: u64,
        /// Whether it ends a streaming list's initial events.
        end: bool,
        /// The type's empty object, when asked for.
        empty: Option<Bytes>,
    },
}

/// An object the upstream sent that the cache cannot hold: a resource
/// version that is not an integer makes the resource uncacheable; anything
/// else is malformed data (relist).
fn object_error(e: ObjectError) -> DecodeError {
    match e {
        ObjectError::BadResourceVersion(_) => DecodeError::Uncacheable(e),
        e => DecodeError::Malformed(e.to_string()),
    }
}

/// Reads one resource's list pages and watch events in one encoding.
pub struct Decoder {
    /// The resource's type (what objects are parsed as).
    pub info: TypeInfo,
    /// The upstream's bodies: JSON, or protobuf.
    pub encoding: Encoding,
}

impl Decoder {
    /// One LIST page into `objects`: its resource version and continue token.
    pub fn page(
        &mut self,
        body: &[u8],
        objects: &mut Objects,
        first: &mut bool,
    ) -> Result<(String, Option<String>), DecodeError> {
        match self.encoding {
            Encoding::Json => self.json_page(body, objects, first),
            Encoding::Protobuf => self.protobuf_page(body, objects),
        }
    }

    /// One JSON LIST page into `objects`: its resource version and continue token.
    fn json_page(
        &mut self,
        body: &[u8],
        objects: &mut Objects,
        first: &mut bool,
    ) -> Result<(String, Option<String>), DecodeError> {
        let page: ListPage =
            serde_json::from_slice(body).map_err(|e| DecodeError::Malformed(e.to_string()))?;
        if *first {
            // A top-level `kind`, not one inside (an owner reference's).
            self.info.items_typed = page.items.first().is_some_and(|i| {
                serde_json::from_str::<Typed>(i.get()).is_ok_and(|t| t.kind.is_some())
            });
            *first = false;
        }
        for item in &page.items {
            let o = self
                .info
                .parse(item.get().as_bytes())
                .map_err(object_error)?;
            objects.insert(o.key.clone(), Arc::new(o));
        }
        Ok((
            page.metadata
                .resource_version
                .as_deref()
                .unwrap_or("")
                .to_string(),
            page.metadata.cont.map(|c| c.into_owned()),
        ))
    }

    /// One protobuf LIST page (`k8s\0` + Unknown{raw: XList{1 ListMeta, 2 items}}).
    fn protobuf_page(
        &self,
        body: &[u8],
        objects: &mut Objects,
    ) -> Result<(String, Option<String>), DecodeError> {
        let bad = |e: pb::Malformed| DecodeError::Malformed(e.to_string());
        let u = pb::unwrap(body).map_err(bad)?;
        let (mut rv, mut cont) = (String::new(), None);
        for f in pb::fields(u.raw) {
            let f = f.map_err(bad)?;
            let pb::Value::Bytes(v) = f.value else {
                continue;
            };
            match f.number {
                1 => {
                    let text = |n| {
                        pb::find(v, n)
                            .map(|b| String::from_utf8_lossy(b.unwrap_or_default()).into_owned())
                            .map_err(bad)
                    };
                    rv = text(2)?;
                    cont = Some(text(3)?);
                }
                2 => {
                    let o = self.info.parse_protobuf(v, false).map_err(object_error)?;
                    objects.insert(o.key.clone(), Arc::new(o));
                }
                _ => {}
            }
        }
        Ok((rv, cont))
    }

    /// One watch event, decoded: its object parsed, a bookmark's version
    /// read (and with `want_empty`, a protobuf bookmark's empty object), an
    /// ERROR turned into what it means.
    pub fn event(&self, unit: &[u8], want_empty: bool) -> Result<Decoded, DecodeError> {
        // The line as the apiserver writes it: the object is parsed once,
        // not first skipped over by the envelope's parse. Anything else (or
        // an object that is not all of the rest: a field after it) takes
        // the envelope's parse, whose error is the one reported.
        if self.encoding == Encoding::Json
            && let Some((kind, object)) = split_json_event(unit)
        {
            let parsed = self.info.parse_event(object, Some(kind));
            if let Ok(o) = parsed {
                return Ok(match kind {
                    "DELETED" => Decoded::Deleted(o),
                    _ => Decoded::Put(kind, o),
                });
            }
        }
        let (kind, object, owned);
        match self.encoding {
            Encoding::Json => {
                let ev: WatchEvent = serde_json::from_slice(unit)
                    .map_err(|e| DecodeError::Malformed(e.to_string()))?;
                owned = ev.kind.into_owned();
                kind = owned.as_str();
                object = ev.object.get().as_bytes();
            }
            Encoding::Protobuf => {
                let (k, o) =
                    pb::watch_event(unit).map_err(|e| DecodeError::Malformed(e.to_string()))?;
                owned = String::from_utf8_lossy(k).into_owned();
                kind = owned.as_str();
                object = o;
            }
        }
        // Parsed inside the event as r8s's watchers will get it, so that
        // the event log shares the object's bytes with the store.
        let parse = |b: &[u8], kind: &'static str| match self.encoding {
            Encoding::Json => self.info.parse_event(b, Some(kind)),
            Encoding::Protobuf => self.info.parse_protobuf_event(b, kind),
        };
        let decoded = match kind {
            "ADDED" => Decoded::Put("ADDED", parse(object, "ADDED").map_err(object_error)?),
            "MODIFIED" => {
                Decoded::Put("MODIFIED", parse(object, "MODIFIED").map_err(object_error)?)
            }
            "DELETED" => Decoded::Deleted(parse(object, "DELETED").map_err(object_error)?),
            "BOOKMARK" => self.bookmark(object, want_empty)?,
            "ERROR" => return Err(self.watch_error(object)),
            other => {
                return Err(DecodeError::Malformed(format!(
                    "unknown watch event type {other:?}"
                )));
            }
        };
        Ok(decoded)
    }

    /// A BOOKMARK's version, whether it ends the initial events, and (asked
    /// for, protobuf) the type's empty object it is.
    fn bookmark(&self, object: &[u8], want_empty: bool) -> Result<Decoded, DecodeError> {
        let bad_rv = |s: &str| DecodeError::Malformed(format!("bookmark resourceVersion {s:?}"));
        match self.encoding {
            Encoding::Json => {
                let b: Bookmark = serde_json::from_slice(object)
                    .map_err(|e| DecodeError::Malformed(e.to_string()))?;
                let s = b.metadata.resource_version.as_deref().unwrap_or("");
                let rv: u64 = s.parse().map_err(|_| bad_rv(s))?;
                let end = b
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("k8s.io/initial-events-end"))
                    .map(String::as_str)
                    == Some("true");
                Ok(Decoded::Bookmark {
                    rv,
                    end,
                    empty: None,
                })
            }
            Encoding::Protobuf => {
                let bad = |e: pb::Malformed| DecodeError::Malformed(e.to_string());
                let u = pb::unwrap(object).map_err(bad)?;
                let meta = pb::find(u.raw, 1).map_err(bad)?.unwrap_or_default();
                let s =
                    String::from_utf8_lossy(pb::find(meta, 6).map_err(bad)?.unwrap_or_default());
                let rv: u64 = s.parse().map_err(|_| bad_rv(&s))?;
                let mut annotated = false;
                let mut end = false;
                for f in pb::fields(meta) {
                    let f = f.map_err(bad)?;
                    if let (12, pb::Value::Bytes(entry)) = (f.number, f.value) {
                        annotated = true;
                        end |= pb::find(entry, 1).map_err(bad)?
                            == Some(b"k8s.io/initial-events-end")
                            && pb::find(entry, 2).map_err(bad)? == Some(b"true");
                    }
                }
                // The type's empty object (a streaming list's last bookmark
                // is the same, annotated).
                let empty = match (want_empty, annotated) {
                    (false, _) => None,
                    (true, true) => Some(
                        pb::with_metadata(u.raw, rv, Some(&[]))
                            .map_err(bad)?
                            .freeze(),
                    ),
                    (true, false) => Some(Bytes::copy_from_slice(u.raw)),
                };
                Ok(Decoded::Bookmark { rv, end, empty })
            }
        }
    }

    /// What an ERROR event means: 410 relists, anything else retries.
    fn watch_error(&self, object: &[u8]) -> DecodeError {
        let (code, message) = match self.encoding {
            Encoding::Json => {
                let s: serde_json::Value = serde_json::from_slice(object).unwrap_or_default();
                (s["code"].as_u64(), s["message"].to_string())
            }
            Encoding::Protobuf => {
                let raw = pb::unwrap(object).map(|u| u.raw).unwrap_or_default();
                let code = match pb::find_path(raw, &[6]) {
                    Ok(Some(pb::Value::Varint(c))) => Some(c),
                    _ => None,
                };
                let message = pb::find(raw, 3).ok().flatten().unwrap_or_default();
                (code, format!("{:?}", String::from_utf8_lossy(message)))
            }
        };
        if code == Some(410) {
            DecodeError::Expired
        } else {
            DecodeError::Failed(format!("watch ERROR event: {message}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::status::Status;
    use bytes::BytesMut;

    fn decoder() -> Decoder {
        Decoder {
            info: TypeInfo::for_tests("Pod", "v1", "pods"),
            encoding: Encoding::Protobuf,
        }
    }

    fn pod(name: &str, rv: &str, annotations: &[(&str, &str)]) -> Vec<u8> {
        let mut meta = BytesMut::new();
        pb::bytes_field(&mut meta, 1, name.as_bytes());
        pb::bytes_field(&mut meta, 3, b"ns");
        pb::bytes_field(&mut meta, 6, rv.as_bytes());
        for (k, v) in annotations {
            let mut e = BytesMut::new();
            pb::bytes_field(&mut e, 1, k.as_bytes());
            pb::bytes_field(&mut e, 2, v.as_bytes());
            pb::bytes_field(&mut meta, 12, &e);
        }
        let mut raw = BytesMut::new();
        pb::bytes_field(&mut raw, 1, &meta);
        pb::bytes_field(&mut raw, 2, b"");
        raw.to_vec()
    }

    fn frame(kind: &str, raw: &[u8]) -> BytesMut {
        let body = pb::envelope("v1", "Pod", &[raw]);
        BytesMut::from(&pb::watch_frame(kind, &[&body])[..])
    }

    #[test]
    fn should_read_a_protobuf_page() {
        let (a, b) = (pod("a", "3", &[]), pod("b", "4", &[]));
        let meta = pb::list_meta("9", "next", None);
        let mut body = BytesMut::from(
            &pb::list_head(
                "v1",
                "PodList",
                &meta,
                pb::field_len(a.len()) + pb::field_len(b.len()),
            )[..],
        );
        pb::bytes_field(&mut body, 2, &a);
        pb::bytes_field(&mut body, 2, &b);
        body.extend_from_slice(pb::UNKNOWN_TAIL);
        let mut objects = Objects::new();
        let (rv, cont) = decoder().page(&body, &mut objects, &mut true).unwrap();
        assert_eq!((rv.as_str(), cont.as_deref()), ("9", Some("next")));
        assert_eq!(objects.len(), 2);
        assert_eq!(objects["ns/b"].raw(), &b[..]);
        let mut none = Objects::new();
        assert!(matches!(
            decoder().page(&body[..body.len() - 20], &mut none, &mut true),
            Err(DecodeError::Malformed(_))
        ));
    }

    /// Built-in types' list items carry no `kind`, though an owner
    /// reference inside them does; a custom resource's carry their own.
    #[test]
    fn should_learn_whether_list_items_carry_their_kind_from_the_top_level() {
        let page = |item: &str| {
            format!(
                r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"9"}},"items":[{item}]}}"#
            )
        };
        let owned = r#"{"metadata":{"name":"a","namespace":"ns","resourceVersion":"3","ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"r","uid":"u"}]},"spec":{}}"#;
        let typed = r#"{"apiVersion":"example.r8s.dev/v1","kind":"Widget","metadata":{"name":"a","namespace":"ns","resourceVersion":"3"}}"#;
        for (item, expected) in [(owned, false), (typed, true)] {
            let mut d = decoder();
            d.encoding = Encoding::Json;
            let mut objects = Objects::new();
            d.page(page(item).as_bytes(), &mut objects, &mut true)
                .unwrap();
            assert_eq!(d.info.items_typed, expected, "{item}");
        }
    }

    /// A JSON line as the apiserver writes it is parsed in one pass; any
    /// other layout of the same event reads the same; a broken one is an error.
    #[test]
    fn should_read_json_events_in_any_layout_and_refuse_broken_ones() {
        let d = Decoder {
            encoding: Encoding::Json,
            ..decoder()
        };
        let pod = r#"{"metadata":{"name":"a","namespace":"ns","resourceVersion":"5"},"spec":{"nodeName":"n"}}"#;
        let layouts = [
            format!(r#"{{"type":"MODIFIED","object":{pod}}}"#),
            format!(r#"{{ "type": "MODIFIED", "object": {pod} }}"#),
            format!(r#"{{"object":{pod},"type":"MODIFIED"}}"#),
            format!(r#"{{"type":"MODIFIED","object":{pod},"extra":{{"a":1}}}}"#),
        ];
        let mut bodies = Vec::new();
        for line in &layouts {
            match d.event(line.as_bytes(), false) {
                Ok(Decoded::Put("MODIFIED", o)) => {
                    assert_eq!((o.rv, &*o.key), (5, "ns/a"), "{line}");
                    bodies.push(o.body.clone());
                }
                _ => panic!("{line}"),
            }
        }
        assert!(bodies.iter().all(|b| b == &bodies[0]), "{bodies:?}");
        let deleted = format!(r#"{{"type":"DELETED","object":{pod}}}"#);
        assert!(matches!(d.event(deleted.as_bytes(), false), Ok(Decoded::Deleted(o)) if o.rv == 5));
        for broken in [
            format!(r#"{{"type":"MODIFIED","object":{pod}"#),
            format!(r#"{{"type":"MODIFIED","object":{pod}}}}}"#),
            r#"{"type":"MODIFIED","object":{"metadata":{"name":"a"}}}"#.to_string(), // no version
            r#"{"type":"MODIFIED","object":null}"#.to_string(),
            format!(
                r#"{{"type":"MODIFIED","object":{}}}"#,
                &pod[..pod.len() - 1]
            ),
        ] {
            assert!(d.event(broken.as_bytes(), false).is_err(), "{broken}");
        }
    }

    #[test]
    fn should_read_protobuf_events_bookmarks_and_errors() {
        let d = decoder();
        let mut buf = frame("MODIFIED", &pod("a", "5", &[]));
        let unit = pb::next_frame_raw(&mut buf).unwrap();
        assert!(matches!(d.event(&unit, false), Ok(Decoded::Put("MODIFIED", o)) if o.rv == 5));
        // The end of a streaming list's initial events: its template without annotations.
        let end = pod("", "7", &[("k8s.io/initial-events-end", "true")]);
        let unit = pb::next_frame_raw(&mut frame("BOOKMARK", &end)).unwrap();
        let Ok(Decoded::Bookmark {
            rv,
            end: true,
            empty: Some(e),
        }) = d.event(&unit, true)
        else {
            panic!("the annotated bookmark");
        };
        assert_eq!((rv, &e[..]), (7, &pod("", "7", &[])[..]));
        // ERROR events: 410 relists, others retry.
        let gone = Status::expired("too old resource version: 1 (5)").to_protobuf();
        let unit = pb::next_frame_raw(&mut BytesMut::from(&pb::watch_frame("ERROR", &[&gone])[..]))
            .unwrap();
        assert!(matches!(d.event(&unit, false), Err(DecodeError::Expired)));
        let other = Status::internal("boom").to_protobuf();
        let unit = pb::next_frame_raw(&mut BytesMut::from(
            &pb::watch_frame("ERROR", &[&other])[..],
        ))
        .unwrap();
        assert!(matches!(d.event(&unit, false), Err(DecodeError::Failed(m)) if m.contains("boom")));
        // Garbage is malformed (the reflector relists), never applied.
        let unit = pb::next_frame_raw(&mut BytesMut::from(&[0, 0, 0, 2, 0x0a, 0x09][..])).unwrap();
        assert!(matches!(
            d.event(&unit, false),
            Err(DecodeError::Malformed(_))
        ));
        let mut junk = frame("ADDED", b"\x0a\x03abc");
        let unit = pb::next_frame_raw(&mut junk).unwrap();
        assert!(matches!(
            d.event(&unit, false),
            Err(DecodeError::Malformed(_))
        ));
    }
}
