//! The shape of `src/`, read from the source: no file imports a file that
//! imports it back (directly or around a loop), the top-level modules stack in
//! the layers below, and the query string is decoded in one place.
//! `cargo test --test structure -- --nocapture` prints the graph.

mod source;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use source::{Crate, cycles, module_of};

/// Top-level modules, bottom first: a module may use its own layer (without
/// a loop) or lower ones, never higher. `<root>` is `lib.rs`.
const LAYERS: &[&[&str]] = &[
    // Plumbing that knows nothing of Kubernetes.
    &["body", "sync", "shutdown", "metrics", "config"],
    // The API's vocabulary and wire encodings.
    &["api", "codec"],
    // The watch cache.
    &["cache"],
    // What talks to the outside: the upstream, the disk, TLS.
    &["upstream", "persist", "tls"],
    // Who is asking; the accept loop (which knows nothing of auth).
    &["auth", "server"],
    // The listeners and the built-in upstream.
    &["serve", "admin", "notify", "sim"],
    // Wiring.
    &["<root>", "cli", "demo"],
];

fn top(file: &Path) -> String {
    match module_of(file).unwrap().first() {
        Some(m) => m.clone(),
        None => "<root>".into(),
    }
}

#[test]
fn should_have_no_import_cycles_between_files() {
    let c = Crate::read();
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
        "files that import each other, directly or around a loop:\n{report}"
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
            if to_top == "sim" && from != "demo" {
                problems.push(format!("{} uses the sim; only `demo` may", f.display()));
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

/// The query string is decoded by one function, in `src/api/`: nothing else
/// in `src/` touches `form_urlencoded`.
#[test]
fn should_decode_the_query_in_one_place() {
    let c = Crate::read();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
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
            if in_api && code.contains("form_urlencoded::parse") {
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

/// The reader sees what these tests rely on: a loop through `super::` and a
/// child module, an import through a `use` alias, and nothing in strings or
/// comments.
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

/// `docs/architecture.md` stays true to the source: every top-level module
/// is in its module map; every module path, file, test and config key it
/// names exists.
#[test]
fn should_describe_the_code_as_it_is_in_docs_architecture() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let spans = code_spans(&doc);
    let mut problems = Vec::new();
    for m in LAYERS
        .iter()
        .flat_map(|l| l.iter())
        .filter(|m| **m != "<root>")
    {
        if !doc.contains(&format!("| `{m}` |")) {
            problems.push(format!("module `{m}` has no row in the module map"));
        }
    }
    let module_file = |segs: &[&str]| {
        let p = root.join("src").join(segs.join("/"));
        p.with_extension("rs").exists() || p.join("mod.rs").exists()
    };
    let tops: BTreeSet<&str> = LAYERS.iter().flat_map(|l| l.iter().copied()).collect();
    let config = std::fs::read_to_string(root.join("config/r8s.toml")).unwrap();
    let tests: String = std::fs::read_dir(root.join("tests"))
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.unwrap().path()).ok())
        .collect();
    for span in &spans {
        let word = span.split_whitespace().next().unwrap_or("");
        if word.contains("::") {
            // A module path, perhaps ending in an item (`api::request::ApiRequest`).
            let segs: Vec<&str> = word
                .split("::")
                .take_while(|s| s.starts_with(|c: char| c.is_ascii_lowercase()))
                .collect();
            if segs.first().is_some_and(|s| tops.contains(s)) && !module_file(&segs) {
                problems.push(format!("`{word}` names no module in src/"));
            }
        } else if word.starts_with("src/")
            || word.starts_with("tests/")
            || word.starts_with("deploy/")
        {
            if !root.join(word).exists() {
                problems.push(format!("`{word}` does not exist"));
            }
        } else if word.starts_with("should_") {
            if !tests.contains(&format!("fn {word}(")) {
                problems.push(format!("test `{word}` does not exist"));
            }
        } else if let Some((section, key)) = word.split_once('.')
            && [
                "upstream", "cache", "read", "watch", "shutdown", "tls", "auth", "log",
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
                problems.push(format!("config key `{word}` is not in config/r8s.toml"));
            }
        }
    }
    assert!(spans.len() > 50, "the page names what it describes");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
