//! A list's page cut from one cache version, as the apiserver's storage cuts
//! them (`GetList` with `limit` and `continue`): the items a walk picks up
//! to the limit, and what the client needs for the next page, its continue
//! token and `remainingItemCount`.
//!
//! The count of what is left is carried from page to page in r8s's token
//! ([`Left`]) rather than counted again: an ordered map counts a key range
//! only by walking it, and `kubectl get pods -A` at 150,000 pods would walk
//! 22 million items over its 300 pages. A list's first page counts once
//! (all of a resource: the map's length; a namespace: a walk of it).

use std::sync::Arc;

use crate::api::continue_token::{ContinueToken, Format, Left};
use crate::api::selector::Selectors;
use crate::cache::object::CachedObject;
use crate::cache::store::{Store, Version};
use crate::cache::view::View;

/// What a page asks for of a version.
pub(super) struct Ask<'a> {
    /// The list's namespace, if it is one namespace's.
    pub namespace: Option<&'a str>,
    /// The token the client continues with, decoded.
    pub resume: Option<ContinueToken>,
    /// `limit` (0 or less: all).
    pub limit: i64,
    /// The list's selectors.
    pub selectors: &'a Selectors,
    /// How the items are shown (for their length).
    pub view: View,
}

/// A page: its items and what comes after them.
pub(super) struct Cut {
    /// The items, in key order.
    pub picked: Vec<Arc<CachedObject>>,
    /// Their encoded length in the page's shape (a protobuf list's head
    /// carries it).
    pub items_len: usize,
    /// The next page's token, when there are more items.
    pub cont: Option<String>,
    /// `remainingItemCount`: the items after this page, for an unfiltered
    /// list (a filtered one cannot say without matching them all).
    pub remaining: Option<u64>,
}

/// The page `ask` cuts from `version`; a page with a next one pins
/// `version` in `store`, so that the next is cut from the same state.
pub(super) fn cut(store: &Store, version: &Arc<Version>, ask: Ask<'_>) -> Cut {
    let prefix = ask.namespace.map(|ns| format!("{ns}/")).unwrap_or_default();
    let start = ask.resume.as_ref().map(|t| t.start.as_str());
    let from = format!("{prefix}{}", start.unwrap_or_default());
    // A list its selectors pin to an index (a kubelet's or a DaemonSet
    // agent's, to its node) walks what is under those values only.
    let mut iter = version.walk(&prefix, &from, ask.selectors);
    let filtered = !ask.selectors.is_empty();
    let limit = ask.limit;
    // Room for what will be picked: all of it, unless a selector drops some.
    let mut picked = Vec::with_capacity(match (limit, filtered) {
        (_, true) => 0,
        (1.., false) => (limit as usize).min(version.objects.len()),
        _ => version.objects.len(),
    });
    let mut last: Option<Arc<str>> = None;
    // The items' length, summed while each object is in cache rather than in
    // a second pass over them all.
    let mut items_len = 0;
    for (k, o) in iter.by_ref() {
        if filtered && !o.matches(ask.selectors) {
            continue;
        }
        items_len += o.item_len_as(ask.view);
        picked.push(o.clone());
        if limit > 0 && picked.len() as i64 >= limit {
            last = Some(k.clone());
            break;
        }
    }
    let mut page = Cut {
        picked,
        items_len,
        cont: None,
        remaining: None,
    };
    let Some(last) = last else {
        return page;
    };
    let namespace = ask.namespace.unwrap_or_default();
    // What was known to be left from this page's start: every object, on a
    // first page of all of them; the token's count, from a page of the same
    // namespace's unfiltered list.
    let known = match &ask.resume {
        _ if filtered => None,
        None if prefix.is_empty() => Some(version.objects.len() as u64),
        Some(ContinueToken {
            left: Some(left), ..
        }) if left.namespace == namespace => Some(left.items),
        _ => None,
    };
    let more = iter.next().is_some();
    let left = match known.map(|n| n.saturating_sub(page.picked.len() as u64)) {
        _ if filtered => u64::from(more),
        // A count the walk contradicts is not trusted: the walk counts.
        Some(n) if (n > 0) == more => n,
        _ if more => 1 + iter.count() as u64,
        _ => 0,
    };
    if left == 0 {
        return page;
    }
    store.pin(version);
    let mut token = ContinueToken::after(version.rv as i64, &last[prefix.len()..]);
    if !filtered {
        page.remaining = Some(left);
        token = token.with_left(Left {
            items: left,
            namespace: namespace.to_string(),
        });
    }
    page.cont = Some(token.encode(Format::R8S));
    page
}

#[cfg(test)]
mod tests;
