//! Auditing against Kubernetes 1.36: the same requests, sent to the kit's
//! apiserver and to r8s in front of it, make the same `audit.k8s.io/v1`
//! events field by field (but for timestamps, audit IDs and r8s's own
//! annotations); the same policy files are accepted or refused with the
//! same words. Skipped, saying so, without the kit (`KUBE_APISERVER_136_KIT`).

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::common::kube136::Kube136;
use crate::common::*;

/// The message of the apiserver's `"command failed" err="..."` line, unquoted.
fn command_failed(line: &str) -> Option<String> {
    let rest = line.split_once("\"command failed\" err=\"")?.1;
    let mut out = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                other => out.push(other),
            },
            c => out.push(c),
        }
    }
    None
}

/// What the kit's apiserver makes of `policy`: `Ok` once it serves, or the
/// error it exits with.
fn kube_reads(kube: &Kube136, policy: &Path, dir: &Path) -> Result<(), String> {
    let port = Kube136::free_port();
    let log = dir.join(format!("audit-{port}.log"));
    let mut child = kube.another_apiserver(
        port,
        &[
            &format!("--audit-policy-file={}", policy.display()),
            &format!("--audit-log-path={}", log.display()),
        ],
    );
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if let Some(e) = command_failed(&line) {
                let _ = tx.send(Err(e));
                return;
            }
            if line.contains("Serving securely on") {
                let _ = tx.send(Ok(()));
                return;
            }
        }
        let _ = tx.send(Err("exited without saying why".into()));
    });
    let got = rx.recv_timeout(HANG).unwrap_or_else(|_| {
        panic!(
            "{}: the apiserver neither served nor failed",
            policy.display()
        )
    });
    let _ = child.kill();
    let _ = child.wait();
    got
}

#[test]
fn should_accept_and_refuse_audit_policies_as_kube_136_does() {
    let Some(kube) = Kube136::start("kube136_audit::policies") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("r8s-audit-policies-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("tests/audit_policies");
    let mut policies: Vec<_> = std::fs::read_dir(&cases)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    policies.push(
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("config/audit/policy.yaml"),
    );
    policies.push(
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .join("config/audit/kubernetes-docs-example.yaml"),
    );
    policies.sort();
    let mut diffs = Vec::new();
    for p in &policies {
        let theirs = kube_reads(&kube, p, &dir).map_err(|e| {
            let e = e
                .strip_prefix("loading audit policy file: ")
                .unwrap_or(&e)
                .to_string();
            let tail = format!(": from file {}", p.display());
            e.strip_suffix(&tail).unwrap_or(&e).to_string()
        });
        let bytes = std::fs::read(p).unwrap();
        let ours = r8s::audit::policy::Policy::from_bytes(&bytes).map(|_| ());
        // A YAML syntax error is the YAML reader's own words on each side.
        let syntax = |r: &Result<(), String>| {
            r.as_ref()
                .err()
                .is_some_and(|e| e.starts_with("failed decoding: yaml: "))
        };
        if ours != theirs && !(syntax(&ours) && syntax(&theirs)) {
            diffs.push(format!(
                "{}:\n  r8s:  {ours:?}\n  1.36: {theirs:?}",
                p.display()
            ));
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
    eprintln!(
        "{} policies read alike by r8s and kube-apiserver 1.36",
        policies.len()
    );
}

/// Events by audit ID, from a log file.
fn events(log: &Path) -> BTreeMap<String, Vec<Value>> {
    let mut by = BTreeMap::<String, Vec<Value>>::new();
    for line in std::fs::read_to_string(log).unwrap_or_default().lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        by.entry(v["auditID"].as_str().unwrap_or("").to_string())
            .or_default()
            .push(v);
    }
    by
}

/// An event as compared: without its timestamps, ID and r8s's annotations.
fn comparable(e: &Value) -> Value {
    let mut e = e.clone();
    let o = e.as_object_mut().unwrap();
    for k in ["requestReceivedTimestamp", "stageTimestamp", "auditID"] {
        o.remove(k);
    }
    if let Some(a) = o.get_mut("annotations").and_then(Value::as_object_mut) {
        a.retain(|k, _| !k.starts_with("r8s.io/"));
    }
    e
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn should_audit_reads_as_kube_136_does() {
    let dir = std::env::temp_dir().join(format!("r8s-audit-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
    )
    .unwrap();
    let (kube_log, r8s_log) = (dir.join("kube.log"), dir.join("r8s.log"));
    let extra = format!(
        "--audit-policy-file={} --audit-log-path={}",
        policy.display(),
        kube_log.display()
    );
    let Some(kube) = Kube136::start_with("kube136_audit::reads", &extra) else {
        return;
    };
    let widgets = "/apis/example.com/v1/namespaces/ns-a/widgets";
    let w = serde_json::json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w1", "namespace": "ns-a"}, "spec": {"size": 1}});
    kube.define_and_create(&crate::kube136::definitions()[0], widgets, &w)
        .await;
    let reviewer = kube.reviewer_kubeconfig();
    let (p, l) = (policy.clone(), r8s_log.clone());
    let r8s = kube
        .r8s()
        .with(move |c| {
            c.cache.resources = vec!["example.com/v1/widgets".into()];
            c.auth.mode = Some(r8s::config::AuthMode::Delegated);
            c.auth.review_kubeconfig = Some(reviewer);
            c.audit.policy_file = Some(p);
            c.audit.log_path = Some(l);
            // Consistent GETs passed on: the read below is one.
            c.read.consistent_gets = r8s::config::Prove::Pass;
        })
        .start()
        .await;
    let (admin, alice) = (kube.token("ADMIN"), kube.token("ALICE"));
    let cases: [(&str, &str, String); 8] = [
        ("get", &admin, format!("{widgets}/w1?resourceVersion=0")),
        ("not-found", &admin, format!("{widgets}/nope?resourceVersion=0")),
        ("list", &admin, format!("{widgets}?resourceVersion=0")),
        ("named-list", &admin, format!("{widgets}?resourceVersion=0&fieldSelector=metadata.name%3Dw1")),
        ("forbidden", &alice, format!("{widgets}?resourceVersion=0")),
        ("unauthorized", "not-a-token", format!("{widgets}?resourceVersion=0")),
        ("watch", &admin, format!("{widgets}?watch=1&resourceVersion=0&timeoutSeconds=1")),
        (
            "streaming-list",
            &admin,
            "/apis/example.com/v1/widgets?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1".to_string(),
        ),
    ];
    let limit = Duration::from_secs(30);
    for (name, token, path) in &cases {
        let auth = format!("Bearer {token}");
        let (kid, rid) = (format!("{name}-kube"), format!("{name}-r8s"));
        let ua = ("user-agent", "r8s-audit-test/1.0");
        let theirs = kube
            .send_as(
                token,
                "GET",
                path,
                &[("audit-id", kid.as_str()), ua],
                None,
                limit,
            )
            .await;
        let ours = send(
            "GET",
            &format!("{}{path}", r8s.url()),
            &[
                ("authorization", auth.as_str()),
                ("audit-id", rid.as_str()),
                ua,
            ],
            None,
        )
        .await;
        assert_eq!(ours.status, theirs.status, "{name}: {}", ours.text());
        for (who, resp, id) in [("1.36", &theirs, &kid), ("r8s", &ours, &rid)] {
            let echoed = resp.headers.get("audit-id").and_then(|v| v.to_str().ok());
            assert_eq!(echoed, Some(id.as_str()), "{who} {name}: Audit-Id");
        }
        let served = ours
            .headers
            .get("x-r8s-cache")
            .and_then(|v| v.to_str().ok());
        // r8s's own refusals carry no `X-R8s-Cache`.
        let want = (!matches!(*name, "forbidden" | "unauthorized")).then_some("hit");
        assert_eq!(served, want, "{name}: answered by r8s");
    }
    // Every case's last event written on both sides.
    let last = |log: &Path, suffix: &str| {
        let by = events(log);
        cases.iter().all(|(name, ..)| {
            by.get(&format!("{name}-{suffix}")).is_some_and(|evs| {
                evs.iter().any(|e| {
                    e["stage"] == "ResponseComplete"
                        || (*name == "unauthorized" && e["stage"] == "ResponseStarted")
                })
            })
        })
    };
    eventually("every case's events written", HANG, || async {
        (last(&kube_log, "kube") && last(&r8s_log, "r8s")).then_some(())
    })
    .await;
    let (theirs, ours) = (events(&kube_log), events(&r8s_log));
    let mut diffs = Vec::new();
    for (name, ..) in &cases {
        let t: Vec<Value> = theirs[&format!("{name}-kube")]
            .iter()
            .map(comparable)
            .collect();
        let o: Vec<Value> = ours[&format!("{name}-r8s")]
            .iter()
            .map(comparable)
            .collect();
        if t != o {
            diffs.push(format!(
                "{name}:\n  1.36: {}\n  r8s:  {}",
                serde_json::to_string(&t).unwrap(),
                serde_json::to_string(&o).unwrap()
            ));
        }
    }
    // A read r8s passes on (a Most Recent get, with consistent GETs
    // passed) is the apiserver's to audit,
    // under r8s's audit ID; r8s does not (audit.passthrough is off).
    let pass = send(
        "GET",
        &format!("{}{widgets}/w1", r8s.url()),
        &[
            ("authorization", format!("Bearer {admin}").as_str()),
            ("audit-id", "pass-r8s"),
        ],
        None,
    )
    .await;
    assert_eq!(pass.headers["x-r8s-cache"], "pass");
    assert_eq!(pass.headers["audit-id"], "pass-r8s");
    eventually("the passed read audited by the apiserver", HANG, || async {
        let by = events(&kube_log);
        by.get("pass-r8s")
            .is_some_and(|e| e.iter().any(|e| e["stage"] == "ResponseComplete"))
            .then_some(())
    })
    .await;
    assert!(!events(&r8s_log).contains_key("pass-r8s"));
    // r8s's own annotations say how it answered.
    let hit = &ours["get-r8s"].last().unwrap()["annotations"]["r8s.io/cache"];
    assert_eq!(hit, "hit");
    r8s.stop().await;
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(diffs.is_empty(), "events differ:\n{}", diffs.join("\n"));
}
