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

#[cfg(test)]
mod fixtures;
pub mod format;
pub mod log;
mod object_caches;
mod objects;
mod pace;
mod replay;
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
use crate::cache::object::TypeInfo;
use crate::cache::scope::CacheScope;
use crate::cache::store::{Restored, Store, Version};
use crate::config::PersistConfig;
use crate::metrics::{self, PersistLoad};
use crate::sync::MutexExt;
use format::{Header, Identity, ReadError};
pub use objects::read_objects;
pub use pace::Pace;
pub use replay::replay_log;

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
    /// Fires once its cache is retired: the writer stops saving it and
    /// removes its files.
    retired: crate::shutdown::Signal,
}

impl Target {
    /// The store `store`, saved and loaded as `identity` until `retired`.
    pub fn new(store: Arc<Store>, identity: Identity, retired: crate::shutdown::Signal) -> Self {
        let series = metrics::PersistSeries::new(store.labels());
        Target {
            store,
            identity,
            series,
            retired,
        }
    }

    /// Whether its cache was retired (announced by the cache's life).
    pub fn retired(&self) -> bool {
        self.retired.fired()
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

    /// Whether `gvr`'s cache of `scope` is saved: everything but `secrets`,
    /// unless `persist.include_secrets` (a snapshot is plaintext on disk);
    /// one object's cache only where its namespace and name make a file
    /// name as they are (what the apiserver accepts as names does).
    pub fn covers(&self, gvr: &Gvr, scope: &CacheScope) -> bool {
        let plain = |s: &str| {
            !s.is_empty()
                && !s.starts_with('.')
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
        };
        let named = match scope {
            CacheScope::Object { namespace, name } => plain(namespace) && plain(name),
            _ => true,
        };
        named && (self.include_secrets || !(gvr.group().is_empty() && gvr.resource() == "secrets"))
    }

    /// What a snapshot of `gvr`'s store in `encoding`, holding `info`'s
    /// objects in `scope`, is of.
    pub fn identity(
        &self,
        gvr: &Gvr,
        encoding: Encoding,
        info: &TypeInfo,
        scope: &CacheScope,
    ) -> Identity {
        Identity {
            upstream: self.upstream.clone(),
            resource: gvr.to_string(),
            kind: info.kind.clone(),
            api_version: info.api_version.clone(),
            encoding: encoding.as_str().to_string(),
            managed_fields_dropped: info.drop_managed_fields,
            scope: match scope.is_whole() {
                true => String::new(),
                false => scope.to_string(),
            },
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
        // One object's cache (a node-local r8s's configmap): the object
        // after `~`, which no resource's name holds, so that no store's
        // files begin with another's.
        match identity.object() {
            Some((ns, object)) => format!("{name}~{ns}~{object}.{}", identity.encoding),
            None => format!("{name}.{}", identity.encoding),
        }
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

    /// Removes the snapshots and logs of every store but those `kept` names:
    /// a resource no longer cached (gone upstream, as a deleted CRD is, or
    /// no longer in `cache.resources`) is not loaded, and its files are not
    /// left to fill the disk. Each removal is logged.
    pub fn discard_others(&self, kept: &[Identity]) {
        let stems: Vec<String> = kept.iter().map(|i| format!("{}.", Self::stem(i))).collect();
        let files = fs::read_dir(&self.dir).into_iter().flatten().flatten();
        for e in files {
            let Ok(name) = e.file_name().into_string() else {
                continue;
            };
            // Object caches start as they are asked for, after this: their
            // owner removes their files (`discard_objects`).
            let ours = (name.ends_with(".snap") || name.ends_with(".log")) && !name.contains('~');
            if !ours || stems.iter().any(|s| name.starts_with(s.as_str())) {
                continue;
            }
            match fs::remove_file(e.path()) {
                Ok(()) => {
                    tracing::info!(file = %e.path().display(), "removed the snapshot of a resource no longer cached (not served upstream, or not in cache.resources)")
                }
                Err(err) => {
                    tracing::warn!(file = %e.path().display(), error = %err, "could not remove the snapshot of a resource no longer cached")
                }
            }
        }
    }

    /// Whether a snapshot of the store `identity` names is there (to load).
    pub fn has_snapshot(&self, identity: &Identity) -> bool {
        self.file(identity).exists()
    }

    /// Loads the snapshot of the store `identity` names and replays its log
    /// over it, parsing objects as `info` says (blocking: file reads and
    /// parsing; [`replay`] says in what order). `None` when there is no
    /// snapshot, or when it cannot be used: then the reason is logged and
    /// counted, and the store starts cold. A log, or a log's tail, that
    /// cannot be used is logged and counted, and the state reached before
    /// it is loaded.
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
        let unusable = |e: ReadError| {
            self.remove(&segments);
            self.refused(target, &path, e)
        };
        let peeked = match format::peek(&file, len, identity) {
            Ok(h) => h,
            // The whole read says why (it checks the checksum first).
            Err(e) => return unusable(read_objects(&file, len, identity, info).err().unwrap_or(e)),
        };
        let mut stop: Option<replay::Stop> = None;
        let (scan, header, objects, empty) = loop {
            let scan = self.scan(&segments, &peeked, identity, stop.clone());
            match scan.state.load(&file, len, identity, info) {
                Ok((header, objects, empty)) => break (scan, header, objects, empty),
                Err(Err(e)) => return unusable(e),
                Err(Ok(s)) => match s.after(stop.as_ref()) {
                    Ok(s) => stop = Some(s),
                    Err(e) => return unusable(e),
                },
            }
        };
        target.series.loaded(PersistLoad::Loaded);
        for (seg, outcome) in &scan.outcomes {
            match outcome {
                Segment::Loaded => target.series.log_loaded(PersistLoad::Loaded),
                Segment::Cut(why) => {
                    tracing::warn!(resource = %labels, file = %seg.display(), reason = %why, at = scan.state.at, "log cut at its last whole record: what follows is not used");
                    target.series.log_loaded(why.label());
                }
                Segment::Ignored(e) => {
                    tracing::warn!(resource = %labels, file = %seg.display(), error = %e, at = scan.state.at, "log segment ignored");
                    target.series.log_loaded(e.label());
                }
                Segment::After(base) => {
                    tracing::warn!(resource = %labels, file = %seg.display(), base, at = scan.state.at, "log segment ignored: it starts after the version reached (a gap); the watch resumes from there");
                    target.series.log_loaded(PersistLoad::Corrupt);
                }
            }
        }
        self.remove(&scan.removed);
        let state = &scan.state;
        let tail = Tail {
            rv: state.at,
            segment: scan.segment.clone(),
            snapshot_bytes: len,
            log_bytes: scan.log_bytes,
            snapshot_written: UNIX_EPOCH + Duration::from_millis(header.written_unix_ms),
        };
        let now = unix_ms(SystemTime::now());
        let age = Duration::from_millis(now.saturating_sub(state.written_ms));
        tracing::info!(
            resource = %labels,
            objects = objects.len(),
            snapshot_rv = header.resource_version,
            rv = state.at,
            segments = scan.outcomes.iter().filter(|(_, o)| matches!(o, Segment::Loaded | Segment::Cut(_))).count(),
            bytes = len + tail.log_bytes,
            age = ?age,
            took = ?started.elapsed(),
            "cache loaded from its snapshot and log; resuming its upstream watch from there"
        );
        target.series.replayed(started.elapsed());
        self.tails.locked().insert(path, tail);
        Some(Restored {
            objects,
            rv: state.at,
            empty: (!empty.is_empty()).then(|| Bytes::from(empty)),
            age,
        })
    }

    /// Reads the log `segments` written after the snapshot `header` names,
    /// in order, stopping where `stop` says (see [`replay`]).
    fn scan(
        &self,
        segments: &[(u64, PathBuf)],
        header: &Header,
        identity: &Identity,
        stop: Option<replay::Stop>,
    ) -> Scan {
        let mut scan = Scan {
            state: replay::Replay::new(header.resource_version, header.written_unix_ms, stop),
            outcomes: Vec::new(),
            removed: Vec::new(),
            segment: None,
            log_bytes: 0,
        };
        let mut rest = segments.iter();
        for (base, seg) in rest.by_ref() {
            let state = &mut scan.state;
            if *base > state.at {
                scan.outcomes.push((seg.clone(), Segment::After(*base)));
                scan.removed.push((*base, seg.clone()));
                break;
            }
            match replay::segment(state, seg, identity) {
                Ok(r) => {
                    let ends = r.last_mark.map_or(r.header.base, |(rv, _)| rv);
                    scan.log_bytes += r.committed;
                    if ends == state.at {
                        scan.segment = Some((seg.clone(), *base, r.committed));
                    }
                    // A later segment is used only if it starts at or
                    // before the version reached (the gap rule above).
                    let outcome = r.cut.map_or(Segment::Loaded, Segment::Cut);
                    scan.outcomes.push((seg.clone(), outcome));
                }
                Err(e) => {
                    scan.outcomes.push((seg.clone(), Segment::Ignored(e)));
                    scan.removed.push((*base, seg.clone()));
                }
            }
        }
        // The segments after a gap cannot follow: their changes would apply
        // to a state they do not follow.
        scan.removed.extend(rest.cloned());
        scan
    }

    /// Removes the snapshot and log of the store `identity` names, whose
    /// resource is no longer served (best effort; each removal logged).
    fn discard(&self, identity: &Identity) {
        let mut files: Vec<PathBuf> = self
            .segments(identity)
            .into_iter()
            .map(|(_, p)| p)
            .collect();
        files.push(self.file(identity));
        for f in files {
            match fs::remove_file(&f) {
                Ok(()) => {
                    tracing::info!(file = %f.display(), "removed the snapshot of a resource no longer served upstream")
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(file = %f.display(), error = %e, "could not remove the snapshot of a resource no longer served upstream (the next start removes it)")
                }
            }
        }
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

/// What reading a store's log segments found, for its load to report.
struct Scan {
    /// The state the log reaches, its changes unparsed.
    state: replay::Replay,
    /// What became of each segment read, in order.
    outcomes: Vec<(PathBuf, Segment)>,
    /// The segments not to keep.
    removed: Vec<(u64, PathBuf)>,
    /// The segment that ends at the version reached, and its bytes that count.
    segment: Option<(PathBuf, u64, u64)>,
    /// The bytes of the segments that count.
    log_bytes: u64,
}

/// What became of one log segment at a load.
enum Segment {
    /// Read whole.
    Loaded,
    /// Used up to its last whole group before what `0` says.
    Cut(ReadError),
    /// Not used (`0` says why), and removed.
    Ignored(ReadError),
    /// Not used: it starts after the version reached (at `0`), a gap.
    After(u64),
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
