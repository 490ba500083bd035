//! What types alone cannot check: every number in range, every resource
//! entry well formed, settings that only make sense together.

use super::entry::{self, ResourceEntry};
use super::settings::{AuthMode, Config};

/// A number as a person would write it: `-1`, `0.5`, `NaN`, `inf`, `1e300`.
pub(super) fn number(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else if v.is_finite() && (v.abs() >= 1e15 || (v != 0.0 && v.abs() < 1e-6)) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// The values a number may take: finite, from `min` (excluded when
/// `above`) to `max`, in `unit`.
#[derive(Debug, Clone, Copy)]
struct Range {
    min: f64,
    above: bool,
    max: f64,
    unit: &'static str,
}

const DAY: f64 = 86_400.0;
/// 1 PiB: no byte budget is larger.
const PIB: f64 = (1u64 << 50) as f64;

const fn range(min: f64, max: f64, unit: &'static str) -> Range {
    Range {
        min,
        above: false,
        max,
        unit,
    }
}

impl Range {
    fn admits(&self, v: f64) -> bool {
        v.is_finite()
            && (if self.above {
                v > self.min
            } else {
                v >= self.min
            })
            && v <= self.max
    }

    fn describe(&self) -> String {
        let open = if self.above { '(' } else { '[' };
        format!(
            "{} in {open}{}, {}]",
            self.unit,
            number(self.min),
            number(self.max)
        )
    }
}

impl Config {
    /// Checks what types alone cannot; every problem (key, message), not just the first.
    pub fn validate(&self) -> Result<(), Vec<(&'static str, String)>> {
        let mut errs = Vec::new();
        for s in &self.upstream.servers {
            let ok = s.parse::<http::Uri>().is_ok_and(|u| {
                matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some()
            });
            if !ok {
                errs.push(("upstream.servers", format!(
                    "config: bad value \"{s}\" for key \"upstream.servers\": expected an http:// or https:// URL with a host"
                )));
            }
        }
        if !self.upstream.version.is_empty() && self.upstream.assumed_version().is_none() {
            errs.push(("upstream.version", format!(
                "config: bad value \"{}\" for key \"upstream.version\": expected a Kubernetes version as MAJOR.MINOR (1.21), or empty",
                self.upstream.version
            )));
        }
        for (key, value, range) in self.numbers() {
            if !range.admits(value) {
                errs.push((
                    key,
                    format!(
                        "config: bad value {} for key \"{key}\": expected {}",
                        number(value),
                        range.describe()
                    ),
                ));
            }
        }
        for e in &self.cache.encodings {
            if !matches!(e.as_str(), "json" | "protobuf") {
                errs.push(("cache.encodings", format!(
                    "config: bad value \"{e}\" for key \"cache.encodings\": expected \"json\" or \"protobuf\""
                )));
            }
        }
        if !self.cache.encodings.iter().any(|e| e == "json") {
            errs.push(("cache.encodings", "config: key \"cache.encodings\" must list \"json\" (custom resources and metadata-only JSON answers are served from it)".to_string()));
        }
        for r in &self.cache.resources {
            if r.parse::<ResourceEntry>().is_err() {
                errs.push((
                    "cache.resources",
                    format!(
                        "config: bad value \"{r}\" for key \"cache.resources\": {}",
                        entry::EXPECTED
                    ),
                ));
            }
        }
        if !self.node.name.is_empty() && !entry::valid_dns(&self.node.name, true) {
            errs.push(("node.name", format!(
                "config: bad value \"{}\" for key \"node.name\": expected a node's name (lower-case letters, digits, '-' and '.', as `kubectl get nodes` lists it), or empty",
                self.node.name
            )));
        }
        let tls = &self.tls;
        if tls.cert_file.is_some() != tls.key_file.is_some() {
            let (key, missing) = if tls.cert_file.is_some() {
                ("tls.cert_file", "tls.key_file")
            } else {
                ("tls.key_file", "tls.cert_file")
            };
            errs.push((key, format!(
                "config: \"{key}\" is set but \"{missing}\" is not: TLS needs both the certificate and its key"
            )));
        }
        if tls.self_signed && (tls.cert_file.is_none() || tls.key_file.is_none()) {
            errs.push(("tls.self_signed", "config: \"tls.self_signed\" needs \"tls.cert_file\" and \"tls.key_file\": where the certificate it makes is kept (on the node's disk, so that clients can trust it across restarts)".to_string()));
        }
        if tls.client_ca_file.is_some() && tls.cert_file.is_none() {
            errs.push(("tls.client_ca_file", "config: \"tls.client_ca_file\" needs TLS: set \"tls.cert_file\" and \"tls.key_file\" too".to_string()));
        }
        if self.auth.mode == Some(AuthMode::None) && !self.listen.ip().is_loopback() {
            errs.push(("auth.mode", format!(
                "config: auth.mode = \"none\" is only allowed when the API listens on loopback, but listen = {}: without authentication anyone who can reach that address reads every cached object (secrets included) with r8s's own permissions. Listen on 127.0.0.1 or [::1], or set auth.mode = \"delegated\"",
                self.listen
            )));
        }
        if let Err(e) = self.server.local_filters() {
            let key = if e.contains("server.accept_hosts") {
                "server.accept_hosts"
            } else {
                "server.reject_paths"
            };
            errs.push((key, e));
        }
        if let Some(dir) = &self.persist.dir
            && (dir.as_os_str().is_empty() || (dir.exists() && !dir.is_dir()))
        {
            errs.push(("persist.dir", format!(
                "config: bad value {:?} for key \"persist.dir\": expected a directory (created if missing), or no value to save nothing",
                dir.display().to_string()
            )));
        }
        let au = &self.audit;
        let backends = au.log_path.is_some() || au.webhook_config_file.is_some();
        if au.policy_file.is_some() && !backends {
            errs.push(("audit.policy_file", "config: \"audit.policy_file\" is set but no backend is: set \"audit.log_path\" (a file, or - for standard output) or \"audit.webhook_config_file\" for the events to go somewhere".to_string()));
        }
        if au.policy_file.is_none() && backends {
            let key = if au.log_path.is_some() {
                "audit.log_path"
            } else {
                "audit.webhook_config_file"
            };
            errs.push((key, format!(
                "config: \"{key}\" is set but \"audit.policy_file\" is not: no event would be recorded; set it to a policy (kube-apiserver's format; `rules: [{{level: Metadata}}]` records every request's metadata)"
            )));
        }
        if let Err(e) = tracing_subscriber::EnvFilter::try_new(&self.log.level) {
            errs.push((
                "log.level",
                format!(
                    "config: bad value \"{}\" for key \"log.level\": {e}",
                    self.log.level
                ),
            ));
        }
        if errs.is_empty() { Ok(()) } else { Err(errs) }
    }

    /// Every number that becomes a duration, a size or a count, with the
    /// values it may take: anything else is rejected here, before a port is
    /// bound, instead of panicking or misbehaving later.
    fn numbers(&self) -> [(&'static str, f64, Range); 47] {
        let secs = |v: u64| v as f64;
        let (c, w, a) = (&self.cache, &self.watch, &self.auth);
        let ttl = range(0.0, DAY, "seconds");
        [
            (
                "upstream.max_backoff_seconds",
                self.upstream.max_backoff_seconds,
                range(0.2, 300.0, "seconds"),
            ),
            (
                "upstream.connect_timeout_seconds",
                self.upstream.connect_timeout_seconds,
                Range {
                    above: true,
                    ..range(0.0, 600.0, "seconds")
                },
            ),
            (
                "upstream.probe_interval_seconds",
                self.upstream.probe_interval_seconds,
                range(0.1, 300.0, "seconds"),
            ),
            (
                "upstream.probe_timeout_seconds",
                self.upstream.probe_timeout_seconds,
                range(0.1, 600.0, "seconds"),
            ),
            (
                "server.header_read_timeout_seconds",
                secs(self.server.header_read_timeout_seconds),
                range(1.0, 3600.0, "seconds"),
            ),
            (
                "server.write_timeout_seconds",
                secs(self.server.write_timeout_seconds),
                range(1.0, DAY, "seconds"),
            ),
            (
                "cache.page_size",
                c.page_size as f64,
                range(1.0, 100_000.0, "items"),
            ),
            (
                "cache.snapshot_retention_seconds",
                secs(c.snapshot_retention_seconds),
                range(0.0, DAY, "seconds"),
            ),
            (
                "cache.max_retained_versions",
                c.max_retained_versions as f64,
                range(1.0, 10_000_000.0, "versions"),
            ),
            (
                "cache.wait_for_resource_version_seconds",
                c.wait_for_resource_version_seconds,
                range(0.0, 600.0, "seconds"),
            ),
            (
                "cache.max_bytes_per_resource",
                c.max_bytes_per_resource as f64,
                range(0.0, PIB, "bytes (0: no limit)"),
            ),
            (
                "cache.max_bytes_total",
                c.max_bytes_total as f64,
                range(0.0, PIB, "bytes (0: no limit)"),
            ),
            (
                "cache.max_staleness_seconds",
                secs(c.max_staleness_seconds),
                range(4.0, DAY, "seconds"),
            ),
            (
                "cache.consistency_check_interval_seconds",
                secs(c.consistency_check_interval_seconds),
                range(0.0, 7.0 * DAY, "seconds (0: never)"),
            ),
            (
                "cache.discovery_interval_seconds",
                secs(c.discovery_interval_seconds),
                range(0.0, DAY, "seconds (0: at startup only)"),
            ),
            (
                "cache.max_concurrent_starts",
                c.max_concurrent_starts as f64,
                range(1.0, 1000.0, "caches"),
            ),
            (
                "persist.interval_seconds",
                secs(self.persist.interval_seconds),
                range(1.0, 3600.0, "seconds"),
            ),
            (
                "persist.compaction_ratio",
                self.persist.compaction_ratio,
                range(0.05, 100.0, "(of the snapshot's bytes)"),
            ),
            (
                "persist.max_write_bytes_per_second",
                self.persist.max_write_bytes_per_second as f64,
                range(65_536.0, PIB, "bytes per second"),
            ),
            (
                "watch.bookmark_interval_seconds",
                secs(w.bookmark_interval_seconds),
                range(1.0, DAY, "seconds"),
            ),
            (
                "watch.min_timeout_seconds",
                secs(w.min_timeout_seconds),
                range(1.0, 7.0 * DAY, "seconds"),
            ),
            (
                "watch.history_events",
                w.history_events as f64,
                range(1.0, 100_000_000.0, "events"),
            ),
            (
                "watch.history_bytes",
                w.history_bytes as f64,
                range(0.0, PIB, "bytes (0: no limit but history_events)"),
            ),
            (
                "read.max_inflight_lists",
                self.read.max_inflight_lists as f64,
                range(1.0, 100_000.0, "lists"),
            ),
            (
                "read.prove_timeout_seconds",
                self.read.prove_timeout_seconds,
                range(0.1, 60.0, "seconds"),
            ),
            (
                "read.consistent_get_wait_seconds",
                self.read.consistent_get_wait_seconds,
                range(0.0, 60.0, "seconds"),
            ),
            (
                "watch.max_watchers",
                w.max_watchers as f64,
                range(1.0, 10_000_000.0, "watches"),
            ),
            ("auth.token_ttl_seconds", secs(a.token_ttl_seconds), ttl),
            (
                "auth.token_rejected_ttl_seconds",
                secs(a.token_rejected_ttl_seconds),
                ttl,
            ),
            (
                "auth.decision_ttl_seconds",
                secs(a.decision_ttl_seconds),
                ttl,
            ),
            (
                "auth.decision_denied_ttl_seconds",
                secs(a.decision_denied_ttl_seconds),
                ttl,
            ),
            (
                "auth.stale_if_error_seconds",
                secs(a.stale_if_error_seconds),
                ttl,
            ),
            (
                "auth.review_timeout_seconds",
                a.review_timeout_seconds,
                range(0.1, 600.0, "seconds"),
            ),
            (
                "auth.cache_size",
                a.cache_size as f64,
                range(1.0, 10_000_000.0, "entries"),
            ),
            (
                "server.goaway_chance",
                self.server.goaway_chance,
                // kube-apiserver's bound: at most 1 request in 50.
                range(0.0, 0.02, "a probability"),
            ),
            (
                "shutdown.grace_seconds",
                secs(self.shutdown.grace_seconds),
                range(0.0, 3600.0, "seconds"),
            ),
            (
                "shutdown.watch_drain_seconds",
                self.shutdown.watch_drain_seconds,
                range(0.0, 3600.0, "seconds"),
            ),
            (
                "audit.log_maxsize",
                self.audit.log_maxsize as f64,
                range(0.0, 1_000_000.0, "megabytes (0: never rotated)"),
            ),
            (
                "audit.log_maxbackup",
                self.audit.log_maxbackup as f64,
                range(0.0, 1_000_000.0, "files (0: all kept)"),
            ),
            (
                "audit.log_maxage",
                self.audit.log_maxage as f64,
                range(0.0, 36_500.0, "days (0: kept forever)"),
            ),
            (
                "audit.log_buffer_size",
                self.audit.log_buffer_size as f64,
                range(1.0, 10_000_000.0, "events"),
            ),
            (
                "audit.webhook_batch_buffer_size",
                self.audit.webhook_batch_buffer_size as f64,
                range(1.0, 10_000_000.0, "events"),
            ),
            (
                "audit.webhook_batch_max_size",
                self.audit.webhook_batch_max_size as f64,
                range(1.0, 1_000_000.0, "events"),
            ),
            (
                "audit.webhook_batch_max_wait_seconds",
                self.audit.webhook_batch_max_wait_seconds,
                range(0.001, 3600.0, "seconds"),
            ),
            (
                "audit.webhook_batch_throttle_qps",
                self.audit.webhook_batch_throttle_qps,
                range(0.001, 1_000_000.0, "batches per second"),
            ),
            (
                "audit.webhook_batch_throttle_burst",
                f64::from(self.audit.webhook_batch_throttle_burst),
                range(1.0, 1_000_000.0, "batches"),
            ),
            (
                "audit.webhook_initial_backoff_seconds",
                self.audit.webhook_initial_backoff_seconds,
                range(0.001, 3600.0, "seconds"),
            ),
        ]
    }
}
