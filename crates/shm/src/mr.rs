//! `IND2MemoryRegion` and `IND2MemoryWindow` for the `shm` provider.

use std::any::Any;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use netdirect_spi::kit::mr::{Kind, NewRegistration, Registration};
use netdirect_spi::kit::overlapped::Overlapped;
use netdirect_spi::traits::{MemoryRegion, MemoryWindow};
use netdirect_spi::{fail, MrFlags, Result, Status};

use crate::adapter::Shared;

/// A memory region object: empty until `register`.
#[derive(Debug)]
pub(crate) struct ShmMr {
    shared: Arc<Shared>,
    reg: Mutex<Option<Arc<Registration>>>,
    /// The current token (0 when unregistered), readable without the lock: applications ask
    /// for it on every post.
    token: AtomicU32,
}

impl ShmMr {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            reg: Mutex::new(None),
            token: AtomicU32::new(0),
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
        self.token.store(reg.token, Ordering::Release);
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
        if reg.bound_windows.load(Ordering::Acquire) > 0 {
            return fail(Status::DEVICE_BUSY);
        }
        self.shared.mrs.remove(reg.token);
        self.token.store(0, Ordering::Release);
        *slot = None;
        Ok(Overlapped::completed(
            self.shared.engine.clone(),
            Status::SUCCESS,
        ))
    }

    fn get_local_token(&self) -> u32 {
        self.token.load(Ordering::Acquire)
    }

    fn get_remote_token(&self) -> u32 {
        // Network byte order in memory, so the wire STag bytes are the token's bytes.
        self.get_local_token().to_be()
    }

    fn cancel_overlapped_requests(&self) -> Result<()> {
        // Register and Deregister complete at once; nothing is ever pending.
        Ok(())
    }
}

impl Drop for ShmMr {
    fn drop(&mut self) {
        // Releasing a registered region deregisters it (the pages are not pinned on Linux).
        if let Some(reg) = self.reg.get_mut().unwrap_or_else(|e| e.into_inner()).take() {
            self.shared.mrs.remove(reg.token);
        }
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
