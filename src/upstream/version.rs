//! The upstream's Kubernetes version, as its `/version` says it: what r8s
//! reads it for is to answer as that version's apiserver would, where
//! versions differ on the wire (the streaming list's last bookmark, gzip
//! streaming lists, whether consistent reads can be proven cheaply).

use std::sync::atomic::{AtomicU32, Ordering};

use serde::Deserialize;

/// A `major.minor` Kubernetes version (`"31+"` reads as 31, as GKE and EKS
/// write it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "Raw")]
pub struct KubeVersion {
    /// The major version (1).
    pub major: u16,
    /// The minor version.
    pub minor: u16,
}

/// `/version`, the part that matters here.
#[derive(Deserialize)]
struct Raw {
    major: String,
    minor: String,
}

impl TryFrom<Raw> for KubeVersion {
    type Error = String;

    fn try_from(raw: Raw) -> Result<Self, String> {
        let num = |s: &str| {
            s.trim_end_matches(|c: char| !c.is_ascii_digit())
                .parse::<u16>()
                .map_err(|_| format!("not a version number: {s:?}"))
        };
        Ok(KubeVersion {
            major: num(&raw.major)?,
            minor: num(&raw.minor)?,
        })
    }
}

impl KubeVersion {
    /// From `/version`'s JSON body; `None` where it says no number.
    pub fn parse(body: &[u8]) -> Option<KubeVersion> {
        serde_json::from_slice(body).ok()
    }

    /// Whether it is `major.minor` or later.
    pub fn at_least(self, major: u16, minor: u16) -> bool {
        (self.major, self.minor) >= (major, minor)
    }
}

/// The version the upstream last reported: written by whoever reads
/// `/version` (the liveness probe, every few seconds), read on the hot path
/// without a lock.
#[derive(Debug, Default)]
pub struct Reported(AtomicU32);

impl Reported {
    /// Records what `/version` said.
    pub fn set(&self, v: KubeVersion) {
        let packed = (u32::from(v.major) << 16) | u32::from(v.minor);
        self.0.store(packed, Ordering::Relaxed);
    }

    /// The last version reported, if any was.
    pub fn get(&self) -> Option<KubeVersion> {
        let packed = self.0.load(Ordering::Relaxed);
        (packed != 0).then_some(KubeVersion {
            major: (packed >> 16) as u16,
            minor: (packed & 0xffff) as u16,
        })
    }
}

/// How the upstream's version shapes r8s's answers, decided once per
/// request from [`Reported`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WireRules {
    /// The streaming list's last BOOKMARK carries
    /// `k8s.io/initial-events-list-blueprint` (1.32 and 1.33 only: kubernetes
    /// PR 132326 removed it in 1.34).
    pub list_blueprint: bool,
    /// Streaming lists are gzipped for clients that accept it
    /// (`WatchListCompression`, on by default from 1.37).
    pub compress_watch_lists: bool,
}

impl WireRules {
    /// The rules of `version`; an unknown version gets the current
    /// apiserver's bookmark and no compression (what every client reads).
    pub fn of(version: Option<KubeVersion>) -> WireRules {
        match version {
            None => WireRules::default(),
            Some(v) => WireRules {
                list_blueprint: v.at_least(1, 32) && !v.at_least(1, 34),
                compress_watch_lists: v.at_least(1, 37),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(major: &str, minor: &str) -> Option<KubeVersion> {
        KubeVersion::parse(
            format!(r#"{{"major":"{major}","minor":"{minor}","gitVersion":"x"}}"#).as_bytes(),
        )
    }

    #[test]
    fn should_read_kube_apiserver_versions() {
        assert!(v("1", "31").unwrap().at_least(1, 31));
        assert!(v("1", "35+").unwrap().at_least(1, 31));
        assert!(!v("1", "30").unwrap().at_least(1, 31));
        assert!(!v("1", "21+").unwrap().at_least(1, 31));
        assert!(v("2", "0").unwrap().at_least(1, 31));
        assert_eq!(v("", "31"), None);
        assert_eq!(KubeVersion::parse(b"not json"), None);
    }

    #[test]
    fn should_keep_the_last_version_reported() {
        let r = Reported::default();
        assert_eq!(r.get(), None);
        r.set(v("1", "36").unwrap());
        assert_eq!(r.get(), v("1", "36"));
    }

    #[test]
    fn should_follow_what_each_version_sends() {
        let rules = |minor: &str| WireRules::of(v("1", minor));
        assert_eq!(rules("31"), WireRules::default());
        assert!(rules("32").list_blueprint && rules("33").list_blueprint);
        assert!(!rules("34").list_blueprint && !rules("36").list_blueprint);
        assert!(!rules("36").compress_watch_lists);
        assert!(rules("37").compress_watch_lists && !rules("37").list_blueprint);
        assert_eq!(WireRules::of(None), WireRules::default());
    }
}
