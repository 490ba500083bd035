//! Routing, in kube-apiserver's order: authentication, the request decoded
//! (options, 400s), authorization (403s), then the verb's handler; JSON
//! answers pretty-printed for curl as the apiserver does.

use std::sync::Arc;

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::Value;

use crate::state::{Req, Sim, json_response, read_body, to_bytes};
use crate::{auth, exec, read, resources, watch, write};
use r8s::api::media::ErrorEncoding;
use r8s::api::query::Query;
use r8s::api::request::{self, ApiRequest, Verb};
use r8s::api::status::Status;
use r8s::body::{self, Body};

impl Sim {
    /// Answers one request.
    pub(super) async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        let (parts, incoming) = req.into_parts();
        let ar = ApiRequest::parse(&parts.method, &parts.uri, &parts.headers);
        // Errors come in the negotiated encoding, as the apiserver's do.
        let errors = ar.as_ref().map_or(ErrorEncoding::Json, |ar| ar.errors);
        let pretty = match &ar {
            Some(ar) => ar.pretty && !ar.streaming,
            None => request::pretty_non_resource(&Query::parse(parts.uri.query()), &parts.headers),
        };
        let gzip = r8s::api::media::accepts_gzip(&parts.headers);
        // kube-apiserver 1.37's WatchListCompression (on by default from
        // 1.37; 1.36 and before never compress a watch).
        let watch_list = ar.as_ref().is_some_and(|ar| {
            ar.verb == Verb::Watch
                && ar
                    .options
                    .as_ref()
                    .is_ok_and(|o| o.send_initial_events == Some(true))
        }) && r8s::upstream::version::WireRules::of(Some(self.config.version()))
            .compress_watch_lists;
        let mut resp = match self.route(ar, parts, incoming).await {
            Ok(r) => r,
            Err(s) => s.into_response_as(errors),
        };
        if pretty {
            resp = prettify(resp).await;
        }
        if gzip && !resp.headers().contains_key(header::CONTENT_ENCODING) {
            resp = if watch_list {
                gzip_per_flush(resp)
            } else {
                gzip_large(resp).await
            };
        }
        resp
    }

    async fn route(
        self: Arc<Self>,
        ar: Option<ApiRequest>,
        parts: Parts,
        incoming: Incoming,
    ) -> Result<Response<Body>, Status> {
        let user = match &self.auth {
            Some(t) => Some(t.authenticate(&parts.headers)?),
            None => None,
        };
        let Some(ar) = ar else {
            let path = parts.uri.path();
            self.bump("get", path);
            return self.non_resource(&parts.method, &parts.headers, path);
        };
        let ApiRequest {
            verb,
            path: rp,
            query,
            options,
            media,
            scope,
            ..
        } = ar;
        let r = Req {
            method: parts.method.clone(),
            headers: parts.headers.clone(),
            query,
            media,
            user,
        };
        let opts = options?;
        self.bump(verb.as_str(), rp.gvr.resource());
        if auth::is_review(&rp) {
            if let Some(t) = &self.auth {
                t.authorize(r.user.as_ref(), verb, &rp, &scope, Some(&opts))?;
            }
            let body = read_body(incoming).await?;
            return auth::review(self.auth.as_ref(), &r.method, &rp, &body);
        }
        let Some((res, def)) = self.resources.find(&rp.gvr) else {
            return Err(Status::path_not_found());
        };
        if !def.namespaced && rp.namespace.is_some() {
            return Err(Status::path_not_found());
        }
        if let Some(t) = &self.auth {
            t.authorize(r.user.as_ref(), verb, &rp, &scope, Some(&opts))?;
        }
        let pods = def.gvr.resource() == "pods";
        let writes = matches!(
            verb,
            Verb::Create | Verb::Update | Verb::Patch | Verb::Delete
        );
        let answer = match (verb, rp.subresource.as_deref()) {
            (Verb::Get, None | Some("status")) => read::get(&self, res, &rp, &r, &opts).await,
            (Verb::List, None) => {
                let _listing = self.listing().await;
                read::list(&self, res, &rp, &r, &opts).await
            }
            (Verb::Watch, None) => watch::watch(self.clone(), res, &rp, &r, opts),
            (Verb::Get, Some("log")) if pods => exec::log(self.clone(), res, &rp, &r),
            (Verb::Connect, Some("exec")) if pods => exec::exec(
                self.clone(),
                res,
                &rp,
                &r,
                Request::from_parts(parts, incoming),
            ),
            (Verb::Create, None) => write::create(&self, res, &rp, &r, read_body(incoming).await?),
            (Verb::Update, None | Some("status")) => {
                write::update(&self, res, &rp, &r, read_body(incoming).await?)
            }
            (Verb::Patch, None | Some("status")) => {
                write::patch(&self, res, &rp, &r, read_body(incoming).await?)
            }
            (Verb::Delete, None) => write::delete(&self, res, &rp, &r, read_body(incoming).await?),
            (_, Some(sub)) if !def.has_subresource(sub) => Err(Status::path_not_found()),
            _ => Err(Status::method_not_allowed()),
        };
        if writes && res == resources::crds_idx() {
            // The definitions changed (or not): the served types follow.
            super::crd::sync(&self);
        }
        answer
    }

    fn non_resource(
        &self,
        method: &Method,
        headers: &HeaderMap,
        path: &str,
    ) -> Result<Response<Body>, Status> {
        if method != Method::GET {
            return Err(Status::method_not_allowed());
        }
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("127.0.0.1");
        let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
        if let ["api" | "apis"] = segs.as_slice()
            && let Some(version) = aggregated_version(headers)
        {
            let doc = self.resources.aggregated(segs[0] == "api", version);
            let mut resp = json_response(StatusCode::OK, to_bytes(&doc));
            let media = format!(
                "application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"
            );
            let h = resp.headers_mut();
            h.insert(header::CONTENT_TYPE, media.parse().expect("a media type"));
            h.insert(header::VARY, header::HeaderValue::from_static("Accept"));
            return Ok(resp);
        }
        let doc = match segs.as_slice() {
            ["version"] => resources::version(self.config.version().minor),
            ["api"] => resources::core_versions(host),
            ["api", v] => self
                .resources
                .resource_list("", v)
                .ok_or_else(Status::path_not_found)?,
            ["apis"] => self.resources.group_list(),
            ["apis", g] => self.resources.group(g).ok_or_else(Status::path_not_found)?,
            ["apis", g, v] => self
                .resources
                .resource_list(g, v)
                .ok_or_else(Status::path_not_found)?,
            // OpenAPI v3 with permissive schemas, so `kubectl apply` validates.
            ["openapi", "v3"] => self.resources.openapi_index(),
            ["openapi", "v3", rest @ ..] => self
                .resources
                .openapi_group(&rest.join("/"))
                .ok_or_else(Status::path_not_found)?,
            ["healthz" | "livez" | "readyz"] => {
                return Ok(text_response(StatusCode::OK, "ok"));
            }
            _ => return Err(Status::path_not_found()),
        };
        Ok(json_response(StatusCode::OK, to_bytes(&doc)))
    }
}

/// The version of aggregated discovery (`v2`, or `v2beta1` as 1.26–1.29
/// served it) the first media type of `Accept` that asks for it names, if
/// one does.
fn aggregated_version(headers: &HeaderMap) -> Option<&'static str> {
    let accept = headers.get(header::ACCEPT)?.to_str().ok()?;
    accept.split(',').find_map(|media| {
        let (mut g, mut v, mut as_) = (None, None, None);
        for p in media.split(';').skip(1).map(str::trim) {
            match p.split_once('=') {
                Some(("g", x)) => g = Some(x),
                Some(("v", x)) => v = Some(x),
                Some(("as", x)) => as_ = Some(x),
                _ => {}
            }
        }
        if g != Some("apidiscovery.k8s.io") || as_ != Some("APIGroupDiscoveryList") {
            return None;
        }
        match v {
            Some("v2") => Some("v2"),
            Some("v2beta1") => Some("v2beta1"),
            _ => None,
        }
    })
}

fn text_response(code: StatusCode, text: &'static str) -> Response<Body> {
    let mut resp = Response::new(body::full(text));
    *resp.status_mut() = code;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

async fn prettify(resp: Response<Body>) -> Response<Body> {
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|c| c.as_bytes() == b"application/json");
    if !is_json {
        return resp;
    }
    let (mut parts, bytes) = match whole(resp).await {
        Ok(whole) => whole,
        Err(emptied) => return emptied,
    };
    let out = match serde_json::from_slice::<Value>(&bytes) {
        Ok(v) => {
            let mut s = serde_json::to_vec_pretty(&v).expect("JSON serializes");
            s.push(b'\n');
            Bytes::from(s)
        }
        Err(_) => bytes,
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, body::full(out))
}

/// A response's head and whole body, or (its body failing) the response
/// with an empty body.
async fn whole(resp: Response<Body>) -> Result<(http::response::Parts, Bytes), Response<Body>> {
    let (parts, b) = resp.into_parts();
    match b.collect().await {
        Ok(collected) => Ok((parts, collected.to_bytes())),
        Err(_) => Err(Response::from_parts(parts, body::empty())),
    }
}

/// kube-apiserver compresses a response for a client that accepts gzip
/// when its first write is over 128 KiB (a list, never a small object).
const GZIP_THRESHOLD: u64 = 128 * 1024;

/// kube-apiserver's gzip level (Go's `compress/gzip` level 1).
fn level() -> flate2::Compression {
    flate2::Compression::new(1)
}

/// A whole response over [`GZIP_THRESHOLD`] gzipped, as kube-apiserver's
/// `deferredResponseWriter` does; others as they are.
async fn gzip_large(resp: Response<Body>) -> Response<Body> {
    use http_body::Body as _;
    use std::io::Write;
    let big = resp
        .body()
        .size_hint()
        .exact()
        .is_some_and(|n| n > GZIP_THRESHOLD);
    if !big {
        return resp;
    }
    let (mut parts, bytes) = match whole(resp).await {
        Ok(whole) => whole,
        Err(emptied) => return emptied,
    };
    let mut z = flate2::write::GzEncoder::new(Vec::with_capacity(bytes.len() / 8), level());
    let gz = z.write_all(&bytes).and_then(|()| z.finish());
    let Ok(gz) = gz else {
        return Response::from_parts(parts, body::full(bytes));
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    r8s::api::media::mark_gzipped(&mut parts.headers);
    Response::from_parts(parts, body::full(gz))
}

/// A streaming list gzipped as kube-apiserver 1.37 writes it: one gzip
/// stream, sync-flushed at every flush (what is ready when the writer
/// catches up), as Go's `gzip.Writer.Flush` does. A flush must end on a
/// sync point: Go's inflater (client-go's) hands over what it decoded only
/// there, so an end-of-initial-events bookmark not followed by one would
/// wait for the next event.
fn gzip_per_flush(resp: Response<Body>) -> Response<Body> {
    use futures_util::FutureExt;
    use std::io::Write;
    let (mut parts, mut inner) = resp.into_parts();
    let (tx, out) = body::channel(64);
    tokio::spawn(async move {
        let mut z = flate2::write::GzEncoder::new(Vec::new(), level());
        let mut ended = false;
        while !ended {
            let mut any = false;
            match inner.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(d) = frame.into_data() {
                        any |= !d.is_empty();
                        if z.write_all(&d).is_err() {
                            return;
                        }
                    }
                }
                // A broken body ends the stream broken, without a trailer.
                Some(Err(_)) => return,
                None => ended = true,
            }
            // What else is ready goes in the same flush.
            while !ended && z.get_ref().len() < 1 << 20 {
                match inner.frame().now_or_never() {
                    None => break,
                    Some(Some(Ok(frame))) => {
                        if let Ok(d) = frame.into_data() {
                            any |= !d.is_empty();
                            if z.write_all(&d).is_err() {
                                return;
                            }
                        }
                    }
                    Some(Some(Err(_))) => return,
                    Some(None) => ended = true,
                }
            }
            let written = if ended {
                z.try_finish()
            } else if any {
                z.flush()
            } else {
                continue;
            };
            if written.is_err() {
                return;
            }
            let piece = std::mem::take(z.get_mut());
            if !piece.is_empty() && tx.send(Bytes::from(piece)).await.is_err() {
                return;
            }
        }
    });
    r8s::api::media::mark_gzipped(&mut parts.headers);
    Response::from_parts(parts, out)
}
