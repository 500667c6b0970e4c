//! `INDMemoryWindow`: a v2 window, with the caller's `ND_RESULT` for its invalidation.

use std::fmt;
use std::ptr;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;

use super::{Adapter, NdResult1};
use crate::Status;

/// A v1 memory window (`INDMemoryWindow`, the same IID as v2's). No methods of its own:
/// [`super::Endpoint::bind`] makes it valid and returns its descriptor,
/// [`super::Endpoint::invalidate`] (or the peer's
/// [`super::Endpoint::send_and_invalidate`]) ends that.
///
/// The `ND_RESULT` given to `CreateMemoryWindow` ([`MemoryWindow::invalidate_result`])
/// reports the **peer's** invalidation (`INDAdapter::CreateMemoryWindow` and `ND_RESULT` in
/// Microsoft's NDSPI v1 reference; nd-v1-ndk §1.3 and §1.4.8 item 11): each time the
/// peer's SendAndInvalidate invalidates the window, the provider writes `ND_SUCCESS` there,
/// with `BytesTransferred` 0 (undefined for an invalidation), while it takes that Send in,
/// so it is written once the Receive completion of that Send is reaped. v1's documents
/// name no queue for it, and none reports it: the `ND_RESULT` itself is the signal (set it
/// to `ND_PENDING` before each Bind to see the next one). A local [`super::Endpoint::invalidate`] reports through its own request's
/// `ND_RESULT` and leaves this one alone, as does the end of the connection.
#[derive(Clone)]
pub struct MemoryWindow {
    pub(crate) v2: crate::MemoryWindow,
    pub(crate) adapter: Adapter,
    /// Removes the provider's hook when the last clone goes.
    _hook: Arc<HookGuard>,
    invalidate_result: *mut NdResult1,
}

// SAFETY: the pointer is only written by the hook (`ResultPtr`, whose contract is
// `Adapter::create_memory_window`'s) and otherwise only handed back.
unsafe impl Send for MemoryWindow {}
// SAFETY: as above.
unsafe impl Sync for MemoryWindow {}

impl fmt::Debug for MemoryWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("v1::MemoryWindow").field(&self.v2).finish()
    }
}

/// Owned by every clone of a [`MemoryWindow`]: the last one removes the hook writing the
/// `ND_RESULT`, and the provider guarantees none runs once that returns
/// ([`netdirect_spi::traits::MemoryWindow::set_peer_invalidate_hook`]), so the caller's
/// memory is not written after the window is released even if the provider keeps the
/// object a while longer.
struct HookGuard(crate::MemoryWindow);

impl Drop for HookGuard {
    fn drop(&mut self) {
        self.0.as_spi().set_peer_invalidate_hook(None);
    }
}

/// The caller's `ND_RESULT` for the peer's invalidation, as the hook holds it.
#[derive(Clone, Copy)]
struct ResultPtr(*mut NdResult1);

// SAFETY: the contract of `Adapter::create_memory_window` makes the memory valid for writes
// from any thread while the window lives; the hook is removed before that ends (`HookGuard`).
unsafe impl Send for ResultPtr {}
// SAFETY: as above; only `write_invalidated` uses it, under the provider's hook lock.
unsafe impl Sync for ResultPtr {}

impl ResultPtr {
    /// The peer invalidated the window: `ND_SUCCESS`, 0 bytes (`ND_RESULT` in Microsoft's
    /// NDSPI v1 reference, nd-v1-ndk §1.3: the byte count is undefined for an invalidation).
    fn write_invalidated(self) {
        let p = self.0;
        // SAFETY: `p` is non-null (checked when the hook was made) and, by the contract of
        // `Adapter::create_memory_window`, valid for writes until the last clone of the window
        // is dropped, which removes this hook first (`HookGuard`; the provider waits for a run
        // in progress). Volatile: the application may poll the memory rather than reap the
        // Receive; the byte count goes first and `Status` last, after a release fence, so a
        // reader that sees the status also sees the count.
        unsafe {
            ptr::addr_of_mut!((*p).bytes_transferred).write_volatile(0);
            fence(Ordering::Release);
            ptr::addr_of_mut!((*p).status).write_volatile(Status::SUCCESS);
        }
    }
}

impl MemoryWindow {
    /// # Safety
    /// `r` is null or stays valid for writes of an [`NdResult1`] from any thread until the
    /// last clone of this window is dropped (`Adapter::create_memory_window`).
    pub(crate) unsafe fn new(v2: crate::MemoryWindow, adapter: Adapter, r: *mut NdResult1) -> Self {
        if !r.is_null() {
            let out = ResultPtr(r);
            v2.as_spi()
                .set_peer_invalidate_hook(Some(Arc::new(move || out.write_invalidated())));
        }
        Self {
            _hook: Arc::new(HookGuard(v2.clone())),
            v2,
            adapter,
            invalidate_result: r,
        }
    }

    /// The `ND_RESULT` given to `CreateMemoryWindow`.
    pub fn invalidate_result(&self) -> *mut NdResult1 {
        self.invalidate_result
    }

    /// The v2 window underneath (the v1 and v2 window IIDs are the same).
    pub fn as_v2(&self) -> &crate::MemoryWindow {
        &self.v2
    }
}
