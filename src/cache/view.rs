//! What an answer shows of each cached object: the object or only its
//! metadata (`PartialObjectMetadata`), with or without
//! `metadata.managedFields` (`drop=metadata.managedFields`, KEP-5958).
//!
//! Every form is cut from the one copy of the upstream's bytes, never
//! re-serialized: [`CachedObject::managed`] says where the field lies
//! (with the comma that joins it, in JSON; the run of `ObjectMeta` field 17
//! records, in protobuf), so an answer without it is the bytes before and
//! after, and in protobuf the two length prefixes that enclose it written
//! anew. What the answer is, byte for byte, is what an apiserver whose
//! encoder skipped the field writes.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};

use super::object::CachedObject;
use crate::api::media::{Encoding, MediaType, Shape};
use crate::codec::json::{self, ListItem};
use crate::codec::protobuf as pb;
use crate::codec::run::{self, Form, Memo};

/// How an answer shows each object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct View {
    /// Only its metadata: a `PartialObjectMetadata`.
    pub metadata: bool,
    /// Without `metadata.managedFields`.
    pub drop_managed: bool,
}

impl View {
    /// The object as cached.
    pub const OBJECT: View = View {
        metadata: false,
        drop_managed: false,
    };
    /// Its `PartialObjectMetadata`.
    pub const METADATA: View = View {
        metadata: true,
        drop_managed: false,
    };
    /// The object without managedFields.
    pub const DROPPED: View = View {
        metadata: false,
        drop_managed: true,
    };

    /// What a negotiated media type shows.
    pub fn of(media: MediaType) -> View {
        View {
            metadata: media.shape != Shape::Object,
            drop_managed: media.drop_managed_fields,
        }
    }

    /// Which of four it is (0: the object; 1: its metadata; 2 and 3: the
    /// same without managedFields), for per-form slots.
    pub fn index(self) -> usize {
        usize::from(self.metadata) | usize::from(self.drop_managed) << 1
    }

    /// The [`run`] form of a list's items in this view.
    fn list_form(self) -> Form {
        self.index()
    }
}

/// A protobuf object's raw without managedFields, in the pieces it is
/// written from: before `ObjectMeta`, its new length, its fields before and
/// after the cut, the object's fields after it.
struct RawCut<'a> {
    before: &'a [u8],
    meta_len: usize,
    meta: [&'a [u8]; 2],
    after: &'a [u8],
}

impl RawCut<'_> {
    fn len(&self) -> usize {
        self.before.len() + pb::field_len(self.meta_len) + self.after.len()
    }

    fn write(&self, out: &mut BytesMut) {
        out.put_slice(self.before);
        pb::field_head(out, 1, self.meta_len);
        out.put_slice(self.meta[0]);
        out.put_slice(self.meta[1]);
        out.put_slice(self.after);
    }
}

impl CachedObject {
    /// Whether it carries `metadata.managedFields` (a `drop` answer differs).
    pub fn has_managed_fields(&self) -> bool {
        self.managed.1 > 0
    }

    /// The cut to make for `drop`: where managedFields lie and how long.
    fn cut(&self, drop: bool) -> Option<(usize, usize)> {
        (drop && self.has_managed_fields())
            .then_some((self.managed.0 as usize, self.managed.1 as usize))
    }

    /// The `metadata` value in two pieces: without managedFields when
    /// `drop` (the second empty when nothing is cut).
    fn meta_pieces(&self, drop: bool) -> [&[u8]; 2] {
        let (at, len) = (self.meta.0 as usize, self.meta.1 as usize);
        match self.cut(drop) {
            Some((c, l)) => [&self.body[at..c], &self.body[c + l..at + len]],
            None => [&self.body[at..at + len], &[]],
        }
    }

    /// The metadata's length in `view`.
    fn meta_len(&self, drop: bool) -> usize {
        self.meta.1 as usize - self.cut(drop).map_or(0, |(_, l)| l)
    }

    /// A protobuf object's raw without managedFields (the parser made sure
    /// the lengths before the metadata and the raw are minimal varints, so
    /// where they start is known from their values).
    fn raw_cut(&self, c: usize, l: usize) -> RawCut<'_> {
        let (m0, mlen) = (self.meta.0 as usize, self.meta.1 as usize);
        let head = pb::field_len(mlen) - mlen;
        let end = self.body.len() - pb::UNKNOWN_TAIL.len();
        RawCut {
            before: &self.body[self.item_skip..m0 - head],
            meta_len: mlen - l,
            meta: [&self.body[m0..c], &self.body[c + l..m0 + mlen]],
            after: &self.body[m0 + mlen..end],
        }
    }

    /// A protobuf body whose raw is `raw`: this body's envelope (its raw's
    /// length written anew), the raw, the envelope's tail.
    fn enveloped(&self, raw: &RawCut<'_>) -> Bytes {
        let old = self.body.len() - pb::UNKNOWN_TAIL.len() - self.item_skip;
        let prefix = &self.body[..self.item_skip - (pb::field_len(old) - old)];
        let len = raw.len();
        let mut out = BytesMut::with_capacity(prefix.len() + pb::field_len(len) + 4);
        out.put_slice(prefix);
        pb::field_head(&mut out, 2, len);
        raw.write(&mut out);
        out.put_slice(pb::UNKNOWN_TAIL);
        out.freeze()
    }

    /// A JSON object's pieces in `view` (empty pieces at the end).
    fn json_pieces(&self, view: View) -> [&[u8]; 4] {
        if view.metadata {
            let [a, b] = self.meta_pieces(view.drop_managed);
            return [json::PARTIAL_OBJECT_METADATA_HEAD, a, b, b"}"];
        }
        match self.cut(view.drop_managed) {
            Some((c, l)) => [&self.body[..c], &self.body[c + l..], &[], &[]],
            None => [&self.body, &[], &[], &[]],
        }
    }

    /// Its body as a GET answers it in `view`, in its encoding.
    pub fn body_as(&self, view: View) -> Bytes {
        match (self.encoding, view.metadata, self.cut(view.drop_managed)) {
            (_, false, None) => self.body.clone(),
            (Encoding::Json, ..) => Bytes::from(self.json_pieces(view).concat()),
            (Encoding::Protobuf, false, Some((c, l))) => self.enveloped(&self.raw_cut(c, l)),
            (Encoding::Protobuf, true, _) => {
                let [a, b] = self.meta_pieces(view.drop_managed);
                let head = pb::partial_object_metadata_head(a.len() + b.len());
                pb::envelope(
                    json::META_API_VERSION,
                    "PartialObjectMetadata",
                    &[&head, a, b],
                )
            }
        }
    }

    /// Its `PartialObjectMetadata` as a get answers it, in its encoding:
    /// the metadata bytes cut from the object, never re-serialized.
    pub fn metadata_body(&self) -> Bytes {
        self.body_as(View::METADATA)
    }

    /// A watch event of type `kind` carrying this object in `view`, framed
    /// in its encoding: a JSON line, or a length-prefixed protobuf `WatchEvent`.
    pub fn watch_event_as(&self, kind: &str, view: View) -> Bytes {
        match (self.encoding, view.metadata) {
            (Encoding::Json, _) => json::watch_line_of(kind, &self.json_pieces(view)),
            (Encoding::Protobuf, false) => pb::watch_frame(kind, &[&self.body_as(view)]),
            (Encoding::Protobuf, true) => {
                let [a, b] = self.meta_pieces(view.drop_managed);
                let raw_head = pb::partial_object_metadata_head(a.len() + b.len());
                let head = pb::envelope_head(
                    json::META_API_VERSION,
                    "PartialObjectMetadata",
                    raw_head.len() + a.len() + b.len(),
                );
                pb::watch_frame(kind, &[&head, &raw_head, a, b, pb::UNKNOWN_TAIL])
            }
        }
    }

    /// A watch event of type `kind` carrying this object (or, with
    /// `metadata_only`, its `PartialObjectMetadata`).
    pub fn watch_event(&self, kind: &str, metadata_only: bool) -> Bytes {
        let view = if metadata_only {
            View::METADATA
        } else {
            View::OBJECT
        };
        self.watch_event_as(kind, view)
    }

    /// [`ListItem::item_len`] of its list item in `view`.
    pub fn item_len_as(&self, view: View) -> usize {
        let cut = self.cut(view.drop_managed).map_or(0, |(_, l)| l);
        match (self.encoding, view.metadata) {
            (Encoding::Json, false) => self.body.len() + 1 - cut,
            (Encoding::Json, true) => {
                self.meta_len(view.drop_managed) + json::PARTIAL_OBJECT_METADATA_HEAD.len() + 2
            }
            (Encoding::Protobuf, false) => match self.cut(view.drop_managed) {
                Some((c, l)) => pb::field_len(self.raw_cut(c, l).len()),
                None => pb::field_len(self.raw().len()),
            },
            (Encoding::Protobuf, true) => {
                pb::field_len(pb::field_len(self.meta_len(view.drop_managed)))
            }
        }
    }

    /// Appends its item of a list in `view`: built-ins' JSON items drop
    /// `kind`/`apiVersion`, as the apiserver does; a protobuf item is the
    /// object's raw (field 2 of the list).
    pub fn write_item_as(&self, view: View, out: &mut BytesMut) {
        match (self.encoding, view.metadata) {
            (Encoding::Json, false) => {
                out.put_u8(b'{');
                match self.cut(view.drop_managed) {
                    Some((c, l)) => {
                        out.put_slice(&self.body[self.item_skip..c]);
                        out.put_slice(&self.body[c + l..]);
                    }
                    None => out.put_slice(&self.body[self.item_skip..]),
                }
            }
            (Encoding::Json, true) => {
                for part in self.json_pieces(view) {
                    out.put_slice(part);
                }
            }
            (Encoding::Protobuf, false) => match self.cut(view.drop_managed) {
                Some((c, l)) => {
                    let raw = self.raw_cut(c, l);
                    pb::field_head(out, 2, raw.len());
                    raw.write(out);
                }
                None => {
                    let raw = self.raw();
                    pb::field_head(out, 2, raw.len());
                    out.put_slice(raw);
                }
            },
            (Encoding::Protobuf, true) => {
                let [a, b] = self.meta_pieces(view.drop_managed);
                let n = a.len() + b.len();
                pb::field_head(out, 2, pb::field_len(n));
                pb::field_head(out, 1, n);
                out.put_slice(a);
                out.put_slice(b);
            }
        }
    }
}

/// Lists of the objects as cached stream straight from them.
impl ListItem for CachedObject {
    fn item_len(&self) -> usize {
        self.item_len_as(View::OBJECT)
    }

    fn write_item(&self, out: &mut BytesMut) {
        self.write_item_as(View::OBJECT, out)
    }

    fn memo(&self) -> Option<(&Memo, Form)> {
        Some((&self.memo, run::OBJECT))
    }
}

/// An object as a list in another view than the object as cached shows
/// it: a `PartialObjectMetadataList`'s item, an item without managedFields.
pub struct Shown {
    /// The object.
    pub object: Arc<CachedObject>,
    /// How it is shown.
    pub view: View,
}

impl ListItem for Shown {
    fn item_len(&self) -> usize {
        self.object.item_len_as(self.view)
    }

    fn write_item(&self, out: &mut BytesMut) {
        self.object.write_item_as(self.view, out)
    }

    fn memo(&self) -> Option<(&Memo, Form)> {
        Some((&self.object.memo, self.view.list_form()))
    }
}

/// An object as a streaming list's initial ADDED event, one of a run of
/// them compressed for gzip streaming lists.
pub struct AddedItem {
    /// The object.
    pub object: Arc<CachedObject>,
    /// How it is shown.
    pub view: View,
}

impl ListItem for AddedItem {
    fn item_len(&self) -> usize {
        self.object.body.len() + 32
    }

    fn write_item(&self, out: &mut BytesMut) {
        out.extend_from_slice(&self.object.watch_event_as("ADDED", self.view));
    }

    fn memo(&self) -> Option<(&Memo, Form)> {
        Some((&self.object.memo, run::watch(self.view.list_form())))
    }
}

#[cfg(test)]
mod tests;
