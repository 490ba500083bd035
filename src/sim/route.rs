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

use super::state::{Req, Sim, json_response, read_body, to_bytes};
use super::{auth, exec, read, resources, watch, write};
use crate::api::media::ErrorEncoding;
use crate::api::query::Query;
use crate::api::request::{self, ApiRequest, Verb};
use crate::api::status::Status;
use crate::body::{self, Body};

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
        let mut resp = match self.route(ar, parts, incoming).await {
            Ok(r) => r,
            Err(s) => s.into_response_as(errors),
        };
        if pretty {
            resp = prettify(resp).await;
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
                t.authorize(r.user.as_ref(), verb, &rp, Some(&opts))?;
            }
            let body = read_body(incoming).await?;
            return auth::review(self.auth.as_ref(), &r.method, &rp, &body);
        }
        let Some(res) = resources::find(&rp.gvr) else {
            return Err(Status::path_not_found());
        };
        let def = &resources::RESOURCES[res];
        if !def.namespaced && rp.namespace.is_some() {
            return Err(Status::path_not_found());
        }
        if let Some(t) = &self.auth {
            t.authorize(r.user.as_ref(), verb, &rp, Some(&opts))?;
        }
        let pods = def.gvr.resource() == "pods";
        match (verb, rp.subresource.as_deref()) {
            (Verb::Get, None | Some("status")) => read::get(&self, res, &rp, &r, &opts).await,
            (Verb::List, None) => read::list(&self, res, &rp, &r, &opts).await,
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
            (_, Some(sub)) if !def.subresources.contains(&sub) => Err(Status::path_not_found()),
            _ => Err(Status::method_not_allowed()),
        }
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
        let doc = match segs.as_slice() {
            ["version"] => {
                resources::version(self.config.generation == super::state::Generation::Pre131)
            }
            ["api"] => resources::core_versions(host),
            ["api", v] => resources::resource_list("", v).ok_or_else(Status::path_not_found)?,
            ["apis"] => resources::group_list(),
            ["apis", g] => resources::group(g).ok_or_else(Status::path_not_found)?,
            ["apis", g, v] => resources::resource_list(g, v).ok_or_else(Status::path_not_found)?,
            // OpenAPI v3 with permissive schemas, so `kubectl apply` validates.
            ["openapi", "v3"] => resources::openapi_index(),
            ["openapi", "v3", rest @ ..] => {
                resources::openapi_group(&rest.join("/")).ok_or_else(Status::path_not_found)?
            }
            ["healthz" | "livez" | "readyz"] => {
                return Ok(text_response(StatusCode::OK, "ok"));
            }
            _ => return Err(Status::path_not_found()),
        };
        Ok(json_response(StatusCode::OK, to_bytes(&doc)))
    }
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
    let (mut parts, b) = resp.into_parts();
    let Ok(collected) = b.collect().await else {
        return Response::from_parts(parts, body::empty());
    };
    let bytes = collected.to_bytes();
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
