//! A watch asked for as a Table (`kubectl get -w`): every event a Table of
//! one row, its `resourceVersion` the object's, as kube-apiserver's watch
//! encoder writes them (`watchEmbeddedEncoder` in `pkg/endpoints/handlers/
//! watch.go`): the column definitions with the first event only (`null`
//! after it), ages as of the moment each is written.
//!
//! A BOOKMARK is the printer's row of the empty object the apiserver sends
//! (only its `resourceVersion`), carrying `includeObject`'s form of that
//! object; the one that ends a streaming list's initial events carries its
//! `PartialObjectMetadata` whatever `includeObject` says, so the client
//! sees the annotation (as Kubernetes 1.36 answers).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use bytes::{BufMut, Bytes, BytesMut};

use super::super::table::{Include, TableAsk};
use crate::cache::object::CachedObject;
use crate::codec::json::WATCH_LINE_TAIL;
use crate::table::{self, Printer, Row, RowObject};

/// How a Table watch prints its events, and whether its column definitions
/// went out (with the first line it writes, whatever its type).
pub(super) struct TableLines {
    ask: TableAsk,
    /// Set once the first line is written. Atomic only so that the watcher
    /// stays `Sync`; one task writes it.
    headed: AtomicBool,
}

impl TableLines {
    /// A watch's Table lines, printed as `ask` says.
    pub(super) fn new(ask: TableAsk) -> Self {
        TableLines {
            ask,
            headed: AtomicBool::new(false),
        }
    }

    /// An event's line: `{"type":…,"object":<a Table of one row>}`; `None`
    /// when the object does not print (the printer cannot read it).
    pub(super) fn event(&self, kind: &str, o: &CachedObject) -> Option<Bytes> {
        let row = o.row(&self.ask.printer)?;
        Some(self.line(kind, o.rv, row, self.ask.object(o)))
    }

    /// A BOOKMARK at `rv` (`initial_end`: the one that ends a streaming
    /// list's initial events), the watched `kind` and `api_version` being
    /// what the empty object says it is.
    pub(super) fn bookmark(
        &self,
        kind: &str,
        api_version: &str,
        rv: u64,
        initial_end: bool,
    ) -> Bytes {
        let annotations = if initial_end {
            r#","annotations":{"k8s.io/initial-events-end":"true"}"#
        } else {
            ""
        };
        let meta = format!(r#"{{"resourceVersion":"{rv}"{annotations}}}"#);
        let object = match self.ask.printer {
            // A custom resource's empty object is a map: its keys in order,
            // as 1.36 writes it.
            Printer::Custom(_) => {
                let annotations = if initial_end {
                    r#""annotations":{"k8s.io/initial-events-end":"true"},"#
                } else {
                    ""
                };
                format!(
                    r#"{{"apiVersion":"{api_version}","kind":"{kind}","metadata":{{{annotations}"resourceVersion":"{rv}"}}}}"#
                )
            }
            Printer::Builtin { .. } => {
                format!(r#"{{"kind":"{kind}","apiVersion":"{api_version}","metadata":{meta}}}"#)
            }
        };
        // Every printer prints an empty object (a test holds them to it);
        // one that did not would still get its empty row.
        let row = self
            .ask
            .printer
            .row(object.as_bytes())
            .unwrap_or_else(|| Row {
                cells: Vec::new(),
                condition: None,
            });
        let carried = match self.ask.include {
            Include::None if !initial_end => RowObject::None,
            Include::Object => RowObject::Object(object.as_bytes()),
            _ => RowObject::Metadata(meta.as_bytes()),
        };
        self.line("BOOKMARK", rv, &row, carried)
    }

    fn line(&self, kind: &str, rv: u64, row: &Row, object: RowObject) -> Bytes {
        let columns = self.ask.printer.columns();
        let first = !self.headed.swap(true, Ordering::Relaxed);
        let mut out = BytesMut::with_capacity(256 + if first { 600 * columns.len() } else { 0 });
        out.put_slice(b"{\"type\":\"");
        out.put_slice(kind.as_bytes());
        out.put_slice(b"\",\"object\":");
        let api_version = self.ask.api_version;
        table::put_head(
            &mut out,
            api_version,
            rv,
            None,
            None,
            first.then_some(columns),
        );
        table::put_row(&mut out, row, object, api_version, SystemTime::now());
        out.put_slice(b"]}");
        out.put_slice(WATCH_LINE_TAIL);
        out.freeze()
    }
}
