//! One `audit.k8s.io/v1` `Event`, written as kube-apiserver's log backend
//! writes it: Go's JSON (fields in the type's order, empty ones left out,
//! `<`, `>` and `&` escaped, map keys sorted), one line each.

use std::borrow::Cow;
use std::io::Write as _;
use std::net::IpAddr;
use std::time::SystemTime;

use http::{HeaderMap, HeaderName};
use serde_json::{Map, Value};

use crate::api::UserInfo;

use super::policy::{Level, Stage};

/// What every event of one request says alike, borrowed from the request
/// while [`Frozen::new`] writes it once.
#[derive(Debug, Clone)]
pub struct Meta<'a> {
    /// `auditID`: the request's `Audit-Id`.
    pub id: &'a str,
    /// `level`.
    pub level: Level,
    /// `requestURI`: the path and query as sent.
    pub request_uri: &'a str,
    /// `verb`.
    pub verb: &'a str,
    /// `user`; `None` before authentication (written `{}`).
    pub user: Option<&'a UserInfo>,
    /// `impersonatedUser`, where a client acts as someone else.
    pub impersonated: Option<&'a UserInfo>,
    /// `sourceIPs`: `X-Forwarded-For`, `X-Real-Ip`, then the peer.
    pub source_ips: &'a [IpAddr],
    /// `userAgent`.
    pub user_agent: &'a str,
    /// `objectRef`, for a resource request.
    pub object: Option<ObjectRef<'a>>,
    /// `requestReceivedTimestamp`.
    pub received: SystemTime,
}

/// `objectRef`: the object or collection a request is for.
#[derive(Debug, Clone, Copy, Default)]
pub struct ObjectRef<'a> {
    /// `resource`.
    pub resource: &'a str,
    /// `namespace`.
    pub namespace: &'a str,
    /// `name`.
    pub name: &'a str,
    /// `apiGroup`.
    pub api_group: &'a str,
    /// `apiVersion`.
    pub api_version: &'a str,
    /// `subresource`.
    pub subresource: &'a str,
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
pub fn user_agent(headers: &HeaderMap) -> Cow<'_, str> {
    let Some(v) = headers.get(http::header::USER_AGENT) else {
        return Cow::Borrowed("");
    };
    // (Nearly always visible ASCII: borrowed as it is.)
    let ua = match v.to_str() {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(v.as_bytes()),
    };
    if ua.len() <= MAX_USER_AGENT {
        return ua;
    }
    let mut end = MAX_USER_AGENT;
    while !ua.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}...TRUNCATED", &ua[..end]))
}

/// The request's source IPs as the apiserver lists them (`utilnet.SourceIPs`):
/// every valid `X-Forwarded-For` entry, `X-Real-Ip` if not among them, then
/// the peer unless it is the last already.
pub fn source_ips(headers: &HeaderMap, peer: IpAddr) -> Vec<IpAddr> {
    // (Names made once: a name given as a string is parsed at each lookup.)
    const FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
    const REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");
    let mut ips: Vec<IpAddr> = Vec::with_capacity(1);
    if let Some(v) = headers.get(FORWARDED_FOR).and_then(|v| v.to_str().ok()) {
        ips.extend(v.split(',').filter_map(|p| p.trim().parse::<IpAddr>().ok()));
    }
    if let Some(ip) = headers
        .get(REAL_IP)
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

/// The bytes Go's encoder may escape: in a string (`[0]`) or in raw JSON
/// (`[1]`). 0xE2 starts U+2028 and U+2029, checked where one is found.
const SPECIAL: [[bool; 256]; 2] = {
    let mut t = [[false; 256]; 2];
    let mut b = 0;
    while b < 0x20 {
        t[0][b] = true;
        b += 1;
    }
    let mut i = 0;
    let both = [b'<', b'>', b'&', 0xE2];
    while i < both.len() {
        t[0][both[i] as usize] = true;
        t[1][both[i] as usize] = true;
        i += 1;
    }
    t[0][b'"' as usize] = true;
    t[0][b'\\' as usize] = true;
    t
};

/// Appends `s` as a JSON string, escaped as Go's encoder escapes it.
pub fn go_string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    go_escaped(out, s.as_bytes(), true);
    out.push(b'"');
}

/// Appends `bytes` (UTF-8) with Go's escapes: in a string (`quoted`) all of
/// them; in raw JSON (an answer carried as `responseObject`, already valid
/// JSON) only `<`, `>`, `&`, U+2028 and U+2029, which appear only inside
/// its strings. Runs of eight bytes with nothing to escape (nearly all of
/// an event; a shorter tail padded) are skipped a word at a time.
fn go_escaped(out: &mut Vec<u8>, bytes: &[u8], quoted: bool) {
    let special = &SPECIAL[usize::from(!quoted)];
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let rest = &bytes[i..];
        let mut word = [b'a'; 8];
        let n = rest.len().min(8);
        word[..n].copy_from_slice(&rest[..n]);
        if !may_escape(u64::from_le_bytes(word), quoted) {
            i += n;
            continue;
        }
        let b = bytes[i];
        if !special[usize::from(b)] {
            i += 1;
            continue;
        }
        let esc: Option<&[u8]> = match b {
            b'"' if quoted => Some(b"\\\""),
            b'\\' if quoted => Some(b"\\\\"),
            b'\n' if quoted => Some(b"\\n"),
            b'\r' if quoted => Some(b"\\r"),
            b'\t' if quoted => Some(b"\\t"),
            0x08 if quoted => Some(b"\\b"),
            0x0c if quoted => Some(b"\\f"),
            b'<' => Some(b"\\u003c"),
            b'>' => Some(b"\\u003e"),
            b'&' => Some(b"\\u0026"),
            0xE2 if bytes.get(i + 1) == Some(&0x80)
                && matches!(bytes.get(i + 2), Some(0xA8 | 0xA9)) =>
            {
                Some(if bytes[i + 2] == 0xA8 {
                    b"\\u2028"
                } else {
                    b"\\u2029"
                })
            }
            c if c < 0x20 && quoted => None,
            _ => {
                i += 1;
                continue;
            }
        };
        out.extend_from_slice(&bytes[start..i]);
        match esc {
            Some(e) => out.extend_from_slice(e),
            None => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0xf)]);
            }
        }
        i += if b == 0xE2 { 3 } else { 1 };
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
}

/// Whether any of the eight bytes in `word` may need escaping (never false
/// where one does; the byte loop decides).
fn may_escape(word: u64, quoted: bool) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // A byte of `v` is zero (or, with `n`, below `n`): exact for "any".
    let below = |v: u64, n: u8| v.wrapping_sub(ONES * u64::from(n)) & !v & HIGH;
    let is = |c: u8| below(word ^ (ONES * u64::from(c)), 1);
    let mut m = is(b'<') | is(b'>') | is(b'&') | is(0xE2);
    if quoted {
        m |= below(word, 0x20) | is(b'"') | is(b'\\');
    }
    m != 0
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

    /// An object whose opening and first fields are written already.
    fn resume(out: &'a mut Vec<u8>) -> Self {
        Obj { out, first: false }
    }

    /// Writes `"key":` (a field name of the type's: nothing to escape) and
    /// returns the buffer for the value.
    fn key(&mut self, key: &'static str) -> &mut Vec<u8> {
        debug_assert!(!key.bytes().any(|b| SPECIAL[0][usize::from(b)]));
        if !std::mem::take(&mut self.first) {
            self.out.push(b',');
        }
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
        self.out
    }

    /// Writes `"key":` for a map's key, escaped, and returns the buffer for
    /// the value.
    fn map_key(&mut self, key: &str) -> &mut Vec<u8> {
        if !std::mem::take(&mut self.first) {
            self.out.push(b',');
        }
        go_string(self.out, key);
        self.out.push(b':');
        self.out
    }

    /// `"key":"value"`, unless `value` is empty (Go's `omitempty`).
    fn str(&mut self, key: &'static str, value: &str) {
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
                strings(extra.map_key(k), v);
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
    /// `responseObject`: the answer's JSON, compact (level
    /// `RequestResponse`); escaped as Go escapes it as it is written.
    pub response_object: Option<&'a [u8]>,
    /// `stageTimestamp`.
    pub at: SystemTime,
    /// `annotations`, sorted by key.
    pub annotations: &'a [(&'a str, &'a str)],
}

/// A request's shared fields, written once: each of its events is these
/// bytes around its own stage, status, time and annotations (one escaping
/// pass and one allocation a request, where writing each event whole cost
/// a cached GET a third of its CPU; BENCHMARKS.md, "What auditing costs").
#[derive(Debug, Clone)]
pub struct Frozen {
    /// `{"kind":...,"stage":"` · `","requestURI":...objectRef` · `,"requestReceivedTimestamp":"..."`.
    bytes: Vec<u8>,
    /// Where the second and third parts start.
    cuts: [usize; 2],
    /// `requestReceivedTimestamp` (a `RequestReceived` event's stage time
    /// too, copied).
    received: SystemTime,
}

impl Frozen {
    /// Writes `m`'s fields.
    pub fn new(m: &Meta<'_>) -> Frozen {
        let mut out = Vec::with_capacity(768);
        let mut o = Obj::open(&mut out);
        o.str("kind", "Event");
        o.str("apiVersion", "audit.k8s.io/v1");
        o.str("level", m.level.as_str());
        o.str("auditID", m.id);
        o.key("stage").push(b'"');
        let first = out.len();
        let mut o = Obj::resume(&mut out);
        o.out.push(b'"');
        o.str("requestURI", m.request_uri);
        o.str("verb", m.verb);
        user(o.key("user"), m.user);
        if let Some(imp) = m.impersonated {
            user(o.key("impersonatedUser"), Some(imp));
        }
        if !m.source_ips.is_empty() {
            // (An address has nothing to escape; writing to a Vec cannot fail.)
            let out = o.key("sourceIPs");
            out.push(b'[');
            for (i, ip) in m.source_ips.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.push(b'"');
                address(out, *ip);
                out.push(b'"');
            }
            out.push(b']');
        }
        o.str("userAgent", m.user_agent);
        if let Some(r) = &m.object {
            let mut obj = Obj::open(o.key("objectRef"));
            obj.str("resource", r.resource);
            obj.str("namespace", r.namespace);
            obj.str("name", r.name);
            obj.str("apiGroup", r.api_group);
            obj.str("apiVersion", r.api_version);
            obj.str("subresource", r.subresource);
            obj.close();
        }
        let second = out.len();
        timestamp(&mut out, "requestReceivedTimestamp", m.received);
        Frozen {
            bytes: out,
            cuts: [first, second],
            received: m.received,
        }
    }
}

/// An address as Go writes it: IPv4 dotted, by hand (through `fmt` it was
/// a tenth of a GET's auditing); IPv6 as `Display` writes it, which is
/// Go's form too (RFC 5952).
fn address(out: &mut Vec<u8>, ip: IpAddr) {
    match ip {
        IpAddr::V4(v4) => {
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                if octet >= 100 {
                    out.push(b'0' + octet / 100);
                }
                if octet >= 10 {
                    out.push(b'0' + octet / 10 % 10);
                }
                out.push(b'0' + octet % 10);
            }
        }
        // (Writing to a Vec cannot fail.)
        IpAddr::V6(v6) => {
            let _ = write!(out, "{v6}");
        }
    }
}

/// The length of `"2006-01-02T15:04:05.000000Z"`, quotes included.
const QUOTED_TIME: usize = 29;

/// `,"key":"<RFC 3339 time, microseconds>"`.
fn timestamp(out: &mut Vec<u8>, key: &str, t: SystemTime) {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":\"");
    rfc3339_micros(out, t);
    out.push(b'"');
}

/// `t` as `metav1.MicroTime` writes it (`2006-01-02T15:04:05.000000Z`), in
/// place: the date from the days since 1970 (Hinnant's `civil_from_days`),
/// where formatting through `fmt` was a tenth of writing a GET's events.
fn rfc3339_micros(out: &mut Vec<u8>, t: SystemTime) {
    let since = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let two = |out: &mut Vec<u8>, v: u64| {
        out.extend_from_slice(&[b'0' + (v / 10 % 10) as u8, b'0' + (v % 10) as u8]);
    };
    let year = year.clamp(0, 9999) as u64;
    let micros = u64::from(since.subsec_micros());
    two(out, year / 100);
    two(out, year % 100);
    out.push(b'-');
    two(out, month as u64);
    out.push(b'-');
    two(out, day as u64);
    out.push(b'T');
    two(out, rem / 3_600);
    out.push(b':');
    two(out, rem % 3_600 / 60);
    out.push(b':');
    two(out, rem % 60);
    out.push(b'.');
    two(out, micros / 10_000);
    two(out, micros / 100 % 100);
    two(out, micros % 100);
    out.push(b'Z');
}

/// Appends the event, and a newline.
pub fn write(out: &mut Vec<u8>, f: &Frozen, s: &Stamp<'_>) {
    let [first, second] = f.cuts;
    out.extend_from_slice(&f.bytes[..first]);
    out.extend_from_slice(s.stage.as_str().as_bytes());
    out.extend_from_slice(&f.bytes[first..second]);
    let mut o = Obj::resume(out);
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
                value(det.map_key(k), v);
            }
            det.close();
        }
        let (mut digits, mut k, mut c) = ([0u8; 5], 5, st.code);
        loop {
            k -= 1;
            digits[k] = b'0' + (c % 10) as u8;
            c /= 10;
            if c == 0 {
                break;
            }
        }
        rs.key("code").extend_from_slice(&digits[k..]);
        rs.close();
    }
    if let Some(body) = s.response_object {
        go_escaped(o.key("responseObject"), body, false);
    }
    o.out.extend_from_slice(&f.bytes[second..]);
    if s.at == f.received {
        o.out.extend_from_slice(b",\"stageTimestamp\":");
        o.out
            .extend_from_slice(&f.bytes[f.bytes.len() - QUOTED_TIME..]);
    } else {
        timestamp(o.out, "stageTimestamp", s.at);
    }
    if !s.annotations.is_empty() {
        let mut an = Obj::open(o.key("annotations"));
        for (k, v) in s.annotations {
            let out = an.map_key(k);
            go_string(out, v);
        }
        an.close();
    }
    o.close();
    out.push(b'\n');
}

#[cfg(test)]
mod tests;
