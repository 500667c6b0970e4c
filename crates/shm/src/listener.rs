//! `IND2Listener` for the `shm` provider: a `SOCK_SEQPACKET` socket holding the abstract name of
//! the ND port, and the reception of each connection's REQUEST (with the segment's memfd) until
//! an application connector takes it with `GetConnectionRequest`.

use std::any::Any;
use std::fmt;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use netdirect_spi::kit::listener::{self, ListenerState, Transport};
use netdirect_spi::kit::overlapped::Overlapped;
use netdirect_spi::traits::{self, Connector};
use netdirect_spi::{fail, Error, Result, Status};
use rustix::io::Errno;

use crate::adapter::Shared;
use crate::connector::ShmConnector;
use crate::engine::{Registered, Source};
use crate::proto::{self, Msg, Recv, Request, Space};
use crate::segment::Segment;

/// A connection whose REQUEST arrived and checked out, waiting for `Accept` or `Reject`.
pub(crate) struct Incoming {
    pub(crate) sock: OwnedFd,
    pub(crate) seg: Segment,
    pub(crate) request: Request,
    pub(crate) local: SocketAddr,
    pub(crate) peer: SocketAddr,
}

impl fmt::Debug for Incoming {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Incoming")
            .field("local", &self.local)
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

/// The ND status for a failed claim of a port name.
pub(crate) fn claim_status(e: Errno) -> Status {
    match e {
        Errno::ADDRINUSE => Status::SHARING_VIOLATION,
        Errno::AGAIN => Status::TOO_MANY_ADDRESSES,
        _ => Status::INSUFFICIENT_RESOURCES,
    }
}

/// This provider's side of the kit's listener state.
pub(crate) enum Shm {}

impl Transport for Shm {
    type Bound = OwnedFd;
    type Listening = Registered;
    type Handshake = Handshake;
    type Incoming = Incoming;
    type Connector = ShmConnector;
}

type Inner = ListenerState<Shm>;

/// The listener.
pub(crate) struct ShmListener {
    me: Weak<Self>,
    shared: Arc<Shared>,
    inner: Mutex<Inner>,
}

impl fmt::Debug for ShmListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShmListener")
            .field("local", &self.lock().local)
            .finish()
    }
}

impl ShmListener {
    pub(crate) fn new(shared: Arc<Shared>) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            shared,
            inner: Mutex::new(Inner::new()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Accept every pending Unix connection and start reading its REQUEST.
    fn accept_all(&self) {
        loop {
            let g = self.lock();
            let Some(l) = g.listening.as_ref() else {
                return;
            };
            let accepted = rustix::net::accept_with(
                l.fd(),
                rustix::net::SocketFlags::NONBLOCK | rustix::net::SocketFlags::CLOEXEC,
            );
            drop(g);
            match accepted {
                Ok(sock) => {
                    let hs = Arc::new(Handshake {
                        listener: self.me.clone(),
                        sock: Mutex::new(None),
                    });
                    let src: Weak<dyn Source> = Arc::downgrade(&hs) as Weak<dyn Source>;
                    if let Ok(reg) = self.shared.engine.register(sock, src) {
                        *hs.sock.lock().unwrap_or_else(|e| e.into_inner()) = Some(reg);
                        self.lock().handshakes.push(hs.clone());
                        hs.on_ready();
                    }
                }
                Err(Errno::AGAIN) => return,
                Err(Errno::INTR) => {}
                Err(_) => return,
            }
        }
    }

    /// Whether a request for `dst` is for this listener (same family and port; the bound IP,
    /// or any local IP for a wildcard listener).
    fn serves(&self, dst: &SocketAddr) -> bool {
        let Some(local) = self.lock().local else {
            return false;
        };
        local.port() == dst.port()
            && local.is_ipv6() == dst.is_ipv6()
            && (local.ip() == dst.ip()
                || (local.ip().is_unspecified() && crate::is_local(dst.ip())))
    }

    /// A handshake finished: hand the request to the oldest waiting connector, or queue it.
    fn deliver(&self, hs: &Arc<Handshake>, inc: Option<Incoming>) {
        let mut g = self.lock();
        if let Some(inc) = g.deliver(hs, inc) {
            // Backlog full: the connecting side sees ND_CONNECTION_REFUSED.
            let _ = proto::send(
                &inc.sock,
                &Msg::Reject {
                    private_data: Vec::new(),
                },
                None,
            );
        }
    }
}

impl Source for ShmListener {
    fn on_ready(&self) {
        self.accept_all();
    }
}

impl traits::Listener for ShmListener {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn bind(&self, addr: SocketAddr) -> Result<()> {
        let mut g = self.lock();
        g.check_bind(addr, crate::is_local(addr.ip()))?;
        let s = proto::socket().map_err(|_| Error::new(Status::INSUFFICIENT_RESOURCES))?;
        let port = proto::claim(&s, Space::Listener, addr.is_ipv6(), addr.port())
            .map_err(|e| Error::new(claim_status(e)))?;
        g.local = Some(SocketAddr::new(addr.ip(), port));
        g.bound = Some(s);
        Ok(())
    }

    fn listen(&self, backlog: u32) -> Result<()> {
        let mut g = self.lock();
        let s = g.take_bound_for_listen()?;
        // The kernel's backlog holds Unix connections; ND's backlog counts requests waiting for
        // GetConnectionRequest, enforced in `deliver`. Backlog 0 means "no limit".
        if rustix::net::listen(&s, 4096).is_err() {
            g.bound = Some(s);
            return fail(Status::INSUFFICIENT_RESOURCES);
        }
        g.set_backlog(backlog);
        let src: Weak<dyn Source> = self.me.clone();
        let reg = self
            .shared
            .engine
            .register(s, src)
            .map_err(|_| Error::new(Status::INSUFFICIENT_RESOURCES))?;
        g.listening = Some(reg);
        Ok(())
    }

    fn get_local_address(&self) -> Result<SocketAddr> {
        let g = self.lock();
        match (&g.listening, g.local) {
            (Some(_), Some(a)) => Ok(a),
            _ => fail(Status::INVALID_DEVICE_STATE),
        }
    }

    fn get_connection_request(&self, connector: &Arc<dyn Connector>) -> Result<Overlapped> {
        let conn = ShmConnector::downcast(connector).ok_or(Error::invalid_parameter(1))?;
        listener::check_connector(&*conn)?;
        let mut g = self.lock();
        let (ov, wait) = g.get_connection_request(conn, self.shared.engine.clone())?;
        drop(g);
        if wait {
            // A request may already be sitting in the kernel's queue.
            self.accept_all();
        }
        Ok(ov)
    }

    fn cancel_overlapped_requests(&self) -> Result<()> {
        self.lock().cancel_overlapped_requests();
        Ok(())
    }
}

impl Drop for ShmListener {
    fn drop(&mut self) {
        let g = self.inner.get_mut().unwrap_or_else(|e| e.into_inner());
        g.cancel_overlapped_requests();
        // Queued requests are dropped with their sockets: the connecting sides see end-of-file,
        // which is ND_CONNECTION_REFUSED.
    }
}

/// An accepted Unix connection whose REQUEST has not arrived yet.
pub(crate) struct Handshake {
    listener: Weak<ShmListener>,
    sock: Mutex<Option<Registered>>,
}

impl Source for Handshake {
    fn on_ready(&self) {
        let Some(me) = self.listener.upgrade() else {
            return;
        };
        let mut g = self.sock.lock().unwrap_or_else(|e| e.into_inner());
        let Some(reg) = g.as_ref() else { return };
        let got = proto::recv(reg.fd());
        if matches!(got, Recv::Empty) {
            return;
        }
        let sock = g.take().map(Registered::into_inner);
        drop(g);
        let inc = match (got, sock) {
            (Recv::Msg(Some(Msg::Request(request)), Some(memfd)), Some(sock)) => {
                check_request(&me, sock, &memfd, request)
            }
            // Anything else (malformed, no descriptor, end-of-file): drop the connection; the
            // connecting side sees end-of-file, ND_CONNECTION_REFUSED.
            _ => None,
        };
        let hs = me.lock().find_handshake(self);
        if let Some(hs) = hs {
            me.deliver(&hs, inc);
        }
    }
}

/// Check a REQUEST: for us, sane sizes, a sealed memfd of exactly the announced size.
fn check_request(
    l: &ShmListener,
    sock: OwnedFd,
    memfd: &OwnedFd,
    request: Request,
) -> Option<Incoming> {
    if !l.serves(&request.dst) || request.src.is_ipv6() != request.dst.is_ipv6() {
        let _ = proto::send(
            &sock,
            &Msg::Reject {
                private_data: Vec::new(),
            },
            None,
        );
        return None;
    }
    let seg = Segment::open(memfd, request.params)?;
    Some(Incoming {
        sock,
        seg,
        local: request.dst,
        peer: request.src,
        request,
    })
}
