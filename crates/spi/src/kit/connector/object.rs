//! A software provider's `IND2Connector` object (IND2Connector in Microsoft's NetworkDirect SPI reference, `docs/ND-RULES.md`
//! §2.10): the [`ConnectorState`] under its lock, with every call that needs only the state.
//! The provider plugs in, through [`ConnectorProvider`], the four calls that speak its
//! transport: Bind, Connect, CompleteConnect and Accept.

use std::any::Any;
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::{check_connect_target, AttachedQp, Claim, ConnectorState, Transport};
use crate::kit::adapter::AdapterState;
use crate::kit::listener::TakesRequests;
use crate::kit::negotiate;
use crate::kit::overlapped::Overlapped;
use crate::traits::{self, QueuePair};
use crate::{fail, AdapterInfo, Error, ReadLimits, Result, Status};

/// The calls of a connector that depend on the provider's transport. Each returns the
/// statuses `IND2Connector` documents for the call of the same name; `c` is the connector,
/// whose state the provider locks with [`Connector::lock`].
pub trait ConnectorProvider: Transport + Sized {
    /// The adapter state every object of the provider shares.
    type Adapter: AdapterState;

    /// The adapter's limits: `MaxCalleeData` bounds the private data of `Accept` and `Reject`,
    /// the read limits bound what a passive connector reports before Accept.
    fn info(adapter: &Self::Adapter) -> &AdapterInfo;
    /// What a request a listener delivered says: the local and peer addresses and the peer's
    /// private data.
    fn describe(incoming: &Self::Incoming) -> (SocketAddr, SocketAddr, Vec<u8>);
    /// The read limits a request offers: the peer's IRD as `inbound`, its ORD as `outbound`.
    fn offered(incoming: &Self::Incoming) -> ReadLimits;
    /// `qp` as a queue pair of `adapter`; `None` for another provider's or another adapter's
    /// (its connection would be driven by that adapter's engine).
    fn downcast_qp(qp: &Arc<dyn QueuePair>, adapter: &Arc<Self::Adapter>) -> Option<Arc<Self::Qp>>;
    /// `Bind` to a local address for the next Connect.
    fn bind(c: &Connector<Self>, addr: SocketAddr) -> Result<()>;
    /// `Connect` `qp` to `dest`, offering `limits` and `private_data`. The connector has
    /// checked the private data's size, the queue pair and the destination, and that it is
    /// idle; `g` is its state, locked.
    fn connect(
        c: &Connector<Self>,
        g: MutexGuard<'_, ConnectorState<Self>>,
        qp: Claim<Self::Qp>,
        dest: SocketAddr,
        limits: ReadLimits,
        private_data: &[u8],
    ) -> Result<Overlapped>;
    /// `CompleteConnect`: hand the accepted connection to its queue pair.
    fn complete_connect(c: &Connector<Self>) -> Result<Overlapped>;
    /// `Accept` `incoming`, the request a listener delivered, on `qp`, granting `granted`
    /// (what the caller asked, clamped to the adapter's limits and the peer's offer). The
    /// connector has checked the private data's size and that `qp` is idle, and taken
    /// `incoming` out of its state `g`, locked.
    fn accept(
        c: &Connector<Self>,
        g: MutexGuard<'_, ConnectorState<Self>>,
        qp: Arc<Self::Qp>,
        incoming: Self::Incoming,
        granted: ReadLimits,
        private_data: &[u8],
    ) -> Result<Overlapped>;
}

/// A connector of provider `P`.
pub struct Connector<P: ConnectorProvider> {
    me: Weak<Self>,
    adapter: Arc<P::Adapter>,
    inner: Mutex<ConnectorState<P>>,
}

impl<P: ConnectorProvider> fmt::Debug for Connector<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = self.lock();
        f.debug_struct("Connector")
            .field("local", &g.local)
            .field("peer", &g.peer)
            .finish()
    }
}

impl<P: ConnectorProvider> Connector<P> {
    /// A fresh connector of `adapter`.
    pub fn new(adapter: Arc<P::Adapter>) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            adapter,
            inner: Mutex::new(ConnectorState::new()),
        })
    }

    /// `c` as a connector of this provider; `None` for another provider's (the caller reports
    /// the invalid parameter).
    pub fn downcast(c: &Arc<dyn traits::Connector>) -> Option<Arc<Self>> {
        c.as_any()
            .downcast_ref::<Self>()
            .and_then(|c| c.me.upgrade())
    }

    /// The connector's state. A panic while it was held leaves it as it was: every change
    /// to it is made whole before anything can panic.
    pub fn lock(&self) -> MutexGuard<'_, ConnectorState<P>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A weak handle on this connector, for what must not keep it alive (engine
    /// registrations, timers, cancellers).
    pub fn me(&self) -> &Weak<Self> {
        &self.me
    }

    /// The adapter state.
    pub fn adapter(&self) -> &Arc<P::Adapter> {
        &self.adapter
    }
}

impl<P: ConnectorProvider> TakesRequests<P::Incoming> for Connector<P> {
    fn is_fresh(&self) -> bool {
        self.lock().is_fresh()
    }

    fn set_incoming(&self, incoming: P::Incoming) -> std::result::Result<(), P::Incoming> {
        let limits = negotiate::passive_view(P::info(&self.adapter), P::offered(&incoming));
        let (local, peer, data) = P::describe(&incoming);
        self.lock()
            .set_incoming(incoming, local, peer, data, limits)
    }
}

impl<P: ConnectorProvider> traits::Connector for Connector<P>
where
    Self: Send + Sync,
{
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn bind(&self, addr: SocketAddr) -> Result<()> {
        P::bind(self, addr)
    }

    fn connect(
        &self,
        qp: &Arc<dyn QueuePair>,
        dest: SocketAddr,
        limits: ReadLimits,
        private_data: &[u8],
    ) -> Result<Overlapped> {
        // Validation first, with no state change, so the connector stays usable (D8).
        let info = P::info(&self.adapter);
        negotiate::check_private_data(private_data.len(), info.max_caller_data)?;
        let qp = P::downcast_qp(qp, &self.adapter).ok_or(Error::invalid_parameter(1))?;
        // Reserved for this attempt until it ends or the connection is attached.
        let claim = if qp.is_idle() { Claim::take(qp) } else { None };
        check_connect_target(dest, claim.is_some())?;
        let qp = claim.expect("checked above");
        let g = self.lock();
        g.check_idle()?;
        P::connect(self, g, qp, dest, limits, private_data)
    }

    fn complete_connect(&self) -> Result<Overlapped> {
        P::complete_connect(self)
    }

    fn accept(
        &self,
        qp: &Arc<dyn QueuePair>,
        limits: ReadLimits,
        private_data: &[u8],
    ) -> Result<Overlapped> {
        let info = P::info(&self.adapter);
        negotiate::check_private_data(private_data.len(), info.max_callee_data)?;
        let qp = P::downcast_qp(qp, &self.adapter).ok_or(Error::invalid_parameter(1))?;
        let mut g = self.lock();
        let inc = g.incoming()?;
        // Not while another connector's Connect holds it; held until Accept attached the
        // connection (or failed).
        let claim = if qp.is_idle() {
            Claim::take(qp.clone())
        } else {
            None
        };
        if claim.is_none() {
            return fail(Status::CONNECTION_ACTIVE);
        }
        // Accept clamps to min(our capability, what the connecting peer offered): our IRD
        // covers at most the peer's ORD, our ORD at most the peer's IRD.
        let granted = negotiate::accept(info, limits, P::offered(inc));
        let inc = g.take_incoming().expect("checked above");
        let r = P::accept(self, g, qp, inc, granted, private_data);
        drop(claim);
        r
    }

    fn reject(&self, private_data: &[u8]) -> Result<()> {
        // Too much private data is refused before any state changes (docs/ND-RULES.md D8).
        negotiate::check_private_data(private_data.len(), P::info(&self.adapter).max_callee_data)?;
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
        self.lock().disconnect(self.adapter.driver())
    }

    fn cancel_overlapped_requests(&self) -> Result<()> {
        self.lock().cancel_overlapped_requests();
        Ok(())
    }
}
