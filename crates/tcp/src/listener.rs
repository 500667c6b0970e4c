//! `IND2Listener` for the `tcp` provider: a listening TCP socket, and the responder side of the
//! MPA startup (RFC 5044 §7.1.2) for each accepted connection until an application connector
//! takes it with `GetConnectionRequest`.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use netdirect_spi::kit::connector;
use netdirect_spi::kit::listener::{Listener, ListenerProvider, ListenerState, Transport};
use netdirect_spi::traits::Connector;
use netdirect_spi::{fail, Error, Result, Status};
use netdirect_wire::handshake::{self, ConnectRequest, Responder};
use rustix::event::epoll::EventFlags;
use socket2::Socket;

use crate::adapter::Shared;
use crate::connector::TcpConnector;
use crate::engine::{Registered, Source};
use crate::sockets;
use crate::Tcp;

/// A connection whose MPA Request has arrived, waiting for `Accept` or `Reject`.
#[derive(Debug)]
pub(crate) struct Incoming {
    pub(crate) sock: Socket,
    pub(crate) request: ConnectRequest,
    pub(crate) local: SocketAddr,
    pub(crate) peer: SocketAddr,
}

impl Transport for Tcp {
    type Bound = Socket;
    type Listening = Registered<Socket>;
    type Handshake = Handshake;
    type Incoming = Incoming;
    type Connector = TcpConnector;
}

/// The listener: the SPI kit's, over this provider's transport.
pub(crate) type TcpListener = Listener<Tcp>;

impl Source for TcpListener {
    fn on_ready(&self, _events: EventFlags) {
        Tcp::accept_all(self);
    }
}

impl ListenerProvider for Tcp {
    type Adapter = Shared;

    fn bind(this: &TcpListener, addr: SocketAddr) -> Result<()> {
        let mut g = this.lock();
        g.check_bind(addr, crate::is_local(addr.ip()))?;
        let mut held = held();
        if addr.port() != 0 && held.iter().any(|h| overlaps(h, &addr)) {
            return fail(Status::SHARING_VIOLATION);
        }
        let mut tries = 0;
        let (s, local) = loop {
            let s = sockets::stream_for(&addr)
                .map_err(|_| Error::new(Status::INSUFFICIENT_RESOURCES))?;
            // Servers rebind ports whose old connections sit in TIME_WAIT.
            let _ = s.set_reuse_address(true);
            let local = sockets::bind_nd(&s, addr, sockets::Role::Listener)?;
            if !held.iter().any(|h| overlaps(h, &local)) {
                break (s, local);
            }
            // Port 0 landed on a port another listener of ours holds (SO_REUSEADDR let the
            // kernel allow it): pick again, from another random start.
            tries += 1;
            if tries == 64 {
                return fail(Status::TOO_MANY_ADDRESSES);
            }
        };
        held.push(local);
        g.local = Some(local);
        g.bound = Some(s);
        Ok(())
    }

    fn listen(this: &TcpListener, backlog: u32) -> Result<()> {
        let mut g = this.lock();
        let s = g.take_bound_for_listen()?;
        // The kernel backlog holds TCP connections; ND's backlog counts requests waiting for
        // GetConnectionRequest, enforced in `deliver`. Backlog 0 means "no limit".
        let kernel_backlog = if backlog == 0 {
            1024
        } else {
            backlog.min(1024) as i32
        };
        if let Err(e) = s.listen(kernel_backlog) {
            g.bound = Some(s);
            return fail(sockets::bind_status(&e));
        }
        sockets::share_with_connectors(&s);
        // Accepted connections inherit the path watch from here (Linux copies a listening
        // socket's options into each connection it accepts: `sockets` tests it), so
        // `accept_all` sets nothing.
        if sockets::watch_path(&s, this.adapter().config.timeout).is_err() {
            g.bound = Some(s);
            return fail(Status::INSUFFICIENT_RESOURCES);
        }
        g.set_backlog(backlog);
        let src: Weak<dyn Source> = this.me().clone();
        let reg = this
            .adapter()
            .engine
            .register(s, src)
            .map_err(|_| Error::new(Status::INSUFFICIENT_RESOURCES))?;
        g.listening = Some(reg);
        Ok(())
    }

    fn get_local_address(this: &TcpListener) -> Result<SocketAddr> {
        let g = this.lock();
        match (&g.listening, g.local) {
            (Some(l), _) => {
                sockets::local_of(l.get()).ok_or(Error::new(Status::INVALID_DEVICE_STATE))
            }
            _ => fail(Status::INVALID_DEVICE_STATE),
        }
    }

    /// Accept every pending TCP connection and start reading its MPA Request.
    ///
    /// The connecting side sends its Request as soon as TCP connects, so it is usually in the
    /// socket already when `accept` returns: then it is read at once and delivered, and the
    /// connection never enters the epoll set or the timer list (four system calls fewer per
    /// connection). Otherwise it waits there for the rest of the Request.
    fn accept_all(this: &TcpListener) {
        loop {
            let g = this.lock();
            let Some(l) = g.listening.as_ref() else {
                return;
            };
            // Non-blocking from the start; Nagle off and the path watch (`ND_TCP_TIMEOUT_MS`)
            // come from the listening socket, which the kernel copies them from.
            let accepted = rustix::net::acceptfrom_with(
                l.get(),
                rustix::net::SocketFlags::NONBLOCK | rustix::net::SocketFlags::CLOEXEC,
            );
            let bound = g.local;
            drop(g);
            match accepted {
                Ok((fd, from)) => {
                    let sock = Socket::from(fd);
                    let peer = from.and_then(|a| SocketAddr::try_from(a).ok());
                    let hs = Arc::new(Handshake {
                        listener: this.me().clone(),
                        bound,
                        peer,
                        inner: Mutex::new(HsInner {
                            sock: None,
                            buf: Vec::new(),
                            responder: Responder::new(),
                        }),
                    });
                    let read = {
                        let mut g = hs.inner.lock().unwrap_or_else(|e| e.into_inner());
                        let HsInner { buf, responder, .. } = &mut *g;
                        read_request(buf, responder, &sock)
                    };
                    if let Some(outcome) = read {
                        let inc = hs.incoming(outcome, sock);
                        this.deliver(&hs, inc);
                        continue;
                    }
                    this.lock().handshakes.push(hs.clone());
                    let src = src_of(&hs);
                    // Registered after a read that found the socket empty: the epoll set
                    // reports what arrived since (an edge-triggered registration starts with
                    // the socket's current readiness).
                    match this.adapter().engine.register(sock, src) {
                        Ok(reg) => {
                            let mut g = hs.inner.lock().unwrap_or_else(|e| e.into_inner());
                            g.sock = Some(reg);
                            // A peer that never completes its Request is dropped, as siw
                            // does (docs/WIRE.md §2.3, RFC 5044 §7.1.2): otherwise stray or
                            // stalled connections would hold descriptors for the listener's
                            // life.
                            let at =
                                std::time::Instant::now() + this.adapter().config.request_timeout;
                            this.adapter().engine.add_timer(at, src_of(&hs));
                        }
                        Err(_) => this.deliver(&hs, None),
                    }
                }
                Err(rustix::io::Errno::AGAIN) => return,
                Err(rustix::io::Errno::INTR) => {}
                // A connection that failed before it was taken (ECONNABORTED): the next one.
                Err(rustix::io::Errno::CONNABORTED) => {}
                Err(_) => return,
            }
        }
    }

    fn downcast_connector(c: &Arc<dyn Connector>) -> Option<Arc<TcpConnector>> {
        TcpConnector::downcast(c)
    }

    fn refuse(incoming: Incoming) {
        // Best effort: no application call waits for the outcome of a full backlog's refusal.
        let _ = <Self as connector::Transport>::reject_incoming(incoming, &[]);
    }

    /// Give the bound address back to [`HELD`].
    fn release(state: &mut ListenerState<Self>) {
        if let Some(a) = state.local {
            let mut held = held();
            if let Some(i) = held.iter().position(|h| *h == a) {
                held.swap_remove(i);
            }
        }
    }
}

/// Addresses held by this process's bound listeners. `Bind` must report an address already in
/// use on this adapter as ND_SHARING_VIOLATION (docs/ND-RULES.md §2.11 IND2Listener::Bind), but
/// the listening sockets set SO_REUSEADDR (to rebind ports whose old connections sit in
/// TIME_WAIT), and with it Linux lets two sockets that are bound but not yet listening share
/// an address: the clash would only surface at Listen, which has no such status.
static HELD: Mutex<Vec<SocketAddr>> = Mutex::new(Vec::new());

fn held() -> MutexGuard<'static, Vec<SocketAddr>> {
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether two listener addresses claim the same port (a wildcard claims every address of its
/// family; IPv6 sockets are v6-only here).
fn overlaps(a: &SocketAddr, b: &SocketAddr) -> bool {
    a.port() == b.port()
        && a.is_ipv6() == b.is_ipv6()
        && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}

struct HsInner {
    sock: Option<Registered<Socket>>,
    buf: Vec<u8>,
    responder: Responder,
}

/// An accepted TCP connection whose MPA Request is still arriving.
pub(crate) struct Handshake {
    listener: Weak<TcpListener>,
    /// The listener's bound address: the connection's local address unless it is a
    /// wildcard.
    bound: Option<SocketAddr>,
    /// The peer, as `accept` reported it.
    peer: Option<SocketAddr>,
    inner: Mutex<HsInner>,
}

fn src_of(hs: &Arc<Handshake>) -> Weak<dyn Source> {
    Arc::downgrade(hs) as Weak<dyn Source>
}

/// Read what `sock` has of the MPA Request: `None` while more is to come, else the complete
/// Request, or `Some(None)` if the connection ended or sent a bad frame (RFC 5044 §7.1.2 rule
/// 5: close on a bad frame).
fn read_request(
    buf: &mut Vec<u8>,
    responder: &mut Responder,
    sock: &Socket,
) -> Option<Option<ConnectRequest>> {
    loop {
        let mut chunk = [0u8; 1024];
        match rustix::net::recv(sock, &mut chunk[..], rustix::net::RecvFlags::DONTWAIT) {
            Ok((0, _)) => return Some(None),
            Ok((n, _)) => {
                buf.extend_from_slice(&chunk[..n]);
                match responder.handle_request(buf) {
                    Ok(None) => {}
                    Ok(Some((req, _used))) => return Some(Some(req)),
                    Err(_) => return Some(None),
                }
            }
            Err(rustix::io::Errno::AGAIN) => return None,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return Some(None),
        }
    }
}

impl Handshake {
    /// What the handshake delivers to the listener: the request with its socket, or `None`
    /// (the connection is closed).
    fn incoming(&self, outcome: Option<ConnectRequest>, sock: Socket) -> Option<Incoming> {
        let request = outcome?;
        if handshake::must_reject(&request) {
            // Markers requested: refuse as siw does (R=1, then close).
            let _ = sockets::write_all(&sock, &handshake::reject(&request, &[]));
            let _ = sock.shutdown(std::net::Shutdown::Write);
            return None;
        }
        let local = match self.bound {
            Some(a) if !a.ip().is_unspecified() => Some(a),
            _ => sockets::local_of(&sock),
        };
        let peer = self.peer.or_else(|| sockets::peer_of(&sock));
        Some(Incoming {
            sock,
            request,
            local: local?,
            peer: peer?,
        })
    }
}

impl Source for Handshake {
    /// The Request did not come in time: close the connection (the peer sees it end).
    fn on_timer(&self) {
        let Some(me) = self.listener.upgrade() else {
            return;
        };
        let sock = self
            .inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .sock
            .take();
        if sock.is_none() {
            return; // already delivered or failed
        }
        drop(sock);
        me.finish_handshake(self, None);
    }

    fn on_ready(&self, _events: EventFlags) {
        let Some(me) = self.listener.upgrade() else {
            return;
        };
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let HsInner {
            sock,
            buf,
            responder,
        } = &mut *g;
        let Some(reg) = sock.as_ref() else { return };
        let Some(outcome) = read_request(buf, responder, reg.get()) else {
            return;
        };
        let Some(reg) = sock.take() else { return };
        drop(g);
        let inc = self.incoming(outcome, reg.into_inner());
        // Any self-Arc is in the listener's list; look it up to remove it.
        me.finish_handshake(self, inc);
    }
}
