//! A current kube-apiserver for tests: the Kubernetes 1.36.3 kit (the
//! standalone apiextensions-apiserver on etcd 3.6.8, the same handlers and
//! watch cache kube-apiserver 1.36 runs for custom resources).
//!
//! It is not in a user's clone: tests find it through [`ENV`] (a folder with
//! the kit's `start.sh`, `stop.sh` and `bin/`; `.ci/run` points it at
//! `../shared/tools/kube-apiserver-1.36`) and say that they skipped without
//! it. Each [`Kube136`] has its own state folder, etcd data and free ports, so
//! tests run side by side, and is stopped when dropped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;

use super::{Resp, read_response};

/// The variable naming the kit's folder.
pub const ENV: &str = "KUBE_APISERVER_136_KIT";

/// A running 1.36 apiserver (and its etcd and auth shim).
pub struct Kube136 {
    kit: PathBuf,
    state: PathBuf,
    etcd: PathBuf,
    /// Its HTTPS port on 127.0.0.1.
    pub port: u16,
    /// Its etcd's client port.
    etcd_port: u16,
    /// A `system:masters` bearer token.
    token: String,
    tls: tokio_rustls::TlsConnector,
}

/// A port free now on 127.0.0.1 (the kit binds it by number).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Kube136 {
    /// Starts one, or `None` (with a line saying the test skipped) where
    /// [`ENV`] is unset. A kit named but failing to start fails the test.
    pub fn start(test: &str) -> Option<Kube136> {
        Self::start_with(test, "")
    }

    /// [`Kube136::start`], with `extra` appended to the apiserver's flags
    /// (the kit's `EXTRA_ARGS`).
    pub fn start_with(test: &str, extra: &str) -> Option<Kube136> {
        Self::start_full(test, extra, None)
    }

    /// [`Kube136::start_with`], its authorizer (the kit's shim) given
    /// `grants`: the users of `tokens.csv` lines (`token,user,uid[,"groups"]`)
    /// and RBAC-like rules (`SHIM_RULES`), each review it answers logged to
    /// [`Kube136::review_log`].
    pub fn start_granting(test: &str, extra: &str, grants: &Grants) -> Option<Kube136> {
        Self::start_full(test, extra, Some(grants))
    }

    fn start_full(test: &str, extra: &str, grants: Option<&Grants>) -> Option<Kube136> {
        let KitFolders { kit, state, etcd } = KitFolders::of(
            ENV,
            "a Kubernetes 1.36 apiserver kit with start.sh and stop.sh; .ci/run sets it to \
             ../shared/tools/kube-apiserver-1.36",
            test,
        )?;
        std::fs::create_dir_all(&state).unwrap();
        // Ports are picked free and then bound by the kit's processes; a
        // test beside it can take one in between (etcd then fails to bind
        // and start.sh exits silently). Such a start is made again on other
        // ports; any other failure is the test's.
        let (mut port, mut etcd_port, mut out);
        let mut tries = 0;
        loop {
            tries += 1;
            (port, etcd_port) = (free_port(), free_port());
            let mut start = Command::new(kit.join("start.sh"));
            if let Some(g) = grants {
                // start.sh keeps a tokens.csv it finds.
                std::fs::create_dir_all(state.join("pki")).unwrap();
                std::fs::write(state.join("pki/tokens.csv"), &g.tokens_csv).unwrap();
                let admin = g
                    .tokens_csv
                    .lines()
                    .next()
                    .and_then(|l| l.split(',').next());
                std::fs::write(
                    state.join("pki/tokens.env"),
                    format!("export MODERN_TOKEN_ADMIN={}\n", admin.unwrap_or_default()),
                )
                .unwrap();
                std::fs::write(state.join("rules.json"), g.rules.to_string()).unwrap();
                start
                    .env("SHIM_RULES", state.join("rules.json"))
                    .env("SHIM_REVIEW_LOG", state.join("reviews.jsonl"));
            }
            out = start
                .env("STATE_DIR", &state)
                .env("ETCD_DATA", &etcd)
                .env("ETCD_PORT", etcd_port.to_string())
                .env("ETCD_PEER_PORT", free_port().to_string())
                .env("API_PORT", port.to_string())
                .env("AUTH_PORT", free_port().to_string())
                .env("EXTRA_ARGS", extra)
                .output()
                .unwrap_or_else(|e| panic!("{}: {e}", kit.join("start.sh").display()));
            if out.status.success() || tries == 3 || !lost_a_port(&state) {
                break;
            }
            eprintln!(
                "the 1.36 kit lost a port it was given to another process; starting it again"
            );
            let _ = Command::new(kit.join("stop.sh"))
                .env("STATE_DIR", &state)
                .output();
        }
        let mut k = Kube136 {
            kit,
            state,
            etcd,
            port,
            etcd_port,
            token: String::new(),
            tls: connector(Path::new("/dev/null")),
        };
        assert!(
            out.status.success(),
            "the 1.36 kit did not start: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let env = std::fs::read_to_string(k.state.join("pki/tokens.env")).unwrap();
        k.token = env
            .split_whitespace()
            .find_map(|w| w.strip_prefix("MODERN_TOKEN_ADMIN="))
            .expect("tokens.env names the admin token")
            .to_string();
        k.tls = connector(&k.state.join("pki/ca.crt"));
        Some(k)
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// A bearer token of the kit's: `ADMIN` (`system:masters`) or `ALICE`
    /// (no grants).
    pub fn token(&self, who: &str) -> String {
        let env = std::fs::read_to_string(self.state.join("pki/tokens.env")).unwrap();
        let key = format!("MODERN_TOKEN_{who}=");
        env.split_whitespace()
            .find_map(|w| w.strip_prefix(key.as_str()))
            .unwrap_or_else(|| panic!("tokens.env names {key}"))
            .to_string()
    }

    /// A kubeconfig for the kit's TokenReview and SubjectAccessReview
    /// server (what its apiserver's delegated authentication asks).
    pub fn reviewer_kubeconfig(&self) -> PathBuf {
        self.state.join("pki/shim.kubeconfig")
    }

    /// A second apiserver of the kit's on its etcd, certificates and
    /// review server, listening on `port`, with `extra` flags: to see what
    /// the apiserver makes of its flags (it is stopped when dropped).
    pub fn another_apiserver(&self, port: u16, extra: &[&str]) -> std::process::Child {
        let pki = self.state.join("pki");
        let p = |f: &str| pki.join(f).display().to_string();
        Command::new(self.kit.join("bin/apiextensions-apiserver"))
            .args([
                "--etcd-servers",
                &format!("http://127.0.0.1:{}", self.etcd_port),
            ])
            .args([
                "--bind-address",
                "127.0.0.1",
                "--secure-port",
                &port.to_string(),
            ])
            .args([
                "--tls-cert-file",
                &p("serving.crt"),
                "--tls-private-key-file",
                &p("serving.key"),
            ])
            .args(["--client-ca-file", &p("ca.crt")])
            .args([
                "--authentication-kubeconfig",
                &p("shim.kubeconfig"),
                "--authentication-skip-lookup",
            ])
            .args([
                "--authorization-kubeconfig",
                &p("shim.kubeconfig"),
                "--kubeconfig",
                &p("shim.kubeconfig"),
            ])
            .args(["--enable-priority-and-fairness=false"])
            .args([
                "--cert-dir",
                &self
                    .state
                    .join(format!("certs-{port}"))
                    .display()
                    .to_string(),
            ])
            .args(extra)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the kit's apiserver starts")
    }

    /// Every SubjectAccessReview its authorizer answered (with
    /// [`Kube136::start_granting`]), as JSON lines: `{"spec", "allowed"}`.
    pub fn review_log(&self) -> PathBuf {
        self.state.join("reviews.jsonl")
    }

    /// A second review server like the kit's (same tokens, same rules),
    /// logging to `log`, for a proxy in front to send its reviews to: both
    /// judged by one policy, each one's questions in its own log. Returns
    /// it (stopped when dropped) and a kubeconfig for it.
    pub fn second_reviewer(&self, log: &Path) -> (ChildGuard, PathBuf) {
        let pki = self.state.join("pki");
        let port = free_port();
        let child = Command::new("python3")
            .arg(self.kit.join("shim.py"))
            .args(["--tokens", &pki.join("tokens.csv").display().to_string()])
            .args(["--cert", &pki.join("serving.crt").display().to_string()])
            .args(["--key", &pki.join("serving.key").display().to_string()])
            .args(["--port", &port.to_string()])
            .args([
                "--rules",
                &self.state.join("rules.json").display().to_string(),
            ])
            .args(["--review-log", &log.display().to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("python3 runs the kit's shim");
        let guard = ChildGuard(child);
        let kubeconfig = self.state.join(format!("reviewer-{port}.kubeconfig"));
        let admin = std::fs::read_to_string(pki.join("shim.kubeconfig"))
            .unwrap()
            .replace(&format!(":{}", self.auth_port()), &format!(":{port}"));
        std::fs::write(&kubeconfig, admin).unwrap();
        let hang = super::HangGuard::new();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            hang.check(|| "the second review server did not listen".into());
            std::thread::sleep(Duration::from_millis(50));
        }
        (guard, kubeconfig)
    }

    /// Its serving certificate and key, and its CA: for an r8s in front to
    /// serve TLS that clients of the kit trust, and verify the kit's client
    /// certificates (`tls.cert_file`, `tls.key_file`, `tls.client_ca_file`).
    pub fn serving_tls(&self) -> (PathBuf, PathBuf, PathBuf) {
        let pki = self.state.join("pki");
        (
            pki.join("serving.crt"),
            pki.join("serving.key"),
            pki.join("ca.crt"),
        )
    }

    /// The port of the kit's own review server, read from its kubeconfig.
    fn auth_port(&self) -> u16 {
        let kc = std::fs::read_to_string(self.state.join("pki/shim.kubeconfig")).unwrap();
        kc.split("https://127.0.0.1:")
            .nth(1)
            .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|p| p.parse().ok())
            .expect("shim.kubeconfig names its server")
    }

    /// A free port on 127.0.0.1.
    pub fn free_port() -> u16 {
        free_port()
    }

    /// The kit's folder (its `examples/`, `shim.py`).
    pub fn kit(&self) -> &Path {
        &self.kit
    }

    /// A kubeconfig for it with `token` as its credential (no certificate).
    pub fn token_kubeconfig(&self, token: &str) -> PathBuf {
        let path = self.state.join("token.kubeconfig");
        let ca = self.state.join("pki/ca.crt");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: kit\n  cluster:\n    server: {}\n    \
                 certificate-authority: {}\nusers:\n- name: u\n  user:\n    token: {token}\n\
                 contexts:\n- name: kit\n  context: {{cluster: kit, user: u}}\ncurrent-context: kit\n",
                self.url(),
                ca.display()
            ),
        )
        .unwrap();
        path
    }

    /// A kubeconfig for it whose credential is an exec plugin (a shell
    /// printing an `ExecCredential`) handing out the `system:masters` client
    /// certificate.
    pub fn exec_kubeconfig(&self) -> PathBuf {
        let pki = self.state.join("pki");
        let read = |f: &str| std::fs::read_to_string(pki.join(f)).unwrap();
        let credential = serde_json::json!({
            "apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
            "status": {"clientCertificateData": read("admin.crt"), "clientKeyData": read("admin.key")}});
        let cred = self.state.join("exec-credential.json");
        std::fs::write(&cred, credential.to_string()).unwrap();
        let path = self.state.join("exec.kubeconfig");
        let kubeconfig = serde_json::json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "kit", "cluster": {"server": self.url(),
                "certificate-authority": pki.join("ca.crt")}}],
            "users": [{"name": "u", "user": {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1", "command": "cat",
                "args": [cred], "interactiveMode": "Never"}}}],
            "contexts": [{"name": "kit", "context": {"cluster": "kit", "user": "u"}}],
            "current-context": "kit"});
        std::fs::write(&path, kubeconfig.to_string()).unwrap();
        path
    }

    /// A kubeconfig for it (client certificate of `system:masters`).
    pub fn kubeconfig(&self) -> PathBuf {
        self.state.join("pki/admin.kubeconfig")
    }

    /// One request as `system:masters`, its body read to the end (or for `limit`).
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
        limit: Duration,
    ) -> Resp {
        let token = self.token.clone();
        self.send_as(&token, method, path, headers, body, limit)
            .await
    }

    /// [`Kube136::send`] with `token` as its bearer token.
    pub async fn send_as(
        &self,
        token: &str,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
        limit: Duration,
    ) -> Resp {
        let auth = format!("Bearer {token}");
        let mut all = vec![("authorization", auth.as_str())];
        all.extend_from_slice(headers);
        let port = self.port;
        self.send_tls(port, None, method, path, &all, body, limit)
            .await
    }

    /// A client certificate for `user` in `groups`, signed by the kit's CA
    /// (which its apiserver verifies client certificates against).
    pub fn client_cert(&self, user: &str, groups: &[&str]) -> Identity {
        let pki = self.state.join("pki");
        let (cert, key, csr) = (
            pki.join(format!("{user}.crt")),
            pki.join(format!("{user}.key")),
            pki.join(format!("{user}.csr")),
        );
        let ext = pki.join("client.ext");
        std::fs::write(&ext, "extendedKeyUsage=clientAuth\n").unwrap();
        let subject: String = groups
            .iter()
            .map(|g| format!("/O={g}"))
            .chain([format!("/CN={user}")])
            .collect();
        let run = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .output()
                .expect("openssl runs");
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let p = |f: &PathBuf| f.display().to_string();
        run(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            &p(&key),
            "-out",
            &p(&csr),
            "-subj",
            &subject,
        ]);
        run(&[
            "x509",
            "-req",
            "-in",
            &p(&csr),
            "-CA",
            &p(&pki.join("ca.crt")),
            "-CAkey",
            &p(&pki.join("ca.key")),
            "-CAcreateserial",
            "-out",
            &p(&cert),
            "-days",
            "1",
            "-extfile",
            &p(&ext),
        ]);
        Identity { cert, key }
    }

    /// One request over TLS to `port` on 127.0.0.1 (this apiserver, or an
    /// r8s serving the kit's certificate), presenting `identity` if given,
    /// with exactly these headers (none: anonymous).
    #[allow(clippy::too_many_arguments)]
    pub async fn send_tls(
        &self,
        port: u16,
        identity: Option<&Identity>,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
        limit: Duration,
    ) -> Resp {
        let ca = self.state.join("pki/ca.crt");
        let r = Sent {
            ca: &ca,
            port,
            identity,
        };
        r.send(method, path, headers, body, limit).await
    }

    /// `body` as JSON with `method` to `path`.
    pub async fn write(&self, method: &str, path: &str, body: &serde_json::Value) -> Resp {
        let body = body.to_string();
        let ct = if method == "PATCH" {
            "application/merge-patch+json"
        } else {
            "application/json"
        };
        self.send(
            method,
            path,
            &[("content-type", ct)],
            Some(&body),
            Duration::from_secs(10),
        )
        .await
    }

    /// Defines `crd` and creates `objects` ((collection path, body) each):
    /// the first once the definition is served, then the rest.
    pub async fn define_and_create_all(
        &self,
        crd: &serde_json::Value,
        objects: &[(String, serde_json::Value)],
    ) {
        let Some(((path, first), rest)) = objects.split_first() else {
            return;
        };
        self.define_and_create(crd, path, first).await;
        for (path, o) in rest {
            let r = self.write("POST", path, o).await;
            assert_eq!(r.status, 201, "{}", r.text());
        }
    }

    /// An r8s in front of this apiserver (its kubeconfig), to configure.
    pub fn r8s(&self) -> super::R8sBuilder {
        let kubeconfig = self.kubeconfig();
        super::R8sBuilder::from_config(r8s::config::Config::default())
            .with(move |c| c.upstream.kubeconfig = Some(kubeconfig))
    }

    /// Defines `crd`, then POSTs `body` to `path` once the definition is
    /// served (a new definition takes a moment to be).
    pub async fn define_and_create(
        &self,
        crd: &serde_json::Value,
        path: &str,
        body: &serde_json::Value,
    ) {
        let r = self
            .write(
                "POST",
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                crd,
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text());
        let guard = super::HangGuard::new();
        while self.write("POST", path, body).await.status != 201 {
            guard.check(|| "the widgets' definition was not served".into());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Where a kit is, and the folders one test's run of it writes to.
pub struct KitFolders {
    /// The kit (its scripts and binaries), from its variable.
    pub kit: PathBuf,
    /// Its state: certificates, tokens, logs, pids.
    pub state: PathBuf,
    /// etcd's data, on tmpfs where there is one (its fsyncs cost nothing there).
    pub etcd: PathBuf,
}

impl KitFolders {
    /// The kit named by `env`, and new folders for `test`'s run of it; `None`
    /// (with a line saying the test skipped) where `env` is unset. `what`
    /// says what the variable names. A kit named but missing fails the test.
    pub fn of(env: &str, what: &str, test: &str) -> Option<KitFolders> {
        let Some(kit) = std::env::var_os(env).map(PathBuf::from) else {
            eprintln!("SKIPPED {test}: {env} is not set (the folder of {what})");
            return None;
        };
        let kit =
            std::fs::canonicalize(&kit).unwrap_or_else(|e| panic!("{env}={}: {e}", kit.display()));
        let id = format!("r8s-kit-{}-{}", std::process::id(), fastrand::u64(..));
        let state = std::env::temp_dir().join(&id);
        let shm = Path::new("/dev/shm");
        let etcd = if shm.is_dir() {
            shm.join(&id)
        } else {
            state.join("etcd")
        };
        Some(KitFolders { kit, state, etcd })
    }
}

/// An r8s in front of a kit as the attacker's suites run it: `delegated`,
/// caching `resources`, its reviews to `review` (unset: the upstream),
/// serving TLS with `cert`, `key` and the client CA `ca`, and reviewing
/// every cached read (no decision reused), so that each one is compared.
pub fn delegated_r8s(
    kubeconfig: PathBuf,
    resources: &[&str],
    review: Option<PathBuf>,
    (cert, key, ca): (PathBuf, PathBuf, PathBuf),
) -> super::R8sBuilder {
    let resources: Vec<String> = resources.iter().map(|r| r.to_string()).collect();
    super::R8sBuilder::from_config(r8s::config::Config::default()).with(move |c| {
        c.upstream.kubeconfig = Some(kubeconfig);
        c.cache.resources = resources;
        c.auth.mode = Some(r8s::config::AuthMode::Delegated);
        c.auth.review_kubeconfig = review;
        c.tls.cert_file = Some(cert);
        c.tls.key_file = Some(key);
        c.tls.client_ca_file = Some(ca);
        c.auth.decision_ttl_seconds = 0;
        c.auth.decision_denied_ttl_seconds = 0;
    })
}

/// What the kit's authorizer grants ([`Kube136::start_granting`]).
pub struct Grants {
    /// `tokens.csv`: `token,user,uid[,"group,group"]` a line, the first
    /// line `system:masters` (what the tests' own requests go as).
    pub tokens_csv: String,
    /// The shim's rules (a JSON list; see the kit's `shim.py`).
    pub rules: serde_json::Value,
}

/// A child process killed when dropped.
pub struct ChildGuard(std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// On a test's failure, the end of a kit's log (what the apiserver said
/// about it is gone with the kit's folder otherwise).
pub fn tell_log_on_failure(log: &Path) {
    if !std::thread::panicking() {
        return;
    }
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(60).collect();
    eprintln!("--- the end of {} ---", log.display());
    for l in tail.iter().rev() {
        eprintln!("{l}");
    }
}

/// Whether a kit's process in `state` failed to bind a port it was given.
fn lost_a_port(state: &Path) -> bool {
    ["run/etcd.log", "run/apiserver.log", "run/shim.log"]
        .iter()
        .filter_map(|log| std::fs::read_to_string(state.join(log)).ok())
        .any(|text| {
            text.contains("address already in use") || text.contains("Address already in use")
        })
}

impl Drop for Kube136 {
    fn drop(&mut self) {
        tell_log_on_failure(&self.state.join("run/apiserver.log"));
        tell_log_on_failure(&self.state.join("run/shim.log"));
        let _ = Command::new(self.kit.join("stop.sh"))
            .env("STATE_DIR", &self.state)
            .output();
        let _ = std::fs::remove_dir_all(&self.etcd);
        let _ = std::fs::remove_dir_all(&self.state);
    }
}

/// A client certificate and its key (PEM files) signed by the kit's CA.
#[derive(Clone)]
pub struct Identity {
    /// The certificate.
    pub cert: PathBuf,
    /// Its key.
    pub key: PathBuf,
}

/// Where a request over TLS goes: a port on 127.0.0.1 serving a
/// certificate `ca` signed, and the client certificate it presents.
pub struct Sent<'a> {
    /// The CA the server's certificate chains to.
    pub ca: &'a Path,
    /// The port.
    pub port: u16,
    /// The client certificate, if any.
    pub identity: Option<&'a Identity>,
}

impl Sent<'_> {
    /// One request with exactly these headers, its body read to the end
    /// (or for `limit`).
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
        limit: Duration,
    ) -> Resp {
        let headers: Vec<(&str, &[u8])> = headers.iter().map(|(k, v)| (*k, v.as_bytes())).collect();
        self.send_bytes(method, path, &headers, body, limit).await
    }

    /// [`Sent::send`] with header values as bytes (any a header may carry).
    pub async fn send_bytes(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &[u8])],
        body: Option<&str>,
        limit: Duration,
    ) -> Resp {
        let port = self.port;
        let what = format!("{method} https://127.0.0.1:{port}{path}");
        let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let connector = match self.identity {
            Some(id) => connector_with(self.ca, id),
            None => connector(self.ca),
        };
        let tls = match connector.connect(name, tcp).await {
            Ok(tls) => tls,
            // The handshake refused the certificate: what a client sees.
            Err(e) => return Resp::refused(&format!("{what}: TLS handshake: {e}")),
        };
        let (mut sender, conn) =
            match hyper::client::conn::http1::handshake(TokioIo::new(tls)).await {
                Ok(h) => h,
                Err(e) => return Resp::refused(&format!("{what}: {e}")),
            };
        tokio::spawn(conn);
        let mut b = Request::builder()
            .method(method)
            .uri(path)
            .header("host", format!("127.0.0.1:{port}"));
        for (k, v) in headers {
            b = b.header(*k, http::HeaderValue::from_bytes(v).unwrap());
        }
        let req = b
            .body(Full::new(Bytes::from(body.unwrap_or("").to_string())))
            .unwrap();
        let resp = match tokio::time::timeout(limit, sender.send_request(req)).await {
            // No answer: a hang, which the caller reports with what it sent.
            Err(_) => return Resp::hung(&format!("{what}: no response within {limit:?}")),
            Ok(Err(e)) => return Resp::refused(&format!("{what}: {e}")),
            Ok(Ok(r)) => r,
        };
        read_response(resp, &what, limit).await
    }
}

/// A TLS client trusting `ca`, presenting `identity`.
///
/// TLS 1.2: a server that refuses the client's certificate says so within
/// the handshake, which then fails, where over TLS 1.3 the client finishes
/// first and learns of it only on its first request (a connection closed, at
/// times a request never answered): what is compared is who the certificate
/// names, not the TLS version.
fn connector_with(ca: &Path, identity: &Identity) -> tokio_rustls::TlsConnector {
    use rustls::pki_types::PrivateKeyDer;
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap().flatten() {
        roots.add(c).unwrap();
    }
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&identity.cert)
        .unwrap()
        .flatten()
        .collect();
    let key = PrivateKeyDer::from_pem_file(&identity.key).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS12])
    .unwrap()
    .with_root_certificates(roots)
    .with_client_auth_cert(certs, key)
    .unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// A TLS client trusting the certificates in `ca` (none: one that trusts nothing).
fn connector(ca: &Path) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    if let Ok(certs) = CertificateDer::pem_file_iter(ca) {
        for c in certs.flatten() {
            roots.add(c).unwrap();
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}
