//! deploy/prometheus against a real Prometheus (Debian's `prometheus`
//! package; `.ci/run` installs it): promtool checks and unit-tests the rules,
//! a Prometheus scrapes a running r8s and evaluates them, and the hit-ratio
//! recording rule matches the traffic sent. Every metric name the rules and
//! the dashboard use exists in `/metrics`, and docs/metrics.md's metrics table
//! lists exactly what `/metrics` exports.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

use serde_json::Value;

const DIR: &str = concat!(
    concat!(env!("CARGO_MANIFEST_DIR"), "/.."),
    "/deploy/prometheus"
);

fn promtool(args: &[&str]) -> String {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(DIR)
        .output()
        .expect("promtool is on the PATH (.ci/run installs Debian's prometheus)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?}: {text}");
    text
}

#[test]
fn should_check_and_unit_test_the_rules() {
    let checked = promtool(&["check", "rules", "r8s-rules.yaml"]);
    assert!(checked.contains("SUCCESS"), "{checked}");
    let tested = promtool(&["test", "rules", "r8s-rules.test.yaml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
    promtool(&["check", "config", "prometheus.yml"]);

    // Every alert has a unit test, a runbook section, and the annotations
    // Alertmanager templates use: summary, description, and runbook_url, an
    // absolute URL of its section under the one base.
    let rules = std::fs::read_to_string(Path::new(DIR).join("r8s-rules.yaml")).unwrap();
    let tests = std::fs::read_to_string(Path::new(DIR).join("r8s-rules.test.yaml")).unwrap();
    let runbooks = std::fs::read_to_string(Path::new(DIR).join("runbooks.md")).unwrap();
    let alerts: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect();
    assert!(alerts.len() >= 12, "{alerts:?}");
    assert!(alerts.contains(&"R8sDown") && alerts.contains(&"R8sAbsent"));
    assert!(
        !rules.contains("runbook:"),
        "runbook_url, not a repository path"
    );
    for (i, a) in alerts.iter().enumerate() {
        assert!(
            tests.contains(&format!(
                "alertname: {a}\n        exp_alerts:\n          - exp_labels"
            )),
            "no unit test where {a} fires"
        );
        assert!(
            runbooks.contains(&format!("\n## {a}\n")),
            "no runbook for {a}"
        );
        let rule = rules
            .split("- alert: ")
            .nth(i + 1)
            .unwrap()
            .split("- alert: ")
            .next()
            .unwrap();
        for key in ["summary: \"", "description: \""] {
            assert!(rule.contains(key), "{a} has no {key}");
        }
        let url = format!("runbook_url: \"{RUNBOOK_BASE}#{}\"", a.to_lowercase());
        assert!(rule.contains(&url), "{a} does not link its runbook: {url}");
    }
    // The PrometheusRule is the same groups.
    let groups = &rules[rules.find("\ngroups:").unwrap() + 1..];
    let indented: String = groups
        .lines()
        .map(|l| {
            if l.is_empty() {
                "\n".to_string()
            } else {
                format!("  {l}\n")
            }
        })
        .collect();
    let object = std::fs::read_to_string(Path::new(DIR).join("prometheusrule.yaml")).unwrap();
    let spec = &object[object.find("\nspec:\n").expect("a spec") + 7..];
    if spec.trim_end() != indented.trim_end() {
        let expected = format!(
            "{}{indented}",
            &object[..object.find("\nspec:\n").unwrap() + 7]
        );
        let out = std::env::temp_dir().join("r8s-prometheusrule.yaml");
        std::fs::write(&out, expected).unwrap();
        panic!(
            "prometheusrule.yaml's spec differs from r8s-rules.yaml's groups; the expected file is at {}",
            out.display()
        );
    }
}

/// Every alert's runbook section lives under this base (r8s-rules.yaml and
/// runbook-base.yaml say it once each).
const RUNBOOK_BASE: &str = "https://github.com/r8s-dev/r8s/blob/main/deploy/prometheus/runbooks.md";

fn kustomize(dir: &Path) -> Vec<Value> {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("kubectl is on the PATH");
    assert!(
        out.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    decode_yaml(&String::from_utf8(out.stdout).unwrap())
}

/// `kubectl apply -k deploy/prometheus` gives the Prometheus operator and
/// Grafana what they load: the ServiceMonitor, the rules as a PrometheusRule
/// whose alerts link runbooks under the base runbook-base.yaml sets (and
/// only there: a copy with another base links there), and the dashboard in
/// a ConfigMap the Grafana sidecar picks up.
#[test]
fn should_render_the_operator_objects_with_one_runbook_base() {
    let objs = kustomize(Path::new(DIR));
    let kinds: BTreeSet<&str> = objs.iter().filter_map(|o| o["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        BTreeSet::from(["ConfigMap", "PrometheusRule", "ServiceMonitor"]),
        "the runbook base is local configuration, never applied"
    );
    let dashboard = objs.iter().find(|o| o["kind"] == "ConfigMap").unwrap();
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
    let json = dashboard["data"]["r8s.json"].as_str().unwrap();
    let file = std::fs::read_to_string(Path::new(DIR).join("grafana-dashboard.json")).unwrap();
    assert_eq!(json, file);
    let urls = |objs: &[Value]| -> Vec<String> {
        let rule = objs.iter().find(|o| o["kind"] == "PrometheusRule").unwrap();
        rule["spec"]["groups"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["rules"].as_array().unwrap().iter())
            .filter(|r| r.get("alert").is_some())
            .map(|r| {
                r["annotations"]["runbook_url"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    let shipped = urls(&objs);
    assert!(shipped.len() >= 12);
    assert!(
        shipped
            .iter()
            .all(|u| u.starts_with(&format!("{RUNBOOK_BASE}#"))),
        "{shipped:?}"
    );

    // An operator's base, set in the one place.
    let copy =
        std::env::temp_dir().join(format!("r8s-prometheus-kustomize-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&copy);
    std::fs::create_dir_all(&copy).unwrap();
    for entry in std::fs::read_dir(DIR).unwrap() {
        let p = entry.unwrap().path();
        std::fs::copy(&p, copy.join(p.file_name().unwrap())).unwrap();
    }
    let base_file = copy.join("runbook-base.yaml");
    let text = std::fs::read_to_string(&base_file).unwrap();
    std::fs::write(
        &base_file,
        text.replace(RUNBOOK_BASE, "https://wiki.example/ops/r8s"),
    )
    .unwrap();
    let theirs = urls(&kustomize(&copy));
    assert_eq!(theirs.len(), shipped.len());
    for (a, b) in shipped.iter().zip(&theirs) {
        let anchor = a.split_once('#').unwrap().1;
        assert_eq!(b, &format!("https://wiki.example/ops/r8s#{anchor}"));
    }
    let _ = std::fs::remove_dir_all(&copy);
}

/// Metric names (`r8s_*`, `process_*`) in a text: what a rule or panel asks
/// Prometheus for. Recording rules' own names (`level:metric:ops`) are not
/// r8s's, and are skipped.
fn names_in(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = text.as_bytes();
    let is_name = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b':';
    let mut i = 0;
    while i < bytes.len() {
        if is_name(bytes[i]) && (i == 0 || !is_name(bytes[i - 1])) {
            let start = i;
            while i < bytes.len() && is_name(bytes[i]) {
                i += 1;
            }
            let word = &text[start..i];
            if (word.starts_with("r8s_") || word.starts_with("process_")) && !word.contains(':') {
                out.insert(word.to_string());
            }
        } else {
            i += 1;
        }
    }
    out
}

/// The metric families a Prometheus exposition holds (histograms by their
/// family name, not `_bucket`/`_sum`/`_count`).
fn families(exposition: &str) -> BTreeSet<String> {
    let samples: BTreeSet<&str> = exposition
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap())
        .collect();
    samples
        .iter()
        .map(|s| {
            for suffix in ["_bucket", "_sum", "_count"] {
                if let Some(base) = s.strip_suffix(suffix)
                    && samples.contains(format!("{base}_bucket").as_str())
                {
                    return base.to_string();
                }
            }
            s.to_string()
        })
        .collect()
}

/// The names in the first column of the metrics table of `docs/metrics.md`.
fn readme_table() -> BTreeSet<String> {
    let page = std::fs::read_to_string(concat!(
        concat!(env!("CARGO_MANIFEST_DIR"), "/.."),
        "/docs/metrics.md"
    ))
    .unwrap();
    let section = page
        .split("\n## Metrics")
        .nth(1)
        .expect("docs/metrics.md has a Metrics section");
    let mut names = BTreeSet::new();
    for row in section
        .lines()
        .skip_while(|l| !l.starts_with("| metric"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
    {
        let first = row.split('|').nth(1).unwrap();
        for name in first.split('`').skip(1).step_by(2) {
            names.insert(name.to_string());
        }
    }
    names
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A Prometheus on 127.0.0.1 scraping `target` every second, with
/// r8s-rules.yaml evaluated every second; stopped when dropped.
struct Prometheus {
    child: std::process::Child,
    url: String,
    dir: PathBuf,
}

impl Prometheus {
    fn start(target: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("r8s-prometheus-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {DIR}/r8s-rules.yaml\nscrape_configs:\n  - job_name: r8s\n    static_configs:\n      - targets: [\"{target}\"]\n"
        );
        std::fs::write(dir.join("prometheus.yml"), config).unwrap();
        let port = free_port();
        let log = std::fs::File::create(dir.join("log")).unwrap();
        let child = Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("prometheus is on the PATH (.ci/run installs Debian's prometheus)");
        Prometheus {
            child,
            url: format!("http://127.0.0.1:{port}"),
            dir,
        }
    }

    /// The result vector of an instant query.
    async fn query(&self, q: &str) -> Vec<Value> {
        let enc: String = form_urlencoded::byte_serialize(q.as_bytes()).collect();
        let r = get(&format!("{}/api/v1/query?query={enc}", self.url)).await;
        let v = r.json();
        assert_eq!(v["status"], "success", "{q}: {}", r.text());
        v["data"]["result"].as_array().unwrap().clone()
    }

    /// Waits until `q` has a result.
    async fn wait_for(&self, q: &str, limit: Duration) -> Vec<Value> {
        let guard = HangGuard::new();
        loop {
            let addr = self.url.trim_start_matches("http://");
            if tokio::net::TcpStream::connect(addr).await.is_ok()
                && get(&format!("{}/-/ready", self.url)).await.status == 200
            {
                let v = self.query(q).await;
                if !v.is_empty() {
                    return v;
                }
            }
            guard.check(|| {
                format!(
                    "no result for {q} within {limit:?}; prometheus log: {}",
                    std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
                )
            });
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn value(sample: &Value) -> f64 {
    sample["value"][1].as_str().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn should_record_the_hit_ratio_prometheus_scrapes() {
    // r8s in delegated mode (so the auth series exist too) in front of the sim.
    let files = AuthFiles::write("monitoring", "", Some(""));
    let sim = start_sim(files.sim(sim_config())).await;
    let state = files.dir.join("state");
    // Auditing, so its series exist too.
    let policy = files.dir.join("audit-policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
    )
    .unwrap();
    let audit_log = files.dir.join("audit.log");
    let r8s = r8s_in_front_of(sim.url())
        .caching(&["pods"])
        .with(|c| {
            files.delegate(c);
            // Snapshots and consistency checks, so their series exist too.
            c.persist.dir = Some(state);
            c.persist.interval_seconds = 1;
            c.cache.consistency_check_interval_seconds = 1;
            // Its passes are consistent lists sent upstream.
            c.read.consistent_lists = r8s::config::Prove::Pass;
            c.audit.policy_file = Some(policy);
            c.audit.log_path = Some(audit_log);
        })
        .start()
        .await;
    let auth = [
        ("authorization", "Bearer admin-token"),
        ("accept", "application/json"),
    ];
    let pods = format!("{}/api/v1/pods", r8s.url());
    let (mut hits, mut passes) = (0u32, 0u32);
    let batch = async |hits: &mut u32, passes: &mut u32| {
        for _ in 0..3 {
            let r = send("GET", &format!("{pods}?resourceVersion=0"), &auth, None).await;
            assert_eq!(r.headers["x-r8s-cache"], "hit");
            *hits += 1;
        }
        let r = send("GET", &pods, &auth, None).await;
        assert_eq!(r.headers["x-r8s-cache"], "pass");
        *passes += 1;
    };
    batch(&mut hits, &mut passes).await;

    let prom = Prometheus::start(&r8s.admin.to_string());
    let up = prom
        .wait_for(r#"up{job="r8s"} == 1"#, Duration::from_secs(60))
        .await;
    assert_eq!(up.len(), 1);
    prom.wait_for(
        r#"r8s_cache_requests_total{result="most_recent"}"#,
        Duration::from_secs(30),
    )
    .await;

    // Cached traffic over several scrapes, 3 hits to every pass, and a watch
    // meanwhile (so the watch series exist for the names checked below).
    let watch = tokio::spawn({
        let url =
            format!("{pods}?watch=1&resourceVersion=0&timeoutSeconds=4&allowWatchBookmarks=true");
        async move {
            send(
                "GET",
                &url,
                &[("authorization", "Bearer admin-token")],
                None,
            )
            .await
        }
    });
    let until = Instant::now() + Duration::from_secs(6);
    let mut n = 0;
    while Instant::now() < until {
        batch(&mut hits, &mut passes).await;
        sim.touch("ns-0", "pod-00000", n);
        n += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let watched = watch.await.unwrap();
    assert_eq!(watched.status, 200);
    let sent = f64::from(hits) / f64::from(hits + passes);
    assert!((sent - 0.75).abs() < 1e-9);

    // r8s counted what was sent; Prometheus's recording rule says the same.
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    let counted_hits = sample(
        &m,
        r#"r8s_cache_requests_total{resource="v1/pods",verb="list",result="hit"}"#,
    );
    let counted_passes = sample(
        &m,
        r#"r8s_cache_requests_total{resource="v1/pods",verb="list",result="most_recent"}"#,
    );
    assert_eq!(
        (counted_hits, counted_passes),
        (f64::from(hits), f64::from(passes))
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let ratio = prom
        .wait_for(
            r#"resource_verb:r8s_cache_hit_ratio:rate5m{job="r8s",resource="v1/pods",verb="list"}"#,
            Duration::from_secs(30),
        )
        .await;
    assert_eq!(ratio.len(), 1, "{ratio:?}");
    let recorded = value(&ratio[0]);
    eprintln!("hit ratio: sent {hits} hits, {passes} passes ({sent}); recorded {recorded}");
    assert!(
        (recorded - sent).abs() < 0.02,
        "the recording rule says {recorded}, the test sent {hits} hits and {passes} passes ({sent})"
    );
    let saved = prom
        .query(r#"job:r8s_upstream_requests_saved:rate5m{job="r8s"}"#)
        .await;
    assert!(value(&saved[0]) > 0.0, "{saved:?}");

    // Every rule evaluates against real data without error; nothing fires.
    let rules = get(&format!("{}/api/v1/rules", prom.url)).await.json();
    let mut evaluated = 0;
    for group in rules["data"]["groups"].as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            assert_eq!(rule["health"], "ok", "{rule}");
            if rule["type"] == "alerting" {
                assert_eq!(rule["state"], "inactive", "{rule}");
            }
            evaluated += 1;
        }
    }
    assert!(evaluated >= 18, "{rules}");

    // Names: the rules' and the dashboard's exist; docs/metrics.md lists /metrics exactly.
    // A consistent streaming list (client-go ≥ 1.35's sync), proven from
    // the cache: its series exist too.
    let consistent = send(
        "GET",
        &format!("{pods}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1"),
        &auth,
        None,
    )
    .await;
    assert_eq!(consistent.headers["x-r8s-cache"], "hit");
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    let exported = families(&m);
    let rules_text = std::fs::read_to_string(Path::new(DIR).join("r8s-rules.yaml")).unwrap();
    let dashboard_text =
        std::fs::read_to_string(Path::new(DIR).join("grafana-dashboard.json")).unwrap();
    let dashboard: Value = serde_json::from_str(&dashboard_text).expect("the dashboard is JSON");
    assert!(dashboard["panels"].as_array().unwrap().len() >= 10);
    for (what, text) in [
        ("r8s-rules.yaml", &rules_text),
        ("grafana-dashboard.json", &dashboard_text),
    ] {
        let used = names_in(text);
        assert!(used.len() >= 8, "{what}: {used:?}");
        for name in &used {
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s).filter(|b| exported.contains(*b)))
                .unwrap_or(name);
            assert!(
                exported.contains(family),
                "{what} uses {name}, which r8s does not export"
            );
        }
    }
    // Every family r8s exports says what it is (`# HELP`, from metrics::names).
    for family in exported.iter().filter(|f| f.starts_with("r8s_")) {
        assert!(
            m.contains(&format!("# HELP {family} ")),
            "{family} is exported without a HELP line"
        );
    }
    let table = readme_table();
    let unlisted: Vec<&String> = exported.difference(&table).collect();
    let missing: Vec<&String> = table.difference(&exported).collect();
    assert!(
        unlisted.is_empty(),
        "exported but not in docs/metrics.md's table: {unlisted:?}"
    );
    assert!(
        missing.is_empty(),
        "in docs/metrics.md's table but not exported: {missing:?}"
    );

    drop(prom);
    r8s.stop().await;
    sim.stop().await;
}
