//! A TCP forwarder between r8s and its upstream that breaks on command
//! (loopback only): it can refuse connections, reset every open one, stall
//! (accept and pass nothing on, either way: a silent partition) or slow
//! them down, and heal. It can also move new connections to another
//! target, and show a test what passes through each connection.
// A zero linger never blocks on drop (tokio deprecates `set_linger` for the
// blocking non-zero case); it is how a connection is reset instead of closed.
#![allow(deprecated)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the forwarder does with connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forwards both ways.
    Pass,
    /// Holds every byte, both ways, on open and new connections (nothing is
    /// closed, nothing reset): a silent partition.
    Stall,
    /// Resets new connections as soon as they are accepted.
    Refuse,
    /// Stops listening: connecting is refused (ECONNREFUSED), as to a
    /// stopped apiserver. Open connections are left alone (reset them with
    /// [`Forwarder::reset_all`]); it listens on the same port again on heal.
    Closed,
    /// Forwards at most this many bytes per second per direction.
    Slow(u64),
}

/// Sees what passes through one connection (a test counts requests or
/// watch events with it); both directions share it.
pub trait Observer: Send + 'static {
    /// Bytes on their way to the server (requests).
    fn to_server(&mut self, _bytes: &[u8]) {}
    /// Bytes on their way to the client (answers).
    fn to_client(&mut self, _bytes: &[u8]) {}
    /// The server closed the connection, every byte passed on.
    fn server_closed(&mut self) {}
}

/// Makes the observer of each new connection, told where it goes.
pub type Observe = Arc<dyn Fn(SocketAddr) -> Box<dyn Observer> + Send + Sync>;

type Shared = Arc<Mutex<Box<dyn Observer>>>;

/// A running forwarder.
pub struct Forwarder {
    /// Where r8s connects.
    pub addr: SocketAddr,
    /// Where new connections go.
    target: Arc<Mutex<SocketAddr>>,
    mode: watch::Sender<Mode>,
    resets: watch::Sender<u64>,
    holes: watch::Sender<u64>,
    /// Bytes passed from the server to its clients so far.
    to_clients: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl Forwarder {
    /// Forwards 127.0.0.1:(a free port) to `target`.
    pub async fn start(target: SocketAddr) -> Self {
        Self::start_observed(target, None).await
    }

    /// The same, showing each connection to the observer `observe` makes.
    pub async fn start_observed(target: SocketAddr, observe: Option<Observe>) -> Self {
        let target = Arc::new(Mutex::new(target));
        let to = target.clone();
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (mode, mode_rx) = watch::channel(Mode::Pass);
        let (resets, resets_rx) = watch::channel(0u64);
        let (holes, holes_rx) = watch::channel(0u64);
        let to_clients = Arc::new(AtomicU64::new(0));
        let counted = to_clients.clone();
        let task = tokio::spawn(async move {
            let mut mode = mode_rx.clone();
            let mut l = Some(l);
            loop {
                let Some(listener) = &l else {
                    // Closed: the port stays bound, not listening (a
                    // connection is refused, and no other process can take
                    // the port meanwhile); listen again once told to.
                    let reserved = reserve(addr);
                    if mode.wait_for(|m| *m != Mode::Closed).await.is_err() {
                        return;
                    }
                    l = Some(reserved.listen(1024).expect("the same port again"));
                    continue;
                };
                let accepted = tokio::select! {
                    a = listener.accept() => Some(a),
                    _ = mode.wait_for(|m| *m == Mode::Closed) => None,
                };
                let Some(accepted) = accepted else {
                    l = None;
                    continue;
                };
                let Ok((client, _)) = accepted else {
                    return;
                };
                if *mode_rx.borrow() == Mode::Refuse {
                    let _ = client.set_linger(Some(Duration::ZERO));
                    drop(client);
                    continue;
                }
                let target = *to.lock().unwrap();
                let observer = observe.as_ref().map(|o| Arc::new(Mutex::new(o(target))));
                tokio::spawn(connection(
                    client,
                    target,
                    mode_rx.clone(),
                    (resets_rx.clone(), holes_rx.clone()),
                    counted.clone(),
                    observer,
                ));
            }
        });
        Forwarder {
            addr,
            target,
            mode,
            resets,
            holes,
            to_clients,
            task,
        }
    }

    /// Bytes passed from the server to its clients so far (who is talking
    /// through it).
    pub fn bytes_to_clients(&self) -> u64 {
        self.to_clients.load(Ordering::Relaxed)
    }

    /// `http://` its address.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Sends new connections to `to` (open ones stay where they are).
    pub fn retarget(&self, to: SocketAddr) {
        *self.target.lock().unwrap() = to;
    }

    /// Changes what it does from now on (`Pass` heals).
    pub fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }

    /// Resets every open connection (RST to both ends).
    pub fn reset_all(&self) {
        self.resets.send_modify(|n| *n += 1);
    }

    /// Makes every open connection silent for good, both ways: nothing is
    /// passed, closed or reset, whatever the mode later (a black hole that
    /// keeps the connections it had; new ones do as the mode says).
    pub fn black_hole_all(&self) {
        self.holes.send_modify(|n| *n += 1);
    }

    /// Stops accepting (open connections are reset).
    pub fn stop(self) {
        self.reset_all();
        self.task.abort();
    }
}

async fn connection(
    client: TcpStream,
    target: SocketAddr,
    mode: watch::Receiver<Mode>,
    (mut resets, mut holes): (watch::Receiver<u64>, watch::Receiver<u64>),
    to_client: Arc<AtomicU64>,
    observer: Option<Shared>,
) {
    resets.mark_unchanged();
    holes.mark_unchanged();
    let Ok(server) = TcpStream::connect(target).await else {
        let _ = client.set_linger(Some(Duration::ZERO));
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    let both = async {
        tokio::join!(
            pipe(cr, sw, mode.clone(), None, observer.clone()),
            pipe(sr, cw, mode, Some(to_client), observer)
        )
    };
    let mut both = std::pin::pin!(both);
    tokio::select! {
        (a, b) = &mut both => {
            // Both ends closed in turn: close as they did.
            drop((a, b));
        }
        _ = resets.changed() => {}
        _ = holes.changed() => {
            // Black-holed: the sockets stay open, and nothing moves.
            let _ = resets.changed().await;
        }
    }
}

/// Copies one direction, holding bytes while stalled; passes the end on.
/// On a reset the caller drops the halves mid-copy: with linger 0 on both
/// sockets (set here), both ends get a RST.
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut mode: watch::Receiver<Mode>,
    counted: Option<Arc<AtomicU64>>,
    observer: Option<Shared>,
) -> (
    tokio::net::tcp::OwnedReadHalf,
    tokio::net::tcp::OwnedWriteHalf,
) {
    let _ = from.as_ref().set_linger(Some(Duration::ZERO));
    let _ = to.as_ref().set_linger(Some(Duration::ZERO));
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if mode.wait_for(|m| *m != Mode::Stall).await.is_err() {
            return (from, to);
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => {
                if let (Some(o), true) = (&observer, counted.is_some()) {
                    o.lock().unwrap().server_closed();
                }
                let _ = to.as_ref().set_linger(None);
                let _ = to.shutdown().await;
                return (from, to);
            }
            Ok(n) => n,
        };
        // Bytes read just before a stall are held too.
        let m = match mode.wait_for(|m| *m != Mode::Stall).await {
            Ok(m) => *m,
            Err(_) => return (from, to),
        };
        if let Mode::Slow(rate) = m {
            tokio::time::sleep(Duration::from_secs_f64(n as f64 / rate.max(1) as f64)).await;
        }
        if let Some(o) = &observer {
            let mut o = o.lock().unwrap();
            // The direction toward the client is the one counted.
            if counted.is_some() {
                o.to_client(&buf[..n]);
            } else {
                o.to_server(&buf[..n]);
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return (from, to);
        }
        if let Some(c) = &counted {
            c.fetch_add(n as u64, Ordering::Relaxed);
        }
    }
}

/// `addr` bound again at once (its listener just closed), without
/// listening: connections to it are refused, as to a stopped server's port,
/// while no other socket can bind it.
fn reserve(addr: SocketAddr) -> tokio::net::TcpSocket {
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket.set_reuseaddr(true).expect("SO_REUSEADDR");
    socket.bind(addr).expect("the port just closed");
    socket
}
