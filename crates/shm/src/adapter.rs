//! `IND2Adapter` for the `shm` provider.

use std::any::Any;
use std::fmt;
use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::sync::Arc;

use netdirect_spi::kit::mr;
use netdirect_spi::kit::overlapped::Driver;
use netdirect_spi::traits::{self, QueuePairConfig};
use netdirect_spi::{AdapterFlags, AdapterInfo, Error, Result, Status, ND_VERSION_2};

use crate::config::Config;
use crate::connector::ShmConnector;
use crate::cq::ShmCq;
use crate::engine::Engine;
use crate::listener::ShmListener;
use crate::mr::{ShmMr, ShmMw};
use crate::qp::ShmQp;
use crate::srq::ShmSrq;

/// The id of the provider's single adapter, which serves every local address.
pub const ADAPTER_ID: u64 = 0x7368_6d00_0000_0001; // "shm" in the top bytes

/// Private data in Connect, Accept and Reject: the same limit as `tcp`, so an application
/// switches providers without changing its messages.
pub(crate) const MAX_PRIVATE_DATA: u32 = 252;

/// What every object of one adapter shares.
pub(crate) struct Shared {
    pub(crate) engine: Arc<Engine>,
    pub(crate) mrs: mr::Table,
    pub(crate) info: AdapterInfo,
    pub(crate) config: Config,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("engine", &self.engine)
            .field("config", &self.config)
            .finish()
    }
}

/// The limits of the `shm` provider: the same software limits as `tcp` wherever the provider
/// honours them, so that applications see one set of numbers; what it does not do yet says so.
pub(crate) fn adapter_info() -> AdapterInfo {
    AdapterInfo {
        info_version: ND_VERSION_2,
        vendor_id: 0,
        device_id: 0,
        adapter_id: ADAPTER_ID,
        max_registration_size: 1 << 40,
        max_window_size: 1 << 40,
        max_initiator_sge: 32,
        max_receive_sge: 32,
        max_read_sge: 32,
        max_transfer_length: 1 << 30,
        max_inline_data_size: 1024,
        // Read limits are negotiated and reported exactly as tcp does; the target refuses a
        // Read beyond its IRD, the initiator holds one beyond its ORD (RFC 5040 §5.4).
        max_inbound_read_limit: 128,
        max_outbound_read_limit: 128,
        max_receive_queue_depth: 16384,
        max_initiator_queue_depth: 16384,
        // As deep as a queue pair's own receive queue (a software queue), as tcp.
        max_shared_receive_queue_depth: 16384,
        max_completion_queue_depth: 65536,
        // A message of at most 48 bytes travels inside its ring cell.
        inline_request_threshold: crate::ring::INLINE_MAX as u32,
        large_request_threshold: 64 * 1024,
        max_caller_data: MAX_PRIVATE_DATA,
        max_callee_data: MAX_PRIVATE_DATA,
        adapter_flags: AdapterFlags::IN_ORDER_DMA_SUPPORTED
            | AdapterFlags::CQ_RESIZE_SUPPORTED
            | AdapterFlags::LOOPBACK_CONNECTIONS_SUPPORTED,
    }
}

/// The adapter.
#[derive(Debug)]
pub(crate) struct ShmAdapter {
    pub(crate) shared: Arc<Shared>,
}

impl ShmAdapter {
    pub(crate) fn open() -> Result<Arc<Self>> {
        let engine = Engine::new().map_err(|_| Error::new(Status::INSUFFICIENT_RESOURCES))?;
        Ok(Arc::new(Self {
            shared: Arc::new(Shared {
                engine,
                mrs: mr::Table::new(),
                info: adapter_info(),
                config: Config::from_env(),
            }),
        }))
    }

    fn driver(&self) -> Arc<dyn Driver> {
        self.shared.engine.clone()
    }
}

impl traits::Adapter for ShmAdapter {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn query(&self) -> AdapterInfo {
        self.shared.info
    }

    fn query_address_list(&self) -> Result<Vec<SocketAddr>> {
        crate::local_addresses()
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.shared.engine.fd()
    }

    fn progress(&self) {
        self.shared.engine.progress();
    }

    fn create_completion_queue(
        &self,
        depth: u32,
        _group: u16,
        _affinity: usize,
    ) -> Result<Arc<dyn traits::CompletionQueue>> {
        Ok(ShmCq::new(depth, self.driver()))
    }

    fn create_memory_region(&self) -> Result<Arc<dyn traits::MemoryRegion>> {
        Ok(Arc::new(ShmMr::new(self.shared.clone())))
    }

    fn create_memory_window(&self) -> Result<Arc<dyn traits::MemoryWindow>> {
        Ok(Arc::new(ShmMw::new(self.shared.clone())))
    }

    fn create_shared_receive_queue(
        &self,
        depth: u32,
        max_request_sge: u32,
        notify_threshold: u32,
        _group: u16,
        _affinity: usize,
    ) -> Result<Arc<dyn traits::SharedReceiveQueue>> {
        Ok(ShmSrq::new(
            self.shared.clone(),
            depth,
            max_request_sge,
            notify_threshold,
        ))
    }

    fn create_queue_pair(&self, config: QueuePairConfig) -> Result<Arc<dyn traits::QueuePair>> {
        Ok(ShmQp::new(self.shared.clone(), &config)?)
    }

    fn create_connector(&self) -> Result<Arc<dyn traits::Connector>> {
        Ok(ShmConnector::new(self.shared.clone()))
    }

    fn create_listener(&self) -> Result<Arc<dyn traits::Listener>> {
        Ok(ShmListener::new(self.shared.clone()))
    }
}
