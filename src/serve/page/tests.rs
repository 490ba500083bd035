//! Pages and their counts: what each page says is left is what a walk of
//! the rest finds, on every page, whatever namespace a token is used in.

use std::sync::Arc;

use imbl::OrdMap;

use super::*;
use crate::api::media::Encoding;
use crate::api::selector::LabelSelector;
use crate::cache::budget::Budget;
use crate::cache::object::TypeInfo;
use crate::cache::store::{Change, Limits, Options};
use crate::cache::writer::Writer;
use crate::metrics::StoreLabels;

/// Config maps: 5 in `a`, 3 in `b`, 6 in `c`; every other one labelled.
fn store() -> (Writer, Arc<Store>) {
    let (mut w, store) = Store::new(Options {
        scope: Default::default(),
        limits: Limits::for_tests(100, 100),
        budget: Budget::unlimited(),
        encoding: Encoding::Json,
        node_index: false,
        indexes: Vec::new(),
        labels: StoreLabels::new("v1/configmaps".into(), "json"),
    });
    let t = TypeInfo::for_tests("ConfigMap", "v1", "configmaps");
    let mut objects = OrdMap::new();
    let mut i = 0;
    for (ns, n) in [("a", 5), ("b", 3), ("c", 6)] {
        for j in 0..n {
            i += 1;
            let json = format!(
                r#"{{"metadata":{{"name":"cm-{j}","namespace":"{ns}","resourceVersion":"{i}","labels":{{"odd":"{}"}}}}}}"#,
                i % 2
            );
            let o = Arc::new(t.parse(json.as_bytes()).unwrap());
            objects.insert(Arc::from(format!("{ns}/cm-{j}")), o);
        }
    }
    w.apply(vec![Change::Replace(objects, 20)]);
    (w, store)
}

/// Every page of a list, `limit` at a time, each as (names, remaining,
/// whether a token follows), the first continuing with `first`.
fn walk(
    store: &Store,
    namespace: Option<&str>,
    selectors: &Selectors,
    first: Option<ContinueToken>,
) -> Vec<(Vec<String>, Option<u64>, bool)> {
    let version = store.current();
    let mut resume = first;
    let mut pages = Vec::new();
    loop {
        let page = cut(
            store,
            &version,
            Ask {
                namespace,
                resume: resume.take(),
                limit: 2,
                selectors,
                view: View::OBJECT,
            },
        );
        let names = page.picked.iter().map(|o| o.key.to_string()).collect();
        pages.push((names, page.remaining, page.cont.is_some()));
        match page.cont {
            Some(t) => resume = Some(ContinueToken::decode(&t, Format::R8S).unwrap()),
            None => return pages,
        }
    }
}

#[test]
fn should_say_on_every_page_what_a_walk_of_the_rest_finds() {
    let (_w, store) = store();
    let none = Selectors::default();
    let all = walk(&store, None, &none, None);
    assert_eq!(all.len(), 7);
    for (i, (names, remaining, more)) in all.iter().enumerate() {
        assert_eq!(names.len(), 2);
        let left = 14 - 2 * (i as u64 + 1);
        assert_eq!(*remaining, (left > 0).then_some(left), "page {i}");
        assert_eq!(*more, left > 0);
    }
    let b: Vec<_> = walk(&store, Some("b"), &none, None);
    assert_eq!(
        b,
        [
            (vec!["b/cm-0".into(), "b/cm-1".into()], Some(1), true),
            (vec!["b/cm-2".into()], None, false),
        ]
    );
}

/// A token carries its namespace's count: in another namespace's list (as
/// the apiserver allows: the key is relative to the list's prefix) the
/// count is made again, not taken from the token.
#[test]
fn should_count_again_where_a_token_is_used_in_another_namespace() {
    let (_w, store) = store();
    let none = Selectors::default();
    let a = walk(&store, Some("a"), &none, None);
    assert_eq!(a[0].1, Some(3));
    let version = store.current();
    let first = cut(
        &store,
        &version,
        Ask {
            namespace: Some("a"),
            resume: None,
            limit: 2,
            selectors: &none,
            view: View::OBJECT,
        },
    );
    let token = ContinueToken::decode(first.cont.as_deref().unwrap(), Format::R8S).unwrap();
    assert_eq!(token.left.as_ref().unwrap().items, 3);
    // In `c`, from "cm-2": 4 items, 2 left after the first page (the
    // token's count would say 1).
    let c = walk(&store, Some("c"), &none, Some(token));
    assert_eq!(
        c,
        [
            (vec!["c/cm-2".into(), "c/cm-3".into()], Some(2), true),
            (vec!["c/cm-4".into(), "c/cm-5".into()], None, false),
        ]
    );
}

/// A filtered list gives no count, but a token while the walk has more.
#[test]
fn should_give_a_filtered_list_tokens_and_no_count() {
    let (_w, store) = store();
    let odd = Selectors {
        labels: LabelSelector::parse("odd=1").unwrap(),
        ..Selectors::default()
    };
    let pages = walk(&store, None, &odd, None);
    let names: Vec<_> = pages.iter().flat_map(|p| p.0.clone()).collect();
    assert_eq!(names.len(), 7);
    assert!(pages.iter().all(|p| p.1.is_none()));
    assert!(pages[..pages.len() - 1].iter().all(|p| p.2));
}
