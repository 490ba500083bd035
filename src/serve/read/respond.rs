//! The respond step: a read's body as the response it is sent as. A large
//! list takes one of `read.max_inflight_lists` slots for as long as it
//! streams (or is answered 429); lists stream, gzipped when large and
//! accepted; an error from the cache is written as the apiserver writes it.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};

use super::steps::{Built, Early, Payload, Reader};
use crate::api::media::{Encoding, ErrorEncoding};
use crate::api::status::Status;
use crate::body::{self, Body};
use crate::codec::gzip::{GzipList, gzip as gzip_bytes};
use crate::codec::json::{GZIP_MIN, ListBody, ListItem};
use crate::fairness::classify::Classification;
use crate::serve::outcome::PassReason;
use crate::serve::slots::{LARGE_LIST, ListSlot, ListSlots};

impl Reader<'_> {
    /// The response `built` is sent as, or why the upstream must answer.
    /// `held`: the seat a costly walk took before it walked.
    pub(super) async fn respond(
        &self,
        built: Built,
        held: Option<ListSlot>,
    ) -> Result<Response<Body>, PassReason> {
        let Built { payload, reply } = built;
        let (encoding, pretty) = (reply.encoding, reply.pretty);
        let admitted = match payload {
            Ok(payload) => admit(payload, self.slots, self.class, held).await,
            Err(early) => Err(early),
        };
        let mut resp = match admitted {
            Ok(payload) => respond(StatusCode::OK, payload, encoding, pretty, reply.gzip),
            // Errors negotiate as `ErrorNegotiated` does (no `as=` transform);
            // curl's are pretty-printed JSON, as the apiserver's.
            Err(Early::Status(s)) if !(pretty && reply.errors == ErrorEncoding::Json) => {
                s.into_response_as(reply.errors)
            }
            Err(Early::Status(s)) => {
                let code =
                    StatusCode::from_u16(s.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let mut resp = respond(
                    code,
                    Payload::Bytes(s.to_bytes()),
                    Encoding::Json,
                    true,
                    false,
                );
                if let Some(secs) = s.retry_after {
                    resp.headers_mut()
                        .insert(header::RETRY_AFTER, HeaderValue::from(secs));
                }
                resp
            }
            Err(Early::Pass(reason)) => return Err(reason),
        };
        if let Some(w) = reply.warning {
            resp.headers_mut().insert(header::WARNING, w);
        }
        Ok(resp)
    }
}

/// A large list takes a seat of its priority level's share of
/// `read.max_inflight_lists` for as long as it streams (waiting its flow's
/// turn where the level queues), or is answered 429. `held`: the seat it
/// took before it walked (a costly walk), kept the same way.
async fn admit(
    payload: Payload,
    slots: &ListSlots,
    class: Option<&Classification>,
    held: Option<ListSlot>,
) -> Result<Payload, Early> {
    let len = match &payload {
        Payload::List(l) => l.estimated_len(),
        Payload::Shown(l) => l.estimated_len(),
        Payload::Table(l) => l.estimated_len(),
        Payload::Bytes(_) => return Ok(payload),
    };
    let slot = match held {
        Some(slot) => slot,
        None if len < LARGE_LIST => return Ok(payload),
        None => slots.seat_for(class).await.map_err(|_| too_many())?,
    };
    Ok(match payload {
        Payload::List(l) => Payload::List(l.holding(slot)),
        Payload::Shown(l) => Payload::Shown(l.holding(slot)),
        Payload::Table(l) => Payload::Table(l.holding(slot)),
        Payload::Bytes(b) => Payload::Bytes(b),
    })
}

/// The apiserver's 429 for a request its level has no seat for.
pub(super) fn too_many() -> Early {
    Early::Status(Status::too_many_requests())
}

fn hit(code: StatusCode, body: Body, encoding: Encoding, gzipped: bool) -> Response<Body> {
    let mut resp = crate::api::json_response(code, body);
    if encoding == Encoding::Protobuf {
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(crate::api::media::PROTOBUF),
        );
    }
    if gzipped {
        crate::api::media::mark_gzipped(resp.headers_mut());
    }
    resp
}

/// The response for a hit: lists stream (gzipped when large and accepted);
/// pretty-printing (curl) materializes, off the fast path.
fn respond(
    code: StatusCode,
    payload: Payload,
    encoding: Encoding,
    pretty: bool,
    gzip: bool,
) -> Response<Body> {
    let bytes = match payload {
        Payload::List(list) if !pretty => return stream(code, list, encoding, gzip),
        Payload::Shown(list) if !pretty => return stream(code, list, encoding, gzip),
        Payload::Table(list) if !pretty => return stream(code, list, encoding, gzip),
        Payload::List(list) => list.collect(),
        Payload::Shown(list) => list.collect(),
        Payload::Table(list) => list.collect(),
        Payload::Bytes(b) => b,
    };
    let compress = gzip && bytes.len() >= GZIP_MIN;
    // JSON ends with a newline, as Go's encoder ends every body (a streamed
    // list's comes with its tail).
    let bytes = match encoding {
        Encoding::Protobuf => bytes,
        Encoding::Json if pretty => match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Ok(v) => {
                let mut s = serde_json::to_vec_pretty(&v).expect("JSON serializes");
                s.push(b'\n');
                Bytes::from(s)
            }
            Err(_) => bytes,
        },
        Encoding::Json if !compress => return hit(code, body::full_line(bytes), encoding, false),
        Encoding::Json => {
            let mut line = Vec::with_capacity(bytes.len() + 1);
            line.extend_from_slice(&bytes);
            line.push(b'\n');
            Bytes::from(line)
        }
    };
    if gzip && bytes.len() >= GZIP_MIN {
        return hit(code, body::full(gzip_bytes(&bytes)), encoding, true);
    }
    hit(code, body::full(bytes), encoding, false)
}

/// A list streamed as it is written, gzipped when large and accepted.
fn stream<I: ListItem + Unpin + Send + 'static>(
    code: StatusCode,
    list: ListBody<I>,
    encoding: Encoding,
    gzip: bool,
) -> Response<Body> {
    use http_body_util::BodyExt;
    if gzip && list.estimated_len() >= GZIP_MIN {
        hit(code, GzipList::new(list).boxed_unsync(), encoding, true)
    } else {
        hit(code, list.boxed_unsync(), encoding, false)
    }
}
