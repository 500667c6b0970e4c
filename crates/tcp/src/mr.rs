//! `IND2MemoryRegion` and `IND2MemoryWindow` for the `tcp` provider.

use std::any::Any;
use std::sync::{Arc, Mutex, Weak};

use netdirect_spi::kit::mr::{Kind, NewRegistration, Registration};
use netdirect_spi::kit::overlapped::Overlapped;
use netdirect_spi::traits::{MemoryRegion, MemoryWindow};
use netdirect_spi::{fail, MrFlags, Result, Status};

use crate::adapter::Shared;

/// A memory region object: empty until `register`.
#[derive(Debug)]
pub(crate) struct TcpMr {
    pub(crate) shared: Arc<Shared>,
    /// The live registration. `QueuePair::bind` holds this lock while it binds a window over
    /// the region, so a concurrent Deregister sees the window (`ND_DEVICE_BUSY`) or wins.
    pub(crate) reg: Mutex<Option<Arc<Registration>>>,
}

impl TcpMr {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            reg: Mutex::new(None),
        }
    }

    /// Recognise one of ours among the SPI objects.
    pub(crate) fn downcast(mr: &Arc<dyn MemoryRegion>) -> Option<&Self> {
        mr.as_any().downcast_ref::<Self>()
    }
}

impl MemoryRegion for TcpMr {
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
        // nd-reference.md D7: null first, then zero length, then the size limit.
        if buffer.is_null() {
            return fail(Status::INVALID_PARAMETER);
        }
        if len == 0 {
            return fail(Status::INVALID_BUFFER_SIZE);
        }
        if len > self.shared.info.max_registration_size {
            return fail(Status::INVALID_PARAMETER);
        }
        if (buffer as usize).checked_add(len).is_none() {
            return fail(Status::ACCESS_VIOLATION);
        }
        let known = MrFlags::all();
        if !known.contains(flags) {
            return fail(Status::INVALID_PARAMETER);
        }
        let mut slot = self.reg.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_some() {
            // One buffer per MR object at a time.
            return fail(Status::INVALID_DEVICE_STATE);
        }
        let reg = self.shared.mrs.insert(NewRegistration {
            base: buffer as usize,
            len,
            flags,
            kind: Kind::Region,
            parent: None,
            keepalive,
        });
        *slot = Some(reg);
        Ok(Overlapped::completed(
            self.shared.engine.clone(),
            Status::SUCCESS,
        ))
    }

    fn deregister(&self) -> Result<Overlapped> {
        let mut slot = self.reg.lock().unwrap_or_else(|e| e.into_inner());
        let Some(reg) = slot.as_ref() else {
            return fail(Status::INVALID_DEVICE_STATE);
        };
        // R-MR-2: synchronously busy while a window is bound over the region.
        if reg.bound_windows.load(std::sync::atomic::Ordering::Acquire) > 0 {
            return fail(Status::DEVICE_BUSY);
        }
        let reg = slot.take().expect("checked above");
        // From here no new request or remote access can reach the memory (the token is dead);
        // the Deregister completes once the last in-flight user (a queued Read Response, a
        // segment being placed, a posted request) lets go of it: ND_PENDING until then
        // (IND2MemoryRegion::Deregister), usually at once.
        self.shared.mrs.remove(reg.token);
        let (ov, c) = Overlapped::pending(self.shared.engine.clone());
        reg.complete_on_release(c);
        drop(reg);
        Ok(ov)
    }

    fn get_local_token(&self) -> u32 {
        self.reg
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map_or(0, |r| r.token)
    }

    fn get_remote_token(&self) -> u32 {
        // Network byte order in memory, so the wire STag bytes are the token's bytes.
        self.get_local_token().to_be()
    }

    fn cancel_overlapped_requests(&self) -> Result<()> {
        // Register completes at once. A pending Deregister has already taken effect (the token
        // is dead) and only waits for in-flight users of the memory, which cancelling could not
        // hurry: it is left to complete (R-CANCEL-1 covers notification requests).
        Ok(())
    }
}

impl Drop for TcpMr {
    fn drop(&mut self) {
        // Releasing a registered region deregisters it (the pages are not pinned on Linux).
        if let Some(reg) = self.reg.get_mut().unwrap_or_else(|e| e.into_inner()).take() {
            self.shared.mrs.remove(reg.token);
        }
    }
}

/// A memory window object: invalid until `QueuePair::bind` binds it over a region; the
/// binding lives in its registration (kind `Window`, the parent region, the queue pair).
#[derive(Debug)]
pub(crate) struct TcpMw {
    pub(crate) shared: Arc<Shared>,
    /// The current (or last) binding, and its token. Weak: the table and the queue pair the
    /// window is bound through hold it; once it is unbound (Invalidate, or the end of that
    /// connection) nothing keeps it, or its region, alive — the region's Deregister can
    /// complete. A dead or revoked registration means "not bound".
    pub(crate) reg: Mutex<Option<(u32, Weak<Registration>)>>,
}

impl TcpMw {
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

impl MemoryWindow for TcpMw {
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
