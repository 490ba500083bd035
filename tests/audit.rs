//! Auditing in front of the sim: a full disk (r8s keeps serving, counts,
//! logs once, in kube's JSON log format), the `Audit-Id` of every response,
//! requests passed on when `audit.passthrough` asks, and bodies at level
//! `RequestResponse`. (Events against a real apiserver's: `kube136_audit`;
//! the webhook, rotation and full queues: the unit tests of `src/audit`.)

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::common::*;

const BIN: &str = env!("CARGO_BIN_EXE_r8s");

/// A child r8s, killed if the test ends before it does (a failing test
/// must not leave it running).
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("r8s-{name}-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write_policy(dir: &Path, rules: &str) -> std::path::PathBuf {
    let p = dir.join("policy.yaml");
    std::fs::write(
        &p,
        format!("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n{rules}"),
    )
    .unwrap();
    p
}

fn events(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn should_keep_serving_count_and_log_once_when_the_audit_disk_is_full() {
    if !Path::new("/dev/full").exists() {
        eprintln!("SKIPPED: no /dev/full here (a device whose writes fail as a full disk's do)");
        return;
    }
    let sim = start_sim(sim_config()).await;
    let dir = temp_dir("audit-full");
    let policy = write_policy(&dir, "- level: Metadata\n");
    let mut child = Killed(
        Command::new(BIN)
            .args(["serve", "--upstream", &sim.url(), "--cache", "pods"])
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .arg("--audit-policy-file")
            .arg(&policy)
            .args(["--audit-log-path", "/dev/full", "--log-format", "json"])
            // /dev/full is not rotated.
            .env("R8S_AUDIT__LOG_MAXSIZE", "0")
            .env_remove("R8S_CONFIG")
            .env_remove("RUST_LOG")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let reader = {
        let (lines, err) = (lines.clone(), child.0.stderr.take().unwrap());
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(l);
            }
        })
    };
    let serving: Value = eventually("r8s serving", HANG, || {
        let lines = lines.clone();
        async move {
            let lines = lines.lock().unwrap();
            let l = lines
                .iter()
                .find(|l| l.contains("\"msg\":\"r8s serving\""))?;
            Some(serde_json::from_str(l).unwrap())
        }
    })
    .await;
    let (api, admin) = (
        serving["api"].as_str().unwrap().to_string(),
        serving["admin"].as_str().unwrap().to_string(),
    );
    eventually("the pods cached", HANG, || async {
        (get(&format!("http://{admin}/readyz")).await.status == 200).then_some(())
    })
    .await;
    for _ in 0..5 {
        let r = get(&format!("http://{api}/api/v1/pods?resourceVersion=0")).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.headers["x-r8s-cache"], "hit");
    }
    let dropped = r#"r8s_audit_events_dropped_total{backend="log",reason="write_error"}"#;
    // Two events a read (RequestReceived, ResponseComplete), none written.
    eventually("the events counted dropped", HANG, || async {
        (scrape(&format!("http://{admin}/metrics"), dropped).await == 10.0).then_some(())
    })
    .await;
    let written = scrape(
        &format!("http://{admin}/metrics"),
        r#"r8s_audit_events_total{backend="log"}"#,
    )
    .await;
    assert_eq!(written, 0.0);
    // SIGTERM: it drains and exits 0.
    let _ = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status();
    let status = child.0.wait().unwrap();
    reader.join().unwrap();
    assert!(status.success(), "{status}");
    let lines = lines.lock().unwrap().clone();
    for l in lines.iter() {
        let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}"));
        assert!(
            v["ts"].is_number() && v["caller"].is_string() && v["msg"].is_string(),
            "{l}"
        );
    }
    let failed: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("cannot write the audit log"))
        .collect();
    assert_eq!(failed.len(), 1, "logged once: {failed:?}");
    let v: Value = serde_json::from_str(failed[0]).unwrap();
    assert!(v["err"].as_str().unwrap().contains("No space left"), "{v}");
    assert!(v.get("v").is_none(), "an error has no verbosity: {v}");
    std::fs::remove_dir_all(&dir).unwrap();
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn should_give_every_response_an_audit_id_and_keep_the_clients() {
    let sim = start_sim(sim_config()).await;
    let r8s = r8s_in_front_of(sim.url()).caching(&["pods"]).start().await;
    let pods = format!("{}/api/v1/pods", r8s.url());
    let mut seen = Vec::new();
    for (url, cache) in [
        (format!("{pods}?resourceVersion=0"), Some("hit")),
        (
            format!("{pods}?resourceVersion=0&limit=1&continue=not-ours"),
            Some("pass"),
        ),
        (format!("{}/version", r8s.url()), Some("pass")),
    ] {
        let r = get(&url).await;
        assert_eq!(
            r.headers.get("x-r8s-cache").map(|v| v.to_str().unwrap()),
            cache
        );
        let id = r.headers["audit-id"].to_str().unwrap().to_string();
        assert_eq!(id.len(), 36, "a UUID: {id}");
        seen.push(id);
    }
    seen.dedup();
    assert_eq!(seen.len(), 3, "a new ID each: {seen:?}");
    for url in [format!("{pods}?resourceVersion=0"), pods.clone()] {
        let r = send("GET", &url, &[("audit-id", "mine-1")], None).await;
        assert_eq!(r.headers["audit-id"], "mine-1", "{url}");
    }
    r8s.stop().await;
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn should_record_passes_and_bodies_as_the_policy_asks() {
    let sim = start_sim(sim_config()).await;
    let dir = temp_dir("audit-bodies");
    let policy = write_policy(
        &dir,
        "- level: RequestResponse\n  omitManagedFields: true\n  omitStages: [RequestReceived]\n  resources:\n  - group: \"\"\n    resources: [pods]\n",
    );
    let log = dir.join("audit.log");
    let (p, l) = (policy.clone(), log.clone());
    let r8s = r8s_in_front_of(sim.url())
        .caching(&["pods"])
        .with(move |c| {
            c.audit.policy_file = Some(p);
            c.audit.log_path = Some(l);
            c.audit.passthrough = true;
            // Consistent GETs passed: the one below is a pass.
            c.read.consistent_gets = r8s::config::Prove::Pass;
        })
        .start()
        .await;
    let url = format!(
        "{}/api/v1/namespaces/ns-0/pods?resourceVersion=0",
        r8s.url()
    );
    let list = send("GET", &url, &[("audit-id", "the-list")], None).await;
    assert_eq!(list.headers["x-r8s-cache"], "hit");
    // A get without resourceVersion: the upstream's.
    let name = list.json()["items"][0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let pass = send(
        "GET",
        &format!("{}/api/v1/namespaces/ns-0/pods/{name}", r8s.url()),
        &[("audit-id", "the-pass")],
        None,
    )
    .await;
    assert_eq!(pass.headers["x-r8s-cache"], "pass");
    // Not a pod: no rule, no event.
    let _ = send(
        "GET",
        &format!("{}/version", r8s.url()),
        &[("audit-id", "other")],
        None,
    )
    .await;
    let evs = eventually("both requests' events", HANG, || async {
        let evs = events(&log);
        let done = |id: &str| evs.iter().any(|e| e["auditID"] == id);
        (done("the-list") && done("the-pass")).then_some(evs)
    })
    .await;
    let of = |id: &str| -> Vec<&Value> { evs.iter().filter(|e| e["auditID"] == id).collect() };
    assert!(of("other").is_empty());
    let listed = of("the-list");
    assert_eq!(listed.len(), 1, "RequestReceived omitted: {listed:?}");
    let e = listed[0];
    assert_eq!(e["stage"], "ResponseComplete");
    assert_eq!(e["level"], "RequestResponse");
    assert_eq!(e["annotations"]["r8s.io/cache"], "hit");
    // The body as answered, without managedFields.
    let mut want = list.json();
    for item in want["items"].as_array_mut().unwrap() {
        item["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
    }
    assert_eq!(e["responseObject"], want);
    assert!(!want["items"].as_array().unwrap().is_empty());
    let passed = of("the-pass");
    assert_eq!(passed.len(), 1);
    assert_eq!(passed[0]["annotations"]["r8s.io/cache"], "pass");
    assert_eq!(
        passed[0]["annotations"]["r8s.io/pass-reason"],
        "most_recent"
    );
    assert!(
        passed[0].get("responseObject").is_none(),
        "no bodies of passed requests"
    );
    assert_eq!(passed[0]["responseStatus"]["code"], 200);
    r8s.stop().await;
    std::fs::remove_dir_all(&dir).unwrap();
    sim.stop().await;
}
