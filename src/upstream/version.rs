//! The upstream's Kubernetes version, as its `/version` says it: what r8s
//! reads it for is to answer as that version's apiserver would, where
//! versions differ on the wire (the streaming list's last bookmark, gzip
//! streaming lists, whether consistent reads can be proven cheaply).

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;

/// A `major.minor` Kubernetes version (`"31+"` reads as 31, as GKE and EKS
/// write it), and the Go it was built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "Raw")]
pub struct KubeVersion {
    /// The major version (1).
    pub major: u16,
    /// The minor version.
    pub minor: u16,
    /// `goVersion`'s major and minor (`go1.26.6`: 1, 26), where it says:
    /// Go's `crypto/x509` reads some certificate strings differently from
    /// one Go to the next (`auth::x509`).
    pub go: Option<(u16, u16)>,
}

/// `/version`, the part that matters here.
#[derive(Deserialize)]
struct Raw {
    major: String,
    minor: String,
    #[serde(default, rename = "goVersion")]
    go_version: String,
}

/// `go1.26.6` (or `go1.26rc1`, `go1.26.6 X:boringcrypto`) as (1, 26).
fn go_version(s: &str) -> Option<(u16, u16)> {
    let rest = s.strip_prefix("go")?;
    let mut parts = rest.splitn(3, '.');
    let major = parts.next()?.parse().ok()?;
    let minor: String = parts
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    Some((major, minor.parse().ok()?))
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
            go: go_version(&raw.go_version),
        })
    }
}

impl KubeVersion {
    /// From `/version`'s JSON body; `None` where it says no number.
    pub fn parse(body: &[u8]) -> Option<KubeVersion> {
        serde_json::from_slice(body).ok()
    }

    /// `upstream.version` (`1.21`), the version of an upstream that says none.
    pub fn assumed(cfg: &crate::config::UpstreamConfig) -> Option<KubeVersion> {
        let (major, minor) = cfg.assumed_version()?;
        Some(KubeVersion {
            major,
            minor,
            go: None,
        })
    }

    /// The Go `/version`'s body names, whether or not it says a version.
    pub fn go_of(body: &[u8]) -> Option<(u16, u16)> {
        #[derive(Deserialize)]
        struct Go {
            #[serde(default, rename = "goVersion")]
            go_version: String,
        }
        let g: Go = serde_json::from_slice(body).ok()?;
        go_version(&g.go_version)
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
pub struct Reported(AtomicU64);

impl Reported {
    /// Records what a `/version` body said: its version (none: 0.0) and Go.
    pub fn set_from(&self, body: &[u8]) {
        let v = KubeVersion::parse(body).unwrap_or(KubeVersion {
            major: 0,
            minor: 0,
            go: None,
        });
        self.set(KubeVersion {
            go: KubeVersion::go_of(body),
            ..v
        });
    }

    /// Records what `/version` said.
    pub fn set(&self, v: KubeVersion) {
        // Go's major and minor in the low 32 bits, 0 where not said.
        let (go_major, go_minor) = v.go.unwrap_or((0, 0));
        let packed = (u64::from(v.major) << 48)
            | (u64::from(v.minor) << 32)
            | (u64::from(go_major) << 16)
            | u64::from(go_minor);
        self.0.store(packed, Ordering::Relaxed);
    }

    /// The last version reported, if any was (`assumed`, with the Go
    /// reported, where the upstream says no number).
    pub fn get(&self, assumed: Option<KubeVersion>) -> Option<KubeVersion> {
        let packed = self.0.load(Ordering::Relaxed);
        let part = |shift: u32| (packed >> shift) as u16;
        let go = (part(16) != 0).then_some((part(16), part(0)));
        if part(48) == 0 {
            return assumed.map(|a| KubeVersion { go, ..a });
        }
        Some(KubeVersion {
            major: part(48),
            minor: part(32),
            go,
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
    fn should_read_the_go_an_apiserver_was_built_with() {
        let go = |g: &str| {
            KubeVersion::parse(
                format!(r#"{{"major":"1","minor":"36","goVersion":"{g}"}}"#).as_bytes(),
            )
            .unwrap()
            .go
        };
        assert_eq!(go("go1.26.6"), Some((1, 26)));
        assert_eq!(go("go1.21.13"), Some((1, 21)));
        assert_eq!(go("go1.25rc2"), Some((1, 25)));
        assert_eq!(go("go1.24.4 X:boringcrypto"), Some((1, 24)));
        assert_eq!(go(""), None);
        assert_eq!(go("devel"), None);
        assert_eq!(v("1", "36").unwrap().go, None, "no goVersion said");
        let r = Reported::default();
        let with_go = KubeVersion::parse(br#"{"major":"1","minor":"21","goVersion":"go1.21.13"}"#);
        r.set(with_go.unwrap());
        assert_eq!(r.get(None), with_go);
        // A build without version stamps: no number, the Go still said, and
        // `upstream.version` taken for the number.
        let r = Reported::default();
        r.set_from(br#"{"major":"","minor":"","goVersion":"go1.21.13"}"#);
        assert_eq!(r.get(None), None);
        let assumed = |v: &str| {
            KubeVersion::assumed(&crate::config::UpstreamConfig {
                version: v.into(),
                ..Default::default()
            })
        };
        assert_eq!(r.get(assumed("1.21")), with_go);
        assert_eq!(assumed("1"), None);
        assert_eq!(assumed("v1.21"), None);
        assert_eq!(assumed(""), None);
    }

    #[test]
    fn should_keep_the_last_version_reported() {
        let r = Reported::default();
        assert_eq!(r.get(None), None);
        r.set(v("1", "36").unwrap());
        assert_eq!(r.get(None), v("1", "36"));
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
