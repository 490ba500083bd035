//! Impersonation as kube-apiserver's filter reads and checks it, both ways:
//! a certificate caller's `Impersonate-*` headers (which r8s checks, as the
//! apiserver's legacy impersonation filter does), and the headers r8s sends
//! upstream for a certificate caller, read back as the apiserver will read
//! them before they leave ([`Forwarded::headers`]): an identity that would
//! arrive changed is never sent.
//!
//! Headers are read as Go's `net/http` and the filter read them: the first
//! `Impersonate-User` and `Impersonate-Uid` (empty: none), every
//! `Impersonate-Group`, every `Impersonate-Extra-<key>` with the key
//! lower-cased then percent-decoded (`url.PathUnescape`; a malformed escape
//! keeps the key as sent); values are bytes, taken whole, never dropped.

use std::collections::BTreeMap;

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::api::UserInfo;
use crate::api::request::Scope;
use crate::auth::review::Attributes;
use crate::upstream::version::KubeVersion;

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";
const UID: &str = "impersonate-uid";
const EXTRA: &str = "impersonate-extra-";

const ANONYMOUS: &str = "system:anonymous";
const AUTHENTICATED: &str = "system:authenticated";
const UNAUTHENTICATED: &str = "system:unauthenticated";

/// What the impersonation filter of the upstream's version reads and
/// answers, where versions differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Filter {
    /// `Impersonate-Uid` is read (1.22+; before, it is no header of the filter's).
    pub uid: bool,
    /// Groups, a UID or extras without a user are a 400 (1.35+); before,
    /// the filter's 500.
    pub bad_request: bool,
}

impl Filter {
    /// The current apiserver's (what r8s assumes before it knows the upstream's).
    pub const CURRENT: Filter = Filter {
        uid: true,
        bad_request: true,
    };

    /// The filter of the apiserver that reported `version`.
    pub fn of(version: Option<KubeVersion>) -> Filter {
        match version {
            None => Filter::CURRENT,
            Some(v) => Filter {
                uid: v.at_least(1, 22),
                bad_request: v.at_least(1, 35),
            },
        }
    }
}

/// Who a request's `Impersonate-*` headers ask to act as, as the filter's
/// `processImpersonationHeaders` reads them (nothing defaulted yet).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Wanted {
    /// `Impersonate-User` (the first, not empty).
    pub name: String,
    /// `Impersonate-Uid` (the first; empty: none).
    pub uid: String,
    /// Every `Impersonate-Group`, in order.
    pub groups: Vec<String>,
    /// Every `Impersonate-Extra-<key>`, by decoded key.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// What a request's headers ask of impersonation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    /// Nothing: the caller acts as itself.
    Nothing,
    /// To act as this user.
    As(Wanted),
    /// Groups, a UID or extras without a user: the filter's 400 (500 before
    /// 1.35), in its words.
    WithoutUser(String),
    /// A value or key r8s cannot hold as the text the apiserver reads (bytes
    /// that are not UTF-8): refused, as r8s could not check it.
    Unreadable(&'static str),
}

/// Go's `url.PathUnescape`: `%XX` decoded (`+` stays), `None` for a
/// malformed escape.
fn path_unescape(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3)?;
            let v = u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
            out.push(v);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
}

/// An extra key as the filter decodes it from a header name's tail.
fn extra_key(tail: &str) -> Result<String, &'static str> {
    let lower = tail.to_lowercase();
    match path_unescape(&lower) {
        // Malformed: recorded as sent, as the filter does.
        None => Ok(lower),
        Some(bytes) => String::from_utf8(bytes)
            .map_err(|_| "an Impersonate-Extra- key that decodes to bytes that are not UTF-8"),
    }
}

fn text(v: &HeaderValue) -> Result<String, &'static str> {
    String::from_utf8(v.as_bytes().to_vec())
        .map_err(|_| "an impersonation header value that is not UTF-8")
}

/// Reads `headers` as the impersonation filter of `filter` does.
pub fn read(headers: &HeaderMap, filter: Filter) -> Asked {
    match read_wanted(headers, filter) {
        Ok(a) => a,
        Err(why) => Asked::Unreadable(why),
    }
}

fn read_wanted(headers: &HeaderMap, filter: Filter) -> Result<Asked, &'static str> {
    let first = |name: &str| headers.get(name).map(text).transpose();
    let name = first(USER)?.unwrap_or_default();
    let uid = match filter.uid {
        true => first(UID)?.unwrap_or_default(),
        false => String::new(),
    };
    let groups = headers
        .get_all(GROUP)
        .iter()
        .map(text)
        .collect::<Result<Vec<_>, _>>()?;
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // Go's canonical name (`Impersonate-Extra-Foo`) lower-cased again by
    // the filter: the lower-case name hyper keeps gives the same tail.
    for name in headers.keys() {
        let Some(tail) = name.as_str().strip_prefix(EXTRA) else {
            continue;
        };
        let key = extra_key(tail)?;
        for v in headers.get_all(name) {
            extra.entry(key.clone()).or_default().push(text(v)?);
        }
    }
    if name.is_empty() {
        if !groups.is_empty() || !uid.is_empty() || !extra.is_empty() {
            return Ok(Asked::WithoutUser(format!(
                "requested impersonation of groups {groups:?}, uid {uid:?} or extra {:?} \
                 without impersonating a user name",
                extra.keys().collect::<Vec<_>>()
            )));
        }
        return Ok(Asked::Nothing);
    }
    Ok(Asked::As(Wanted {
        name,
        uid,
        groups,
        extra,
    }))
}

/// `system:serviceaccount:NS:NAME` as the apiserver splits it: a DNS-1123
/// label and a DNS-1123 subdomain, or `None` (a user of that name).
pub fn service_account(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix("system:serviceaccount:")?;
    let mut parts = rest.split(':');
    let (ns, sa) = (parts.next()?, parts.next()?);
    if parts.next().is_some() || !dns1123_label(ns) || !dns1123_subdomain(sa) {
        return None;
    }
    Some((ns, sa))
}

fn dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

fn dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(dns1123_label)
}

/// The reviews the apiserver's legacy impersonation check asks of the
/// requestor, in its order: the user (or service account), the UID, each
/// group, each extra value.
pub fn checks(w: &Wanted) -> Vec<Attributes> {
    let check = |group: &str, resource: &str, ns: &str, sub: &str, name: &str| Attributes {
        group: group.to_string(),
        version: "v1".to_string(),
        resource: resource.to_string(),
        scope: Scope {
            verb: "impersonate",
            namespace: ns.to_string(),
            subresource: sub.to_string(),
            name: name.to_string(),
            ..Scope::default()
        },
    };
    let mut out = vec![match service_account(&w.name) {
        Some((ns, sa)) => check("", "serviceaccounts", ns, "", sa),
        None => check("", "users", "", "", &w.name),
    }];
    if !w.uid.is_empty() {
        out.push(check("authentication.k8s.io", "uids", "", "", &w.uid));
    }
    out.extend(w.groups.iter().map(|g| check("", "groups", "", "", g)));
    for (k, vs) in &w.extra {
        out.extend(
            vs.iter()
                .map(|v| check("authentication.k8s.io", "userextras", "", k, v)),
        );
    }
    out
}

/// The user the filter makes of `w` once every check allowed it: a
/// service account's groups where none were asked for; `system:anonymous`
/// in `system:unauthenticated`, any other user in `system:authenticated`
/// unless asked to be in `system:unauthenticated`.
pub fn acting_as(w: Wanted) -> UserInfo {
    let mut groups = w.groups;
    if groups.is_empty()
        && let Some((ns, _)) = service_account(&w.name)
    {
        groups = vec![
            "system:serviceaccounts".to_string(),
            format!("system:serviceaccounts:{ns}"),
        ];
    }
    let ensure = |groups: &mut Vec<String>, g: &str| {
        if !groups.iter().any(|x| x == g) {
            groups.push(g.to_string());
        }
    };
    if w.name == ANONYMOUS {
        ensure(&mut groups, UNAUTHENTICATED);
    } else if !groups.iter().any(|g| g == UNAUTHENTICATED) {
        ensure(&mut groups, AUTHENTICATED);
    }
    UserInfo {
        name: w.name,
        uid: w.uid,
        groups,
        extra: w.extra,
    }
}

/// `Impersonate-Extra-<key>` for `key`, whose tail the filter's
/// lower-casing and unescaping turn back into `key`: every byte but
/// lower-case letters, digits, `-`, `_`, `.` and `~` percent-encoded
/// (upper-case letters too, as the filter lower-cases the name).
fn extra_header(key: &str) -> String {
    let mut out = String::from(EXTRA);
    for b in key.bytes() {
        if b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02x}"));
        }
    }
    out
}

/// Why an identity cannot leave r8s unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unforwardable {
    /// A value no header can carry (a control byte, a line break).
    #[error("{0} cannot be sent as a header value (control or non-visible bytes)")]
    NotAHeader(&'static str),
    /// What the apiserver would read back is another identity.
    #[error("the apiserver would read it as another identity ({0})")]
    Changed(String),
}

/// A certificate caller's identity on its way upstream in `Impersonate-*`
/// headers: [`Forwarded::headers`] is the only way to make them, and makes
/// them only where the apiserver reads them back as this very user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forwarded<'a> {
    /// Who it is.
    pub user: &'a UserInfo,
    /// The upstream's filter, which reads the headers.
    pub filter: Filter,
}

impl Forwarded<'_> {
    /// The headers, read back as the apiserver will read them (trimmed of
    /// spaces and tabs, as HTTP header parsing trims them, then as the
    /// filter reads them) and compared with the user: equal, or refused.
    pub fn headers(&self) -> Result<HeaderMap, Unforwardable> {
        let user = self.user;
        let mut out = HeaderMap::new();
        let mut add = |name: HeaderName, what: &'static str, value: &str| {
            let v = HeaderValue::from_str(value).map_err(|_| Unforwardable::NotAHeader(what))?;
            out.append(name, v);
            Ok(())
        };
        add(HeaderName::from_static(USER), "the user name", &user.name)?;
        for g in &user.groups {
            add(HeaderName::from_static(GROUP), "a group", g)?;
        }
        if !user.uid.is_empty() {
            add(HeaderName::from_static(UID), "the UID", &user.uid)?;
        }
        for (k, values) in &user.extra {
            let name = HeaderName::from_bytes(extra_header(k).as_bytes())
                .map_err(|_| Unforwardable::NotAHeader("an extra key"))?;
            for v in values {
                add(name.clone(), "an extra value", v)?;
            }
        }
        let arrives = match read(&trimmed(&out), self.filter) {
            Asked::As(w) => acting_as(w),
            other => return Err(Unforwardable::Changed(format!("{other:?}"))),
        };
        if arrives != *user {
            return Err(Unforwardable::Changed(difference(user, &arrives)));
        }
        Ok(out)
    }
}

/// Header values as an HTTP parser hands them on: without the spaces and
/// tabs at either end.
fn trimmed(headers: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(headers.len());
    for (k, v) in headers {
        let b = v.as_bytes();
        let start = b.iter().position(|c| !matches!(c, b' ' | b'\t'));
        let end = b.iter().rposition(|c| !matches!(c, b' ' | b'\t'));
        let t = match (start, end) {
            (Some(s), Some(e)) => &b[s..=e],
            _ => &[],
        };
        if let Ok(v) = HeaderValue::from_bytes(t) {
            out.append(k.clone(), v);
        }
    }
    out
}

/// Which part of the identity would change (for the 403's message).
fn difference(sent: &UserInfo, arrives: &UserInfo) -> String {
    if sent.name != arrives.name {
        return format!("user {:?} would arrive as {:?}", sent.name, arrives.name);
    }
    if sent.groups != arrives.groups {
        return format!(
            "groups {:?} would arrive as {:?}",
            sent.groups, arrives.groups
        );
    }
    if sent.uid != arrives.uid {
        return format!("uid {:?} would arrive as {:?}", sent.uid, arrives.uid);
    }
    format!(
        "extra keys {:?} would arrive as {:?}",
        sent.extra.keys().collect::<Vec<_>>(),
        arrives.extra.keys().collect::<Vec<_>>()
    )
}

#[cfg(test)]
mod tests;
