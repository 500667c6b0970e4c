//! The state of a software provider's `IND2Connector` (IND2Connector in Microsoft's NetworkDirect SPI reference,
//! `docs/ND-RULES.md` §2.10) and the rules that do not depend on the transport: which calls
//! are valid in which state, and what the accessors report.
//!
//! A provider keeps a [`ConnectorState`] under its connector's lock and plugs in, through
//! [`Transport`], what each state holds on its transport (a socket, a handshake in progress,
//! a request from a listener) and how a pending request is rejected or abandoned.

use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::kit::overlapped::{Driver, Overlapped};
use crate::{fail, ReadLimits, Result, Status};

mod object;
pub use object::{Connector, ConnectorProvider};

/// What a provider's connector holds in each state.
pub trait Transport: 'static {
    /// What `Bind` prepares for the next Connect (a socket holding the local port).
    type Bound;
    /// An active connection attempt (it owns the pending Connect request).
    type Connecting;
    /// Active side: the peer accepted; what `CompleteConnect` hands to the queue pair.
    type Connected;
    /// Passive side: a connection request a listener delivered.
    type Incoming;
    /// The queue pair that carries the connection once attached.
    type Qp: AttachedQp;

    /// `CancelOverlappedRequests` during an attempt: abandon it, completing its Connect with
    /// `ND_CANCELED` (IND2Connector::Connect remarks).
    fn abandon(attempt: Self::Connecting);
    /// `Reject` on the passive side: send the refusal with `private_data`.
    /// `ND_CONNECTION_ABORTED` when the connecting peer had already gone, so nobody heard it
    /// (IND2Connector::Reject: "the connecting peer abandoned the connection establishment").
    fn reject_incoming(incoming: Self::Incoming, private_data: &[u8]) -> Result<()>;
    /// `Reject` on the active side after the peer accepted: close, so that the passive
    /// Accept completes with `ND_CONNECTION_REFUSED` (`docs/ND-RULES.md` D9).
    fn decline(connected: Self::Connected);
    /// Bind `addr` again for a connector whose Connect failed (its attempt's socket is closed
    /// by now), so that a retried Connect goes out from the address the application bound
    /// ([`ConnectorState::restore_bind`]). `None` if the address cannot be had now (another
    /// socket took the port meanwhile, or the old connection lingers in TIME_WAIT).
    fn bind_again(addr: SocketAddr) -> Option<Self::Bound>;
}

/// What the connector asks of its queue pair once the connection is attached.
pub trait AttachedQp {
    /// Whether the queue pair carries no connection and none is being set up on it (Connect
    /// and Accept refuse one that does).
    fn is_idle(&self) -> bool;
    /// `NotifyDisconnect`: completes when the connection goes down.
    fn notify_disconnect(&self) -> Overlapped;
    /// `Disconnect`: tear the connection down.
    fn disconnect(&self);
    /// Complete a pending passive Accept with `ND_CANCELED`.
    fn cancel_accept(&self);
    /// Complete a pending NotifyDisconnect with `ND_CANCELED`.
    fn cancel_notify_disconnect(&self);
    /// The queue pair's reservation by a Connect under way ([`Claim`]): `true` while one
    /// holds it.
    fn claim_flag(&self) -> &AtomicBool;
}

/// A queue pair reserved by one connector's Connect, from the call until the connection is
/// attached to it (CompleteConnect) or the attempt ends: meanwhile another connector's
/// Connect or Accept with the same queue pair fails `ND_CONNECTION_ACTIVE` at once, as one
/// whose queue pair is connected does ("One QP <-> one peer QP"), instead of only when one of
/// them reaches CompleteConnect. Dropping the claim (a refused, cancelled or abandoned
/// attempt, a connector released) frees the queue pair for another Connect ("a failed
/// connect leaves the QP unchanged").
pub struct Claim<Q: AttachedQp> {
    qp: Arc<Q>,
}

impl<Q: AttachedQp> fmt::Debug for Claim<Q> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Claim")
    }
}

impl<Q: AttachedQp> Claim<Q> {
    /// Reserve `qp`; `None` if another Connect holds it.
    pub fn take(qp: Arc<Q>) -> Option<Self> {
        // Built only on success: a `Claim` made and dropped here would free the holder's.
        qp.claim_flag()
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
            .then(|| Self { qp })
    }

    /// The queue pair, for attaching the connection (the reservation ends with the claim;
    /// by then the queue pair carries the connection, so it is not idle).
    pub fn queue_pair(&self) -> &Arc<Q> {
        &self.qp
    }
}

impl<Q: AttachedQp> Drop for Claim<Q> {
    fn drop(&mut self) {
        self.qp.claim_flag().store(false, Ordering::Release);
    }
}

impl<Q: AttachedQp> std::ops::Deref for Claim<Q> {
    type Target = Q;
    fn deref(&self) -> &Q {
        &self.qp
    }
}

/// Where a connector is.
pub enum State<T: Transport> {
    /// Fresh (or bound with `Bind`): may Connect, or receive a request from a listener.
    Idle,
    /// The peer refused our Connect (its Reject, or a full backlog): idle again, as
    /// `ND_CONNECTION_REFUSED` "may be retried" (`docs/ND-RULES.md` §2.10 Connect), with the
    /// Reject's private data for `GetPrivateData` until the next Connect.
    Refused,
    /// Connect in progress.
    Connecting(T::Connecting),
    /// Active side: the peer accepted; waiting for CompleteConnect or Reject.
    Connected(T::Connected),
    /// Passive side: a request arrived; waiting for Accept or Reject.
    Incoming(T::Incoming),
    /// The queue pair carries the connection.
    Attached(Arc<T::Qp>),
    /// Rejected (either way) or failed: the connector cannot connect again.
    Done,
}

impl<T: Transport> fmt::Debug for State<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Idle => "Idle",
            Self::Refused => "Refused",
            Self::Connecting(_) => "Connecting",
            Self::Connected(_) => "Connected",
            Self::Incoming(_) => "Incoming",
            Self::Attached(_) => "Attached",
            Self::Done => "Done",
        })
    }
}

/// Releasing the connector abandons a Connect in progress (`IND2Connector::Connect`: "To
/// abandon a connection attempt, you can release the connector"): it completes `ND_CANCELED`,
/// as after CancelOverlappedRequests, instead of never. What else the state holds (a socket, a
/// request not accepted) closes as it drops, which the peer sees as a refusal (D9).
impl<T: Transport> Drop for ConnectorState<T> {
    fn drop(&mut self) {
        if let State::Connecting(_) = self.state {
            if let State::Connecting(attempt) = std::mem::replace(&mut self.state, State::Done) {
                T::abandon(attempt);
            }
        }
    }
}

/// A connector's state and what its accessors report.
pub struct ConnectorState<T: Transport> {
    /// Where the connector is.
    pub state: State<T>,
    /// What `Bind` prepared and the address it bound, used by the next Connect.
    pub bound: Option<(T::Bound, SocketAddr)>,
    /// The address the Connect in progress took from `bound`: a failed attempt binds it
    /// again ([`ConnectorState::restore_bind`]).
    bound_before: Option<SocketAddr>,
    /// `GetLocalAddress` once connecting or connected.
    pub local: Option<SocketAddr>,
    /// `GetPeerAddress`.
    pub peer: Option<SocketAddr>,
    /// `GetPrivateData`: what the peer sent with its request, Accept or Reject.
    pub peer_private_data: Vec<u8>,
    /// `GetReadLimits`, from this side's point of view.
    pub limits: ReadLimits,
}

impl<T: Transport> fmt::Debug for ConnectorState<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectorState")
            .field("state", &self.state)
            .field("local", &self.local)
            .field("peer", &self.peer)
            .finish()
    }
}

impl<T: Transport> Default for ConnectorState<T> {
    fn default() -> Self {
        Self {
            state: State::Idle,
            bound: None,
            bound_before: None,
            local: None,
            peer: None,
            peer_private_data: Vec::new(),
            limits: ReadLimits::default(),
        }
    }
}

/// `Connect`'s destination and queue pair, checked before any state changes so the connector
/// stays usable (D8): `ND_BAD_NETWORK_NAME` for an unspecified address (NdInvalidIP),
/// `ND_INVALID_ADDRESS` for port 0, `ND_CONNECTION_ACTIVE` for a queue pair not idle.
pub fn check_connect_target(dest: SocketAddr, qp_idle: bool) -> Result<()> {
    if dest.ip().is_unspecified() {
        return fail(Status::BAD_NETWORK_NAME);
    }
    if dest.port() == 0 {
        return fail(Status::INVALID_ADDRESS);
    }
    if !qp_idle {
        return fail(Status::CONNECTION_ACTIVE);
    }
    Ok(())
}

impl<T: Transport> ConnectorState<T> {
    /// A fresh connector.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a listener may give this connector a request.
    pub fn is_fresh(&self) -> bool {
        matches!(self.state, State::Idle | State::Refused)
    }

    /// A listener hands over a request (`GetConnectionRequest` completed): the accessors
    /// report its addresses, private data and `limits` (the passive view, R-rules of
    /// [`crate::kit::negotiate::passive_view`]).
    ///
    /// The request comes back, and nothing changes, if the connector is no longer fresh: the
    /// caller used it for something else while its `GetConnectionRequest` was pending (a
    /// Connect, or another `GetConnectionRequest` that was served first). Overwriting that
    /// state would drop a pending Connect's request, which would then never complete.
    pub fn set_incoming(
        &mut self,
        incoming: T::Incoming,
        local: SocketAddr,
        peer: SocketAddr,
        private_data: Vec<u8>,
        limits: ReadLimits,
    ) -> std::result::Result<(), T::Incoming> {
        if !self.is_fresh() {
            return Err(incoming);
        }
        self.local = Some(local);
        self.peer = Some(peer);
        self.peer_private_data = private_data;
        self.limits = limits;
        self.state = State::Incoming(incoming);
        Ok(())
    }

    /// `Bind`'s checks: `ND_ADDRESS_ALREADY_ASSOCIATED` unless idle (NdDualConnection),
    /// `ND_INVALID_ADDRESS` for an address of another host. `Ok(true)` when the connector is
    /// already bound to `addr` (or to its IP, for port 0): re-binding before a retried
    /// Connect is allowed and changes nothing (D8, ndmpic).
    pub fn check_bind(&self, addr: SocketAddr, is_local: bool) -> Result<bool> {
        if !self.is_fresh() {
            return fail(Status::ADDRESS_ALREADY_ASSOCIATED);
        }
        if !addr.ip().is_unspecified() && !is_local {
            return fail(Status::INVALID_ADDRESS);
        }
        Ok(matches!(&self.bound, Some((_, a))
            if *a == addr || (addr.port() == 0 && a.ip() == addr.ip())))
    }

    /// `Bind` after [`ConnectorState::check_bind`]: give up the earlier binding, if any, then
    /// take the new one with `take` (the provider's bind, which returns what it holds and the
    /// address it got). The earlier binding goes first, so that a new address overlapping it
    /// (the same port on the wildcard address, say) can be had. If `take` fails, the earlier
    /// address is bound again (best effort, as after a failed Connect): a refused Bind leaves
    /// the connector as it was.
    pub fn rebind(&mut self, take: impl FnOnce() -> Result<(T::Bound, SocketAddr)>) -> Result<()> {
        let earlier = self.bound.take().map(|(held, addr)| {
            drop(held);
            addr
        });
        match take() {
            Ok((held, local)) => {
                self.local = Some(local);
                self.bound = Some((held, local));
                Ok(())
            }
            Err(e) => {
                self.local = None;
                self.bound_before = earlier;
                self.restore_bind();
                Err(e)
            }
        }
    }

    /// `Connect` under the lock: `ND_CONNECTION_ACTIVE` unless idle.
    pub fn check_idle(&self) -> Result<()> {
        if !self.is_fresh() {
            return fail(Status::CONNECTION_ACTIVE);
        }
        Ok(())
    }

    /// The peer answered our Connect with a Reject carrying `private_data` (or its
    /// listener's backlog was full): [`State::Refused`].
    pub fn refused_by_peer(&mut self, private_data: Vec<u8>) {
        self.peer_private_data = private_data;
        self.state = State::Refused;
    }

    /// What `Bind` prepared, for a Connect to `dest` (`None`: the provider binds an ephemeral
    /// port, R-CONN-1). `ND_INVALID_ADDRESS`, keeping the binding, when it is of the other
    /// address family.
    pub fn take_bound_for(&mut self, dest: SocketAddr) -> Result<Option<(T::Bound, SocketAddr)>> {
        self.check_family(dest)?;
        let b = self.bound.take();
        self.bound_before = b.as_ref().map(|(_, a)| *a);
        Ok(b)
    }

    /// `ND_INVALID_ADDRESS` when the connector is bound to an address of the other family
    /// than `dest`: Connect's first check of the destination (before a provider looks whether
    /// it can reach it), in every provider.
    pub fn check_family(&self, dest: SocketAddr) -> Result<()> {
        match &self.bound {
            Some((_, a)) if a.is_ipv6() != dest.is_ipv6() => fail(Status::INVALID_ADDRESS),
            _ => Ok(()),
        }
    }

    /// A Connect failed (refused, timed out, cancelled) after it took what `Bind` prepared:
    /// bind the same address again, so that the connector is as the application left it
    /// (bound, as `IND2Connector::Connect` says a failed attempt leaves the queue pair) and a
    /// retried Connect goes out from the bound port, not an ephemeral one (ndmpic binds, then
    /// retries Connect on refusal). Call it once the attempt's socket is closed, which frees
    /// the port. Nothing happens for a Connect that did not use a Bind; if the address cannot
    /// be had again, the connector stays unbound (the next Connect takes an ephemeral port,
    /// as an unbound one does).
    pub fn restore_bind(&mut self) {
        let Some(addr) = self.bound_before.take() else {
            return;
        };
        if self.bound.is_none() && self.is_fresh() {
            if let Some(b) = T::bind_again(addr) {
                self.bound = Some((b, addr));
                self.local = Some(addr);
            }
        }
    }

    /// `CompleteConnect`: the accepted connection, for the provider to attach to its queue
    /// pair (the state is `Done` until it sets `Attached`). `ND_CONNECTION_INVALID` unless the
    /// peer accepted and the connector is waiting for this call.
    pub fn take_connected(&mut self) -> Result<T::Connected> {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Connected(c) => Ok(c),
            other => {
                self.state = other;
                fail(Status::CONNECTION_INVALID)
            }
        }
    }

    /// `Accept`: the request waiting for an answer; `ND_CONNECTION_INVALID` when there is
    /// none.
    pub fn incoming(&self) -> Result<&T::Incoming> {
        match &self.state {
            State::Incoming(inc) => Ok(inc),
            _ => fail(Status::CONNECTION_INVALID),
        }
    }

    /// `Accept`, once every check passed: take the request (the state is `Done` until the
    /// provider sets `Attached`: a failure past this point leaves the connector spent).
    pub fn take_incoming(&mut self) -> Option<T::Incoming> {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Incoming(inc) => Some(inc),
            other => {
                self.state = other;
                None
            }
        }
    }

    /// `Reject`: refuse a request ([`Transport::reject_incoming`], `ND_CONNECTION_ABORTED`
    /// if its peer had gone) or, on the active side, decline the peer's acceptance
    /// ([`Transport::decline`]); either way the connector is done. `ND_CONNECTION_INVALID` in
    /// any other state, which is then unchanged.
    pub fn reject(&mut self, private_data: &[u8]) -> Result<()> {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Incoming(inc) => return T::reject_incoming(inc, private_data),
            State::Connected(c) => T::decline(c),
            other => {
                self.state = other;
                return fail(Status::CONNECTION_INVALID);
            }
        }
        Ok(())
    }

    /// `GetReadLimits` (`docs/ND-RULES.md` §2.10): valid from the request's arrival (passive)
    /// or the peer's Accept (active) on; `ND_CONNECTION_INVALID` otherwise.
    pub fn read_limits(&self) -> Result<ReadLimits> {
        match self.state {
            State::Incoming(_) | State::Connected(_) | State::Attached(_) => Ok(self.limits),
            _ => fail(Status::CONNECTION_INVALID),
        }
    }

    /// `GetPrivateData`: as [`Self::read_limits`], and also after a Reject (the rejecting
    /// peer's private data); `ND_CONNECTION_INVALID` otherwise.
    pub fn private_data(&self) -> Result<Vec<u8>> {
        match self.state {
            State::Incoming(_)
            | State::Connected(_)
            | State::Attached(_)
            | State::Done
            | State::Refused => Ok(self.peer_private_data.clone()),
            _ => fail(Status::CONNECTION_INVALID),
        }
    }

    /// `GetLocalAddress`: the connection's address once connecting (a Connect under way or
    /// done, a request taken by GetConnectionRequest) until it ends. `ND_CONNECTION_INVALID`
    /// otherwise, bound or not: "to succeed, the connector must be connected or in the
    /// process of connecting" (IND2Connector::GetLocalAddress), and a refused Connect left it
    /// doing neither.
    pub fn local_address(&self) -> Result<SocketAddr> {
        match (&self.state, self.local) {
            (State::Idle | State::Refused | State::Done, _) | (_, None) => {
                fail(Status::CONNECTION_INVALID)
            }
            (_, Some(a)) => Ok(a),
        }
    }

    /// `GetPeerAddress`: valid as soon as a request arrives (ndmpic asks before Accept);
    /// `ND_CONNECTION_INVALID` when not connected.
    pub fn peer_address(&self) -> Result<SocketAddr> {
        match (&self.state, self.peer) {
            (State::Incoming(_) | State::Connected(_) | State::Attached(_), Some(p)) => Ok(p),
            _ => fail(Status::CONNECTION_INVALID),
        }
    }

    /// `NotifyDisconnect`: `ND_CONNECTION_INVALID` unless a queue pair carries the connection.
    pub fn notify_disconnect(&self) -> Result<Overlapped> {
        match &self.state {
            State::Attached(qp) => Ok(qp.notify_disconnect()),
            _ => fail(Status::CONNECTION_INVALID),
        }
    }

    /// `Disconnect`: completes at once (through `driver`) once the queue pair is torn down;
    /// `ND_CONNECTION_INVALID` unless a queue pair carries the connection.
    pub fn disconnect(&self, driver: Arc<dyn Driver>) -> Result<Overlapped> {
        match &self.state {
            State::Attached(qp) => {
                qp.disconnect();
                Ok(Overlapped::completed(driver, Status::SUCCESS))
            }
            _ => fail(Status::CONNECTION_INVALID),
        }
    }

    /// `CancelOverlappedRequests`: abandons a Connect in progress (the connector is idle
    /// again), or cancels the attached queue pair's pending Accept and NotifyDisconnect.
    pub fn cancel_overlapped_requests(&mut self) {
        match std::mem::replace(&mut self.state, State::Idle) {
            State::Connecting(attempt) => {
                T::abandon(attempt);
                self.restore_bind();
            }
            State::Attached(qp) => {
                qp.cancel_accept();
                qp.cancel_notify_disconnect();
                self.state = State::Attached(qp);
            }
            other => self.state = other,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::kit::overlapped::tests::NullDriver;
    use crate::Error;

    /// Counts what the connector asked of it.
    #[derive(Default)]
    struct Qp {
        disconnects: AtomicU32,
        cancels: AtomicU32,
        claimed: AtomicBool,
    }

    impl AttachedQp for Qp {
        fn is_idle(&self) -> bool {
            true
        }
        fn notify_disconnect(&self) -> Overlapped {
            Overlapped::completed(Arc::new(NullDriver), Status::SUCCESS)
        }
        fn disconnect(&self) {
            self.disconnects.fetch_add(1, Ordering::Relaxed);
        }
        fn cancel_accept(&self) {
            self.cancels.fetch_add(1, Ordering::Relaxed);
        }
        fn cancel_notify_disconnect(&self) {
            self.cancels.fetch_add(1, Ordering::Relaxed);
        }
        fn claim_flag(&self) -> &AtomicBool {
            &self.claimed
        }
    }

    /// One claim at a time; dropping it frees the queue pair.
    #[test]
    fn a_queue_pair_is_claimed_by_one_connect_at_a_time() {
        let qp = Arc::new(Qp::default());
        let first = Claim::take(qp.clone()).expect("free");
        assert!(Claim::take(qp.clone()).is_none(), "held by the first");
        assert!(
            Claim::take(qp.clone()).is_none(),
            "a refused take frees nothing"
        );
        drop(first);
        assert!(Claim::take(qp).is_some(), "free again");
    }

    enum Test {}

    /// The transport's values are plain numbers; abandon/reject record nothing here: the
    /// state transitions are what is tested.
    impl Transport for Test {
        type Bound = ();
        type Connecting = ();
        type Connected = u8;
        type Incoming = u16;
        type Qp = Qp;
        fn abandon(_: ()) {}
        fn reject_incoming(_: u16, _: &[u8]) -> Result<()> {
            Ok(())
        }
        fn decline(_: u8) {}
        /// Port 9 is "taken by someone else meanwhile".
        fn bind_again(addr: SocketAddr) -> Option<()> {
            (addr.port() != 9).then_some(())
        }
    }

    /// A Connect that took the Bind and failed gives the Bind back (cancelled here); one
    /// that did not use a Bind leaves the connector unbound; an address taken meanwhile
    /// leaves it unbound too.
    #[test]
    fn a_failed_connect_restores_the_bind() {
        let mut c = ConnectorState::<Test>::new();
        let a = addr("127.0.0.1:5000");
        c.bound = Some(((), a));
        assert!(c.take_bound_for(addr("127.0.0.1:1")).unwrap().is_some());
        c.local = Some(addr("127.0.0.1:5000"));
        c.state = State::Connecting(());
        c.cancel_overlapped_requests();
        assert!(matches!(c.state, State::Idle));
        assert_eq!(c.bound.as_ref().map(|b| b.1), Some(a), "bound again");
        assert_eq!(c.local, Some(a));

        // Without a Bind: nothing to restore.
        let mut c = ConnectorState::<Test>::new();
        assert!(c.take_bound_for(addr("127.0.0.1:1")).unwrap().is_none());
        c.state = State::Connecting(());
        c.cancel_overlapped_requests();
        assert!(c.bound.is_none());

        // The port went to someone else meanwhile: unbound.
        let mut c = ConnectorState::<Test>::new();
        c.bound = Some(((), addr("127.0.0.1:9")));
        assert!(c.take_bound_for(addr("127.0.0.1:1")).unwrap().is_some());
        c.state = State::Connecting(());
        c.cancel_overlapped_requests();
        assert!(c.bound.is_none());
        // Restoring once is all: a second call finds nothing to do.
        c.restore_bind();
        assert!(c.bound.is_none());
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("address")
    }

    fn invalid<T: fmt::Debug>(r: Result<T>) {
        assert_eq!(r.unwrap_err(), Error::new(Status::CONNECTION_INVALID));
    }

    #[test]
    fn fresh_connector_reports_nothing() {
        let c = ConnectorState::<Test>::new();
        invalid(c.read_limits());
        invalid(c.private_data());
        invalid(c.local_address());
        invalid(c.peer_address());
        invalid(c.notify_disconnect());
        invalid(c.disconnect(Arc::new(NullDriver)));
    }

    #[test]
    fn bind_rules() {
        let mut c = ConnectorState::<Test>::new();
        let a = addr("127.0.0.1:5000");
        assert_eq!(
            c.check_bind(a, false),
            Err(Error::new(Status::INVALID_ADDRESS))
        );
        assert_eq!(
            c.check_bind(addr("0.0.0.0:0"), false),
            Ok(false),
            "wildcard"
        );
        assert_eq!(c.check_bind(a, true), Ok(false));
        c.bound = Some(((), a));
        assert_eq!(
            c.local_address(),
            Err(Error::new(Status::CONNECTION_INVALID)),
            "bound, idle: neither connected nor connecting"
        );
        assert_eq!(c.check_bind(a, true), Ok(true), "D8: same address again");
        assert_eq!(c.check_bind(addr("127.0.0.1:0"), true), Ok(true));
        assert_eq!(c.check_bind(addr("127.0.0.1:5001"), true), Ok(false));
        assert_eq!(
            c.take_bound_for(addr("[::1]:1")).map(|b| b.is_some()),
            Err(Error::new(Status::INVALID_ADDRESS))
        );
        assert!(c.bound.is_some(), "kept after a family mismatch");
        assert_eq!(
            c.take_bound_for(addr("127.0.0.1:1"))
                .map(|b| b.map(|b| b.1)),
            Ok(Some(a))
        );
        c.state = State::Connecting(());
        assert_eq!(
            c.check_bind(a, true),
            Err(Error::new(Status::ADDRESS_ALREADY_ASSOCIATED))
        );
        assert_eq!(c.check_idle(), Err(Error::new(Status::CONNECTION_ACTIVE)));
        c.cancel_overlapped_requests();
        assert!(
            c.is_fresh(),
            "an abandoned attempt leaves the connector usable"
        );
    }

    #[test]
    fn connect_target_rules() {
        let bad = |s: &str, idle| check_connect_target(addr(s), idle).unwrap_err().status();
        assert_eq!(bad("0.0.0.0:1", false), Status::BAD_NETWORK_NAME);
        assert_eq!(bad("127.0.0.1:0", false), Status::INVALID_ADDRESS);
        assert_eq!(bad("127.0.0.1:1", false), Status::CONNECTION_ACTIVE);
        assert!(check_connect_target(addr("127.0.0.1:1"), true).is_ok());
    }

    #[test]
    fn passive_side_from_request_to_attached() {
        let mut c = ConnectorState::<Test>::new();
        let (l, p) = (addr("127.0.0.1:1"), addr("127.0.0.1:2"));
        let limits = ReadLimits {
            inbound: 3,
            outbound: 4,
        };
        invalid(c.take_connected());
        assert_eq!(c.set_incoming(7, l, p, vec![9], limits), Ok(()));
        assert!(!c.is_fresh());
        assert_eq!(
            c.set_incoming(8, p, l, vec![], limits),
            Err(8),
            "a second request is handed back, the first kept"
        );
        assert_eq!((c.local_address(), c.peer_address()), (Ok(l), Ok(p)));
        assert_eq!(
            (c.read_limits(), c.private_data()),
            (Ok(limits), Ok(vec![9]))
        );
        assert_eq!(c.incoming().copied(), Ok(7));
        invalid(c.take_connected());
        assert_eq!(
            c.incoming().copied(),
            Ok(7),
            "a failed call changes nothing"
        );
        assert_eq!(c.take_incoming(), Some(7));
        invalid(c.local_address());
        let qp = Arc::new(Qp::default());
        c.state = State::Attached(qp.clone());
        assert!(c.notify_disconnect().is_ok());
        c.cancel_overlapped_requests();
        assert_eq!(
            qp.cancels.load(Ordering::Relaxed),
            2,
            "Accept and NotifyDisconnect"
        );
        assert!(matches!(c.state, State::Attached(_)), "still attached");
        assert!(c.disconnect(Arc::new(NullDriver)).is_ok());
        assert_eq!(qp.disconnects.load(Ordering::Relaxed), 1);
        invalid(c.reject(&[]));
    }

    #[test]
    fn reject_either_side_ends_the_connector() {
        let mut c = ConnectorState::<Test>::new();
        invalid(c.reject(&[]));
        assert!(c.is_fresh(), "unchanged");
        c.state = State::Connected(1);
        c.peer_private_data = vec![5];
        assert_eq!(c.reject(&[]), Ok(()));
        assert!(matches!(c.state, State::Done));
        assert_eq!(c.private_data(), Ok(vec![5]), "still readable after Reject");
        invalid(c.peer_address());
    }

    #[test]
    fn a_peers_reject_leaves_the_connector_retryable() {
        let mut c = ConnectorState::<Test>::new();
        c.state = State::Connecting(());
        c.refused_by_peer(vec![7, 8]);
        assert!(c.is_fresh(), "ND_CONNECTION_REFUSED may be retried");
        assert_eq!(
            c.private_data(),
            Ok(vec![7, 8]),
            "the Reject's private data"
        );
        invalid(c.read_limits());
        invalid(c.local_address());
        assert_eq!(c.check_idle(), Ok(()), "a second Connect may start");
        c.state = State::Connecting(());
        invalid(c.private_data());
    }
}
