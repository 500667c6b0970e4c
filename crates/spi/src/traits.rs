//! The provider interface: one trait per ND v2 interface (the pages of Microsoft's NetworkDirect SPI reference).
//!
//! The public `netdirect` crate validates arguments against [`AdapterInfo`] (the numbered
//! `ND_INVALID_PARAMETER_n` errors) before it calls a provider, so providers see arguments that
//! are within their advertised limits. Method names are the ND method names in snake_case.
//! Objects passed to another object's method (a CQ to `create_queue_pair`, a QP to `connect`)
//! arrive as trait objects; a provider recognises its own with [`Any`] downcasting and refuses
//! foreign ones with the documented `ND_INVALID_PARAMETER_n`.

use std::any::Any;
use std::fmt::Debug;
use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::sync::Arc;

use crate::kit::overlapped::Overlapped;
use crate::kit::progress::ProgressMode;
use crate::{AdapterInfo, MrFlags, NdResult, NotifyType, OpFlags, ReadLimits, Result, Sge};

/// `IND2Provider`: a named provider that serves some local addresses.
pub trait Provider: Send + Sync + Debug {
    /// The provider's name (`"tcp"`, `"shm"`), as `ND_PROVIDER` selects it.
    fn name(&self) -> &'static str;
    /// `QueryAddressList`: every local address this provider's adapters serve.
    fn query_address_list(&self) -> Result<Vec<SocketAddr>>;
    /// `ResolveAddress`: the adapter id serving the local IP `addr` (the port is ignored);
    /// `ND_INVALID_ADDRESS` if none does.
    fn resolve_address(&self, addr: &SocketAddr) -> Result<u64>;
    /// `OpenAdapter`: `ND_INVALID_PARAMETER` for an unknown id.
    fn open_adapter(&self, adapter_id: u64) -> Result<Arc<dyn Adapter>>;
}

/// Arguments of `CreateQueuePair` / `CreateQueuePairWithSrq`, already validated.
#[derive(Debug, Clone)]
pub struct QueuePairConfig {
    /// Where Receive completions go.
    pub receive_cq: Arc<dyn CompletionQueue>,
    /// Where every other completion goes (may be the same CQ).
    pub initiator_cq: Arc<dyn CompletionQueue>,
    /// The shared receive queue, for `CreateQueuePairWithSrq`.
    pub srq: Option<Arc<dyn SharedReceiveQueue>>,
    /// Returned as `NdResult::qp_context`.
    pub context: u64,
    /// Receive queue depth (0 with an SRQ).
    pub receive_queue_depth: u32,
    /// Initiator queue depth.
    pub initiator_queue_depth: u32,
    /// SGEs per Receive.
    pub max_receive_request_sge: u32,
    /// SGEs per Send, Read and Write.
    pub max_initiator_request_sge: u32,
    /// Inline bytes per request.
    pub inline_data_size: u32,
}

impl QueuePairConfig {
    /// The simplest queue pair: every completion on `cq`, no SRQ, context 0, `depth` requests
    /// each way of one SGE, no inline data (what a test or a hostile-peer harness needs).
    pub fn single_cq(cq: Arc<dyn CompletionQueue>, depth: u32) -> Self {
        Self {
            receive_cq: cq.clone(),
            initiator_cq: cq,
            srq: None,
            context: 0,
            receive_queue_depth: depth,
            initiator_queue_depth: depth,
            max_receive_request_sge: 1,
            max_initiator_request_sge: 1,
            inline_data_size: 0,
        }
    }
}

/// `IND2Adapter`.
pub trait Adapter: Send + Sync + Debug {
    /// For downcasting.
    fn as_any(&self) -> &dyn Any;
    /// `Query`: the adapter's limits.
    fn query(&self) -> AdapterInfo;
    /// `QueryAddressList` for this adapter.
    fn query_address_list(&self) -> Result<Vec<SocketAddr>>;
    /// `CreateOverlappedFile` in Linux form: a descriptor that becomes readable when a request or
    /// notification of this adapter completes or I/O needs driving; then call [`Adapter::progress`].
    fn fd(&self) -> BorrowedFd<'_>;
    /// Drive the adapter's I/O once, without blocking.
    fn progress(&self);
    /// Choose who advances the adapter's I/O besides the application's own polls and waits
    /// (`kit::progress`). A provider without a progress engine refuses
    /// [`ProgressMode::Thread`] with `ND_NOT_SUPPORTED`.
    fn set_progress_mode(&self, mode: ProgressMode) -> Result<()> {
        match mode {
            ProgressMode::Manual => Ok(()),
            ProgressMode::Thread => crate::fail(crate::Status::NOT_SUPPORTED),
        }
    }
    /// The adapter's current [`ProgressMode`].
    fn progress_mode(&self) -> ProgressMode {
        ProgressMode::Manual
    }
    /// `CreateCompletionQueue`.
    fn create_completion_queue(
        &self,
        depth: u32,
        group: u16,
        affinity: usize,
    ) -> Result<Arc<dyn CompletionQueue>>;
    /// `CreateMemoryRegion`: an empty region; `register` comes later.
    fn create_memory_region(&self) -> Result<Arc<dyn MemoryRegion>>;
    /// `CreateMemoryWindow`: starts invalidated.
    fn create_memory_window(&self) -> Result<Arc<dyn MemoryWindow>>;
    /// `CreateSharedReceiveQueue`.
    fn create_shared_receive_queue(
        &self,
        depth: u32,
        max_request_sge: u32,
        notify_threshold: u32,
        group: u16,
        affinity: usize,
    ) -> Result<Arc<dyn SharedReceiveQueue>>;
    /// `CreateQueuePair` / `CreateQueuePairWithSrq`.
    fn create_queue_pair(&self, config: QueuePairConfig) -> Result<Arc<dyn QueuePair>>;
    /// `CreateConnector`.
    fn create_connector(&self) -> Result<Arc<dyn Connector>>;
    /// `CreateListener`.
    fn create_listener(&self) -> Result<Arc<dyn Listener>>;
}

/// `IND2CompletionQueue`.
pub trait CompletionQueue: Send + Sync + Debug {
    /// For downcasting.
    fn as_any(&self) -> &dyn Any;
    /// `GetResults`: fill `out`, return how many; drives I/O when nothing is queued.
    fn get_results(&self, out: &mut [NdResult]) -> usize;
    /// `Notify`.
    fn notify(&self, ty: NotifyType) -> Result<Overlapped>;
    /// `Resize`.
    fn resize(&self, depth: u32) -> Result<()>;
    /// `GetNotifyAffinity`: (group, affinity mask).
    fn get_notify_affinity(&self) -> Result<(u16, usize)>;
    /// `CancelOverlappedRequests`.
    fn cancel_overlapped_requests(&self) -> Result<()>;
}

/// `IND2MemoryRegion`.
pub trait MemoryRegion: Send + Sync + Debug {
    /// For downcasting.
    fn as_any(&self) -> &dyn Any;
    /// `Register`.
    ///
    /// # Safety
    /// `len` bytes at `buffer` must stay valid for reads and writes until the registration is
    /// deregistered and every request that used it has completed; `keepalive`, if given, owns
    /// that memory and is held for that long.
    unsafe fn register(
        &self,
        buffer: *mut u8,
        len: usize,
        flags: MrFlags,
        keepalive: Option<Arc<dyn Any + Send + Sync>>,
    ) -> Result<Overlapped>;
    /// `Deregister`: `ND_DEVICE_BUSY` while a window is bound.
    fn deregister(&self) -> Result<Overlapped>;
    /// `GetLocalToken`.
    fn get_local_token(&self) -> u32;
    /// `GetRemoteToken` (network byte order, as the SPI recommends).
    fn get_remote_token(&self) -> u32;
    /// `CancelOverlappedRequests`.
    fn cancel_overlapped_requests(&self) -> Result<()>;
}

/// `IND2MemoryWindow`.
pub trait MemoryWindow: Send + Sync + Debug {
    /// For downcasting.
    fn as_any(&self) -> &dyn Any;
    /// `GetRemoteToken`: valid as soon as `QueuePair::bind` returns.
    fn get_remote_token(&self) -> u32;
    /// Run `hook` each time the peer's Send with Invalidate (RFC 5040 §5.3; ND v1's
    /// `SendAndInvalidate`) invalidates this window, before the Receive completion of that
    /// Send is queued; `None` removes it. Once a call returns, a hook it replaced is neither
    /// running nor run again. A local Invalidate, or the end of the connection, does not run
    /// it. ND v1 writes `CreateMemoryWindow`'s `ND_RESULT` with it. `false`: the provider
    /// never runs one (the default).
    fn set_peer_invalidate_hook(&self, hook: Option<PeerInvalidateHook>) -> bool {
        let _ = hook;
        false
    }
}

/// What [`MemoryWindow::set_peer_invalidate_hook`] runs; called from the provider's receive
/// path (any thread), under its locks: it must be short and must not call the provider.
pub type PeerInvalidateHook = Arc<dyn Fn() + Send + Sync>;

/// `IND2SharedReceiveQueue`.
pub trait SharedReceiveQueue: Send + Sync + Debug {
    /// For downcasting.
    fn as_any(&self) -> &dyn Any;
    /// `Receive`.
    ///
    /// # Safety
    /// The memory the SGEs name must not be accessed until the Receive completes.
    unsafe fn receive(&self, context: u64, sge: &[Sge]) -> Result<()>;
    /// `Modify` (0 leaves a value unchanged).
    fn modify(&self, depth: u32, notify_threshold: u32) -> Result<()>;
    /// `Notify`.
    fn notify(&self) -> Result<Overlapped>;
    /// `GetNotifyAffinity`.
    fn get_notify_affinity(&self) -> Result<(u16, usize)>;
    /// `CancelOverlappedRequests`.
    fn cancel_overlapped_requests(&self) -> Result<()>;
}

/// `IND2QueuePair`. Every post is `unsafe` for the same reason: the provider reads or writes
/// the named memory after the call returns, until the request completes.
pub trait QueuePair: Send + Sync + Debug {
    /// For downcasting.
    fn as_any(&self) -> &dyn Any;
    /// `Flush`: every outstanding request completes with `ND_CANCELED`.
    fn flush(&self) -> Result<()>;
    /// `Send`.
    ///
    /// # Safety
    /// Unless `INLINE` is set, the memory the SGEs name must not be written until the Send
    /// completes. With `INLINE`, each SGE must be valid for reads of its length during the
    /// call: the provider copies it then without checking its token (docs/ND-RULES.md §2.9).
    unsafe fn send(&self, context: u64, sge: &[Sge], flags: OpFlags) -> Result<()>;
    /// `Receive`.
    ///
    /// # Safety
    /// The memory the SGEs name must not be accessed until the Receive completes.
    unsafe fn receive(&self, context: u64, sge: &[Sge]) -> Result<()>;
    /// ND v1's `SendAndInvalidate`: a Send that also invalidates the peer's window named by
    /// `remote_token` (RFC 5040 §5.3, Send with Invalidate), once the peer has placed the
    /// message. v2 has no such post; a provider without it says `ND_NOT_SUPPORTED`.
    ///
    /// # Safety
    /// As [`QueuePair::send`].
    unsafe fn send_and_invalidate(
        &self,
        context: u64,
        sge: &[Sge],
        remote_token: u32,
        flags: OpFlags,
    ) -> Result<()> {
        let _ = (context, sge, remote_token, flags);
        Err(crate::Error::new(crate::Status::NOT_SUPPORTED))
    }
    /// `Bind` a window over `len` bytes at `buffer` inside `region`.
    fn bind(
        &self,
        context: u64,
        region: &Arc<dyn MemoryRegion>,
        window: &Arc<dyn MemoryWindow>,
        buffer: *const u8,
        len: usize,
        flags: OpFlags,
    ) -> Result<()>;
    /// `Invalidate` a window.
    fn invalidate(
        &self,
        context: u64,
        window: &Arc<dyn MemoryWindow>,
        flags: OpFlags,
    ) -> Result<()>;
    /// `Read` into the SGEs from the peer's `remote_address` under `remote_token`.
    ///
    /// # Safety
    /// The memory the SGEs name must not be accessed until the Read completes.
    unsafe fn read(
        &self,
        context: u64,
        sge: &[Sge],
        remote_address: u64,
        remote_token: u32,
        flags: OpFlags,
    ) -> Result<()>;
    /// `Write` the SGEs to the peer's `remote_address` under `remote_token`.
    ///
    /// # Safety
    /// Unless `INLINE` is set, the memory the SGEs name must not be written until the Write
    /// completes. With `INLINE`, each SGE must be valid for reads of its length during the
    /// call: the provider copies it then without checking its token (docs/ND-RULES.md §2.9).
    unsafe fn write(
        &self,
        context: u64,
        sge: &[Sge],
        remote_address: u64,
        remote_token: u32,
        flags: OpFlags,
    ) -> Result<()>;
}

/// `IND2Connector`.
pub trait Connector: Send + Sync + Debug {
    /// For downcasting.
    fn as_any(&self) -> &dyn Any;
    /// `Bind` to a local address (port 0: the provider picks one in 49152–65535).
    fn bind(&self, addr: SocketAddr) -> Result<()>;
    /// `Connect` `qp` to `dest`.
    fn connect(
        &self,
        qp: &Arc<dyn QueuePair>,
        dest: SocketAddr,
        limits: ReadLimits,
        private_data: &[u8],
    ) -> Result<Overlapped>;
    /// `CompleteConnect`.
    fn complete_connect(&self) -> Result<Overlapped>;
    /// `Accept` a request received through `Listener::get_connection_request`.
    fn accept(
        &self,
        qp: &Arc<dyn QueuePair>,
        limits: ReadLimits,
        private_data: &[u8],
    ) -> Result<Overlapped>;
    /// `Reject` (passive side instead of Accept, or active side instead of CompleteConnect).
    fn reject(&self, private_data: &[u8]) -> Result<()>;
    /// `GetReadLimits`, from the caller's point of view.
    fn get_read_limits(&self) -> Result<ReadLimits>;
    /// The peer's private data (`GetPrivateData` without the buffer dance).
    fn private_data(&self) -> Result<Vec<u8>>;
    /// `GetLocalAddress`.
    fn get_local_address(&self) -> Result<SocketAddr>;
    /// `GetPeerAddress`.
    fn get_peer_address(&self) -> Result<SocketAddr>;
    /// `NotifyDisconnect`.
    fn notify_disconnect(&self) -> Result<Overlapped>;
    /// `Disconnect`.
    fn disconnect(&self) -> Result<Overlapped>;
    /// `CancelOverlappedRequests`.
    fn cancel_overlapped_requests(&self) -> Result<()>;
}

/// `IND2Listener`.
pub trait Listener: Send + Sync + Debug {
    /// For downcasting.
    fn as_any(&self) -> &dyn Any;
    /// `Bind`.
    fn bind(&self, addr: SocketAddr) -> Result<()>;
    /// `Listen` (backlog 0: no limit).
    fn listen(&self, backlog: u32) -> Result<()>;
    /// `GetLocalAddress`.
    fn get_local_address(&self) -> Result<SocketAddr>;
    /// `GetConnectionRequest` into a fresh connector.
    fn get_connection_request(&self, connector: &Arc<dyn Connector>) -> Result<Overlapped>;
    /// `CancelOverlappedRequests`.
    fn cancel_overlapped_requests(&self) -> Result<()>;
}
