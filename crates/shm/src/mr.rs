//! `IND2MemoryRegion` and `IND2MemoryWindow` for the `shm` provider.

use std::any::Any;
use std::sync::{Arc, Mutex, Weak};

use netdirect_spi::kit::mr::{RegionSlot, Registration};
use netdirect_spi::kit::overlapped::Overlapped;
use netdirect_spi::traits::{MemoryRegion, MemoryWindow};
use netdirect_spi::{MrFlags, Result};

use crate::adapter::Shared;

/// A memory region object: empty until `register`. The ND rules live in the kit's
/// [`RegionSlot`], shared with the other software providers.
#[derive(Debug)]
pub(crate) struct ShmMr {
    pub(crate) shared: Arc<Shared>,
    pub(crate) region: RegionSlot,
}

impl ShmMr {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            region: RegionSlot::new(),
        }
    }

    /// Recognise one of ours among the SPI objects.
    pub(crate) fn downcast(mr: &Arc<dyn MemoryRegion>) -> Option<&Self> {
        mr.as_any().downcast_ref::<Self>()
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

/// A memory window object: invalid until `QueuePair::bind` binds it over a region; the
/// binding lives in its registration (kind `Window`, the parent region, the queue pair).
#[derive(Debug)]
pub(crate) struct ShmMw {
    pub(crate) shared: Arc<Shared>,
    /// The current (or last) binding and its token. Weak: the table and the queue pair the
    /// window is bound through hold it; once unbound (Invalidate, or the end of that
    /// connection) nothing keeps it or its region alive, so the region's Deregister can
    /// complete. A dead or revoked registration means "not bound".
    pub(crate) reg: Mutex<Option<(u32, Weak<Registration>)>>,
}

impl ShmMw {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            reg: Mutex::new(None),
        }
    }

    /// The registration of the window's live binding, if it is bound.
    pub(crate) fn bound(slot: &Option<(u32, Weak<Registration>)>) -> Option<Arc<Registration>> {
        slot.as_ref()
            .and_then(|(_, w)| w.upgrade())
            .filter(|r| r.is_valid())
    }

    /// Recognise one of ours among the SPI objects.
    pub(crate) fn downcast(mw: &Arc<dyn MemoryWindow>) -> Option<&Self> {
        mw.as_any().downcast_ref::<Self>()
    }
}

impl MemoryWindow for ShmMw {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn get_remote_token(&self) -> u32 {
        // Valid as soon as Bind returns (the binding is made inside the Bind call).
        self.reg
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map_or(0, |(token, _)| token.to_be())
    }
}
