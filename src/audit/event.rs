//! One `audit.k8s.io/v1` `Event`, written as kube-apiserver's log backend
//! writes it: Go's JSON (fields in the type's order, empty ones left out,
//! `<`, `>` and `&` escaped, map keys sorted), one line each.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::SystemTime;

use http::HeaderMap;
use serde_json::{Map, Value};

use crate::api::UserInfo;

use super::policy::{Level, Stage};

/// What every event of one request says alike.
#[derive(Debug, Clone)]
pub struct Meta {
    /// `auditID`: the request's `Audit-Id`.
    pub id: String,
    /// `level`.
    pub level: Level,
    /// `requestURI`: the path and query as sent.
    pub request_uri: String,
    /// `verb`.
    pub verb: String,
    /// `user`; `None` before authentication (written `{}`).
    pub user: Option<Arc<UserInfo>>,
    /// `impersonatedUser`, where a client acts as someone else.
    pub impersonated: Option<Arc<UserInfo>>,
    /// `sourceIPs`: `X-Forwarded-For`, `X-Real-Ip`, then the peer.
    pub source_ips: Vec<IpAddr>,
    /// `userAgent`.
    pub user_agent: String,
    /// `objectRef`, for a resource request.
    pub object: Option<ObjectRef>,
    /// `requestReceivedTimestamp`.
    pub received: SystemTime,
}

/// `objectRef`: the object or collection a request is for.
#[derive(Debug, Clone, Default)]
pub struct ObjectRef {
    /// `resource`.
    pub resource: String,
    /// `namespace`.
    pub namespace: String,
    /// `name`.
    pub name: String,
    /// `apiGroup`.
    pub api_group: String,
    /// `apiVersion`.
    pub api_version: String,
    /// `subresource`.
    pub subresource: String,
}

/// `responseStatus`: the code, and for a `Status` answer its fields.
#[derive(Debug, Clone, Default)]
pub struct ResponseStatus {
    /// `code`.
    pub code: u16,
    /// `status`: `Success` or `Failure`, for a `Status` answer.
    pub status: &'static str,
    /// `message`.
    pub message: String,
    /// `reason`.
    pub reason: &'static str,
    /// `details`.
    pub details: Option<Box<Map<String, Value>>>,
}

impl ResponseStatus {
    /// A response that is not a `Status`: its code alone.
    pub fn code(code: u16) -> Self {
        ResponseStatus {
            code,
            ..Default::default()
        }
    }
}

/// The longest `userAgent` an event keeps, as the apiserver truncates it.
const MAX_USER_AGENT: usize = 1024;

/// `userAgent` as the apiserver records it (over 1 KiB: cut, and marked).
pub fn user_agent(headers: &HeaderMap) -> String {
    let ua = headers
        .get(http::header::USER_AGENT)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default();
    if ua.len() > MAX_USER_AGENT {
        let mut end = MAX_USER_AGENT;
        while !ua.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...TRUNCATED", &ua[..end])
    } else {
        ua
    }
}

/// The request's source IPs as the apiserver lists them (`utilnet.SourceIPs`):
/// every valid `X-Forwarded-For` entry, `X-Real-Ip` if not among them, then
/// the peer unless it is the last already.
pub fn source_ips(headers: &HeaderMap, peer: IpAddr) -> Vec<IpAddr> {
    let mut ips: Vec<IpAddr> = Vec::new();
    if let Some(v) = headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
        ips.extend(v.split(',').filter_map(|p| p.trim().parse::<IpAddr>().ok()));
    }
    if let Some(ip) = headers
        .get("x-real-ip")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<IpAddr>().ok())
        && !ips.contains(&ip)
    {
        ips.push(ip);
    }
    let peer = peer.to_canonical();
    if ips.last() != Some(&peer) {
        ips.push(peer);
    }
    ips
}

/// A new audit ID: a random (version 4) UUID, as the apiserver makes one.
pub fn new_id() -> String {
    let mut b = fastrand::u128(..).to_be_bytes();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let mut s = String::with_capacity(36);
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push(char::from(HEX[usize::from(byte >> 4)]));
        s.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    s
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `s` as a JSON string, escaped as Go's encoder escapes it.
pub fn go_string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, c) in s.char_indices() {
        let esc: Option<&[u8]> = match c {
            '"' => Some(b"\\\""),
            '\\' => Some(b"\\\\"),
            '\n' => Some(b"\\n"),
            '\r' => Some(b"\\r"),
            '\t' => Some(b"\\t"),
            '\u{8}' => Some(b"\\b"),
            '\u{c}' => Some(b"\\f"),
            _ => None,
        };
        let unicode = matches!(
            c,
            '\0'..='\u{1f}' | '<' | '>' | '&' | '\u{2028}' | '\u{2029}'
        );
        if esc.is_none() && !unicode {
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
        match esc {
            Some(e) => out.extend_from_slice(e),
            None => {
                let n = c as u32;
                out.extend_from_slice(b"\\u");
                for shift in [12, 8, 4, 0] {
                    out.push(HEX[((n >> shift) & 0xf) as usize]);
                }
            }
        }
        start = i + c.len_utf8();
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// A JSON object being written: a comma before every field but the first.
struct Obj<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> Obj<'a> {
    fn open(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        Obj { out, first: true }
    }

    /// Writes `"key":` and returns the buffer for the value.
    fn key(&mut self, key: &str) -> &mut Vec<u8> {
        if !std::mem::take(&mut self.first) {
            self.out.push(b',');
        }
        go_string(self.out, key);
        self.out.push(b':');
        self.out
    }

    /// `"key":"value"`, unless `value` is empty (Go's `omitempty`).
    fn str(&mut self, key: &str, value: &str) {
        if !value.is_empty() {
            let out = self.key(key);
            go_string(out, value);
        }
    }

    fn close(self) {
        self.out.push(b'}');
    }
}

fn strings(out: &mut Vec<u8>, items: impl IntoIterator<Item = impl AsRef<str>>) {
    out.push(b'[');
    for (i, s) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        go_string(out, s.as_ref());
    }
    out.push(b']');
}

/// A `UserInfo` object: `{}` for none.
fn user(out: &mut Vec<u8>, u: Option<&UserInfo>) {
    let mut o = Obj::open(out);
    if let Some(u) = u {
        o.str("username", &u.name);
        o.str("uid", &u.uid);
        if !u.groups.is_empty() {
            strings(o.key("groups"), &u.groups);
        }
        if !u.extra.is_empty() {
            let mut extra = Obj::open(o.key("extra"));
            for (k, v) in &u.extra {
                strings(extra.key(k), v);
            }
            extra.close();
        }
    }
    o.close();
}

/// A `Status` or any JSON value as Go writes it (keys in the map's order:
/// the apiserver's own for the maps r8s makes).
fn value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::String(s) => go_string(out, s),
        Value::Array(a) => {
            out.push(b'[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                value(out, x);
            }
            out.push(b']');
        }
        Value::Object(m) => {
            out.push(b'{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                go_string(out, k);
                out.push(b':');
                value(out, x);
            }
            out.push(b'}');
        }
        other => out.extend_from_slice(other.to_string().as_bytes()),
    }
}

/// One stage's event.
pub struct Stamp<'a> {
    /// The stage.
    pub stage: Stage,
    /// `responseStatus`, once there is a response.
    pub status: Option<&'a ResponseStatus>,
    /// `responseObject`: the answer's JSON (level `RequestResponse`).
    pub response_object: Option<&'a [u8]>,
    /// `stageTimestamp`.
    pub at: SystemTime,
    /// `annotations`, sorted by key.
    pub annotations: &'a [(&'a str, &'a str)],
}

/// Appends the event, and a newline.
pub fn write(out: &mut Vec<u8>, m: &Meta, s: &Stamp<'_>) {
    let mut o = Obj::open(out);
    o.str("kind", "Event");
    o.str("apiVersion", "audit.k8s.io/v1");
    o.str("level", m.level.as_str());
    o.str("auditID", &m.id);
    o.str("stage", s.stage.as_str());
    o.str("requestURI", &m.request_uri);
    o.str("verb", &m.verb);
    user(o.key("user"), m.user.as_deref());
    if let Some(imp) = &m.impersonated {
        user(o.key("impersonatedUser"), Some(imp));
    }
    if !m.source_ips.is_empty() {
        strings(
            o.key("sourceIPs"),
            m.source_ips.iter().map(ToString::to_string),
        );
    }
    o.str("userAgent", &m.user_agent);
    if let Some(r) = &m.object {
        let mut obj = Obj::open(o.key("objectRef"));
        obj.str("resource", &r.resource);
        obj.str("namespace", &r.namespace);
        obj.str("name", &r.name);
        obj.str("apiGroup", &r.api_group);
        obj.str("apiVersion", &r.api_version);
        obj.str("subresource", &r.subresource);
        obj.close();
    }
    if let Some(st) = s.status {
        let mut rs = Obj::open(o.key("responseStatus"));
        rs.key("metadata").extend_from_slice(b"{}");
        rs.str("status", st.status);
        rs.str("message", &st.message);
        rs.str("reason", st.reason);
        if let Some(d) = &st.details {
            let out = rs.key("details");
            let mut det = Obj::open(out);
            for (k, v) in d.iter() {
                value(det.key(k), v);
            }
            det.close();
        }
        rs.key("code")
            .extend_from_slice(st.code.to_string().as_bytes());
        rs.close();
    }
    if let Some(body) = s.response_object {
        o.key("responseObject").extend_from_slice(body);
    }
    o.str(
        "requestReceivedTimestamp",
        &humantime::format_rfc3339_micros(m.received).to_string(),
    );
    o.str(
        "stageTimestamp",
        &humantime::format_rfc3339_micros(s.at).to_string(),
    );
    if !s.annotations.is_empty() {
        let mut an = Obj::open(o.key("annotations"));
        for (k, v) in s.annotations {
            let out = an.key(k);
            go_string(out, v);
        }
        an.close();
    }
    o.close();
    out.push(b'\n');
}

#[cfg(test)]
#[path = "event_tests.rs"]
mod tests;
