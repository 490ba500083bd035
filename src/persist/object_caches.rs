//! The files of one object's cache (a node-local r8s's configmap or
//! secret, [`crate::cache::objects`]): started as they are asked for, after
//! the start-up's sweep of caches no longer resolved, so their owner
//! ([`crate::apis::objects`]) sweeps them itself, by what the node's pods
//! reference.

use std::fs;
use std::io;
use std::path::PathBuf;

use super::Persist;

impl Persist {
    /// The object caches saved here, by file: `(resource, namespace, name)`
    /// (`configmaps`, from `core_v1_configmaps~ns-1~app.json.snap`), for
    /// [`Persist::discard_objects`].
    pub(super) fn object_files(&self) -> Vec<(PathBuf, String, String, String)> {
        let files = fs::read_dir(&self.dir).into_iter().flatten().flatten();
        files
            .filter_map(|e| {
                let file = e.file_name().into_string().ok()?;
                let (resource, rest) = file.split_once('~')?;
                let (ns, rest) = rest.split_once('~')?;
                let rest = match rest.strip_suffix(".snap") {
                    Some(r) => r,
                    None => rest.strip_suffix(".log")?.rsplit_once('.')?.0,
                };
                let name = rest
                    .strip_suffix(".json")
                    .or_else(|| rest.strip_suffix(".protobuf"))?;
                let resource = resource.rsplit('_').next()?.to_string();
                Some((e.path(), resource, ns.to_string(), name.to_string()))
            })
            .collect()
    }

    /// Removes the files of every object cache saved here that `keep`
    /// (given its resource, namespace and name) does not keep: the objects
    /// no pod of the node references any more, found after a restart.
    pub fn discard_objects(&self, keep: impl Fn(&str, &str, &str) -> bool) {
        for (path, resource, ns, name) in self.object_files() {
            if keep(&resource, &ns, &name) {
                continue;
            }
            match fs::remove_file(&path) {
                Ok(()) => {
                    tracing::info!(file = %path.display(), "removed the snapshot of an object no pod of the node references")
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(file = %path.display(), error = %e, "could not remove the snapshot of an object no pod of the node references")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Gvr;
    use crate::cache::scope::CacheScope;
    use crate::config::settings::PersistConfig;

    fn object(namespace: &str, name: &str) -> CacheScope {
        CacheScope::Object {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    #[test]
    fn should_name_read_back_and_sweep_object_caches_files_apart_from_the_others() {
        let dir = std::env::temp_dir().join(format!("r8s-object-files-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let cfg = PersistConfig {
            dir: Some(dir.clone()),
            ..PersistConfig::default()
        };
        let p = Persist::open(&cfg, "upstream".into()).unwrap().unwrap();
        let configmaps = Gvr::from_static("", "v1", "configmaps");
        let info = crate::cache::object::TypeInfo::for_tests("ConfigMap", "v1", "configmaps");
        let enc = crate::api::media::Encoding::Json;
        let whole = p.identity(&configmaps, enc, &info, &CacheScope::Whole);
        let a = p.identity(&configmaps, enc, &info, &object("json", "x"));
        let b = p.identity(&configmaps, enc, &info, &object("ns-1", "app.v1"));
        for i in [&whole, &a, &b] {
            fs::write(p.file(i), b"").unwrap();
            fs::write(p.segment(i, 7), b"").unwrap();
        }
        // An object named like the whole resource's encoding is not among
        // its files, nor the other way round.
        assert_eq!(p.segments(&whole).len(), 1);
        assert_eq!(p.segments(&a).len(), 1);
        let mut read: Vec<(String, String, String)> = p
            .object_files()
            .into_iter()
            .map(|(_, r, ns, n)| (r, ns, n))
            .collect();
        read.sort();
        read.dedup();
        let own = |ns: &str, n: &str| ("configmaps".to_string(), ns.to_string(), n.to_string());
        assert_eq!(read, [own("json", "x"), own("ns-1", "app.v1")]);
        // The start-up's sweep keeps object caches; theirs keeps what it is told.
        p.discard_others(&[]);
        assert_eq!(p.object_files().len(), 4);
        assert!(!p.has_snapshot(&whole));
        p.discard_objects(|_, ns, _| ns == "ns-1");
        assert!(p.has_snapshot(&b) && !p.has_snapshot(&a));
        assert_eq!(p.object_files().len(), 2);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn should_save_only_objects_named_as_the_apiserver_names_them_and_secrets_when_told() {
        let dir = std::env::temp_dir().join(format!("r8s-object-covers-{}", std::process::id()));
        let mut cfg = PersistConfig {
            dir: Some(dir.clone()),
            ..PersistConfig::default()
        };
        let p = Persist::open(&cfg, "u".into()).unwrap().unwrap();
        let (cm, secrets) = (
            Gvr::from_static("", "v1", "configmaps"),
            Gvr::from_static("", "v1", "secrets"),
        );
        assert!(p.covers(&cm, &object("ns-1", "kube-root-ca.crt")));
        for (ns, name) in [
            ("ns-1", ".."),
            ("ns-1", "A"),
            ("ns/1", "a"),
            ("ns-1", "a~b"),
            ("", "a"),
        ] {
            assert!(!p.covers(&cm, &object(ns, name)), "{ns}/{name}");
        }
        assert!(!p.covers(&secrets, &object("ns-1", "s")));
        assert!(!p.covers(&secrets, &CacheScope::Whole));
        cfg.include_secrets = true;
        let p = Persist::open(&cfg, "u".into()).unwrap().unwrap();
        assert!(p.covers(&secrets, &object("ns-1", "s")));
        let _ = fs::remove_dir_all(&dir);
    }
}
