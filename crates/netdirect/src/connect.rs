//! `IND2Connector` and `IND2Listener`: connection management.
//!
//! Active side: `create_connector` → `bind` (port 0 is fine) → `connect` → (peer accepts)
//! → `get_read_limits` / `get_private_data` → `complete_connect` → first Send.
//! Passive side: `create_listener` → `bind` → `listen` → `get_connection_request` into a
//! fresh connector → post Receives → `accept` (completes after the peer's `complete_connect`).

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use netdirect_spi::traits;

use crate::{AdapterInfo, Error, Overlapped, QueuePair, ReadLimits, Result};

/// A connector (`IND2Connector`).
#[derive(Clone)]
pub struct Connector {
    inner: Arc<dyn traits::Connector>,
    info: AdapterInfo,
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.inner, f)
    }
}

impl Connector {
    pub(crate) fn from_spi(inner: Arc<dyn traits::Connector>, info: AdapterInfo) -> Self {
        Self { inner, info }
    }

    /// The SPI object.
    pub fn as_spi(&self) -> &Arc<dyn traits::Connector> {
        &self.inner
    }

    /// `Bind` to a local address; port 0 picks a free port in 49152–65535.
    /// `ND_SHARING_VIOLATION`: the address is in use; `ND_TOO_MANY_ADDRESSES`: no free port;
    /// `STATUS_ADDRESS_ALREADY_ASSOCIATED` (0xC0000238): the connector is connecting or
    /// connected.
    pub fn bind(&self, addr: SocketAddr) -> Result<()> {
        self.inner.bind(addr)
    }

    /// `Connect` `qp` to `dest`, offering `inbound_read_limit` (Reads the peer may issue to us)
    /// and `outbound_read_limit` (Reads we want to issue), both clamped to the adapter, and up to
    /// `MaxCallerData` bytes of private data (more: `ND_INVALID_BUFFER_SIZE`, connector left
    /// usable). The request completes when the peer accepts (`Ok`) or with
    /// `ND_CONNECTION_REFUSED` (rejected, or no listener), `ND_IO_TIMEOUT`,
    /// `ND_NETWORK_UNREACHABLE`/`ND_HOST_UNREACHABLE`, or `ND_CANCELED`. Destination 0.0.0.0
    /// gives `STATUS_BAD_NETWORK_NAME`; an already connected queue pair `ND_CONNECTION_ACTIVE`.
    pub fn connect(
        &self,
        qp: &QueuePair,
        dest: SocketAddr,
        inbound_read_limit: u32,
        outbound_read_limit: u32,
        private_data: &[u8],
    ) -> Result<Overlapped> {
        let limits = ReadLimits {
            inbound: inbound_read_limit,
            outbound: outbound_read_limit,
        };
        self.inner.connect(qp.as_spi(), dest, limits, private_data)
    }

    /// `CompleteConnect`: finish the active side after `connect` succeeded (sends the RTR);
    /// `ND_CONNECTION_INVALID` otherwise.
    pub fn complete_connect(&self) -> Result<Overlapped> {
        self.inner.complete_connect()
    }

    /// `Accept` the request `Listener::get_connection_request` delivered, on `qp`. Read limits
    /// are clamped to what the peer offered and the adapter supports. Completes when the peer
    /// has called `complete_connect`, or with `ND_CONNECTION_REFUSED` if it rejected or went away.
    pub fn accept(
        &self,
        qp: &QueuePair,
        inbound_read_limit: u32,
        outbound_read_limit: u32,
        private_data: &[u8],
    ) -> Result<Overlapped> {
        let limits = ReadLimits {
            inbound: inbound_read_limit,
            outbound: outbound_read_limit,
        };
        self.inner.accept(qp.as_spi(), limits, private_data)
    }

    /// `Reject`: the passive side refuses a request (the peer's `connect` completes with
    /// `ND_CONNECTION_REFUSED` and sees this private data), or the active side declines after
    /// `connect` completed (the peer's `accept` fails with `ND_CONNECTION_REFUSED`).
    pub fn reject(&self, private_data: &[u8]) -> Result<()> {
        self.inner.reject(private_data)
    }

    /// `GetReadLimits`, from this side's point of view: `inbound` is the peer's outbound
    /// limit and `outbound` the peer's inbound limit, both clamped by both adapters.
    pub fn get_read_limits(&self) -> Result<ReadLimits> {
        self.inner.get_read_limits()
    }

    /// `GetPrivateData`: copy the peer's private data into `buf` and return its full length.
    /// If `buf` is too short, the prefix that fits is copied and the result is `Err` with
    /// `ND_BUFFER_OVERFLOW`, whose [`Error::required_size`] is the full length (ND's sizing
    /// probe `GetPrivateData(NULL, &len)` is `get_private_data(&mut [])`);
    /// [`Connector::private_data`] returns all of it at once.
    pub fn get_private_data(&self, buf: &mut [u8]) -> Result<usize> {
        let pd = self.inner.private_data()?;
        let n = pd.len().min(buf.len());
        buf[..n].copy_from_slice(&pd[..n]);
        if pd.len() > buf.len() {
            return Err(Error::buffer_overflow(pd.len()));
        }
        Ok(pd.len())
    }

    /// The peer's private data.
    pub fn private_data(&self) -> Result<Vec<u8>> {
        self.inner.private_data()
    }

    /// `GetLocalAddress`: this end's address and port while connecting or connected (from
    /// Connect, or GetConnectionRequest, to the end of the connection).
    ///
    /// # Errors
    ///
    /// `ND_CONNECTION_INVALID` when neither: a fresh or merely bound connector (the port a
    /// `bind` to port 0 chose shows once Connect starts), one whose Connect was refused, or
    /// one whose connection ended.
    pub fn get_local_address(&self) -> Result<SocketAddr> {
        self.inner.get_local_address()
    }

    /// `GetPeerAddress` (also right after `get_connection_request`, before `accept`).
    pub fn get_peer_address(&self) -> Result<SocketAddr> {
        self.inner.get_peer_address()
    }

    /// `NotifyDisconnect`: completes when the established connection goes down.
    pub fn notify_disconnect(&self) -> Result<Overlapped> {
        self.inner.notify_disconnect()
    }

    /// `Disconnect`: flushes the queue pair (every outstanding request completes with
    /// `ND_CANCELED`) and tells the peer; the queue pair cannot be reused.
    pub fn disconnect(&self) -> Result<Overlapped> {
        self.inner.disconnect()
    }

    /// `CancelOverlappedRequests`: a pending Connect or Accept is abandoned, a pending
    /// NotifyDisconnect completes; each with `ND_CANCELED`.
    pub fn cancel_overlapped_requests(&self) -> Result<()> {
        self.inner.cancel_overlapped_requests()
    }

    /// `GetOverlappedResult`.
    pub fn get_overlapped_result(&self, ov: &Overlapped, wait: bool) -> Result<()> {
        ov.get_overlapped_result(wait)
    }

    /// The adapter limits (MaxCallerData and MaxCalleeData bound the private data).
    pub fn adapter_info(&self) -> &AdapterInfo {
        &self.info
    }
}

/// A listener (`IND2Listener`).
#[derive(Clone)]
pub struct Listener {
    inner: Arc<dyn traits::Listener>,
}

impl fmt::Debug for Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.inner, f)
    }
}

impl Listener {
    pub(crate) fn from_spi(inner: Arc<dyn traits::Listener>) -> Self {
        Self { inner }
    }

    /// The SPI object.
    pub fn as_spi(&self) -> &Arc<dyn traits::Listener> {
        &self.inner
    }

    /// `Bind`: port 0 picks a free port in 49152–65535; a wildcard address listens on every
    /// address of the adapter. `ND_SHARING_VIOLATION` if in use; a second Bind gives
    /// `STATUS_ADDRESS_ALREADY_ASSOCIATED`.
    pub fn bind(&self, addr: SocketAddr) -> Result<()> {
        self.inner.bind(addr)
    }

    /// `Listen` with at most `backlog` requests waiting for `get_connection_request` (0: no
    /// limit); further requests are refused.
    pub fn listen(&self, backlog: u32) -> Result<()> {
        self.inner.listen(backlog)
    }

    /// `GetLocalAddress`, including the assigned port; `ND_INVALID_DEVICE_STATE` before
    /// `listen`.
    pub fn get_local_address(&self) -> Result<SocketAddr> {
        self.inner.get_local_address()
    }

    /// `GetConnectionRequest`: the next incoming request goes to `connector` (fresh from
    /// `create_connector`). Several may be outstanding; requests are handed out in order.
    pub fn get_connection_request(&self, connector: &Connector) -> Result<Overlapped> {
        self.inner.get_connection_request(connector.as_spi())
    }

    /// `CancelOverlappedRequests`: every pending `get_connection_request` completes with
    /// `ND_CANCELED`.
    pub fn cancel_overlapped_requests(&self) -> Result<()> {
        self.inner.cancel_overlapped_requests()
    }

    /// `GetOverlappedResult`.
    pub fn get_overlapped_result(&self, ov: &Overlapped, wait: bool) -> Result<()> {
        ov.get_overlapped_result(wait)
    }
}
