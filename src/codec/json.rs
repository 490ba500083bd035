//! JSON lists streamed from pre-serialized items.
//!
//! A list response is the envelope head, then the items' stored bytes joined
//! by commas, then `]}`; it is written in chunks of about [`CHUNK`] bytes
//! straight from the cache version it reads, so an in-flight list of any size
//! costs one chunk of memory, not a copy of the whole list.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body as HttpBody, Frame, SizeHint};

use crate::body::BoxError;

/// Target size of one streamed chunk.
pub const CHUNK: usize = 64 * 1024;

/// One item of a streamed list, already serialized.
pub trait ListItem {
    /// About how many bytes [`ListItem::write_item`] writes (to decide on compression).
    fn item_len(&self) -> usize;
    /// Appends the item as it appears in a list's `items`.
    fn write_item(&self, out: &mut BytesMut);
}

/// A list response: envelope head (through `"items":[`) and its items.
pub struct ListBody<T> {
    head: Option<Bytes>,
    items: std::vec::IntoIter<Arc<T>>,
    first: bool,
    done: bool,
}

impl<T: ListItem> ListBody<T> {
    /// A list of `items` after `head`.
    pub fn new(head: Bytes, items: Vec<Arc<T>>) -> Self {
        ListBody {
            head: Some(head),
            items: items.into_iter(),
            first: true,
            done: false,
        }
    }

    /// About how many bytes the whole list is (to decide on compression).
    pub fn estimated_len(&self) -> usize {
        self.head.as_ref().map_or(0, Bytes::len)
            + self
                .items
                .as_slice()
                .iter()
                .map(|o| o.item_len())
                .sum::<usize>()
    }

    /// The next chunk, or `None` at the end.
    pub fn next_chunk(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        let mut out = BytesMut::with_capacity(CHUNK + 4096);
        if let Some(h) = self.head.take() {
            out.extend_from_slice(&h);
        }
        while out.len() < CHUNK {
            match self.items.next() {
                Some(o) => {
                    if !self.first {
                        out.extend_from_slice(b",");
                    }
                    self.first = false;
                    o.write_item(&mut out);
                }
                None => {
                    out.extend_from_slice(b"]}");
                    self.done = true;
                    break;
                }
            }
        }
        Some(out.freeze())
    }

    /// The whole list in one buffer (the slow paths: pretty-printing, gzip).
    pub fn collect(mut self) -> Bytes {
        let mut all = BytesMut::new();
        while let Some(c) = self.next_chunk() {
            all.extend_from_slice(&c);
        }
        all.freeze()
    }
}

impl<T: ListItem> HttpBody for ListBody<T> {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Poll::Ready(self.next_chunk().map(|b| Ok(Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

/// One JSON watch-stream line: `{"type":T,"object":OBJ}` and a newline, as
/// kube-apiserver frames watch events.
pub fn watch_line(kind: &str, object: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(object.len() + kind.len() + 24);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    out.extend_from_slice(object);
    out.extend_from_slice(b"}\n");
    out.freeze()
}

/// Responses at least this large are gzipped for clients that accept it
/// (kube-apiserver's threshold).
pub const GZIP_MIN: usize = 128 * 1024;

/// A [`ListBody`] gzipped chunk by chunk.
pub struct GzipListBody<T> {
    list: Option<ListBody<T>>,
    enc: Option<flate2::write::GzEncoder<Vec<u8>>>,
}

impl<T: ListItem> GzipListBody<T> {
    /// Compresses `list` as it streams.
    pub fn new(list: ListBody<T>) -> Self {
        GzipListBody {
            list: Some(list),
            enc: Some(flate2::write::GzEncoder::new(
                Vec::new(),
                flate2::Compression::fast(),
            )),
        }
    }
}

impl<T: ListItem> HttpBody for GzipListBody<T> {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        use std::io::Write;
        let this = &mut *self;
        loop {
            let Some(enc) = this.enc.as_mut() else {
                return Poll::Ready(None);
            };
            match this.list.as_mut().and_then(ListBody::next_chunk) {
                Some(chunk) => {
                    if let Err(e) = enc.write_all(&chunk) {
                        return Poll::Ready(Some(Err(e.into())));
                    }
                    let out = std::mem::take(enc.get_mut());
                    if !out.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
                    }
                }
                None => {
                    this.list = None;
                    let enc = this.enc.take().expect("checked above");
                    return Poll::Ready(Some(
                        enc.finish()
                            .map(|v| Frame::data(Bytes::from(v)))
                            .map_err(Into::into),
                    ));
                }
            }
        }
    }
}

/// Gzips a whole buffer.
pub fn gzip(bytes: &[u8]) -> Bytes {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(bytes.len() / 4),
        flate2::Compression::fast(),
    );
    let _ = enc.write_all(bytes);
    Bytes::from(enc.finish().unwrap_or_default())
}

/// The `BOOKMARK` that ends a streaming list's initial events, as current
/// kube-apiserver sends it: annotated `k8s.io/initial-events-end: "true"` and
/// `k8s.io/initial-events-list-blueprint`, the base64 of an empty list of the
/// watched kind in the response's encoding (client-go builds its list from it).
pub fn initial_events_end(kind: &str, api_version: &str, rv: u64) -> Bytes {
    use base64::Engine;
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    // Built-in kinds are encoded from typed Go structs, custom ones from maps
    // (sorted keys, an empty `items` array).
    let builtin = !group.contains('.') || group.ends_with(".k8s.io");
    let blueprint = if builtin {
        format!(
            r#"{{"kind":"{kind}List","apiVersion":"{api_version}","metadata":{{}},"items":null}}"#
        )
    } else {
        format!(r#"{{"apiVersion":"{api_version}","items":[],"kind":"{kind}List"}}"#)
    } + "\n";
    let b64 = base64::engine::general_purpose::STANDARD.encode(blueprint);
    let obj = format!(
        r#"{{"kind":"{kind}","apiVersion":"{api_version}","metadata":{{"resourceVersion":"{rv}","annotations":{{"k8s.io/initial-events-end":"true","k8s.io/initial-events-list-blueprint":"{b64}"}}}}}}"#
    );
    watch_line("BOOKMARK", obj.as_bytes())
}

/// A periodic `BOOKMARK`: the watched kind with only its resource version.
pub fn bookmark(kind: &str, api_version: &str, rv: u64) -> Bytes {
    let obj = format!(
        r#"{{"kind":"{kind}","apiVersion":"{api_version}","metadata":{{"resourceVersion":"{rv}"}}}}"#
    );
    watch_line("BOOKMARK", obj.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// An item stored as its list form.
    struct Item(Bytes);

    impl ListItem for Item {
        fn item_len(&self) -> usize {
            self.0.len() + 1
        }
        fn write_item(&self, out: &mut BytesMut) {
            out.extend_from_slice(&self.0);
        }
    }

    #[test]
    fn should_stream_and_gzip_the_same_list() {
        let items: Vec<Arc<Item>> = (0..2000)
            .map(|i| {
                let j = format!(r#"{{"metadata":{{"name":"c{i:05}","namespace":"a","resourceVersion":"{i}"}},"data":{{"k":"{}"}}}}"#, "v".repeat(100));
                Arc::new(Item(Bytes::from(j)))
            })
            .collect();
        let head = Bytes::from_static(br#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"9"},"items":["#);
        let plain = ListBody::new(head.clone(), items.clone()).collect();
        let v: serde_json::Value = serde_json::from_slice(&plain).unwrap();
        assert_eq!(v["items"].as_array().unwrap().len(), 2000);
        let mut gz = GzipListBody::new(ListBody::new(head, items));
        let mut compressed = Vec::new();
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        while let Poll::Ready(Some(Ok(f))) = Pin::new(&mut gz).poll_frame(&mut cx) {
            compressed.extend_from_slice(&f.into_data().unwrap());
        }
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&compressed[..])
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, plain.to_vec());
        assert!(compressed.len() < plain.len() / 4);
    }

    #[test]
    fn should_end_initial_events_with_the_apiservers_list_blueprint() {
        use base64::Engine;
        let line = super::initial_events_end("Pod", "v1", 42);
        let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(v["type"], "BOOKMARK");
        let a = &v["object"]["metadata"]["annotations"];
        assert_eq!(a["k8s.io/initial-events-end"], "true");
        assert_eq!(v["object"]["metadata"]["resourceVersion"], "42");
        let raw = base64::engine::general_purpose::STANDARD
            .decode(a["k8s.io/initial-events-list-blueprint"].as_str().unwrap())
            .unwrap();
        let list: serde_json::Value = serde_json::from_slice(&raw).unwrap();
        assert_eq!(list["kind"], "PodList");
        assert_eq!(list["apiVersion"], "v1");
        assert!(
            list["items"].is_null(),
            "an empty typed list, as Go encodes it"
        );
        let crd = super::initial_events_end("Widget", "example.r8s.dev/v1", 7);
        let v: serde_json::Value = serde_json::from_slice(&crd).unwrap();
        let raw = base64::engine::general_purpose::STANDARD
            .decode(
                v["object"]["metadata"]["annotations"]["k8s.io/initial-events-list-blueprint"]
                    .as_str()
                    .unwrap(),
            )
            .unwrap();
        assert_eq!(
            std::str::from_utf8(&raw).unwrap(),
            "{\"apiVersion\":\"example.r8s.dev/v1\",\"items\":[],\"kind\":\"WidgetList\"}\n"
        );
    }
}
