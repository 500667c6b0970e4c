//! `IND2Adapter` for the `tcp` provider.

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
use crate::connector::TcpConnector;
use crate::cq::TcpCq;
use crate::engine::Engine;
use crate::listener::TcpListener;
use crate::mr::{TcpMr, TcpMw};
use crate::qp::TcpQp;
use crate::srq::TcpSrq;

/// The id of the provider's single adapter, which serves every local address.
pub const ADAPTER_ID: u64 = 0x7463_7000_0000_0001; // "tcp" in the top bytes

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
            .field("mrs", &self.mrs)
            .finish()
    }
}

/// The limits of the `tcp` provider. They are software limits, chosen so that every ND test
/// pattern fits (`nd-reference.md` §8.4) and every value is one the provider really honours.
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
        max_inbound_read_limit: 128,
        max_outbound_read_limit: 128,
        max_receive_queue_depth: 16384,
        max_initiator_queue_depth: 16384,
        // As deep as a queue pair's own receive queue (a software queue: any depth works).
        max_shared_receive_queue_depth: 16384,
        max_completion_queue_depth: 65536,
        inline_request_threshold: 256,
        large_request_threshold: 64 * 1024,
        // MPA v2 private data: 256 bytes in total for siw interop, 4 of them the IRD/ORD word.
        max_caller_data: 252,
        max_callee_data: 252,
        adapter_flags: AdapterFlags::IN_ORDER_DMA_SUPPORTED
            | AdapterFlags::CQ_RESIZE_SUPPORTED
            | AdapterFlags::LOOPBACK_CONNECTIONS_SUPPORTED,
    }
}

/// The adapter.
#[derive(Debug)]
pub(crate) struct TcpAdapter {
    pub(crate) shared: Arc<Shared>,
}

impl TcpAdapter {
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

impl traits::Adapter for TcpAdapter {
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
        Ok(TcpCq::new(depth, self.driver()))
    }

    fn create_memory_region(&self) -> Result<Arc<dyn traits::MemoryRegion>> {
        Ok(Arc::new(TcpMr::new(self.shared.clone())))
    }

    fn create_memory_window(&self) -> Result<Arc<dyn traits::MemoryWindow>> {
        Ok(Arc::new(TcpMw::new(self.shared.clone())))
    }

    fn create_shared_receive_queue(
        &self,
        depth: u32,
        max_request_sge: u32,
        notify_threshold: u32,
        _group: u16,
        _affinity: usize,
    ) -> Result<Arc<dyn traits::SharedReceiveQueue>> {
        Ok(TcpSrq::new(
            self.shared.clone(),
            depth,
            max_request_sge,
            notify_threshold,
        ))
    }

    fn create_queue_pair(&self, config: QueuePairConfig) -> Result<Arc<dyn traits::QueuePair>> {
        Ok(TcpQp::new(self.shared.clone(), &config)?)
    }

    fn create_connector(&self) -> Result<Arc<dyn traits::Connector>> {
        Ok(TcpConnector::new(self.shared.clone()))
    }

    fn create_listener(&self) -> Result<Arc<dyn traits::Listener>> {
        Ok(TcpListener::new(self.shared.clone()))
    }
}
