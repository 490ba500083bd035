//! The snapshot file, version 1: written and read here only
//! (`docs/snapshots.md` describes it for people).
//!
//! ```text
//! magic       8 bytes   "r8s-snap"
//! format      u32 LE    1
//! length      u64 LE    of the whole file, these fields and the checksum included
//! header_len  u32 LE    at most 64 KiB
//! header      JSON      Header: what the snapshot is of, and its version
//! empty_len   u32 LE    at most 1 MiB
//! empty       bytes     a protobuf store's bookmark template (may be empty)
//! count       u64 LE    objects
//! count × {
//!   key_len   u16 LE    1 to 1,024
//!   key       UTF-8     namespace/name, or name; strictly increasing
//!   rv        u64 LE    the object's resourceVersion, at most the header's
//!   body_len  u32 LE    1 byte to 64 MiB
//!   body      bytes     the object as the cache holds it (JSON or protobuf)
//! }
//! crc32       u32 LE    CRC-32 (IEEE) of every byte before it
//! ```
//!
//! A file is input from disk and is read as untrusted: the checksum is
//! verified over the whole file before any of it is believed, and every
//! length and count is checked against its bound and against the bytes left
//! before anything is allocated for it. A file of another format version is
//! refused with that reason, never read as this one.

use crate::metrics::PersistLoad;
use std::io::{self, Read, Seek, SeekFrom, Write};

use serde::{Deserialize, Serialize};

/// The first eight bytes of every snapshot.
pub const MAGIC: &[u8; 8] = b"r8s-snap";
/// The format this r8s writes and reads.
pub const FORMAT: u32 = 1;
/// Bound of the JSON header.
pub const MAX_HEADER: u32 = 64 << 10;
/// Bound of the bookmark template.
pub const MAX_EMPTY: u32 = 1 << 20;
/// Bound of one key (a namespace and a name are 63 and 253 bytes).
pub const MAX_KEY: u16 = 1024;
/// Bound of one object's body (etcd's limit is 1.5 MiB by default).
pub const MAX_BODY: u32 = 64 << 20;
/// Bytes before the header's length: magic, format, length.
const FIXED: u64 = 8 + 4 + 8;
/// The fewest bytes one object takes (key_len, one key byte, rv, body_len, one body byte).
const MIN_RECORD: u64 = 2 + 1 + 8 + 4 + 1;

/// What a snapshot is of and when: everything but its objects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// What it must match to be loaded.
    #[serde(flatten)]
    pub identity: Identity,
    /// The resource version the objects are the state at.
    pub resource_version: u64,
    /// When it was written, in milliseconds since the Unix epoch.
    pub written_unix_ms: u64,
    /// The r8s that wrote it (for people; not checked).
    pub written_by: String,
}

/// What identifies the cache a snapshot is of: a snapshot is loaded only
/// into the cache of the same upstream, resource, version and encoding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Identity {
    /// The upstream: its servers and the CA it is verified with.
    pub upstream: String,
    /// `group/version/resource`.
    pub resource: String,
    /// The objects' `kind` and `apiVersion`, as parsed.
    pub kind: String,
    /// Their `apiVersion`.
    pub api_version: String,
    /// `json` or `protobuf`.
    pub encoding: String,
    /// Its objects were kept without `metadata.managedFields`
    /// (`cache.managed_fields = "drop"`): a cache that keeps them cannot
    /// start from them, nor the other way round. (Written only when set,
    /// so snapshots of caches that keep them read as before.)
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub managed_fields_dropped: bool,
    /// The objects it holds where not all (`spec.nodeName=node-1`: a
    /// node-local r8s's pods): a cache of another node, or of the whole
    /// resource, cannot start from it. (Written only when set.)
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scope: String,
}

impl Identity {
    /// The namespace and name of the one object its cache holds (a scope
    /// as [`crate::cache::scope::CacheScope::Object`] writes it,
    /// `NAMESPACE/NAME`; a field scope has no `/`).
    pub fn object(&self) -> Option<(&str, &str)> {
        self.scope.split_once('/')
    }

    /// The first difference from `other` that makes a snapshot foreign.
    pub fn mismatch(&self, other: &Identity) -> Option<String> {
        let fields = [
            ("upstream", &self.upstream, &other.upstream),
            ("resource", &self.resource, &other.resource),
            ("kind", &self.kind, &other.kind),
            ("apiVersion", &self.api_version, &other.api_version),
            ("encoding", &self.encoding, &other.encoding),
            ("scope", &self.scope, &other.scope),
        ];
        let dropped = |d: bool| if d { "dropped" } else { "kept" };
        fields
            .into_iter()
            .find(|(_, a, b)| a != b)
            .map(|(what, a, b)| format!("its {what} is {a:?}, this cache's {b:?}"))
            .or_else(|| {
                (self.managed_fields_dropped != other.managed_fields_dropped).then(|| {
                    format!(
                        "its objects' managedFields were {}, this cache's are {} (cache.managed_fields)",
                        dropped(self.managed_fields_dropped),
                        dropped(other.managed_fields_dropped)
                    )
                })
            })
    }
}

/// One object of a snapshot, as read.
#[derive(Debug)]
pub struct Record<'a> {
    /// Its key.
    pub key: &'a str,
    /// Its resource version.
    pub rv: u64,
    /// Its body.
    pub body: &'a [u8],
}

/// Why a snapshot was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be read.
    #[error("unreadable: {0}")]
    Io(#[from] io::Error),
    /// Not a snapshot, or damaged: a bad magic, checksum, bound or record.
    #[error("corrupt: {0}")]
    Corrupt(String),
    /// Shorter than its contents say.
    #[error("truncated: {0}")]
    Truncated(String),
    /// Another format version.
    #[error("format {0}, and this r8s reads format {FORMAT} only (written by another r8s version)")]
    Format(u32),
    /// Of another cache.
    #[error("of another cache: {0}")]
    Foreign(String),
    /// Its objects did not parse as the cache's objects.
    #[error("corrupt: an object: {0}")]
    Object(String),
}

impl ReadError {
    /// Whether the whole file's checksum failed: that outranks whatever was
    /// found wrong in its objects (a damaged file's objects are not its own).
    pub fn is_checksum(&self) -> bool {
        matches!(self, ReadError::Corrupt(m) if m == CHECKSUM)
    }

    /// The `result` label of `r8s_persist_loads_total`.
    pub fn label(&self) -> PersistLoad {
        match self {
            ReadError::Io(_) => PersistLoad::Unreadable,
            ReadError::Corrupt(_) | ReadError::Object(_) => PersistLoad::Corrupt,
            ReadError::Truncated(_) => PersistLoad::Truncated,
            ReadError::Format(_) => PersistLoad::Format,
            ReadError::Foreign(_) => PersistLoad::Foreign,
        }
    }
}

/// A writer (or reader) that keeps the CRC-32 of what went through and
/// counts it.
struct Summed<W> {
    inner: W,
    crc: flate2::Crc,
    bytes: u64,
}

impl<W: Write> Write for Summed<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<R: Read> Read for Summed<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.crc.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
}

/// Writes a snapshot of the objects `objects()` yields ((key, rv, body), in
/// key order; it is called twice, to size the file and to write it) to `w`;
/// returns the bytes written.
pub fn write<'a, W: Write, I: ExactSizeIterator<Item = (&'a str, u64, &'a [u8])>>(
    w: W,
    header: &Header,
    empty: Option<&[u8]>,
    objects: impl Fn() -> I,
) -> io::Result<u64> {
    let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
    let mut w = Summed {
        inner: w,
        crc: flate2::Crc::new(),
        bytes: 0,
    };
    let head = serde_json::to_vec(header).map_err(|e| invalid(e.to_string()))?;
    let empty = empty.unwrap_or_default();
    if head.len() > MAX_HEADER as usize || empty.len() > MAX_EMPTY as usize {
        return Err(invalid("header or bookmark template over its bound".into()));
    }
    let records: u64 = objects()
        .map(|(k, _, b)| 2 + k.len() as u64 + 8 + 4 + b.len() as u64)
        .sum();
    let total = FIXED + 4 + head.len() as u64 + 4 + empty.len() as u64 + 8 + records + 4;
    w.write_all(MAGIC)?;
    w.write_all(&FORMAT.to_le_bytes())?;
    w.write_all(&total.to_le_bytes())?;
    w.write_all(&(head.len() as u32).to_le_bytes())?;
    w.write_all(&head)?;
    w.write_all(&(empty.len() as u32).to_le_bytes())?;
    w.write_all(empty)?;
    let objects = objects();
    w.write_all(&(objects.len() as u64).to_le_bytes())?;
    for (key, rv, body) in objects {
        if key.is_empty() || key.len() > MAX_KEY as usize {
            return Err(invalid(format!("key {key:?} over its bound")));
        }
        if body.is_empty() || body.len() > MAX_BODY as usize {
            return Err(invalid(format!("object {key} of {} bytes", body.len())));
        }
        w.write_all(&(key.len() as u16).to_le_bytes())?;
        w.write_all(key.as_bytes())?;
        w.write_all(&rv.to_le_bytes())?;
        w.write_all(&(body.len() as u32).to_le_bytes())?;
        w.write_all(body)?;
    }
    let crc = w.crc.sum();
    w.inner.write_all(&crc.to_le_bytes())?;
    w.flush()?;
    Ok(w.bytes + 4)
}

/// Reads from a source of known length, never past it.
struct Bounded<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Bounded<R> {
    fn bytes(&mut self, n: u64, what: &str) -> Result<Vec<u8>, ReadError> {
        let mut v = Vec::new();
        self.bytes_into(n, what, &mut v)?;
        Ok(v)
    }

    /// Reads `n` bytes into `buf` (replacing its contents), once `n` is
    /// known to be there: nothing is allocated for bytes that are not.
    fn bytes_into(&mut self, n: u64, what: &str, buf: &mut Vec<u8>) -> Result<(), ReadError> {
        if n > self.left {
            return Err(ReadError::Truncated(format!(
                "{what} of {n} bytes, {} left",
                self.left
            )));
        }
        buf.clear();
        buf.resize(n as usize, 0);
        self.inner.read_exact(buf)?;
        self.left -= n;
        Ok(())
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], ReadError> {
        if (N as u64) > self.left {
            return Err(ReadError::Truncated(format!("{what}: the file ends")));
        }
        let mut a = [0; N];
        self.inner.read_exact(&mut a)?;
        self.left -= N as u64;
        Ok(a)
    }

    fn u16(&mut self, what: &str) -> Result<u16, ReadError> {
        self.array(what).map(u16::from_le_bytes)
    }
    fn u32(&mut self, what: &str) -> Result<u32, ReadError> {
        self.array(what).map(u32::from_le_bytes)
    }
    fn u64(&mut self, what: &str) -> Result<u64, ReadError> {
        self.array(what).map(u64::from_le_bytes)
    }
}

/// Checks that the last four bytes of `src` (of `len` bytes) are the CRC-32
/// of the rest, reading it in blocks.
fn verify<R: Read + Seek>(src: &mut R, len: u64) -> Result<(), ReadError> {
    src.seek(SeekFrom::Start(0))?;
    let mut left = len - 4;
    let mut crc = flate2::Crc::new();
    let mut block = vec![0; (1 << 20).min(left as usize)];
    while left > 0 {
        let n = (block.len() as u64).min(left) as usize;
        src.read_exact(&mut block[..n])?;
        crc.update(&block[..n]);
        left -= n as u64;
    }
    let mut stored = [0; 4];
    src.read_exact(&mut stored)?;
    if crc.sum() != u32::from_le_bytes(stored) {
        return Err(ReadError::Corrupt(CHECKSUM.into()));
    }
    Ok(())
}

/// Reads only the header of the snapshot in `src` (`len` bytes) of the
/// cache `expect` identifies, checking what comes before it but not the
/// rest: what a load must know (the version) before it reads the log
/// written after it. [`read`] checks the whole file again.
pub fn peek<R: Read + Seek>(mut src: R, len: u64, expect: &Identity) -> Result<Header, ReadError> {
    preamble(&mut src, len)?;
    src.seek(SeekFrom::Start(FIXED))?;
    let mut r = Bounded {
        inner: &mut src,
        left: len - FIXED - 4,
    };
    header(&mut r, expect)
}

/// Checks the magic, the format and the length the file states.
fn preamble<R: Read + Seek>(src: &mut R, len: u64) -> Result<(), ReadError> {
    src.seek(SeekFrom::Start(0))?;
    let mut r = Bounded {
        inner: src,
        left: len,
    };
    if len >= MAGIC.len() as u64 && &r.array::<8>("magic")? != MAGIC {
        return Err(ReadError::Corrupt("not an r8s snapshot".into()));
    }
    if len < FIXED + 4 {
        return Err(ReadError::Truncated(format!("{len} bytes")));
    }
    let format = r.u32("format")?;
    if format != FORMAT {
        return Err(ReadError::Format(format));
    }
    let stated = r.u64("length")?;
    if stated > len {
        return Err(ReadError::Truncated(format!(
            "{len} bytes of the {stated} it was written with"
        )));
    }
    if stated < len {
        return Err(ReadError::Corrupt(format!(
            "{len} bytes, {} more than it was written with",
            len - stated
        )));
    }
    Ok(())
}

/// Reads the header, refusing another cache's.
fn header<R: Read>(r: &mut Bounded<R>, expect: &Identity) -> Result<Header, ReadError> {
    let head_len = r.u32("header length")?;
    if head_len > MAX_HEADER {
        return Err(ReadError::Corrupt(format!(
            "a header of {head_len} bytes (at most {MAX_HEADER})"
        )));
    }
    let head = r.bytes(head_len.into(), "header")?;
    let header: Header =
        serde_json::from_slice(&head).map_err(|e| ReadError::Corrupt(format!("header: {e}")))?;
    if let Some(why) = header.identity.mismatch(expect) {
        return Err(ReadError::Foreign(why));
    }
    Ok(header)
}

/// Reads the snapshot in `src` (`len` bytes) of the cache `expect`
/// identifies: checks it whole first (magic, format, checksum), then its
/// header against `expect`, then hands each object to `visit` in order.
/// Returns the header and the bookmark template (empty if none).
pub fn read<R: Read + Seek>(
    mut src: R,
    len: u64,
    expect: &Identity,
    mut visit: impl FnMut(Record<'_>) -> Result<(), String>,
) -> Result<(Header, Vec<u8>), ReadError> {
    preamble(&mut src, len)?;
    // One pass: the checksum is summed as the objects are read, and checked
    // before any of it is returned. Damage found before the end is reported
    // as the checksum's when the checksum is wrong too, as if checked first.
    src.seek(SeekFrom::Start(0))?;
    let found = {
        let mut summed = Summed {
            inner: std::io::BufReader::with_capacity((256 << 10).min(len as usize), &mut src),
            crc: flate2::Crc::new(),
            bytes: 0,
        };
        let mut r = Bounded {
            inner: &mut summed,
            left: len - 4,
        };
        r.array::<{ FIXED as usize }>("preamble")?;
        records(&mut r, expect, &mut visit).and_then(|found| {
            let mut stored = [0; 4];
            summed.inner.read_exact(&mut stored)?;
            if summed.crc.sum() != u32::from_le_bytes(stored) {
                return Err(ReadError::Corrupt(CHECKSUM.into()));
            }
            Ok(found)
        })
    };
    match found {
        Err(ReadError::Corrupt(m)) if m == CHECKSUM => Err(ReadError::Corrupt(m)),
        Err(e) => {
            verify(&mut src, len)?;
            Err(e)
        }
        ok => ok,
    }
}

/// What a snapshot whose checksum is wrong is refused with.
const CHECKSUM: &str = "checksum mismatch";

/// Reads the header and the objects after it (the preamble read), handing
/// each object to `visit`.
fn records<R: Read>(
    r: &mut Bounded<R>,
    expect: &Identity,
    visit: &mut impl FnMut(Record<'_>) -> Result<(), String>,
) -> Result<(Header, Vec<u8>), ReadError> {
    let header = header(r, expect)?;
    let empty_len = r.u32("template length")?;
    if empty_len > MAX_EMPTY {
        return Err(ReadError::Corrupt(format!(
            "a bookmark template of {empty_len} bytes (at most {MAX_EMPTY})"
        )));
    }
    let mut scratch = Vec::new();
    r.bytes_into(empty_len.into(), "bookmark template", &mut scratch)?;
    let empty = std::mem::take(&mut scratch);
    let count = r.u64("object count")?;
    if count > r.left / MIN_RECORD {
        return Err(ReadError::Corrupt(format!(
            "{count} objects cannot fit in the {} bytes left",
            r.left
        )));
    }
    let mut key = Vec::new();
    let mut last_key: Option<Vec<u8>> = None;
    for i in 0..count {
        let key_len = r.u16("key length")?;
        if key_len == 0 || key_len > MAX_KEY {
            return Err(ReadError::Corrupt(format!(
                "object {i}: a key of {key_len} bytes"
            )));
        }
        r.bytes_into(key_len.into(), "key", &mut key)?;
        let k = std::str::from_utf8(&key)
            .map_err(|_| ReadError::Corrupt(format!("object {i}: a key that is not UTF-8")))?;
        if last_key.as_deref().is_some_and(|l| l >= k.as_bytes()) {
            return Err(ReadError::Corrupt(format!(
                "object {i}: key {k:?} out of order"
            )));
        }
        let rv = r.u64("resource version")?;
        if rv > header.resource_version {
            return Err(ReadError::Corrupt(format!(
                "object {k}: resource version {rv} after the snapshot's {}",
                header.resource_version
            )));
        }
        let body_len = r.u32("body length")?;
        if body_len == 0 || body_len > MAX_BODY {
            return Err(ReadError::Corrupt(format!(
                "object {k}: a body of {body_len} bytes"
            )));
        }
        r.bytes_into(body_len.into(), "object", &mut scratch)?;
        visit(Record {
            key: k,
            rv,
            body: &scratch,
        })
        .map_err(|e| ReadError::Object(format!("{k}: {e}")))?;
        match &mut last_key {
            Some(l) => {
                l.clear();
                l.extend_from_slice(&key);
            }
            None => last_key = Some(key.clone()),
        }
    }
    if r.left != 0 {
        return Err(ReadError::Corrupt(format!(
            "{} bytes after the last object",
            r.left
        )));
    }
    Ok((header, empty))
}

/// The store the tests of `persist`'s readers write and read files of.
#[cfg(test)]
pub(super) fn test_identity() -> Identity {
    Identity {
        scope: Default::default(),
        upstream: "http://127.0.0.1:1".into(),
        resource: "v1/pods".into(),
        kind: "Pod".into(),
        api_version: "v1".into(),
        encoding: "json".into(),
        managed_fields_dropped: false,
    }
}

#[cfg(test)]
mod tests {
    use super::test_identity as identity;
    use super::*;
    use std::io::Cursor;

    fn sample() -> Vec<u8> {
        let header = Header {
            identity: identity(),
            resource_version: 9,
            written_unix_ms: 1,
            written_by: "test".into(),
        };
        let objects = [("a/x", 3u64, &b"{1}"[..]), ("a/y", 9, &b"{2}"[..])];
        let mut out = Vec::new();
        write(&mut out, &header, None, || objects.into_iter()).unwrap();
        out
    }

    fn read_all(bytes: &[u8]) -> Result<Vec<(String, u64, Vec<u8>)>, ReadError> {
        let mut seen = Vec::new();
        read(Cursor::new(bytes), bytes.len() as u64, &identity(), |r| {
            seen.push((r.key.to_string(), r.rv, r.body.to_vec()));
            Ok(())
        })?;
        Ok(seen)
    }

    #[test]
    fn should_read_back_what_it_wrote() {
        let seen = read_all(&sample()).unwrap();
        assert_eq!(
            seen,
            vec![
                ("a/x".to_string(), 3, b"{1}".to_vec()),
                ("a/y".to_string(), 9, b"{2}".to_vec())
            ]
        );
    }

    #[test]
    fn should_refuse_every_damaged_or_foreign_file_with_its_reason() {
        let good = sample();
        for cut in [0, 5, 12, 20, good.len() / 2, good.len() - 1] {
            let e = read_all(&good[..cut]).unwrap_err();
            assert_eq!(e.label().as_str(), "truncated", "{cut}: {e}");
        }
        let mut longer = good.clone();
        longer.push(0);
        assert_eq!(read_all(&longer).unwrap_err().label().as_str(), "corrupt");
        let mut flipped = good.clone();
        flipped[good.len() - 8] ^= 1;
        assert!(
            read_all(&flipped)
                .unwrap_err()
                .to_string()
                .contains("checksum")
        );
        let mut newer = good.clone();
        newer[8] = 2;
        assert_eq!(read_all(&newer).unwrap_err().label().as_str(), "format");
        let other = Identity {
            upstream: "http://127.0.0.1:2".into(),
            ..identity()
        };
        let e = read(Cursor::new(&good), good.len() as u64, &other, |_| Ok(())).unwrap_err();
        assert_eq!(e.label().as_str(), "foreign", "{e}");
        // A whole resource's snapshot is not a node's, nor one node's another's.
        let node = Identity {
            scope: "spec.nodeName=node-1".into(),
            ..identity()
        };
        let e = read(Cursor::new(&good), good.len() as u64, &node, |_| Ok(())).unwrap_err();
        assert!(e.to_string().contains("scope"), "{e}");
        let mut scoped = Vec::new();
        let header = Header {
            identity: node.clone(),
            resource_version: 9,
            written_unix_ms: 1,
            written_by: "test".into(),
        };
        write(&mut scoped, &header, None, std::iter::empty).unwrap();
        let other_node = Identity {
            scope: "spec.nodeName=node-2".into(),
            ..identity()
        };
        for expect in [other_node, identity()] {
            let e = read(Cursor::new(&scoped), scoped.len() as u64, &expect, |_| {
                Ok(())
            });
            assert_eq!(e.unwrap_err().label().as_str(), "foreign");
        }
        read(Cursor::new(&scoped), scoped.len() as u64, &node, |_| Ok(())).unwrap();
    }
}
