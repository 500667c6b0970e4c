//! `IND2Adapter` for the `shm` provider: the SPI kit's [`Adapter`] over this provider's
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
use crate::cq::ShmCq;
use crate::engine::Engine;
use crate::qp::ShmQp;
use crate::Shm;

/// The id of the provider's single adapter, which serves every local address.
pub const ADAPTER_ID: u64 = 0x7368_6d00_0000_0001; // "shm" in the top bytes

/// Private data in Connect, Accept and Reject: the same limit as `tcp`, so an application
/// switches providers without changing its messages.
pub(crate) const MAX_PRIVATE_DATA: u32 = 252;

/// What every object of one adapter shares: the SPI kit's, with this provider's engine and
/// configuration.
pub(crate) type Shared = adapter::Shared<Engine, Config>;

/// The limits of the `shm` provider: the same software limits as `tcp` wherever the provider
/// honours them, so that applications see one set of numbers; what it does not do yet says so.
pub(crate) fn adapter_info() -> AdapterInfo {
    AdapterInfo {
        adapter_id: ADAPTER_ID,
        // Read limits are negotiated and reported exactly as tcp does; the target refuses a
        // Read beyond its IRD, the initiator holds one beyond its ORD (RFC 5040 §5.4).
        max_inbound_read_limit: 128,
        max_outbound_read_limit: 128,
        max_initiator_queue_depth: crate::qp::MAX_ANSWERS_OWED as u32,
        // A message of at most 48 bytes travels inside its ring cell.
        inline_request_threshold: crate::ring::INLINE_MAX as u32,
        max_caller_data: MAX_PRIVATE_DATA,
        max_callee_data: MAX_PRIVATE_DATA,
        ..adapter::software_limits()
    }
}

/// The adapter: the SPI kit's, over this provider's state.
pub(crate) type ShmAdapter = Adapter<Shm>;

/// Open an adapter: its engine, an empty registration table, the limits above and the
/// configuration from the environment. ND_INSUFFICIENT_RESOURCES when the engine cannot start.
pub(crate) fn open() -> Result<Arc<ShmAdapter>> {
    let engine = Engine::new().map_err(|_| Error::new(Status::INSUFFICIENT_RESOURCES))?;
    let shared = Shared::new(engine, adapter_info(), Config::from_env());
    // A small Send is copied out of memory the queue pair's cache vouches for without a
    // reference (`ShmQp::cached_readable`), under the queue pair's lock: a Deregister waits
    // for such copies by taking each connected queue pair's lock once.
    let e = shared.engine.clone();
    shared.mrs.set_copy_barrier(move || e.fence_queue_pairs());
    Ok(Adapter::new(shared))
}

impl AdapterProvider for Shm {
    fn create_completion_queue(
        depth: u32,
        max_depth: u32,
        driver: Arc<dyn Driver>,
    ) -> Arc<dyn CompletionQueue> {
        ShmCq::new(depth, max_depth, driver)
    }

    fn create_queue_pair(
        state: Arc<Shared>,
        config: &QueuePairConfig,
    ) -> Result<Arc<dyn QueuePair>> {
        Ok(ShmQp::new(state, config)?)
    }
}
