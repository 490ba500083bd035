//! The change log, format 1: what a store applied after a snapshot, appended
//! in records, written and read here only (`docs/snapshots.md` describes it
//! for people).
//!
//! ```text
//! magic       8 bytes   "r8s-wlog"
//! format      u32 LE    1
//! header_len  u32 LE    at most 64 KiB
//! header      JSON      LogHeader: the store, and the version the log starts after
//! header_crc  u32 LE    CRC-32 (IEEE) of every byte before it
//! records, each {
//!   len       u32 LE    of what follows the checksum: 11 bytes to 64 MiB + 1 KiB
//!   crc       u32 LE    CRC-32 of those bytes
//!   kind      u8        1 put, 2 delete, 3 mark
//!   rv        u64 LE    put, delete: the event's version; mark: the store's
//!   key_len   u16 LE    put, delete: 1 to 1,024; mark: 0
//!   key       UTF-8
//!   body      the rest  put: the object as the store holds it; delete: none;
//!                       mark: u64 LE, when it was written (Unix ms)
//! }
//! ```
//!
//! Records are appended in groups: a store's events as it applied them, then
//! a mark saying the store was at that version once they were applied. Only
//! a whole group counts: the state at a mark is a true past state of the
//! store, while a group cut in two (a relist's events share one version)
//! is not. So the reader stops at the first record that is torn, fails its
//! checksum or breaks a rule, reports why, and the log is used up to the
//! last mark before it.
//!
//! A log is input from disk and is read as untrusted, as a snapshot is:
//! every length is checked against its bound and against the bytes left
//! before anything is allocated for it, and a header of another store,
//! upstream or format refuses the whole log with that reason.

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};

use super::format::{Identity, MAX_BODY, MAX_HEADER, MAX_KEY, ReadError};

/// The first eight bytes of every log.
pub const MAGIC: &[u8; 8] = b"r8s-wlog";
/// The log format this r8s writes and reads.
pub const FORMAT: u32 = 1;
/// The fewest bytes of a record after its checksum (kind, rv, key_len).
const MIN_RECORD: u32 = 1 + 8 + 2;
/// The most bytes of a record after its checksum.
const MAX_RECORD: u32 = MIN_RECORD + MAX_KEY as u32 + MAX_BODY;

/// What a log is of: the store, and where it starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogHeader {
    /// The store it must match to be replayed.
    #[serde(flatten)]
    pub identity: Identity,
    /// The version it starts after: its first group follows the state at
    /// `base` (a snapshot's, or the previous log's last mark).
    pub base: u64,
    /// When it was started, in milliseconds since the Unix epoch.
    pub created_unix_ms: u64,
}

/// One record of a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry<'a> {
    /// An object added or changed, at the event's version.
    Put {
        /// Its key.
        key: &'a str,
        /// The event's resource version.
        rv: u64,
        /// The object, as the store holds it.
        body: &'a [u8],
    },
    /// An object deleted, at the delete's version.
    Delete {
        /// Its key.
        key: &'a str,
        /// The delete's resource version.
        rv: u64,
    },
    /// The store was at `rv` once the records before were applied.
    Mark {
        /// The store's version.
        rv: u64,
        /// When the mark was written (Unix ms).
        unix_ms: u64,
    },
}

impl Entry<'_> {
    /// Its resource version.
    pub fn rv(&self) -> u64 {
        match *self {
            Entry::Put { rv, .. } | Entry::Delete { rv, .. } | Entry::Mark { rv, .. } => rv,
        }
    }
}

/// Appends `entry` as one record to `out` (a buffer, written whole later).
pub fn encode(out: &mut Vec<u8>, entry: &Entry<'_>) -> io::Result<()> {
    let (kind, rv, key, body): (u8, u64, &str, &[u8]) = match entry {
        Entry::Put { key, rv, body } => (1, *rv, key, body),
        Entry::Delete { key, rv } => (2, *rv, key, &[]),
        Entry::Mark { rv, unix_ms } => (3, *rv, "", &unix_ms.to_le_bytes()[..]),
    };
    let bad_key = kind != 3 && (key.is_empty() || key.len() > MAX_KEY as usize);
    if bad_key || body.len() > MAX_BODY as usize || (kind == 1 && body.is_empty()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("record {key:?} of {} bytes over its bounds", body.len()),
        ));
    }
    let len = MIN_RECORD as usize + key.len() + body.len();
    let start = out.len();
    out.reserve(8 + len);
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.push(kind);
    out.extend_from_slice(&rv.to_le_bytes());
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(body);
    let mut crc = flate2::Crc::new();
    crc.update(&out[start + 8..]);
    out[start + 4..start + 8].copy_from_slice(&crc.sum().to_le_bytes());
    Ok(())
}

/// Writes a log's header to `w`; returns the bytes written.
pub fn write_header<W: Write>(mut w: W, header: &LogHeader) -> io::Result<u64> {
    let head = serde_json::to_vec(header).map_err(io::Error::other)?;
    if head.len() > MAX_HEADER as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "log header over its bound",
        ));
    }
    let mut out = Vec::with_capacity(head.len() + 20);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT.to_le_bytes());
    out.extend_from_slice(&(head.len() as u32).to_le_bytes());
    out.extend_from_slice(&head);
    let mut crc = flate2::Crc::new();
    crc.update(&out);
    out.extend_from_slice(&crc.sum().to_le_bytes());
    w.write_all(&out)?;
    Ok(out.len() as u64)
}

/// What reading a log found.
#[derive(Debug)]
pub struct Replayed {
    /// Its header.
    pub header: LogHeader,
    /// Bytes from the start of the file to the end of its last mark (the
    /// header's end when it has none): what later appends follow.
    pub committed: u64,
    /// The last mark's version and time, if any.
    pub last_mark: Option<(u64, u64)>,
    /// Why the bytes after `committed` were not used, if there are any:
    /// `Truncated` for a torn record or group, `Corrupt` for a damaged one.
    pub cut: Option<ReadError>,
}

/// Reads the log in `src` (`len` bytes) of the store `expect` identifies:
/// its header (refusing another store's, format's or a damaged one), then
/// each record, handed to `visit` in order. Records after the last mark are
/// handed over too: the caller keeps a group's changes until its mark. A
/// torn, damaged or out-of-order record ends the log: `cut` says why.
pub fn read<R: Read>(
    src: R,
    len: u64,
    expect: &Identity,
    mut visit: impl FnMut(Entry<'_>) -> Result<(), String>,
) -> Result<Replayed, ReadError> {
    let mut r = io::BufReader::with_capacity((256 << 10).min(len.max(1) as usize), src);
    let mut left = len;
    let mut take = |n: u64, buf: &mut Vec<u8>, left: &mut u64| -> Result<bool, ReadError> {
        if n > *left {
            return Ok(false);
        }
        buf.clear();
        buf.resize(n as usize, 0);
        r.read_exact(buf)?;
        *left -= n;
        Ok(true)
    };
    let mut head = Vec::new();
    if !take(16, &mut head, &mut left)? {
        return Err(ReadError::Truncated(format!("a log of {len} bytes")));
    }
    if &head[..8] != MAGIC {
        return Err(ReadError::Corrupt("not an r8s log".into()));
    }
    let format = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
    if format != FORMAT {
        return Err(ReadError::Format(format));
    }
    let head_len = u32::from_le_bytes(head[12..16].try_into().expect("4 bytes"));
    if head_len > MAX_HEADER {
        return Err(ReadError::Corrupt(format!(
            "a log header of {head_len} bytes (at most {MAX_HEADER})"
        )));
    }
    let mut buf = Vec::new();
    if !take(u64::from(head_len) + 4, &mut buf, &mut left)? {
        return Err(ReadError::Truncated("the log's header".into()));
    }
    let (json, stored) = buf.split_at(head_len as usize);
    let mut crc = flate2::Crc::new();
    crc.update(&head);
    crc.update(json);
    if crc.sum() != u32::from_le_bytes(stored.try_into().expect("4 bytes")) {
        return Err(ReadError::Corrupt("the log header's checksum".into()));
    }
    let header: LogHeader =
        serde_json::from_slice(json).map_err(|e| ReadError::Corrupt(format!("log header: {e}")))?;
    if let Some(why) = header.identity.mismatch(expect) {
        return Err(ReadError::Foreign(why));
    }
    let mut out = Replayed {
        committed: len - left,
        last_mark: None,
        cut: None,
        header,
    };
    // The version the next event must be above, and the last one seen.
    let (mut floor, mut last) = (out.header.base, out.header.base);
    let mut frame = Vec::new();
    let mut i = 0u64;
    while left > 0 {
        let at = len - left;
        let cut = |why: String| {
            Some(ReadError::Corrupt(format!(
                "record {i} at byte {at}: {why}"
            )))
        };
        let torn = |why: String| {
            Some(ReadError::Truncated(format!(
                "record {i} at byte {at}: {why}"
            )))
        };
        if !take(8, &mut frame, &mut left)? {
            out.cut = torn(format!("{left} bytes of a record's 8-byte frame"));
            break;
        }
        let n = u32::from_le_bytes(frame[..4].try_into().expect("4 bytes"));
        let sum = u32::from_le_bytes(frame[4..8].try_into().expect("4 bytes"));
        if !(MIN_RECORD..=MAX_RECORD).contains(&n) {
            out.cut = cut(format!("a record of {n} bytes"));
            break;
        }
        if !take(n.into(), &mut buf, &mut left)? {
            out.cut = torn(format!("{left} of its {n} bytes"));
            break;
        }
        let mut crc = flate2::Crc::new();
        crc.update(&buf);
        if crc.sum() != sum {
            out.cut = cut("checksum mismatch".into());
            break;
        }
        let entry = match decode(&buf, floor, last) {
            Ok(e) => e,
            Err(why) => {
                out.cut = cut(why);
                break;
            }
        };
        if let Err(why) = visit(entry) {
            out.cut = cut(why);
            break;
        }
        last = entry.rv();
        if let Entry::Mark { rv, unix_ms } = entry {
            floor = rv;
            out.last_mark = Some((rv, unix_ms));
            out.committed = len - left;
        }
        i += 1;
    }
    if out.cut.is_none() && out.committed != len {
        out.cut = Some(ReadError::Truncated(format!(
            "{} bytes after the last mark (a group cut short)",
            len - out.committed
        )));
    }
    Ok(out)
}

/// One record's fields, checked: `floor` is the last mark's version (events
/// come after it), `last` the last record's (versions never go back).
fn decode(buf: &[u8], floor: u64, last: u64) -> Result<Entry<'_>, String> {
    let kind = buf[0];
    let rv = u64::from_le_bytes(buf[1..9].try_into().expect("8 bytes"));
    let key_len = u16::from_le_bytes(buf[9..11].try_into().expect("2 bytes")) as usize;
    if key_len > MAX_KEY as usize || key_len > buf.len() - 11 {
        return Err(format!("a key of {key_len} bytes"));
    }
    let key = std::str::from_utf8(&buf[11..11 + key_len])
        .map_err(|_| "a key that is not UTF-8".to_string())?;
    let body = &buf[11 + key_len..];
    if rv < last {
        return Err(format!("version {rv} after {last}"));
    }
    let entry = match kind {
        1 | 2 if key.is_empty() => return Err("an event without a key".into()),
        1 | 2 if rv <= floor => {
            return Err(format!("an event at {rv}, not after its mark {floor}"));
        }
        1 if body.is_empty() => return Err(format!("{key}: a put without an object")),
        1 => Entry::Put { key, rv, body },
        2 if !body.is_empty() => return Err(format!("{key}: a delete with a body")),
        2 => Entry::Delete { key, rv },
        3 if !key.is_empty() || body.len() != 8 => return Err("a malformed mark".into()),
        3 => Entry::Mark {
            rv,
            unix_ms: u64::from_le_bytes(body.try_into().expect("8 bytes")),
        },
        k => return Err(format!("a record of kind {k}")),
    };
    Ok(entry)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persist::format::test_identity as identity;

    fn sample() -> Vec<u8> {
        let header = LogHeader {
            identity: identity(),
            base: 10,
            created_unix_ms: 1,
        };
        let mut out = Vec::new();
        write_header(&mut out, &header).unwrap();
        for e in [
            Entry::Put {
                key: "a/x",
                rv: 11,
                body: b"{1}",
            },
            Entry::Delete { key: "a/y", rv: 12 },
            Entry::Mark { rv: 12, unix_ms: 5 },
            Entry::Put {
                key: "a/z",
                rv: 14,
                body: b"{2}",
            },
            Entry::Put {
                key: "a/w",
                rv: 14,
                body: b"{3}",
            },
            Entry::Mark { rv: 15, unix_ms: 6 },
        ] {
            encode(&mut out, &e).unwrap();
        }
        out
    }

    fn read_all(bytes: &[u8]) -> Result<(Replayed, Vec<String>), ReadError> {
        let mut seen = Vec::new();
        let r = read(bytes, bytes.len() as u64, &identity(), |e| {
            seen.push(format!("{e:?}"));
            Ok(())
        })?;
        Ok((r, seen))
    }

    #[test]
    fn should_read_back_what_it_wrote() {
        let bytes = sample();
        let (r, seen) = read_all(&bytes).unwrap();
        assert_eq!(seen.len(), 6);
        assert_eq!(r.last_mark, Some((15, 6)));
        assert_eq!(r.committed, bytes.len() as u64);
        assert!(r.cut.is_none());
        assert_eq!(r.header.base, 10);
    }

    #[test]
    fn should_cut_a_torn_or_damaged_tail_at_the_last_mark() {
        let good = sample();
        let (whole, _) = read_all(&good).unwrap();
        let header_end = {
            let mut h = Vec::new();
            write_header(&mut h, &whole.header).unwrap();
            h.len()
        };
        for cut in header_end + 1..good.len() {
            let (r, _) = read_all(&good[..cut]).unwrap();
            // A cut right after a mark leaves a whole log, one group shorter.
            assert!(r.cut.is_some() || r.committed == cut as u64, "cut at {cut}");
            assert!(r.committed <= cut as u64);
            assert!(matches!(r.last_mark, None | Some((12, 5))), "cut at {cut}");
        }
        for flip in header_end..good.len() {
            let mut bad = good.clone();
            bad[flip] ^= 0x10;
            let (r, _) = read_all(&bad).unwrap();
            assert!(r.cut.is_some(), "flip at {flip}");
            assert!(r.committed < good.len() as u64);
        }
    }

    #[test]
    fn should_refuse_a_damaged_or_foreign_header_with_its_reason() {
        let good = sample();
        for cut in [0, 7, 12, 20] {
            let e = read_all(&good[..cut]).unwrap_err();
            assert_eq!(e.label().as_str(), "truncated", "{cut}: {e}");
        }
        let mut flipped = good.clone();
        flipped[20] ^= 1;
        assert_eq!(read_all(&flipped).unwrap_err().label().as_str(), "corrupt");
        let mut newer = good.clone();
        newer[8] = 2;
        assert_eq!(read_all(&newer).unwrap_err().label().as_str(), "format");
        let other = Identity {
            encoding: "protobuf".into(),
            ..identity()
        };
        let e = read(&good[..], good.len() as u64, &other, |_| Ok(())).unwrap_err();
        assert_eq!(e.label().as_str(), "foreign", "{e}");
    }

    #[test]
    fn should_refuse_records_out_of_order() {
        let header = LogHeader {
            identity: identity(),
            base: 10,
            created_unix_ms: 1,
        };
        for bad in [
            vec![Entry::Put {
                key: "a/x",
                rv: 10,
                body: b"{}",
            }],
            vec![
                Entry::Put {
                    key: "a/x",
                    rv: 12,
                    body: b"{}",
                },
                Entry::Put {
                    key: "a/y",
                    rv: 11,
                    body: b"{}",
                },
            ],
            vec![
                Entry::Mark { rv: 13, unix_ms: 0 },
                Entry::Delete { key: "a/x", rv: 13 },
            ],
        ] {
            let mut out = Vec::new();
            write_header(&mut out, &header).unwrap();
            for e in &bad {
                encode(&mut out, e).unwrap();
            }
            let (r, _) = read_all(&out).unwrap();
            assert!(r.cut.is_some(), "{bad:?}");
        }
    }
}
