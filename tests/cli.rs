//! The `r8s` binary as an operator meets it: exit codes and messages for bad
//! configuration, `config check`, SIGTERM draining, and the demo's commands.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;

const BIN: &str = env!("CARGO_BIN_EXE_r8s");

fn run(args: &[&str]) -> (i32, String, String) {
    // From the repository's top, as a user runs it (paths like config/r8s.toml).
    let o = Command::new(BIN)
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .env_remove("R8S_CONFIG")
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn tmp(name: &str, content: &str) -> String {
    let dir = std::env::temp_dir().join(format!("r8s-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p.display().to_string()
}

#[test]
fn should_exit_2_naming_the_problem_on_bad_configuration() {
    let cases: Vec<(Vec<String>, Vec<&str>)> = vec![
        (
            vec![
                "serve".into(),
                "--config".into(),
                "/nonexistent/r8s.toml".into(),
            ],
            vec!["/nonexistent/r8s.toml"],
        ),
        (
            vec![
                "serve".into(),
                "--config".into(),
                tmp("unknown.toml", "upstrem = 1\n"),
            ],
            vec!["unknown key \"upstrem\"", "unknown.toml"],
        ),
        (
            vec![
                "serve".into(),
                "--config".into(),
                tmp("badval.toml", "listen = \"nope\"\n"),
            ],
            vec!["\"listen\"", "nope", "badval.toml"],
        ),
        (
            vec!["serve".into(), "--listen".into(), "not-an-address".into()],
            vec!["listen", "not-an-address"],
        ),
        (
            vec![
                "serve".into(),
                "--kubeconfig".into(),
                "/nonexistent/kubeconfig".into(),
            ],
            vec!["kubeconfig", "/nonexistent/kubeconfig"],
        ),
        (
            vec!["serve".into(), "--upstream".into(), "ftp://x".into()],
            vec!["upstream.servers", "ftp://x"],
        ),
        (
            vec![
                "serve".into(),
                "--cache".into(),
                "apps/x/deployments".into(),
            ],
            vec!["cache.resources", "apps/x/deployments"],
        ),
        (
            vec![
                "config".into(),
                "check".into(),
                "--config".into(),
                tmp("badcache.toml", "[cache]\nresources = [\"Pods\"]\n"),
            ],
            vec!["cache.resources", "Pods", "badcache.toml"],
        ),
        (
            vec![
                "config".into(),
                "check".into(),
                "--config".into(),
                tmp(
                    "badindex.toml",
                    "[cache]\nindexes = { configmaps = [\"spec.nodeName\"] }\n",
                ),
            ],
            vec![
                "cache.indexes.configmaps",
                "\"spec.nodeName\"",
                "metadata.name",
                "badindex.toml",
            ],
        ),
        (
            vec![
                "serve".into(),
                "--config".into(),
                tmp(
                    "authnone.toml",
                    "listen = \"0.0.0.0:0\"\n[auth]\nmode = \"none\"\n",
                ),
            ],
            vec!["auth.mode", "loopback", "0.0.0.0:0", "authnone.toml"],
        ),
        (
            vec![
                "serve".into(),
                "--config".into(),
                tmp("tlshalf.toml", "[tls]\ncert_file = \"/etc/r8s/tls.crt\"\n"),
            ],
            vec!["tls.key_file", "tlshalf.toml"],
        ),
    ];
    for (args, needles) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _, err) = run(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        for n in needles {
            assert!(err.contains(n), "{args:?}: {err:?} should mention {n:?}");
        }
    }
}

#[test]
fn should_check_and_print_the_effective_configuration() {
    let (code, out, err) = run(&[
        "config",
        "check",
        "--config",
        "config/r8s.toml",
        "--listen",
        "127.0.0.1:9999",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("listen = \"127.0.0.1:9999\""), "{out}");
    assert!(out.contains("[upstream]"), "{out}");
    let (code, out, _) = run(&["--version"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("r8s "));
    let (code, out, _) = run(&["serve", "--help"]);
    assert_eq!(code, 0);
    for flag in [
        "--config",
        "--listen",
        "--admin-listen",
        "--upstream",
        "--kubeconfig",
        "--cache",
    ] {
        assert!(out.contains(flag), "{flag} is explained: {out}");
    }
    let (_, out, _) = run(&["sim", "--help"]);
    for flag in [
        "--listen",
        "--pods",
        "--namespaces",
        "--churn",
        "--history",
        "--tokens",
    ] {
        assert!(out.contains(flag), "{flag} is explained: {out}");
    }
}

/// Reads stderr lines until one contains `needle`; returns it.
fn wait_line(r: &mut impl BufRead, needle: &str) -> String {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            r.read_line(&mut line).unwrap() > 0,
            "process ended before printing {needle:?}"
        );
        if line.contains(needle) {
            return line;
        }
    }
}

/// Starts `r8s ARGS` logging at `log`, and reads its stderr up to the
/// "r8s serving" line: the child, the rest of its stderr, its API address.
fn serve_child(
    args: &[&str],
    log: &str,
) -> (
    std::process::Child,
    BufReader<std::process::ChildStderr>,
    String,
) {
    let mut child = Command::new(BIN)
        .args(args)
        .env("RUST_LOG", log)
        .env_remove("R8S_CONFIG")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let line = wait_line(&mut err, "r8s serving");
    let api = line
        .split("api=")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    (child, err, api)
}

#[test]
fn should_warn_when_serving_without_auth_on_loopback() {
    let config = tmp(
        "authnone-loopback.toml",
        "listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\n[auth]\nmode = \"none\"\n[upstream]\nservers = [\"http://127.0.0.1:9\"]\n",
    );
    // It serves (the listener line comes first), and warns.
    let (mut child, mut err, _) = serve_child(&["serve", "--config", &config], "info");
    let line = wait_line(&mut err, "auth.mode = \"none\"");
    assert!(line.contains("WARN"), "{line}");
    child.kill().unwrap();
    let _ = child.wait();
}

#[tokio::test(flavor = "multi_thread")]
async fn should_never_log_tokens() {
    let tokens = tmp(
        "log-tokens.csv",
        "r8s-own-token-5f2a,r8s,uid-r8s,\"system:masters\"\nalice-token-77c1,alice,uid-alice,\n",
    );
    let own = tmp("log-own-token", "r8s-own-token-5f2a");
    let sim = start_sim(r8s_sim::SimConfig {
        tokens: Some(tokens.into()),
        ..sim_config()
    })
    .await;
    let config = tmp(
        "log-tokens.toml",
        &format!(
            "listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\n[upstream]\nservers = [\"{}\"]\ntoken_file = \"{own}\"\n[cache]\nresources = [\"pods\"]\n[auth]\nmode = \"delegated\"\n",
            sim.url()
        ),
    );
    let (mut child, mut err, api) = serve_child(&["serve", "--config", &config], "debug");
    let rest = std::thread::spawn(move || {
        let mut all = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut all);
        all
    });
    let base = format!("http://{api}");
    for (token, path) in [
        (
            "alice-token-77c1",
            "/api/v1/namespaces/ns-1/pods?resourceVersion=0",
        ),
        ("alice-token-77c1", "/api/v1/secrets"),
        (
            "wrong-token-9d3e",
            "/api/v1/namespaces/ns-1/pods?resourceVersion=0",
        ),
    ] {
        let auth = format!("Bearer {token}");
        let mut tries = 0;
        loop {
            let r = send(
                "GET",
                &format!("{base}{path}"),
                &[("authorization", &auth)],
                None,
            )
            .await;
            // Until the cache has synced a cached read may still be a pass; either way it is answered.
            if r.status != 503 || tries > 50 {
                break;
            }
            tries += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    child.kill().unwrap();
    let _ = child.wait();
    let logs = rest.join().unwrap();
    assert!(
        logs.contains("DEBUG") || logs.contains("INFO"),
        "no logs captured"
    );
    for secret in ["r8s-own-token-5f2a", "alice-token-77c1", "wrong-token-9d3e"] {
        assert!(!logs.contains(secret), "a token is in the logs: {secret}");
    }
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_drain_and_exit_0_on_sigterm() {
    let mut cfg = sim_config();
    cfg.future_rv_wait = Duration::from_secs(10);
    let sim = start_sim(cfg).await;
    let (mut child, _stderr, api) = serve_child(
        &[
            "serve",
            "--upstream",
            &sim.url(),
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
        ],
        "info",
    );
    let base = format!("http://{api}");
    assert_eq!(get(&format!("{base}/version")).await.status, 200);

    // A watch and a slow request (the sim waits 10 s before its 504) in flight.
    let rv = sim.sim.store.current_rv();
    let (wu, su) = (
        format!("{base}/api/v1/pods?watch=1&resourceVersion={rv}"),
        format!("{base}/api/v1/pods?resourceVersion={}", rv + 100),
    );
    let watch = tokio::spawn(async move { send("GET", &wu, &[], None).await });
    let slow = tokio::spawn(async move { send("GET", &su, &[], None).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );

    let w = watch.await.unwrap();
    assert_eq!(w.status, 200);
    assert!(
        !slow.is_finished(),
        "the watch is closed at shutdown, not when the drain ends"
    );
    let s = slow.await.unwrap();
    assert_eq!(
        s.status, 504,
        "the in-flight request finished with the upstream's answer"
    );
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert_eq!(status.code(), Some(0));
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_run_the_demo_and_every_printed_command_works() {
    let mut child = Command::new(BIN)
        .args([
            "demo",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--pods",
            "30",
            "--churn",
            "5",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut commands = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "demo output ended early"
        );
        let t = line.trim();
        if let Some(c) = t.strip_prefix("Straight to the upstream, for comparison: ") {
            commands.push(c.to_string());
        } else if t.starts_with("kubectl ") || t.starts_with("curl ") {
            commands.push(t.to_string());
        }
        if t.starts_with("Stop with") {
            break;
        }
    }
    assert!(commands.len() >= 6, "{commands:?}");
    let home = std::env::temp_dir().join(format!("r8s-demo-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("kubeconfig"), "apiVersion: v1\nkind: Config\n").unwrap();
    for c in &commands {
        let o = tokio::process::Command::new("timeout")
            .args(["8", "sh", "-c", c])
            .env("HOME", &home)
            .env("KUBECONFIG", home.join("kubeconfig"))
            .output()
            .await
            .unwrap();
        let code = o.status.code().unwrap_or(-1);
        let stdout = String::from_utf8_lossy(&o.stdout);
        let watching = c.contains(" -w");
        assert!(
            code == 0 || (watching && code == 124),
            "{c}: exit {code}\n{stdout}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(!stdout.trim().is_empty(), "{c} printed nothing");
    }
    // The kubectl commands through r8s were answered from its cache, as the
    // demo says: every list of pods a hit (kubectl's, at least one for each of
    // its three commands, and curl's two), none passed.
    let metrics = commands
        .iter()
        .find(|c| c.contains("/metrics"))
        .expect("the demo prints its metrics command");
    let url = metrics.split_whitespace().nth(2).unwrap();
    let m = get(url).await.text();
    let lists = |result: &str| {
        metric(
            &m,
            &format!(
                r#"r8s_cache_requests_total{{resource="v1/pods",verb="list",result="{result}"}}"#
            ),
        )
        .unwrap_or(0.0)
    };
    assert!(lists("hit") >= 5.0, "{m}");
    // And the watches: kubectl's of Tables and curl's streaming list (curl's
    // watch from "now", with no resourceVersion, is the upstream's).
    let watches = |result: &str| {
        metric(
            &m,
            &format!(
                r#"r8s_cache_requests_total{{resource="v1/pods",verb="watch",result="{result}"}}"#
            ),
        )
        .unwrap_or(0.0)
    };
    assert_eq!(watches("hit"), 2.0, "{m}");
    assert_eq!(watches("most_recent"), 1.0, "{m}");
    let passed: Vec<&str> = m
        .lines()
        .filter(|l| {
            (l.contains(r#"resource="v1/pods",verb="list""#) && !l.contains("result=\"hit\""))
                || (l.contains(r#"resource="v1/pods",verb="watch""#)
                    && !l.contains("result=\"hit\"")
                    && !l.contains("result=\"most_recent\""))
        })
        .filter(|l| !l.ends_with(" 0"))
        .collect();
    assert!(passed.is_empty(), "{passed:?}");
    assert_eq!(
        metric(
            &m,
            r#"r8s_cache_requests_total{resource="apps/v1/deployments",verb="list",result="hit"}"#
        ),
        Some(1.0),
        "kubectl get deploy, printed by r8s"
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// The README's second command runs the whole suite on a fresh machine: it is
/// `tests/run`, which installs every tool a test expects to find on the PATH
/// (the tests name each in their `expect`) and cargo-nextest before `cargo
/// nextest run --no-fail-fast`, and `.ci/run` runs that same script; the
/// minimum Rust version is stated.
#[test]
fn should_run_the_whole_suite_with_one_command_that_gets_its_tools() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let read = |p: &str| std::fs::read_to_string(format!("{root}/{p}")).unwrap();
    let readme = read("README.md");
    let quick = readme
        .split("## Quick start")
        .nth(1)
        .and_then(|s| s.split("```sh").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("README has a Quick start code block");
    let commands: Vec<&str> = quick
        .lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(commands, ["cargo run --release -- demo", "tests/run"]);

    let script = read("tests/run");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(format!("{root}/tests/run"))
        .unwrap()
        .permissions()
        .mode();
    assert!(mode & 0o111 != 0, "tests/run is executable");
    assert!(
        script.lines().any(|l| l
            .trim()
            .starts_with("exec cargo nextest run --workspace --locked --no-fail-fast")),
        "every test runs, whichever fails, the sim's unit tests too: {script}"
    );
    assert!(
        script.contains("cargo install --locked cargo-nextest"),
        "it installs its runner where it is missing: {script}"
    );
    assert!(
        read(".ci/run")
            .lines()
            .any(|l| l.trim() == "exec tests/run"),
        ".ci/run runs the README's command"
    );
    let mut tools = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(format!("{root}/tests")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            for (_, rest) in text
                .match_indices("expect(\"")
                .map(|(i, _)| text.split_at(i + 8))
            {
                if let Some((tool, _)) = rest.split_once(" is on the PATH")
                    && tool.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                {
                    tools.insert(tool.to_string());
                }
            }
        }
    }
    assert!(
        tools.contains("promtool") && tools.contains("curl"),
        "{tools:?}"
    );
    for tool in tools {
        let installs = script.contains(&format!("need {tool} ||"))
            || script.contains(&format!("need {tool} &&"));
        let checked = script.contains(&format!("if ! need {tool}; then"));
        assert!(
            installs || (tool == "kubectl" && checked),
            "tests/run gets {tool} before the tests that need it"
        );
    }
    let manifest = read("Cargo.toml");
    let msrv = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("Cargo.toml states rust-version");
    assert!(
        readme.contains(&format!("Rust {msrv}")),
        "the README states the minimum Rust version ({msrv})"
    );
    let syntax = Command::new("bash")
        .args(["-n", &format!("{root}/tests/run")])
        .status()
        .unwrap();
    assert!(syntax.success(), "tests/run parses");
}
