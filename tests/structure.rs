//! The shape of `src/`, read from the source: no file imports a file that
//! imports it back (directly or around a loop), the top-level modules stack in
//! the layers below, and the query string is decoded in one place.
//! `cargo test --test suite structure:: -- --nocapture` prints the graph.

use crate::source;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use source::{Crate, cycles, module_of};

/// Top-level modules, bottom first: a module may use its own layer (without
/// a loop) or lower ones, never higher. `<root>` is `lib.rs`.
const LAYERS: &[&[&str]] = &[
    // Plumbing that knows nothing of Kubernetes.
    &["body", "sync", "shutdown", "metrics", "config", "logging"],
    // The API's vocabulary and wire encodings.
    &["api", "codec", "table"],
    // The watch cache.
    &["cache"],
    // What talks to the outside: the upstream, the disk, TLS.
    &["upstream", "persist", "tls", "audit"],
    // Who is asking; the accept loop (which knows nothing of auth).
    &["auth", "fairness", "server"],
    // The listeners: the API, the admin endpoints, systemd's notify, the
    // upstream's probe behind their health.
    &["serve", "admin", "notify", "probe"],
    // Wiring: the caches' lifetimes as the API changes, the process.
    &["apis", "<root>", "cli"],
];

/// `src/lib.rs`'s layer list says what [`LAYERS`] says: each numbered
/// paragraph of its doc links (``[`module`]``) exactly that layer's modules.
#[test]
fn should_list_the_layers_in_lib_rs_as_the_structure_test_does() {
    let lib = std::fs::read_to_string(
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("src/lib.rs"),
    )
    .unwrap();
    let modules: BTreeSet<&str> = LAYERS.iter().flat_map(|l| l.iter().copied()).collect();
    let mut said: Vec<BTreeSet<String>> = Vec::new();
    let mut in_list = false;
    for line in lib.lines().map_while(|l| l.strip_prefix("//!")) {
        let line = line.trim();
        let numbered = line
            .split_once(". ")
            .is_some_and(|(n, _)| n.parse::<usize>() == Ok(said.len() + 1));
        if numbered {
            said.push(BTreeSet::new());
            in_list = true;
        } else if line.is_empty() {
            in_list = false;
        }
        if !in_list {
            continue;
        }
        for link in line.split("[`").skip(1) {
            let name = link.split('`').next().unwrap_or("");
            if modules.contains(name) {
                said.last_mut().unwrap().insert(name.to_string());
            }
        }
    }
    let want: Vec<BTreeSet<String>> = LAYERS
        .iter()
        .map(|l| {
            l.iter()
                .filter(|m| **m != "<root>")
                .map(|m| m.to_string())
                .collect()
        })
        .collect();
    assert_eq!(said, want, "src/lib.rs's layers against LAYERS");
}

fn top(file: &Path) -> String {
    match module_of(file).unwrap().first() {
        Some(m) => m.clone(),
        None => "<root>".into(),
    }
}

#[test]
fn should_have_no_import_cycles_between_files() {
    // r8s, and the sim's crate beside it.
    for src in ["src", "sim/src"] {
        no_import_cycles_in(src);
    }
}

fn no_import_cycles_in(src: &str) {
    let c = Crate::read_from(&Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join(src));
    let edges = c.edges();
    let g: BTreeMap<PathBuf, BTreeSet<PathBuf>> = edges
        .iter()
        .map(|(f, to)| (f.clone(), to.keys().cloned().collect()))
        .collect();
    for (f, to) in &edges {
        let list: Vec<String> = to.keys().map(|p| p.display().to_string()).collect();
        println!("{} -> {}", f.display(), list.join(", "));
    }
    let found = cycles(&g);
    let mut report = String::new();
    for comp in &found {
        report.push_str("cycle among:\n");
        for f in comp {
            for (to, how) in &edges[f] {
                if comp.contains(to) {
                    let how: Vec<&str> = how.iter().map(String::as_str).collect();
                    report.push_str(&format!(
                        "  {} -> {} ({})\n",
                        f.display(),
                        to.display(),
                        how.join(", ")
                    ));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "{src}: files that import each other, directly or around a loop:\n{report}"
    );
}

/// A cache is born in one place: `apis::Starter::launch` builds every
/// cache (and everything it owns), at startup (the follower's first round)
/// and while r8s runs alike, so a new per-cache concern is added there once.
/// No other code, test or benchmark calls `ResourceCache::new`.
#[test]
fn should_build_every_cache_in_one_place() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let mut files = Vec::new();
    for dir in ["src", "sim/src", "cmd/src", "tests", "benches"] {
        source::walk(&root.join(dir), &mut files);
    }
    let mut calls = Vec::new();
    // (This test names it too, in its strings.)
    files.retain(|f| !f.ends_with("tests/structure.rs"));
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut in_fn = String::new();
        for line in text.lines() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            if let Some((_, rest)) = code.split_once("fn ") {
                in_fn = rest.split(['(', '<']).next().unwrap_or("").to_string();
            }
            if code.contains("ResourceCache::new(") {
                let rel = file.strip_prefix(root).unwrap().display().to_string();
                calls.push(format!("{rel} (in fn {in_fn})"));
            }
        }
    }
    assert_eq!(
        calls,
        ["src/apis/life.rs (in fn launch)"],
        "ResourceCache::new is called by Starter::launch alone"
    );
}

/// Three packages (docs/architecture.md, "Three packages"): the library
/// (`r8s`, at the top), the built-in upstream (`sim/`, `r8s-sim`, which uses
/// the library through its public API) and the binary (`cmd/`, `r8s-cmd`),
/// which depends on the library and, only with its default feature `sim`, on
/// the sim: a build without it (the image's) has no sim. The library never
/// depends on the sim, not even for its tests, and no file is compiled twice
/// (no `#[path]` include anywhere).
#[test]
fn should_build_the_binary_from_a_package_of_its_own() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let read = |rel: &str| -> toml::Table {
        std::fs::read_to_string(root.join(rel))
            .unwrap()
            .parse()
            .unwrap()
    };
    let manifest = read("Cargo.toml");
    let names = |v: &toml::Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|m| m.as_str().unwrap().to_string())
            .collect()
    };
    let mut members = names(&manifest["workspace"]["members"]);
    members.sort();
    assert_eq!(members, ["cmd", "sim"], "the workspace's members");
    assert_eq!(
        names(&manifest["workspace"]["default-members"]),
        ["cmd"],
        "`cargo run`, `cargo build` and `cargo bench` at the top act on the binary"
    );
    assert_eq!(manifest["package"]["name"].as_str(), Some("r8s"));
    assert!(
        !manifest.contains_key("bin") && manifest["package"]["autobins"].as_bool() == Some(false),
        "the library's package has no binary"
    );
    for deps in ["dependencies", "dev-dependencies"] {
        assert!(
            !manifest[deps].as_table().unwrap().contains_key("r8s-sim"),
            "r8s-sim is in the library's {deps}"
        );
    }
    assert_eq!(
        read("sim/Cargo.toml")["package"]["name"].as_str(),
        Some("r8s-sim")
    );

    let cmd = read("cmd/Cargo.toml");
    assert_eq!(cmd["package"]["name"].as_str(), Some("r8s-cmd"));
    let bins = cmd["bin"].as_array().unwrap();
    assert_eq!(bins.len(), 1);
    assert_eq!(bins[0]["name"].as_str(), Some("r8s"));
    let deps = cmd["dependencies"].as_table().unwrap();
    assert!(
        deps.contains_key("r8s"),
        "the binary depends on the library"
    );
    assert_eq!(
        deps["r8s-sim"]
            .get("optional")
            .and_then(toml::Value::as_bool),
        Some(true),
        "the binary depends on the sim only with the feature `sim`"
    );
    let features = cmd["features"].as_table().unwrap();
    assert_eq!(names(&features["sim"]), ["dep:r8s-sim"]);
    assert_eq!(names(&features["default"]), ["sim"]);

    // Nothing in src/ names the sim.
    let mut named = Vec::new();
    for rel in Crate::read().files() {
        let text = std::fs::read_to_string(root.join("src").join(rel)).unwrap();
        if text.contains("r8s_sim") || text.contains("sim/src") {
            named.push(rel.display().to_string());
        }
    }
    assert!(
        named.is_empty(),
        "files of the library that name the sim: {named:?}"
    );

    // No file is a module of two crates.
    let mut included = Vec::new();
    let mut files = Vec::new();
    for dir in ["src", "sim/src", "cmd/src", "tests", "benches"] {
        source::walk(&root.join(dir), &mut files);
    }
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        if text.lines().any(|l| l.trim_start().starts_with("#[path")) {
            included.push(file.display().to_string());
        }
    }
    assert!(
        included.is_empty(),
        "files with a #[path] include: {included:?}"
    );
}

#[test]
fn should_stack_top_level_modules_in_layers() {
    let c = Crate::read();
    let layer_of = |m: &str| LAYERS.iter().position(|l| l.contains(&m));
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut problems = Vec::new();
    for (f, to) in c.edges() {
        let from = top(&f);
        if layer_of(&from).is_none() {
            problems.push(format!(
                "module `{from}` ({}) is in no layer: add it to LAYERS",
                f.display()
            ));
        }
        for (t, how) in to {
            let to_top = top(&t);
            if to_top == from {
                continue;
            }
            g.entry(from.clone()).or_default().insert(to_top.clone());
            if let (Some(a), Some(b)) = (layer_of(&from), layer_of(&to_top))
                && b > a
            {
                let how: Vec<&str> = how.iter().map(String::as_str).collect();
                problems.push(format!(
                    "{} (layer {a}) uses {} (layer {b}, above it): {}",
                    f.display(),
                    t.display(),
                    how.join(", ")
                ));
            }
        }
    }
    for (m, to) in &g {
        println!(
            "{m} -> {}",
            to.iter().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    for comp in cycles(&g) {
        problems.push(format!("top-level modules in a loop: {}", comp.join(", ")));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The query string is decoded by one function, in `src/api/` (Go's
/// `url.ParseQuery`, hand-written: `form_urlencoded::parse` reads pairs
/// Go leaves out): nothing else in `src/` touches `form_urlencoded`, and
/// nothing decodes with it.
#[test]
fn should_decode_the_query_in_one_place() {
    let c = Crate::read();
    let src = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("src");
    let mut decoders = Vec::new();
    let mut outside = Vec::new();
    for f in c.files() {
        let text = std::fs::read_to_string(src.join(f)).unwrap();
        let in_api = f.starts_with("api");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if !in_api && (code.contains("form_urlencoded") || code.contains("query_pairs")) {
                outside.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
            }
            if code.contains("form_urlencoded::parse") {
                outside.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
            }
            if in_api && code.contains("fn query_unescape") {
                decoders.push(format!("{}:{}", f.display(), n + 1));
            }
        }
    }
    assert!(
        outside.is_empty(),
        "query strings handled outside src/api/:\n{}",
        outside.join("\n")
    );
    assert_eq!(
        decoders.len(),
        1,
        "one decoding of the query string in src/api/: {decoders:?}"
    );
}

/// Asserts bounded by the wall clock (`elapsed() <`, `now() <`, `took <`,
/// a time `< Duration::…`), per file of tests/ and src/ (from the crate's
/// root), as they stand: they may only go (the
/// table is kept equal to what the files hold, so each one converted lowers
/// it). A test's verdict must not depend on how busy the machine is: a wait
/// is [`crate::common::eventually`] or a loop with a
/// [`crate::common::HangGuard`] (a guard against a hang), time-dependent
/// logic a unit test with paused time, a speed a benchmark.
const CLOCK_ASSERTS: &[(&str, usize)] = &[
    // A jittered wait drawn (no clock read), and a wait in paused time.
    ("src/upstream/reflector/backoff.rs", 2),
    // The recovery table's backoffs, measured in paused time.
    ("src/upstream/reflector/recover_tests.rs", 2),
];

/// The conditions of the `assert!`s in `text` that compare the clock.
fn clock_asserts(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("assert!(") {
        let start = from + at + "assert!(".len();
        let (mut depth, mut i, mut cond_end) = (1, start, None);
        while i < bytes.len() && depth > 0 {
            match bytes[i] {
                b'"' => {
                    i += 1;
                    while i < bytes.len() && bytes[i] != b'"' {
                        i += if bytes[i] == b'\\' { 2 } else { 1 };
                    }
                }
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' => depth -= 1,
                b',' if depth == 1 && cond_end.is_none() => cond_end = Some(i),
                _ => {}
            }
            i += 1;
        }
        let cond: String = text[start..cond_end.unwrap_or(i.saturating_sub(1))]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if [
            "elapsed() <",
            "now() <",
            "took <",
            "< Duration::",
            "<= Duration::",
        ]
        .iter()
        .any(|c| cond.contains(c))
        {
            found.push(cond);
        }
        from = i;
    }
    found
}

/// The `timeout(Duration::…, …)`s in `text` whose expiry fails the test
/// (`.await` then `.expect(`, `.unwrap()` or `.unwrap_or_else(`): a bound
/// on the wall clock as a verdict. A wait that fails only a hang is
/// `timeout(HANG, …)`.
fn fatal_timeouts(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("timeout(Duration::from_") {
        let open = from + at + "timeout".len();
        let (mut depth, mut i) = (0, open);
        while i < bytes.len() {
            match bytes[i] {
                b'(' => depth += 1,
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            i += 1;
        }
        let after: String = text[(i + 1).min(text.len())..]
            .chars()
            .filter(|c| !c.is_whitespace())
            .take(24)
            .collect();
        if [
            ".await.expect(",
            ".await.unwrap()",
            ".await.unwrap_or_else(",
        ]
        .iter()
        .any(|f| after.starts_with(f))
        {
            let call: String = text[from + at..=i.min(text.len() - 1)]
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            found.push(call);
        }
        from = i.max(open);
    }
    found
}

#[test]
fn should_add_no_assert_bounded_by_the_wall_clock() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let mut files = Vec::new();
    for sub in ["tests", "tests/common"] {
        for entry in std::fs::read_dir(root.join(sub)).unwrap() {
            let path = entry.unwrap().path();
            // (This file's own example is in a string.)
            if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("structure.rs") {
                files.push(path);
            }
        }
    }
    // The unit tests in src/ too (and anything else there that asserts).
    let mut dirs = vec![root.join("src"), root.join("sim/src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let mut over = Vec::new();
    for path in files {
        let name = path.strip_prefix(root).unwrap().display().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut found = clock_asserts(&text);
        found.extend(fatal_timeouts(&text));
        let allowed = CLOCK_ASSERTS
            .iter()
            .find(|(f, _)| *f == name)
            .map_or(0, |(_, n)| *n);
        if found.len() > allowed {
            over.push(format!(
                "{name}: {} (allowed {allowed}): {found:?}",
                found.len()
            ));
        } else if found.len() < allowed {
            over.push(format!(
                "{name}: {} now, {allowed} allowed: lower CLOCK_ASSERTS to match",
                found.len()
            ));
        }
    }
    assert!(
        over.is_empty(),
        "asserts bounded by the wall clock (use common::eventually with a hang guard, timeout(HANG, …), paused time, or a benchmark):\n{}",
        over.join("\n")
    );
    // (The sample is spelt in pieces, so that no checker of this file's
    // own asserts takes it for one.)
    let condition = concat!("t.elap", "sed() < X");
    let found = clock_asserts(&format!(
        "assert!({condition}, \"(a, b)\");\nassert!(ok, \"{condition}\");"
    ));
    assert_eq!(found, [condition], "the condition, not the message");
    let wait = concat!("time::time", "out(Duration::from_secs(5), x)");
    let found = fatal_timeouts(&format!(
        "let a = tokio::{wait}\n .await\n .expect(\"y\");\nlet _ = tokio::{wait}.await;"
    ));
    assert_eq!(found.len(), 1, "{found:?}");
}

/// With `autotests = false` (one test binary), a file of `tests/` that
/// `tests/main.rs` does not declare would be neither built nor run, silently.
#[test]
fn should_run_every_file_of_tests_in_the_suite() {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("tests");
    let main = std::fs::read_to_string(dir.join("main.rs")).unwrap();
    let declared: BTreeSet<String> = main
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mod ")?.strip_suffix(';'))
        .map(str::to_string)
        .collect();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let module = if path.is_dir() {
            path.join("mod.rs").exists()
        } else {
            path.extension().is_some_and(|e| e == "rs") && name != "main"
        };
        if module && !declared.contains(&name) {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "tests/main.rs does not declare {missing:?}: add `mod <name>;` for each"
    );
}

#[test]
fn should_find_a_loop_and_the_edges_behind_it() {
    let dir = std::env::temp_dir().join(format!("r8s-structure-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("a")).unwrap();
    let files = [
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        (
            "a/mod.rs",
            "pub mod inner;\npub struct A;\nfn f() { inner::go(); }\n",
        ),
        (
            "a/inner.rs",
            "use crate::b as other;\npub fn go() { other::x(); }\n",
        ),
        (
            "b.rs",
            "// crate::a::A in a comment\npub fn x() -> &'static str { \"crate::a::A\" }\n",
        ),
    ];
    for (f, text) in files {
        std::fs::write(src.join(f), text).unwrap();
    }
    let c = Crate::read_from(&src);
    let edges = c.edges();
    let to = |f: &str| -> Vec<String> {
        edges[&PathBuf::from(f)]
            .keys()
            .map(|p| p.display().to_string())
            .collect()
    };
    assert_eq!(to("a/mod.rs"), ["a/inner.rs"]);
    assert_eq!(to("a/inner.rs"), ["b.rs"], "through the alias");
    assert!(to("b.rs").is_empty(), "strings and comments are not paths");
    std::fs::write(src.join("b.rs"), "pub fn x() { let _ = super::a::A; }\n").unwrap();
    let edges = Crate::read_from(&src).edges();
    let g: BTreeMap<PathBuf, BTreeSet<PathBuf>> = edges
        .iter()
        .map(|(f, to)| (f.clone(), to.keys().cloned().collect()))
        .collect();
    assert_eq!(
        cycles(&g),
        [vec![
            PathBuf::from("a/inner.rs"),
            PathBuf::from("a/mod.rs"),
            PathBuf::from("b.rs")
        ]]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The backticked spans of a Markdown text.
fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The flags r8s takes, read from its own `--help` (every command's).
fn r8s_flags() -> BTreeSet<String> {
    let mut flags = BTreeSet::new();
    for args in [
        &["--help"][..],
        &["serve", "--help"],
        &["sim", "--help"],
        &["demo", "--help"],
        &["config", "check", "--help"],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_r8s"))
            .args(args)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        for (i, _) in text.match_indices("--") {
            let flag: String = text[i + 2..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            if !flag.is_empty() {
                flags.insert(flag);
            }
        }
    }
    flags
}

/// Other programs' flags the docs name (kube-apiserver's, kubectl's,
/// cargo's, docker's), which are not r8s's to take.
const FOREIGN_FLAGS: &[&str] = &[
    "goaway-chance",
    "client-ca-file",
    "token-auth-file",
    "authorization-policy-file",
    "previous",
    "release",
    "no-fail-fast",
    "user",
    "network",
];

/// The README and every page under `docs/` stay true to the source: every
/// module path, file, test, config key, metric, r8s flag and linked file
/// they name exists, and `docs/architecture.md`'s module map has every
/// top-level module.
#[test]
fn should_describe_the_code_as_it_is_in_the_docs() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let mut pages = vec![root.join("README.md")];
    for e in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "md") {
            pages.push(path);
        }
    }
    let module_file = |segs: &[&str]| {
        let p = root.join("src").join(segs.join("/"));
        p.with_extension("rs").exists() || p.join("mod.rs").exists()
    };
    let tops: BTreeSet<&str> = LAYERS.iter().flat_map(|l| l.iter().copied()).collect();
    let config = std::fs::read_to_string(root.join("config/r8s.toml")).unwrap();
    let metric_names = std::fs::read_to_string(root.join("src/metrics/names.rs")).unwrap();
    let flags = r8s_flags();
    assert!(
        flags.contains("kubeconfig") && flags.contains("churn"),
        "{flags:?}"
    );
    // Tests live in `tests/` and, as unit tests, in `src/` and `sim/src/`.
    let unit = Crate::read();
    let sim = Crate::read_from(&root.join("sim/src"));
    let tests: String = std::fs::read_dir(root.join("tests"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .chain(unit.files().map(|f| root.join("src").join(f)))
        .chain(sim.files().map(|f| root.join("sim/src").join(f)))
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .collect();
    let mut problems = Vec::new();
    let mut named = 0;
    for page in &pages {
        let doc = std::fs::read_to_string(page).unwrap();
        let name = page.strip_prefix(root).unwrap().display().to_string();
        let mut problem = |p: String| problems.push(format!("{name}: {p}"));
        if name == "docs/architecture.md" {
            for m in LAYERS
                .iter()
                .flat_map(|l| l.iter())
                .filter(|m| **m != "<root>")
            {
                if !doc.contains(&format!("| `{m}` |")) {
                    problem(format!("module `{m}` has no row in the module map"));
                }
            }
        }
        // Links to files of the repository, relative to the page.
        for (i, _) in doc.match_indices("](") {
            let target = doc[i + 2..].split(')').next().unwrap_or("");
            let file = target.split('#').next().unwrap_or("");
            if file.is_empty() || file.starts_with("http") {
                continue;
            }
            if !page.parent().unwrap().join(file).exists() {
                problem(format!("links to {target}, which does not exist"));
            }
        }
        for span in code_spans(&doc) {
            named += 1;
            let word = span.split_whitespace().next().unwrap_or("");
            if word.contains("::") {
                // A module path, perhaps ending in an item (`api::request::ApiRequest`).
                let segs: Vec<&str> = word
                    .split("::")
                    .take_while(|s| s.starts_with(|c: char| c.is_ascii_lowercase()))
                    .collect();
                if segs.first().is_some_and(|s| tops.contains(s)) && !module_file(&segs) {
                    problem(format!("`{word}` names no module in src/"));
                }
            } else if word.starts_with("src/")
                || word.starts_with("tests/")
                || word.starts_with("deploy/")
                || word.starts_with("docs/")
                || word.starts_with("benches/")
                || word.starts_with("sim/")
            {
                if !root.join(word.trim_end_matches(['.', ','])).exists() {
                    problem(format!("`{word}` does not exist"));
                }
            } else if word.starts_with("should_") {
                if !tests.contains(&format!("fn {word}(")) {
                    problem(format!("test `{word}` does not exist"));
                }
            } else if word.starts_with("r8s_") {
                let metric = word.split(['{', '[', '(']).next().unwrap();
                let family = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| metric.strip_suffix(s))
                    .filter(|b| metric_names.contains(&format!("\"{b}\"")))
                    .unwrap_or(metric);
                let known = match family.strip_suffix('*') {
                    // A family of them (`r8s_reflector_*`).
                    Some(prefix) => metric_names.contains(&format!("\"{prefix}")),
                    None => metric_names.contains(&format!("\"{family}\"")),
                };
                if !metric.contains(':') && !known {
                    problem(format!("metric `{metric}` is not in src/metrics/names.rs"));
                }
            } else if let Some((section, key)) = word.split_once('.')
                && [
                    "upstream", "cache", "read", "watch", "shutdown", "tls", "auth", "log",
                    "server", "persist",
                ]
                .contains(&section)
                && key.chars().all(|c| c.is_ascii_lowercase() || c == '_')
            {
                let in_section = config
                    .split("\n[")
                    .find(|s| s.starts_with(&format!("{section}]")))
                    .is_some_and(|s| {
                        s.lines().any(|l| {
                            l.trim_start_matches(['#', ' '])
                                .starts_with(&format!("{key} ="))
                        })
                    });
                if !in_section {
                    problem(format!("config key `{word}` is not in config/r8s.toml"));
                }
            }
            // r8s's flags: a bare `--flag`, or one in an r8s command line.
            let command = span.starts_with("r8s ") || span.starts_with("--");
            for part in span.split_whitespace().filter(|_| command) {
                if let Some(flag) = part.strip_prefix("--") {
                    let flag = flag.split('=').next().unwrap();
                    if !flags.contains(flag) && !FOREIGN_FLAGS.contains(&flag) {
                        problem(format!("`--{flag}` is not a flag of r8s (`{span}`)"));
                    }
                }
            }
        }
    }
    assert!(named > 300, "the pages name what they describe: {named}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
