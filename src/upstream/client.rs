//! r8s's own requests to the upstream, and one reader of their answers.
//!
//! Every request r8s makes for itself (reflectors' lists and watches,
//! discovery, proofs, the consistency check, the `/version` probe, token
//! and access reviews) goes through [`Upstream::own`]: r8s's credentials,
//! the configured servers with failover, `Accept-Encoding: gzip` where
//! `upstream.compression` allows (client-go's rule), and the upstream
//! metrics, all in [`Upstream::send`]. What comes back is read by one
//! [`Reader`], which inflates gzip as it arrives: whole ([`Reply::bytes`],
//! [`Reply::json`]) or as a watch stream's units ([`Units`]: JSON lines or
//! protobuf frames).

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use http::{HeaderValue, Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use super::body::Shared;
use super::{Creds, RequestError, ServedBy, Upstream};
use crate::api::media::{Encoding, PROTOBUF};
use crate::codec::gunzip::{Gunzip, GunzipError, is_gzip};
use crate::codec::protobuf as pb;

/// Why an answer could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The connection broke or the body could not be read.
    #[error("reading the answer: {0}")]
    Body(String),
    /// A gzip body that does not inflate.
    #[error(transparent)]
    Gzip(#[from] GunzipError),
    /// More than the reader takes (a whole answer, or one line or frame).
    #[error("an answer, line or frame over {0} bytes")]
    TooLong(usize),
    /// JSON that is not what was asked for.
    #[error("malformed JSON: {0}")]
    Json(String),
}

/// The head of an answer to one of r8s's own requests, its body unread.
pub struct Reply {
    status: StatusCode,
    headers: http::HeaderMap,
    server: Option<usize>,
    body: Incoming,
}

impl Upstream {
    /// `GET path` (with its query) with r8s's own credentials, asking for
    /// `accept`: the answer's head, whatever its status.
    pub async fn get(self: &Arc<Self>, path: &str, accept: &str) -> Result<Reply, RequestError> {
        self.own(Method::GET, path, accept, None).await
    }

    /// A request with r8s's own credentials (a JSON `body`, for a POST):
    /// the one way r8s asks the upstream anything for itself.
    pub async fn own(
        self: &Arc<Self>,
        method: Method,
        path: &str,
        accept: &str,
        body: Option<Bytes>,
    ) -> Result<Reply, RequestError> {
        let failed = |reason: String| RequestError::Failed {
            server: self.server_names().join(","),
            reason,
        };
        let accept = HeaderValue::from_str(accept).map_err(|e| failed(e.to_string()))?;
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(header::ACCEPT, accept);
        if self.compression() {
            req = req.header(header::ACCEPT_ENCODING, "gzip");
        }
        if body.is_some() {
            req = req.header(header::CONTENT_TYPE, "application/json");
        }
        let (parts, ()) = req
            .body(())
            .map_err(|e| failed(e.to_string()))?
            .into_parts();
        let shared = match body {
            Some(b) => Shared::full(b),
            None => Shared::new(None),
        };
        let resp = self.send_shared(parts, shared, Creds::Own).await?;
        let server = resp.extensions().get::<ServedBy>().map(|s| s.0);
        let (parts, body) = resp.into_parts();
        Ok(Reply {
            status: parts.status,
            headers: parts.headers,
            server,
            body,
        })
    }
}

impl Reply {
    /// Its HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The configured server that answered (an index, for
    /// [`Upstream::fail_over`]).
    pub fn server(&self) -> Option<usize> {
        self.server
    }

    /// Its `Content-Type`, or `""`.
    pub fn content_type(&self) -> &str {
        self.headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// Whether the body is protobuf (`application/vnd.kubernetes.protobuf`).
    pub fn is_protobuf(&self) -> bool {
        self.content_type().starts_with(PROTOBUF)
    }

    /// The body, read as it arrives (inflated when gzip).
    pub fn reader(self) -> Reader {
        Reader {
            gunzip: is_gzip(&self.headers).then(Gunzip::new),
            body: self.body,
            plain: Vec::new(),
            last: Bytes::new(),
        }
    }

    /// The whole body, inflated; at most `max` bytes of it.
    pub async fn bytes(self, max: usize) -> Result<Bytes, ReadError> {
        let mut out = Vec::new();
        let mut reader = self.reader();
        while let Some(piece) = reader.chunk().await? {
            if out.len() + piece.len() > max {
                return Err(ReadError::TooLong(max));
            }
            out.extend_from_slice(piece);
        }
        Ok(Bytes::from(out))
    }

    /// The whole body (at most `max` bytes) as JSON.
    pub async fn json<T: serde::de::DeserializeOwned>(self, max: usize) -> Result<T, ReadError> {
        let body = self.bytes(max).await?;
        serde_json::from_slice(&body).map_err(|e| ReadError::Json(e.to_string()))
    }

    /// The body as a watch stream's units in `encoding` (each at most `max` bytes).
    pub fn units(self, encoding: Encoding, max: usize) -> Units {
        Units {
            reader: self.reader(),
            buf: BytesMut::new(),
            encoding,
            max,
        }
    }
}

/// A body as r8s reads its own answers: piece by piece, inflated.
pub struct Reader {
    body: Incoming,
    gunzip: Option<Gunzip>,
    /// The last piece inflated.
    plain: Vec<u8>,
    /// The last piece as it came (no gzip).
    last: Bytes,
}

impl Reader {
    /// The next piece of the body (`None` at its end, once a gzip body
    /// has been checked whole). Cancel-safe: nothing is taken from the
    /// body until a piece is returned.
    pub async fn chunk(&mut self) -> Result<Option<&[u8]>, ReadError> {
        loop {
            let Some(frame) = self.body.frame().await else {
                if let Some(g) = &mut self.gunzip {
                    g.finish()?;
                }
                return Ok(None);
            };
            let frame = frame.map_err(|e| ReadError::Body(e.to_string()))?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            match &mut self.gunzip {
                Some(g) => {
                    self.plain.clear();
                    g.push(&data, &mut self.plain)?;
                    return Ok(Some(&self.plain));
                }
                None => {
                    self.last = data;
                    return Ok(Some(&self.last));
                }
            }
        }
    }
}

/// A watch stream's units: JSON lines (blank ones skipped) or protobuf
/// frames (a 4-byte length, then the `Unknown`), split off as they arrive.
pub struct Units {
    reader: Reader,
    buf: BytesMut,
    encoding: Encoding,
    max: usize,
}

impl Units {
    /// The next whole unit; `None` when the stream ends (a partial unit
    /// at the end is dropped). Cancel-safe, like [`Reader::chunk`].
    pub async fn next(&mut self) -> Result<Option<Bytes>, ReadError> {
        loop {
            if let Some(unit) = self.split() {
                return Ok(Some(unit));
            }
            if self.buf.len() > self.max {
                return Err(ReadError::TooLong(self.max));
            }
            match self.reader.chunk().await? {
                Some(piece) => self.buf.extend_from_slice(piece),
                None => return Ok(None),
            }
        }
    }

    fn split(&mut self) -> Option<Bytes> {
        next_unit(self.encoding, &mut self.buf)
    }
}

/// Splits the next whole unit of a watch stream in `encoding` off `buf`: a
/// JSON line (blank ones skipped), or a protobuf frame.
pub fn next_unit(encoding: Encoding, buf: &mut BytesMut) -> Option<Bytes> {
    match encoding {
        Encoding::Json => {
            while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
                let line = buf.split_to(nl + 1).freeze().slice(..nl);
                if !line.iter().all(u8::is_ascii_whitespace) {
                    return Some(line);
                }
            }
            None
        }
        Encoding::Protobuf => pb::next_frame_raw(buf),
    }
}
