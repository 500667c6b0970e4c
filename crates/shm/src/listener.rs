//! `IND2Listener` for the `shm` provider: the ND port (`proto::Port`), a `SOCK_SEQPACKET` socket
//! holding the abstract name of the listener's address, and the reception of each connection's REQUEST (with the segment's memfd) until
//! an application connector takes it with `GetConnectionRequest`.

use std::fmt;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, Weak};

use netdirect_spi::kit::connector;
use netdirect_spi::kit::listener::{Listener, ListenerProvider, Transport};
use netdirect_spi::traits::Connector;
use netdirect_spi::{fail, Error, Result, Status};
use rustix::io::Errno;

use crate::adapter::Shared;
use crate::connector::ShmConnector;
use crate::engine::{Registered, Source};
use crate::proto::{self, Msg, Port, Recv, Request, Space};
use crate::segment::Segment;
use crate::Shm;

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

/// A bound listener: the socket holding its name, and its port. (Fields drop in order: the
/// name goes before the port, so whoever takes the port next finds the name free.)
pub(crate) struct Bound {
    sock: OwnedFd,
    port: Port,
}

/// A listening listener: its socket in the engine's epoll set, and its port (dropped in this
/// order, as [`Bound`]).
pub(crate) struct Listening {
    sock: Registered,
    _port: Port,
}

impl Transport for Shm {
    type Bound = Bound;
    type Listening = Listening;
    type Handshake = Handshake;
    type Incoming = Incoming;
    type Connector = ShmConnector;
}

/// The listener: the SPI kit's, over this provider's transport.
pub(crate) type ShmListener = Listener<Shm>;

impl Source for ShmListener {
    fn on_ready(&self) {
        Shm::accept_all(self);
    }
}

impl ListenerProvider for Shm {
    type Adapter = Shared;

    fn bind(this: &ShmListener, addr: SocketAddr) -> Result<()> {
        let mut g = this.lock();
        g.check_bind(addr, crate::is_local(addr.ip()))?;
        let (port, n) = proto::reserve(Space::Listener, addr).map_err(Error::new)?;
        let local = SocketAddr::new(addr.ip(), n);
        let sock = proto::socket().map_err(|_| Error::new(Status::INSUFFICIENT_RESOURCES))?;
        // The port is ours, so the name is free: another process's listener on this address
        // and port would hold the port too.
        rustix::net::bind(&sock, &proto::listener_name(local))
            .map_err(|_| Error::new(Status::SHARING_VIOLATION))?;
        g.local = Some(local);
        g.bound = Some(Bound { port, sock });
        Ok(())
    }

    fn listen(this: &ShmListener, backlog: u32) -> Result<()> {
        let mut g = this.lock();
        let b = g.take_bound_for_listen()?;
        // The kernel's backlog holds Unix connections; ND's backlog counts requests waiting for
        // GetConnectionRequest, enforced in `deliver`. Backlog 0 means "no limit".
        if rustix::net::listen(&b.sock, 4096).is_err() {
            g.bound = Some(b);
            return fail(Status::INSUFFICIENT_RESOURCES);
        }
        let Bound { port, sock } = b;
        g.set_backlog(backlog);
        let src: Weak<dyn Source> = this.me().clone();
        let reg = this
            .adapter()
            .engine
            .register(sock, src)
            .map_err(|_| Error::new(Status::INSUFFICIENT_RESOURCES))?;
        g.listening = Some(Listening {
            _port: port,
            sock: reg,
        });
        Ok(())
    }

    fn get_local_address(this: &ShmListener) -> Result<SocketAddr> {
        let g = this.lock();
        match (&g.listening, g.local) {
            (Some(_), Some(a)) => Ok(a),
            _ => fail(Status::INVALID_DEVICE_STATE),
        }
    }

    /// Accept every pending Unix connection and start reading its REQUEST.
    fn accept_all(this: &ShmListener) {
        loop {
            let g = this.lock();
            let Some(l) = g.listening.as_ref() else {
                return;
            };
            let accepted = rustix::net::accept_with(
                l.sock.fd(),
                rustix::net::SocketFlags::NONBLOCK | rustix::net::SocketFlags::CLOEXEC,
            );
            drop(g);
            match accepted {
                Ok(sock) => {
                    let hs = Arc::new(Handshake {
                        listener: this.me().clone(),
                        sock: Mutex::new(None),
                    });
                    // The connecting side sends its REQUEST right after `connect`, so it is
                    // usually here already: then the connection is delivered without entering
                    // the epoll set or the timer list (five system calls fewer per connection).
                    let got = proto::recv(&sock);
                    if !matches!(got, Recv::Empty) {
                        let inc = request_of(this, got, sock);
                        this.deliver(&hs, inc);
                        continue;
                    }
                    let src: Weak<dyn Source> = Arc::downgrade(&hs) as Weak<dyn Source>;
                    if let Ok(reg) = this.adapter().engine.register(sock, src) {
                        *hs.sock.lock().unwrap_or_else(|e| e.into_inner()) = Some(reg);
                        this.lock().handshakes.push(hs.clone());
                        // A process that connects and never completes its REQUEST is dropped,
                        // as tcp drops a stalled MPA Request: otherwise it would hold a
                        // descriptor for the listener's life.
                        let at = std::time::Instant::now() + this.adapter().config.request_timeout;
                        let src: Weak<dyn Source> = Arc::downgrade(&hs) as Weak<dyn Source>;
                        this.adapter().engine.add_timer(at, src);
                        hs.on_ready();
                    }
                }
                Err(Errno::AGAIN) => return,
                Err(Errno::INTR) => {}
                Err(_) => return,
            }
        }
    }

    fn downcast_connector(c: &Arc<dyn Connector>) -> Option<Arc<ShmConnector>> {
        ShmConnector::downcast(c)
    }

    fn refuse(incoming: Incoming) {
        // Best effort: no application call waits for the outcome of a full backlog's refusal.
        let _ = <Self as connector::Transport>::reject_incoming(incoming, &[]);
    }
}

/// Whether a request for `dst` is for this listener (same family and port; the bound IP,
/// or any local IP for a wildcard listener).
fn serves(this: &ShmListener, dst: &SocketAddr) -> bool {
    let Some(local) = this.lock().local else {
        return false;
    };
    local.port() == dst.port()
        && local.is_ipv6() == dst.is_ipv6()
        && (local.ip() == dst.ip() || (local.ip().is_unspecified() && crate::is_local(dst.ip())))
}

/// An accepted Unix connection whose REQUEST has not arrived yet.
pub(crate) struct Handshake {
    listener: Weak<ShmListener>,
    sock: Mutex<Option<Registered>>,
}

impl Source for Handshake {
    /// The REQUEST did not come in time: close the connection (the peer sees end-of-file).
    fn on_timer(&self) {
        let Some(me) = self.listener.upgrade() else {
            return;
        };
        let sock = self.sock.lock().unwrap_or_else(|e| e.into_inner()).take();
        if sock.is_none() {
            return; // delivered or failed already
        }
        drop(sock);
        me.finish_handshake(self, None);
    }

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
        let sock = g.take().and_then(Registered::into_inner);
        drop(g);
        let inc = sock.and_then(|sock| request_of(&me, got, sock));
        me.finish_handshake(self, inc);
    }
}

/// What the first message read from an accepted connection makes of it: a checked request,
/// or `None` for anything else (malformed, no descriptor, end-of-file), which drops the
/// connection; the connecting side then sees end-of-file, ND_CONNECTION_REFUSED.
fn request_of(l: &ShmListener, got: Recv, sock: OwnedFd) -> Option<Incoming> {
    match got {
        Recv::Msg(Some(Msg::Request(request)), Some(memfd)) => {
            check_request(l, sock, &memfd, request)
        }
        _ => None,
    }
}

/// Check a REQUEST: for us, sane sizes, a sealed memfd of exactly the announced size.
fn check_request(
    l: &ShmListener,
    sock: OwnedFd,
    memfd: &OwnedFd,
    request: Request,
) -> Option<Incoming> {
    if !serves(l, &request.dst) || request.src.is_ipv6() != request.dst.is_ipv6() {
        // Not for this listener (it shares the port's name with other local addresses): as
        // over TCP, nobody listens there. Closing (no REJECT) makes it a plain refusal, which
        // leaves the connector usable for another Connect.
        drop(sock);
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
