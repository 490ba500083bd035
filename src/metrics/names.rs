//! Every metric r8s exports, in one table: its name, its kind and its HELP
//! text (which is also the constant's doc). `docs/metrics.md` lists them for
//! operators; [`ALL`] describes them to the recorder, so `/metrics` carries
//! a `# HELP` line for each.

/// A metric's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (`_total`).
    Counter,
    /// Goes up and down.
    Gauge,
    /// A distribution, in buckets.
    Histogram,
}

/// The constants and [`ALL`], from one list.
macro_rules! metrics {
    ( $( $name:ident: $kind:ident $value:literal = $help:literal; )+ ) => {
        $(
            #[doc = $help]
            pub const $name: &str = $value;
        )+

        /// Every metric: (name, kind, HELP).
        pub const ALL: &[(&str, Kind, &str)] = &[ $( ($value, Kind::$kind, $help), )+ ];
    };
}

metrics! {
    // Requests.
    REQUESTS_TOTAL: Counter "r8s_requests_total" =
        "Requests answered, by verb, resource, HTTP code and cache (hit: from the cache; pass: by the upstream; refused: by authorization).";
    REQUEST_DURATION_SECONDS: Histogram "r8s_request_duration_seconds" =
        "Time from a request's arrival to its response head, by verb, resource and cache.";
    CACHE_REQUESTS_TOTAL: Counter "r8s_cache_requests_total" =
        "Requests for cached resources, by resource, verb and result: hit, refused, or the reason it passed through.";
    LIST_REJECTED_TOTAL: Counter "r8s_list_rejected_total" =
        "Large lists refused with 429 at read.max_inflight_lists.";
    FLOWCONTROL_DISPATCHED_TOTAL: Counter "r8s_flowcontrol_dispatched_requests_total" =
        "Requests r8s answered itself (from the cache, or its own refusal), by the priority level and FlowSchema the apiserver's priority and fairness classifies them to.";
    FLOWCONTROL_REJECTED_TOTAL: Counter "r8s_flowcontrol_rejected_requests_total" =
        "Costly cached reads (large lists, lists that walk many objects, watches' initial events) and watches refused with 429 for want of a seat or a watch slot of their priority level, by priority level, FlowSchema and reason (queue-full, concurrency-limit, time-out).";
    FLOWCONTROL_EXECUTING_SEATS: Gauge "r8s_flowcontrol_current_executing_seats" =
        "Seats of read.max_inflight_lists held now by costly cached reads, by priority level.";
    FLOWCONTROL_INQUEUE: Gauge "r8s_flowcontrol_current_inqueue_requests" =
        "Costly cached reads waiting in their priority level's queues for a seat now, by priority level and FlowSchema.";
    FLOWCONTROL_NOMINAL_SEATS: Gauge "r8s_flowcontrol_nominal_seats" =
        "Each priority level's share of read.max_inflight_lists, in seats (the exempt level has no limit and no series).";
    FLOWCONTROL_WATCHES: Gauge "r8s_flowcontrol_current_watches" =
        "Cached watches open now, by priority level.";
    FLOWCONTROL_NOMINAL_WATCHES: Gauge "r8s_flowcontrol_nominal_watches" =
        "Each priority level's share of watch.max_watchers, guaranteed once it is full (the exempt level has no limit of its own and no series).";
    CONNECTIONS_CLOSED_TOTAL: Counter "r8s_connections_closed_total" =
        "Client connections r8s closed, by reason: no_request, header_timeout, write_timeout, goaway.";
    // The upstream.
    UPSTREAM_REQUESTS_TOTAL: Counter "r8s_upstream_requests_total" =
        "Responses from each upstream server, by server and HTTP code (0: the exchange failed).";
    UPSTREAM_CATCH_UP_SECONDS: Histogram "r8s_upstream_catch_up_seconds" =
        "Seconds from the upstream answering again after an outage to each cache being current (its watch answered).";
    UPSTREAM_REQUEST_DURATION_SECONDS: Histogram "r8s_upstream_request_duration_seconds" =
        "Time from a request sent upstream to its response head, by server, verb (the HTTP method) and code.";
    UPSTREAM_UP: Gauge "r8s_upstream_up" =
        "1 while an upstream server answers, 0 once it accepts no connection, by server.";
    UPSTREAM_IN_USE: Gauge "r8s_upstream_in_use" =
        "1 for the upstream server requests go to first (the last that answered), 0 for the others.";
    UPSTREAM_FAILOVERS_TOTAL: Counter "r8s_upstream_failovers_total" =
        "Times requests moved off an upstream server that went silent or failed a reflector's requests.";
    // Auditing.
    AUDIT_EVENTS_TOTAL: Counter "r8s_audit_events_total" =
        "Audit events written, by backend: log, webhook.";
    AUDIT_EVENTS_DROPPED_TOTAL: Counter "r8s_audit_events_dropped_total" =
        "Audit events not written, by backend and reason: queue_full, write_error (a full disk, a permission), send_failed (the webhook, through every retry), closed.";
    AUDIT_LEVEL_TOTAL: Counter "r8s_audit_level_total" =
        "Requests audited, by the level the policy gave them (as apiserver_audit_level_total).";
    // Caches.
    CACHE_OBJECTS: Gauge "r8s_cache_objects" =
        "Objects in a cache, by resource and encoding.";
    CACHE_BYTES: Gauge "r8s_cache_bytes" =
        "Bytes a cache holds (its objects, and the older versions its watch log keeps alive), by resource and encoding.";
    CACHE_RESOURCE_VERSION: Gauge "r8s_cache_resource_version" =
        "The resource version a cache is at, by resource and encoding.";
    CACHE_SYNCED: Gauge "r8s_cache_synced" =
        "1 once a cache has synced and while it stays usable, else 0; by resource and encoding.";
    CACHE_OVER_BUDGET: Gauge "r8s_cache_over_budget" =
        "1 while a cache is evicted for exceeding cache.max_bytes_per_resource or cache.max_bytes_total.";
    CACHE_STALENESS_SECONDS: Gauge "r8s_cache_staleness_seconds" =
        "Seconds since a cache last heard from its upstream (an event, a bookmark, a response, a watch ending on time).";
    CACHES: Gauge "r8s_caches" =
        "Caches alive (one per cached resource), by when they were started: startup, run_time (a resource that appeared upstream while r8s ran).";
    CACHES_SERVED_STALE: Gauge "r8s_caches_served_stale" =
        "Caches served past cache.max_staleness_seconds because cache.serve_stale is set.";
    CACHE_CONSISTENCY_CHECKS_TOTAL: Counter "r8s_cache_consistency_checks_total" =
        "Checks of a cache against its upstream, by resource, encoding and result: equal, transient, diverged (the cache relists), inconclusive.";
    // Reflectors.
    RELISTS_TOTAL: Counter "r8s_reflector_relists_total" =
        "Relists, by resource, encoding and reason: expired, malformed, diverged.";
    WATCH_RESTARTS_TOTAL: Counter "r8s_reflector_watch_restarts_total" =
        "Upstream watches opened again (after ending on time, or failing), by resource and encoding.";
    REFLECTOR_EVENTS_TOTAL: Counter "r8s_reflector_events_total" =
        "Upstream watch events applied, by resource, encoding and type.";
    REFLECTOR_SILENT_TOTAL: Counter "r8s_reflector_silent_total" =
        "Upstream silences noticed (no answer in time, a watch silent past its deadline), after which the reflector reconnects.";
    REFLECTOR_BEHIND_TOTAL: Counter "r8s_reflector_behind_total" =
        "Upstream states refused as older than the cache's (a server behind the one followed); the cache keeps its state.";
    // Watches served.
    WATCHERS: Gauge "r8s_watchers" =
        "Watches served from a resource's cache now.";
    WATCH_SHARDS: Gauge "r8s_watch_shards" =
        "Watches served now that a shardSelector limits to a shard, by resource (kube-apiserver's apiserver_watch_shards_total).";
    WATCH_EVENTS_SENT_TOTAL: Counter "r8s_watch_events_sent_total" =
        "Watch events written to clients, by resource and type (BOOKMARK included).";
    WATCH_EVENT_DELIVERY_SECONDS: Histogram "r8s_watch_event_delivery_seconds" =
        "From an upstream event's arrival to its hand-off to a client's connection (1 event in 16, every watcher that gets it).";
    WATCH_LAG_EVENTS: Histogram "r8s_watch_lag_events" =
        "Events a watcher is behind the log's head, by resource (sampled once per watcher per second).";
    WATCH_TERMINATED_TOTAL: Counter "r8s_watch_terminated_total" =
        "Cached watches ended, by resource and reason: timeout, client, too_old, too_new, shutdown, preempted, removed, error.";
    WATCH_REJECTED_TOTAL: Counter "r8s_watch_rejected_total" =
        "Watches refused with 429 at watch.max_watchers.";
    WATCH_LOG_EVENTS: Gauge "r8s_watch_log_events" =
        "Events in a cache's watch log, by resource and encoding.";
    WATCH_LOG_BYTES: Gauge "r8s_watch_log_bytes" =
        "Bytes a cache's watch log keeps alive, by resource and encoding.";
    WATCH_LOG_TRIMMED_BYTES_TOTAL: Counter "r8s_watch_log_trimmed_bytes_total" =
        "Watch log bytes dropped, oldest first, to keep caches within their byte budgets.";
    WATCH_ENCODINGS_TOTAL: Counter "r8s_watch_encodings_total" =
        "Watch events encoded since start, by encoding (once per event, not per watcher).";
    // gzip lists.
    LIST_GZIP_ITEMS_TOTAL: Counter "r8s_list_gzip_items_total" =
        "Items of gzip lists, by how they were compressed: reused, compressed (kept for the next list), live.";
    LIST_GZIP_RUN_BYTES: Gauge "r8s_list_gzip_run_bytes" =
        "Bytes of the compressed runs gzip lists keep (all caches).";
    // Consistent reads.
    CONSISTENT_READS_TOTAL: Counter "r8s_consistent_reads_total" =
        "Consistent reads of cached resources, by resource, kind (streaming_list, list) and result (proven, passed).";
    CONSISTENT_PROOF_SECONDS: Histogram "r8s_consistent_read_proof_seconds" =
        "Time a proven consistent read waited for its proof, by resource and kind.";
    CONSISTENT_UPSTREAM_REQUESTS_TOTAL: Counter "r8s_consistent_upstream_requests_total" =
        "Requests proofs sent upstream, by resource and step: list (one per round), probe.";
    CONSISTENT_PROOF_FAILURES_TOTAL: Counter "r8s_consistent_proof_failures_total" =
        "Proofs that failed, by resource; after 2 in a row its consistent reads pass at once for 30 s, doubling with each further failure up to 5 min.";
    // Snapshots.
    PERSIST_WRITES_TOTAL: Counter "r8s_persist_writes_total" =
        "Snapshots written to persist.dir, by resource, encoding and result: ok, error.";
    PERSIST_SNAPSHOT_BYTES: Gauge "r8s_persist_snapshot_bytes" =
        "Bytes of each cache's last snapshot written.";
    PERSIST_LOADS_TOTAL: Counter "r8s_persist_loads_total" =
        "Snapshots read at start, by resource, encoding and result: loaded, or why one was ignored.";
    PERSIST_LOG_LOADS_TOTAL: Counter "r8s_persist_log_loads_total" =
        "Change logs replayed at start, by resource, encoding and result: loaded, or why a log (or its tail) was not used.";
    PERSIST_WRITTEN_BYTES_TOTAL: Counter "r8s_persist_written_bytes_total" =
        "Bytes written to persist.dir, by resource, encoding and kind: log (changes appended), compaction (full snapshots).";
    PERSIST_LOG_BYTES: Gauge "r8s_persist_log_bytes" =
        "Bytes of each cache's change log on disk (every segment since its snapshot).";
    PERSIST_SNAPSHOT_AGE_SECONDS: Gauge "r8s_persist_snapshot_age_seconds" =
        "Seconds since each cache's last full snapshot was written (or loaded).";
    PERSIST_REPLAY_SECONDS: Gauge "r8s_persist_replay_seconds" =
        "Seconds each cache took at start to load its snapshot and replay its log.";
    PERSIST_BEHIND_TOTAL: Counter "r8s_persist_behind_total" =
        "Times a cache's log lost its place (the cache's own event log moved past it: a disk too slow, a reset): a full snapshot follows.";
    // Auth.
    AUTHN_TOTAL: Counter "r8s_authn_total" =
        "Requests authenticated (auth.mode delegated), by result and whether a cached review answered.";
    AUTHZ_TOTAL: Counter "r8s_authz_total" =
        "Cache reads authorized, by decision and whether a cached review answered.";
    AUTH_STALE_TOTAL: Counter "r8s_auth_stale_decisions_total" =
        "Expired allowing reviews reused while the upstream could not review (auth.stale_if_error_seconds), by kind.";
    AUTH_REVIEW_DURATION_SECONDS: Histogram "r8s_auth_review_duration_seconds" =
        "Time of TokenReview and SubjectAccessReview calls to the upstream, by review.";
    // The build.
    BUILD_INFO: Gauge "r8s_build_info" =
        "1, labelled with the version and commit r8s was built from.";
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names are unique, r8s's own, and counters end in `_total` (and only they).
    #[test]
    fn should_name_every_metric_once_as_prometheus_expects() {
        let mut seen = std::collections::HashSet::new();
        for (name, kind, help) in ALL {
            assert!(seen.insert(*name), "{name} twice");
            assert!(name.starts_with("r8s_"), "{name}");
            assert_eq!(
                name.ends_with("_total"),
                *kind == Kind::Counter,
                "{name}: counters, and only they, end in _total"
            );
            assert!(help.ends_with('.') && help.len() > 20, "{name}: {help}");
        }
        assert_eq!(ALL.len(), 66);
    }
}
