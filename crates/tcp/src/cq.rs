//! `IND2CompletionQueue` for the `tcp` provider: the shared software CQ of the SPI kit.

use std::any::Any;
use std::sync::{Arc, Weak};

use netdirect_spi::kit::affinity::notify_affinity;
use netdirect_spi::kit::cq::CqCore;

use crate::adapter::Shared;
use netdirect_spi::kit::overlapped::{Driver, Overlapped};
use netdirect_spi::traits::CompletionQueue;
use netdirect_spi::{NdResult, NotifyType, Result};

/// A completion queue.
#[derive(Debug)]
pub(crate) struct TcpCq {
    me: Weak<Self>,
    pub(crate) core: CqCore,
}

impl TcpCq {
    pub(crate) fn new(depth: u32, max_depth: u32, driver: Arc<dyn Driver>) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            core: CqCore::new(depth, driver).with_max_depth(max_depth),
        })
    }

    /// Recognise one of `adapter`'s completion queues among the SPI objects (`None` for
    /// another provider's or another adapter's).
    pub(crate) fn downcast_on(
        cq: &Arc<dyn CompletionQueue>,
        adapter: &Shared,
    ) -> Option<Arc<Self>> {
        cq.as_any()
            .downcast_ref::<Self>()
            .filter(|c| c.core.belongs_to(&adapter.engine))
            .and_then(|c| c.me.upgrade())
    }
}

impl CompletionQueue for TcpCq {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn get_results(&self, out: &mut [NdResult]) -> usize {
        self.core.get_results(out)
    }

    fn notify(&self, ty: NotifyType) -> Result<Overlapped> {
        Ok(self.core.notify(ty))
    }

    fn resize(&self, depth: u32) -> Result<()> {
        self.core.resize(depth)
    }

    fn get_notify_affinity(&self) -> Result<(u16, usize)> {
        Ok(notify_affinity())
    }

    fn cancel_overlapped_requests(&self) -> Result<()> {
        self.core.cancel_overlapped_requests();
        Ok(())
    }
}
