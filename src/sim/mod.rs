//! The built-in upstream: an in-memory stand-in for kube-apiserver.
//!
//! Faithful to `shared/seeds/` and the transcripts in `shared/reference/`
//! wherever it implements something, so that r8s can be tested against it,
//! demoed and benchmarked without a cluster. Nothing in the proxy depends on it.
//!
//! - [`store`]: etcd-like multi-version storage with a compaction window.
//! - [`resources`]: the served types and discovery documents.
//! - [`read`]: get and list (resource version semantics, paging, selectors, tables).
//! - [`watch`]: watch streams (initial events, bookmarks, timeouts).
//! - [`write`]: create, update, patch, delete, `status`.
//! - [`auth`]: tokens file, a small authorizer, TokenReview / SubjectAccessReview.
//! - [`exec`]: `pods/log` and the WebSocket `pods/exec`.
//! - [`seed`]: realistic sample objects and background churn.

pub mod auth;
pub mod exec;
pub mod protobuf;
pub mod read;
pub mod resources;
pub mod seed;
pub mod store;
pub mod watch;
pub mod write;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::api::params::ListOptions;
use crate::api::path::{self, ApiPath};
use crate::api::status::Status;
use crate::body::{self, Body};
use crate::shutdown::{self, Signal, Trigger};
use crate::sync::MutexExt;

/// How the sim is set up.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Pods to seed.
    pub pods: usize,
    /// Namespaces `ns-0..` to spread them over.
    pub namespaces: usize,
    /// Nodes `node-00..` the scheduled pods (every other one) spread over;
    /// 0: one per 100 pods, between 1 and 50.
    pub nodes: usize,
    /// Background writes per second (0: none).
    pub churn: f64,
    /// Events kept for resuming watches and old reads (the compaction window).
    pub history: usize,
    /// kube-apiserver `--token-auth-file` style CSV; authentication on when set.
    pub tokens: Option<PathBuf>,
    /// ABAC policy file (JSON lines) adding to the built-in rules; needs `tokens`.
    pub policy: Option<PathBuf>,
    /// Interval between watch bookmarks.
    pub bookmark_interval: Duration,
    /// Watches without `timeoutSeconds` end after a random time in [this, 2×this].
    pub min_watch_timeout: Duration,
    /// How long a read at a future resource version waits before 504.
    pub future_rv_wait: Duration,
}

impl SimConfig {
    /// The nodes to seed and schedule pods on.
    pub fn node_count(&self) -> usize {
        if self.nodes > 0 {
            self.nodes
        } else {
            (self.pods / 100).clamp(1, 50)
        }
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            pods: 100,
            namespaces: 4,
            nodes: 0,
            churn: 0.0,
            history: 10_000,
            tokens: None,
            policy: None,
            bookmark_interval: Duration::from_secs(60),
            min_watch_timeout: Duration::from_secs(1800),
            future_rv_wait: Duration::from_secs(3),
        }
    }
}

/// The running sim's shared state.
pub struct Sim {
    /// Storage.
    pub store: store::Store,
    /// Configuration.
    pub config: SimConfig,
    auth: Option<auth::Tokens>,
    counts: Mutex<HashMap<String, u64>>,
    shutdown: Signal,
    /// Bumped to end every open watch (a test hook: an upstream restart).
    watch_epoch: tokio::sync::watch::Sender<u64>,
    /// While set, new watches are refused with 503 (an upstream that is down).
    refuse_watches: std::sync::atomic::AtomicBool,
    /// While set, the background churn writes nothing.
    churn_paused: std::sync::atomic::AtomicBool,
}

/// A started sim: its address, state, and how to stop it.
pub struct SimHandle {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its state (request counts, store).
    pub sim: Arc<Sim>,
    trigger: Trigger,
    task: JoinHandle<()>,
}

impl SimHandle {
    /// `http://addr`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops serving and waits for the listener to close.
    pub async fn stop(self) {
        self.trigger.fire();
        let _ = self.task.await;
    }
}

/// Seeds a sim and serves it on `listener` until stopped.
pub async fn start(config: SimConfig, listener: TcpListener) -> std::io::Result<SimHandle> {
    let addr = listener.local_addr()?;
    let (trigger, signal) = shutdown::channel();
    let tokens = match &config.tokens {
        Some(p) => Some(auth::Tokens::load(p, config.policy.as_deref())?),
        None => None,
    };
    let sim = Arc::new(Sim {
        store: store::Store::new(config.history),
        config: config.clone(),
        auth: tokens,
        counts: Mutex::new(HashMap::new()),
        shutdown: signal.clone(),
        watch_epoch: tokio::sync::watch::channel(0).0,
        refuse_watches: std::sync::atomic::AtomicBool::new(false),
        churn_paused: std::sync::atomic::AtomicBool::new(false),
    });
    seed::seed(&sim);
    if config.churn > 0.0 {
        tokio::spawn(seed::churn(sim.clone()));
    }
    let s = sim.clone();
    let task = tokio::spawn(crate::server::serve(
        listener,
        None,
        move |req, _peer| {
            let s = s.clone();
            async move { s.handle(req).await }
        },
        signal,
        Duration::from_secs(5),
    ));
    Ok(SimHandle {
        addr,
        sim,
        trigger,
        task,
    })
}

/// A request as the handlers see it.
pub struct Req {
    /// Method.
    pub method: Method,
    /// Headers.
    pub headers: HeaderMap,
    /// Raw query.
    pub query: Option<String>,
    /// The requesting user (after authentication and impersonation).
    pub user: Option<auth::User>,
}

impl Sim {
    /// How many requests of `verb` on `resource` the sim has answered (e.g. `list`, `pods`).
    pub fn count(&self, verb: &str, resource: &str) -> u64 {
        let c = self.counts.locked();
        c.get(&format!("{verb} {resource}")).copied().unwrap_or(0)
    }

    fn bump(&self, verb: &str, resource: &str) {
        let mut c = self.counts.locked();
        *c.entry(format!("{verb} {resource}")).or_default() += 1;
    }

    /// Ends every open watch; with `refuse`, new watches get 503 until
    /// [`Sim::accept_watches`] (simulates an upstream restart or outage).
    pub fn interrupt_watches(&self, refuse: bool) {
        self.refuse_watches
            .store(refuse, std::sync::atomic::Ordering::SeqCst);
        self.watch_epoch.send_modify(|e| *e += 1);
    }

    /// Ends every open watch and makes resuming from before now answer 410,
    /// so watch clients (r8s's reflectors) must relist.
    pub fn expire_watches(&self) {
        self.store.expire_watches();
        self.interrupt_watches(false);
    }

    /// Who impersonated whom so far: (authenticated user, user acted as).
    pub fn impersonations(&self) -> Vec<(String, auth::User)> {
        self.auth
            .as_ref()
            .map(|t| t.impersonations())
            .unwrap_or_default()
    }

    /// Pauses (or resumes) the background churn.
    pub fn pause_churn(&self, paused: bool) {
        self.churn_paused
            .store(paused, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether the churn is paused.
    pub fn churn_paused(&self) -> bool {
        self.churn_paused.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Accepts watches again after [`Sim::interrupt_watches`].
    pub fn accept_watches(&self) {
        self.refuse_watches
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }

    /// A receiver that changes when watches are interrupted.
    pub fn watch_epoch(&self) -> tokio::sync::watch::Receiver<u64> {
        self.watch_epoch.subscribe()
    }

    /// Whether new watches are refused.
    pub fn refusing_watches(&self) -> bool {
        self.refuse_watches
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether the sim is shutting down (streams end).
    pub fn shutdown(&self) -> &Signal {
        &self.shutdown
    }

    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        let pretty = wants_pretty(&req);
        let mut resp = match self.clone().route(req).await {
            Ok(r) => r,
            Err(s) => s.into_response(),
        };
        if pretty {
            resp = prettify(resp).await;
        }
        resp
    }

    async fn route(self: Arc<Self>, req: Request<Incoming>) -> Result<Response<Body>, Status> {
        let (parts, incoming) = req.into_parts();
        let path = parts.uri.path().to_string();
        let user = match &self.auth {
            Some(t) => Some(t.authenticate(&parts.headers)?),
            None => None,
        };
        let r = Req {
            method: parts.method.clone(),
            headers: parts.headers.clone(),
            query: parts.uri.query().map(str::to_string),
            user,
        };
        let rp = match path::parse(&path) {
            ApiPath::Resource(rp) => rp,
            ApiPath::Other => {
                self.bump("get", &path);
                return self.non_resource(&r, &path);
            }
        };
        let opts = ListOptions::parse(r.query.as_deref())?;
        let verb = rp.verb(&r.method, opts.watch);
        self.bump(verb, &rp.gvr.resource());
        if auth::is_review(&rp) {
            if let Some(t) = &self.auth {
                t.authorize(r.user.as_ref(), verb, &rp, &opts.field_selector)?;
            }
            let body = read_body(incoming).await?;
            return auth::review(&self, &r, &rp, &body);
        }
        let Some(res) = resources::find(&rp.gvr) else {
            return Err(Status::path_not_found());
        };
        let def = &resources::RESOURCES[res];
        if !def.namespaced && rp.namespace.is_some() {
            return Err(Status::path_not_found());
        }
        if let Some(t) = &self.auth {
            t.authorize(r.user.as_ref(), verb, &rp, &opts.field_selector)?;
        }
        match (verb, rp.subresource.as_deref()) {
            ("get", None) => read::get(&self, res, &rp, &r, &opts).await,
            ("list", None) => read::list(&self, res, &rp, &r, &opts).await,
            ("watch", None) => watch::watch(self.clone(), res, &rp, &r, opts),
            ("get", Some("status")) => read::get(&self, res, &rp, &r, &opts).await,
            ("get", Some("log")) if def.gvr.resource() == "pods" => {
                exec::log(self.clone(), res, &rp, &r)
            }
            ("connect", Some("exec")) if def.gvr.resource() == "pods" => exec::exec(
                self.clone(),
                res,
                &rp,
                &r,
                Request::from_parts(parts, incoming),
            ),
            ("create", None) => write::create(&self, res, &rp, &r, read_body(incoming).await?),
            ("update", None | Some("status")) => {
                write::update(&self, res, &rp, &r, read_body(incoming).await?)
            }
            ("patch", None | Some("status")) => {
                write::patch(&self, res, &rp, &r, read_body(incoming).await?)
            }
            ("delete", None) => write::delete(&self, res, &rp, &r, read_body(incoming).await?),
            (_, Some(sub)) if !def.subresources.contains(&sub) => Err(Status::path_not_found()),
            _ => Err(Status::method_not_allowed()),
        }
    }

    fn non_resource(&self, r: &Req, path: &str) -> Result<Response<Body>, Status> {
        if r.method != Method::GET {
            return Err(Status::method_not_allowed());
        }
        let host = r
            .headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("127.0.0.1");
        let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
        let doc = match segs.as_slice() {
            ["version"] => resources::version(),
            ["api"] => resources::core_versions(host),
            ["api", v] => resources::resource_list("", v).ok_or_else(Status::path_not_found)?,
            ["apis"] => resources::group_list(),
            ["apis", g] => resources::group(g).ok_or_else(Status::path_not_found)?,
            ["apis", g, v] => resources::resource_list(g, v).ok_or_else(Status::path_not_found)?,
            // OpenAPI v3 with permissive schemas, so `kubectl apply` validates.
            ["openapi", "v3"] => resources::openapi_index(),
            ["openapi", "v3", rest @ ..] => {
                resources::openapi_group(&rest.join("/")).ok_or_else(Status::path_not_found)?
            }
            ["healthz" | "livez" | "readyz"] => {
                return Ok(text_response(StatusCode::OK, "ok"));
            }
            _ => return Err(Status::path_not_found()),
        };
        Ok(json_response(StatusCode::OK, to_bytes(&doc)))
    }
}

/// Reads a request body whole (the sim only; writes are small).
pub async fn read_body(body: Incoming) -> Result<Bytes, Status> {
    body.collect()
        .await
        .map(|c| c.to_bytes())
        .map_err(|e| Status::bad_request(format!("unable to read request body: {e}")))
}

/// Serializes a JSON value.
pub fn to_bytes(v: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(v).expect("JSON serializes"))
}

/// A JSON response with the apiserver's headers.
pub fn json_response(code: StatusCode, bytes: Bytes) -> Response<Body> {
    crate::api::json_response(code, body::full(bytes))
}

fn text_response(code: StatusCode, text: &'static str) -> Response<Body> {
    let mut resp = Response::new(body::full(text));
    *resp.status_mut() = code;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// Whether this request's JSON answer is pretty-printed (apiserver rules).
fn wants_pretty<B>(req: &Request<B>) -> bool {
    let opts = ListOptions::parse(req.uri().query()).unwrap_or_default();
    crate::api::params::pretty(opts.pretty, opts.watch, req.headers())
}

async fn prettify(resp: Response<Body>) -> Response<Body> {
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|c| c.as_bytes() == b"application/json");
    if !is_json {
        return resp;
    }
    let (mut parts, b) = resp.into_parts();
    let Ok(collected) = b.collect().await else {
        return Response::from_parts(parts, body::empty());
    };
    let bytes = collected.to_bytes();
    let out = match serde_json::from_slice::<Value>(&bytes) {
        Ok(v) => {
            let mut s = serde_json::to_vec_pretty(&v).expect("JSON serializes");
            s.push(b'\n');
            Bytes::from(s)
        }
        Err(_) => bytes,
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, body::full(out))
}
