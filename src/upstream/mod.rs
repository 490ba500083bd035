//! The connection to the upstream kube-apiserver(s).
//!
//! Credentials and TLS come from kube-rs's config loader (kubeconfig, exec
//! plugins, rotating token files, in-cluster service account); requests go out
//! over HTTP/1.1 (so upgrades can be relayed), to the configured servers in
//! order. A request fails over on connection errors only (a request that
//! reached a server may have had effects); a reflector that finds its server
//! silent, or failing its lists and watches, moves everyone off it with
//! [`Upstream::fail_over`]. Each response
//! carries the [`ServedBy`] index of the server that gave it. r8s's own
//! requests (with its credentials) and the reading of their answers are
//! [`client`]'s.

pub mod body;
pub mod client;
pub mod consistency;
pub mod credential;
pub mod decode;
pub mod discovery;
pub mod liveness;
#[cfg(test)]
mod memory;
pub mod proof;
pub mod reflector;
pub mod version;

use crate::sync::RwLockExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::client::ConfigExt;
use tower::util::BoxCloneSyncService;
use tower::{Layer, ServiceExt};

use crate::body::BoxError;
use crate::config::UpstreamConfig;
use crate::metrics;
use body::{ReqBody, Shared};

/// How often r8s reads its client certificate files again: a kubelet
/// rotates the certificate a node-local r8s shares well before it expires,
/// and the apiserver takes the old one until then.
pub const CREDENTIAL_CHECK: Duration = Duration::from_secs(5);

type Svc = BoxCloneSyncService<Request<ReqBody>, Response<Incoming>, BoxError>;

/// One pool of connections to the upstream, with and without r8s's
/// credentials.
#[derive(Clone)]
struct Pool {
    /// Adds r8s's own credentials.
    authed: Svc,
    /// Sends as is, over connections that present no certificate of
    /// r8s's (the client brought its own `Authorization`, or none).
    raw: Svc,
}

impl Pool {
    /// A new pool (no connection yet) as `config` says; and whether r8s
    /// has credentials of its own.
    fn new(config: &kube::Config) -> Result<(Pool, bool), SetupError> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(config.connect_timeout);
        // A connection whose peer is gone (a node down, a path black-holed)
        // is found within about 15 s, whatever a watch's timeout: TCP
        // keepalive probes after 5 s idle, every 5 s, 2 unanswered.
        http.set_keepalive(Some(Duration::from_secs(5)));
        http.set_keepalive_interval(Some(Duration::from_secs(5)));
        http.set_keepalive_retries(Some(2));
        // Over HTTP/2, a PING after 10 s without a frame, answered within 5 s.
        let client = |https| -> Client<_, ReqBody> {
            Client::builder(TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(90))
                .timer(hyper_util::rt::TokioTimer::new())
                .http2_keep_alive_interval(Some(Duration::from_secs(10)))
                .http2_keep_alive_timeout(Duration::from_secs(5))
                .http2_keep_alive_while_idle(true)
                .build(https)
        };
        // A client's request goes over connections of its own that present
        // nothing of r8s's: the apiserver authenticates a client
        // certificate before a bearer token, so one of r8s's (its own, or
        // an exec plugin's) would make every passed request r8s's.
        let mut bare = config.clone();
        bare.auth_info = kube::config::AuthInfo::default();
        let raw = client(bare.rustls_https_connector_with_connector(http.clone())?);
        let raw = BoxCloneSyncService::new(raw.map_err(BoxError::from));
        let own = client(config.rustls_https_connector_with_connector(http)?);
        let auth = config.auth_layer()?;
        let has_credentials = auth.is_some()
            || config.auth_info.client_certificate.is_some()
            || config.auth_info.client_certificate_data.is_some();
        let authed = match auth {
            Some(layer) => BoxCloneSyncService::new(layer.layer(own.map_err(BoxError::from))),
            None => BoxCloneSyncService::new(own.map_err(BoxError::from)),
        };
        Ok((Pool { authed, raw }, has_credentials))
    }
}

/// Why the upstream could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    /// No upstream configured and none could be inferred.
    #[error("no upstream: pass --upstream URL or --kubeconfig PATH ({0})")]
    NoUpstream(String),
    /// TLS or credentials could not be set up.
    #[error("upstream TLS/credentials: {0}")]
    Client(#[from] kube::Error),
    /// A server URL does not parse.
    #[error("upstream server {0:?} is not a valid URL")]
    BadUrl(String),
}

/// Why a request could not be passed upstream.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// No configured server accepted a connection.
    #[error("upstream {server} is unreachable: {reason}")]
    Unreachable {
        /// The last server tried.
        server: String,
        /// What failed.
        reason: String,
    },
    /// The connection was made but the exchange failed.
    #[error("upstream {server} failed: {reason}")]
    Failed {
        /// The server.
        server: String,
        /// What failed.
        reason: String,
    },
}

struct Server {
    base: Uri,
    /// The URL as configured, in logs, errors and the `server` label of the
    /// upstream metrics (made once per configured server, kept for the process).
    display: &'static str,
}

/// Which configured server answered: a response extension, so that a caller
/// that later finds the server silent can name it to [`Upstream::fail_over`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServedBy(pub usize);

/// Whose credentials a request goes upstream with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Creds {
    /// r8s's own (reflectors, reviews, impersonation).
    Own,
    /// The client's, as sent (its `Authorization` header, or none: anonymous).
    Client,
}

/// [`Upstream::identity`]: `servers=URL,URL;ca=SHA-256 prefix` (`ca=none` without one).
fn identity(servers: &[Server], config: &kube::Config) -> String {
    let mut ca = ring::digest::Context::new(&ring::digest::SHA256);
    let mut any = false;
    for der in config.root_cert.iter().flatten() {
        ca.update(der);
        any = true;
    }
    if let Some(pem) = config
        .root_cert_file
        .as_ref()
        .and_then(|p| std::fs::read(p).ok())
    {
        ca.update(&pem);
        any = true;
    }
    let ca = if any {
        ca.finish()
            .as_ref()
            .iter()
            .take(12)
            .map(|b| format!("{b:02x}"))
            .collect()
    } else {
        "none".to_string()
    };
    let urls: Vec<&str> = servers.iter().map(|s| s.display).collect();
    format!("servers={};ca={ca}", urls.join(","))
}

/// The upstream: servers, a connection pool, credentials.
pub struct Upstream {
    servers: Vec<Server>,
    preferred: AtomicUsize,
    /// The connections, renewed after an outage ([`Upstream::renew_connections`]).
    pool: RwLock<Pool>,
    /// What the pool is made from.
    config: kube::Config,
    has_credentials: bool,
    /// The client certificate r8s presents, as last read.
    own_cert: credential::OwnCertificate,
    /// Its servers and CA, as one string ([`Upstream::identity`]).
    identity: String,
    /// Whether r8s's own lists and watches ask for gzip ([`Upstream::compression`]).
    compression: bool,
    /// Whether it answers, as the probe last saw it.
    liveness: Arc<liveness::Liveness>,
    /// Its Kubernetes version, as the probe last read it.
    version: version::Reported,
    /// `upstream.version`: the version of an upstream that says none.
    assumed: Option<version::KubeVersion>,
}

async fn kube_config(cfg: &UpstreamConfig) -> Result<kube::Config, SetupError> {
    use kube::config::{KubeConfigOptions, Kubeconfig};
    let opts = KubeConfigOptions {
        context: cfg.context.clone(),
        ..Default::default()
    };
    let mut config = if let Some(path) = &cfg.kubeconfig {
        let kc = Kubeconfig::read_from(path)
            .map_err(|e| SetupError::Kubeconfig(format!("{}: {e}", path.display())))?;
        kube::Config::from_custom_kubeconfig(kc, &opts)
            .await
            .map_err(|e| SetupError::Kubeconfig(format!("{}: {e}", path.display())))?
    } else if let Some(first) = cfg.servers.first() {
        kube::Config::new(
            first
                .parse()
                .map_err(|_| SetupError::BadUrl(first.clone()))?,
        )
    } else if cfg.context.is_some() {
        kube::Config::from_kubeconfig(&opts)
            .await
            .map_err(|e| SetupError::Kubeconfig(e.to_string()))?
    } else {
        kube::Config::infer()
            .await
            .map_err(|e| SetupError::NoUpstream(e.to_string()))?
    };
    if let Some(ca) = &cfg.ca_file {
        config.root_cert_file = Some(ca.clone());
    }
    if let Some(tf) = &cfg.token_file {
        config.auth_info.token_file = Some(tf.display().to_string());
        config.auth_info.token = None;
    }
    if cfg.insecure_skip_tls_verify {
        config.accept_invalid_certs = true;
    }
    config.connect_timeout = Some(Duration::from_secs_f64(cfg.connect_timeout_seconds));
    config.read_timeout = None;
    Ok(config)
}

impl Upstream {
    /// Sets up TLS, credentials and the server list from the configuration.
    pub async fn new(cfg: &UpstreamConfig) -> Result<Self, SetupError> {
        let config = kube_config(cfg).await?;
        let urls: Vec<String> = if cfg.servers.is_empty() {
            vec![config.cluster_url.to_string()]
        } else {
            cfg.servers.clone()
        };
        let mut servers = Vec::new();
        for u in urls {
            let base: Uri = u.parse().map_err(|_| SetupError::BadUrl(u.clone()))?;
            servers.push(Server {
                display: Box::leak(u.trim_end_matches('/').to_string().into_boxed_str()),
                base,
            });
        }
        let identity = identity(&servers, &config);
        let (pool, has_credentials) = Pool::new(&config)?;
        Ok(Upstream {
            own_cert: credential::OwnCertificate::of(&config.auth_info),
            compression: cfg.compression && !config.disable_compression,
            servers,
            preferred: AtomicUsize::new(0),
            pool: RwLock::new(pool),
            config,
            has_credentials,
            identity,
            liveness: Arc::default(),
            version: version::Reported::default(),
            assumed: version::KubeVersion::assumed(cfg),
        })
    }

    /// Starts new connections for every request from now on; those open
    /// stay with their requests, the idle ones are closed. After an outage
    /// the connections from before it are suspect: one black-holed with it
    /// would take a request and never answer.
    pub fn renew_connections(&self) -> bool {
        match Pool::new(&self.config) {
            Ok((pool, _)) => {
                *self.pool.writing() = pool;
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not renew the upstream connections; keeping the old ones");
                false
            }
        }
    }

    /// The client certificate r8s presents upstream (its leaf, DER), if it
    /// presents one: who r8s is to the apiserver.
    pub fn own_certificate(&self) -> Option<Arc<[u8]>> {
        self.own_cert.leaf()
    }

    /// Reads r8s's client certificate files again: where they changed (a
    /// rotation), every new connection presents the new one. Whether they
    /// changed.
    pub fn reread_credentials(&self) -> bool {
        if !self.own_cert.changed() {
            return false;
        }
        tracing::info!(
            "r8s's client certificate upstream changed (rotated); new connections present the new one"
        );
        if !self.renew_connections() {
            // Half written, or a key that does not match (yet): read again
            // at the next look.
            self.own_cert.forget();
        }
        true
    }

    /// Reads r8s's client certificate files again every
    /// [`CREDENTIAL_CHECK`] until `shutdown` ([`Upstream::reread_credentials`]).
    pub async fn follow_credentials(self: Arc<Self>, shutdown: crate::shutdown::Signal) {
        let mut tick = tokio::time::interval(CREDENTIAL_CHECK);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    self.reread_credentials();
                }
                _ = shutdown.wait() => return,
            }
        }
    }

    /// Whether it answers, as the probe last saw it: what the reflectors
    /// wait on to come back at once after an outage.
    pub fn liveness(&self) -> &Arc<liveness::Liveness> {
        &self.liveness
    }

    /// `GET /version` with r8s's own credentials: is the upstream answering?
    /// Records the version it reports ([`Upstream::version`]).
    pub async fn probe(self: &Arc<Self>) -> Result<(), RequestError> {
        let reply = self.get("/version", "application/json").await?;
        if reply.status().is_success() {
            // A body that does not come leaves the last version.
            if let Ok(body) = reply.bytes(64 << 10).await {
                self.version.set_from(&body);
            }
            Ok(())
        } else {
            Err(RequestError::Failed {
                server: self.servers[self.preferred()].display.to_string(),
                reason: format!("GET /version answered {}", reply.status()),
            })
        }
    }

    /// The Kubernetes version the upstream last reported (`None` until
    /// its `/version` has been read, or where it says no number and
    /// `upstream.version` assumes none).
    pub fn version(&self) -> Option<version::KubeVersion> {
        self.version.get(self.assumed)
    }

    /// What its version means for r8s's answers, now.
    pub fn wire_rules(&self) -> version::WireRules {
        version::WireRules::of(self.version())
    }

    /// Sets `r8s_upstream_in_use` for the server requests go to first (once
    /// the recorder is installed, then on every change).
    pub fn report_in_use(&self) {
        let labels: Vec<&'static str> = self.servers.iter().map(|s| s.display).collect();
        metrics::upstream_in_use(&labels, self.preferred());
    }

    /// Whether r8s has credentials of its own for the upstream.
    pub fn has_credentials(&self) -> bool {
        self.has_credentials
    }

    /// The server requests go to first now (an index into the configuration).
    pub fn preferred(&self) -> usize {
        self.preferred.load(Ordering::Relaxed) % self.servers.len()
    }

    /// Moves requests off server `from` (silent, or taking connections and
    /// failing them: `why`, for the log) to the next one; a no-op when
    /// another caller already moved them, or when there is only one server.
    /// Returns whether this call moved them.
    pub fn fail_over(&self, from: usize, why: &str) -> bool {
        let n = self.servers.len();
        if n < 2 {
            return false;
        }
        let moved = self
            .preferred
            .compare_exchange(from, (from + 1) % n, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok();
        if moved {
            tracing::warn!(
                from = %self.servers[from].display,
                to = %self.servers[(from + 1) % n].display,
                "upstream server unusable ({why}); failing over"
            );
            metrics::upstream_failover();
            self.report_in_use();
        }
        moved
    }

    /// What tells this upstream from another: its servers, and a digest of
    /// the CA it is verified with (a cluster rebuilt at the same address has
    /// a new CA). A snapshot is only loaded against the same identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Whether r8s's own lists and watches ask for gzip: `upstream.compression`,
    /// unless the kubeconfig's cluster says `disable-compression` (client-go's rule).
    pub fn compression(&self) -> bool {
        self.compression
    }

    /// The servers, as configured.
    pub fn server_names(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.display.to_string()).collect()
    }

    fn uri(base: &Uri, path_and_query: &str) -> Result<Uri, http::Error> {
        let prefix = base.path().trim_end_matches('/');
        let pq = format!("{prefix}{path_and_query}");
        Uri::builder()
            .scheme(base.scheme_str().unwrap_or("http"))
            .authority(base.authority().map(|a| a.as_str()).unwrap_or(""))
            .path_and_query(pq)
            .build()
    }

    /// Sends a request (parts from the client, body streamed) to the first
    /// server that accepts a connection, starting with the last one that did.
    pub async fn send(
        self: &Arc<Self>,
        parts: http::request::Parts,
        body: Option<Incoming>,
        creds: Creds,
    ) -> Result<Response<Incoming>, RequestError> {
        self.send_shared(parts, Shared::new(body), creds).await
    }

    /// POSTs a JSON object r8s wrote (a review) with its own credentials and
    /// reads the answer (at most 1 MiB).
    pub async fn post_json(
        self: &Arc<Self>,
        path: &str,
        body: Bytes,
    ) -> Result<(http::StatusCode, Bytes), RequestError> {
        let reply = self
            .own(http::Method::POST, path, "application/json", Some(body))
            .await?;
        let status = reply.status();
        let bytes = reply
            .bytes(1 << 20)
            .await
            .map_err(|e| RequestError::Failed {
                server: self.server_names().join(","),
                reason: format!("reading the answer to POST {path}: {e}"),
            })?;
        Ok((status, bytes))
    }

    async fn send_shared(
        self: &Arc<Self>,
        parts: http::request::Parts,
        shared: Shared,
        creds: Creds,
    ) -> Result<Response<Incoming>, RequestError> {
        let n = self.servers.len();
        let first = self.preferred.load(Ordering::Relaxed) % n;
        let svc = {
            let pool = self.pool.reading();
            match creds {
                Creds::Client => pool.raw.clone(),
                Creds::Own => pool.authed.clone(),
            }
        };
        let pq = parts
            .uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| "/".into());
        let mut last_err = None;
        for i in 0..n {
            let idx = (first + i) % n;
            let server = &self.servers[idx];
            let uri = Self::uri(&server.base, &pq).map_err(|e| RequestError::Failed {
                server: server.display.to_string(),
                reason: e.to_string(),
            })?;
            let mut req = Request::new(shared.attempt());
            *req.method_mut() = parts.method.clone();
            *req.uri_mut() = uri;
            *req.headers_mut() = parts.headers.clone();
            let sent = std::time::Instant::now();
            match svc.clone().oneshot(req).await {
                Ok(mut resp) => {
                    if self.preferred.swap(idx, Ordering::Relaxed) != idx {
                        self.report_in_use();
                    }
                    resp.extensions_mut().insert(ServedBy(idx));
                    let code = resp.status().as_u16();
                    metrics::upstream_response(server.display, &parts.method, code, sent.elapsed());
                    return Ok(resp);
                }
                Err(e) => {
                    let connect = is_connect_error(&*e);
                    let reason = error_chain(&*e);
                    tracing::warn!(server = %server.display, error = %reason, "upstream request failed");
                    if !(connect && shared.untouched()) {
                        metrics::upstream_response(
                            server.display,
                            &parts.method,
                            0,
                            sent.elapsed(),
                        );
                        return Err(RequestError::Failed {
                            server: server.display.to_string(),
                            reason,
                        });
                    }
                    metrics::upstream_unreachable(server.display);
                    last_err = Some(RequestError::Unreachable {
                        server: server.display.to_string(),
                        reason,
                    });
                }
            }
        }
        Err(last_err.expect("at least one server"))
    }
}

fn is_connect_error(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(le) = err.downcast_ref::<hyper_util::client::legacy::Error>()
            && le.is_connect()
        {
            return true;
        }
        cur = err.source();
    }
    false
}

/// An error and its causes on one line.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cur = c.source();
    }
    s
}
