//! Snapshots of the caches on local disk (`persist.dir`), so a restart comes
//! back warm: each store is loaded from its snapshot and its reflector
//! resumes the upstream watch from the snapshot's version, instead of
//! relisting every resource (a fleet of sidecars rolled at once is a relist
//! storm against the apiserver).
//!
//! The stores say what to save (their current [`Version`], immutable, so a
//! write never blocks them) and take what is loaded ([`Restored`], applied by
//! their reflector, their one writer); files are this module's alone. A
//! snapshot is written whole to a temporary file, fsynced and renamed over
//! the last one (a crash leaves the old one or the new one, never half of
//! one), at most every `persist.interval_seconds` for a store that changed,
//! and once more at shutdown. Reading one treats the file as untrusted input
//! ([`format`]).

pub mod format;

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use crate::api::media::Encoding;
use crate::api::{ApiResource, Gvr};
use crate::cache::object::{Objects, TypeInfo};
use crate::cache::store::{Restored, Serving, Store, Version};
use crate::config::PersistConfig;
use crate::metrics::{self, PersistLoad};
use crate::shutdown::Signal;
use format::{Header, Identity, ReadError};

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

/// The snapshot directory and its policy.
#[derive(Debug)]
pub struct Persist {
    dir: PathBuf,
    upstream: String,
    include_secrets: bool,
    interval: Duration,
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

    /// The file of the store `identity` names: `apps_v1_deployments.json.snap`
    /// (`core` for the core group).
    fn file(&self, identity: &Identity) -> PathBuf {
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
        self.dir.join(format!("{name}.{}.snap", identity.encoding))
    }

    /// Whether a snapshot of the store `identity` names is there (to load).
    pub fn has_snapshot(&self, identity: &Identity) -> bool {
        self.file(identity).exists()
    }

    /// Loads the snapshot of the store `identity` names, parsing its objects
    /// as `info` says (blocking: file reads and parsing). `None` when there is
    /// none, or when it cannot be used: then the reason is logged and
    /// counted, and the store starts cold.
    pub fn load(&self, target: &Target, info: &TypeInfo) -> Option<Restored> {
        let (identity, labels) = (&target.identity, target.store.labels());
        let path = self.file(identity);
        let started = Instant::now();
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
            Err(e) => return self.refused(target, &path, ReadError::Io(e)),
        };
        let len = match file.metadata() {
            Ok(m) => m.len(),
            Err(e) => return self.refused(target, &path, ReadError::Io(e)),
        };
        let (header, objects, empty) = match read_objects(file, len, identity, info) {
            Ok(r) => r,
            Err(e) => return self.refused(target, &path, e),
        };
        let now = unix_ms(SystemTime::now());
        let age = Duration::from_millis(now.saturating_sub(header.written_unix_ms));
        tracing::info!(
            resource = %labels,
            objects = objects.len(),
            rv = header.resource_version,
            bytes = len,
            age = ?age,
            took = ?started.elapsed(),
            "cache loaded from its snapshot; resuming its upstream watch from there"
        );
        target.series.loaded(PersistLoad::Loaded);
        Some(Restored {
            objects,
            rv: header.resource_version,
            empty: (!empty.is_empty()).then(|| Bytes::from(empty)),
            age,
        })
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
    /// (blocking): a temporary file, fsync, rename, fsync of the directory.
    /// Returns the bytes written.
    pub fn save(
        &self,
        identity: &Identity,
        version: &Version,
        empty: Option<&[u8]>,
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
            let mut w = BufWriter::with_capacity(1 << 20, file);
            let objects = || {
                version
                    .objects
                    .values()
                    .map(|o| (&*o.key, o.rv, &o.body[..]))
            };
            let bytes = format::write(&mut w, &header, empty, objects)?;
            let file = w.into_inner().map_err(|e| e.into_error())?;
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

    /// Saves every target that changed since it was last saved, every
    /// `persist.interval_seconds` and once more when `shutdown` fires.
    pub async fn run(self: Arc<Self>, targets: Vec<Target>, shutdown: Signal) {
        let mut written = vec![0; targets.len()];
        let targets = Arc::new(targets);
        loop {
            let last = tokio::select! {
                _ = tokio::time::sleep(self.interval) => false,
                _ = shutdown.wait() => true,
            };
            let (me, ts, w) = (self.clone(), targets.clone(), written.clone());
            match tokio::task::spawn_blocking(move || me.save_changed(&ts, w)).await {
                Ok(w) => written = w,
                Err(e) => tracing::error!(error = %e, "the snapshot writer failed"),
            }
            if last {
                return;
            }
        }
    }

    /// One round of [`Persist::run`]: the versions written after it.
    fn save_changed(&self, targets: &[Target], mut written: Vec<u64>) -> Vec<u64> {
        for (t, at) in targets.iter().zip(written.iter_mut()) {
            if t.store.serving() != Serving::Ready {
                continue;
            }
            let v = t.store.current();
            if v.rv == *at {
                continue;
            }
            let started = Instant::now();
            let empty = t.store.empty_object();
            match self.save(&t.identity, &v, empty.as_deref()) {
                Ok(bytes) => {
                    *at = v.rv;
                    t.series.written(Some(bytes));
                    tracing::debug!(resource = %t.store.labels(), rv = v.rv, bytes, took = ?started.elapsed(), "snapshot written");
                }
                Err(e) => {
                    t.series.written(None);
                    tracing::warn!(
                        resource = %t.store.labels(),
                        dir = %self.dir.display(),
                        error = %e,
                        "could not write a snapshot (the last one stays; serving is unaffected); check the disk's space and r8s's permissions on persist.dir"
                    );
                }
            }
        }
        written
    }
}

/// What discovery resolved `cache.resources` to, saved beside the
/// snapshots: a warm start while the upstream is unreachable resolves from it.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Resolved {
    upstream: String,
    entries: Vec<String>,
    exclude: Vec<String>,
    resources: Vec<(String, String, String, String, bool)>,
}

/// Bound of the saved discovery file.
const MAX_RESOLVED: u64 = 4 << 20;

impl Persist {
    fn resolved_file(&self) -> PathBuf {
        self.dir.join("resources.json")
    }

    /// Saves what discovery resolved `entries` (less `exclude`) to (best
    /// effort: a failure is logged).
    pub fn save_resources(&self, entries: &[String], exclude: &[String], resolved: &[ApiResource]) {
        let r = Resolved {
            upstream: self.upstream.clone(),
            entries: entries.to_vec(),
            exclude: exclude.to_vec(),
            resources: resolved
                .iter()
                .map(|a| {
                    let g = &a.gvr;
                    (
                        g.group().into(),
                        g.version().into(),
                        g.resource().into(),
                        a.kind.clone(),
                        a.namespaced,
                    )
                })
                .collect(),
        };
        let path = self.resolved_file();
        let tmp = path.with_extension("json.tmp");
        let written = serde_json::to_vec(&r)
            .map_err(io::Error::other)
            .and_then(|bytes| {
                let mut f = OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(0o600)
                    .open(&tmp)?;
                io::Write::write_all(&mut f, &bytes)?;
                f.sync_all()?;
                fs::rename(&tmp, &path)
            });
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            tracing::warn!(file = %path.display(), error = %e, "could not save the resolved resources");
        }
    }

    /// What discovery last resolved the same `entries` and `exclude` to
    /// against this upstream, if saved (for a start while it is unreachable).
    pub fn load_resources(
        &self,
        entries: &[String],
        exclude: &[String],
    ) -> Option<Vec<ApiResource>> {
        let path = self.resolved_file();
        let f = File::open(&path).ok()?;
        let mut bytes = Vec::new();
        io::Read::read_to_end(&mut io::Read::take(f, MAX_RESOLVED), &mut bytes).ok()?;
        let r: Resolved = match serde_json::from_slice(&bytes) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "saved resources ignored");
                return None;
            }
        };
        if r.upstream != self.upstream || r.entries != entries || r.exclude != exclude {
            return None;
        }
        Some(
            r.resources
                .into_iter()
                .map(|(g, v, res, kind, namespaced)| ApiResource {
                    gvr: Gvr::new(g, v, res),
                    kind,
                    namespaced,
                })
                .collect(),
        )
    }
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
