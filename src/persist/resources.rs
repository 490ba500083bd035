//! What discovery resolved `cache.resources` to, saved in `persist.dir` so
//! that a warm start while the upstream is unreachable resolves from it.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use super::Persist;
use crate::api::{ApiResource, Gvr};

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
                    selectable: &[],
                })
                .collect(),
        )
    }
}
