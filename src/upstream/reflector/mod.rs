//! The reflector: keeps one store equal to the upstream's state of its
//! resource, in the store's encoding.
//!
//! A state machine whose states carry their data, as kube-runtime's
//! `watcher::State` does: [`Reflector::run`] is `state = self.step(state)`
//! until [`State::Stopped`], and each step returns the next state.
//!
//! ```text
//!  Restoring ──a snapshot loads─────────────▶ Opening{rv, resuming}
//!      └──no snapshot─────────────────────▶ Relisting
//!  Relisting ──streaming lists──▶ Initial{stream, objects} ──end bookmark──▶ Watching{stream, rv}
//!      └──paged LISTs──▶ Paging{objects, continue} ──more pages──▶ Paging
//!                                        └──the last page──▶ Opening{rv}
//!  Opening{rv} ──200──▶ Watching{stream, rv} ──a clean end──▶ Opening{rv'}
//!  Evicted ──a minute──▶ Relisting
//!  any ──shutdown, or versions that are not integers──▶ Stopped
//! ```
//!
//! A step that fails says why, as a [`StepError`], and where it stood: a
//! watch (`Opening`, `Watching`) retries from the last version applied, a
//! list (`Relisting`, `Paging`, `Initial`) starts again. What follows each
//! error is in [`StepError`]'s doc; the backoff between retries lives
//! outside the states ([`backoff::Backoff`]). Whether the store serves
//! meanwhile is its [`crate::cache::serving::Serving`], which the steps
//! set through the store's [`Writer`]: ready once listed, evicted over its
//! byte budget (relisted after a pause), uncacheable (the reflector stops).
//!
//! Silence is a failure too: every answer, frame and clean end marks the
//! store's [`crate::cache::staleness::Staleness`]; watches are asked to end
//! within half of `cache.max_staleness_seconds`, and one still open and
//! silent past that (a partition that resets nothing) is abandoned and
//! resumed, as is a request or list page that stalls; with several upstream
//! servers, the silent one is failed over.
//!
//! The cache never goes back in time: a list or streaming list older than
//! the version the store holds (a server behind the one it followed, after
//! a failover) is refused and retried, and an event older than the stream's
//! last version is malformed data (relist). So no watcher is ever handed a
//! version lower than one it was sent.

mod backoff;
mod list;
#[cfg(test)]
mod recover_tests;
mod request;
#[cfg(test)]
mod step_tests;
mod watch;

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Sleep;

use super::Upstream;
use super::client::{Reply, Units};
use super::decode::{DecodeError, Decoder};
use super::liveness::Returns;
use crate::api::ApiResource;
use crate::api::media::Encoding;
use crate::cache::object::{ObjectError, Objects, TypeInfo};
use crate::cache::store::{Change, Restored, Serving, Version};
use crate::cache::writer::Writer;
use crate::metrics::{self, Relist, StoreLabels};
use crate::shutdown::Signal;

/// How long an evicted cache waits before relisting.
const OVER_BUDGET_PAUSE: Duration = Duration::from_secs(60);

/// Where the reflector is, with what it holds there.
enum State {
    /// A snapshot from `persist.dir` loading, to resume from its version.
    Restoring(JoinHandle<Option<Restored>>),
    /// To list the state anew (`diverged`: a consistency check found the
    /// cache wrong, so the new state is a [`Change::Reset`]).
    Relisting {
        /// Whether the relist follows a divergence.
        diverged: bool,
    },
    /// A paged LIST under way, at one version.
    Paging(Pages),
    /// A streaming list's initial events under way.
    Initial(Initial),
    /// To open a watch from `rv` (`resuming`: the first after a snapshot
    /// was restored, which serves once the upstream answers it).
    Opening {
        /// The version to watch from.
        rv: u64,
        /// Whether the store waits for this watch to serve a restored state.
        resuming: bool,
    },
    /// A watch open.
    Watching(Watching),
    /// Evicted over its byte budget: relists after [`OVER_BUDGET_PAUSE`]
    /// (still as a reset, if the eviction came in a relist after a divergence).
    Evicted {
        /// Whether the relist that follows is still owed to a divergence.
        diverged: bool,
    },
    /// For good: shutdown, or a resource whose versions are not integers.
    Stopped,
}

/// A paged LIST's pages read so far.
struct Pages {
    objects: Objects,
    /// The next page's continue token (`None` before the first page).
    next: Option<String>,
    /// One page buffer reused for every page: objects are copied out at
    /// their exact size, so no page-sized garbage is left behind.
    scratch: Vec<u8>,
    diverged: bool,
}

/// An open watch stream (a streaming list's included) and its bounds.
struct Stream {
    units: Units,
    /// The server it goes to (the one to fail over from if it goes silent).
    server: Option<usize>,
    /// The `timeoutSeconds` it was asked to end by.
    timeout_s: u64,
    /// Past this after the `timeoutSeconds`, an open stream is silent, not
    /// idle (a partition that sends nothing, not even a reset).
    overdue: Duration,
    /// When it is overdue: made once per stream, not per event.
    deadline: Pin<Box<Sleep>>,
}

impl Stream {
    /// The stream of `reply`, asked to end after `timeout_s`, overdue
    /// `patience` later.
    fn new(reply: Reply, encoding: Encoding, timeout_s: u64, patience: Duration) -> Self {
        let server = reply.server();
        let overdue = Duration::from_secs(timeout_s) + patience;
        Stream {
            units: reply.units(encoding, usize::MAX),
            server,
            timeout_s,
            overdue,
            deadline: Box::pin(tokio::time::sleep(overdue)),
        }
    }

    /// The error of a stream still open past its deadline.
    fn silent(&self) -> StepError {
        StepError::Silent {
            server: self.server,
            why: format!(
                "a watch asked to end after {} s was still open and silent after {:?}",
                self.timeout_s, self.overdue
            ),
        }
    }
}

/// A streaming list before its initial-events-end bookmark.
struct Initial {
    stream: Stream,
    /// The ADDED events so far.
    objects: Objects,
    diverged: bool,
}

/// A watch stream and the last version applied from it.
struct Watching {
    stream: Stream,
    rv: u64,
}

/// Why a step failed; each says what follows.
#[derive(Debug, thiserror::Error)]
enum StepError {
    /// 410: the version is gone. Relist.
    #[error("resource version expired")]
    Expired,
    /// Undecodable data. Relist (never serve a half-applied state).
    #[error("malformed upstream data: {0}")]
    Malformed(String),
    /// A consistency check found the cache diverged. Relist, as a reset
    /// (its watchers relist too).
    #[error("the cache diverged from the upstream")]
    Diverged,
    /// The upstream rejects or ignores streaming lists. Relist by paged
    /// LISTs, from now on.
    #[error("streaming lists unsupported: {0}")]
    StreamingUnsupported(String),
    /// The cache grew over its byte budget. Evict it; relist after a pause.
    #[error("over the byte budget")]
    OverBudget,
    /// Resource versions are not integers. Stop caching (requests pass).
    #[error("{0}")]
    Uncacheable(ObjectError),
    /// The upstream went silent: no answer, or a watch past its own
    /// deadline (a silent partition). Fail over from `server` and retry at
    /// once (each attempt has already waited out its bound).
    #[error("{why}")]
    Silent {
        /// The server that went silent, if one answered.
        server: Option<usize>,
        /// What was silent, and for how long.
        why: String,
    },
    /// The upstream's state is older than the cache's (a server behind the
    /// one the cache followed). Keep the cache, back off and retry.
    #[error("{0}")]
    Behind(String),
    /// A transport or status failure. Back off and retry.
    #[error("{0}")]
    Failed(String),
}

impl From<DecodeError> for StepError {
    fn from(e: DecodeError) -> Self {
        match e {
            DecodeError::Malformed(m) => StepError::Malformed(m),
            DecodeError::Uncacheable(e) => StepError::Uncacheable(e),
            DecodeError::Expired => StepError::Expired,
            DecodeError::Failed(m) => StepError::Failed(format!("watch ERROR event: {m}")),
        }
    }
}

/// Where a failed step stood: what a retry does.
#[derive(Debug, Clone, Copy)]
enum Retry {
    /// List again.
    Relist { diverged: bool },
    /// Watch again from `rv`.
    Watch { rv: u64, resuming: bool },
}

/// A failed step: why, and where it stood.
struct Failed {
    error: StepError,
    retry: Retry,
}

/// What a step returns: the next state, or why it failed.
type Step = Result<State, Failed>;

/// How the reflector lists: learned from the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListWith {
    /// Streaming lists (`sendInitialEvents`), while the upstream serves them.
    Streaming,
    /// Paged LISTs.
    Pages,
}

/// Tunables.
#[derive(Debug, Clone)]
pub struct ReflectorConfig {
    /// Items per LIST page.
    pub page_size: usize,
    /// Try streaming lists (`sendInitialEvents`) before paged LISTs.
    pub streaming_lists: bool,
    /// The longest backoff (`upstream.max_backoff_seconds`).
    pub max_backoff: Duration,
    /// `cache.managed_fields = "drop"`: objects stored without managedFields.
    pub drop_managed_fields: bool,
}

/// Keeps a store equal to the upstream's state of its resource.
pub struct Reflector {
    upstream: Arc<Upstream>,
    resource: ApiResource,
    decoder: Decoder,
    writer: Writer,
    config: ReflectorConfig,
    /// Its per-event metrics, looked up once.
    series: metrics::ReflectorSeries,
    /// How the next relist lists.
    lists: ListWith,
    /// The wait before a retry.
    backoff: backoff::Backoff,
    /// The upstream's returns after outages: they end the backoff, and
    /// restart a watch silent since before the outage.
    returns: Returns,
    /// A snapshot to start from (its state is [`State::Restoring`]).
    warm: Option<JoinHandle<Option<Restored>>>,
    /// Rung when the cache must relist (a consistency check found it diverged).
    relist: Arc<Notify>,
}

impl Reflector {
    /// A reflector for `resource` feeding the store `writer` writes.
    pub fn new(
        upstream: Arc<Upstream>,
        resource: ApiResource,
        writer: Writer,
        config: ReflectorConfig,
    ) -> Self {
        let encoding = writer.store().encoding();
        let mut info = TypeInfo::of(&resource, encoding);
        info.drop_managed_fields = config.drop_managed_fields;
        let lists = if config.streaming_lists {
            ListWith::Streaming
        } else {
            ListWith::Pages
        };
        let returns = upstream.liveness().returns();
        let backoff = backoff::Backoff::new(config.max_backoff);
        Reflector {
            upstream,
            resource,
            decoder: Decoder { info, encoding },
            series: metrics::ReflectorSeries::new(writer.store().labels()),
            writer,
            config,
            lists,
            backoff,
            returns,
            warm: None,
            relist: Arc::new(Notify::new()),
        }
    }

    /// Starts from the state `warm` loads, if it loads one, and resumes the
    /// upstream watch from its version instead of listing.
    pub fn warm_from(mut self, warm: JoinHandle<Option<Restored>>) -> Self {
        self.warm = Some(warm);
        self
    }

    /// Relists whenever `relist` is rung (by the consistency check).
    pub fn relist_on(mut self, relist: Arc<Notify>) -> Self {
        self.relist = relist;
        self
    }

    /// Runs until `stop` (shutdown, or the resource retired), or for good
    /// once the resource proves uncacheable. Returns the store's writer (a
    /// retired resource's store is emptied through it).
    pub async fn run(mut self, stop: Signal) -> Writer {
        let mut state = match self.warm.take() {
            Some(loading) => State::Restoring(loading),
            None => State::Relisting { diverged: false },
        };
        loop {
            state = match state {
                State::Stopped => return self.writer,
                _ if stop.fired() => return self.writer,
                state => self.step(state, &stop).await,
            };
        }
    }

    /// One step: the state after `state`.
    async fn step(&mut self, state: State, shutdown: &Signal) -> State {
        let step = match state {
            State::Restoring(loading) => return self.restore(loading, shutdown).await,
            State::Relisting { diverged } => self.relist(diverged).await,
            State::Paging(pages) => self.page(pages).await,
            State::Initial(initial) => self.initial(initial, shutdown).await,
            State::Opening { rv, resuming } => self.open(rv, resuming).await,
            State::Watching(watching) => self.watch(watching, shutdown).await,
            State::Evicted { diverged } => return self.evicted(diverged, shutdown).await,
            State::Stopped => return State::Stopped,
        };
        match step {
            Ok(next) => next,
            Err(failed) => self.recover(failed, shutdown).await,
        }
    }

    /// Starts from a snapshot if one loads (and resumes its watch), else lists.
    async fn restore(&mut self, loading: JoinHandle<Option<Restored>>, shutdown: &Signal) -> State {
        let restored = tokio::select! {
            r = loading => r.ok().flatten(),
            _ = shutdown.wait() => return State::Stopped,
        };
        let Some(r) = restored else {
            return State::Relisting { diverged: false };
        };
        let rv = r.rv;
        let v = self.writer.restore(r);
        if self.writer.store().serving() == Serving::Ready {
            // cache.serve_stale: served from the snapshot already.
            self.record(&v);
        }
        State::Opening { rv, resuming: true }
    }

    /// Drops the objects of a cache over its budget and waits before relisting.
    async fn evicted(&mut self, diverged: bool, shutdown: &Signal) -> State {
        tracing::warn!(
            resource = %self.labels(),
            bytes = self.writer.store().current().bytes,
            "cache over its byte budget (cache.max_bytes_*); evicted, its requests pass through; retrying in 60 s"
        );
        self.writer.evict_over_budget();
        self.series.unsynced();
        self.series.over_budget(true);
        tokio::select! {
            _ = tokio::time::sleep(OVER_BUDGET_PAUSE) => State::Relisting { diverged },
            _ = shutdown.wait() => State::Stopped,
        }
    }

    /// The state after a failed step: what its error says (see
    /// [`StepError`]), after the backoff where it says to wait.
    async fn recover(&mut self, failed: Failed, shutdown: &Signal) -> State {
        let Failed { error, retry } = failed;
        let label = self.labels().clone();
        // A relist owed to a divergence stays one (a reset) whatever fails it.
        let diverged = matches!(retry, Retry::Relist { diverged: true });
        let retry_now = |me: &Self| match retry {
            Retry::Relist { diverged } => State::Relisting { diverged },
            Retry::Watch { rv, resuming } => {
                me.series.watch_restart();
                State::Opening { rv, resuming }
            }
        };
        match error {
            StepError::Expired => {
                if let Retry::Watch { rv, resuming: true } = retry {
                    tracing::info!(resource = %label, rv, "the snapshot's version is compacted upstream (410); relisting");
                }
                self.series.relist(Relist::Expired);
                State::Relisting { diverged }
            }
            StepError::Malformed(m) => {
                tracing::warn!(resource = %label, error = %m, "malformed upstream data; relisting");
                self.series.relist(Relist::Malformed);
                State::Relisting { diverged }
            }
            StepError::Diverged => {
                self.series.relist(Relist::Diverged);
                State::Relisting { diverged: true }
            }
            StepError::StreamingUnsupported(why) => {
                tracing::info!(resource = %label, %why, "upstream does not serve streaming lists; using paged LISTs");
                self.lists = ListWith::Pages;
                State::Relisting { diverged }
            }
            StepError::OverBudget => State::Evicted { diverged },
            StepError::Uncacheable(e) => {
                tracing::warn!(resource = %label, error = %e, "not cacheable; its requests pass through");
                self.writer.set_uncacheable();
                self.series.unsynced();
                State::Stopped
            }
            StepError::Silent { server, why } => {
                tracing::warn!(resource = %label, error = %why, stale_for = ?self.writer.store().staleness().since(), "upstream silent; reconnecting");
                self.series.silent();
                if let Some(i) = server {
                    self.upstream.fail_over(i, "it went silent");
                }
                retry_now(self)
            }
            StepError::Behind(m) => {
                tracing::warn!(resource = %label, error = %m, backoff = ?self.backoff.next(), "upstream behind the cache; keeping the cache and retrying");
                self.series.behind();
                if !self.backoff.behind(shutdown, &mut self.returns).await {
                    return State::Stopped;
                }
                retry_now(self)
            }
            StepError::Failed(m) => {
                let wait = self.backoff.failed();
                tracing::warn!(resource = %label, error = %m, backoff = ?wait, "list/watch failed; retrying");
                if !self.backoff.wait(shutdown, &mut self.returns).await {
                    return State::Stopped;
                }
                retry_now(self)
            }
        }
    }

    /// Its store's labels (and name in logs).
    fn labels(&self) -> &StoreLabels {
        self.writer.store().labels()
    }

    /// Publishes the cache's size, version and event log after a change.
    fn record(&self, v: &Version) {
        let store = self.writer.store();
        self.series
            .state(v.objects.len(), v.rv, store.bytes(), store.history_size());
    }

    /// The change a relist's state at `rv` makes: a [`Change::Reset`] after
    /// a divergence, a [`Change::Replace`] otherwise.
    fn relisted(objects: Objects, rv: u64, diverged: bool) -> Change {
        if diverged {
            Change::Reset(objects, rv)
        } else {
            Change::Replace(objects, rv)
        }
    }

    /// Applies a relist's state: refused if older than the store, evicted
    /// if over the budget; an evicted cache that fits again serves again.
    fn apply_relist(
        &mut self,
        objects: Objects,
        rv: u64,
        diverged: bool,
        what: &str,
    ) -> Result<Arc<Version>, StepError> {
        self.not_behind(rv, what)?;
        let v = self
            .writer
            .apply(vec![Self::relisted(objects, rv, diverged)]);
        // Trimmed first, so the sizes recorded are the ones kept.
        if !self.writer.fit_budget() {
            return Err(StepError::OverBudget);
        }
        if self.writer.store().serving() == Serving::OverBudget {
            tracing::info!(resource = %self.labels(), "cache fits its byte budget again; serving");
        }
        self.writer.clear_over_budget();
        self.series.over_budget(false);
        self.record(&v);
        self.backoff.succeeded();
        self.returns.caught_up();
        Ok(v)
    }

    /// Refuses an upstream state at `rv` older than the store's (a proof
    /// may have moved the store past what this reflector applied:
    /// `Stamper::advance_to`).
    fn not_behind(&self, rv: u64, what: &str) -> Result<(), StepError> {
        let held = self.writer.store().current().rv;
        if rv < held {
            return Err(StepError::Behind(format!(
                "{what} answered at resource version {rv}, older than the cache's {held}"
            )));
        }
        Ok(())
    }

    /// How long the upstream may take to answer a request or send the next
    /// frame of a list: a quarter of `cache.max_staleness_seconds`.
    fn patience(&self) -> Duration {
        match self.writer.store().staleness().max() {
            m if m.is_zero() => Duration::from_secs(60),
            m => (m / 4).max(Duration::from_secs(1)),
        }
    }

    /// The `timeoutSeconds` of the next watch: a quarter to a half of
    /// `cache.max_staleness_seconds`, so that a healthy upstream's watches
    /// end (and so speak) well within it however idle the resource.
    fn watch_timeout(&self) -> u64 {
        let quarter = self.patience().as_secs().max(1);
        quarter + fastrand::u64(..quarter)
    }

    /// The store's encoding (what the upstream is asked for).
    fn encoding(&self) -> Encoding {
        self.decoder.encoding
    }
}
