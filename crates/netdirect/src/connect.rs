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

/// A connector (`IND2Connector`): one connection's setup and teardown, on either side.
///
/// The client binds, connects and completes the connection; the server receives a request
/// into a fresh connector from [`Listener::get_connection_request`] and accepts it. The queue
/// pair carries the traffic; the connector then reports the peer (addresses, private data,
/// read limits) and ends the connection.
///
/// ```no_run
/// use netdirect::{ConnectConfig, Provider, QueuePairConfig};
///
/// # fn main() -> netdirect::Result<()> {
/// let adapter = Provider::open("tcp")?.open_adapter_for("127.0.0.1:0".parse().unwrap())?;
/// let cq = adapter.create_completion_queue(64, 0, 0)?;
/// let qp = adapter.create_queue_pair_with(&cq, &cq, QueuePairConfig::new())?;
///
/// let connector = adapter.create_connector()?;
/// connector.bind("127.0.0.1:0".parse().unwrap())?;
/// let server = "127.0.0.1:4791".parse().unwrap();
/// // Let the server issue one RDMA Read to us, and issue up to four ourselves.
/// let config = ConnectConfig::new().read_limits(1, 4).private_data(b"hello");
/// connector.connect_with(&qp, server, &config)?.wait()?;
/// println!("the server said {:?}", connector.private_data()?);
/// connector.complete_connect()?.wait()?;
/// // ... post to `qp` ...
/// connector.disconnect()?.wait()?;
/// # Ok(())
/// # }
/// ```
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

    /// `Connect` with named fields: [`Connector::connect`] with the read limits and private
    /// data of `config`; the same checks, statuses and completion.
    pub fn connect_with(
        &self,
        qp: &QueuePair,
        dest: SocketAddr,
        config: &ConnectConfig<'_>,
    ) -> Result<Overlapped> {
        self.connect(
            qp,
            dest,
            config.inbound_read_limit,
            config.outbound_read_limit,
            config.private_data,
        )
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

    /// `Accept` with named fields: [`Connector::accept`] with the read limits and private data
    /// of `config`; the same checks, statuses and completion.
    pub fn accept_with(&self, qp: &QueuePair, config: &ConnectConfig<'_>) -> Result<Overlapped> {
        self.accept(
            qp,
            config.inbound_read_limit,
            config.outbound_read_limit,
            config.private_data,
        )
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

/// What one side offers when connecting or accepting, by name: the argument of
/// [`Connector::connect_with`] and [`Connector::accept_with`] (the positional ND forms are
/// [`Connector::connect`] and [`Connector::accept`]).
///
/// ```
/// use netdirect::ConnectConfig;
/// let token = 0x1234_u32.to_le_bytes();
/// let config = ConnectConfig {
///     inbound_read_limit: 4,
///     private_data: &token,
///     ..ConnectConfig::default()
/// };
/// assert_eq!(config, ConnectConfig::new().read_limits(4, 0).private_data(&token));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ConnectConfig<'a> {
    /// RDMA Reads the peer may have in flight against this side (IRD), clamped to the
    /// adapter's and the peer's limits; `u32::MAX` asks for as many as they allow. Default 0:
    /// the peer may not Read.
    pub inbound_read_limit: u32,
    /// RDMA Reads this side wants in flight at once (ORD), clamped likewise. Default 0: this
    /// side does not Read.
    pub outbound_read_limit: u32,
    /// Bytes for the peer's [`Connector::private_data`]: at most the adapter's
    /// `max_caller_data` when connecting, `max_callee_data` when accepting, else
    /// `ND_INVALID_BUFFER_SIZE`. Default empty.
    pub private_data: &'a [u8],
}

impl<'a> ConnectConfig<'a> {
    /// No Reads either way, no private data.
    pub const fn new() -> Self {
        Self {
            inbound_read_limit: 0,
            outbound_read_limit: 0,
            private_data: &[],
        }
    }

    /// Set [`ConnectConfig::inbound_read_limit`] and [`ConnectConfig::outbound_read_limit`].
    #[must_use]
    pub const fn read_limits(mut self, inbound: u32, outbound: u32) -> Self {
        self.inbound_read_limit = inbound;
        self.outbound_read_limit = outbound;
        self
    }

    /// Set [`ConnectConfig::private_data`].
    #[must_use]
    pub const fn private_data(mut self, data: &'a [u8]) -> Self {
        self.private_data = data;
        self
    }
}

/// A listener (`IND2Listener`): takes connection requests on an address.
///
/// ```
/// use netdirect::Provider;
///
/// # fn main() -> netdirect::Result<()> {
/// let adapter = Provider::open("tcp")?.open_adapter_for("127.0.0.1:0".parse().unwrap())?;
/// let listener = adapter.create_listener()?;
/// listener.bind("127.0.0.1:0".parse().unwrap())?; // port 0: the provider picks one
/// listener.listen(0)?;
/// let addr = listener.get_local_address()?; // what clients connect to
/// assert_ne!(addr.port(), 0);
/// // Each request arrives in a fresh connector, which then accepts (or rejects) it:
/// let connector = adapter.create_connector()?;
/// let request = listener.get_connection_request(&connector)?;
/// assert!(!request.is_complete(), "no client yet");
/// # Ok(())
/// # }
/// ```
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
