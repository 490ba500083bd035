//! `pods/log` (with `follow`) and `pods/exec` over WebSocket
//! (`v5.channel.k8s.io`, `v4.channel.k8s.io`): enough for `kubectl logs -f`
//! and `kubectl exec -i POD -- cat` to work end to end.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http::{HeaderValue, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role};

use crate::state::{Req, Sim};
use crate::store::key;
use r8s::api::path::ResourcePath;
use r8s::api::query::parse_bool;
use r8s::api::status::Status;
use r8s::body::{self, Body};

fn pod_exists(sim: &Sim, res: usize, rp: &ResourcePath) -> Result<String, Status> {
    let name = rp.name.clone().unwrap_or_default();
    sim.store
        .get(res, &key(rp.namespace.as_deref(), &name))
        .map(|_| name.clone())
        .ok_or_else(|| {
            let gvr = &sim.resources.def(res).gvr;
            Status::not_found_in(gvr.group(), gvr.resource(), &name)
        })
}

/// `GET pods/{name}/log`: a few lines; with `follow=true`, one more per second.
pub fn log(
    sim: Arc<Sim>,
    res: usize,
    rp: &ResourcePath,
    r: &Req,
) -> Result<Response<Body>, Status> {
    let name = pod_exists(&sim, res, rp)?;
    let follow = match r.query.get("follow") {
        Some(v) => parse_bool(v)?,
        None => false,
    };
    let (tx, b) = body::channel(8);
    let rp = rp.clone();
    tokio::spawn(async move {
        let line = |i: u64| Bytes::from(format!("{name} log line {i}\n"));
        for i in 1..=3 {
            if tx.send(line(i)).await.is_err() {
                return;
            }
        }
        if !follow {
            return;
        }
        let mut i = 4;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                _ = tx.closed() => return,
                _ = sim.shutdown().wait() => return,
            }
            if pod_exists(&sim, res, &rp).is_err() || tx.send(line(i)).await.is_err() {
                return;
            }
            i += 1;
        }
    });
    let mut resp = Response::new(b);
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Ok(resp)
}

/// `pods/{name}/exec` over WebSocket: echoes stdin to stdout (command `cat`),
/// or prints the command line; then reports success on the status channel.
pub fn exec(
    sim: Arc<Sim>,
    res: usize,
    rp: &ResourcePath,
    r: &Req,
    mut req: Request<Incoming>,
) -> Result<Response<Body>, Status> {
    pod_exists(&sim, res, rp)?;
    let is_ws = r
        .headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    let key = r.headers.get(header::SEC_WEBSOCKET_KEY).cloned();
    let (true, Some(key)) = (is_ws, key) else {
        return Err(Status::bad_request(
            "Upgrade request required (the sim speaks the WebSocket exec protocol only)",
        ));
    };
    let offered = r
        .headers
        .get(header::SEC_WEBSOCKET_PROTOCOL)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let proto = ["v5.channel.k8s.io", "v4.channel.k8s.io"]
        .into_iter()
        .find(|p| offered.split(',').any(|o| o.trim() == *p))
        .ok_or_else(|| {
            Status::bad_request(format!("unsupported exec subprotocols: {offered:?}"))
        })?;
    let command: Vec<String> = r.query.all("command").map(str::to_string).collect();
    let stdin = r.query.flag("stdin");
    let on_upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else {
            return;
        };
        let ws = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
        if let Err(e) = session(ws, proto == "v5.channel.k8s.io", stdin, command).await {
            tracing::debug!(error = %e, "sim exec session ended with an error");
        }
    });
    let mut resp = Response::new(body::empty());
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(
        header::SEC_WEBSOCKET_ACCEPT,
        HeaderValue::from_str(&derive_accept_key(key.as_bytes()))
            .expect("base64 is a valid header"),
    );
    h.insert(
        header::SEC_WEBSOCKET_PROTOCOL,
        HeaderValue::from_static(proto),
    );
    Ok(resp)
}

async fn session(
    mut ws: WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>,
    v5: bool,
    stdin: bool,
    command: Vec<String>,
) -> Result<(), tokio_tungstenite::tungstenite::Error> {
    let frame = |ch: u8, data: &[u8]| {
        let mut v = Vec::with_capacity(data.len() + 1);
        v.push(ch);
        v.extend_from_slice(data);
        Message::Binary(v.into())
    };
    let echo = stdin && command.first().map(String::as_str) == Some("cat");
    if !echo {
        ws.send(frame(1, format!("{}\n", command.join(" ")).as_bytes()))
            .await?;
    } else {
        while let Some(msg) = ws.next().await {
            match msg? {
                Message::Binary(b) if !b.is_empty() => match b[0] {
                    0 => ws.send(frame(1, &b[1..])).await?,
                    255 if v5 && b.get(1) == Some(&0) => break,
                    _ => {}
                },
                Message::Close(_) => return Ok(()),
                _ => {}
            }
        }
    }
    ws.send(frame(3, br#"{"metadata":{},"status":"Success"}"#))
        .await?;
    ws.close(Some(CloseFrame {
        code: CloseCode::Normal,
        reason: "".into(),
    }))
    .await?;
    while let Some(Ok(_)) = ws.next().await {}
    Ok(())
}
