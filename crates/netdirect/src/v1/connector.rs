//! `INDConnector`: one connection's setup and teardown, and the endpoint it owns.
//!
//! Active side: `create_connector` → `create_endpoint` (read limits fixed here) → post
//! Receives → `connect` → `get_connection_data` → `complete_connect` (or `reject`).
//! Passive side: `Listen` → `create_connector` → `get_connection_request` →
//! `get_connection_data` → `create_endpoint` → post Receives → `accept`.

use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{private_data_status, Adapter, CompletionQueue, Endpoint};
use crate::{Error, Overlapped, QueuePairConfig, Result, Status};

/// A v1 connector (`INDConnector`). Clones share it. It owns at most one [`Endpoint`]
/// (v1's queue pair), made by [`Connector::create_endpoint`].
#[derive(Clone)]
pub struct Connector {
    pub(crate) v2: crate::Connector,
    pub(crate) adapter: Adapter,
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    /// The endpoint it made (held until a successful Disconnect, as v1 providers do).
    endpoint: Option<Endpoint>,
    /// Whether it made one at all (a second `CreateEndpoint` is refused even after).
    made: bool,
    /// Bound to the adapter's address (by the first Connect).
    bound: bool,
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("v1::Connector").field(&self.v2).finish()
    }
}

impl Connector {
    pub(crate) fn new(v2: crate::Connector, adapter: Adapter) -> Self {
        Self {
            v2,
            adapter,
            state: Arc::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The identity endpoints are checked against.
    pub(crate) fn id(&self) -> usize {
        Arc::as_ptr(&self.state) as usize
    }

    /// The v2 connector underneath.
    pub fn as_v2(&self) -> &crate::Connector {
        &self.v2
    }

    /// `CreateEndpoint`: the connector's queue pair, Receives on `inbound_cq`, everything else
    /// on `outbound_cq`. The read limits (Reads the peer may have in flight against us, Reads
    /// we issue) are fixed here and offered by `connect`/`accept`; `max_inline_data`
    /// receives the bytes an inline request (an SGE without registration) may carry.
    ///
    /// # Errors
    /// `ND_INVALID_PARAMETER_1`/`_2`: a queue of another adapter; `_3`..`_6`: a depth or SGE
    /// count beyond the adapter's (`Query`); `_7`/`_8`: a read limit beyond the adapter's;
    /// `ND_NOT_SUPPORTED`: the connector already made its endpoint.
    #[allow(clippy::too_many_arguments)]
    pub fn create_endpoint(
        &self,
        inbound_cq: &CompletionQueue,
        outbound_cq: &CompletionQueue,
        n_inbound_entries: usize,
        n_outbound_entries: usize,
        n_inbound_sge: usize,
        n_outbound_sge: usize,
        inbound_read_limit: usize,
        outbound_read_limit: usize,
        max_inline_data: Option<&mut usize>,
    ) -> Result<Endpoint> {
        if !inbound_cq.adapter.same(&self.adapter) {
            return Err(Error::invalid_parameter(1));
        }
        if !outbound_cq.adapter.same(&self.adapter) {
            return Err(Error::invalid_parameter(2));
        }
        let info = &self.adapter.state.info1;
        let n = |v: usize, param| u32::try_from(v).map_err(|_| Error::invalid_parameter(param));
        let cfg = QueuePairConfig {
            context: 0,
            receive_depth: n(n_inbound_entries, 3)?,
            initiator_depth: n(n_outbound_entries, 4)?,
            max_receive_sge: n(n_inbound_sge, 5)?,
            max_initiator_sge: n(n_outbound_sge, 6)?,
            inline_data: info.max_inline_data as u32,
        };
        if inbound_read_limit > info.max_inbound_read_limit {
            return Err(Error::invalid_parameter(7));
        }
        if outbound_read_limit > info.max_outbound_read_limit {
            return Err(Error::invalid_parameter(8));
        }
        let mut st = self.state();
        if st.made {
            return Err(Error::new(Status::NOT_SUPPORTED));
        }
        let qp = self
            .adapter
            .state
            .v2
            .create_queue_pair_with(&inbound_cq.v2, &outbound_cq.v2, cfg)
            .map_err(|e| {
                // v2 counts `iid` and the context: its _5.._8 are v1's _3.._6.
                match (5..=8).find(|&k| e.status() == Status::invalid_parameter(k)) {
                    Some(k) => Error::invalid_parameter(k - 2),
                    None => e,
                }
            })?;
        let ep = Endpoint::new(
            qp,
            self.id(),
            inbound_read_limit as u32,
            outbound_read_limit as u32,
            info.max_inline_data,
        );
        if let Some(out) = max_inline_data {
            *out = info.max_inline_data;
        }
        st.made = true;
        st.endpoint = Some(ep.clone());
        Ok(ep)
    }

    /// `Connect` `endpoint` (this connector's, else `ND_INVALID_PARAMETER_1`) to `address`,
    /// whose port is the peer's listen port, with IANA `protocol` (the listener's,
    /// [`super::PROTOCOL_TCP`]; another is `ND_INVALID_PARAMETER_4`) from `local_port`
    /// (network byte order; 0: the provider picks) of the adapter's address, offering the
    /// endpoint's read limits and up to `MaxCallerData` bytes of private data (more:
    /// `ND_BUFFER_OVERFLOW`).
    ///
    /// Completes when the peer accepts, or with `ND_CONNECTION_REFUSED` (rejected, nobody
    /// listening), `ND_IO_TIMEOUT`, `ND_NETWORK_UNREACHABLE`, `ND_CANCELED`.
    /// `ND_INVALID_ADDRESS`: an address of another family than the adapter's;
    /// `ND_CONNECTION_ACTIVE`: the endpoint is connected already.
    pub fn connect(
        &self,
        endpoint: &Endpoint,
        address: SocketAddr,
        protocol: i32,
        local_port: u16,
        private_data: &[u8],
    ) -> Result<Overlapped> {
        if endpoint.owner() != self.id() {
            return Err(Error::invalid_parameter(1));
        }
        if address.is_ipv4() != self.adapter.state.ip.is_ipv4() {
            return Err(Error::new(Status::INVALID_ADDRESS));
        }
        if protocol != super::PROTOCOL_TCP {
            return Err(Error::invalid_parameter(4));
        }
        if private_data.len() > self.adapter.state.info1.max_caller_data {
            return Err(Error::new(Status::BUFFER_OVERFLOW));
        }
        {
            let mut st = self.state();
            if !st.bound {
                let local = SocketAddr::new(self.adapter.state.ip, u16::from_be(local_port));
                self.v2.bind(local)?;
                st.bound = true;
            }
        }
        let (irl, orl) = endpoint.read_limits();
        self.v2
            .connect(endpoint.qp(), address, irl, orl, private_data)
            .map_err(private_data_status)
    }

    /// `CompleteConnect`: the active side, after `connect` completed (and
    /// `get_connection_data` was looked at); `ND_CONNECTION_INVALID` otherwise.
    pub fn complete_connect(&self) -> Result<Overlapped> {
        self.v2.complete_connect()
    }

    /// `Accept` the request `get_connection_request` delivered, on `endpoint` (this
    /// connector's, else `ND_INVALID_PARAMETER_1`) with its read limits, and up to
    /// `MaxCalleeData` bytes of private data (more: `ND_BUFFER_OVERFLOW`). Completes once the
    /// peer's `complete_connect` arrived, or `ND_CONNECTION_REFUSED`.
    pub fn accept(&self, endpoint: &Endpoint, private_data: &[u8]) -> Result<Overlapped> {
        if endpoint.owner() != self.id() {
            return Err(Error::invalid_parameter(1));
        }
        if private_data.len() > self.adapter.state.info1.max_callee_data {
            return Err(Error::new(Status::BUFFER_OVERFLOW));
        }
        let (irl, orl) = endpoint.read_limits();
        self.v2
            .accept(endpoint.qp(), irl, orl, private_data)
            .map_err(private_data_status)
    }

    /// `Reject`: the passive side refuses the request, or the active side declines after its
    /// `connect` completed; up to `MaxCalleeData` bytes of private data (more:
    /// `ND_BUFFER_OVERFLOW`).
    pub fn reject(&self, private_data: &[u8]) -> Result<()> {
        if private_data.len() > self.adapter.state.info1.max_callee_data {
            return Err(Error::new(Status::BUFFER_OVERFLOW));
        }
        self.v2.reject(private_data).map_err(private_data_status)
    }

    /// `GetConnectionData`: the peer's read limits, from this side's point of view (inbound:
    /// Reads the peer will issue to us; outbound: Reads it will serve), each written when
    /// asked for, and its private data copied into `private_data`; returns the private data's
    /// full length. A short buffer gets the prefix that fits and `ND_BUFFER_OVERFLOW` whose
    /// [`Error::required_size`] is the full length (the limits are written even then).
    pub fn get_connection_data(
        &self,
        inbound_read_limit: Option<&mut usize>,
        outbound_read_limit: Option<&mut usize>,
        private_data: &mut [u8],
    ) -> Result<usize> {
        // After a Reject the peer's private data is still there, its limits no longer
        // (no connection will use them): 0 each.
        let limits = match self.v2.get_read_limits() {
            Ok(l) => l,
            Err(e) if self.v2.private_data().is_err() => return Err(e),
            Err(_) => crate::ReadLimits::default(),
        };
        if let Some(out) = inbound_read_limit {
            *out = limits.inbound as usize;
        }
        if let Some(out) = outbound_read_limit {
            *out = limits.outbound as usize;
        }
        self.v2.get_private_data(private_data)
    }

    /// `GetLocalAddress`: this end's address while connecting or connected, else
    /// `ND_CONNECTION_INVALID`.
    pub fn get_local_address(&self) -> Result<SocketAddr> {
        self.v2.get_local_address()
    }

    /// `GetPeerAddress` (on the passive side from `get_connection_request` on).
    pub fn get_peer_address(&self) -> Result<SocketAddr> {
        self.v2.get_peer_address()
    }

    /// `NotifyDisconnect`: completes when the peer disconnects (or the connection fails).
    pub fn notify_disconnect(&self) -> Result<Overlapped> {
        self.v2.notify_disconnect()
    }

    /// `Disconnect`: ends the connection; every outstanding request of the endpoint, on both
    /// sides, completes `ND_CANCELED`. `ND_CONNECTION_INVALID` if not connected. The connector
    /// then lets go of its endpoint.
    pub fn disconnect(&self) -> Result<Overlapped> {
        let ov = self.v2.disconnect()?;
        self.state().endpoint = None;
        Ok(ov)
    }

    /// `CancelOverlappedRequests`: a pending Connect or Accept is abandoned, a pending
    /// NotifyDisconnect completes; each `ND_CANCELED`.
    pub fn cancel_overlapped_requests(&self) -> Result<()> {
        self.v2.cancel_overlapped_requests()
    }

    /// `GetOverlappedResult`, with v1's byte count (0).
    pub fn get_overlapped_result(&self, ov: &Overlapped, wait: bool) -> Result<usize> {
        ov.get_overlapped_result(wait).map(|()| 0)
    }
}
