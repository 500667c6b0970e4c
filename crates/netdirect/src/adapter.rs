//! `IND2Adapter`: the object that creates every other object, and the argument validation the
//! SPI documents for each creation (`ND_INVALID_PARAMETER_n`, counting `iid` as parameter 1).

use std::fmt;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::{Arc, Weak};

use netdirect_spi::limits;
use netdirect_spi::traits;

use crate::{
    AdapterInfo, CompletionQueue, Connector, Listener, MemoryRegion, MemoryWindow, ProgressMode,
    QueuePair, Result, SharedReceiveQueue,
};

/// An open adapter (`IND2Adapter`).
///
/// Cloning is cheap and shares the adapter. Every object it creates keeps it alive.
///
/// ```
/// use netdirect::{MrFlags, Provider, QueuePairConfig};
///
/// # fn main() -> netdirect::Result<()> {
/// let adapter = Provider::open("tcp")?.open_adapter_for("127.0.0.1:0".parse().unwrap())?;
/// let info = adapter.query();
/// assert!(info.max_completion_queue_depth >= 64);
///
/// // The objects a connection needs.
/// let cq = adapter.create_completion_queue(64, 0, 0)?;
/// let qp = adapter.create_queue_pair_with(
///     &cq,
///     &cq,
///     QueuePairConfig::new().receive_depth(16).initiator_depth(16),
/// )?;
/// let mr = adapter.create_memory_region()?;
/// let connector = adapter.create_connector()?;
/// let listener = adapter.create_listener()?;
/// # let _ = (qp, mr, connector, listener);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Adapter {
    inner: Arc<dyn traits::Adapter>,
    info: AdapterInfo,
    provider: &'static str,
}

impl fmt::Debug for Adapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Adapter")
            .field("provider", &self.provider)
            .field("adapter_id", &self.info.adapter_id)
            .finish()
    }
}

impl Adapter {
    pub(crate) fn from_spi(inner: Arc<dyn traits::Adapter>, provider: &'static str) -> Self {
        let info = inner.query();
        Self {
            inner,
            info,
            provider,
        }
    }

    /// The provider's name.
    pub fn provider_name(&self) -> &'static str {
        self.provider
    }

    /// The SPI object, for provider-level access.
    pub fn as_spi(&self) -> &Arc<dyn traits::Adapter> {
        &self.inner
    }

    /// `Query`: every `ND2_ADAPTER_INFO` field.
    pub fn query(&self) -> AdapterInfo {
        self.info
    }

    /// `QueryAddressList` for this adapter.
    pub fn query_address_list(&self) -> Result<Vec<SocketAddr>> {
        self.inner.query_address_list()
    }

    /// `CreateOverlappedFile`, Linux style: a descriptor that becomes readable when a request or
    /// notification of this adapter completes, or when its I/O needs driving. Put it in your
    /// own epoll/mio/tokio loop and call [`Adapter::progress`] when it is readable; then check
    /// your requests (`Overlapped::try_result`). Blocking waits need none of this.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.inner.fd()
    }

    /// `CreateOverlappedFile` under its ND name: the adapter's descriptor ([`Adapter::fd`]),
    /// borrowed for as long as the adapter lives (ND hands out a handle to close; here the
    /// adapter owns it, and every call returns the same one).
    pub fn create_overlapped_file(&self) -> Result<BorrowedFd<'_>> {
        Ok(self.fd())
    }

    /// Drive the adapter's I/O once without blocking (for event-loop users; see [`Adapter::fd`]).
    pub fn progress(&self) {
        self.inner.progress();
    }

    /// Choose who advances the adapter's I/O besides your own polls and waits:
    /// [`ProgressMode::Thread`] starts a progress engine, a thread that drives the adapter
    /// while none of your threads does (peers' RDMA lands, connection requests are answered,
    /// completions reach waiters while you compute), and stays away while you drive, so a
    /// polling or waiting thread pays no hand-off; [`ProgressMode::Manual`] stops it. The
    /// default is `ND_PROGRESS` (`thread` when unset). docs/ARCHITECTURE.md, "Who drives the
    /// I/O".
    pub fn set_progress_mode(&self, mode: ProgressMode) -> Result<()> {
        self.inner.set_progress_mode(mode)
    }

    /// The adapter's current [`ProgressMode`].
    pub fn progress_mode(&self) -> ProgressMode {
        self.inner.progress_mode()
    }

    /// `CreateCompletionQueue`: `depth` 1..=`MaxCompletionQueueDepth` (D3: the maximum itself
    /// is allowed), else `ND_INVALID_PARAMETER_3`. `group` and `affinity` are accepted; the
    /// software providers notify on whichever CPU drives the I/O.
    pub fn create_completion_queue(
        &self,
        depth: u32,
        group: u16,
        affinity: usize,
    ) -> Result<CompletionQueue> {
        limits::completion_queue(&self.info, depth)?;
        Ok(CompletionQueue::from_spi(
            self.inner.create_completion_queue(depth, group, affinity)?,
            &self.inner,
            &self.info,
        ))
    }

    /// `CreateMemoryRegion`: an empty region; register memory with it next.
    pub fn create_memory_region(&self) -> Result<MemoryRegion> {
        Ok(MemoryRegion::from_spi(self.inner.create_memory_region()?))
    }

    /// `CreateMemoryWindow`: starts invalidated; `QueuePair::bind` makes it valid.
    pub fn create_memory_window(&self) -> Result<MemoryWindow> {
        Ok(MemoryWindow::from_spi(self.inner.create_memory_window()?))
    }

    /// `CreateSharedReceiveQueue`: depth 1..=`MaxSharedReceiveQueueDepth`, else
    /// `ND_INVALID_PARAMETER_3` (so every depth, on an adapter without shared receive queues,
    /// whose maximum is 0); SGE count beyond `MaxReceiveSge` → `_4`.
    pub fn create_shared_receive_queue(
        &self,
        depth: u32,
        max_request_sge: u32,
        notify_threshold: u32,
        group: u16,
        affinity: usize,
    ) -> Result<SharedReceiveQueue> {
        limits::shared_receive_queue(&self.info, depth, max_request_sge)?;
        let s = self.inner.create_shared_receive_queue(
            depth,
            max_request_sge,
            notify_threshold,
            group,
            affinity,
        )?;
        Ok(SharedReceiveQueue::from_spi(
            s,
            &self.inner,
            self.info.max_shared_receive_queue_depth,
        ))
    }

    /// `CreateQueuePair`. Errors: receive CQ `_2`, initiator CQ `_3` (another adapter's), then
    /// receive depth `_5`, initiator depth `_6`, receive SGEs `_7`, initiator SGEs `_8`, inline
    /// size `_9`, each for a value beyond the adapter's limit (`Adapter::query`). A depth of 0 is allowed and
    /// gets a queue of one. `context` comes back in every completion as `NdResult::qp_context`.
    pub fn create_queue_pair(
        &self,
        receive_cq: &CompletionQueue,
        initiator_cq: &CompletionQueue,
        context: u64,
        receive_queue_depth: u32,
        initiator_queue_depth: u32,
        max_receive_request_sge: u32,
        max_initiator_request_sge: u32,
        inline_data_size: u32,
    ) -> Result<QueuePair> {
        self.check_mine(&receive_cq.adapter, 2)?;
        self.check_mine(&initiator_cq.adapter, 3)?;
        let cfg = traits::QueuePairConfig {
            receive_cq: receive_cq.as_spi().clone(),
            initiator_cq: initiator_cq.as_spi().clone(),
            srq: None,
            context,
            receive_queue_depth,
            initiator_queue_depth,
            max_receive_request_sge,
            max_initiator_request_sge,
            inline_data_size,
        };
        limits::queue_pair(&self.info, &cfg)?;
        Ok(QueuePair::from_spi(self.inner.create_queue_pair(cfg)?))
    }

    /// `CreateQueuePair` with named fields: the same queue pair, checks and statuses as
    /// [`Adapter::create_queue_pair`], whose parameter numbers the errors keep
    /// (`receive_depth` → `ND_INVALID_PARAMETER_5`, `initiator_depth` → `_6`,
    /// `max_receive_sge` → `_7`, `max_initiator_sge` → `_8`, `inline_data` → `_9`).
    ///
    /// ```
    /// # fn main() -> netdirect::Result<()> {
    /// use netdirect::{Provider, QueuePairConfig};
    /// let adapter = Provider::open("tcp")?.open_adapter_for("127.0.0.1:0".parse().unwrap())?;
    /// let cq = adapter.create_completion_queue(64, 0, 0)?;
    /// let config = QueuePairConfig {
    ///     receive_depth: 32,
    ///     inline_data: 64,
    ///     ..QueuePairConfig::default()
    /// };
    /// let qp = adapter.create_queue_pair_with(&cq, &cq, config)?;
    /// # let _ = qp;
    /// # Ok(())
    /// # }
    /// ```
    pub fn create_queue_pair_with(
        &self,
        receive_cq: &CompletionQueue,
        initiator_cq: &CompletionQueue,
        config: QueuePairConfig,
    ) -> Result<QueuePair> {
        let QueuePairConfig {
            context,
            receive_depth,
            initiator_depth,
            max_receive_sge,
            max_initiator_sge,
            inline_data,
        } = config;
        self.create_queue_pair(
            receive_cq,
            initiator_cq,
            context,
            receive_depth,
            initiator_depth,
            max_receive_sge,
            max_initiator_sge,
            inline_data,
        )
    }

    /// `CreateQueuePairWithSrq`. Errors: receive CQ `_2`, initiator CQ `_3`, SRQ `_4` (each for
    /// another adapter's), initiator depth `_6`, initiator SGEs `_7`, inline size `_8`.
    pub fn create_queue_pair_with_srq(
        &self,
        receive_cq: &CompletionQueue,
        initiator_cq: &CompletionQueue,
        srq: &SharedReceiveQueue,
        context: u64,
        initiator_queue_depth: u32,
        max_initiator_request_sge: u32,
        inline_data_size: u32,
    ) -> Result<QueuePair> {
        self.check_mine(&receive_cq.adapter, 2)?;
        self.check_mine(&initiator_cq.adapter, 3)?;
        self.check_mine(&srq.adapter, 4)?;
        let cfg = traits::QueuePairConfig {
            receive_cq: receive_cq.as_spi().clone(),
            initiator_cq: initiator_cq.as_spi().clone(),
            srq: Some(srq.as_spi().clone()),
            context,
            receive_queue_depth: 0,
            initiator_queue_depth,
            max_receive_request_sge: 0,
            max_initiator_request_sge,
            inline_data_size,
        };
        limits::queue_pair(&self.info, &cfg)?;
        Ok(QueuePair::from_spi(self.inner.create_queue_pair(cfg)?))
    }

    /// `ND_INVALID_PARAMETER_<param>` for a queue another adapter made (one adapter's objects
    /// cannot be used with another's), checked before the limits so that the statuses come in
    /// parameter order. The provider checks again, for callers of the SPI objects.
    fn check_mine(&self, adapter: &Weak<dyn traits::Adapter>, param: u32) -> Result<()> {
        if std::ptr::addr_eq(adapter.as_ptr(), Arc::as_ptr(&self.inner)) {
            Ok(())
        } else {
            Err(crate::Error::invalid_parameter(param))
        }
    }

    /// `CreateConnector`.
    pub fn create_connector(&self) -> Result<Connector> {
        Ok(Connector::from_spi(
            self.inner.create_connector()?,
            self.info,
        ))
    }

    /// `CreateListener`.
    pub fn create_listener(&self) -> Result<Listener> {
        Ok(Listener::from_spi(self.inner.create_listener()?))
    }
}

impl AsFd for Adapter {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd()
    }
}

/// For event loops that take an `AsRawFd` owner (tokio's `AsyncFd`, mio's `SourceFd`): an
/// `Adapter` (or a clone) keeps the descriptor open and unchanged for as long as it lives.
impl AsRawFd for Adapter {
    fn as_raw_fd(&self) -> RawFd {
        self.fd().as_raw_fd()
    }
}

/// The sizes of a queue pair, by name: [`Adapter::create_queue_pair_with`]'s argument (the
/// positional ND form is [`Adapter::create_queue_pair`]).
///
/// Build it with a struct literal and `..QueuePairConfig::default()`, or with the setters:
/// `QueuePairConfig::new().receive_depth(64).inline_data(128)`. Each limit is checked against
/// the adapter's (`Adapter::query`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QueuePairConfig {
    /// Comes back in every completion of the queue pair as `NdResult::qp_context`.
    /// Default 0.
    pub context: u64,
    /// Receives that may be posted at once (`ReceiveQueueDepth`); 0 gets a queue of one.
    /// Default 16.
    pub receive_depth: u32,
    /// Initiator requests (Send, Read, Write, Bind, Invalidate) that may be outstanding at once
    /// (`InitiatorQueueDepth`); 0 gets a queue of one. Default 16.
    pub initiator_depth: u32,
    /// SGEs a Receive may have (`MaxReceiveRequestSge`). Default 1.
    pub max_receive_sge: u32,
    /// SGEs an initiator request may have (`MaxInitiatorRequestSge`). Default 1.
    pub max_initiator_sge: u32,
    /// Bytes an `INLINE` Send or Write may carry (`InlineDataSize`). Default 0 (the providers
    /// still accept up to 1024, see [`QueuePair::send`]).
    pub inline_data: u32,
}

impl Default for QueuePairConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl QueuePairConfig {
    /// The defaults: context 0, depths 16 each way, one SGE each way, no inline size asked.
    pub const fn new() -> Self {
        Self {
            context: 0,
            receive_depth: 16,
            initiator_depth: 16,
            max_receive_sge: 1,
            max_initiator_sge: 1,
            inline_data: 0,
        }
    }

    /// Set [`QueuePairConfig::context`].
    #[must_use]
    pub const fn context(mut self, context: u64) -> Self {
        self.context = context;
        self
    }

    /// Set [`QueuePairConfig::receive_depth`].
    #[must_use]
    pub const fn receive_depth(mut self, depth: u32) -> Self {
        self.receive_depth = depth;
        self
    }

    /// Set [`QueuePairConfig::initiator_depth`].
    #[must_use]
    pub const fn initiator_depth(mut self, depth: u32) -> Self {
        self.initiator_depth = depth;
        self
    }

    /// Set [`QueuePairConfig::max_receive_sge`].
    #[must_use]
    pub const fn max_receive_sge(mut self, sge: u32) -> Self {
        self.max_receive_sge = sge;
        self
    }

    /// Set [`QueuePairConfig::max_initiator_sge`].
    #[must_use]
    pub const fn max_initiator_sge(mut self, sge: u32) -> Self {
        self.max_initiator_sge = sge;
        self
    }

    /// Set [`QueuePairConfig::inline_data`].
    #[must_use]
    pub const fn inline_data(mut self, bytes: u32) -> Self {
        self.inline_data = bytes;
        self
    }
}
