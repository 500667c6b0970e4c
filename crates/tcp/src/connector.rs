//! `IND2Connector` for the `tcp` provider: the active side's TCP connect and MPA Request /
//! Reply exchange, and the passive side's Accept / Reject of a request a listener delivered.
//!
//! ND's three steps map onto MPA v2 peer-to-peer mode (RFC 6581 §9, docs/WIRE.md §2.9):
//! `Connect` sends the MPA Request and completes on the Reply; `CompleteConnect` sends the RTR;
//! the passive `Accept` sends the Reply and completes when the RTR arrives.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, MutexGuard, Weak};
use std::time::Instant;

use netdirect_spi::kit::addresses::unspecified_like;
use netdirect_spi::kit::connector::{
    self, AttachedQp, Claim, Connector, ConnectorProvider, ConnectorState, Transport,
};
use netdirect_spi::kit::negotiate;
use netdirect_spi::kit::overlapped::{OvCompleter, Overlapped};
use netdirect_spi::traits::{self, QueuePair};
use netdirect_spi::{AdapterInfo, Error, ReadLimits, Result, Status};
use netdirect_wire::handshake::{
    self, AcceptConfig, ConnectRequest, Initiator, InitiatorConfig, InitiatorOutcome, Negotiated,
};
use rustix::event::epoll::EventFlags;
use socket2::{SockAddr, Socket};

use crate::adapter::Shared;
use crate::claim::PortClaim;
use crate::engine::{Registered, Source};
use crate::listener::Incoming;
use crate::qp::{Conn, TcpQp};
use crate::sockets::{self, Role};
use crate::Tcp;

/// The largest IRD/ORD we put in an MPA v2 word (14 bits, 0x3FFF reserved: "not negotiated").
const MAX_WIRE_LIMIT: u32 = 0x3FFE;

/// What `Bind` holds: the socket, bound.
pub(crate) struct Bound {
    sock: Socket,
    /// Bound to port 0: the provider chose the port, and may choose another when a Connect
    /// from it would repeat a 4-tuple that a TIME_WAIT holds.
    any_port: bool,
    /// An explicit port's claim in ND's connector port space (R-CONN-2): it goes with the
    /// socket, to the queue pair.
    claim: Option<PortClaim>,
}

/// How many other ports a Connect from a provider-chosen port tries when the kernel refuses
/// the 4-tuple (`EADDRNOTAVAIL`: a TIME_WAIT of an earlier connection to the same peer holds
/// it, which the kernel reuses on loopback only, `tcp_tw_reuse`).
const OTHER_PORTS: usize = 64;

/// An active connection attempt: TCP connect, then the MPA Request / Reply exchange.
pub(crate) struct Connecting {
    sock: Registered<Socket>,
    claim: Option<PortClaim>,
    qp: Claim<TcpQp>,
    ov: OvCompleter,
    init: Initiator,
    request: Vec<u8>,
    sent: usize,
    reply: Vec<u8>,
    deadline: Instant,
    /// TCP reported the connection established (then only the MPA exchange is left).
    connected: bool,
}

/// Active side, the peer accepted: what CompleteConnect hands to the queue pair.
pub(crate) struct Connected {
    sock: Socket,
    claim: Option<PortClaim>,
    qp: Claim<TcpQp>,
    neg: Negotiated,
    leftover: Vec<u8>,
}

impl Transport for Tcp {
    type Bound = Bound;
    type Connecting = Connecting;
    type Connected = Connected;
    type Incoming = Incoming;
    type Qp = TcpQp;

    fn abandon(attempt: Connecting) {
        attempt.ov.complete(Status::CANCELED);
        // The connector may Connect again from the port it bound.
        sockets::close_abortively(attempt.sock.into_inner());
        drop(attempt.claim);
    }

    fn bind_again(addr: SocketAddr) -> Option<Bound> {
        let sock = sockets::stream_for(&addr).ok()?;
        let (_, claim) = sockets::bind_connector(&sock, addr).ok()?;
        Some(Bound {
            sock,
            any_port: false,
            claim,
        })
    }

    fn reject_incoming(inc: Incoming, private_data: &[u8]) -> Result<()> {
        // As in Accept: a peer whose FIN or RST already waits abandoned the establishment.
        let gone = sockets::peer_gone(&inc.sock);
        let reply = handshake::reject(&inc.request, private_data);
        let sent = !gone && sockets::write_all(&inc.sock, &reply).is_ok();
        let _ = inc.sock.shutdown(std::net::Shutdown::Write);
        if sent {
            Ok(())
        } else {
            Err(Error::new(Status::CONNECTION_ABORTED))
        }
    }

    fn decline(connected: Connected) {
        // Its TIME_WAIT, if any, must not keep a later Bind from the port (`sockets::bind_nd`).
        sockets::reusable_when_closed(&connected.sock);
        let _ = connected.sock.shutdown(std::net::Shutdown::Both);
    }
}

impl AttachedQp for TcpQp {
    fn is_idle(&self) -> bool {
        self.conn() == Conn::Idle
    }

    fn notify_disconnect(&self) -> Overlapped {
        Self::notify_disconnect(self)
    }

    fn disconnect(&self) {
        Self::disconnect(self)
    }

    fn cancel_accept(&self) {
        Self::cancel_accept(self)
    }

    fn cancel_notify_disconnect(&self) {
        Self::cancel_notify_disconnect(self)
    }

    fn claim_flag(&self) -> &AtomicBool {
        &self.claimed
    }
}

type State = connector::State<Tcp>;

/// A connector: the SPI kit's, over this provider's transport.
pub(crate) type TcpConnector = Connector<Tcp>;

/// Advance a connection attempt.
fn drive(this: &TcpConnector) {
    let mut g = this.lock();
    let State::Connecting(Connecting {
        sock,
        ov,
        init,
        request,
        sent,
        reply,
        deadline,
        connected,
        ..
    }) = &mut g.state
    else {
        return;
    };
    let s = sock.get();
    let result: Option<std::result::Result<(), Status>> = loop {
        if !*connected {
            if let Ok(Some(e)) = s.take_error() {
                break Some(Err(sockets::connect_status(&e)));
            }
            if sockets::peer_of(s).is_none() {
                // Still connecting.
                if Instant::now() >= *deadline {
                    break Some(Err(Status::IO_TIMEOUT));
                }
                break None;
            }
            *connected = true;
            watch_connected(this, s);
        }
        if *sent < request.len() {
            match rustix::net::send(s, &request[*sent..], rustix::net::SendFlags::NOSIGNAL) {
                Ok(n) => {
                    *sent += n;
                    continue;
                }
                Err(rustix::io::Errno::AGAIN) => {
                    if Instant::now() >= *deadline {
                        break Some(Err(Status::IO_TIMEOUT));
                    }
                    break None;
                }
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => break Some(Err(sockets::connect_status(&e.into()))),
            }
        }
        // The Request is out: the Reply comes when the peer's application Accepts or Rejects,
        // which may take as long as it likes ("NetworkDirect providers should avoid timing out
        // connections because the listening peer did not call IND2Connector::Accept"). The
        // application abandons the attempt with CancelOverlappedRequests or by releasing the
        // connector; a peer host that is gone ends it with a TCP error.
        let mut chunk = [0u8; 1024];
        match rustix::net::recv(s, &mut chunk[..], rustix::net::RecvFlags::DONTWAIT) {
            Ok((0, _)) => break Some(Err(Status::CONNECTION_REFUSED)),
            Ok((n, _)) => {
                reply.extend_from_slice(&chunk[..n]);
                match init.handle_reply(reply) {
                    Ok(None) => continue,
                    Ok(Some(_)) => break Some(Ok(())),
                    Err(e) => {
                        // A Reply that leaves no RTR we can use gets the one Terminate RFC
                        // 6581 §9.2 asks for before the close (best effort: the connection
                        // is refused either way).
                        if let Some(t) = init.terminate_for(&e, reply) {
                            let _ = sockets::write_all(s, &t);
                            let _ = s.shutdown(std::net::Shutdown::Write);
                        }
                        break Some(Err(Status::CONNECTION_REFUSED));
                    }
                }
            }
            Err(rustix::io::Errno::AGAIN) => break None,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => break Some(Err(sockets::connect_status(&e.into()))),
        }
    };
    let Some(result) = result else { return };
    let _ = ov;
    let me: Weak<dyn Source> = this.me().clone();
    this.adapter().engine.cancel_timers(&me);
    let State::Connecting(Connecting {
        sock,
        claim,
        qp,
        ov,
        mut init,
        reply,
        ..
    }) = std::mem::replace(&mut g.state, State::Idle)
    else {
        unreachable!()
    };
    let sock = sock.into_inner();
    let status = match result.map(|()| init.handle_reply(&reply)) {
        Err(status) => status,
        Ok(Ok(Some((InitiatorOutcome::Accepted(neg), used)))) => {
            g.peer_private_data = neg.private_data.clone();
            // Active GetReadLimits: the acceptor's values, in our view, within our offer (as
            // the queue pair is programmed: `establish_active`).
            let peer = ReadLimits {
                inbound: u32::from(neg.peer_ird),
                outbound: u32::from(neg.peer_ord),
            };
            // What our MPA Request offered: the Initiator keeps it.
            let offered = ReadLimits {
                inbound: u32::from(init.ird()),
                outbound: u32::from(init.ord()),
            };
            g.limits = negotiate::active_view(offered, peer);
            // `g.peer` and `g.local` are the connection's since `connect`.
            let leftover = reply[used..].to_vec();
            g.state = State::Connected(Connected {
                sock,
                claim,
                qp,
                neg,
                leftover,
            });
            ov.complete(Status::SUCCESS);
            return;
        }
        Ok(Ok(Some((InitiatorOutcome::Rejected { private_data }, _)))) => {
            g.refused_by_peer(private_data);
            Status::CONNECTION_REFUSED
        }
        Ok(_) => Status::CONNECTION_REFUSED,
    };
    // A failed attempt leaves the connector usable for another Connect, bound as before. The
    // socket is reset, not closed: were this end the first to close (a responder may hold the
    // connection open after its Reject, RFC 5044 §7.1.2), TIME_WAIT would keep the port from
    // the retry (`sockets::close_abortively`).
    sockets::close_abortively(sock);
    // The port's claim goes with the socket; binding again claims it again.
    drop(claim);
    g.restore_bind();
    ov.complete(status);
}

/// The connection is up: from now on a dead path or peer ends the attempt (and later the
/// connection) within `ND_TCP_TIMEOUT_MS`, even while the Reply is awaited without a limit of
/// our own. Best effort: without it the kernel's limits apply.
fn watch_connected(this: &TcpConnector, s: &Socket) {
    let _ = sockets::watch_path(s, this.adapter().config.timeout);
}

impl Source for TcpConnector {
    fn on_ready(&self, _events: EventFlags) {
        drive(self);
    }

    fn on_timer(&self) {
        drive(self);
    }
}

/// The limits an MPA Request offers (its IRD as `inbound`, ORD as `outbound`); a Rev 1 request
/// offers none.
fn peer_limits(req: &ConnectRequest) -> ReadLimits {
    req.enhanced.map_or(ReadLimits::default(), |e| ReadLimits {
        inbound: u32::from(e.ird),
        outbound: u32::from(e.ord),
    })
}

/// A socket for `dest`'s family bound to its wildcard address, port 0: how an unbound
/// connector connects (as a Bind to port 0 would).
fn bind_any(dest: SocketAddr) -> Result<(Socket, SocketAddr)> {
    let s = sockets::stream_for(&dest).map_err(|_| Error::new(Status::INSUFFICIENT_RESOURCES))?;
    let a = sockets::bind_nd(
        &s,
        SocketAddr::new(unspecified_like(dest.ip()), 0),
        Role::Connector,
    )?;
    Ok((s, a))
}

impl ConnectorProvider for Tcp {
    type Adapter = Shared;

    fn info(adapter: &Shared) -> &AdapterInfo {
        &adapter.info
    }

    fn describe(inc: &Incoming) -> (SocketAddr, SocketAddr, Vec<u8>) {
        (inc.local, inc.peer, inc.request.private_data.clone())
    }

    fn offered(inc: &Incoming) -> ReadLimits {
        peer_limits(&inc.request)
    }

    fn downcast_qp(qp: &Arc<dyn QueuePair>, adapter: &Arc<Shared>) -> Option<Arc<TcpQp>> {
        TcpQp::downcast(qp).filter(|q| Arc::ptr_eq(&q.shared, adapter))
    }

    fn bind(this: &TcpConnector, addr: SocketAddr) -> Result<()> {
        let mut g = this.lock();
        if g.check_bind(addr, crate::is_local(addr.ip()))? {
            return Ok(());
        }
        g.rebind(|| {
            let sock = sockets::stream_for(&addr)
                .map_err(|_| Error::new(Status::INSUFFICIENT_RESOURCES))?;
            let (local, claim) = sockets::bind_connector(&sock, addr)?;
            let any_port = addr.port() == 0;
            Ok((
                Bound {
                    sock,
                    any_port,
                    claim,
                },
                local,
            ))
        })
    }

    fn connect(
        this: &TcpConnector,
        mut g: MutexGuard<'_, ConnectorState<Self>>,
        qp: Claim<TcpQp>,
        dest: SocketAddr,
        limits: ReadLimits,
        private_data: &[u8],
    ) -> Result<Overlapped> {
        let (mut sock, mut local, any_port, claim) = match g.take_bound_for(dest)? {
            Some((b, a)) => (b.sock, a, b.any_port, b.claim),
            None => {
                let unbound = sockets::unbound_for(&dest)
                    .map_err(|_| Error::new(Status::INSUFFICIENT_RESOURCES))?;
                match unbound {
                    // The kernel picks the address and port at `connect`.
                    Some(s) => (
                        s,
                        SocketAddr::new(unspecified_like(dest.ip()), 0),
                        true,
                        None,
                    ),
                    None => {
                        let (s, a) = bind_any(dest)?;
                        (s, a, true, None)
                    }
                }
            }
        };
        g.local = Some(local);
        // With ORD 0 only the Write RTR is offered (a Read RTR would need an ORD slot).
        let offered = negotiate::offer(&this.adapter().info, limits);
        let ird = offered.inbound.min(MAX_WIRE_LIMIT);
        let ord = offered.outbound.min(MAX_WIRE_LIMIT);
        let init = Initiator::new(InitiatorConfig {
            crc: this.adapter().config.crc,
            ird: ird as u16,
            ord: ord as u16,
            p2p: true,
            private_data: private_data.to_vec(),
            probe: this.adapter().config.write_probe,
        });
        let request = init.request();
        let (ov, c) = Overlapped::pending(this.adapter().engine.clone());
        // Withdrawing this one request abandons the attempt, as CancelOverlappedRequests does.
        let me = this.me().clone();
        c.set_canceller(move || {
            if let Some(me) = me.upgrade() {
                let _ = traits::Connector::cancel_overlapped_requests(&*me);
            }
        });
        let mut others = 0;
        loop {
            match sock.connect(&SockAddr::from(dest)) {
                Ok(()) => break,
                Err(e)
                    if e.raw_os_error() == Some(rustix::io::Errno::INPROGRESS.raw_os_error()) =>
                {
                    break
                }
                Err(e)
                    if any_port
                        && others < OTHER_PORTS
                        && e.raw_os_error()
                            == Some(rustix::io::Errno::ADDRNOTAVAIL.raw_os_error()) =>
                {
                    // The port chosen has a TIME_WAIT to this very peer, or (an unbound
                    // connector) the kernel found no free port in its range: bind another.
                    others += 1;
                    let ip = SocketAddr::new(local.ip(), 0);
                    let s = sockets::stream_for(&dest)
                        .map_err(|_| Error::new(Status::INSUFFICIENT_RESOURCES))?;
                    local = sockets::bind_nd(&s, ip, Role::Connector)?;
                    sock = s;
                    g.local = Some(local);
                }
                Err(e) => {
                    // The attempt failed at once; the connector stays usable, bound as before.
                    // A provider-chosen port refused every time: TIME_WAITs toward this peer
                    // hold the tries' 4-tuples, which the kernel reuses on loopback only
                    // (`tcp_tw_reuse`), as port 0's exhaustion.
                    let status = if others == OTHER_PORTS
                        && e.raw_os_error() == Some(rustix::io::Errno::ADDRNOTAVAIL.raw_os_error())
                    {
                        Status::TOO_MANY_ADDRESSES
                    } else {
                        sockets::connect_status(&e)
                    };
                    drop((sock, claim));
                    g.restore_bind();
                    c.complete(status);
                    return Ok(ov);
                }
            }
        }
        // On loopback TCP connects within `connect`: the Request then goes out at once, and
        // what is left is to wait for the Reply, as long as the peer likes (see `drive`), so
        // the attempt needs neither a deadline nor a wake-up for writability. What is not
        // needed to send it is done after, while the peer reads it.
        let mut sent = 0;
        let connected = sockets::peer_of(&sock).is_some();
        if connected {
            if let Ok(n) = rustix::net::send(
                &sock,
                &request,
                rustix::net::SendFlags::NOSIGNAL | rustix::net::SendFlags::DONTWAIT,
            ) {
                sent = n;
            }
            watch_connected(this, &sock);
        }
        // The kernel chose the source address (and, unbound, the port) at `connect`: that is
        // GetLocalAddress from now on, not the wildcard address bound before (as shm reports).
        if let Some(local) = sockets::local_of(&sock) {
            g.local = Some(local);
        }
        let awaits_reply = connected && sent == request.len();
        let src: Weak<dyn Source> = this.me().clone();
        let reg = this
            .adapter()
            .engine
            .register_for(sock, src, !awaits_reply)
            .map_err(|_| Error::new(Status::INSUFFICIENT_RESOURCES))?;
        let deadline = Instant::now() + this.adapter().config.connect_timeout;
        if !awaits_reply {
            this.adapter().engine.add_timer(deadline, this.me().clone());
        }
        g.peer = Some(dest);
        g.state = State::Connecting(Connecting {
            sock: reg,
            claim,
            qp,
            ov: c,
            init,
            request,
            sent,
            reply: Vec::new(),
            deadline,
            connected,
        });
        drop(g);
        if !awaits_reply {
            drive(this);
        }
        // Else a Reply that came already is reported by the registration, which starts with
        // the socket's readiness.
        Ok(ov)
    }

    fn complete_connect(this: &TcpConnector) -> Result<Overlapped> {
        let mut g = this.lock();
        let Connected {
            sock,
            claim,
            qp,
            neg,
            leftover,
        } = g.take_connected()?;
        qp.establish_active(sock, &neg, &leftover)?;
        qp.hold_port_claim(claim);
        g.state = State::Attached(qp.queue_pair().clone());
        Ok(Overlapped::completed(
            this.adapter().engine.clone(),
            Status::SUCCESS,
        ))
    }

    fn accept(
        this: &TcpConnector,
        mut g: MutexGuard<'_, ConnectorState<Self>>,
        qp: Arc<TcpQp>,
        inc: Incoming,
        granted: ReadLimits,
        private_data: &[u8],
    ) -> Result<Overlapped> {
        let (ird, ord) = (granted.inbound, granted.outbound);
        let (reply, neg) = handshake::accept(
            &inc.request,
            &AcceptConfig {
                crc: this.adapter().config.crc,
                ird: ird as u16,
                ord: ord as u16,
                private_data: private_data.to_vec(),
                probe: this.adapter().config.write_probe,
            },
        );
        // IND2Connector::Accept: ND_CONNECTION_ABORTED, "the connecting peer abandoned the
        // connection establishment": it closed or reset before our Reply could reach it. One
        // that leaves after the Reply went out is refused instead (docs/ND-RULES.md D9), when
        // its end of stream reaches the pending Accept.
        if sockets::peer_gone(&inc.sock) || sockets::write_all(&inc.sock, &reply).is_err() {
            return Ok(Overlapped::completed(
                this.adapter().engine.clone(),
                Status::CONNECTION_ABORTED,
            ));
        }
        // After Accept, GetReadLimits reports the negotiated limits from our point of view
        // (docs/ND-RULES.md §2.10 GetReadLimits, D25): inbound = the Reads the peer may now
        // issue = our IRD as sent in the Reply, outbound = our ORD as sent. The peer's
        // *requested* ORD is no longer the answer once Accept has clamped it.
        g.limits = ReadLimits {
            inbound: u32::from(neg.local_ird),
            outbound: u32::from(neg.local_ord),
        };
        let (ov, c) = Overlapped::pending(this.adapter().engine.clone());
        let weak_qp = Arc::downgrade(&qp);
        c.set_canceller(move || {
            if let Some(qp) = weak_qp.upgrade() {
                qp.cancel_accept();
            }
        });
        qp.establish_passive(inc.sock, &neg, c)?;
        g.state = State::Attached(qp);
        Ok(ov)
    }
}
