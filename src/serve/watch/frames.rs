//! What a watcher writes, in its encoding and form: each event's line as
//! it concerns this watcher's filter, its bookmarks and errors, framed for
//! a gzip stream where it is one; a Table watch's printed (`table`).

use bytes::Bytes;

use super::watcher::Watcher;
use crate::api::media::Encoding;
use crate::api::status::Status;
use crate::cache::history::{Event, EventKind};
use crate::cache::object::CachedObject;
use crate::codec::gzip;
use crate::codec::json::{META_API_VERSION, bookmark, initial_events_end, watch_line};
use crate::codec::protobuf as pb;
use crate::metrics::WatchEnd;

impl Watcher {
    /// The type an event has for this watcher, per kube-apiserver's
    /// cacher: an object entering the filter is ADDED, one leaving it is
    /// DELETED (its previous state at the event's version); `None` when it
    /// does not concern the watcher.
    fn kind_for(&self, ev: &Event) -> Option<EventKind> {
        if self.filter.everything() {
            return Some(ev.kind);
        }
        let cur = ev.kind != EventKind::Deleted && self.filter.passes(&ev.object);
        let old = ev.prev.as_ref().is_some_and(|p| self.filter.passes(p));
        match (cur, old) {
            (true, true) => Some(ev.kind),
            (true, false) => Some(EventKind::Added),
            (false, true) => Some(EventKind::Deleted),
            (false, false) => None,
        }
    }

    /// The line this watcher sends for an event, and its type for this
    /// watcher: encoded once per event for every watcher of its form; a
    /// Table watch's printed for it. `Err` when a Table watch cannot print
    /// the object (the watch cannot go on without it).
    pub(super) fn line_for(&self, ev: &Event) -> Result<Option<(Bytes, EventKind)>, WatchEnd> {
        let Some(kind) = self.kind_for(ev) else {
            return Ok(None);
        };
        let Some(table) = &self.table else {
            return Ok(ev.line(self.view, kind).map(|l| (l.clone(), kind)));
        };
        let Some(object) = ev.object_as(kind) else {
            return Ok(None);
        };
        match table.event(kind.as_str(), &object) {
            Some(line) => Ok(Some((line, kind))),
            None => Err(self.unprintable(&object)),
        }
    }

    fn unprintable(&self, o: &CachedObject) -> WatchEnd {
        tracing::error!(
            resource = %self.cache.label,
            key = %o.key,
            "a Table watch's printer cannot read an object; ending the watch"
        );
        WatchEnd::Error
    }

    /// The `kind` and `apiVersion` of what this watcher is sent.
    fn sent_type(&self) -> (&str, String) {
        if self.view.metadata {
            ("PartialObjectMetadata", META_API_VERSION.to_string())
        } else {
            (
                &self.cache.resource.kind,
                self.cache.resource.gvr.api_version(),
            )
        }
    }

    pub(super) fn bookmark_line(&self, rv: u64) -> Bytes {
        self.bookmark(rv, false)
    }

    /// A BOOKMARK at `rv` in this watcher's encoding and form; `initial_end`:
    /// the one ending a streaming list's initial events (annotated as the
    /// upstream's version does). A protobuf bookmark is the upstream's own
    /// empty object of the type where one has been seen.
    pub(super) fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let (kind, api_version) = self.sent_type();
        if let Some(table) = &self.table {
            return table.bookmark(kind, &api_version, rv, initial_end);
        }
        if self.store.encoding() == Encoding::Json {
            return if initial_end {
                initial_events_end(kind, &api_version, rv, self.initial_end)
            } else {
                bookmark(kind, &api_version, rv)
            };
        }
        let template = match self.view.metadata {
            false => self.store.empty_object(),
            // PartialObjectMetadata{1 ObjectMeta}: the type's empty metadata.
            true => self.store.empty_object().and_then(|raw| {
                let meta = pb::find(&raw, 1).ok().flatten()?;
                let mut m = bytes::BytesMut::new();
                pb::bytes_field(&mut m, 1, meta);
                Some(m.freeze())
            }),
        };
        let initial_end = initial_end.then_some(self.initial_end);
        let body = pb::bookmark(template.as_deref(), &api_version, kind, rv, initial_end);
        pb::watch_frame("BOOKMARK", &[&body])
    }

    /// An ERROR event carrying `s`, in this watcher's encoding.
    pub(super) fn error_line(&self, s: &Status) -> Bytes {
        match self.store.encoding() {
            Encoding::Json => watch_line("ERROR", &s.to_bytes()),
            Encoding::Protobuf => pb::watch_frame("ERROR", &[&s.to_protobuf()]),
        }
    }

    /// A line of this watcher's own (a bookmark, an error) as it goes on
    /// the wire: as is, or in a gzip stream as stored deflate blocks.
    pub(super) fn framed(&mut self, line: Bytes) -> Bytes {
        match &mut self.gz {
            Some(crc) => gzip::stored(&line, crc),
            None => line,
        }
    }

    /// An initial ADDED for a cached object, in this watcher's form (`Err`
    /// as [`Watcher::line_for`]).
    pub(super) fn added_line(&self, o: &CachedObject) -> Result<Bytes, WatchEnd> {
        match &self.table {
            Some(table) => table.event("ADDED", o).ok_or_else(|| self.unprintable(o)),
            None => Ok(o.watch_event_as("ADDED", self.view)),
        }
    }
}
