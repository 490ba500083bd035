//! A whole Kubernetes v1.21 kube-apiserver for tests: the core API, real
//! RBAC and the Node authorizer (the `kube-1.21` kit), with an audit log
//! that shows who each request arrived as.
//!
//! Like the 1.36 kit it is not in a user's clone: tests find it through
//! [`ENV`] (`.ci/run` points it at `../shared/tools/kube-1.21`) and say that
//! they skipped without it. Each [`Kube121`] has its own state folder, etcd
//! data and free ports, and is stopped when dropped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::Resp;
use super::kube136::{Identity, KitFolders, Kube136, Sent};

/// The variable naming the kit's folder.
pub const ENV: &str = "KUBE_121_KIT";

/// The audit policy: every request at `Metadata` (who it came from, who it
/// acted as), SubjectAccessReviews with their request and answer (whom r8s
/// asked about, and what it was told).
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\n\
omitStages: [\"RequestReceived\", \"ResponseStarted\"]\nrules:\n\
- level: RequestResponse\n  resources:\n  - group: authorization.k8s.io\n    resources: [\"subjectaccessreviews\"]\n\
- level: Metadata\n";

/// A running 1.21 apiserver and its etcd.
pub struct Kube121 {
    kit: PathBuf,
    state: PathBuf,
    etcd: PathBuf,
    /// Its HTTPS port on 127.0.0.1.
    pub port: u16,
    /// A `system:masters` bearer token.
    admin: String,
}

impl Kube121 {
    /// Starts one with these static tokens (`token,user,uid[,"groups"]` a
    /// line; the first is the tests' own, in `system:masters`), or `None`
    /// (with a line saying the test skipped) where [`ENV`] is unset.
    pub fn start(test: &str, tokens_csv: &str) -> Option<Kube121> {
        let KitFolders { kit, state, etcd } = KitFolders::of(
            ENV,
            "the Kubernetes v1.21 kit with start.sh and stop.sh; .ci/run sets it to \
             ../shared/tools/kube-1.21",
            test,
        )?;
        std::fs::create_dir_all(state.join("pki")).unwrap();
        // start.sh keeps a tokens.csv it finds, and reads tokens.env.
        std::fs::write(state.join("pki/tokens.csv"), tokens_csv).unwrap();
        let admin = tokens_csv
            .lines()
            .next()
            .and_then(|l| l.split(',').next())
            .unwrap_or_default()
            .to_string();
        std::fs::write(
            state.join("pki/tokens.env"),
            format!("export KUBE121_TOKEN_ADMIN={admin} KUBE121_TOKEN_ALICE=\n"),
        )
        .unwrap();
        std::fs::write(state.join("audit-policy.yaml"), AUDIT_POLICY).unwrap();
        let port = Kube136::free_port();
        let extra = format!(
            "--audit-policy-file={} --audit-log-path={}",
            state.join("audit-policy.yaml").display(),
            state.join("audit.log").display()
        );
        let out = Command::new(kit.join("start.sh"))
            .env("STATE_DIR", &state)
            .env("ETCD_DATA", &etcd)
            .env("ETCD_PORT", Kube136::free_port().to_string())
            .env("ETCD_PEER_PORT", Kube136::free_port().to_string())
            .env("API_PORT", port.to_string())
            .env("EXTRA_ARGS", extra)
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", kit.join("start.sh").display()));
        let k = Kube121 {
            kit,
            state,
            etcd,
            port,
            admin,
        };
        assert!(
            out.status.success(),
            "the 1.21 kit did not start: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Some(k)
    }

    /// Its CA (serving and client certificates) and the CA's key.
    pub fn ca(&self) -> (PathBuf, PathBuf) {
        let pki = self.state.join("pki");
        (pki.join("ca.crt"), pki.join("ca.key"))
    }

    /// Its serving certificate and key, and its CA (for an r8s in front).
    pub fn serving_tls(&self) -> (PathBuf, PathBuf, PathBuf) {
        let pki = self.state.join("pki");
        (
            pki.join("serving.crt"),
            pki.join("serving.key"),
            pki.join("ca.crt"),
        )
    }

    /// A folder of this kit's state, for a test's files.
    pub fn dir(&self) -> &Path {
        &self.state
    }

    /// A kubeconfig with the `system:masters` client certificate.
    pub fn kubeconfig(&self) -> PathBuf {
        self.state.join("pki/admin.kubeconfig")
    }

    /// A kubeconfig with `token` as its credential.
    pub fn token_kubeconfig(&self, token: &str) -> PathBuf {
        let path = self.state.join(format!("token-{}.kubeconfig", token.len()));
        let ca = self.state.join("pki/ca.crt");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: kit\n  cluster:\n    server: \
                 https://127.0.0.1:{}\n    certificate-authority: {}\nusers:\n- name: u\n  user:\n    \
                 token: {token}\ncontexts:\n- name: kit\n  context: {{cluster: kit, user: u}}\n\
                 current-context: kit\n",
                self.port,
                ca.display()
            ),
        )
        .unwrap();
        path
    }

    /// A kubeconfig at `path` for this apiserver, presenting the client
    /// certificate `cert` with `key` (a node's, say).
    pub fn cert_kubeconfig(&self, path: &Path, cert: &Path, key: &Path) {
        let ca = self.state.join("pki/ca.crt");
        std::fs::write(
            path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: kit, cluster: {{server: \"https://127.0.0.1:{}\", certificate-authority: \"{}\"}}}}]\n\
                 users: [{{name: node, user: {{client-certificate: \"{}\", client-key: \"{}\"}}}}]\n\
                 contexts: [{{name: kit, context: {{cluster: kit, user: node}}}}]\ncurrent-context: kit\n",
                self.port,
                ca.display(),
                cert.display(),
                key.display()
            ),
        )
        .unwrap();
    }

    /// One request over TLS to `port` (this apiserver, or an r8s serving its
    /// certificate), presenting `identity` if given, with these headers.
    pub async fn send_tls(
        &self,
        port: u16,
        identity: Option<&Identity>,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> Resp {
        let ca = self.state.join("pki/ca.crt");
        Sent {
            ca: &ca,
            port,
            identity,
        }
        .send(method, path, headers, body, super::HANG)
        .await
    }

    /// `body` created at `path` as `system:masters` (201, or 409: there).
    pub async fn create(&self, path: &str, body: &Value) -> Resp {
        let auth = format!("Bearer {}", self.admin);
        let headers = [
            ("authorization", auth.as_str()),
            ("content-type", "application/json"),
        ];
        let body = body.to_string();
        let r = self
            .send_tls(self.port, None, "POST", path, &headers, Some(&body))
            .await;
        assert!(
            r.status == 201 || r.status == 409,
            "POST {path}: {} {}",
            r.status,
            r.text()
        );
        r
    }

    /// The audit log's `ResponseComplete` events from byte `from` on
    /// (an [`Kube121::audit_mark`]), those whose line holds `holding`.
    pub fn audit_events(&self, from: u64, holding: &str) -> Vec<Value> {
        use std::io::{Read, Seek, SeekFrom};
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(self.state.join("audit.log")) {
            let _ = f.seek(SeekFrom::Start(from));
            let _ = f.read_to_string(&mut text);
        }
        text.lines()
            .filter(|l| l.contains(holding))
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["stage"] == "ResponseComplete")
            .collect()
    }

    /// Where the audit log ends now (its length in bytes).
    pub fn audit_mark(&self) -> u64 {
        std::fs::metadata(self.state.join("audit.log")).map_or(0, |m| m.len())
    }

    /// The event of the request sent with `Audit-Id: id` after `from` (an
    /// [`Kube121::audit_mark`]), once logged (the apiserver writes it as the
    /// response goes: it is waited for).
    pub async fn audit_event(&self, from: u64, id: &str, what: &str) -> Value {
        let guard = super::HangGuard::new();
        loop {
            let quoted = format!("\"{id}\"");
            if let Some(e) = self
                .audit_events(from, &quoted)
                .into_iter()
                .find(|e| e["auditID"] == id)
            {
                return e;
            }
            guard.check(|| format!("no audit event {id} for {what}"));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The spec of the first SubjectAccessReview logged from byte `from` on
    /// that allowed what it asked and is not an impersonation check (whom r8s
    /// asked about for a read it answered), once logged. (A review of an
    /// earlier request r8s refused may be logged after `from`: it was denied.)
    pub async fn review_after(&self, from: u64, what: &str) -> Value {
        let guard = super::HangGuard::new();
        loop {
            let found = self
                .audit_events(from, "subjectaccessreviews")
                .into_iter()
                .find_map(|e| {
                    let spec = &e["requestObject"]["spec"];
                    let verb = spec["resourceAttributes"]["verb"].as_str()?;
                    (e["objectRef"]["resource"] == "subjectaccessreviews"
                        && e["responseObject"]["status"]["allowed"] == true
                        && !verb.starts_with("impersonate"))
                    .then(|| spec.clone())
                });
            if let Some(spec) = found {
                return spec;
            }
            guard.check(|| format!("no SubjectAccessReview of r8s's logged for {what}"));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The kit's folder.
    pub fn kit(&self) -> &Path {
        &self.kit
    }

    /// Starts `count` hollow kubelets, `node-FIRST..`, against `server`
    /// (an r8s in front, whose serving certificate chains to `server_ca`);
    /// each one's certificate is `hollow/node-NN.crt` under
    /// [`Kube121::dir`] (one made there before is kept).
    pub fn hollow(&self, first: usize, count: usize, server: &str, server_ca: &Path) {
        let out = Command::new(self.kit.join("hollow.sh"))
            .args(["start", &count.to_string(), &first.to_string()])
            .env("STATE_DIR", &self.state)
            .env("SERVER", server)
            .env("SERVER_CA", server_ca)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "hollow.sh: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Stops the hollow kubelet `name` (and waits for it to exit).
    pub fn stop_hollow(&self, name: &str) {
        self.kill(&format!("run/hollow-kubelet-{name}.pid"));
    }

    /// Stops the apiserver (etcd stays); its command line, to start it again.
    pub fn stop_apiserver(&self) -> Vec<String> {
        let pid = std::fs::read_to_string(self.state.join("run/apiserver.pid")).unwrap();
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", pid.trim())).unwrap();
        let args = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        self.kill("run/apiserver.pid");
        args
    }

    /// Starts the apiserver again as `args` (from [`Kube121::stop_apiserver`]).
    pub fn start_apiserver(&self, args: &[String]) {
        let log = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(self.state.join("log/apiserver.log"))
            .unwrap();
        let child = Command::new(&args[0])
            .args(&args[1..])
            .current_dir(&self.state)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        std::fs::write(self.state.join("run/apiserver.pid"), child.id().to_string()).unwrap();
        // Reaped when stop.sh (or a test) kills it.
        let mut child = child;
        std::thread::spawn(move || child.wait());
    }

    /// Kills the process whose pid `pid_file` (under the state folder)
    /// holds, and waits until it is gone.
    fn kill(&self, pid_file: &str) {
        let pid = std::fs::read_to_string(self.state.join(pid_file)).unwrap();
        let pid = pid.trim();
        let _ = Command::new("kill").arg(pid).status();
        let guard = super::HangGuard::new();
        while Path::new(&format!("/proc/{pid}")).exists()
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.contains(") Z "))
        {
            guard.check(|| format!("{pid_file}: the process did not exit"));
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = std::fs::remove_file(self.state.join(pid_file));
    }
}

impl Drop for Kube121 {
    fn drop(&mut self) {
        super::kube136::tell_log_on_failure(&self.state.join("log/apiserver.log"));
        // The hollow nodes' logs, where a test started some.
        if let Ok(logs) = std::fs::read_dir(self.state.join("log")) {
            for l in logs.flatten() {
                if l.file_name().to_string_lossy().starts_with("hollow-") {
                    super::kube136::tell_log_on_failure(&l.path());
                }
            }
        }
        let _ = Command::new(self.kit.join("stop.sh"))
            .env("STATE_DIR", &self.state)
            .output();
        let _ = std::fs::remove_dir_all(&self.etcd);
        let _ = std::fs::remove_dir_all(&self.state);
    }
}
