//! Fuzz targets: every parser r8s runs on bytes it does not control, fed
//! inputs mutated from real ones. A target must never panic, whatever it
//! is given. Stable Rust (no nightly, so no libFuzzer): a mutation loop over
//! seeds taken from the built-in upstream, with dictionaries of the tokens
//! each grammar cares about.
//!
//! The test suite runs a short round of each (`tests/fuzz.rs`); `cargo
//! bench --bench fuzz` runs 10 million inputs of each (BENCHMARKS.md). Here,
//! in the sim's crate, because both start from the sim's answers ([`seeded`]),
//! and a module shared by a test and a benchmark is compiled once.

mod identity;
mod target;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Method, Uri};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use r8s::api::continue_token::{ContinueToken, Format};
use r8s::api::media::{self, Encoding, Offer};
use r8s::api::request::{ApiRequest, Verb};
use r8s::api::selector::{FieldSelector, LabelSelector, supported_fields};
use r8s::auth::review::{Attributes, access_spec};
use r8s::cache::object::{Objects, TypeInfo};
use r8s::persist::format::{self, Header, Identity};
use r8s::persist::log::{self as change_log, Entry, LogHeader};
use r8s::persist::{read_objects, replay_log};
use r8s::upstream::decode::Decoder;
use tokio::net::TcpListener;

use crate::{SimConfig, SimHandle};

pub use target::Target;
use target::toks;

/// What a run of one target found.
#[derive(Debug)]
pub struct Report {
    /// The target.
    pub name: &'static str,
    /// Inputs run.
    pub inputs: u64,
    /// Inputs that panicked.
    pub panics: u64,
    /// The first of them, and its panic message.
    pub first: Option<(Vec<u8>, String)>,
    /// Wall time.
    pub elapsed: Duration,
}

fn pods() -> TypeInfo {
    TypeInfo {
        kind: "Pod".into(),
        api_version: "v1".into(),
        resource: "pods".into(),
        items_typed: false,
        drop_managed_fields: false,
        fields: r8s::api::selector::supported_fields("pods"),
    }
}

fn decoder(encoding: Encoding) -> Decoder {
    Decoder {
        info: pods(),
        encoding,
    }
}

/// The request corridor: path router, query, ListOptions (selectors,
/// resource versions, limits), Accept; input `METHOD\0URI\0ACCEPT`.
fn request(input: &[u8]) {
    let mut parts = input.splitn(3, |b| *b == 0);
    let method = parts.next().unwrap_or_default();
    let uri = parts.next().unwrap_or_default();
    let accept = parts.next().unwrap_or_default();
    let Ok(method) = Method::from_bytes(method) else {
        return;
    };
    let Ok(uri) = Uri::try_from(uri) else {
        return; // hyper refuses it before r8s sees it
    };
    let mut headers = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_bytes(accept) {
        headers.insert(http::header::ACCEPT, v);
    }
    if let Some(ar) = ApiRequest::parse(&method, &uri, &headers) {
        let _ = ar.encoding();
        let _ = ar.resource_label();
        let _ = ar.scope.namespace.len();
        if let Ok(o) = &ar.options {
            let _ = o.validate();
            let _ = o.rv_match();
        }
    }
}

/// A request's scope, as r8s authorizes it and bounds its cached answer:
/// input `METHOD\0TARGET\0AUTHORIZATION\0ACCEPT`. Never a panic, and a
/// request whose scope names an object can only be answered with that
/// object (`ApiRequest::confined`); a list or watch naming one selects it.
fn scope(input: &[u8]) {
    let mut parts = input.splitn(4, |b| *b == 0);
    let method = parts.next().unwrap_or_default();
    let uri = parts.next().unwrap_or_default();
    let authorization = parts.next().unwrap_or_default();
    let accept = parts.next().unwrap_or_default();
    let (Ok(method), Ok(uri)) = (Method::from_bytes(method), Uri::try_from(uri)) else {
        return;
    };
    let mut headers = HeaderMap::new();
    for (name, v) in [
        (http::header::AUTHORIZATION, authorization),
        (http::header::ACCEPT, accept),
    ] {
        if let Ok(v) = HeaderValue::from_bytes(v) {
            headers.insert(name, v);
        }
    }
    let _ = r8s::auth::bearer_token(&headers);
    let Some(ar) = ApiRequest::parse(&method, &uri, &headers) else {
        return;
    };
    // Not confined: only where the options do not decode, which the cache
    // never answers (it passes them as `invalid`).
    let undecoded = ar.options.as_ref().map_or(true, |o| o.selectors.is_err());
    assert!(
        ar.confined() || undecoded,
        "{method} {uri}: a named scope that could serve another name"
    );
    if !ar.scope.name.is_empty() {
        let named = ar.path.name.as_deref() == Some(ar.scope.name.as_str())
            || (ar.path.name.is_none() && matches!(ar.verb, Verb::List | Verb::Watch));
        assert!(named, "{method} {uri}: scope names {:?}", ar.scope.name);
    }
    let user = r8s::api::UserInfo::anonymous();
    let spec = access_spec(&user, &Attributes::of(&ar));
    // What the cache serves, it authorizes with RequestInfo's own verb.
    if matches!(ar.verb, Verb::Get | Verb::List | Verb::Watch) {
        assert_eq!(spec["resourceAttributes"]["verb"], ar.verb.as_str());
    }
}

fn label_selector(input: &[u8]) {
    let s = String::from_utf8_lossy(input);
    if let Ok(sel) = LabelSelector::parse(&s) {
        let _ = sel.matches(|k| match k {
            "app" => Some("web"),
            "tier" => Some(""),
            _ => None,
        });
    }
}

fn field_selector(input: &[u8]) {
    let s = String::from_utf8_lossy(input);
    let _ = FieldSelector::parse_syntax(&s);
    if let Ok(sel) = FieldSelector::parse(&s, supported_fields("pods")) {
        let _ = sel.exact("metadata.name");
        let _ = sel.matches_str(|f| if f == "spec.nodeName" { "node-1" } else { "" });
    }
}

fn continue_token(input: &[u8]) {
    let s = String::from_utf8_lossy(input);
    for format in [Format::APISERVER, Format::R8S] {
        match ContinueToken::decode(&s, format) {
            Ok(t) => {
                let again = t.encode(format);
                let _ = ContinueToken::decode(&again, format);
            }
            Err(e) => {
                let _ = e.is_foreign();
            }
        }
    }
}

fn accept(input: &[u8]) {
    let s = String::from_utf8_lossy(input);
    for offer in [Offer::Builtin, Offer::Custom] {
        let _ = media::negotiate(Some(&s), offer);
    }
}

fn json_object(input: &[u8]) {
    if let Ok(o) = pods().parse(input) {
        let _ = (
            o.name(),
            o.namespace(),
            o.label("app"),
            o.field("spec.nodeName"),
        );
        let _ = o.metadata_body();
        let _ = o.watch_event("MODIFIED", true);
    }
    // The same bytes as a custom resource's, whose selectable fields are
    // found by path (a pod's own among them).
    let widgets = r8s::api::ApiResource {
        gvr: r8s::api::Gvr::from_static("example.com", "v1", "widgets"),
        kind: "Widget".into(),
        namespaced: true,
        selectable: r8s::api::gvr::intern_fields(
            ["spec.nodeName", "status.phase", "spec.a.b"].into_iter(),
        ),
    };
    if let Ok(o) = TypeInfo::of(&widgets, Encoding::Json).parse(input) {
        let _ = (
            o.field("spec.nodeName"),
            o.field("status.phase"),
            o.field("spec.a.b"),
        );
    }
}

fn protobuf_object(input: &[u8]) {
    for enveloped in [true, false] {
        if let Ok(o) = pods().parse_protobuf(input, enveloped) {
            let _ = (
                o.name(),
                o.namespace(),
                o.label("app"),
                o.field("status.phase"),
            );
            let _ = o.metadata_body();
            let _ = o.watch_event("ADDED", true);
        }
    }
}

fn watch_stream(encoding: Encoding, input: &[u8]) {
    let d = decoder(encoding);
    // Fed in two pieces, as frames arrive.
    let cut = input.len() / 3;
    let mut buf = BytesMut::from(&input[..cut]);
    for more in [&input[cut..], &[][..]] {
        while let Some(unit) = r8s::upstream::client::next_unit(encoding, &mut buf) {
            let _ = d.event(&unit, true);
        }
        buf.extend_from_slice(more);
    }
}

fn watch_json(input: &[u8]) {
    watch_stream(Encoding::Json, input);
}

fn watch_protobuf(input: &[u8]) {
    watch_stream(Encoding::Protobuf, input);
}

fn list_page(encoding: Encoding, input: &[u8]) {
    let mut d = decoder(encoding);
    let mut objects = Objects::new();
    let mut first = true;
    let _ = d.page(input, &mut objects, &mut first);
}

fn list_json(input: &[u8]) {
    list_page(Encoding::Json, input);
}

fn list_protobuf(input: &[u8]) {
    list_page(Encoding::Protobuf, input);
}

/// What the snapshot seeds are of (the reader refuses any other identity).
fn snapshot_identity(encoding: &str) -> Identity {
    Identity {
        scope: Default::default(),
        upstream: "servers=http://127.0.0.1:1;ca=none".into(),
        resource: "v1/pods".into(),
        kind: "Pod".into(),
        api_version: "v1".into(),
        encoding: encoding.into(),
        managed_fields_dropped: false,
    }
}

/// A snapshot of the objects of a LIST page, as r8s writes one.
fn snapshot_seed(page: &[u8], encoding: Encoding) -> Vec<u8> {
    let mut d = decoder(encoding);
    let mut objects = Objects::new();
    let mut first = true;
    let (rv, _) = d.page(page, &mut objects, &mut first).expect("a seed page");
    let name = if encoding == Encoding::Json {
        "json"
    } else {
        "protobuf"
    };
    let header = Header {
        identity: snapshot_identity(name),
        resource_version: rv.parse().unwrap(),
        written_unix_ms: 1,
        written_by: "fuzz".into(),
    };
    let mut out = Vec::new();
    format::write(
        &mut out,
        &header,
        (encoding == Encoding::Protobuf).then_some(&b"\x0a\x00"[..]),
        || objects.values().map(|o| (&*o.key, o.rv, &o.body[..])),
    )
    .unwrap();
    out
}

/// A change log of the objects of a LIST page, as r8s appends one: a group
/// of puts and a delete, then a mark.
fn log_seed(page: &[u8], encoding: Encoding) -> Vec<u8> {
    let mut d = decoder(encoding);
    let mut objects = Objects::new();
    let mut first = true;
    let (rv, _) = d.page(page, &mut objects, &mut first).expect("a seed page");
    let rv: u64 = rv.parse().unwrap();
    let name = if encoding == Encoding::Json {
        "json"
    } else {
        "protobuf"
    };
    let header = LogHeader {
        identity: snapshot_identity(name),
        base: 0,
        created_unix_ms: 1,
    };
    let mut out = Vec::new();
    change_log::write_header(&mut out, &header).unwrap();
    let mut at = 0;
    for o in objects.values() {
        at = at.max(o.rv);
        change_log::encode(
            &mut out,
            &Entry::Put {
                key: &o.key,
                rv: o.rv.max(1),
                body: &o.body,
            },
        )
        .unwrap();
    }
    let last = rv.max(at) + 1;
    change_log::encode(
        &mut out,
        &Entry::Delete {
            key: "ns-1/gone",
            rv: last,
        },
    )
    .unwrap();
    change_log::encode(
        &mut out,
        &Entry::Mark {
            rv: last,
            unix_ms: 2,
        },
    )
    .unwrap();
    out
}

/// Makes every checksum of a log right (the header's and each record's
/// whose length fits), so that mutations reach what the records say.
fn fix_log_checksums(bytes: &mut [u8]) {
    if bytes.len() < 16 {
        return;
    }
    let head_end = 16 + u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    if bytes.len() < head_end + 4 {
        return;
    }
    let mut crc = flate2::Crc::new();
    crc.update(&bytes[..head_end]);
    bytes[head_end..head_end + 4].copy_from_slice(&crc.sum().to_le_bytes());
    let mut at = head_end + 4;
    while at + 8 <= bytes.len() {
        let n = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        if at + 8 + n > bytes.len() {
            return;
        }
        let mut crc = flate2::Crc::new();
        crc.update(&bytes[at + 8..at + 8 + n]);
        bytes[at + 4..at + 8].copy_from_slice(&crc.sum().to_le_bytes());
        at += 8 + n;
    }
}

/// The change log's reader and replay (`persist.dir`'s logs are input from
/// disk): as given, and with its checksums made right.
fn change_log(input: &[u8]) {
    let mut fixed = input.to_vec();
    fix_log_checksums(&mut fixed);
    for bytes in [input, &fixed[..]] {
        for encoding in ["json", "protobuf"] {
            let _ = replay_log(
                bytes,
                &snapshot_identity(encoding),
                &pods(),
                Objects::new(),
                0,
            );
        }
    }
}

/// The snapshot reader (`persist.dir`'s files are input from disk): as
/// given, and with its checksum made right, so mutations reach the records.
fn snapshot(input: &[u8]) {
    let mut fixed = input.to_vec();
    if fixed.len() >= 4 {
        let body = fixed.len() - 4;
        let mut crc = flate2::Crc::new();
        crc.update(&fixed[..body]);
        fixed[body..].copy_from_slice(&crc.sum().to_le_bytes());
    }
    for bytes in [input, &fixed[..]] {
        for encoding in ["json", "protobuf"] {
            let _ = read_objects(
                std::io::Cursor::new(bytes),
                bytes.len() as u64,
                &snapshot_identity(encoding),
                &pods(),
            );
        }
    }
}

/// A sim with a few pods, one of them written three times (so that its
/// watches replay events), and the targets seeded from its answers.
pub async fn seeded() -> (SimHandle, Vec<Target>) {
    let config = SimConfig {
        pods: 40,
        namespaces: 3,
        ..SimConfig::default()
    };
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("fuzz: a port on 127.0.0.1");
    let sim = crate::start(config, listener)
        .await
        .expect("fuzz: the sim starts");
    let before = sim.sim.store.current_rv();
    for n in 0..3 {
        sim.touch("ns-1", "pod-00001", n);
    }
    let targets = targets(&sim.url(), before).await;
    (sim, targets)
}

/// Seeds fetched from the built-in upstream at `sim` (which must have had a
/// few writes, so its watches replay events).
async fn targets(sim: &str, rv_before_writes: u64) -> Vec<Target> {
    const PB: &str = "application/vnd.kubernetes.protobuf";
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let fetch = |path: String, accept: &'static str| {
        let client = client.clone();
        let url = format!("{sim}{path}");
        async move {
            let req = http::Request::get(&url)
                .header("accept", accept)
                .body(Empty::new())
                .expect("fuzz: a seed request");
            let resp = client
                .request(req)
                .await
                .unwrap_or_else(|e| panic!("GET {url}: {e}"));
            assert_eq!(resp.status(), 200, "GET {url}");
            resp.into_body()
                .collect()
                .await
                .unwrap_or_else(|e| panic!("GET {url}: {e}"))
                .to_bytes()
                .to_vec()
        }
    };
    let pod = "/api/v1/namespaces/ns-1/pods/pod-00001".to_string();
    let page = "/api/v1/pods?limit=3".to_string();
    let watch = format!(
        "/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion={rv_before_writes}&timeoutSeconds=1"
    );
    let pod_json = fetch(pod.clone(), "application/json").await;
    let pod_pb = fetch(pod, PB).await;
    let page_json = fetch(page.clone(), "application/json").await;
    let page_pb = fetch(page, PB).await;
    let snapshots = vec![
        snapshot_seed(&page_json, Encoding::Json),
        snapshot_seed(&page_pb, Encoding::Protobuf),
    ];
    let logs = vec![
        log_seed(&page_json, Encoding::Json),
        log_seed(&page_pb, Encoding::Protobuf),
    ];
    let watch_json_seed = fetch(watch.clone(), "application/json").await;
    let watch_pb_seed = fetch(watch, PB).await;
    let token =
        serde_json::from_slice::<serde_json::Value>(&page_json).unwrap()["metadata"]["continue"]
            .as_str()
            .unwrap()
            .to_string();
    let ours = ContinueToken::after(17, "ns-1/pod-00001").encode(Format::R8S);
    let error_line = br#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}}"#.to_vec();
    let json_tokens = toks(&[
        "{",
        "}",
        "[",
        "]",
        "\"",
        ":",
        ",",
        "\\",
        "\\u0000",
        "null",
        "true",
        "1e999",
        "-0",
        "\"metadata\"",
        "\"resourceVersion\"",
        "\"name\"",
        "\"namespace\"",
        "\"labels\"",
        "\"kind\"",
        "\"apiVersion\"",
        "\"type\"",
        "\"object\"",
        "\"items\"",
        "\"continue\"",
        "\"BOOKMARK\"",
        "\"ERROR\"",
        "\"ADDED\"",
        "\"DELETED\"",
        "\"code\"",
        "410",
        "\"18446744073709551616\"",
        "\"\"",
        "\n",
        "\u{feff}",
        "\u{10ffff}",
    ]);
    let pb_tokens = vec![
        b"k8s\0".to_vec(),
        vec![0x0a],
        vec![0x12],
        vec![0x1a],
        vec![0x22],
        vec![0xff, 0xff, 0xff, 0xff, 0x0f],
        vec![0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01],
        vec![0, 0, 0, 0],
        vec![0x7f, 0xff, 0xff, 0xff],
        vec![0x0a, 0x00],
        vec![0x0a, 0x7f],
    ];
    vec![
        Target {
            name: "request (path, query, ListOptions, selectors, Accept)",
            seeds: [
                "GET\0/api/v1/namespaces/ns-1/pods?resourceVersion=0&limit=10&labelSelector=app%3Dweb,tier!%3Ddb&fieldSelector=spec.nodeName%3Dn1\0application/vnd.kubernetes.protobuf, */*",
                "GET\0/apis/apps/v1/namespaces/a/deployments/d?resourceVersion=5&resourceVersionMatch=NotOlderThan\0application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
                "GET\0/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=30\0application/json",
                "GET\0/apis/example.r8s.dev/v1/widgets?continue=abc&limit=2&pretty=1\0application/yaml;q=0.5,*/*;q=0.1",
                "DELETE\0/api/v1/namespaces/x/pods/y/status?dryRun=All\0",
                "GET\0/api/v1/namespaces/ns-2\0application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io",
            ]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect(),
            dict: toks(&[
                "/", "%", "%2F", "%00", "?", "&", "=", "..", "namespaces", "api", "apis", "v1",
                "watch=", "resourceVersion=", "resourceVersionMatch=Exact", "limit=-1",
                "continue=", "labelSelector=", "fieldSelector=", "timeoutSeconds=",
                "sendInitialEvents=false", "in%20(a,b)", "notin", "!", ",", ";q=", "*/*",
                "application/", ";as=", "\0", "18446744073709551616",
            ]),
            run: request,
        },
        Target {
            name: "scope (request target, Authorization: RequestInfo, bearer token)",
            seeds: [
                "GET\0/apis/example.com/v1/watch/namespaces/default/widgets/w-0001?resourceVersion=0\0Bearer  tok\0application/json",
                "GET\0/apis/example.com/v1/watch/namespaces/default/widgets/w-0001?fieldSelector=metadata.name%3Dw-0002&resourceVersion=0\0Bearer tok\0",
                "GET\0/apis/example.com/v1/watch/namespaces/default/widgets?fieldSelector=metadata.name%3Dw-0001\0bearer tok x\0",
                "GET\0/api/v1/namespaces/ns-1/configmaps/cm-%78?resourceVersion=0\0Basic abc\0application/vnd.kubernetes.protobuf",
                "GET\0/api/v1/namespaces/ns-1/configmaps?fieldSelector=metadata.name%3Da,metadata.name%3Db&labelSelector=x%20in%20(b,a),!y,z%3E1&watch=bogus\0\0",
                "DELETE\0/api/v1/namespaces/ns-1/configmaps?fieldSelector=metadata.name%3Dcm\0Bearer t\0",
            ]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect(),
            dict: toks(&[
                "/", "%", "%2F", "%2f", "%25", "%2E", "//", "/./", "/../", "watch/", "namespaces/",
                "?", "&", "=", "metadata.name", "%3D", "%3D%3D", "!%3D", ",", "fieldSelector=",
                "labelSelector=", "watch=", "resourceVersion=0", "Bearer ", " ", "\t", "status",
                "#", "\0",
            ]),
            run: scope,
        },
        Target {
            name: "label selector",
            seeds: toks(&[
                "app=web,tier!=db",
                "env in (prod, staging),!canary",
                "app,tier notin (a,b),x==y",
                "example.com/a-b_c.d=v",
                "",
            ]),
            dict: toks(&[
                "=", "==", "!=", "in", "notin", "(", ")", ",", "!", " ", "/", ".", "-", "_",
                "example.com/", "a", "\u{e9}", "\t",
            ]),
            run: label_selector,
        },
        Target {
            name: "field selector",
            seeds: toks(&[
                "metadata.name=pod-00001,spec.nodeName!=n1",
                "status.phase==Running",
                "metadata.namespace=ns\\=1\\,x",
                "",
            ]),
            dict: toks(&["=", "==", "!=", ",", "\\", "\\=", "\\,", "metadata.name", "spec.nodeName", "."]),
            run: field_selector,
        },
        Target {
            name: "continue token",
            seeds: vec![token.into_bytes(), ours.into_bytes()],
            dict: toks(&["=", "-", "_", "A", "eyJ", "fQ", "\"", "rv", "start"]),
            run: continue_token,
        },
        Target {
            name: "Accept",
            seeds: toks(&[
                "application/vnd.kubernetes.protobuf, */*",
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
                "text/html;q=0.9, application/*;q=0.8, */*;q=0.1",
            ]),
            dict: toks(&[",", ";", "=", "q=", "0.", "1e9", "*", "/", "as=", "g=", "v=", "stream=watch", "\"", " "]),
            run: accept,
        },
        Target {
            name: "JSON object scanner",
            seeds: vec![pod_json],
            dict: json_tokens.clone(),
            run: json_object,
        },
        Target {
            name: "protobuf object scanner",
            seeds: vec![pod_pb],
            dict: pb_tokens.clone(),
            run: protobuf_object,
        },
        Target {
            name: "JSON list page",
            seeds: vec![page_json],
            dict: json_tokens.clone(),
            run: list_json,
        },
        Target {
            name: "protobuf list page",
            seeds: vec![page_pb],
            dict: pb_tokens.clone(),
            run: list_protobuf,
        },
        Target {
            name: "JSON watch stream",
            seeds: vec![watch_json_seed, error_line],
            dict: json_tokens,
            run: watch_json,
        },
        Target {
            name: "snapshot file (persist.dir)",
            seeds: snapshots,
            dict: {
                let mut d = pb_tokens.clone();
                d.extend(toks(&["r8s-snap", "\"resource_version\":", "\"upstream\":", "{}"]));
                d.push(vec![0xff, 0xff]);
                d.push(vec![0xff; 8]);
                d.push(vec![0x01, 0, 0, 0]);
                d
            },
            run: snapshot,
        },
        Target {
            name: "change log (persist.dir)",
            seeds: logs,
            dict: {
                let mut d = pb_tokens.clone();
                d.extend(toks(&["r8s-wlog", "\"base\":", "\"upstream\":", "{}"]));
                d.push(vec![1]);
                d.push(vec![2]);
                d.push(vec![3]);
                d.push(vec![0xff; 8]);
                d.push(vec![0x0b, 0, 0, 0]);
                d
            },
            run: change_log,
        },
        Target {
            name: "protobuf watch stream",
            seeds: vec![watch_pb_seed],
            dict: pb_tokens,
            run: watch_protobuf,
        },
    ]
    .into_iter()
    .chain(identity::targets())
    .collect()
}

thread_local! {
    /// Where the last panic on this thread happened (set by [`quiet`]).
    static WHERE: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// Replaces the panic hook with one that prints nothing and notes where
/// the panic happened, for [`hammer`]'s report.
pub fn quiet() {
    std::panic::set_hook(Box::new(|info| {
        let at = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        WHERE.with(|w| *w.borrow_mut() = at);
    }));
}

/// One mutation of `input`, in place.
fn mutate_once(rng: &mut fastrand::Rng, input: &mut Vec<u8>, t: &Target) {
    let len = input.len();
    match rng.u8(..10) {
        // Flip a bit.
        0 if len > 0 => {
            let i = rng.usize(..len);
            input[i] ^= 1 << rng.u8(..8);
        }
        // Set a byte to an interesting value.
        1 if len > 0 => {
            let i = rng.usize(..len);
            input[i] = *rng
                .choice(&[0u8, 0x7f, 0x80, 0xff, b'"', b'\\', b',', b'\n', b'%'])
                .unwrap();
        }
        // Insert a token.
        2 | 3 if !t.dict.is_empty() => {
            let tok = &t.dict[rng.usize(..t.dict.len())];
            let at = rng.usize(..=len);
            input.splice(at..at, tok.iter().copied());
        }
        // Delete a range.
        4 if len > 0 => {
            let a = rng.usize(..len);
            let b = (a + 1 + rng.usize(..16.min(len - a))).min(len);
            input.drain(a..b);
        }
        // Duplicate a range.
        5 if len > 0 => {
            let a = rng.usize(..len);
            let b = (a + 1 + rng.usize(..64.min(len - a))).min(len);
            let copy: Vec<u8> = input[a..b].to_vec();
            let at = rng.usize(..=len);
            input.splice(at..at, copy);
        }
        // Truncate.
        6 if len > 0 => input.truncate(rng.usize(..len)),
        // Splice in part of another seed.
        7 => {
            let other = &t.seeds[rng.usize(..t.seeds.len())];
            if !other.is_empty() {
                let a = rng.usize(..other.len());
                let b = (a + rng.usize(..=other.len() - a)).min(other.len());
                let at = rng.usize(..=len);
                input.splice(at..at, other[a..b].iter().copied());
            }
        }
        // Random bytes.
        8 => {
            let at = rng.usize(..=len);
            let n = rng.usize(1..8);
            input.splice(at..at, (0..n).map(|_| rng.u8(..)));
        }
        // Swap two bytes.
        _ if len > 1 => {
            let (a, b) = (rng.usize(..len), rng.usize(..len));
            input.swap(a, b);
        }
        _ => {}
    }
}

/// Runs `n` inputs through `t` (deterministic for a given `seed`),
/// counting panics.
pub fn hammer(t: &Target, n: u64, seed: u64) -> Report {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut report = Report {
        name: t.name,
        inputs: 0,
        panics: 0,
        first: None,
        elapsed: Duration::ZERO,
    };
    let start = Instant::now();
    let mut input = Vec::new();
    for _ in 0..n {
        input.clear();
        input.extend_from_slice(&t.seeds[rng.usize(..t.seeds.len())]);
        for _ in 0..rng.usize(1..=4) {
            mutate_once(&mut rng, &mut input, t);
        }
        report.inputs += 1;
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| (t.run)(&input))) {
            report.panics += 1;
            if report.first.is_none() {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                let at = WHERE.with(|w| w.borrow().clone());
                report.first = Some((input.clone(), format!("{msg} at {at}")));
            }
        }
    }
    report.elapsed = start.elapsed();
    report
}
