//! `NDK_MR` and `NDK_MW`: registrations and their tokens.

use std::fmt;
use std::sync::Arc;

use super::adapter::Shared;
use super::callbacks::{self, CloseCompletion, Core, RequestCompletion};
use super::NtStatus;
use crate::{Buffer, MemoryRegion, MemoryWindow, MrFlags};

/// A memory region (`NDK_MR`). Cloning shares it.
#[derive(Clone)]
pub struct NdkMr {
    shared: Arc<Shared>,
    pub(crate) core: Arc<Core>,
    pub(crate) mr: MemoryRegion,
}

impl fmt::Debug for NdkMr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NdkMr").field("core", &self.core).finish()
    }
}

impl NdkMr {
    pub(crate) fn new(shared: Arc<Shared>, core: Arc<Core>, mr: MemoryRegion) -> Self {
        Self { shared, core, mr }
    }

    /// `NdkRegisterMr` over `len` bytes at `buffer` (the MDL's virtually contiguous range)
    /// with `NDK_MR_FLAG_*` (`flags`, the same values as ND's). Tokens are valid once it has
    /// completed. `STATUS_INVALID_PARAMETER` for a null buffer or a size beyond
    /// `MaxRegistrationSize`.
    ///
    /// # Safety
    /// As [`MemoryRegion::register`]: the memory stays allocated and is not accessed through
    /// Rust references while requests or the peer may write it, until the deregistration has
    /// completed.
    pub unsafe fn register_mr(
        &self,
        buffer: *mut u8,
        len: usize,
        flags: MrFlags,
        completion: impl FnOnce(NtStatus) + Send + 'static,
    ) -> NtStatus {
        // SAFETY: forwarded contract.
        let ov = unsafe { self.mr.register(buffer, len, flags) };
        let cb: RequestCompletion = Box::new(completion);
        callbacks::track(&self.core, self.shared.mode, ov, |s| s, cb)
    }

    /// `NdkRegisterMr` over all of `buf`, which the region keeps alive for as long as the
    /// provider may touch it (safe).
    pub fn register_buffer(
        &self,
        buf: &Buffer,
        flags: MrFlags,
        completion: impl FnOnce(NtStatus) + Send + 'static,
    ) -> NtStatus {
        let ov = self.mr.register_buffer(buf, flags);
        let cb: RequestCompletion = Box::new(completion);
        callbacks::track(&self.core, self.shared.mode, ov, |s| s, cb)
    }

    /// `NdkDeregisterMr`: the tokens stop working at once; completes when nothing in
    /// flight uses the memory. A window bound to it: `STATUS_DEVICE_BUSY` (ND's status).
    pub fn deregister_mr(&self, completion: impl FnOnce(NtStatus) + Send + 'static) -> NtStatus {
        let ov = self.mr.deregister();
        let cb: RequestCompletion = Box::new(completion);
        callbacks::track(&self.core, self.shared.mode, ov, |s| s, cb)
    }

    /// `NdkInitializeFastRegisterMr`: `STATUS_NOT_SUPPORTED` (no fast-register MRs).
    pub fn initialize_fast_register_mr(&self) -> NtStatus {
        NtStatus::NOT_SUPPORTED
    }

    /// `NdkGetLocalTokenFromMr`.
    pub fn get_local_token(&self) -> u32 {
        self.mr.get_local_token()
    }

    /// `NdkGetRemoteTokenFromMr`.
    pub fn get_remote_token(&self) -> u32 {
        self.mr.get_remote_token()
    }

    /// `NdkQueryExtensionInterface`: `STATUS_NOT_SUPPORTED`.
    pub fn query_extension_interface(&self) -> NtStatus {
        NtStatus::NOT_SUPPORTED
    }

    /// `NdkCloseMr`: a pending register or deregister is withdrawn (its callback still
    /// comes); `STATUS_PENDING` while a window bound through it is open.
    pub fn close(&self, completion: impl FnOnce() + Send + 'static) -> NtStatus {
        self.core.start_close();
        let _ = self.mr.cancel_overlapped_requests();
        let cb: CloseCompletion = Box::new(completion);
        self.core.finish_close(Box::new(|| {}), cb)
    }
}

/// A memory window (`NDK_MW`). Cloning shares it.
#[derive(Clone)]
pub struct NdkMw {
    pub(crate) core: Arc<Core>,
    pub(crate) mw: MemoryWindow,
}

impl fmt::Debug for NdkMw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NdkMw").field("core", &self.core).finish()
    }
}

impl NdkMw {
    pub(crate) fn new(core: Arc<Core>, mw: MemoryWindow) -> Self {
        Self { core, mw }
    }

    /// `NdkGetRemoteTokenFromMw`: valid once a bind has been posted.
    pub fn get_remote_token(&self) -> u32 {
        self.mw.get_remote_token()
    }

    /// `NdkQueryExtensionInterface`: `STATUS_NOT_SUPPORTED`.
    pub fn query_extension_interface(&self) -> NtStatus {
        NtStatus::NOT_SUPPORTED
    }

    /// `NdkCloseMw`.
    pub fn close(&self, completion: impl FnOnce() + Send + 'static) -> NtStatus {
        self.core.start_close();
        let cb: CloseCompletion = Box::new(completion);
        self.core.finish_close(Box::new(|| {}), cb)
    }
}
