//! `IND2MemoryRegion` and `IND2MemoryWindow` for the `shm` provider.

use std::any::Any;
use std::sync::{Arc, Mutex};

use netdirect_spi::kit::mr::{RegionSlot, Registration};
use netdirect_spi::kit::overlapped::Overlapped;
use netdirect_spi::traits::{MemoryRegion, MemoryWindow};
use netdirect_spi::{MrFlags, Result};

use crate::adapter::Shared;

/// A memory region object: empty until `register`. The ND rules live in the kit's
/// [`RegionSlot`], shared with the other software providers.
#[derive(Debug)]
pub(crate) struct ShmMr {
    shared: Arc<Shared>,
    region: RegionSlot,
}

impl ShmMr {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            region: RegionSlot::new(),
        }
    }
}

impl MemoryRegion for ShmMr {
    fn as_any(&self) -> &dyn Any {
        self
    }

    unsafe fn register(
        &self,
        buffer: *mut u8,
        len: usize,
        flags: MrFlags,
        keepalive: Option<Arc<dyn Any + Send + Sync>>,
    ) -> Result<Overlapped> {
        let s = &self.shared;
        self.region.register(
            &s.mrs,
            s.engine.clone(),
            s.info.max_registration_size,
            buffer,
            len,
            flags,
            keepalive,
        )
    }

    fn deregister(&self) -> Result<Overlapped> {
        self.region
            .deregister(&self.shared.mrs, self.shared.engine.clone())
    }

    fn get_local_token(&self) -> u32 {
        self.region.local_token()
    }

    fn get_remote_token(&self) -> u32 {
        self.region.remote_token()
    }

    fn cancel_overlapped_requests(&self) -> Result<()> {
        // Register completes at once; a Deregister only waits for in-flight users of the
        // memory, which cancelling could not hurry.
        Ok(())
    }
}

impl Drop for ShmMr {
    fn drop(&mut self) {
        self.region.release(&self.shared.mrs);
    }
}

/// A memory window object (bound by the one-sided support).
#[derive(Debug, Default)]
pub(crate) struct ShmMw {
    pub(crate) reg: Mutex<Option<Arc<Registration>>>,
}

impl MemoryWindow for ShmMw {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn get_remote_token(&self) -> u32 {
        self.reg
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map_or(0, |r| r.token.to_be())
    }
}
