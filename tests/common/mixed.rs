//! The selectors many watchers spread over (`watch_fanout`, `chaos`), and
//! the tests' own reading of them: which pods each selects, decided without
//! the parsers under test.

/// The selectors the watchers spread over: (collection, query). Mostly
/// narrow, as in a real cluster (kubelets, controllers of one app), with a
/// few watching everything.
pub fn mixed_selector(i: usize) -> (String, String) {
    let ns = format!("ns-{}", i % 4);
    match i % 100 {
        0 => ("/api/v1/pods".into(), String::new()),
        1..=2 => (format!("/api/v1/namespaces/{ns}/pods"), String::new()),
        3..=4 => (
            "/api/v1/pods".into(),
            "&labelSelector=tier%3Dbackend".into(),
        ),
        5..=9 => (
            format!("/api/v1/namespaces/{ns}/pods"),
            "&labelSelector=tier%20in%20(frontend,cache)".into(),
        ),
        10..=39 => (
            "/api/v1/pods".into(),
            format!("&fieldSelector=spec.nodeName%3Dnode-{:02}", i % 10),
        ),
        40..=69 => (
            "/api/v1/pods".into(),
            format!("&fieldSelector=metadata.name%3Dpod-{:05}", (i * 7) % 1000),
        ),
        70..=84 => (
            "/api/v1/pods".into(),
            format!("&labelSelector=app%3Dapp-{}", i % 20),
        ),
        85..=94 => (
            "/api/v1/pods".into(),
            format!("&labelSelector=team%3Dteam-{},tier!%3Dbatch", i % 7),
        ),
        _ => (
            format!("/api/v1/namespaces/{ns}/pods"),
            "&fieldSelector=status.phase%3DRunning".into(),
        ),
    }
}

/// Whether the watch of `collection` with the query `sel` (as
/// [`mixed_selector`] makes them) selects `pod`: equality, inequality, `in`
/// and existence on labels; equality on the three fields it uses.
pub fn selects(collection: &str, sel: &str, pod: &serde_json::Value) -> bool {
    let meta = &pod["metadata"];
    if let Some(ns) = collection
        .strip_prefix("/api/v1/namespaces/")
        .and_then(|rest| rest.split('/').next())
        && meta["namespace"] != ns
    {
        return false;
    }
    let label = |k: &str| meta["labels"][k].as_str();
    let field = |path: &str| {
        let value = match path {
            "spec.nodeName" => &pod["spec"]["nodeName"],
            "metadata.name" => &meta["name"],
            "status.phase" => &pod["status"]["phase"],
            other => panic!("the test reads no field {other}"),
        };
        value.as_str().unwrap_or("").to_string()
    };
    let decoded = sel
        .replace("%3D", "=")
        .replace("%20", " ")
        .replace("%2C", ",");
    decoded.split('&').filter(|p| !p.is_empty()).all(|param| {
        if let Some(fields) = param.strip_prefix("fieldSelector=") {
            return fields.split(',').all(|req| {
                let (path, want) = req.split_once('=').expect("path=value");
                field(path) == want
            });
        }
        let labels = param.strip_prefix("labelSelector=").expect("a selector");
        // Requirements are split at commas outside parentheses.
        let mut reqs = Vec::new();
        let (mut depth, mut from) = (0, 0);
        for (at, c) in labels.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                ',' if depth == 0 => {
                    reqs.push(&labels[from..at]);
                    from = at + 1;
                }
                _ => {}
            }
        }
        reqs.push(&labels[from..]);
        reqs.into_iter().all(|req| {
            if let Some((k, set)) = req.split_once(" in ") {
                let set = set.trim_start_matches('(').trim_end_matches(')');
                label(k).is_some_and(|v| set.split(',').any(|s| s == v))
            } else if let Some((k, v)) = req.split_once("!=") {
                label(k) != Some(v)
            } else if let Some((k, v)) = req.split_once('=') {
                label(k) == Some(v)
            } else if let Some(k) = req.strip_prefix('!') {
                label(k).is_none()
            } else {
                label(req).is_some()
            }
        })
    })
}
