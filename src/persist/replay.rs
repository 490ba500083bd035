//! Rebuilding a store from its log and snapshot, parsing each object once.
//!
//! The log is read first, keeping each key's last change unparsed; then the
//! snapshot is read, skipping the objects the log changed, while those last
//! changes are parsed beside it (a second thread). A load parses what the
//! store holds, whatever the log's length: ten minutes of churn cost the
//! objects they left, not every event (a warm restart at 150,000 pods parsed
//! 29,000 events on top of the snapshot, 1.4 s on 2 cores, before this).
//!
//! Only what is used is checked as an object: a change a later one replaced,
//! or a snapshot object the log changed, is never parsed. A last change that
//! does not parse cuts the log before its group, as a damaged record does:
//! the log is read again up to there ([`Stop`]), and the state is the one at
//! the mark before it.

use std::collections::HashMap;
use std::io::{Read, Seek};
use std::sync::Arc;

use super::format::{Header, Identity, ReadError};
use super::log;
use super::objects::{self, is_protobuf};
use crate::cache::object::{CachedObject, Objects, TypeInfo};

/// One key's last change after the snapshot.
enum Change {
    /// Put at `rv`, as `body`, in the log's `group`th group.
    Put { rv: u64, body: Vec<u8>, group: u64 },
    /// Deleted.
    Delete,
}

/// Where a log must stop being read: at the put of `key` in `group`, which
/// did not parse as the store's object (`why`).
#[derive(Debug, Clone)]
pub(super) struct Stop {
    group: u64,
    key: Box<str>,
    why: String,
}

/// A store's state being rebuilt: the version reached and the changes after
/// the snapshot that reach it, unparsed.
pub(super) struct Replay {
    /// The version the state is at.
    pub at: u64,
    /// When that state was written (Unix ms).
    pub written_ms: u64,
    /// Each changed key's last committed change.
    changes: HashMap<Box<str>, Change>,
    /// The changes of the group being read, committed at its mark.
    pending: Vec<(Box<str>, Change)>,
    /// Groups read so far (every mark counts, used or not): the same on
    /// every read of the same files, so a [`Stop`] finds its record again.
    groups: u64,
    /// Where to stop, if a read before found a change that does not parse.
    stop: Option<Stop>,
}

impl Stop {
    /// `self`, the stop found reading up to `before` (if any): each read
    /// stops at an earlier group, or the files changed while being read.
    pub fn after(self, before: Option<&Stop>) -> Result<Stop, ReadError> {
        match before {
            Some(b) if b.group <= self.group => Err(ReadError::Corrupt(self.why)),
            _ => Ok(self),
        }
    }
}

impl Replay {
    /// The state `at`, written at `written_ms`, with no changes yet; reading
    /// stops where `stop` says.
    pub fn new(at: u64, written_ms: u64, stop: Option<Stop>) -> Self {
        Replay {
            at,
            written_ms,
            changes: HashMap::new(),
            pending: Vec::new(),
            groups: 0,
            stop,
        }
    }

    /// Whether the log changed `key` (its snapshot copy is not used).
    pub fn changed(&self, key: &str) -> bool {
        self.changes.contains_key(key)
    }

    /// Reads the log in `src` (`len` bytes) of the store `identity` names,
    /// keeping the changes after the version reached.
    pub fn read<R: Read>(
        &mut self,
        src: R,
        len: u64,
        identity: &Identity,
    ) -> Result<log::Replayed, ReadError> {
        self.pending.clear();
        let r = log::read(src, len, identity, |entry| {
            if let (log::Entry::Put { key, .. }, Some(stop)) = (entry, &self.stop)
                && stop.group == self.groups
                && *stop.key == *key
            {
                return Err(stop.why.clone());
            }
            match entry {
                // Changes the state already holds (a segment older than the
                // snapshot, or the part of one before it).
                log::Entry::Put { rv, .. } | log::Entry::Delete { rv, .. } if rv <= self.at => {}
                log::Entry::Put { key, rv, body } => {
                    let group = self.groups;
                    let body = body.to_vec();
                    self.pending
                        .push((key.into(), Change::Put { rv, body, group }));
                }
                log::Entry::Delete { key, .. } => self.pending.push((key.into(), Change::Delete)),
                log::Entry::Mark { rv, unix_ms } => {
                    self.groups += 1;
                    self.changes.extend(self.pending.drain(..));
                    // A mark at the version reached still says the store
                    // was current then: the state is that much younger.
                    if rv >= self.at {
                        self.at = rv;
                        self.written_ms = self.written_ms.max(unix_ms);
                    }
                }
            }
            Ok(())
        })?;
        self.pending.clear();
        Ok(r)
    }

    /// Parses the last puts as `info` says: each must parse to its key, at
    /// or before its event's version. The first one that does not (in the
    /// log's order) says where to stop reading.
    fn parse(&self, info: &TypeInfo, protobuf: bool) -> Result<Vec<CachedObject>, Stop> {
        let mut parsed = Vec::with_capacity(self.changes.len());
        let mut failed: Option<Stop> = None;
        for (key, change) in &self.changes {
            let Change::Put { rv, body, group } = change else {
                continue;
            };
            if failed.as_ref().is_some_and(|f| f.group <= *group) {
                continue;
            }
            let o = if protobuf {
                info.parse_protobuf(body, true)
            } else {
                info.parse(body)
            };
            let why = match o {
                Ok(o) if *o.key == **key && o.rv <= *rv => {
                    parsed.push(o);
                    continue;
                }
                Ok(o) => format!("parsed as {} at {}, recorded as {key} at {rv}", o.key, o.rv),
                Err(e) => format!("{key}: {e}"),
            };
            failed = Some(Stop {
                group: *group,
                key: key.clone(),
                why,
            });
        }
        match failed {
            Some(stop) => Err(stop),
            None => Ok(parsed),
        }
    }

    /// Applies the changes to `objects`, with `parsed` their puts.
    fn apply(&self, objects: &mut Objects, parsed: Vec<CachedObject>) {
        for key in self.changes.keys() {
            objects.remove(&**key);
        }
        for o in parsed {
            objects.insert(o.key.clone(), Arc::new(o));
        }
    }

    /// Reads the snapshot in `src` (`len` bytes) of the store `identity`
    /// names, leaving out the objects the log changed, while the log's last
    /// puts are parsed on a second thread; then applies them. `Err(Ok(stop))`
    /// when a put does not parse (read the log again up to `stop`),
    /// `Err(Err(e))` when the snapshot cannot be used.
    pub fn load<R: Read + Seek>(
        &self,
        src: R,
        len: u64,
        identity: &Identity,
        info: &TypeInfo,
    ) -> Result<(Header, Objects, Vec<u8>), Result<Stop, ReadError>> {
        let protobuf = is_protobuf(identity);
        let (snapshot, parsed) = std::thread::scope(|s| {
            let parsing = std::thread::Builder::new()
                .name("r8s-replay".into())
                .spawn_scoped(s, || self.parse(info, protobuf));
            let snapshot = objects::read(src, len, identity, info, |k| self.changed(k));
            let parsed = match parsing {
                Ok(t) => t.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                // No thread to be had: parse here.
                Err(_) => self.parse(info, protobuf),
            };
            (snapshot, parsed)
        });
        let (header, mut objects, empty) = snapshot.map_err(Err)?;
        self.apply(&mut objects, parsed.map_err(Ok)?);
        Ok((header, objects, empty))
    }
}

/// Replays the log `bytes` of the store `identity` names over `objects`,
/// the state at `at`, parsing objects as `info` says (the log reader's whole
/// path, for the fuzz target). Returns what the reader found, the objects
/// and the version reached.
pub fn replay_log(
    bytes: &[u8],
    identity: &Identity,
    info: &TypeInfo,
    mut objects: Objects,
    at: u64,
) -> Result<(log::Replayed, Objects, u64), ReadError> {
    let mut stop: Option<Stop> = None;
    loop {
        let mut state = Replay::new(at, 0, stop.clone());
        let r = state.read(bytes, bytes.len() as u64, identity)?;
        match state.parse(info, is_protobuf(identity)) {
            Ok(parsed) => {
                state.apply(&mut objects, parsed);
                return Ok((r, objects, state.at));
            }
            Err(s) => stop = Some(s.after(stop.as_ref())?),
        }
    }
}

/// Reads the log segment at `path` of the store `identity` names into
/// `state`.
pub(super) fn segment(
    state: &mut Replay,
    path: &std::path::Path,
    identity: &Identity,
) -> Result<log::Replayed, ReadError> {
    let file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    state.read(file, len, identity)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persist::fixtures::*;
    use crate::persist::objects::read_objects;
    use std::collections::BTreeMap;
    use std::io::Cursor;

    #[test]
    fn should_load_what_applying_every_event_in_order_would() {
        let mut rng = fastrand::Rng::with_seed(42);
        for round in 0..20 {
            let mut model: BTreeMap<String, (u64, Vec<u8>)> = (0..300)
                .map(|i| {
                    let k = format!("a/p{i:03}");
                    (k.clone(), (10, pod(&k[2..], 10, rng.usize(..3000))))
                })
                .collect();
            let snap = snapshot(10, &model);
            // Groups of puts and deletes, each closed by its mark.
            let mut records: Vec<(String, u64, Option<Vec<u8>>)> = Vec::new();
            let mut marks = Vec::new();
            let mut rv = 10;
            for _ in 0..rng.usize(1..40) {
                for _ in 0..rng.usize(1..5) {
                    rv += 1;
                    let k = format!("a/p{:03}", rng.usize(..400));
                    if rng.u8(..4) == 0 {
                        records.push((k.clone(), rv, None));
                        model.remove(&k);
                    } else {
                        let body = pod(&k[2..], rv, rng.usize(..3000));
                        records.push((k.clone(), rv, Some(body.clone())));
                        model.insert(k, (rv, body));
                    }
                }
                marks.push((records.len(), rv));
            }
            let mut entries = Vec::new();
            let mut at = 0;
            for (n, mark) in &marks {
                for (k, rv, body) in &records[at..*n] {
                    entries.push(match body {
                        Some(b) => log::Entry::Put {
                            key: k,
                            rv: *rv,
                            body: b,
                        },
                        None => log::Entry::Delete { key: k, rv: *rv },
                    });
                }
                entries.push(log::Entry::Mark {
                    rv: *mark,
                    unix_ms: 2,
                });
                at = *n;
            }
            let log = log_of(10, &entries);
            let mut state = Replay::new(10, 1, None);
            let r = state.read(&log[..], log.len() as u64, &identity()).unwrap();
            assert!(r.cut.is_none());
            let (_, objects, _) = state
                .load(Cursor::new(&snap), snap.len() as u64, &identity(), &info())
                .map_err(|e| format!("{e:?}"))
                .unwrap();
            assert_eq!(held(&objects), model, "round {round}");
            assert_eq!(state.at, rv);
            // The fuzz target's path agrees.
            let (_, all, _) =
                read_objects(Cursor::new(&snap), snap.len() as u64, &identity(), &info()).unwrap();
            let (_, replayed, at) = replay_log(&log, &identity(), &info(), all, 10).unwrap();
            assert_eq!((held(&replayed), at), (model, rv), "round {round}");
        }
    }

    #[test]
    fn should_cut_the_log_before_a_last_change_that_does_not_parse() {
        let (a, c) = (pod("a", 11, 0), pod("c", 13, 0));
        let entries = [
            log::Entry::Put {
                key: "a/a",
                rv: 11,
                body: &a,
            },
            log::Entry::Mark { rv: 11, unix_ms: 2 },
            log::Entry::Put {
                key: "a/b",
                rv: 12,
                body: b"{not json",
            },
            log::Entry::Mark { rv: 12, unix_ms: 2 },
            log::Entry::Put {
                key: "a/c",
                rv: 13,
                body: &c,
            },
            log::Entry::Mark { rv: 13, unix_ms: 2 },
        ];
        let log = log_of(10, &entries);
        let (r, objects, at) = replay_log(&log, &identity(), &info(), Objects::new(), 10).unwrap();
        assert_eq!(at, 11);
        assert_eq!(held(&objects).keys().collect::<Vec<_>>(), ["a/a"]);
        let cut = r.cut.expect("a cut");
        assert_eq!(cut.label().as_str(), "corrupt");
        assert!(cut.to_string().contains("a/b"), "{cut}");
        // A put that a later one replaced is never used, so never parsed.
        let b13 = pod("b", 13, 0);
        let mut replaced = entries.to_vec();
        replaced[4] = log::Entry::Put {
            key: "a/b",
            rv: 13,
            body: &b13,
        };
        let log = log_of(10, &replaced);
        let (r, objects, at) = replay_log(&log, &identity(), &info(), Objects::new(), 10).unwrap();
        assert!(r.cut.is_none());
        assert_eq!(held(&objects).keys().collect::<Vec<_>>(), ["a/a", "a/b"]);
        assert_eq!(at, 13);
    }

    #[test]
    fn should_parse_no_snapshot_object_the_log_replaced() {
        let objects: BTreeMap<String, (u64, Vec<u8>)> = [
            ("a/a".to_string(), (10, pod("a", 10, 0))),
            ("a/b".to_string(), (10, b"{not a pod".to_vec())),
        ]
        .into();
        let snap = snapshot(10, &objects);
        let b = pod("b", 11, 0);
        let log = log_of(
            10,
            &[
                log::Entry::Put {
                    key: "a/b",
                    rv: 11,
                    body: &b,
                },
                log::Entry::Mark { rv: 11, unix_ms: 2 },
            ],
        );
        let mut state = Replay::new(10, 1, None);
        state.read(&log[..], log.len() as u64, &identity()).unwrap();
        let (_, loaded, _) = state
            .load(Cursor::new(&snap), snap.len() as u64, &identity(), &info())
            .map_err(|e| format!("{e:?}"))
            .unwrap();
        assert_eq!(loaded.get("a/b").map(|o| o.rv), Some(11));
        // Without the log, the same snapshot is refused.
        let e =
            read_objects(Cursor::new(&snap), snap.len() as u64, &identity(), &info()).unwrap_err();
        assert_eq!(e.label().as_str(), "corrupt");
    }
}
