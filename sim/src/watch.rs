//! Watch streams: initial events, replay from a revision, live events,
//! bookmarks and timeouts, framed as kube-apiserver's JSON watch stream.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::read::{Format, Selectors, metadata_form, negotiate, selectors};
use crate::resources::ResourceDef;
use crate::state::{Req, Sim};
use crate::store::{Event, EventType, Obj};
use crate::table::{IncludeObject, table, table_of};
use r8s::api::params::{ListOptions, parse_rv};
use r8s::api::path::ResourcePath;
use r8s::api::status::Status;
use r8s::body::{self, Body};

/// One watcher's filter.
struct Filter {
    namespace: Option<String>,
    selectors: Selectors,
}

impl Filter {
    fn passes(&self, o: &Obj) -> bool {
        if self.namespace.is_none() && self.selectors.is_empty() {
            return true;
        }
        let v = o.value();
        let ns_ok = self
            .namespace
            .as_deref()
            .is_none_or(|ns| v["metadata"]["namespace"].as_str() == Some(ns));
        ns_ok && self.selectors.pass(&v)
    }
}

/// Where the stream starts.
enum Start {
    /// ADDED for the current state (RV unset or "0"), then live.
    InitialEvents { end_bookmark: bool, at_least: u64 },
    /// Live from the current revision, nothing before.
    Now,
    /// Every change after this revision.
    After(u64),
}

/// `GET ...?watch=true`.
pub fn watch(
    sim: Arc<Sim>,
    res: usize,
    rp: &ResourcePath,
    r: &Req,
    opts: ListOptions,
) -> Result<Response<Body>, Status> {
    let def = sim.resources.def(res);
    let (catalog_index, res) = (res, def.storage);
    opts.validate()?;
    if sim.refusing_watches() {
        return Err(Status::unavailable("watches are refused (sim outage)"));
    }
    let format = negotiate(r, &def, false)?;
    let selectors = selectors(&def, &opts)?;
    let rv = opts.resource_version.as_str();
    let n = match rv {
        "" => None,
        v => Some(parse_rv(v).map_err(Status::internal)?),
    };
    let start = match (opts.send_initial_events, n) {
        (Some(true), n) => Start::InitialEvents {
            end_bookmark: opts.allow_watch_bookmarks,
            at_least: n.unwrap_or(0),
        },
        (Some(false), None | Some(0)) => Start::Now,
        (None, None | Some(0)) => Start::InitialEvents {
            end_bookmark: false,
            at_least: 0,
        },
        (_, Some(n)) => Start::After(n),
    };
    // kube-apiserver's watch handler: 0 is the default, a negative
    // timeout ends the watch before it sends anything.
    let timeout = match opts.timeout_seconds {
        Some(t) if t > 0 => Duration::from_secs(t.unsigned_abs()),
        Some(t) if t < 0 => Duration::ZERO,
        _ => {
            let min = sim.config.min_watch_timeout;
            min + min.mul_f64(fastrand::f64())
        }
    };
    let filter = Filter {
        namespace: rp.namespace.clone(),
        selectors,
    };
    let drop = super::read::drops_managed_fields(r);
    let (tx, body) = body::channel(64);
    tokio::spawn(async move {
        let w = Watcher {
            sim,
            def,
            catalog_index,
            res,
            filter,
            format,
            drop,
            tx,
            bookmarks: opts.allow_watch_bookmarks,
            headed: AtomicBool::new(false),
        };
        w.run(start, timeout).await;
    });
    let mut resp = r8s::api::json_response(StatusCode::OK, body);
    if matches!(format, Format::Protobuf | Format::ProtobufMetadata) {
        resp.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static(r8s::api::media::PROTOBUF_WATCH),
        );
    }
    Ok(resp)
}

struct Watcher {
    sim: Arc<Sim>,
    def: Arc<ResourceDef>,
    /// The type's index in the sim's catalog (the watch ends when it is
    /// no longer served).
    catalog_index: usize,
    /// Where its objects are kept (what events name).
    res: usize,
    filter: Filter,
    format: Format,
    /// `drop=metadata.managedFields`.
    drop: bool,
    tx: mpsc::Sender<Bytes>,
    bookmarks: bool,
    /// A Table watch's column definitions went out: they go with the first
    /// line only, `null` after it (kube-apiserver's watch encoder).
    headed: AtomicBool,
}

impl Watcher {
    /// Whether this watcher is sent protobuf frames.
    fn protobuf(&self) -> bool {
        matches!(self.format, Format::Protobuf | Format::ProtobufMetadata)
    }

    /// Sends one event of `object`'s body (JSON, or an enveloped protobuf body).
    async fn send(&self, etype: &str, object: &[u8]) -> bool {
        let line = if self.protobuf() {
            r8s::codec::protobuf::watch_frame(etype, &[object])
        } else {
            r8s::codec::json::watch_line(etype, object)
        };
        self.send_line(line).await
    }

    /// Sends an ERROR event of `s` in this watcher's encoding.
    async fn send_error(&self, s: &Status) -> bool {
        let body = if self.protobuf() {
            s.to_protobuf()
        } else {
            s.to_bytes()
        };
        self.send("ERROR", &body).await
    }

    /// A Table event: its column definitions only if it is the first.
    async fn send_table(&self, etype: &str, mut t: Value) -> bool {
        if self.headed.swap(true, Ordering::Relaxed) {
            t["columnDefinitions"] = Value::Null;
        }
        self.send(etype, &serde_json::to_vec(&t).expect("JSON serializes"))
            .await
    }

    async fn send_line(&self, line: Bytes) -> bool {
        self.tx.send(line).await.is_ok()
    }

    async fn send_obj(&self, etype: &str, obj: &Arc<Obj>) -> bool {
        let obj = &obj.shown(&self.def, self.drop);
        match self.format {
            Format::Json => self.send(etype, &obj.full).await,
            Format::Metadata => self.send(etype, &metadata_form(&obj.full)).await,
            Format::Protobuf => match super::protobuf::body_of(&self.def, obj) {
                Some(body) => self.send(etype, body).await,
                None => false,
            },
            Format::ProtobufMetadata => {
                let body = super::protobuf::metadata_body(&self.def, obj);
                self.send(etype, &body).await
            }
            Format::Table(v, inc) => {
                let t = table(
                    &self.def,
                    v,
                    inc,
                    &obj.rv.to_string(),
                    None,
                    std::slice::from_ref(obj),
                );
                self.send_table(etype, t).await
            }
        }
    }

    /// Sends one initial event, its object encoded for this request. The
    /// cacher hands a watcher its initial events from the store, as plain
    /// objects that each watcher encodes itself (only live events are
    /// serialized once for all watchers, wrapped in a `cachingObject`), so
    /// a streaming list costs kube-apiserver an encoding of every object.
    async fn send_initial(&self, obj: &Arc<Obj>) -> bool {
        let obj = &obj.shown(&self.def, self.drop);
        match self.format {
            Format::Json => self.send("ADDED", &obj.full).await,
            Format::Protobuf => match super::protobuf::object_body(&self.def, &obj.value()) {
                Some(body) => self.send("ADDED", &body).await,
                None => false,
            },
            // Already encoded per request.
            Format::Metadata | Format::ProtobufMetadata | Format::Table(..) => {
                self.send_obj("ADDED", obj).await
            }
        }
    }

    async fn bookmark(&self, rv: u64, initial_end: bool) -> bool {
        if self.protobuf() {
            let metadata_only = self.format == Format::ProtobufMetadata;
            let end = initial_end.then(|| self.sim.config.initial_end());
            let body = super::protobuf::bookmark_body(&self.def, metadata_only, rv, end);
            return self.send("BOOKMARK", &body).await;
        }
        let (kind, av) = match self.format {
            Format::Metadata => (
                "PartialObjectMetadata",
                r8s::codec::json::META_API_VERSION.to_string(),
            ),
            _ => (self.def.kind.as_str(), self.def.gvr.api_version()),
        };
        if let Format::Table(v, inc) = self.format {
            // The printer's row of the empty object the cacher sends; the
            // end of the initial events carries its metadata whatever
            // `includeObject` says (so the annotation is seen), as 1.36 does.
            let mut meta = json!({"resourceVersion": rv.to_string()});
            let inc = match inc {
                IncludeObject::None if initial_end => IncludeObject::Metadata,
                inc => inc,
            };
            if initial_end {
                meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
            }
            let empty = json!({"kind": kind, "apiVersion": av, "metadata": meta});
            let t = table_of(&self.def, v, inc, &rv.to_string(), None, vec![empty]);
            return self.send_table("BOOKMARK", t).await;
        }
        let line = if initial_end {
            r8s::codec::json::initial_events_end(kind, &av, rv, self.sim.config.initial_end())
        } else {
            r8s::codec::json::bookmark(kind, &av, rv)
        };
        self.send_line(line).await
    }

    /// The event this watcher sees for a change, per the cacher's rules: an
    /// object leaving the filter is DELETED (its previous state, at the event's
    /// revision), one entering it is ADDED.
    async fn deliver(&self, ev: &Event) -> bool {
        if ev.res != self.res {
            return true;
        }
        let cur = ev.etype != EventType::Deleted && self.filter.passes(&ev.obj);
        let old = ev.prev.as_ref().is_some_and(|p| self.filter.passes(p));
        match (cur, old) {
            (true, false) => self.send_obj("ADDED", &ev.obj).await,
            (true, true) => self.send_obj("MODIFIED", &ev.obj).await,
            (false, true) => {
                if ev.etype == EventType::Deleted {
                    return self.send_obj("DELETED", &ev.obj).await;
                }
                let prev = ev.prev.as_ref().expect("old passes");
                self.send_obj("DELETED", &prev.at_version(self.def.items_typed, ev.rv))
                    .await
            }
            (false, false) => true,
        }
    }

    async fn run(self, start: Start, timeout: Duration) {
        if timeout.is_zero() {
            return;
        }
        let deadline = Instant::now() + timeout;
        let store = &self.sim.store;
        let (mut rx, read_rv) = match start {
            Start::After(n) => match store.watch_from(self.res, n) {
                Ok((past, rx)) => {
                    for ev in &past {
                        if !self.deliver(ev).await {
                            return;
                        }
                    }
                    (rx, past.last().map_or(n, |e| e.rv))
                }
                Err(too_old) => {
                    let s = Status::expired(format!(
                        "too old resource version: {n} ({})",
                        too_old.oldest
                    ));
                    self.send_error(&s).await;
                    return;
                }
            },
            Start::Now => {
                let (rv, _, rx) = store.watch_current(self.res);
                (rx, rv)
            }
            Start::InitialEvents {
                end_bookmark,
                at_least,
            } => {
                // The cacher waits (3 s) for a version it has not reached,
                // then answers with an ERROR event.
                if at_least > store.current_rv()
                    && !store
                        .wait_for_rv(at_least, self.sim.config.future_rv_wait)
                        .await
                {
                    let s = Status::too_large_resource_version(at_least, store.current_rv());
                    self.send_error(&s).await;
                    return;
                }
                let listing = self.sim.listing().await;
                let (rv, objects, rx) = store.watch_current(self.res);
                for o in objects.values() {
                    if self.filter.passes(o) && !self.send_initial(o).await {
                        return;
                    }
                }
                if end_bookmark && !self.bookmark(rv, true).await {
                    return;
                }
                drop(listing);
                (rx, rv)
            }
        };
        // The version the watch starts from: bookmarks go out once the store
        // is past it (the cacher's rule), whatever this watcher was sent.
        let start_rv = match start {
            Start::After(n) => n,
            Start::InitialEvents { at_least, .. } => at_least,
            Start::Now => read_rv,
        };
        let mut seen_rv = read_rv;
        // What a bookmark may carry: every change of this resource up to it
        // was sent. A watch cache hears only its own resource's changes (an
        // etcd watch on its prefix); a current apiserver's also moves with
        // the progress its consistent reads request from etcd, a pre-1.31
        // one's does not.
        let current = self.sim.config.generation == super::state::Generation::Current;
        let mut mark_rv = read_rv;
        let interval = self.sim.config.bookmark_interval;
        let mut next_bookmark = Instant::now() + interval;
        // As the cacher: no bookmark is scheduled when the point 2 s before
        // the end has already passed (watches of 2 s or less get none).
        let mut final_bookmark_sent = deadline
            .checked_sub(Duration::from_secs(2))
            .is_none_or(|t| t <= Instant::now());
        // When something is due: the end, the next bookmark, the one 2 s
        // before the end (timers, as the cacher's, not polling).
        let due = |next_bookmark: Instant, final_sent: bool| {
            let mut at = deadline;
            if self.bookmarks {
                at = at.min(next_bookmark);
                if !final_sent {
                    at = at.min(deadline - Duration::from_secs(2));
                }
            }
            at
        };
        let mut epoch = self.sim.watch_epoch();
        epoch.mark_unchanged();
        let mut held = self.sim.watches_held();
        let mut retired = self.sim.resources.retirements();
        retired.mark_unchanged();
        loop {
            tokio::select! {
                r = rx.recv() => match r {
                    Ok(ev) => {
                        if ev.rv <= seen_rv {
                            continue;
                        }
                        // Fallen behind: nothing goes out until released.
                        if *held.borrow_and_update() {
                            tokio::select! {
                                _ = held.wait_for(|h| !*h) => {}
                                _ = epoch.changed() => return,
                                _ = self.tx.closed() => return,
                                _ = self.sim.shutdown().wait() => return,
                            }
                        }
                        seen_rv = ev.rv;
                        if ev.res == self.res {
                            mark_rv = ev.rv;
                        }
                        if ev.res == self.res && !self.deliver(&ev).await {
                            return;
                        }
                    }
                    Err(RecvError::Lagged(_)) => {
                        let s = Status::expired(format!("too old resource version: {seen_rv} ({})", store.compacted()));
                        self.send_error(&s).await;
                        return;
                    }
                    Err(RecvError::Closed) => return,
                },
                _ = tokio::time::sleep_until(due(next_bookmark, final_bookmark_sent)) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return;
                    }
                    let near_end = deadline - now <= Duration::from_secs(2) && !final_bookmark_sent;
                    if self.bookmarks && (now >= next_bookmark || near_end) {
                        if near_end {
                            final_bookmark_sent = true;
                        }
                        next_bookmark = now + interval;
                        if current {
                            // Every change up to the progress was published
                            // before it: send those first.
                            let progress = self.sim.progress();
                            if progress > mark_rv && !*held.borrow() {
                                loop {
                                    match rx.try_recv() {
                                        Ok(ev) if ev.rv > seen_rv => {
                                            seen_rv = ev.rv;
                                            if ev.res == self.res {
                                                mark_rv = ev.rv;
                                                if !self.deliver(&ev).await {
                                                    return;
                                                }
                                            }
                                        }
                                        Ok(_) => {}
                                        Err(tokio::sync::broadcast::error::TryRecvError::Lagged(_)) => {
                                            let s = Status::expired(format!("too old resource version: {seen_rv} ({})", store.compacted()));
                                            self.send_error(&s).await;
                                            return;
                                        }
                                        Err(_) => break,
                                    }
                                }
                                mark_rv = mark_rv.max(progress);
                            }
                        }
                        if mark_rv > start_rv && !self.bookmark(mark_rv, false).await {
                            return;
                        }
                    }
                }
                _ = self.tx.closed() => return,
                _ = self.sim.shutdown().wait() => return,
                _ = epoch.changed() => return,
                _ = retired.changed() => {
                    if !self.sim.resources.is_served(self.catalog_index) {
                        // Its type is gone (a custom resource's definition
                        // deleted, or the version no longer served): the
                        // deletes of its objects go out, then the stream
                        // ends, as the cacher's watchers end when it stops.
                        while let Ok(ev) = rx.try_recv() {
                            if ev.rv > seen_rv && ev.res == self.res && !self.deliver(&ev).await {
                                return;
                            }
                        }
                        return;
                    }
                }
            }
        }
    }
}
