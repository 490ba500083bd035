//! Reading a snapshot's objects: the file is read on one thread and its
//! objects parsed on one thread per core ([`Batch`]), so a warm start is not
//! bound by one core's parse.

use std::io::{Read, Seek};
use std::sync::{Arc, Mutex, mpsc};

use super::format::{self, Header, Identity, ReadError};
use crate::cache::object::{CachedObject, Objects, TypeInfo};
use crate::sync::MutexExt;

/// Whether the store `identity` names holds protobuf objects.
pub(super) fn is_protobuf(identity: &Identity) -> bool {
    identity.encoding == crate::api::media::Encoding::Protobuf.as_str()
}

/// Reads a snapshot of `len` bytes from `src` into the objects of the store
/// `identity` names, parsed as `info` says: each must parse, and parse to
/// the key and version recorded with it. Returns the header, the objects
/// and the bookmark template (empty if none).
pub fn read_objects<R: Read + Seek>(
    src: R,
    len: u64,
    identity: &Identity,
    info: &TypeInfo,
) -> Result<(Header, Objects, Vec<u8>), ReadError> {
    read(src, len, identity, info, |_| false)
}

/// [`read_objects`], leaving out (and not parsing) the objects `skip` names.
pub(super) fn read<R: Read + Seek>(
    src: R,
    len: u64,
    identity: &Identity,
    info: &TypeInfo,
    skip: impl Fn(&str) -> bool,
) -> Result<(Header, Objects, Vec<u8>), ReadError> {
    let protobuf = is_protobuf(identity);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    // Bounded: the reader stays at most two batches per worker ahead.
    let (to_parse, batches) = mpsc::sync_channel::<Batch>(workers * 2);
    let batches = Mutex::new(batches);
    std::thread::scope(|s| {
        let (to_collect, parsed) = mpsc::channel();
        let mut parsing = Vec::new();
        for _ in 0..workers {
            let (batches, to_collect) = (&batches, to_collect.clone());
            let worker = move || {
                while let Ok(batch) = batches.locked().recv() {
                    let objects = batch.parse(info, protobuf);
                    if to_collect.send(objects).is_err() {
                        return;
                    }
                }
            };
            match std::thread::Builder::new()
                .name("r8s-load".into())
                .spawn_scoped(s, worker)
            {
                Ok(t) => parsing.push(t),
                Err(e) => tracing::debug!(error = %e, "no thread to parse a snapshot on"),
            }
        }
        let collecting = s.spawn(move || collect(parsed));
        let mut batch = Batch::default();
        let read = format::read(src, len, identity, |r| {
            if skip(r.key) {
                return Ok(());
            }
            batch.push(r);
            if batch.full() {
                let next = Batch::after(&batch);
                let full = std::mem::replace(&mut batch, next);
                if parsing.is_empty() {
                    // No thread to parse on: parse here.
                    let _ = to_collect.send(full.parse(info, protobuf));
                } else if to_parse.send(full).is_err() {
                    return Err("the snapshot's parsers stopped".into());
                }
            }
            Ok(())
        });
        if read.is_ok() && !batch.is_empty() {
            if parsing.is_empty() {
                let _ = to_collect.send(batch.parse(info, protobuf));
            } else {
                let _ = to_parse.send(batch);
            }
        }
        drop((to_parse, to_collect));
        for t in parsing {
            t.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        }
        let (objects, failed) = collecting
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        let read = match read {
            Err(e) if e.is_checksum() => return Err(e),
            read => read,
        };
        // Every object parsed came before any other damage the read found.
        if let Some((_, why)) = failed {
            return Err(ReadError::Object(why));
        }
        let (header, empty) = read?;
        Ok((header, objects, empty))
    })
}

/// Objects of a snapshot, read in order, to be parsed together.
#[derive(Default)]
struct Batch {
    /// Where it starts in the snapshot's objects (for the order of errors).
    first: u64,
    /// Each object's key, version and body, in `bytes`.
    items: Vec<(std::ops::Range<usize>, u64, std::ops::Range<usize>)>,
    bytes: Vec<u8>,
}

impl Batch {
    /// About a megabyte: a few hundred objects, few sends per second.
    const BYTES: usize = 1 << 20;

    fn after(b: &Batch) -> Batch {
        Batch {
            first: b.first + b.items.len() as u64,
            items: Vec::new(),
            bytes: Vec::with_capacity(Self::BYTES + (64 << 10)),
        }
    }

    fn push(&mut self, r: format::Record<'_>) {
        let k = self.bytes.len();
        self.bytes.extend_from_slice(r.key.as_bytes());
        let b = self.bytes.len();
        self.bytes.extend_from_slice(r.body);
        self.items.push((k..b, r.rv, b..self.bytes.len()));
    }

    fn full(&self) -> bool {
        self.bytes.len() >= Self::BYTES
    }

    fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Parses each object: it must parse, to the key and version recorded
    /// with it. The first that does not ends the batch, with its index.
    fn parse(&self, info: &TypeInfo, protobuf: bool) -> Parsed {
        let mut objects = Vec::with_capacity(self.items.len());
        for (i, (k, rv, b)) in self.items.iter().enumerate() {
            let key = std::str::from_utf8(&self.bytes[k.clone()]).unwrap_or_default();
            let body = &self.bytes[b.clone()];
            let o = if protobuf {
                info.parse_protobuf(body, true)
            } else {
                info.parse(body)
            };
            let why = match o {
                Ok(o) if &*o.key == key && o.rv == *rv => {
                    objects.push(o);
                    continue;
                }
                Ok(o) => format!("parsed as {} at {}, recorded as {key} at {rv}", o.key, o.rv),
                Err(e) => e.to_string(),
            };
            return Parsed {
                objects,
                failed: Some((self.first + i as u64, format!("{key}: {why}"))),
            };
        }
        Parsed {
            objects,
            failed: None,
        }
    }
}

/// A batch's objects, and its first that did not parse (index, why).
struct Parsed {
    objects: Vec<CachedObject>,
    failed: Option<(u64, String)>,
}

/// Gathers the parsed batches into the store's objects, and the first
/// object (in the snapshot's order) that did not parse.
fn collect(parsed: mpsc::Receiver<Parsed>) -> (Objects, Option<(u64, String)>) {
    let mut objects = Objects::new();
    let mut failed: Option<(u64, String)> = None;
    for p in parsed {
        if let Some(f) = p.failed
            && failed.as_ref().is_none_or(|(i, _)| f.0 < *i)
        {
            failed = Some(f);
        }
        for o in p.objects {
            objects.insert(o.key.clone(), Arc::new(o));
        }
    }
    (objects, failed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persist::fixtures::*;
    use std::collections::BTreeMap;
    use std::io::Cursor;

    #[test]
    fn should_report_the_first_bad_object_or_else_the_checksum() {
        // About 5 MB: several batches, parsed on several threads.
        let objects: BTreeMap<String, (u64, Vec<u8>)> = (0..250)
            .map(|i| {
                let k = format!("a/p{i:03}");
                (k.clone(), (10, pod(&k[2..], 10, 20_000)))
            })
            .collect();
        let good = snapshot(10, &objects);
        let (_, all, _) =
            read_objects(Cursor::new(&good), good.len() as u64, &identity(), &info()).unwrap();
        assert_eq!(held(&all), objects);
        // Two objects that parse to another name, the later one first in
        // the batches' race: the earlier one in the file is reported.
        let mut bad = good.clone();
        for name in ["p180", "p060"] {
            let at = memchr_last(&bad, format!("\"name\":\"{name}\"").as_bytes());
            bad[at + 9] = b'q';
        }
        let fix = |b: &mut Vec<u8>| {
            let n = b.len() - 4;
            let mut crc = flate2::Crc::new();
            crc.update(&b[..n]);
            b[n..].copy_from_slice(&crc.sum().to_le_bytes());
        };
        let e =
            read_objects(Cursor::new(&bad), bad.len() as u64, &identity(), &info()).unwrap_err();
        assert!(e.is_checksum(), "{e}");
        fix(&mut bad);
        let e =
            read_objects(Cursor::new(&bad), bad.len() as u64, &identity(), &info()).unwrap_err();
        assert!(
            matches!(&e, ReadError::Object(m) if m.starts_with("a/p060:")),
            "{e}"
        );
    }

    fn memchr_last(hay: &[u8], needle: &[u8]) -> usize {
        hay.windows(needle.len())
            .position(|w| w == needle)
            .expect("found")
    }
}
