//! Kubernetes `Status` objects: the one shape every error takes on the wire.
//!
//! Both r8s and the built-in upstream build their failures here, so that
//! clients see kube-apiserver's exact bodies (`apierrors.StatusError` as
//! `responsewriters.ErrorNegotiated` writes it: code, reason, message,
//! details, `Retry-After`).

use std::borrow::Cow;

use bytes::{Bytes, BytesMut};

use super::media::ErrorEncoding;
use http::{HeaderValue, Response, StatusCode, header};
use serde_json::{Map, Value, json};

/// A `details.causes[]` entry of a `Status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// Machine-readable reason, e.g. `FieldValueForbidden`.
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
    /// The field the cause is about, if any.
    pub field: Option<String>,
}

/// What a request acts on, as an authorizer sees it (for 403 messages).
#[derive(Debug, Clone, Copy, Default)]
pub struct Target<'a> {
    /// API group (empty: core).
    pub group: &'a str,
    /// Resource (plural).
    pub resource: &'a str,
    /// Subresource, if any.
    pub subresource: Option<&'a str>,
    /// Namespace (None: cluster scope).
    pub namespace: Option<&'a str>,
    /// Object name, if any.
    pub name: Option<&'a str>,
}

/// The `Status` a response of r8s's own carries, kept on it (a response
/// extension) for the audit event that records its fields.
#[derive(Debug, Clone)]
pub struct Sent(pub std::sync::Arc<Status>);

/// A failure answered as a Kubernetes `Status` object.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    /// HTTP status code (also `.code` in the body).
    pub code: u16,
    /// `.reason`; empty for the apiserver's reason-less errors (e.g. its 500s).
    pub reason: &'static str,
    /// `.message`.
    pub message: String,
    /// `.details`, if any, as a JSON object.
    pub details: Option<Box<Map<String, Value>>>,
    /// `.metadata.continue` (only the 410 for an expired continue token sets it).
    pub continue_token: Option<String>,
    /// `Retry-After` header and `details.retryAfterSeconds`.
    pub retry_after: Option<u32>,
    /// `X-Content-Type-Options: nosniff`, which kube-apiserver's authorization
    /// 403 (`responsewriters.Forbidden`) sets and its other errors do not.
    pub nosniff: bool,
}

impl Status {
    /// A status with no details.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Status {
            code,
            reason,
            message: message.into(),
            details: None,
            continue_token: None,
            retry_after: None,
            nosniff: false,
        }
    }

    /// 400 `BadRequest`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 413 `RequestEntityTooLarge`: a write body over the apiserver's limit.
    pub fn entity_too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    /// 404 `NotFound` for a named object: `pods "x" not found`.
    pub fn not_found(resource: &str, name: &str) -> Self {
        Self::not_found_in("", resource, name)
    }

    /// 404 `NotFound` for a resource of `group`, as kube-apiserver words it:
    /// the group-qualified resource (`widgets.example.com "x" not found`)
    /// and `details.group` (none for the legacy group).
    pub fn not_found_in(group: &str, resource: &str, name: &str) -> Self {
        let qualified = if group.is_empty() {
            Cow::Borrowed(resource)
        } else {
            Cow::Owned(format!("{resource}.{group}"))
        };
        let mut d = Map::new();
        if !name.is_empty() {
            d.insert("name".into(), json!(name));
        }
        if !group.is_empty() {
            d.insert("group".into(), json!(group));
        }
        d.insert("kind".into(), json!(resource));
        Self::new(404, "NotFound", format!("{qualified} \"{name}\" not found")).with_details_map(d)
    }

    /// 404 for a path nothing serves (the apiserver's bare 404).
    pub fn path_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details_map(Map::new())
    }

    /// 405 for a verb a resource does not support.
    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
        .with_details_map(Map::new())
    }

    /// 409 `AlreadyExists`.
    pub fn already_exists(resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{resource} \"{name}\" already exists"),
        )
        .with_details(name, resource)
    }

    /// 409 `Conflict` for an update with a stale `metadata.resourceVersion`.
    pub fn conflict(resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {resource} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            ),
        )
        .with_details(name, resource)
    }

    /// 410 `Expired`.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 422 `Invalid` for `ListOptions`, with one cause per violation (apiserver format).
    pub fn invalid_list_options(causes: Vec<Cause>) -> Self {
        Self::invalid("meta.k8s.io", "ListOptions", "", causes)
    }

    /// 422 `Invalid` for an object of `kind` named `name`.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let joined: Vec<String> = causes
            .iter()
            .map(|c| match &c.field {
                Some(f) => format!("{f}: {}", c.message),
                None => c.message.clone(),
            })
            .collect();
        let list = if joined.len() == 1 {
            joined[0].clone()
        } else {
            format!("[{}]", joined.join(", "))
        };
        let qualified = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let message = format!("{qualified} \"{name}\" is invalid: {list}");
        let mut details = Map::new();
        if !name.is_empty() {
            details.insert("name".into(), json!(name));
        }
        if !group.is_empty() {
            details.insert("group".into(), json!(group));
        }
        details.insert("kind".into(), json!(kind));
        let causes: Vec<Value> = causes
            .into_iter()
            .map(|c| {
                let mut m = Map::new();
                m.insert("reason".into(), json!(c.reason));
                m.insert("message".into(), json!(c.message));
                if let Some(f) = c.field {
                    m.insert("field".into(), json!(f));
                }
                Value::Object(m)
            })
            .collect();
        details.insert("causes".into(), Value::Array(causes));
        Self::new(422, "Invalid", message).with_details_map(details)
    }

    /// 504 `Too large resource version` with `Retry-After: 1`, as the watch cache answers.
    pub fn too_large_resource_version(requested: u64, current: u64) -> Self {
        let mut details = Map::new();
        details.insert(
            "causes".into(),
            json!([{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]),
        );
        let mut s = Self::new(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {requested}, current: {current}"),
        )
        .with_details_map(details);
        s.retry_after = Some(1);
        s
    }

    /// 429 `TooManyRequests` with `Retry-After: 1`, kube-apiserver's overload answer.
    pub fn too_many_requests() -> Self {
        let mut d = Map::new();
        d.insert("retryAfterSeconds".into(), json!(1));
        let mut s = Self::new(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.",
        )
        .with_details_map(d);
        s.retry_after = Some(1);
        s
    }

    /// 503 `ServiceUnavailable`.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    /// 500 without a reason, as the apiserver answers unparseable watch RVs.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "", message)
    }

    /// 401 `Unauthorized`.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 `Forbidden` for a denied resource request, in kube-apiserver's words
    /// (`responsewriters.Forbidden` + `errors.NewForbidden`): `pods "p" is
    /// forbidden: User "alice" cannot get resource "pods" in API group "" in the
    /// namespace "ns-1"`, with the authorizer's reason appended when it gave one.
    pub fn forbidden(user: &str, verb: &str, target: &Target<'_>, reason: &str) -> Self {
        let resource = match target.subresource {
            Some(s) if !s.is_empty() => format!("{}/{s}", target.resource),
            _ => target.resource.to_string(),
        };
        let scope = match target.namespace {
            Some(ns) if !ns.is_empty() => format!("in the namespace \"{ns}\""),
            _ => "at the cluster scope".to_string(),
        };
        let mut why = format!(
            "User \"{user}\" cannot {verb} resource \"{resource}\" in API group \"{}\" {scope}",
            target.group
        );
        if !reason.is_empty() {
            why.push_str(": ");
            why.push_str(reason);
        }
        let qualified = if target.group.is_empty() {
            target.resource.to_string()
        } else {
            format!("{}.{}", target.resource, target.group)
        };
        let name = target.name.unwrap_or("");
        let message = if name.is_empty() {
            format!("{qualified} is forbidden: {why}")
        } else {
            format!("{qualified} \"{name}\" is forbidden: {why}")
        };
        let mut d = Map::new();
        if !name.is_empty() {
            d.insert("name".into(), json!(name));
        }
        if !target.group.is_empty() {
            d.insert("group".into(), json!(target.group));
        }
        d.insert("kind".into(), json!(target.resource));
        let mut s = Self::new(403, "Forbidden", message).with_details_map(d);
        s.nosniff = true;
        s
    }

    /// Sets `details.name` (if not empty) and `details.kind`.
    pub fn with_details(self, name: &str, kind: &str) -> Self {
        let mut d = Map::new();
        if !name.is_empty() {
            d.insert("name".into(), json!(name));
        }
        if !kind.is_empty() {
            d.insert("kind".into(), json!(kind));
        }
        self.with_details_map(d)
    }

    /// Sets `.details` to the given map.
    pub fn with_details_map(mut self, details: Map<String, Value>) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    /// `.details` as written: the details, with `retryAfterSeconds`.
    pub fn details_value(&self) -> Option<Map<String, Value>> {
        let mut details = self.details.as_deref().cloned();
        if let Some(secs) = self.retry_after {
            details
                .get_or_insert_with(Map::new)
                .insert("retryAfterSeconds".into(), json!(secs));
        }
        details
    }

    /// The `Status` object as JSON, fields in the apiserver's order.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("kind".into(), json!("Status"));
        m.insert("apiVersion".into(), json!("v1"));
        let mut meta = Map::new();
        if let Some(c) = &self.continue_token {
            meta.insert("continue".into(), json!(c));
        }
        m.insert("metadata".into(), Value::Object(meta));
        m.insert("status".into(), json!("Failure"));
        m.insert("message".into(), json!(self.message));
        if !self.reason.is_empty() {
            m.insert("reason".into(), json!(self.reason));
        }
        if let Some(d) = self.details_value() {
            m.insert("details".into(), Value::Object(d));
        }
        m.insert("code".into(), json!(self.code));
        Value::Object(m)
    }

    /// The body bytes (compact JSON, as the apiserver writes for non-curl clients).
    pub fn to_bytes(&self) -> Bytes {
        Bytes::from(serde_json::to_vec(&self.to_value()).expect("Status serializes"))
    }

    /// The `Status` in protobuf (`k8s\0` + `runtime.Unknown`), as the apiserver
    /// answers a protobuf client: `ListMeta`, status, message, reason (written
    /// even when empty), details when set, code.
    pub fn to_protobuf(&self) -> Bytes {
        use crate::codec::protobuf::{bytes_field, envelope, list_meta, varint_field};
        let mut raw = BytesMut::with_capacity(self.message.len() + 64);
        let cont = self.continue_token.as_deref().unwrap_or("");
        bytes_field(&mut raw, 1, &list_meta("", cont, None));
        bytes_field(&mut raw, 2, b"Failure");
        bytes_field(&mut raw, 3, self.message.as_bytes());
        bytes_field(&mut raw, 4, self.reason.as_bytes());
        if self.details.is_some() || self.retry_after.is_some() {
            let empty = Map::new();
            let d = self.details.as_deref().unwrap_or(&empty);
            let text = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("");
            let mut det = BytesMut::new();
            bytes_field(&mut det, 1, text("name").as_bytes());
            bytes_field(&mut det, 2, text("group").as_bytes());
            bytes_field(&mut det, 3, text("kind").as_bytes());
            for c in d
                .get("causes")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let field = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("");
                let mut cause = BytesMut::new();
                bytes_field(&mut cause, 1, field("reason").as_bytes());
                bytes_field(&mut cause, 2, field("message").as_bytes());
                bytes_field(&mut cause, 3, field("field").as_bytes());
                bytes_field(&mut det, 4, &cause);
            }
            let retry = self
                .retry_after
                .map(u64::from)
                .or_else(|| d.get("retryAfterSeconds").and_then(Value::as_u64))
                .unwrap_or(0);
            varint_field(&mut det, 5, retry);
            bytes_field(&mut det, 6, text("uid").as_bytes());
            bytes_field(&mut raw, 5, &det);
        }
        varint_field(&mut raw, 6, u64::from(self.code));
        envelope("v1", "Status", &[&raw])
    }

    /// The response carrying this status as `ErrorNegotiated` writes it for
    /// the request's `Accept` ([`super::media::negotiate_error`]).
    pub fn into_response_as(self, errors: ErrorEncoding) -> Response<crate::body::Body> {
        let body = match errors {
            ErrorEncoding::Json => return self.into_response(),
            ErrorEncoding::Protobuf => crate::body::full(self.to_protobuf()),
            ErrorEncoding::Raw => crate::body::full(indent(&self.to_bytes())),
        };
        let mut resp = self.into_response();
        *resp.body_mut() = body;
        if errors == ErrorEncoding::Protobuf {
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(super::media::PROTOBUF),
            );
        }
        resp
    }

    /// A complete HTTP response carrying this status.
    pub fn into_response(self) -> Response<crate::body::Body> {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = super::json_response(code, crate::body::full_line(self.to_bytes()));
        let h = resp.headers_mut();
        if let Some(secs) = self.retry_after {
            h.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if self.nosniff {
            h.insert(
                "x-content-type-options",
                HeaderValue::from_static("nosniff"),
            );
        }
        resp.extensions_mut()
            .insert(Sent(std::sync::Arc::new(self)));
        resp
    }
}

/// Go's `json.Indent` with a two-space indent over compact JSON (what
/// `json.MarshalIndent` writes): strings kept byte for byte, empty objects and
/// arrays left as `{}` and `[]`, no newline at the end.
fn indent(compact: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(compact.len() * 2);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let newline = |out: &mut Vec<u8>, depth: usize| {
        out.push(b'\n');
        out.extend(std::iter::repeat_n(b' ', depth * 2));
    };
    let mut i = 0;
    while i < compact.len() {
        let c = compact[i];
        i += 1;
        if in_string {
            out.push(c);
            match c {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            b'"' => {
                in_string = true;
                out.push(c);
            }
            b'{' | b'[' => {
                out.push(c);
                let close = if c == b'{' { b'}' } else { b']' };
                if compact.get(i) == Some(&close) {
                    out.push(close);
                    i += 1;
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            b',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            b':' => out.extend_from_slice(b": "),
            _ => out.push(c),
        }
    }
    out
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn should_write_raw_json_as_write_raw_json_does() {
        let resp = Status::not_found("pods", "nope").into_response_as(ErrorEncoding::Raw);
        assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/json");
        let body = futures_util::FutureExt::now_or_never(http_body_util::BodyExt::collect(
            resp.into_body(),
        ))
        .unwrap()
        .unwrap()
        .to_bytes();
        let want = "{\n  \"kind\": \"Status\",\n  \"apiVersion\": \"v1\",\n  \"metadata\": {},\n  \"status\": \"Failure\",\n  \"message\": \"pods \\\"nope\\\" not found\",\n  \"reason\": \"NotFound\",\n  \"details\": {\n    \"name\": \"nope\",\n    \"kind\": \"pods\"\n  },\n  \"code\": 404\n}";
        assert_eq!(std::str::from_utf8(&body).unwrap(), want);
    }

    #[test]
    fn should_match_apiserver_bytes_for_forbidden() {
        // Bytes recorded from kube-apiserver's 403 for a get and a list.
        let get = Target {
            resource: "pods",
            namespace: Some("ns-0"),
            name: Some("pod-00000"),
            ..Default::default()
        };
        assert_eq!(
            Status::forbidden("alice", "get", &get, "").to_bytes(),
            Bytes::from_static(br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \"pod-00000\" is forbidden: User \"alice\" cannot get resource \"pods\" in API group \"\" in the namespace \"ns-0\"","reason":"Forbidden","details":{"name":"pod-00000","kind":"pods"},"code":403}"#)
        );
        let list = Target {
            resource: "secrets",
            ..Default::default()
        };
        assert_eq!(
            Status::forbidden("alice", "list", &list, "").to_bytes(),
            Bytes::from_static(br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"secrets is forbidden: User \"alice\" cannot list resource \"secrets\" in API group \"\" at the cluster scope","reason":"Forbidden","details":{"kind":"secrets"},"code":403}"#)
        );
        let apps = Target {
            group: "apps",
            resource: "deployments",
            namespace: Some("a"),
            ..Default::default()
        };
        let s = Status::forbidden("bob", "watch", &apps, "no rule");
        assert_eq!(
            s.message,
            "deployments.apps is forbidden: User \"bob\" cannot watch resource \"deployments\" in API group \"apps\" in the namespace \"a\": no rule"
        );
        assert_eq!(
            s.to_value()["details"],
            json!({"group": "apps", "kind": "deployments"})
        );
    }

    #[test]
    fn should_match_apiserver_bytes_for_rvmatch_forbidden() {
        let s = Status::invalid_list_options(vec![Cause {
            reason: "FieldValueForbidden",
            message: "Forbidden: resourceVersionMatch is forbidden for watch".into(),
            field: Some("resourceVersionMatch".into()),
        }]);
        let want = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch","reason":"Invalid","details":{"group":"meta.k8s.io","kind":"ListOptions","causes":[{"reason":"FieldValueForbidden","message":"Forbidden: resourceVersionMatch is forbidden for watch","field":"resourceVersionMatch"}]},"code":422}"#;
        assert_eq!(std::str::from_utf8(&s.to_bytes()).unwrap(), want);
    }

    #[test]
    fn should_match_apiserver_bytes_for_too_large_rv() {
        let s = Status::too_large_resource_version(1015815, 15816);
        let want = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: Too large resource version: 1015815, current: 15816","reason":"Timeout","details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],"retryAfterSeconds":1},"code":504}"#;
        assert_eq!(std::str::from_utf8(&s.to_bytes()).unwrap(), want);
    }

    #[test]
    fn should_match_apiserver_protobuf_bytes_for_not_found() {
        // Reference 12: `GET .../pods/nope` with a protobuf Accept, 97 bytes.
        let want: Vec<u8> = "6b 38 73 00 0a 0c 0a 02 76 31 12 06 53 74 61 74 75 73 12 49 \
            0a 06 0a 00 12 00 1a 00 12 07 46 61 69 6c 75 72 65 1a 15 70 6f 64 73 20 22 6e 6f 70 65 22 20 6e 6f 74 20 66 6f 75 6e 64 \
            22 08 4e 6f 74 46 6f 75 6e 64 2a 12 0a 04 6e 6f 70 65 12 00 1a 04 70 6f 64 73 28 00 32 00 30 94 03 1a 00 22 00"
            .split_whitespace()
            .map(|b| u8::from_str_radix(b, 16).unwrap())
            .collect();
        let got = Status::not_found("pods", "nope").to_protobuf();
        assert_eq!(got.len(), 97);
        assert_eq!(&got[..], &want[..]);
        let resp = Status::not_found("pods", "nope").into_response_as(ErrorEncoding::Protobuf);
        assert_eq!(resp.status(), 404);
        assert_eq!(
            resp.headers()["content-type"],
            "application/vnd.kubernetes.protobuf"
        );
        // A 504 carries its retry in the details, as its JSON does.
        let s = Status::too_large_resource_version(9, 3).to_protobuf();
        assert!(s.windows(2).any(|w| w == [0x28, 0x01]));
    }

    #[test]
    fn should_match_apiserver_bytes_for_not_found_and_internal() {
        let s = Status::not_found("pods", "does-not-exist");
        assert_eq!(
            std::str::from_utf8(&s.to_bytes()).unwrap(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \"does-not-exist\" not found","reason":"NotFound","details":{"name":"does-not-exist","kind":"pods"},"code":404}"#
        );
        let s = Status::internal(
            "resourceVersion: Invalid value: \"-5\": strconv.ParseUint: parsing \"-5\": invalid syntax",
        );
        assert_eq!(
            std::str::from_utf8(&s.to_bytes()).unwrap(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"resourceVersion: Invalid value: \"-5\": strconv.ParseUint: parsing \"-5\": invalid syntax","code":500}"#
        );
    }
}
