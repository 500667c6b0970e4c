//! The `IND2MemoryRegion` object of a software provider (IND2MemoryRegion in Microsoft's NetworkDirect SPI reference): a
//! [`RegionSlot`] bound to its adapter.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use super::RegionSlot;
use crate::kit::adapter::AdapterState;
use crate::kit::overlapped::Overlapped;
use crate::traits::MemoryRegion;
use crate::{MrFlags, Result};

/// A memory region object: empty until `Register`. The ND rules live in its [`RegionSlot`].
pub struct Region<A: AdapterState> {
    adapter: Arc<A>,
    slot: RegionSlot,
}

impl<A: AdapterState> fmt::Debug for Region<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Region").field("slot", &self.slot).finish()
    }
}

impl<A: AdapterState> Region<A> {
    /// An empty region object of `adapter`.
    pub fn new(adapter: Arc<A>) -> Self {
        Self {
            adapter,
            slot: RegionSlot::new(),
        }
    }

    /// Recognise one of `adapter`'s regions among the SPI objects (`None` for another
    /// provider's or another adapter's).
    pub fn downcast_on<'a>(mr: &'a Arc<dyn MemoryRegion>, adapter: &Arc<A>) -> Option<&'a Self> {
        mr.as_any()
            .downcast_ref::<Self>()
            .filter(|m| Arc::ptr_eq(&m.adapter, adapter))
    }

    /// The region's state. `QueuePair::bind` holds [`RegionSlot::lock`] while it binds a
    /// window over the region (see [`crate::kit::mw`]).
    pub fn slot(&self) -> &RegionSlot {
        &self.slot
    }
}

impl<A: AdapterState> MemoryRegion for Region<A> {
    fn as_any(&self) -> &dyn Any {
        self
    }

    /// `Register`: see [`RegionSlot::register`].
    unsafe fn register(
        &self,
        buffer: *mut u8,
        len: usize,
        flags: MrFlags,
        keepalive: Option<Arc<dyn Any + Send + Sync>>,
    ) -> Result<Overlapped> {
        let a = &self.adapter;
        self.slot.register(
            a.registrations(),
            a.driver(),
            a.max_registration_size(),
            buffer,
            len,
            flags,
            keepalive,
        )
    }

    /// `Deregister`: see [`RegionSlot::deregister`].
    fn deregister(&self) -> Result<Overlapped> {
        self.slot
            .deregister(self.adapter.registrations(), self.adapter.driver())
    }

    fn get_local_token(&self) -> u32 {
        self.slot.local_token()
    }

    fn get_remote_token(&self) -> u32 {
        self.slot.remote_token()
    }

    fn cancel_overlapped_requests(&self) -> Result<()> {
        // Register completes at once. A pending Deregister has already taken effect (the token
        // is dead) and only waits for in-flight users of the memory, which cancelling could not
        // hurry: it is left to complete (R-CANCEL-1 covers notification requests).
        Ok(())
    }
}

impl<A: AdapterState> Drop for Region<A> {
    fn drop(&mut self) {
        self.slot.release(self.adapter.registrations());
    }
}
