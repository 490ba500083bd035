//! Snapshots of the caches on local disk (`persist.dir`), so a restart comes
//! back warm: each store is loaded from its snapshot, its log of changes is
//! replayed over it, and its reflector resumes the upstream watch from the
//! version reached, instead of relisting every resource (a fleet of sidecars
//! rolled at once is a relist storm against the apiserver).
//!
//! The stores say what to save (their current [`Version`], immutable, and
//! the events of their own log, so writing never blocks them) and take what
//! is loaded ([`Restored`], applied by their reflector, their one writer);
//! files are this module's alone, and [`writer`] is the one task that writes
//! them. What changed is appended to a log every `persist.interval_seconds`
//! ([`log`]); a full snapshot ([`format`]) is written only when the log
//! outgrows `persist.compaction_ratio` of it, at a bounded pace ([`pace`]).
//! Reading either treats the file as untrusted input.

pub mod format;
pub mod log;
mod pace;
mod resources;
mod writer;

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use crate::api::Gvr;
use crate::api::media::Encoding;
use crate::cache::object::{CachedObject, Objects, TypeInfo};
use crate::cache::store::{Restored, Store, Version};
use crate::config::PersistConfig;
use crate::metrics::{self, PersistLoad};
use crate::sync::MutexExt;
use format::{Header, Identity, ReadError};
pub use pace::Pace;

/// Why `persist.dir` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// The directory could not be created or made private.
    #[error(
        "persist.dir {path}: {source} (create it writable by r8s's user, or unset persist.dir)"
    )]
    Dir {
        /// The directory.
        path: String,
        /// What failed.
        source: io::Error,
    },
}

/// One store to save, and what its snapshots are of.
#[derive(Clone)]
pub struct Target {
    /// The store.
    pub store: Arc<Store>,
    /// What its snapshot must match to be loaded again.
    pub identity: Identity,
    /// Its snapshots' series (every result registered at 0).
    series: metrics::PersistSeries,
}

impl Target {
    /// The store `store`, saved and loaded as `identity`.
    pub fn new(store: Arc<Store>, identity: Identity) -> Self {
        let series = metrics::PersistSeries::new(store.labels());
        Target {
            store,
            identity,
            series,
        }
    }
}

/// Where a loaded store's files end, for the writer to go on from.
#[derive(Debug)]
struct Tail {
    /// The version the store was restored at.
    rv: u64,
    /// The log segment that ends at `rv`, and the bytes of it that count
    /// (what follows its last whole group is cut off before appending).
    segment: Option<(PathBuf, u64, u64)>,
    /// Bytes of the snapshot, and of every log segment kept.
    snapshot_bytes: u64,
    log_bytes: u64,
    /// When the snapshot was written.
    snapshot_written: SystemTime,
}

/// The snapshot directory and its policy.
#[derive(Debug)]
pub struct Persist {
    dir: PathBuf,
    upstream: String,
    include_secrets: bool,
    interval: Duration,
    compaction_ratio: f64,
    pace: Arc<Pace>,
    /// What each store's load left for the writer, by snapshot file.
    tails: Mutex<HashMap<PathBuf, Tail>>,
}

impl Persist {
    /// The directory `cfg` names, created 0700 (or made 0700) if set; `None`
    /// when persistence is off. `upstream` identifies the upstream
    /// ([`crate::upstream::Upstream::identity`]).
    pub fn open(cfg: &PersistConfig, upstream: String) -> Result<Option<Self>, PersistError> {
        let Some(dir) = &cfg.dir else {
            return Ok(None);
        };
        let err = |source| PersistError::Dir {
            path: dir.display().to_string(),
            source,
        };
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(err)?;
        let mode = fs::metadata(dir).map_err(err)?.permissions().mode() & 0o777;
        if mode != 0o700
            && let Err(e) = fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
        {
            // Someone else's directory (a Kubernetes emptyDir is root's, 0777):
            // the files themselves are 0600.
            tracing::warn!(dir = %dir.display(), mode = format!("{mode:o}"), error = %e, "persist.dir is not private to r8s and r8s cannot make it so; its snapshots are 0600");
        }
        Ok(Some(Persist {
            dir: dir.clone(),
            upstream,
            include_secrets: cfg.include_secrets,
            interval: Duration::from_secs(cfg.interval_seconds),
            compaction_ratio: cfg.compaction_ratio,
            pace: Pace::new(cfg.max_write_bytes_per_second),
            tails: Mutex::new(HashMap::new()),
        }))
    }

    /// Whether `gvr` is saved: everything but `secrets`, unless
    /// `persist.include_secrets` (a snapshot is plaintext on disk).
    pub fn covers(&self, gvr: &Gvr) -> bool {
        self.include_secrets || !(gvr.group().is_empty() && gvr.resource() == "secrets")
    }

    /// What a snapshot of `gvr`'s store in `encoding`, holding `info`'s
    /// objects, is of.
    pub fn identity(&self, gvr: &Gvr, encoding: Encoding, info: &TypeInfo) -> Identity {
        Identity {
            upstream: self.upstream.clone(),
            resource: gvr.to_string(),
            kind: info.kind.clone(),
            api_version: info.api_version.clone(),
            encoding: encoding.as_str().to_string(),
        }
    }

    /// The name every file of the store `identity` names starts with:
    /// `apps_v1_deployments.json` (`core` for the core group).
    fn stem(identity: &Identity) -> String {
        let name: String = identity
            .resource
            .split('/')
            .collect::<Vec<_>>()
            .join("_")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let name = if identity.resource.matches('/').count() == 1 {
            format!("core_{name}")
        } else {
            name
        };
        format!("{name}.{}", identity.encoding)
    }

    /// The snapshot of the store `identity` names: `core_v1_pods.json.snap`.
    fn file(&self, identity: &Identity) -> PathBuf {
        self.dir.join(format!("{}.snap", Self::stem(identity)))
    }

    /// Its log segment starting after `base`:
    /// `core_v1_pods.json.00000000000000012345.log`.
    fn segment(&self, identity: &Identity, base: u64) -> PathBuf {
        self.dir
            .join(format!("{}.{base:020}.log", Self::stem(identity)))
    }

    /// Its log segments on disk, by the version they start after.
    fn segments(&self, identity: &Identity) -> Vec<(u64, PathBuf)> {
        let prefix = format!("{}.", Self::stem(identity));
        let mut found: Vec<(u64, PathBuf)> = fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let base = name.strip_prefix(&prefix)?.strip_suffix(".log")?;
                (base.len() == 20 && base.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| Some((base.parse().ok()?, e.path())))?
            })
            .collect();
        found.sort();
        found
    }

    /// Whether a snapshot of the store `identity` names is there (to load).
    pub fn has_snapshot(&self, identity: &Identity) -> bool {
        self.file(identity).exists()
    }

    /// Loads the snapshot of the store `identity` names and replays its log
    /// over it, parsing objects as `info` says (blocking: file reads and
    /// parsing). `None` when there is no snapshot, or when it cannot be
    /// used: then the reason is logged and counted, and the store starts
    /// cold. A log, or a log's tail, that cannot be used is logged and
    /// counted, and the state reached before it is loaded.
    pub fn load(&self, target: &Target, info: &TypeInfo) -> Option<Restored> {
        let (identity, labels) = (&target.identity, target.store.labels());
        let path = self.file(identity);
        let started = Instant::now();
        let segments = self.segments(identity);
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.remove(&segments);
                return None;
            }
            Err(e) => return self.refused(target, &path, ReadError::Io(e)),
        };
        let len = match file.metadata() {
            Ok(m) => m.len(),
            Err(e) => return self.refused(target, &path, ReadError::Io(e)),
        };
        let (header, objects, empty) = match read_objects(file, len, identity, info) {
            Ok(r) => r,
            Err(e) => {
                self.remove(&segments);
                return self.refused(target, &path, e);
            }
        };
        target.series.loaded(PersistLoad::Loaded);
        let snapshot_written = UNIX_EPOCH + Duration::from_millis(header.written_unix_ms);
        let mut state = Replay {
            objects,
            at: header.resource_version,
            written_ms: header.written_unix_ms,
            pending: Vec::new(),
        };
        let mut tail = Tail {
            rv: state.at,
            segment: None,
            snapshot_bytes: len,
            log_bytes: 0,
            snapshot_written,
        };
        let mut replayed = 0;
        let mut rest = segments.into_iter();
        for (base, seg) in rest.by_ref() {
            if base > state.at {
                tracing::warn!(resource = %labels, file = %seg.display(), base, at = state.at, "log segment ignored: it starts after the version reached (a gap); the watch resumes from there");
                target.series.log_loaded(PersistLoad::Corrupt);
                self.remove(&[(base, seg)]);
                break;
            }
            match state.segment(&seg, identity, info) {
                Ok(r) => {
                    replayed += 1;
                    let ends = r.last_mark.map_or(r.header.base, |(rv, _)| rv);
                    tail.log_bytes += r.committed;
                    if ends == state.at {
                        tail.segment = Some((seg.clone(), base, r.committed));
                    }
                    match r.cut {
                        None => target.series.log_loaded(PersistLoad::Loaded),
                        // A later segment is used only if it starts at or
                        // before the version reached (the gap rule above).
                        Some(why) => {
                            tracing::warn!(resource = %labels, file = %seg.display(), reason = %why, at = state.at, "log cut at its last whole record: what follows is not used");
                            target.series.log_loaded(why.label());
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(resource = %labels, file = %seg.display(), error = %e, at = state.at, "log segment ignored");
                    target.series.log_loaded(e.label());
                    self.remove(&[(base, seg)]);
                }
            }
        }
        // The segments after a gap cannot follow: their changes would apply
        // to a state they do not follow.
        self.remove(&rest.collect::<Vec<_>>());
        tail.rv = state.at;
        let now = unix_ms(SystemTime::now());
        let age = Duration::from_millis(now.saturating_sub(state.written_ms));
        tracing::info!(
            resource = %labels,
            objects = state.objects.len(),
            snapshot_rv = header.resource_version,
            rv = state.at,
            segments = replayed,
            bytes = len + tail.log_bytes,
            age = ?age,
            took = ?started.elapsed(),
            "cache loaded from its snapshot and log; resuming its upstream watch from there"
        );
        target.series.replayed(started.elapsed());
        self.tails.locked().insert(path, tail);
        Some(Restored {
            objects: state.objects,
            rv: state.at,
            empty: (!empty.is_empty()).then(|| Bytes::from(empty)),
            age,
        })
    }

    /// Removes `segments` (best effort: a segment left behind is ignored by
    /// the next load, or removed by the next compaction).
    fn remove(&self, segments: &[(u64, PathBuf)]) {
        for (_, seg) in segments {
            if let Err(e) = fs::remove_file(seg) {
                tracing::debug!(file = %seg.display(), error = %e, "could not remove a log segment");
            }
        }
    }

    fn refused(&self, target: &Target, path: &Path, e: ReadError) -> Option<Restored> {
        tracing::warn!(
            resource = %target.store.labels(),
            file = %path.display(),
            error = %e,
            "snapshot ignored; this cache starts cold (lists from the upstream)"
        );
        target.series.loaded(e.label());
        None
    }

    /// Writes a snapshot of `version` for the store `identity` names
    /// (blocking), at `pace`: a temporary file, fsync, rename, fsync of the
    /// directory. Returns the bytes written.
    pub fn save(
        &self,
        identity: &Identity,
        version: &Version,
        empty: Option<&[u8]>,
        pace: Arc<Pace>,
    ) -> io::Result<u64> {
        let path = self.file(identity);
        let tmp = path.with_extension("snap.tmp");
        let result = (|| {
            let file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            let header = Header {
                identity: identity.clone(),
                resource_version: version.rv,
                written_unix_ms: unix_ms(SystemTime::now()),
                written_by: format!("r8s {}", env!("CARGO_PKG_VERSION")),
            };
            let mut w = BufWriter::with_capacity(256 << 10, pace::Paced::new(file, pace));
            let objects = || {
                version
                    .objects
                    .values()
                    .map(|o| (&*o.key, o.rv, &o.body[..]))
            };
            let bytes = format::write(&mut w, &header, empty, objects)?;
            let file = w.into_inner().map_err(|e| e.into_error())?.into_inner();
            file.sync_all()?;
            drop(file);
            fs::rename(&tmp, &path)?;
            File::open(&self.dir)?.sync_all()?;
            Ok(bytes)
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }
}

/// A store's state being rebuilt from its snapshot and log.
struct Replay {
    objects: Objects,
    /// The version `objects` are the state at.
    at: u64,
    /// When that state was written (Unix ms).
    written_ms: u64,
    /// The changes of the group being read, applied at its mark.
    pending: Vec<(Arc<str>, Option<CachedObject>)>,
}

impl Replay {
    /// Replays the log segment at `path` of the store `identity` names.
    fn segment(
        &mut self,
        path: &Path,
        identity: &Identity,
        info: &TypeInfo,
    ) -> Result<log::Replayed, ReadError> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        self.replay(file, len, identity, info)
    }

    /// Replays the log in `src` (`len` bytes) over the state.
    fn replay<R: io::Read>(
        &mut self,
        src: R,
        len: u64,
        identity: &Identity,
        info: &TypeInfo,
    ) -> Result<log::Replayed, ReadError> {
        let protobuf = identity.encoding == Encoding::Protobuf.as_str();
        self.pending.clear();
        let r = log::read(src, len, identity, |entry| {
            match entry {
                // Changes the state already holds (a segment older than the
                // snapshot, or the part of one before it).
                log::Entry::Put { rv, .. } | log::Entry::Delete { rv, .. } if rv <= self.at => {}
                log::Entry::Put { key, rv, body } => {
                    let o = if protobuf {
                        info.parse_protobuf(body, true)
                    } else {
                        info.parse(body)
                    }
                    .map_err(|e| format!("{key}: {e}"))?;
                    if &*o.key != key || o.rv > rv {
                        return Err(format!(
                            "parsed as {} at {}, recorded as {key} at {rv}",
                            o.key, o.rv
                        ));
                    }
                    self.pending.push((o.key.clone(), Some(o)));
                }
                log::Entry::Delete { key, .. } => self.pending.push((Arc::from(key), None)),
                log::Entry::Mark { rv, unix_ms } => {
                    for (key, o) in self.pending.drain(..) {
                        match o {
                            Some(o) => {
                                self.objects.insert(key, Arc::new(o));
                            }
                            None => {
                                self.objects.remove(&key);
                            }
                        }
                    }
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
}

/// Replays the log in `src` (`len` bytes) of the store `identity` names over
/// `objects`, the state at `at`, parsing objects as `info` says (the log
/// reader's whole path, for the fuzz target). Returns what the reader found,
/// the objects and the version reached.
pub fn replay_log<R: io::Read>(
    src: R,
    len: u64,
    identity: &Identity,
    info: &TypeInfo,
    objects: Objects,
    at: u64,
) -> Result<(log::Replayed, Objects, u64), ReadError> {
    let mut state = Replay {
        objects,
        at,
        written_ms: 0,
        pending: Vec::new(),
    };
    let r = state.replay(src, len, identity, info)?;
    Ok((r, state.objects, state.at))
}

/// Reads a snapshot of `len` bytes from `src` into the objects of the store
/// `identity` names, parsed as `info` says: each must parse, and parse to
/// the key and version recorded with it. Returns the header, the objects
/// and the bookmark template (empty if none).
pub fn read_objects<R: io::Read + io::Seek>(
    src: R,
    len: u64,
    identity: &Identity,
    info: &TypeInfo,
) -> Result<(Header, Objects, Vec<u8>), ReadError> {
    let protobuf = identity.encoding == Encoding::Protobuf.as_str();
    let mut objects = Objects::new();
    let (header, empty) = format::read(src, len, identity, |r| {
        let o = if protobuf {
            info.parse_protobuf(r.body, true)
        } else {
            info.parse(r.body)
        }
        .map_err(|e| e.to_string())?;
        if &*o.key != r.key || o.rv != r.rv {
            return Err(format!(
                "parsed as {} at {}, recorded as {} at {}",
                o.key, o.rv, r.key, r.rv
            ));
        }
        objects.insert(o.key.clone(), Arc::new(o));
        Ok(())
    })?;
    Ok((header, objects, empty))
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
