//! An apiserver outage for everyone (issues 29 and 43): the upstream stops
//! answering for 8 s, refusing connections, resetting them, or keeping
//! the open ones silent for good (black-holed) while refusing new ones,
//! behind the fault forwarder. The first write after it heals reaches a
//! client's watch through r8s within 2 s (the probe sees the return within
//! a second and wakes every cache). r8s stays ready; an authorized client's cached reads
//! stay hits (its token and access reviews expire during the outage and
//! are reused, `auth.stale_if_error_seconds`); its watch, opened before,
//! stays open and gets the writes made during and after, one event each;
//! a kube-rs watcher sees no error and ends equal to the upstream; writes
//! fail fast with 503 naming the upstream. Nothing relists.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;
use bytes::Bytes;
use futures_util::StreamExt;
use http::Request;
use http_body_util::{BodyExt, Full};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use r8s::config::Config;
use r8s_sim::SimHandle;
use r8s_sim::fault::{Forwarder, Mode};

/// Beside r8s and admin ([`common::auth::R8S_AND_ADMIN`]).
const USERS: &str = "reader-token,reader,uid-reader,\"readers\"
";

/// The group `readers` may read pods everywhere, nothing else.
const POLICY: &str = r#"{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"group":"readers","namespace":"*","resource":"pods","apiGroup":"*","readonly":true}}
"#;

/// At least this long, and until r8s has reported the upstream down.
const OUTAGE: Duration = Duration::from_secs(8);

struct Env {
    sim: SimHandle,
    fwd: Forwarder,
    r8s: R8s,
}

/// A sim with tokens and an ABAC policy behind a forwarder, and r8s in
/// delegated mode in front of it caching pods. Reviews live 2 s, so the
/// outage outlasts every one of them; the probe asks every second and waits
/// 2 s, so a black hole is seen within 3 s.
async fn setup(name: &str, tweak: impl FnOnce(&mut Config)) -> Env {
    let files = AuthFiles::write(&format!("outage-{name}"), USERS, Some(POLICY));
    let sim = start_sim(files.sim(sim_config())).await;
    let fwd = Forwarder::start(sim.addr).await;
    let r8s = r8s_in_front_of(fwd.url())
        .caching(&["pods"])
        .with(|c| {
            files.delegate(c);
            c.auth.token_ttl_seconds = 2;
            c.auth.decision_ttl_seconds = 2;
            // A review sent on a connection the black hole swallowed gives
            // up after 2 s and reuses the last allowing answer.
            c.auth.review_timeout_seconds = 2.0;
            c.upstream.probe_interval_seconds = 1.0;
            c.upstream.probe_timeout_seconds = 2.0;
        })
        .with(tweak)
        .start()
        .await;
    Env { sim, fwd, r8s }
}

fn as_reader() -> Vec<(&'static str, &'static str)> {
    vec![
        ("accept", "application/json"),
        ("authorization", "Bearer reader-token"),
    ]
}

async fn readyz(r8s: &R8s, query: &str) -> (u16, String) {
    let r = get(&format!("{}/readyz{query}", r8s.admin_url())).await;
    (r.status.as_u16(), r.text())
}

/// The reader's `resourceVersion=0` list of pods through r8s.
async fn cached_list(r8s: &R8s) -> Resp {
    send(
        "GET",
        &format!("{}/api/v1/pods?resourceVersion=0", r8s.url()),
        &as_reader(),
        None,
    )
    .await
}

/// A watch as the reader from `replay.last`, applying each event to
/// `replay`, until `stop_at` is set and reached (or the stream ends).
fn watch_as_reader(
    url: String,
    mut replay: Replay,
    stop_at: Arc<Mutex<u64>>,
    seen: Arc<std::sync::atomic::AtomicU64>,
) -> tokio::task::JoinHandle<(Replay, String)> {
    tokio::spawn(async move {
        let req = Request::get(url)
            .header("authorization", "Bearer reader-token")
            .body(Full::new(Bytes::new()))
            .unwrap();
        let resp = client().request(req).await.expect("the watch opens");
        assert_eq!(resp.status(), 200);
        let served = resp.headers()["x-r8s-cache"].to_str().unwrap().to_string();
        let mut body = resp.into_body();
        let mut buf = Vec::new();
        loop {
            let want = *stop_at.lock().unwrap();
            if want > 0 && replay.last >= want {
                return (replay, served);
            }
            match tokio::time::timeout(Duration::from_millis(500), body.frame()).await {
                Err(_) => continue,
                Ok(None) => return (replay, served),
                Ok(Some(Err(e))) => panic!("the watch broke: {e}"),
                Ok(Some(Ok(f))) => {
                    let Ok(d) = f.into_data() else { continue };
                    buf.extend_from_slice(&d);
                    while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
                        let line: Vec<u8> = buf.drain(..=nl).collect();
                        let e: serde_json::Value = serde_json::from_slice(&line).unwrap();
                        replay.apply(&e, "the reader's watch");
                        assert!(replay.error.is_none(), "an ERROR event: {e}");
                        seen.store(replay.last, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            }
        }
    })
}

/// What a kube-rs reflector (as the reader) saw: its errors, and how many
/// times it (re)listed.
#[derive(Default)]
struct KubeRs {
    errors: Vec<String>,
    inits: usize,
}

async fn kube_rs_reflector(
    url: &str,
) -> (
    Arc<Mutex<KubeRs>>,
    reflector::Store<Pod>,
    tokio::task::JoinHandle<()>,
) {
    let mut config = kube::Config::new(url.parse().unwrap());
    config.headers.push((
        http::header::AUTHORIZATION,
        http::HeaderValue::from_static("Bearer reader-token"),
    ));
    let client = kube::Client::try_from(config).unwrap();
    let api: kube::Api<Pod> = kube::Api::all(client);
    let (reader, writer) = reflector::store();
    let seen = Arc::new(Mutex::new(KubeRs::default()));
    let s = seen.clone();
    let wc = watcher::Config::default().any_semantic();
    let stream = watcher(api, wc).reflect(writer);
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            let mut s = s.lock().unwrap();
            match ev {
                Ok(watcher::Event::Init) => s.inits += 1,
                Ok(_) => {}
                Err(e) => s.errors.push(e.to_string()),
            }
        }
    });
    tokio::time::timeout(HANG, reader.wait_until_ready())
        .await
        .expect("kube-rs synced")
        .unwrap();
    (seen, reader, task)
}

/// The sim's pods at `at` (read from its store: the sim wants credentials).
fn truth(sim: &SimHandle, at: u64) -> std::collections::BTreeMap<String, u64> {
    let (_, objects) = sim
        .sim
        .store
        .snapshot(r8s_sim::resources::pods_idx(), Some(at))
        .expect("within the sim's history");
    objects
        .values()
        .map(|o| (key_of(&o.value()), o.rv))
        .collect()
}

fn state_of(reader: &reflector::Store<Pod>) -> std::collections::BTreeMap<String, u64> {
    reader
        .state()
        .iter()
        .map(|p| {
            let m = &p.metadata;
            (
                format!(
                    "{}/{}",
                    m.namespace.clone().unwrap_or_default(),
                    m.name.clone().unwrap_or_default()
                ),
                m.resource_version.as_ref().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

/// How an outage breaks the upstream.
#[derive(Clone, Copy)]
enum Shape {
    /// Open connections reset, new ones as `Mode` says.
    Broken(Mode),
    /// Open connections silent for good, new ones refused (reset).
    BlackHoled,
}

/// The whole outage, broken as `shape` breaks it.
async fn through_an_outage(name: &str, shape: Shape) {
    let env = setup(name, |_| {}).await;
    let r = &env.r8s;
    let first = cached_list(r).await;
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(first.headers["x-r8s-cache"], "hit");
    let stop_at = Arc::new(Mutex::new(0u64));
    let seen = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let replay = Replay::from_list(&first.json());
    let watch = watch_as_reader(
        format!(
            "{}/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion={}&timeoutSeconds=600",
            r.url(),
            replay.last
        ),
        replay,
        stop_at.clone(),
        seen.clone(),
    );
    let (kube_rs, kube_store, kube_task) = kube_rs_reflector(&r.url()).await;
    let m0 = get(&format!("{}/metrics", r.admin_url())).await.text();

    // The outage.
    match shape {
        Shape::Broken(mode) => {
            env.fwd.set(mode);
            env.fwd.reset_all();
        }
        Shape::BlackHoled => {
            env.fwd.set(Mode::Refuse);
            env.fwd.black_hole_all();
        }
    }
    let cut = Instant::now();
    let guard = HangGuard::new();
    let mut writes = 0;
    let mut reads = 0;
    let mut write_latency = Duration::ZERO;
    let mut verbose_checked = false;
    let wants_write = matches!(shape, Shape::Broken(_));
    while cut.elapsed() < OUTAGE || !verbose_checked || (wants_write && write_latency.is_zero()) {
        let (code, why) = readyz(r, "").await;
        assert_eq!(
            code,
            200,
            "unready {:?} into the outage: {why}",
            cut.elapsed()
        );
        let list = cached_list(r).await;
        assert_eq!(
            (
                list.status.as_u16(),
                list.headers["x-r8s-cache"].to_str().unwrap()
            ),
            (200, "hit"),
            "{:?} into the outage: {}",
            cut.elapsed(),
            list.text()
        );
        reads += 1;
        // Once the probe has seen the outage (a black hole takes its
        // timeout after its interval), /readyz says so and stays 200.
        if !verbose_checked {
            let (code, text) = readyz(r, "?verbose").await;
            assert_eq!(code, 200);
            assert!(text.ends_with("readyz check passed\n"), "{text}");
            verbose_checked = text.contains("[+]upstream not answering /version");
            if !verbose_checked {
                guard.check(|| format!("/readyz?verbose never said the upstream is down: {text}"));
            }
        }
        // A write fails fast, naming the upstream, with Retry-After (a
        // black hole has no such answer: a pooled connection takes it).
        if verbose_checked && write_latency.is_zero() && wants_write {
            let t = Instant::now();
            let w = send(
                "POST",
                &format!("{}/api/v1/namespaces/ns-1/configmaps", r.url()),
                &[
                    ("authorization", "Bearer admin-token"),
                    ("content-type", "application/json"),
                ],
                Some(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"during"}}"#),
            )
            .await;
            // (That it fails at once, not at the 30 s limit, is the answer's
            // shape: a 503 naming the upstream; how soon, a benchmark's.)
            write_latency = t.elapsed();
            assert_eq!(w.status, 503, "{}", w.text());
            assert_eq!(w.headers["retry-after"], "1");
            let status = w.json();
            assert!(
                status["message"]
                    .as_str()
                    .unwrap()
                    .contains(&env.fwd.addr.to_string()),
                "{status}"
            );
        }
        // Writes the upstream takes while r8s cannot hear it.
        if writes < 5 {
            env.sim.touch("ns-1", "pod-00001", writes);
            writes += 1;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(verbose_checked);

    // Recovery: the first write after it reaches the open watch (at once:
    // a reflector waiting in backoff retries at the upstream's return, to
    // the millisecond in the unit test of src/upstream/reflector/backoff.rs);
    // the others follow, one event each.
    env.fwd.set(Mode::Pass);
    let healed = Instant::now();
    env.sim.touch("ns-1", "pod-00001", 5);
    let first_rv = env.sim.sim.store.current_rv();
    eventually(
        "the first write after healing at the watch",
        HANG,
        || async { (seen.load(std::sync::atomic::Ordering::Relaxed) >= first_rv).then_some(()) },
    )
    .await;
    let first_write = healed.elapsed();
    for n in 6..10 {
        env.sim.touch("ns-1", "pod-00001", n);
    }
    let want = env.sim.sim.store.current_rv();
    *stop_at.lock().unwrap() = want;
    let (replay, served) = tokio::time::timeout(HANG, watch)
        .await
        .expect("the watch never got every write after recovery (hung)")
        .unwrap();
    let caught_up = healed.elapsed();
    assert_eq!(served, "hit");
    assert!(replay.last >= want, "{} < {want}", replay.last);
    assert_eq!(replay.events, 10, "every write, one event each (no relist)");
    assert_eq!(replay.state, truth(&env.sim, replay.last));

    // kube-rs: no error, one init (no relist of its own), and the sim's state.
    let sim_state = truth(&env.sim, want);
    eventually("kube-rs's store equal to the upstream's", HANG, || async {
        (state_of(&kube_store) == sim_state).then_some(())
    })
    .await;
    kube_task.abort();
    {
        let k = kube_rs.lock().unwrap();
        assert!(k.errors.is_empty(), "kube-rs saw errors: {:?}", k.errors);
        assert_eq!(k.inits, 1, "kube-rs relisted");
    }
    let m1 = get(&format!("{}/metrics", r.admin_url())).await.text();
    let delta = |s: &str| sample(&m1, s) - sample(&m0, s);
    // Both tests of this file run at once on v1/pods: neither relists.
    for reason in ["expired", "malformed"] {
        assert_eq!(
            delta(&format!(
                "r8s_reflector_relists_total{{resource=\"v1/pods\",encoding=\"json\",reason=\"{reason}\"}}"
            )),
            0.0,
            "relisted ({reason})"
        );
    }
    let stale = (
        delta("r8s_auth_stale_decisions_total{kind=\"token\"}"),
        delta("r8s_auth_stale_decisions_total{kind=\"access\"}"),
    );
    assert!(stale.0 >= 1.0 && stale.1 >= 1.0, "{stale:?}");
    println!(
        "{name}: {OUTAGE:?} outage; {reads} cached reads, all hits, /readyz 200 throughout; a write answered 503 in {write_latency:?} (0: not tried); the first write after healing reached the open watch {first_write:?} later, all 10 writes {caught_up:?} after healing, one event each; kube-rs: no error, 1 init; relists 0; reviews reused (token, access): {stale:?}"
    );
    env.r8s.stop().await;
    env.sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_serve_through_an_upstream_that_refuses_connections() {
    through_an_outage("refused", Shape::Broken(Mode::Closed)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_serve_through_an_upstream_that_resets_connections() {
    through_an_outage("reset", Shape::Broken(Mode::Refuse)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_serve_through_an_upstream_that_black_holes_its_connections() {
    through_an_outage("black-holed", Shape::BlackHoled).await;
}

/// Issue 43: a black-holed upstream watch while the upstream answers new
/// connections. The probe's pooled connection is in the same hole: it
/// times out, the next probe (a new connection) answers, and that return
/// restarts every watch quiet since before the hole from its version.
#[tokio::test(flavor = "multi_thread")]
async fn should_replace_a_black_holed_watch_while_the_upstream_answers() {
    let sim = start_sim(sim_config()).await;
    let fwd = Forwarder::start(sim.addr).await;
    // The probe asks every second and gives up after 2 s.
    let r = r8s_in_front_of(fwd.url())
        .caching(&["pods"])
        .with(|c| {
            c.upstream.probe_interval_seconds = 1.0;
            c.upstream.probe_timeout_seconds = 2.0;
        })
        .start()
        .await;
    let list = get(&format!("{}/api/v1/pods?resourceVersion=0", r.url())).await;
    assert_eq!(list.headers["x-r8s-cache"], "hit");
    let replay = Replay::from_list(&list.json());
    let (seen, task) = follow(
        format!(
            "{}/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion={}&timeoutSeconds=600",
            r.url(),
            replay.last
        ),
        replay,
        "client".into(),
    );
    let m0 = get(&format!("{}/metrics", r.admin_url())).await.text();
    fwd.black_hole_all();
    let holed = Instant::now();
    sim.touch("ns-1", "pod-00001", 1);
    let want = sim.sim.store.current_rv();
    eventually(
        "the write at the client (the black-holed watch replaced)",
        HANG,
        || async { (seen.lock().unwrap().last >= want).then_some(()) },
    )
    .await;
    let replaced = holed.elapsed();
    let m1 = get(&format!("{}/metrics", r.admin_url())).await.text();
    for reason in ["expired", "malformed", "diverged"] {
        let series = format!(
            "r8s_reflector_relists_total{{resource=\"v1/pods\",encoding=\"json\",reason=\"{reason}\"}}"
        );
        assert_eq!(
            sample(&m1, &series),
            sample(&m0, &series),
            "relisted ({reason})"
        );
    }
    {
        let s = seen.lock().unwrap();
        assert!(s.error.is_none(), "{:?}", s.error);
        assert_eq!(s.state, truth(&sim, s.last));
    }
    println!("a black-holed watch replaced, the write delivered {replaced:?} after the hole");
    task.abort();
    r.stop().await;
    sim.stop().await;
}
