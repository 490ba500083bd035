//! Label values: each a closed set, as an enum with `as_str` (the value
//! written) and `ALL` (every value, so a series can be registered at 0
//! for each before the first event: a rule's `rate()` sees the first one,
//! and a dashboard shows 0 rather than "no data").

use std::collections::HashSet;
use std::sync::RwLock;

use crate::sync::RwLockExt;

/// An enum of label values: `as_str` and `ALL`, from one list.
macro_rules! label_values {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// Every value, in order (for the series registered at 0).
            pub const ALL: &'static [$name] = &[ $( $name::$variant, )+ ];

            /// Its label value.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $value, )+
                }
            }

            /// Its place in [`Self::ALL`] (handles are kept in that order).
            pub fn index(self) -> usize {
                self as usize
            }
        }
    };
}

label_values! {
    /// When a cache was started (`started` on `r8s_caches`).
    pub enum CacheStarted {
        /// With r8s: a resource `cache.resources` resolved to at startup.
        Startup = "startup",
        /// While r8s ran: a resource that appeared upstream (or a cache
        /// restarted for its CRD's new definition).
        RunTime = "run_time",
    }
}

label_values! {
    /// A watch event's type (`type` on the reflector's and the watchers' event counters).
    pub enum EventType {
        /// An object added (or entering a watcher's selector).
        Added = "ADDED",
        /// An object modified.
        Modified = "MODIFIED",
        /// An object deleted (or leaving a watcher's selector).
        Deleted = "DELETED",
        /// A bookmark.
        Bookmark = "BOOKMARK",
    }
}

label_values! {
    /// Why a cached watch ended (`reason` on `r8s_watch_terminated_total`).
    pub enum WatchEnd {
        /// Its timeout passed.
        Timeout = "timeout",
        /// The client went away.
        Client = "client",
        /// The log's tail passed its cursor.
        TooOld = "too_old",
        /// A streaming list of a version the cache did not reach in time.
        TooNew = "too_new",
        /// r8s is shutting down (drained).
        Shutdown = "shutdown",
        /// Its slot was given to a watch of a priority level under its
        /// share (`watch.max_watchers` full); ended as at shutdown.
        Preempted = "preempted",
        /// Its resource is no longer served upstream: the stream is closed,
        /// as kube-apiserver closes it, and the client's relist gets the 404.
        Removed = "removed",
        /// r8s could not write the stream (compressing it failed).
        Error = "error",
    }
}

label_values! {
    /// Why a reflector relisted (`reason` on `r8s_reflector_relists_total`).
    pub enum Relist {
        /// The version it watched from is compacted upstream (410).
        Expired = "expired",
        /// The upstream sent data that could not be read.
        Malformed = "malformed",
        /// A consistency check found the cache diverged.
        Diverged = "diverged",
    }
}

label_values! {
    /// What a consistency check of a cache found (`result`).
    pub enum Consistency {
        /// The same objects at the same versions.
        Equal = "equal",
        /// A difference gone at the second look.
        Transient = "transient",
        /// A difference still there at the second look: the cache relists.
        Diverged = "diverged",
        /// No comparable state (the cache moved on or is not serving, the upstream failed).
        Inconclusive = "inconclusive",
    }
}

label_values! {
    /// An audit backend (`backend`).
    pub enum AuditBackend {
        /// The log file, or standard output (`audit.log_path`).
        Log = "log",
        /// The webhook (`audit.webhook_config_file`).
        Webhook = "webhook",
    }
}

label_values! {
    /// Why an audit event was not written (`reason`).
    pub enum AuditDrop {
        /// The backend's queue was full.
        QueueFull = "queue_full",
        /// The log could not be written (a full disk, a permission).
        WriteError = "write_error",
        /// The webhook refused the batch, or did not answer, through every retry.
        SendFailed = "send_failed",
        /// The backend had stopped (shutdown).
        Closed = "closed",
    }
}

label_values! {
    /// The level the audit policy gave a request (`level`).
    pub enum AuditLevel {
        /// No event.
        None = "None",
        /// Metadata only.
        Metadata = "Metadata",
        /// And the request's body.
        Request = "Request",
        /// And the response's body.
        RequestResponse = "RequestResponse",
    }
}

label_values! {
    /// How writing a snapshot went (`result` on `r8s_persist_writes_total`).
    pub enum PersistWrite {
        /// Written.
        Ok = "ok",
        /// Not written (a full disk, a permission: logged, serving unaffected).
        Error = "error",
    }
}

label_values! {
    /// What a write to `persist.dir` was (`kind` on `r8s_persist_written_bytes_total`).
    pub enum PersistKind {
        /// Changes appended to a cache's log.
        Log = "log",
        /// A full snapshot (a compaction of the log).
        Compaction = "compaction",
    }
}

label_values! {
    /// What came of a snapshot read at start (`result` on `r8s_persist_loads_total`).
    pub enum PersistLoad {
        /// Loaded: the cache starts from it.
        Loaded = "loaded",
        /// A checksum or an object did not check out.
        Corrupt = "corrupt",
        /// The file ends early.
        Truncated = "truncated",
        /// Of another upstream, resource or type.
        Foreign = "foreign",
        /// A format this build does not read.
        Format = "format",
        /// The file could not be read.
        Unreadable = "unreadable",
    }
}

label_values! {
    /// Which consistent read was proven (`kind` on the proof series).
    pub enum ConsistentRead {
        /// A watch with `sendInitialEvents=true` and no `resourceVersion`.
        StreamingList = "streaming_list",
        /// A LIST without `resourceVersion`.
        List = "list",
        /// A GET without `resourceVersion`.
        Get = "get",
    }
}

label_values! {
    /// What came of a consistent read (`result` on `r8s_consistent_reads_total`).
    pub enum Proven {
        /// Proven: answered from the cache.
        Proven = "proven",
        /// Passed to the upstream.
        Passed = "passed",
    }
}

label_values! {
    /// A request a proof sends upstream (`step` on `r8s_consistent_upstream_requests_total`).
    pub enum ProofStep {
        /// The one-object LIST reading the upstream's version (one per round).
        List = "list",
        /// The watch waiting for the upstream's bookmark.
        Probe = "probe",
    }
}

label_values! {
    /// Why r8s closed a client connection (`reason` on `r8s_connections_closed_total`).
    pub enum ConnectionClosed {
        /// Nothing sent within `server.header_read_timeout_seconds`.
        NoRequest = "no_request",
        /// Headers not finished within it.
        HeaderTimeout = "header_timeout",
        /// Nothing written for `server.write_timeout_seconds`: the client stopped reading.
        WriteTimeout = "write_timeout",
        /// An HTTP/2 connection sent GOAWAY for `server.goaway_chance` (its open streams finish first).
        Goaway = "goaway",
    }
}

label_values! {
    /// How a request was authenticated (`result` on `r8s_authn_total`).
    pub enum Authn {
        /// A bearer token, reviewed.
        Authenticated = "authenticated",
        /// A client certificate.
        Certificate = "certificate",
        /// No credentials, `auth.anonymous` on.
        Anonymous = "anonymous",
        /// Refused (401).
        Rejected = "rejected",
        /// The review failed (the upstream did not answer it).
        Error = "error",
    }
}

label_values! {
    /// An authorization decision (`decision` on `r8s_authz_total`).
    pub enum Authz {
        /// Allowed: served from the cache.
        Allowed = "allowed",
        /// Denied (403).
        Denied = "denied",
        /// The review failed.
        Error = "error",
    }
}

label_values! {
    /// Whether a cached review answered (`cached` on the auth counters).
    pub enum Cached {
        /// A cached (or, in an outage, a stale) answer.
        Yes = "true",
        /// Reviewed by the upstream for this request.
        No = "false",
    }
}

label_values! {
    /// A review sent to the upstream (`kind`, `review` on the auth series).
    pub enum Review {
        /// A TokenReview.
        Token = "token",
        /// A SubjectAccessReview.
        Access = "access",
    }
}

label_values! {
    /// How a gzip list's items were compressed (`how` on `r8s_list_gzip_items_total`).
    pub enum GzipItems {
        /// In a run compressed for an earlier list.
        Reused = "reused",
        /// In a run compressed for this list, kept for the next.
        Compressed = "compressed",
        /// For this list only (heads, page starts, selectors' sparse matches).
        Live = "live",
    }
}

/// Which store a series is about: the resource (`v1/pods`, the same label
/// the request series carry) and the encoding it holds (`json`,
/// `protobuf`), as two labels so queries can join or sum on the resource.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StoreLabels {
    /// `group/version/resource` (`v1/pods` for the core group).
    pub resource: String,
    /// `json` or `protobuf`.
    pub encoding: &'static str,
}

impl StoreLabels {
    /// The labels of the store of `resource` (`v1/pods`) holding `encoding`.
    pub fn new(resource: String, encoding: &'static str) -> Self {
        StoreLabels { resource, encoding }
    }
}

impl std::fmt::Display for StoreLabels {
    /// `v1/pods` for the JSON store, `v1/pods (protobuf)` for the other, in logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.encoding {
            "json" => f.write_str(&self.resource),
            e => write!(f, "{} ({e})", self.resource),
        }
    }
}

/// Kubernetes' own resources (1.36), which a request's `resource` label may
/// name before discovery has said what the upstream serves.
const BUILTIN_RESOURCES: &[&str] = &[
    "apiservices",
    "bindings",
    "certificatesigningrequests",
    "clusterrolebindings",
    "clusterroles",
    "clustertrustbundles",
    "componentstatuses",
    "configmaps",
    "controllerrevisions",
    "cronjobs",
    "csidrivers",
    "csinodes",
    "csistoragecapacities",
    "customresourcedefinitions",
    "daemonsets",
    "deployments",
    "deviceclasses",
    "endpoints",
    "endpointslices",
    "events",
    "flowschemas",
    "horizontalpodautoscalers",
    "ingressclasses",
    "ingresses",
    "ipaddresses",
    "jobs",
    "leasecandidates",
    "leases",
    "limitranges",
    "localsubjectaccessreviews",
    "mutatingadmissionpolicies",
    "mutatingadmissionpolicybindings",
    "mutatingwebhookconfigurations",
    "namespaces",
    "networkpolicies",
    "nodes",
    "persistentvolumeclaims",
    "persistentvolumes",
    "poddisruptionbudgets",
    "pods",
    "podtemplates",
    "priorityclasses",
    "prioritylevelconfigurations",
    "replicasets",
    "replicationcontrollers",
    "resourceclaims",
    "resourceclaimtemplates",
    "resourcequotas",
    "resourceslices",
    "rolebindings",
    "roles",
    "runtimeclasses",
    "secrets",
    "selfsubjectaccessreviews",
    "selfsubjectreviews",
    "selfsubjectrulesreviews",
    "serviceaccounts",
    "servicecidrs",
    "services",
    "statefulsets",
    "storageclasses",
    "storageversionmigrations",
    "storageversions",
    "subjectaccessreviews",
    "tokenreviews",
    "validatingadmissionpolicies",
    "validatingadmissionpolicybindings",
    "validatingwebhookconfigurations",
    "volumeattachments",
    "volumeattributesclasses",
];

/// Their subresources.
const BUILTIN_SUBRESOURCES: &[&str] = &[
    "approval",
    "attach",
    "binding",
    "ephemeralcontainers",
    "eviction",
    "exec",
    "finalize",
    "log",
    "portforward",
    "proxy",
    "resize",
    "scale",
    "status",
    "token",
];

/// The first segments of the paths kube-apiserver serves besides resources.
const NON_RESOURCE: &[&str] = &[
    "/",
    "/.well-known",
    "/api",
    "/apis",
    "/debug",
    "/healthz",
    "/livez",
    "/logs",
    "/metrics",
    "/openapi",
    "/readyz",
    "/version",
];

/// The most resource names discovery may add (an upstream serving more is
/// counted under the first ones, the rest as `other`).
const MAX_DISCOVERED: usize = 4096;

/// What discovery said the upstream serves: resources (`widgets`) and
/// subresources (`widgets/status`), written by discovery only.
static DISCOVERED: RwLock<Option<HashSet<String>>> = RwLock::new(None);

/// Records the resources (and `resource/subresource`s) discovery found, so
/// that their requests are counted under their names.
pub fn discovered<'a>(names: impl IntoIterator<Item = &'a str>) {
    let mut guard = DISCOVERED.writing();
    let set = guard.get_or_insert_with(HashSet::new);
    for n in names {
        if set.len() >= MAX_DISCOVERED {
            break;
        }
        if !set.contains(n) {
            set.insert(n.to_string());
        }
    }
}

/// A request's `resource` label: `pods`, `pods/log`, or a non-resource
/// path's first segment (`/version`), where Kubernetes or the upstream's
/// discovery names it; anything else is `other`, so that no caller's path
/// can add a series (or take the place of a resource's).
pub fn resource_label(resource: &str) -> String {
    if resource.starts_with('/') {
        return match NON_RESOURCE.contains(&resource) {
            true => resource.to_string(),
            false => "other".into(),
        };
    }
    let (res, sub) = match resource.split_once('/') {
        Some((r, s)) => (r, Some(s)),
        None => (resource, None),
    };
    let builtin = BUILTIN_RESOURCES.binary_search(&res).is_ok()
        && sub.is_none_or(|s| BUILTIN_SUBRESOURCES.binary_search(&s).is_ok());
    if builtin
        || DISCOVERED
            .reading()
            .as_ref()
            .is_some_and(|set| set.contains(resource))
    {
        return resource.to_string();
    }
    "other".into()
}

/// An upstream request's method as a label (client-go's `verb`): the
/// methods r8s relays by name, anything else `OTHER` (labels stay bounded).
pub fn method_label(m: &http::Method) -> &'static str {
    match *m {
        http::Method::GET => "GET",
        http::Method::POST => "POST",
        http::Method::PUT => "PUT",
        http::Method::PATCH => "PATCH",
        http::Method::DELETE => "DELETE",
        http::Method::HEAD => "HEAD",
        http::Method::OPTIONS => "OPTIONS",
        _ => "OTHER",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn should_name_only_resources_kubernetes_or_discovery_names() {
        assert!(BUILTIN_RESOURCES.windows(2).all(|w| w[0] < w[1]), "sorted");
        assert!(
            BUILTIN_SUBRESOURCES.windows(2).all(|w| w[0] < w[1]),
            "sorted"
        );
        assert_eq!(resource_label("pods"), "pods");
        assert_eq!(resource_label("pods/log"), "pods/log");
        assert_eq!(resource_label("/version"), "/version");
        // A caller's junk paths never make a series of their own.
        for junk in ["junk-1", "pods/junk", "/junk", "a/b/c", "widgets"] {
            assert_eq!(resource_label(junk), "other", "{junk}");
        }
        discovered(["widgets", "widgets/status"]);
        assert_eq!(resource_label("widgets"), "widgets");
        assert_eq!(resource_label("widgets/status"), "widgets/status");
        assert_eq!(resource_label("widgets/scale"), "other");
    }

    #[test]
    fn should_list_every_value_in_order() {
        for (i, t) in EventType::ALL.iter().enumerate() {
            assert_eq!(t.index(), i);
        }
        assert_eq!(WatchEnd::ALL.len(), 8);
        assert_eq!(Cached::Yes.as_str(), "true");
        let names: Vec<&str> = Relist::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(names, ["expired", "malformed", "diverged"]);
    }
}
