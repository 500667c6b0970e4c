//! `IND2Adapter` for the `tcp` provider: the SPI kit's [`Adapter`] over this provider's
//! state, which plugs in its limits, engine, completion queue, queue pair, connector and
//! listener. Memory regions, windows and shared receive queues are the kit's own
//! ([`netdirect_spi::kit::mr::Region`], [`netdirect_spi::kit::mw::Window`],
//! [`netdirect_spi::kit::srq::Srq`]) over the same state.

use std::sync::Arc;

use netdirect_spi::kit::adapter::{self, Adapter, AdapterProvider};
use netdirect_spi::kit::overlapped::Driver;
use netdirect_spi::traits::{CompletionQueue, QueuePair, QueuePairConfig};
use netdirect_spi::{AdapterInfo, Error, Result, Status};

use crate::config::Config;
use crate::cq::TcpCq;
use crate::engine::Engine;
use crate::qp::TcpQp;
use crate::Tcp;

/// The id of the provider's single adapter, which serves every local address.
pub const ADAPTER_ID: u64 = 0x7463_7000_0000_0001; // "tcp" in the top bytes

/// What every object of one adapter shares: the SPI kit's, with this provider's engine and
/// configuration.
pub(crate) type Shared = adapter::Shared<Engine, Config>;

/// The limits of the `tcp` provider. They are software limits, chosen so that every ND test
/// pattern fits (`docs/ND-RULES.md` §8.4) and every value is one the provider really honours.
pub(crate) fn adapter_info() -> AdapterInfo {
    AdapterInfo {
        adapter_id: ADAPTER_ID,
        max_initiator_queue_depth: 16384,
        inline_request_threshold: 256,
        // MPA v2 private data: 256 bytes in total for siw interop, 4 of them the IRD/ORD word.
        max_caller_data: 252,
        max_callee_data: 252,
        ..adapter::software_limits()
    }
}

/// The adapter: the SPI kit's, over this provider's state.
pub(crate) type TcpAdapter = Adapter<Tcp>;

/// Open an adapter: its engine, an empty registration table, the limits above and the
/// configuration from the environment. ND_INSUFFICIENT_RESOURCES when the engine cannot start.
pub(crate) fn open() -> Result<Arc<TcpAdapter>> {
    let engine = Engine::new().map_err(|_| Error::new(Status::INSUFFICIENT_RESOURCES))?;
    Ok(Adapter::new(Shared::new(
        engine,
        adapter_info(),
        Config::from_env(),
    )))
}

impl AdapterProvider for Tcp {
    fn create_completion_queue(
        depth: u32,
        max_depth: u32,
        driver: Arc<dyn Driver>,
    ) -> Arc<dyn CompletionQueue> {
        TcpCq::new(depth, max_depth, driver)
    }

    fn create_queue_pair(
        state: Arc<Shared>,
        config: &QueuePairConfig,
    ) -> Result<Arc<dyn QueuePair>> {
        Ok(TcpQp::new(state, config)?)
    }
}
