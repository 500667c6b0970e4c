//! `IND2Connector` for the `shm` provider.
//!
//! ND's three steps: `Connect` creates the segment, connects to the listener's abstract name and
//! sends REQUEST (with the memfd); it completes on ACCEPT (or REJECT / end-of-file:
//! `ND_CONNECTION_REFUSED`). `CompleteConnect` maps the connection onto the queue pair and
//! writes the RTR record, the first record of the active side's ring. The passive `Accept`
//! sends ACCEPT and completes when that RTR arrives. Read limits are negotiated exactly as the
//! `tcp` provider does over MPA v2.

use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, MutexGuard, Weak};

use netdirect_spi::kit::addresses::unspecified_like;
use netdirect_spi::kit::connector::{
    self, AttachedQp, Claim, Connector, ConnectorProvider, ConnectorState, Transport,
};
use netdirect_spi::kit::negotiate;
use netdirect_spi::kit::overlapped::{OvCompleter, Overlapped};
use netdirect_spi::traits::{self, QueuePair};
use netdirect_spi::{fail, AdapterInfo, Error, ReadLimits, Result, Status};

use crate::adapter::Shared;
use crate::engine::{Registered, Source};
use crate::link::Link;
use crate::listener::Incoming;
use crate::proto::{self, Msg, Port, Recv, Request, Space};
use crate::qp::{Conn, ShmQp};
use crate::segment::Segment;
use crate::Shm;

/// An active connection attempt: REQUEST sent, waiting for ACCEPT or REJECT.
pub(crate) struct Connecting {
    sock: Registered,
    /// The local port, held for the connection's life, and the address it was reserved at.
    port: Port,
    at: SocketAddr,
    qp: Claim<ShmQp>,
    ov: OvCompleter,
    seg: Segment,
    /// What our REQUEST offered: the ACCEPT's limits are clamped to it.
    offered: ReadLimits,
}

/// Active side, the peer accepted: what CompleteConnect maps onto the queue pair.
pub(crate) struct Connected {
    sock: OwnedFd,
    port: Port,
    at: SocketAddr,
    qp: Claim<ShmQp>,
    seg: Segment,
    peer_seg_addr: u64,
}

impl Transport for Shm {
    /// The local port.
    type Bound = Port;
    type Connecting = Connecting;
    type Connected = Connected;
    type Incoming = Incoming;
    type Qp = ShmQp;

    fn abandon(attempt: Connecting) {
        attempt.ov.complete(Status::CANCELED);
    }

    fn bind_again(addr: SocketAddr) -> Option<Port> {
        proto::reserve(Space::Connector, addr)
            .ok()
            .map(|(port, _)| port)
    }

    fn reject_incoming(inc: Incoming, private_data: &[u8]) -> Result<()> {
        let reject = Msg::Reject {
            private_data: private_data.to_vec(),
        };
        // A send to a closed Unix socket fails at once: the connecting side abandoned.
        proto::send(&inc.sock, &reject, None).map_err(|_| Error::new(Status::CONNECTION_ABORTED))
    }

    fn decline(connected: Connected) {
        // Closing the socket is the whole message; the port goes with it.
        drop(connected);
    }
}

impl AttachedQp for ShmQp {
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

type State = connector::State<Shm>;
type Inner = ConnectorState<Shm>;

/// A connector: the SPI kit's, over this provider's transport.
pub(crate) type ShmConnector = Connector<Shm>;

/// Read the listener's answer, if it came.
fn drive(this: &ShmConnector) {
    let mut g = this.lock();
    let State::Connecting(Connecting { sock, .. }) = &g.state else {
        return;
    };
    let got = proto::recv(sock.fd());
    if matches!(got, Recv::Empty) {
        return;
    }
    let State::Connecting(Connecting {
        sock,
        port,
        at,
        qp,
        ov,
        seg,
        offered,
    }) = std::mem::replace(&mut g.state, State::Idle)
    else {
        unreachable!()
    };
    let sock = sock.into_inner();
    match (got, sock) {
        (
            Recv::Msg(
                Some(Msg::Accept {
                    ird,
                    ord,
                    seg_addr,
                    private_data,
                }),
                _,
            ),
            Some(sock),
        ) => {
            g.peer_private_data = private_data;
            // Active GetReadLimits: the acceptor's values, in our view, within our offer.
            let peer = ReadLimits {
                inbound: ird,
                outbound: ord,
            };
            g.limits = negotiate::active_view(offered, peer);
            g.state = State::Connected(Connected {
                sock,
                port,
                at,
                qp,
                seg,
                peer_seg_addr: seg_addr,
            });
            ov.complete(Status::SUCCESS);
        }
        (Recv::Msg(Some(Msg::Reject { private_data }), _), sock) => {
            g.refused_by_peer(private_data);
            drop((sock, port));
            g.restore_bind();
            ov.complete(Status::CONNECTION_REFUSED);
        }
        (_, sock) => {
            // The listener went away or refused the request: the connector stays usable,
            // bound as before (the port the attempt held is free again for that).
            drop((sock, port));
            g.restore_bind();
            ov.complete(Status::CONNECTION_REFUSED);
        }
    }
}

impl Source for ShmConnector {
    fn on_ready(&self) {
        drive(self);
    }
}

/// The limits a connection request offers (its IRD as `inbound`, ORD as `outbound`).
fn peer_limits(req: &Request) -> ReadLimits {
    ReadLimits {
        inbound: req.ird,
        outbound: req.ord,
    }
}

impl ConnectorProvider for Shm {
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

    fn downcast_qp(qp: &Arc<dyn QueuePair>, adapter: &Arc<Shared>) -> Option<Arc<ShmQp>> {
        ShmQp::downcast(qp).filter(|q| Arc::ptr_eq(&q.shared, adapter))
    }

    fn bind(this: &ShmConnector, addr: SocketAddr) -> Result<()> {
        let mut g = this.lock();
        if g.check_bind(addr, crate::is_local(addr.ip()))? {
            return Ok(());
        }
        g.rebind(|| {
            let (port, n) = proto::reserve(Space::Connector, addr).map_err(Error::new)?;
            Ok((port, SocketAddr::new(addr.ip(), n)))
        })
    }

    fn connect(
        this: &ShmConnector,
        mut g: MutexGuard<'_, ConnectorState<Self>>,
        qp: Claim<ShmQp>,
        dest: SocketAddr,
        limits: ReadLimits,
        private_data: &[u8],
    ) -> Result<Overlapped> {
        let engine = this.adapter().engine.clone();
        // A destination of the other family than the Bind is refused first, as by tcp.
        g.check_family(dest)?;
        if !crate::is_local(dest.ip()) {
            // Shared memory reaches this host only.
            return Ok(Overlapped::completed(engine, Status::HOST_UNREACHABLE));
        }
        // Whether the port is the one `Bind` took: only that one outlives a failed attempt.
        let bound_before = g.local;
        let (port, bound, from_bind) = match g.take_bound_for(dest)? {
            Some((p, b)) => (p, b, true),
            None => {
                // As `tcp` binds an unbound connector: the wildcard address, port 0.
                let any = SocketAddr::new(unspecified_like(dest.ip()), 0);
                let (p, n) = proto::reserve(Space::Connector, any).map_err(Error::new)?;
                (p, SocketAddr::new(any.ip(), n), false)
            }
        };
        // A wildcard local address becomes the address the peer is reached at (same host).
        let local_ip = if bound.ip().is_unspecified() {
            dest.ip()
        } else {
            bound.ip()
        };
        let local = SocketAddr::new(local_ip, bound.port());
        g.local = Some(local);
        let params = this.adapter().config.params;
        // A failed attempt leaves the connector as it was: bound if `Bind` bound it (and
        // usable for another Connect), else unbound (the ephemeral port goes).
        let restore = |g: &mut MutexGuard<'_, Inner>, port: Port| {
            if from_bind {
                g.bound = Some((port, bound));
            } else {
                g.local = bound_before;
            }
        };
        let Ok(sock) = proto::socket() else {
            restore(&mut g, port);
            return fail(Status::INSUFFICIENT_RESOURCES);
        };
        let Ok((seg, memfd)) = Segment::create(params) else {
            restore(&mut g, port);
            return fail(Status::INSUFFICIENT_RESOURCES);
        };
        let offered = negotiate::offer(&this.adapter().info, limits);
        let request = Request {
            ird: offered.inbound,
            ord: offered.outbound,
            params,
            src: local,
            dst: dest,
            seg_addr: seg.addr(),
            private_data: private_data.to_vec(),
        };
        if proto::connect_listener(&sock, dest).is_err()
            || proto::send(&sock, &Msg::Request(request), Some(memfd.as_fd())).is_err()
        {
            // Nobody listens (or the listener went away at once): the connector stays usable
            // for another Connect.
            restore(&mut g, port);
            return Ok(Overlapped::completed(engine, Status::CONNECTION_REFUSED));
        }
        // The peer has its own descriptor now; our mapping keeps the memory alive.
        drop(memfd);
        let (ov, c) = Overlapped::pending(engine);
        // Withdrawing this one request abandons the attempt, as CancelOverlappedRequests does.
        let me = this.me().clone();
        c.set_canceller(move || {
            if let Some(me) = me.upgrade() {
                let _ = traits::Connector::cancel_overlapped_requests(&*me);
            }
        });
        let src: Weak<dyn Source> = this.me().clone();
        let reg = this
            .adapter()
            .engine
            .register(sock, src)
            .map_err(|_| Error::new(Status::INSUFFICIENT_RESOURCES))?;
        g.peer = Some(dest);
        g.state = State::Connecting(Connecting {
            sock: reg,
            port,
            at: bound,
            qp,
            ov: c,
            seg,
            offered,
        });
        drop(g);
        drive(this);
        Ok(ov)
    }

    fn complete_connect(this: &ShmConnector) -> Result<Overlapped> {
        let mut g = this.lock();
        let Connected {
            sock,
            port,
            at,
            qp,
            seg,
            peer_seg_addr,
        } = g.take_connected()?;
        // Held without a descriptor from now on: one per connection (`Port::into_noted`).
        let port = port.into_noted(at);
        let link = Link::new(
            &this.adapter().engine,
            seg,
            0,
            (sock, Some(port)),
            peer_seg_addr,
            qp.weak(),
        )
        .map_err(|_| Error::new(Status::INSUFFICIENT_RESOURCES))?;
        qp.establish_active(link, g.limits.inbound, g.limits.outbound)?;
        g.state = State::Attached(qp.queue_pair().clone());
        Ok(Overlapped::completed(
            this.adapter().engine.clone(),
            Status::SUCCESS,
        ))
    }

    fn accept(
        this: &ShmConnector,
        mut g: MutexGuard<'_, ConnectorState<Self>>,
        qp: Arc<ShmQp>,
        inc: Incoming,
        granted: ReadLimits,
        private_data: &[u8],
    ) -> Result<Overlapped> {
        let (ird, ord) = (granted.inbound, granted.outbound);
        let engine = this.adapter().engine.clone();
        let reply = Msg::Accept {
            ird,
            ord,
            seg_addr: inc.seg.addr(),
            private_data: private_data.to_vec(),
        };
        if proto::send(&inc.sock, &reply, None).is_err() {
            // The connecting side went away before our answer (a Unix socket refuses a send
            // to a closed peer at once): IND2Connector::Accept's ND_CONNECTION_ABORTED, "the
            // connecting peer abandoned the connection establishment", as tcp reports it. One
            // that leaves after the answer is refused instead (docs/ND-RULES.md D9).
            return Ok(Overlapped::completed(engine, Status::CONNECTION_ABORTED));
        }
        // After Accept, GetReadLimits reports the negotiated limits from our point of view.
        g.limits = ReadLimits {
            inbound: ird,
            outbound: ord,
        };
        let (ov, c) = Overlapped::pending(engine);
        let weak_qp = Arc::downgrade(&qp);
        c.set_canceller(move || {
            if let Some(qp) = weak_qp.upgrade() {
                qp.cancel_accept();
            }
        });
        let link = Link::new(
            &this.adapter().engine,
            inc.seg,
            1,
            (inc.sock, None),
            inc.request.seg_addr,
            qp.weak(),
        )
        .map_err(|_| Error::new(Status::INSUFFICIENT_RESOURCES))?;
        qp.establish_passive(link, c, ird, ord)?;
        g.state = State::Attached(qp);
        Ok(ov)
    }
}
