//! gzip of list responses, compressed once and reused between changes.
//!
//! Between two changes a list is the same bytes for every client, so most of
//! its compressed form can be too. A list's items are cut into *runs* before
//! each item whose key hashes to a boundary (content-defined: adding or
//! removing an object moves no other boundary), about [`RUN_MEAN`] items
//! each. A run is deflated once at [`RUN_LEVEL`], primed with the
//! [`WINDOW`] bytes of items before it as its dictionary and ended with a
//! sync flush, so its bytes continue any deflate stream whose last
//! [`WINDOW`] plain bytes are those items; its CRC-32 is combined into the
//! stream's. It is kept on its first item ([`Memo`]), so it lives exactly as
//! long as that object does, and is checked against the items around it
//! (their serials) each time it is spliced: a changed item, or a changed
//! neighbour within the window, makes it compressed again, by the next list
//! that needs it.
//!
//! What cannot be spliced is compressed live at [`LIVE_LEVEL`]: the list's
//! head (it carries the list's resourceVersion), the first [`WINDOW`] bytes
//! after a gap (a page's start, a filtered-out neighbour), a selector's
//! sparse matches, the last item (no separator follows it). After a spliced
//! run the live compressor starts again primed with the plain bytes before
//! it, so the whole answer is one gzip member any client reads. Only lists of
//! contiguous items (no selector) compress runs for reuse; filtered lists
//! reuse those that fit.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use flate2::{Compress, Compression, FlushCompress, Status};
use http_body::{Body as HttpBody, Frame, SizeHint};

use super::crc::{PieceCrc, StreamCrc};
use super::json::{CHUNK, ListBody, ListItem};
use super::run::Run;
use crate::body::BoxError;

/// How far back deflate refers: a run's dictionary, and what must precede it.
pub const WINDOW: usize = 32 * 1024;

/// The deflate level runs are compressed at, once per change.
pub const RUN_LEVEL: u32 = 6;

/// The deflate level of what is compressed per request.
pub const LIVE_LEVEL: u32 = 2;

/// The gzip member header: deflate, no name, no mtime, unknown OS (as Go's).
pub const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

/// A piece of a gzip stream made once and sent in many streams: deflate
/// blocks that refer to nothing before them and end on a byte boundary
/// (a watch event, compressed once for all its watchers), and the CRC-32 of
/// the bytes they hold, to be combined into each stream's.
#[derive(Debug)]
pub struct Block {
    /// The deflate blocks.
    pub deflate: Bytes,
    /// The CRC-32 of the plain bytes, ready to append.
    pub crc: PieceCrc,
}

/// Compresses `plain` on its own into a [`Block`] at [`RUN_LEVEL`] (a
/// compressor per thread, started over each time).
pub fn block(plain: &[u8]) -> Block {
    thread_local! {
        static Z: std::cell::RefCell<Compress> =
            std::cell::RefCell::new(Compress::new(Compression::new(RUN_LEVEL), false));
    }
    let mut out = Vec::with_capacity(plain.len() / 3 + 64);
    let crc = PieceCrc::of(plain);
    let ok = Z.with_borrow_mut(|z| {
        z.reset();
        deflate(z, plain, &mut out, FlushCompress::Sync).is_ok()
    });
    if !ok {
        // Never expected of a reset compressor; the bytes go stored instead.
        out.clear();
        put_stored(&mut out, plain);
    }
    Block {
        deflate: Bytes::from(out),
        crc,
    }
}

/// An empty stored block, as a sync flush ends with. Go's inflater (every
/// client-go program's) hands over what it has decoded only at one of
/// these, when its 32 KiB window fills, or at the stream's end; so every
/// piece of a stream sent on its own (a watch event, a bookmark) ends with
/// one, or client-go waits for the next piece to read it.
pub const SYNC_MARKER: [u8; 5] = [0, 0, 0, 0xff, 0xff];

/// `plain` as deflate stored blocks (no compression: small per-stream lines
/// such as bookmarks), the stream being on a byte boundary, ended with a
/// [`SYNC_MARKER`].
fn put_stored(out: &mut Vec<u8>, plain: &[u8]) {
    for chunk in plain.chunks(u16::MAX as usize) {
        let len = chunk.len() as u16;
        out.push(0);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    out.extend_from_slice(&SYNC_MARKER);
}

/// `plain` as stored blocks in a stream whose CRC is `crc`.
pub fn stored(plain: &[u8], crc: &mut StreamCrc) -> Bytes {
    let mut out = Vec::with_capacity(plain.len() + 10);
    put_stored(&mut out, plain);
    crc.update(plain);
    Bytes::from(out)
}

/// What ends a gzip stream on a byte boundary: an empty final block, then
/// the CRC-32 and length of everything in it.
pub fn trailer(crc: &StreamCrc) -> Bytes {
    let mut out = Vec::with_capacity(10);
    out.extend_from_slice(&[0x03, 0x00]);
    out.extend_from_slice(&crc.sum().to_le_bytes());
    out.extend_from_slice(&crc.amount().to_le_bytes());
    Bytes::from(out)
}

static ITEMS: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];

/// Items sent by every gzip list since start, by how (reused, compressed,
/// live), and the bytes of the runs held (all caches): the memory
/// compressed lists take.
pub fn totals() -> ([u64; 3], usize) {
    let n = |i: usize| ITEMS[i].load(Ordering::Relaxed);
    ([n(0), n(1), n(2)], super::run::held_bytes())
}

/// How much of the lists served went where (for metrics and benchmarks).
#[derive(Debug, Default, Clone, Copy)]
pub struct Tally {
    /// Items sent in runs compressed before.
    pub reused: u64,
    /// Items sent in runs compressed for this list (and kept).
    pub compressed: u64,
    /// Items compressed for this list only.
    pub live: u64,
}

/// Deflates all of `input` into `out` with `flush`.
fn deflate(
    c: &mut Compress,
    mut input: &[u8],
    out: &mut Vec<u8>,
    flush: FlushCompress,
) -> Result<(), flate2::CompressError> {
    loop {
        out.reserve(input.len() + input.len() / 16 + 64);
        let before = c.total_in();
        let status = c.compress_vec(input, out, flush)?;
        input = &input[(c.total_in() - before) as usize..];
        let room = out.len() < out.capacity();
        let done = match flush {
            FlushCompress::None => input.is_empty(),
            FlushCompress::Finish => status == Status::StreamEnd,
            _ => input.is_empty() && room,
        };
        if done {
            return Ok(());
        }
    }
}

/// Gzips a whole buffer (an object, a pretty-printed list) at
/// [`LIVE_LEVEL`].
pub fn gzip(bytes: &[u8]) -> Bytes {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(bytes.len() / 4),
        Compression::new(LIVE_LEVEL),
    );
    let _ = enc.write_all(bytes);
    Bytes::from(enc.finish().unwrap_or_default())
}

/// A list, gzipped: spliced runs and live compression (see the module).
pub struct GzipList<I> {
    head: Option<Bytes>,
    items: Vec<I>,
    separator: &'static [u8],
    tail: &'static [u8],
    contiguous: bool,
    slot: Option<super::json::Held>,
    /// Part of a longer stream (a watch's initial events): no member header
    /// (sent before), and no end (it goes on after them).
    open: bool,
    /// The next item to send.
    next: usize,
    /// The answer's compressor: what is not spliced goes through it, and in
    /// a contiguous list so do the runs it compresses for reuse (each ended
    /// with a sync flush, so the stream before it is its dictionary, free).
    z: Compress,
    /// `z` has input not yet flushed.
    pending: bool,
    /// A run was spliced since `z` last wrote, so `z`'s history is not the
    /// bytes before `next`: it starts again, primed with them, before writing.
    spliced: bool,
    /// The items just before `next` (serial, plain bytes), as few as cover
    /// [`WINDOW`] bytes: a run's dictionary.
    recent: VecDeque<(Option<u64>, u32)>,
    recent_len: usize,
    crc: StreamCrc,
    out: Vec<u8>,
    scratch: BytesMut,
    /// Plain bytes compressed (not spliced) for the chunk being made.
    work: usize,
    /// The last chunk took much compressing: give the thread back first.
    yield_next: bool,
    done: bool,
    tally: Tally,
}

/// Plain bytes compressed in one poll before the body yields its thread
/// (about half a millisecond at [`RUN_LEVEL`]).
const WORK_PER_POLL: usize = 256 * 1024;

impl<I: ListItem> GzipList<I> {
    /// Compresses `list` as it streams.
    pub fn new(list: ListBody<I>) -> Self {
        let parts = list.into_parts();
        let level = if parts.contiguous {
            RUN_LEVEL
        } else {
            LIVE_LEVEL
        };
        GzipList {
            head: Some(parts.head),
            items: parts.items,
            separator: parts.separator,
            tail: parts.tail,
            contiguous: parts.contiguous,
            slot: parts.slot,
            open: false,
            next: 0,
            z: Compress::new(Compression::new(level), false),
            pending: false,
            spliced: false,
            recent: VecDeque::new(),
            recent_len: 0,
            crc: StreamCrc::default(),
            out: Vec::new(),
            scratch: BytesMut::new(),
            work: 0,
            yield_next: false,
            done: false,
            tally: Tally::default(),
        }
    }

    /// A streaming list's initial events (`items`, each a whole watch
    /// event), compressed into a gzip stream whose header was sent before
    /// and which goes on after them ([`GzipList::take_crc`]);
    /// `contiguous`: they follow each other in the cache (no selector).
    pub fn initial_events(items: Vec<I>, contiguous: bool) -> Self {
        let mut list = ListBody::new(Bytes::new(), items, 0, true);
        if contiguous {
            list = list.contiguous();
        }
        let mut g = GzipList::new(list);
        g.tail = b"";
        g.open = true;
        g
    }

    /// The CRC-32 of what was sent, for the stream to go on with.
    pub fn take_crc(&mut self) -> StreamCrc {
        std::mem::take(&mut self.crc)
    }

    /// Whether the last piece took much compressing (the caller should let
    /// others run before asking for the next).
    pub fn busy(&self) -> bool {
        self.yield_next
    }

    /// Where the items' bytes went, so far.
    pub fn tally(&self) -> Tally {
        self.tally
    }

    /// The whole body in one buffer (tests, benchmarks).
    pub fn collect(mut self) -> Result<Vec<u8>, flate2::CompressError> {
        let mut all = Vec::new();
        while let Some(chunk) = self.next_chunk()? {
            all.extend_from_slice(&chunk);
        }
        Ok(all)
    }

    fn serial(&self, i: usize) -> Option<u64> {
        self.items[i].memo().map(|(m, _)| m.serial())
    }

    /// Whether `serials` name the items from `at`.
    fn same(&self, at: usize, serials: &[u64]) -> bool {
        serials
            .iter()
            .enumerate()
            .all(|(k, s)| self.serial(at + k) == Some(*s))
    }

    /// Notes an item sent.
    fn sent(&mut self, serial: Option<u64>, len: usize) {
        self.recent.push_back((serial, len as u32));
        self.recent_len += len;
        while let Some(&(_, first)) = self.recent.front() {
            if self.recent_len - first as usize >= WINDOW {
                self.recent.pop_front();
                self.recent_len -= first as usize;
            } else {
                break;
            }
        }
    }

    /// Writes item `i` to `scratch`, with the separator when one follows it.
    fn write_item(&mut self, i: usize) -> usize {
        let before = self.scratch.len();
        self.items[i].write_item(&mut self.scratch);
        if i + 1 < self.items.len() {
            self.scratch.extend_from_slice(self.separator);
        }
        self.scratch.len() - before
    }

    /// Makes `z`'s history the bytes before item `at` again after a splice:
    /// it starts over primed with the items sent just before (a suffix of
    /// the answer: enough for every reference it makes to be right).
    fn resync(&mut self, at: usize) {
        if !self.spliced {
            return;
        }
        self.z.reset();
        self.scratch.clear();
        for j in at - self.recent.len()..at {
            self.write_item(j);
        }
        let from = self.scratch.len().saturating_sub(WINDOW);
        if self.scratch.len() > from {
            let _ = self.z.set_dictionary(&self.scratch[from..]);
        }
        self.spliced = false;
    }

    /// Ends what `z` holds with a sync flush (the stream is then on a byte
    /// boundary, where a run may start).
    fn flush(&mut self) -> Result<(), flate2::CompressError> {
        if self.pending {
            deflate(&mut self.z, &[], &mut self.out, FlushCompress::Sync)?;
            self.pending = false;
        }
        Ok(())
    }

    /// A run starting at item `i`, spliced if one fits, compressed and kept
    /// if none does and this list may; the items it covered.
    fn run_at(&mut self, i: usize) -> Result<Option<usize>, flate2::CompressError> {
        let n = self.items.len();
        let Some((memo, form)) = self.items[i].memo() else {
            return Ok(None);
        };
        if !memo.run_start() || i == 0 {
            return Ok(None);
        }
        if let Some(run) = memo.run(form) {
            let (k, d) = (run.items().len(), run.dict().len());
            if i + k < n && d <= i && self.same(i, run.items()) && self.same(i - d, run.dict()) {
                self.flush()?;
                self.out.extend_from_slice(run.deflate());
                self.crc.append(run.crc());
                self.spliced = true;
                for (s, len) in run.items().iter().zip(run.lens().iter()) {
                    self.sent(Some(*s), *len as usize);
                }
                self.tally.reused += k as u64;
                return Ok(Some(k));
            }
        }
        if !self.contiguous || self.recent_len < WINDOW {
            return Ok(None);
        }
        let starts = |j: usize| self.items[j].memo().is_none_or(|(m, _)| m.run_start());
        let Some(end) = (i + 1..n).find(|&j| starts(j)) else {
            return Ok(None);
        };
        let items: Option<Box<[u64]>> = (i..end).map(|j| self.serial(j)).collect();
        let dict: Option<Box<[u64]>> = self.recent.iter().map(|(s, _)| *s).collect();
        let (Some(items), Some(dict)) = (items, dict) else {
            return Ok(None);
        };
        self.resync(i);
        self.flush()?;
        self.scratch.clear();
        let lens: Box<[u32]> = (i..end).map(|j| self.write_item(j) as u32).collect();
        let crc = PieceCrc::of(&self.scratch);
        let at = self.out.len();
        deflate(
            &mut self.z,
            &self.scratch,
            &mut self.out,
            FlushCompress::Sync,
        )?;
        self.work += self.scratch.len();
        self.crc.append(&crc);
        let run = Arc::new(Run::new(
            Bytes::copy_from_slice(&self.out[at..]),
            crc,
            items,
            lens,
            dict,
        ));
        for (s, len) in run.items().iter().zip(run.lens().iter()) {
            self.sent(Some(*s), *len as usize);
        }
        if let Some((memo, form)) = self.items[i].memo() {
            memo.keep(form, run);
        }
        self.tally.compressed += (end - i) as u64;
        Ok(Some(end - i))
    }

    /// Compresses `scratch` into the answer (it holds what comes next).
    fn compress_scratch(&mut self, flush: FlushCompress) -> Result<(), flate2::CompressError> {
        self.crc.update(&self.scratch);
        deflate(&mut self.z, &self.scratch, &mut self.out, flush)?;
        self.work += self.scratch.len();
        self.pending |= !self.scratch.is_empty();
        Ok(())
    }

    /// The next piece of the body, or `None` at the end: about [`CHUNK`]
    /// bytes, less where it took [`WORK_PER_POLL`] of compressing.
    pub fn next_chunk(&mut self) -> Result<Option<Bytes>, flate2::CompressError> {
        if self.done {
            return Ok(None);
        }
        self.out.reserve(CHUNK + WINDOW);
        self.work = 0;
        if let Some(head) = self.head.take() {
            if !self.open {
                self.out.extend_from_slice(&HEADER);
            }
            self.scratch.clear();
            self.scratch.extend_from_slice(&head);
            self.compress_scratch(FlushCompress::None)?;
        }
        let n = self.items.len();
        while self.out.len() < CHUNK && self.work < WORK_PER_POLL {
            let i = self.next;
            if i == n && self.open {
                self.flush()?;
                self.done = true;
                break;
            }
            if i == n {
                if self.spliced {
                    // The tail refers to nothing before it worth priming for.
                    self.z.reset();
                    self.spliced = false;
                }
                self.scratch.clear();
                self.scratch.extend_from_slice(self.tail);
                self.compress_scratch(FlushCompress::Finish)?;
                self.out.extend_from_slice(&self.crc.sum().to_le_bytes());
                self.out.extend_from_slice(&self.crc.amount().to_le_bytes());
                self.done = true;
                self.slot = None;
                break;
            }
            if let Some(k) = self.run_at(i)? {
                self.next += k;
                continue;
            }
            self.resync(i);
            self.scratch.clear();
            let len = self.write_item(i);
            self.compress_scratch(FlushCompress::None)?;
            let serial = self.serial(i);
            self.sent(serial, len);
            self.tally.live += 1;
            self.next += 1;
        }
        self.yield_next = self.work >= WORK_PER_POLL;
        Ok(Some(Bytes::from(std::mem::take(&mut self.out))))
    }
}

impl<I> Drop for GzipList<I> {
    fn drop(&mut self) {
        let t = self.tally;
        for (i, n) in [t.reused, t.compressed, t.live].into_iter().enumerate() {
            ITEMS[i].fetch_add(n, Ordering::Relaxed);
        }
    }
}

impl<I: ListItem + Unpin> HttpBody for GzipList<I> {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if std::mem::take(&mut self.yield_next) {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        Poll::Ready(match self.next_chunk() {
            Ok(Some(b)) => Some(Ok(Frame::data(b))),
            Ok(None) => None,
            Err(e) => Some(Err(e.into())),
        })
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::run::{Form, Memo, OBJECT};
    use std::io::Read;

    /// An item stored as its list form, with a memo as cached objects have.
    struct Item {
        bytes: Bytes,
        memo: Memo,
    }

    impl ListItem for Item {
        fn item_len(&self) -> usize {
            self.bytes.len()
        }
        fn write_item(&self, out: &mut BytesMut) {
            out.extend_from_slice(&self.bytes);
        }
        fn memo(&self) -> Option<(&Memo, Form)> {
            Some((&self.memo, OBJECT))
        }
    }

    /// An object of about 1 to 3 KB, varied as real ones are.
    fn item(i: usize, generation: usize) -> Arc<Item> {
        let name = format!("web-{i:05}");
        let pad: String = (0..(i * 7919 + generation * 31) % 2000)
            .map(|k| char::from(b'a' + ((k * i + generation) % 26) as u8))
            .collect();
        let json = format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"ns-{}","resourceVersion":"{}"}},"spec":{{"nodeName":"node-{}","note":"{pad}"}}}}"#,
            i % 7,
            i + generation * 100_000,
            i % 13
        );
        Arc::new(Item {
            bytes: Bytes::from(json),
            memo: Memo::new(&name),
        })
    }

    const HEAD: &[u8] =
        br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"9"},"items":["#;

    fn list(items: &[Arc<Item>], contiguous: bool) -> ListBody<Arc<Item>> {
        let len = items.iter().map(|o| o.item_len() + 1).sum();
        let l = ListBody::new(Bytes::from_static(HEAD), items.to_vec(), len, false);
        if contiguous { l.contiguous() } else { l }
    }

    /// The gzip body of `items`, checked against the plain list with a
    /// single-member and a multi-member decoder; and where its items went.
    fn gzip_and_check(items: &[Arc<Item>], contiguous: bool) -> (usize, Tally) {
        let plain = list(items, contiguous).collect();
        let mut gz = GzipList::new(list(items, contiguous));
        let mut body = Vec::new();
        while let Some(chunk) = gz.next_chunk().unwrap() {
            body.extend_from_slice(&chunk);
        }
        let mut one = Vec::new();
        flate2::read::GzDecoder::new(&body[..])
            .read_to_end(&mut one)
            .unwrap();
        assert!(one == plain, "single-member decoder: the list differs");
        let mut multi = Vec::new();
        flate2::read::MultiGzDecoder::new(&body[..])
            .read_to_end(&mut multi)
            .unwrap();
        assert!(multi == plain, "multi-member decoder: the list differs");
        (body.len(), gz.tally())
    }

    #[test]
    fn should_unzip_every_variant_to_the_plain_list() {
        let mut items: Vec<Arc<Item>> = (0..3000).map(|i| item(i, 0)).collect();
        // The first list compresses runs; the second splices them all.
        let (first_len, first) = gzip_and_check(&items, true);
        assert!(first.compressed > 2000, "{first:?}");
        let (second_len, second) = gzip_and_check(&items, true);
        assert_eq!(second.compressed, 0, "{second:?}");
        assert_eq!(second.reused, first.compressed);
        assert!(
            second_len.abs_diff(first_len) < 64,
            "{first_len} then {second_len}"
        );
        // Changes: the changed items' runs and the runs after them are
        // compressed again, the rest spliced.
        for i in (5..3000).step_by(97) {
            items[i] = item(i, 1);
        }
        items.remove(1234);
        items.insert(2000, item(99_999, 0));
        let (_, churned) = gzip_and_check(&items, true);
        assert!(
            churned.compressed > 0 && churned.reused > 1500,
            "{churned:?}"
        );
        // Pages: live until a window of items is behind, then spliced.
        for (from, to) in [(0, 500), (500, 1000), (1717, 2217), (2900, items.len())] {
            let (_, page) = gzip_and_check(&items[from..to], true);
            assert!(page.reused > 0, "page {from}..{to}: {page:?}");
        }
        // Filtered: runs that fit are spliced, none is kept.
        let filtered: Vec<Arc<Item>> = items
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 500 != 7)
            .map(|(_, o)| o.clone())
            .collect();
        let (_, f) = gzip_and_check(&filtered, false);
        assert_eq!(f.compressed, 0, "{f:?}");
        assert!(f.reused > 0, "{f:?}");
        // Sparse: nothing fits, all live.
        let sparse: Vec<Arc<Item>> = items.iter().step_by(3).cloned().collect();
        let (_, s) = gzip_and_check(&sparse, false);
        assert_eq!((s.reused, s.compressed), (0, 0));
        // Tiny and empty lists.
        gzip_and_check(&items[..1], true);
        gzip_and_check(&[], true);
    }

    #[test]
    fn should_splice_runs_into_a_protobuf_list_too() {
        let items: Vec<Arc<Item>> = (0..1500).map(|i| item(i, 3)).collect();
        let body = |items: &[Arc<Item>]| {
            let len = items.iter().map(|o| o.item_len()).sum();
            ListBody::new(Bytes::from_static(b"k8s\0head"), items.to_vec(), len, true).contiguous()
        };
        for _ in 0..2 {
            let plain = body(&items).collect();
            let gz = GzipList::new(body(&items)).collect().unwrap();
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(&gz[..])
                .read_to_end(&mut out)
                .unwrap();
            assert!(out == plain);
        }
    }
}
