//! The reflector's recovery table, row by row: every [`StepError`], from a
//! failed list (`Retry::Relist`) and a failed watch (`Retry::Watch`), and
//! what follows it (the next state, how long it waits first, what else it
//! changes), in paused time: the waits are exact, whatever the machine's
//! load, and no socket is opened (the upstream's addresses are never dialled).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{
    Failed, ListWith, OVER_BUDGET_PAUSE, Reflector, ReflectorConfig, Retry, State, StepError,
};
use crate::api::ApiResource;
use crate::api::gvr::Gvr;
use crate::api::media::Encoding;
use crate::cache::budget::Budget;
use crate::cache::object::ObjectError;
use crate::cache::serving::Serving;
use crate::cache::store::{Limits, Options, Store};
use crate::config::UpstreamConfig;
use crate::metrics::StoreLabels;
use crate::shutdown;
use crate::upstream::Upstream;

/// A configmaps reflector whose upstream has `servers` servers (none of
/// them dialled: recovery decides, it does not connect).
pub(super) async fn reflector(servers: usize) -> Reflector {
    let config = UpstreamConfig {
        servers: (1..=servers)
            .map(|i| format!("http://127.0.0.1:{i}"))
            .collect(),
        ..Default::default()
    };
    let upstream = Arc::new(Upstream::new(&config).await.unwrap());
    let (writer, _store) = Store::new(Options {
        scope: Default::default(),
        limits: Limits::for_tests(10, 100),
        budget: Budget::unlimited(),
        encoding: Encoding::Json,
        node_index: false,
        indexes: Vec::new(),
        labels: StoreLabels::new("v1/configmaps".into(), "json"),
    });
    let resource = ApiResource {
        gvr: Gvr::from_static("", "v1", "configmaps"),
        kind: "ConfigMap".into(),
        namespaced: true,
        selectable: &[],
    };
    Reflector::new(
        upstream,
        resource,
        writer,
        ReflectorConfig {
            page_size: 500,
            streaming_lists: true,
            max_backoff: Duration::from_secs(30),
            drop_managed_fields: false,
        },
    )
}

/// What a state is, in words (states hold streams and tasks: no `Debug`).
pub(super) fn named(s: &State) -> String {
    match s {
        State::Restoring(_) => "Restoring".into(),
        State::Relisting { diverged } => format!("Relisting {{ diverged: {diverged} }}"),
        State::Paging(_) => "Paging".into(),
        State::Initial(_) => "Initial".into(),
        State::Opening { rv, resuming } => format!("Opening {{ rv: {rv}, resuming: {resuming} }}"),
        State::Watching(_) => "Watching".into(),
        State::Evicted { diverged } => format!("Evicted {{ diverged: {diverged} }}"),
        State::Stopped => "Stopped".into(),
    }
}

/// A failed list (after a divergence or not) and a failed watch from 42.
const RETRIES: [Retry; 3] = [
    Retry::Relist { diverged: false },
    Retry::Relist { diverged: true },
    Retry::Watch {
        rv: 42,
        resuming: false,
    },
];

/// Recovers from `error` where `retry` stood: the next state, and how long
/// it waited first.
async fn recover(r: &mut Reflector, error: StepError, retry: Retry) -> (String, Duration) {
    let (_trigger, signal) = shutdown::channel();
    let began = Instant::now();
    let next = r.recover(Failed { error, retry }, &signal).await;
    (named(&next), began.elapsed())
}

/// The state `error` leads to where `retry` stood, shutdown having come.
async fn recover_at_shutdown(r: &mut Reflector, error: StepError, retry: Retry) -> String {
    let (trigger, signal) = shutdown::channel();
    trigger.fire();
    named(&r.recover(Failed { error, retry }, &signal).await)
}

/// What "retry at once" means where `retry` stood.
fn retried(retry: Retry) -> String {
    match retry {
        Retry::Relist { diverged } => format!("Relisting {{ diverged: {diverged} }}"),
        Retry::Watch { rv, resuming } => format!("Opening {{ rv: {rv}, resuming: {resuming} }}"),
    }
}

/// Whether `retry` is owed to a divergence (a relist after it stays a reset).
fn owed(retry: Retry) -> bool {
    matches!(retry, Retry::Relist { diverged: true })
}

/// 410 and undecodable data: relist at once, still as a reset if one was owed.
#[tokio::test(start_paused = true)]
async fn should_relist_at_once_after_expired_or_malformed() {
    for retry in RETRIES {
        let mut r = reflector(1).await;
        let want = format!("Relisting {{ diverged: {} }}", owed(retry));
        assert_eq!(
            recover(&mut r, StepError::Expired, retry).await,
            (want.clone(), Duration::ZERO),
            "{retry:?}"
        );
        assert_eq!(
            recover(&mut r, StepError::Malformed("x".into()), retry).await,
            (want, Duration::ZERO),
            "{retry:?}"
        );
    }
}

/// A divergence: relist at once, as a reset, wherever it stood.
#[tokio::test(start_paused = true)]
async fn should_relist_as_a_reset_after_a_divergence() {
    for retry in RETRIES {
        let mut r = reflector(1).await;
        assert_eq!(
            recover(&mut r, StepError::Diverged, retry).await,
            ("Relisting { diverged: true }".into(), Duration::ZERO),
            "{retry:?}"
        );
    }
}

/// Streaming lists refused: relist at once, by paged LISTs from then on.
#[tokio::test(start_paused = true)]
async fn should_relist_by_pages_once_streaming_lists_are_refused() {
    for retry in RETRIES {
        let mut r = reflector(1).await;
        assert_eq!(r.lists, ListWith::Streaming);
        let got = recover(&mut r, StepError::StreamingUnsupported("400".into()), retry).await;
        let want = format!("Relisting {{ diverged: {} }}", owed(retry));
        assert_eq!(got, (want, Duration::ZERO), "{retry:?}");
        assert_eq!(r.lists, ListWith::Pages, "{retry:?}");
    }
}

/// Over the budget: evicted at once; the relist follows 60 s later (still
/// a reset if one was owed), or never if it shuts down meanwhile.
#[tokio::test(start_paused = true)]
async fn should_evict_over_budget_and_relist_after_the_pause() {
    for retry in RETRIES {
        let mut r = reflector(1).await;
        let got = recover(&mut r, StepError::OverBudget, retry).await;
        let diverged = owed(retry);
        assert_eq!(
            got,
            (
                format!("Evicted {{ diverged: {diverged} }}"),
                Duration::ZERO
            )
        );
        let (_trigger, signal) = shutdown::channel();
        let began = Instant::now();
        let next = r.evicted(diverged, &signal).await;
        assert_eq!(
            (named(&next), began.elapsed()),
            (
                format!("Relisting {{ diverged: {diverged} }}"),
                OVER_BUDGET_PAUSE
            )
        );
        assert_eq!(r.writer.store().serving(), Serving::OverBudget);
        let (trigger, signal) = shutdown::channel();
        trigger.fire();
        assert_eq!(named(&r.evicted(diverged, &signal).await), "Stopped");
    }
}

/// Versions that are not integers: stop for good, the store uncacheable
/// (its requests pass through).
#[tokio::test(start_paused = true)]
async fn should_stop_for_good_when_uncacheable() {
    for retry in RETRIES {
        let mut r = reflector(1).await;
        let e = ObjectError::BadResourceVersion("abc".into());
        assert_eq!(
            recover(&mut r, StepError::Uncacheable(e), retry).await,
            ("Stopped".into(), Duration::ZERO)
        );
        assert_eq!(r.writer.store().serving(), Serving::Uncacheable);
    }
}

/// A silent upstream: fail over from the server that went silent and retry
/// at once (the silence was its wait); with no server named, or one only,
/// no failover.
#[tokio::test(start_paused = true)]
async fn should_fail_over_from_a_silent_server_and_retry_at_once() {
    for retry in RETRIES {
        let mut r = reflector(2).await;
        assert_eq!(r.upstream.preferred(), 0);
        let silent = |server| StepError::Silent {
            server,
            why: "silent".into(),
        };
        assert_eq!(
            recover(&mut r, silent(Some(0)), retry).await,
            (retried(retry), Duration::ZERO)
        );
        assert_eq!(r.upstream.preferred(), 1, "failed over from 0");
        assert_eq!(
            recover(&mut r, silent(None), retry).await,
            (retried(retry), Duration::ZERO)
        );
        assert_eq!(r.upstream.preferred(), 1, "no server named: no failover");
        let mut one = reflector(1).await;
        assert_eq!(
            recover(&mut one, silent(Some(0)), retry).await,
            (retried(retry), Duration::ZERO)
        );
        assert_eq!(one.upstream.preferred(), 0);
    }
}

/// A transport or status failure: back off (full jitter under a doubling
/// bound: 200 ms, 400 ms, ...), then retry where it stood; shutdown during
/// the wait stops.
#[tokio::test(start_paused = true)]
async fn should_back_off_doubling_then_retry_after_a_failure() {
    fastrand::seed(52);
    for retry in RETRIES {
        let mut r = reflector(1).await;
        for bound_ms in [200, 400, 800, 1600] {
            let (next, waited) = recover(&mut r, StepError::Failed("503".into()), retry).await;
            assert_eq!(next, retried(retry));
            assert!(
                waited <= Duration::from_millis(bound_ms),
                "{retry:?}: waited {waited:?}, bound {bound_ms} ms"
            );
        }
        // Answered since the last failure: from the start again.
        r.backoff.answered();
        let (_, waited) = recover(&mut r, StepError::Failed("503".into()), retry).await;
        assert!(waited <= Duration::from_millis(200), "{waited:?}");
        assert_eq!(r.backoff.next(), Duration::from_millis(400));
        assert_eq!(
            recover_at_shutdown(&mut r, StepError::Failed("503".into()), retry).await,
            "Stopped"
        );
    }
}

/// An upstream behind the cache: keep the cache, back off and retry where
/// it stood (a behind answer does not reset the backoff); shutdown stops.
#[tokio::test(start_paused = true)]
async fn should_keep_the_cache_and_back_off_when_the_upstream_is_behind() {
    fastrand::seed(52);
    for retry in RETRIES {
        let mut r = reflector(1).await;
        let bound = r.backoff.next();
        // The behind server's answer is an answer, but it does not count:
        // the wait keeps growing.
        r.backoff.answered();
        let (next, waited) = recover(&mut r, StepError::Behind("older".into()), retry).await;
        assert_eq!(next, retried(retry));
        assert!(
            waited <= bound,
            "{retry:?}: waited {waited:?}, bound {bound:?}"
        );
        assert_eq!(r.backoff.next(), bound * 2);
        let (_, waited) = recover(&mut r, StepError::Failed("503".into()), retry).await;
        assert!(waited <= bound * 2, "not from the start: {waited:?}");
        assert_eq!(r.backoff.next(), bound * 4);
        assert_eq!(
            recover_at_shutdown(&mut r, StepError::Behind("older".into()), retry).await,
            "Stopped"
        );
    }
}
