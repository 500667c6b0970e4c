//! What the kit's provider objects need from a provider's adapter state, and the adapter
//! object itself, generic over the few constructors that depend on the transport.

use std::any::Any;
use std::fmt;
use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::kit::addresses::local_addresses;
use crate::kit::connector::{Connector as KitConnector, ConnectorProvider};
use crate::kit::listener::{Listener as KitListener, ListenerProvider};
use crate::kit::mr::{Region, Table};
use crate::kit::mw::Window;
use crate::kit::overlapped::Driver;
use crate::kit::progress::{ProgressMode, ProgressThread};
use crate::kit::srq::{Srq, SrqProvider};
use crate::traits::{
    self, CompletionQueue, Connector, Listener, MemoryRegion, MemoryWindow, QueuePair,
    QueuePairConfig, SharedReceiveQueue,
};
use crate::{AdapterFlags, AdapterInfo, Result, ND_VERSION_2};

/// The state every object of one software adapter shares, as the kit's objects ([`Region`],
/// [`Window`], [`Srq`], [`Adapter`]) use it. Objects of one adapter hold the same `Arc` of it,
/// which is how they recognise each other (an object of another adapter is an invalid
/// parameter).
pub trait AdapterState: Send + Sync + 'static {
    /// The adapter's registrations (regions and bound windows).
    fn registrations(&self) -> &Table;
    /// What completes the adapter's overlapped requests.
    fn driver(&self) -> Arc<dyn Driver>;
    /// `ND2_ADAPTER_INFO::MaxRegistrationSize`.
    fn max_registration_size(&self) -> usize;
    /// `ND2_ADAPTER_INFO::MaxTransferLength`: a Receive for more is `ND_BUFFER_OVERFLOW`.
    fn max_transfer_length(&self) -> u64 {
        u64::MAX
    }
    /// `ND2_ADAPTER_INFO::MaxSharedReceiveQueueDepth`: `Modify` beyond it is
    /// `ND_INVALID_PARAMETER`.
    fn max_shared_receive_queue_depth(&self) -> u32 {
        u32::MAX
    }
}

/// What every object of one software adapter shares: the provider's engine `E` (which
/// completes its overlapped requests), the registrations, the limits and the provider's
/// configuration `C`.
pub struct Shared<E, C> {
    /// The provider's engine.
    pub engine: Arc<E>,
    /// The adapter's registrations (regions and bound windows).
    pub mrs: Table,
    /// The adapter's limits (`IND2Adapter::Query`).
    pub info: AdapterInfo,
    /// The provider's configuration, read once when the adapter opens.
    pub config: C,
}

impl<E: fmt::Debug, C: fmt::Debug> fmt::Debug for Shared<E, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("engine", &self.engine)
            .field("mrs", &self.mrs)
            .field("config", &self.config)
            .finish()
    }
}

impl<E, C> Shared<E, C> {
    /// The state of an adapter that opened `engine`: an empty registration table, the limits
    /// `info` and the configuration `config`.
    pub fn new(engine: Arc<E>, info: AdapterInfo, config: C) -> Self {
        Self {
            engine,
            mrs: Table::new(),
            info,
            config,
        }
    }
}

/// The limits the software providers share (`IND2Adapter::Query`), so that an application sees
/// one set of numbers whichever of them it opens: software limits, each one a value the
/// providers really honour. A provider sets, by struct update, what its transport decides:
/// `adapter_id`, `max_initiator_queue_depth`, `inline_request_threshold`, `max_caller_data`
/// and `max_callee_data`, which are zero here.
pub fn software_limits() -> AdapterInfo {
    AdapterInfo {
        info_version: ND_VERSION_2,
        vendor_id: 0,
        device_id: 0,
        adapter_id: 0,
        max_registration_size: 1 << 40,
        max_window_size: 1 << 40,
        max_initiator_sge: 32,
        max_receive_sge: 32,
        max_read_sge: 32,
        max_transfer_length: 1 << 30,
        max_inline_data_size: 1024,
        max_inbound_read_limit: 128,
        max_outbound_read_limit: 128,
        max_receive_queue_depth: 16384,
        max_initiator_queue_depth: 0,
        // As deep as a queue pair's own receive queue (a software queue: any depth works).
        max_shared_receive_queue_depth: 16384,
        max_completion_queue_depth: 65536,
        inline_request_threshold: 0,
        large_request_threshold: 64 * 1024,
        max_caller_data: 0,
        max_callee_data: 0,
        adapter_flags: AdapterFlags::IN_ORDER_DMA_SUPPORTED
            | AdapterFlags::CQ_RESIZE_SUPPORTED
            | AdapterFlags::LOOPBACK_CONNECTIONS_SUPPORTED,
    }
}

/// A software provider's engine, as the kit's [`Adapter`] uses it: the [`Driver`] that
/// completes the adapter's requests and advances its work, and the descriptor that becomes
/// readable when the adapter has work (`IND2Adapter` fd model).
pub trait Engine: Driver + 'static {
    /// The descriptor that becomes readable when the adapter has work.
    fn fd(&self) -> BorrowedFd<'_>;
}

/// What the kit's [`Adapter`] reads of its state unless the provider says otherwise
/// ([`AdapterProvider`]'s `info`, `fd` and `progress`): [`Shared`] over any [`Engine`].
pub trait EngineState: AdapterState {
    /// The adapter's limits (`IND2Adapter::Query`).
    fn info(&self) -> AdapterInfo;
    /// The engine's descriptor ([`Engine::fd`]).
    fn fd(&self) -> BorrowedFd<'_>;
    /// Advance the adapter's pending work on the calling thread ([`Driver::progress`]).
    fn progress(&self);
}

impl<E: Engine, C: Send + Sync + 'static> EngineState for Shared<E, C> {
    fn info(&self) -> AdapterInfo {
        self.info
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.engine.fd()
    }

    fn progress(&self) {
        self.engine.progress();
    }
}

/// How the kit's regions, windows and shared receive queues see the adapter.
impl<E: Driver + 'static, C: Send + Sync + 'static> AdapterState for Shared<E, C> {
    fn registrations(&self) -> &Table {
        &self.mrs
    }

    fn driver(&self) -> Arc<dyn Driver> {
        self.engine.clone()
    }

    fn max_registration_size(&self) -> usize {
        self.info.max_registration_size
    }

    fn max_transfer_length(&self) -> u64 {
        u64::from(self.info.max_transfer_length)
    }

    fn max_shared_receive_queue_depth(&self) -> u32 {
        self.info.max_shared_receive_queue_depth
    }
}

/// The kit's own connector and listener ([`KitConnector`], [`KitListener`]) as the objects an
/// adapter creates, for every provider that plugs into both over its adapter state: the
/// defaults of [`AdapterProvider::create_connector`] and [`AdapterProvider::create_listener`].
pub trait Connections: SrqProvider {
    /// A connector, idle.
    fn kit_connector(state: Arc<Self::Adapter>) -> Arc<dyn Connector>;
    /// A listener, unbound.
    fn kit_listener(state: Arc<Self::Adapter>) -> Arc<dyn Listener>;
}

impl<P> Connections for P
where
    P: SrqProvider
        + ConnectorProvider<Adapter = <P as SrqProvider>::Adapter>
        + ListenerProvider<Adapter = <P as SrqProvider>::Adapter>,
    KitConnector<P>: Send + Sync,
    KitListener<P>: Send + Sync,
{
    fn kit_connector(state: Arc<<P as SrqProvider>::Adapter>) -> Arc<dyn Connector> {
        KitConnector::<P>::new(state)
    }

    fn kit_listener(state: Arc<<P as SrqProvider>::Adapter>) -> Arc<dyn Listener> {
        KitListener::<P>::new(state)
    }
}

/// What a software provider plugs into the kit's [`Adapter`]: the constructors of the objects
/// that depend on its transport, and its engine's descriptor and progress. Regions, windows and
/// shared receive queues are the kit's own, over the provider's [`SrqProvider::Adapter`] state.
/// The limits, the descriptor and the progress come from that state ([`EngineState`]) unless
/// the provider overrides them.
pub trait AdapterProvider: SrqProvider<Adapter: EngineState> + Connections {
    /// The adapter's limits (`IND2Adapter::Query`, `docs/ND-RULES.md` §2.1).
    fn info(state: &Self::Adapter) -> AdapterInfo {
        state.info()
    }
    /// The descriptor that becomes readable when the adapter has work (`IND2Adapter` fd model).
    fn fd(state: &Self::Adapter) -> BorrowedFd<'_> {
        state.fd()
    }
    /// Advance the adapter's pending work on the calling thread.
    fn progress(state: &Self::Adapter) {
        state.progress();
    }
    /// A completion queue of `depth` entries whose requests `driver` completes, on an adapter
    /// whose `MaxCompletionQueueDepth` is `max_depth` (which `Resize` may not exceed:
    /// [`crate::kit::cq::CqCore::with_max_depth`]).
    fn create_completion_queue(
        depth: u32,
        max_depth: u32,
        driver: Arc<dyn Driver>,
    ) -> Arc<dyn CompletionQueue>;
    /// A queue pair; its statuses are those of `IND2Adapter::CreateQueuePair`, in parameter
    /// order: a completion queue or shared receive queue that is not one of this adapter's
    /// (`_2`, `_3`, `_4`), then [`crate::limits::queue_pair`], which the provider calls before
    /// it sizes anything.
    fn create_queue_pair(
        state: Arc<Self::Adapter>,
        config: &QueuePairConfig,
    ) -> Result<Arc<dyn QueuePair>>;
    /// A connector, idle.
    fn create_connector(state: Arc<Self::Adapter>) -> Arc<dyn Connector> {
        Self::kit_connector(state)
    }
    /// A listener, unbound.
    fn create_listener(state: Arc<Self::Adapter>) -> Arc<dyn Listener> {
        Self::kit_listener(state)
    }
}

/// A software provider's `IND2Adapter`: one per open, serving every local address. Every
/// object it creates holds the same `Arc` of its state.
pub struct Adapter<P: AdapterProvider> {
    state: Arc<P::Adapter>,
    /// The progress mode asked for, and the engine once it runs; released with the adapter.
    engine: Mutex<EngineSlot>,
    /// The descriptor was handed out (`fd`): the engine was stopped then, once.
    exported: AtomicBool,
}

/// An adapter's progress mode and its engine. In `ProgressMode::Thread` the engine starts with
/// the adapter's first connector or listener, the first object that can give it work: an
/// adapter opened to be queried, or for a test that drives it itself, never makes a thread.
#[derive(Default)]
struct EngineSlot {
    mode: ProgressMode,
    running: Option<ProgressThread>,
    /// A connector or listener was created.
    used: bool,
}

impl<P: AdapterProvider> fmt::Debug for Adapter<P>
where
    P::Adapter: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Adapter")
            .field("state", &self.state)
            .finish()
    }
}

impl<P: AdapterProvider> Adapter<P> {
    /// An adapter over `state`, in the progress mode `ND_PROGRESS` names (`thread` if unset).
    pub fn new(state: P::Adapter) -> Arc<Self> {
        let a = Arc::new(Self {
            state: Arc::new(state),
            engine: Mutex::new(EngineSlot::default()),
            exported: AtomicBool::new(false),
        });
        // A driver without an activity mark stays in manual mode.
        let _ = a.set_mode(ProgressMode::from_env_or(ProgressMode::default()));
        a
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, EngineSlot> {
        self.engine.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_mode(&self, mode: ProgressMode) -> Result<()> {
        let mut e = self.slot();
        match mode {
            ProgressMode::Manual => {
                e.mode = mode;
                e.running = None;
            }
            ProgressMode::Thread => {
                if self.state.driver().activity().is_none() {
                    return crate::fail(crate::Status::NOT_SUPPORTED);
                }
                e.mode = mode;
                if e.used {
                    return self.start_engine(&mut e);
                }
            }
        }
        Ok(())
    }

    /// Start the engine if the mode asks for one and none runs.
    fn start_engine(&self, e: &mut EngineSlot) -> Result<()> {
        if e.mode != ProgressMode::Thread || e.running.is_some() {
            return Ok(());
        }
        let driver = self.state.driver();
        let Some(activity) = driver.activity() else {
            return crate::fail(crate::Status::NOT_SUPPORTED);
        };
        match ProgressThread::start(&driver, activity) {
            Some(t) => e.running = Some(t),
            None => return crate::fail(crate::Status::INSUFFICIENT_RESOURCES),
        }
        Ok(())
    }

    /// A connector or listener is being made: the engine, if asked for, starts now. A thread
    /// that cannot be made leaves the adapter driven by its application alone.
    fn first_use(&self) {
        let mut e = self.slot();
        if !e.used {
            e.used = true;
            let _ = self.start_engine(&mut e);
        }
    }
}

impl<P: AdapterProvider> traits::Adapter for Adapter<P>
where
    P::Adapter: fmt::Debug,
{
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn query(&self) -> AdapterInfo {
        P::info(&self.state)
    }

    fn query_address_list(&self) -> Result<Vec<SocketAddr>> {
        local_addresses()
    }

    /// Exporting the descriptor makes the application's event loop the adapter's driver (it
    /// waits for the descriptor to say the I/O needs driving, then calls `progress`): the
    /// progress engine stops, since it would take those events first and leave the loop
    /// asleep over work that makes no completion (a message waiting for a Receive, a peer's
    /// Write landing). `set_progress_mode` can start it again. Only the first export stops
    /// it: a loop that asks for the descriptor at every wait takes no lock.
    fn fd(&self) -> BorrowedFd<'_> {
        if !self.exported.swap(true, Ordering::Relaxed) {
            let _ = self.set_mode(ProgressMode::Manual);
        }
        P::fd(&self.state)
    }

    fn progress(&self) {
        P::progress(&self.state);
    }

    fn set_progress_mode(&self, mode: ProgressMode) -> Result<()> {
        self.set_mode(mode)
    }

    fn progress_mode(&self) -> ProgressMode {
        self.slot().mode
    }

    // Group and affinity are hints a software provider has no use for.
    fn create_completion_queue(
        &self,
        depth: u32,
        _group: u16,
        _affinity: usize,
    ) -> Result<Arc<dyn CompletionQueue>> {
        let info = self.query();
        crate::limits::completion_queue(&info, depth)?;
        Ok(P::create_completion_queue(
            depth,
            info.max_completion_queue_depth,
            self.state.driver(),
        ))
    }

    fn create_memory_region(&self) -> Result<Arc<dyn MemoryRegion>> {
        Ok(Arc::new(Region::new(self.state.clone())))
    }

    fn create_memory_window(&self) -> Result<Arc<dyn MemoryWindow>> {
        Ok(Arc::new(Window::new(self.state.clone())))
    }

    fn create_shared_receive_queue(
        &self,
        depth: u32,
        max_request_sge: u32,
        notify_threshold: u32,
        _group: u16,
        _affinity: usize,
    ) -> Result<Arc<dyn SharedReceiveQueue>> {
        crate::limits::shared_receive_queue(&self.query(), depth, max_request_sge)?;
        Ok(Srq::<P>::new(
            self.state.clone(),
            depth,
            max_request_sge,
            notify_threshold,
        ))
    }

    fn create_queue_pair(&self, config: QueuePairConfig) -> Result<Arc<dyn QueuePair>> {
        // The provider recognises the queues (`_2` to `_4`) and then checks the limits
        // (`_5` on): only it knows its queues.
        P::create_queue_pair(self.state.clone(), &config)
    }

    fn create_connector(&self) -> Result<Arc<dyn Connector>> {
        self.first_use();
        Ok(P::create_connector(self.state.clone()))
    }

    fn create_listener(&self) -> Result<Arc<dyn Listener>> {
        self.first_use();
        Ok(P::create_listener(self.state.clone()))
    }
}
