//! `IND2Connector` for the `shm` provider.
//!
//! ND's three steps: `Connect` creates the segment, connects to the listener's abstract name and
//! sends REQUEST (with the memfd); it completes on ACCEPT (or REJECT / end-of-file:
//! `ND_CONNECTION_REFUSED`). `CompleteConnect` maps the connection onto the queue pair and
//! writes the RTR record, the first record of the active side's ring. The passive `Accept`
//! sends ACCEPT and completes when that RTR arrives. Read limits are negotiated exactly as the
//! `tcp` provider does over MPA v2.

use std::any::Any;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use netdirect_spi::kit::connector::{self, AttachedQp, ConnectorState, Transport};
use netdirect_spi::kit::listener::TakesRequests;
use netdirect_spi::kit::negotiate;
use netdirect_spi::kit::overlapped::{OvCompleter, Overlapped};
use netdirect_spi::traits::{self, QueuePair};
use netdirect_spi::{fail, Error, ReadLimits, Result, Status};

use crate::adapter::Shared;
use crate::engine::{Registered, Source};
use crate::link::Link;
use crate::listener::{claim_status, Incoming};
use crate::proto::{self, Msg, Recv, Request, Space};
use crate::qp::{Conn, ShmQp};
use crate::segment::Segment;

/// An active connection attempt: REQUEST sent, waiting for ACCEPT or REJECT.
pub(crate) struct Connecting {
    sock: Registered,
    qp: Arc<ShmQp>,
    ov: OvCompleter,
    seg: Segment,
}

/// Active side, the peer accepted: what CompleteConnect maps onto the queue pair.
pub(crate) struct Connected {
    sock: OwnedFd,
    qp: Arc<ShmQp>,
    seg: Segment,
    peer_seg_addr: u64,
}

/// This provider's side of the kit's connector state.
pub(crate) enum Shm {}

impl Transport for Shm {
    /// The socket holding the local port's name.
    type Bound = OwnedFd;
    type Connecting = Connecting;
    type Connected = Connected;
    type Incoming = Incoming;
    type Qp = ShmQp;

    fn abandon(attempt: Connecting) {
        attempt.ov.complete(Status::CANCELED);
    }

    fn reject_incoming(inc: Incoming, private_data: &[u8]) {
        let _ = proto::send(
            &inc.sock,
            &Msg::Reject {
                private_data: private_data.to_vec(),
            },
            None,
        );
    }

    fn decline(connected: Connected) {
        // Closing the socket is the whole message.
        drop(connected.sock);
    }
}

impl AttachedQp for ShmQp {
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
}

type State = connector::State<Shm>;
type Inner = ConnectorState<Shm>;

/// A connector.
pub(crate) struct ShmConnector {
    me: Weak<Self>,
    shared: Arc<Shared>,
    inner: Mutex<Inner>,
}

impl fmt::Debug for ShmConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = self.lock();
        f.debug_struct("ShmConnector")
            .field("local", &g.local)
            .field("peer", &g.peer)
            .finish()
    }
}

impl ShmConnector {
    pub(crate) fn new(shared: Arc<Shared>) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            shared,
            inner: Mutex::new(Inner::new()),
        })
    }

    pub(crate) fn downcast(c: &Arc<dyn traits::Connector>) -> Option<Arc<Self>> {
        c.as_any()
            .downcast_ref::<Self>()
            .and_then(|c| c.me.upgrade())
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Read the listener's answer, if it came.
    fn drive(&self) {
        let mut g = self.lock();
        let State::Connecting(Connecting { sock, .. }) = &g.state else {
            return;
        };
        let got = proto::recv(sock.fd());
        if matches!(got, Recv::Empty) {
            return;
        }
        let State::Connecting(Connecting { sock, qp, ov, seg }) =
            std::mem::replace(&mut g.state, State::Idle)
        else {
            unreachable!()
        };
        let sock = sock.into_inner();
        match got {
            Recv::Msg(
                Some(Msg::Accept {
                    ird,
                    ord,
                    seg_addr,
                    private_data,
                }),
                _,
            ) => {
                g.peer_private_data = private_data;
                // Active GetReadLimits: the acceptor's values, swapped to our view.
                g.limits = ReadLimits {
                    inbound: ord,
                    outbound: ird,
                };
                g.state = State::Connected(Connected {
                    sock,
                    qp,
                    seg,
                    peer_seg_addr: seg_addr,
                });
                ov.complete(Status::SUCCESS);
            }
            Recv::Msg(Some(Msg::Reject { private_data }), _) => {
                g.peer_private_data = private_data;
                g.state = State::Done;
                ov.complete(Status::CONNECTION_REFUSED);
            }
            _ => {
                // The listener went away or refused the request: the connector stays usable.
                g.state = State::Idle;
                ov.complete(Status::CONNECTION_REFUSED);
            }
        }
    }
}

impl Source for ShmConnector {
    fn on_ready(&self) {
        self.drive();
    }
}

/// The limits a connection request offers (its IRD as `inbound`, ORD as `outbound`).
fn peer_limits(req: &Request) -> ReadLimits {
    ReadLimits {
        inbound: req.ird,
        outbound: req.ord,
    }
}

impl TakesRequests<Incoming> for ShmConnector {
    fn is_fresh(&self) -> bool {
        self.lock().is_fresh()
    }

    fn set_incoming(&self, inc: Incoming) {
        let limits = negotiate::passive_view(&self.shared.info, peer_limits(&inc.request));
        let (local, peer, data) = (inc.local, inc.peer, inc.request.private_data.clone());
        self.lock().set_incoming(inc, local, peer, data, limits);
    }
}

impl traits::Connector for ShmConnector {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn bind(&self, addr: SocketAddr) -> Result<()> {
        let mut g = self.lock();
        if g.check_bind(addr, crate::is_local(addr.ip()))? {
            return Ok(());
        }
        g.bound = None;
        let s = proto::socket().map_err(|_| Error::new(Status::INSUFFICIENT_RESOURCES))?;
        let port = proto::claim(&s, Space::Connector, addr.is_ipv6(), addr.port())
            .map_err(|e| Error::new(claim_status(e)))?;
        let local = SocketAddr::new(addr.ip(), port);
        g.local = Some(local);
        g.bound = Some((s, local));
        Ok(())
    }

    fn connect(
        &self,
        qp: &Arc<dyn QueuePair>,
        dest: SocketAddr,
        limits: ReadLimits,
        private_data: &[u8],
    ) -> Result<Overlapped> {
        // Validation first, with no state change, so the connector stays usable (D8).
        negotiate::check_private_data(private_data.len(), self.shared.info.max_caller_data)?;
        let qp = ShmQp::downcast(qp).ok_or(Error::invalid_parameter(1))?;
        connector::check_connect_target(dest, qp.conn() == Conn::Idle)?;
        let mut g = self.lock();
        g.check_idle()?;
        let engine = self.shared.engine.clone();
        if !crate::is_local(dest.ip()) {
            // Shared memory reaches this host only.
            return Ok(Overlapped::completed(engine, Status::HOST_UNREACHABLE));
        }
        let (sock, bound) = match g.take_bound_for(dest)? {
            Some(b) => b,
            None => {
                let s = proto::socket().map_err(|_| Error::new(Status::INSUFFICIENT_RESOURCES))?;
                let port = proto::claim(&s, Space::Connector, dest.is_ipv6(), 0)
                    .map_err(|e| Error::new(claim_status(e)))?;
                let any: IpAddr = if dest.is_ipv6() {
                    std::net::Ipv6Addr::UNSPECIFIED.into()
                } else {
                    std::net::Ipv4Addr::UNSPECIFIED.into()
                };
                (s, SocketAddr::new(any, port))
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
        let params = self.shared.config.params;
        let Ok((seg, memfd)) = Segment::create(params) else {
            g.bound = Some((sock, bound));
            return fail(Status::INSUFFICIENT_RESOURCES);
        };
        let offered = negotiate::offer(&self.shared.info, limits);
        let request = Request {
            ird: offered.inbound,
            ord: offered.outbound,
            params,
            src: local,
            dst: dest,
            seg_addr: seg.addr(),
            private_data: private_data.to_vec(),
        };
        let refused = |g: &mut MutexGuard<'_, Inner>, sock: OwnedFd| {
            // Nobody listens: the connector (and its port) stay usable for another Connect.
            g.bound = Some((sock, bound));
            Ok(Overlapped::completed(
                self.shared.engine.clone(),
                Status::CONNECTION_REFUSED,
            ))
        };
        match rustix::net::connect(
            &sock,
            &proto::name(Space::Listener, dest.is_ipv6(), dest.port()),
        ) {
            Ok(()) => {}
            Err(_) => return refused(&mut g, sock),
        }
        if proto::send(&sock, &Msg::Request(request), Some(&memfd)).is_err() {
            // Connected sockets cannot be connected again: a retry claims the port afresh.
            drop(sock);
            return Ok(Overlapped::completed(engine, Status::CONNECTION_REFUSED));
        }
        // The peer has its own descriptor now; our mapping keeps the memory alive.
        drop(memfd);
        let (ov, c) = Overlapped::pending(engine);
        // Withdrawing this one request abandons the attempt, as CancelOverlappedRequests does.
        let me = self.me.clone();
        c.set_canceller(move || {
            if let Some(me) = me.upgrade() {
                let _ = traits::Connector::cancel_overlapped_requests(&*me);
            }
        });
        let src: Weak<dyn Source> = self.me.clone();
        let reg = self
            .shared
            .engine
            .register(sock, src)
            .map_err(|_| Error::new(Status::INSUFFICIENT_RESOURCES))?;
        g.peer = Some(dest);
        g.state = State::Connecting(Connecting {
            sock: reg,
            qp,
            ov: c,
            seg,
        });
        drop(g);
        self.drive();
        Ok(ov)
    }

    fn complete_connect(&self) -> Result<Overlapped> {
        let mut g = self.lock();
        let Connected {
            sock,
            qp,
            seg,
            peer_seg_addr,
        } = g.take_connected()?;
        let link = Link::new(&self.shared.engine, seg, 0, sock, peer_seg_addr, qp.weak())
            .map_err(|_| Error::new(Status::INSUFFICIENT_RESOURCES))?;
        qp.establish_active(link, g.limits.inbound, g.limits.outbound)?;
        g.state = State::Attached(qp);
        Ok(Overlapped::completed(
            self.shared.engine.clone(),
            Status::SUCCESS,
        ))
    }

    fn accept(
        &self,
        qp: &Arc<dyn QueuePair>,
        limits: ReadLimits,
        private_data: &[u8],
    ) -> Result<Overlapped> {
        negotiate::check_private_data(private_data.len(), self.shared.info.max_callee_data)?;
        let qp = ShmQp::downcast(qp).ok_or(Error::invalid_parameter(1))?;
        let mut g = self.lock();
        let inc = g.incoming()?;
        if qp.conn() != Conn::Idle {
            return fail(Status::CONNECTION_ACTIVE);
        }
        let granted = negotiate::accept(&self.shared.info, limits, peer_limits(&inc.request));
        let (ird, ord) = (granted.inbound, granted.outbound);
        let inc = g.take_incoming().expect("checked above");
        let engine = self.shared.engine.clone();
        let reply = Msg::Accept {
            ird,
            ord,
            seg_addr: inc.seg.addr(),
            private_data: private_data.to_vec(),
        };
        if proto::send(&inc.sock, &reply, None).is_err() {
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
            &self.shared.engine,
            inc.seg,
            1,
            inc.sock,
            inc.request.seg_addr,
            qp.weak(),
        )
        .map_err(|_| Error::new(Status::INSUFFICIENT_RESOURCES))?;
        qp.establish_passive(link, c, ird, ord)?;
        g.state = State::Attached(qp);
        Ok(ov)
    }

    fn reject(&self, private_data: &[u8]) -> Result<()> {
        negotiate::check_private_data(private_data.len(), self.shared.info.max_callee_data)?;
        self.lock().reject(private_data)
    }

    fn get_read_limits(&self) -> Result<ReadLimits> {
        self.lock().read_limits()
    }

    fn private_data(&self) -> Result<Vec<u8>> {
        self.lock().private_data()
    }

    fn get_local_address(&self) -> Result<SocketAddr> {
        self.lock().local_address()
    }

    fn get_peer_address(&self) -> Result<SocketAddr> {
        self.lock().peer_address()
    }

    fn notify_disconnect(&self) -> Result<Overlapped> {
        self.lock().notify_disconnect()
    }

    fn disconnect(&self) -> Result<Overlapped> {
        self.lock().disconnect(self.shared.engine.clone())
    }

    fn cancel_overlapped_requests(&self) -> Result<()> {
        self.lock().cancel_overlapped_requests();
        Ok(())
    }
}
