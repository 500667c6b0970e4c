//! `INDMemoryWindow`: a v2 window, with the caller's `ND_RESULT` for its invalidation.

use std::fmt;

use super::{Adapter, NdResult1};

/// A v1 memory window (`INDMemoryWindow`, the same IID as v2's). No methods of its own:
/// [`super::Endpoint::bind`] makes it valid and returns its descriptor,
/// [`super::Endpoint::invalidate`] (or the peer's
/// [`super::Endpoint::send_and_invalidate`]) ends that.
///
/// The `ND_RESULT` given to `CreateMemoryWindow` is kept here
/// ([`MemoryWindow::invalidate_result`]); v1's documents do not say on which queue a peer's
/// invalidation would surface, and this front-end reports none there (the peer's
/// SendAndInvalidate takes effect, and the receiving endpoint's Receive completes).
#[derive(Clone)]
pub struct MemoryWindow {
    pub(crate) v2: crate::MemoryWindow,
    pub(crate) adapter: Adapter,
    invalidate_result: *mut NdResult1,
}

// SAFETY: the pointer is only stored and handed back, never dereferenced here.
unsafe impl Send for MemoryWindow {}
// SAFETY: as above.
unsafe impl Sync for MemoryWindow {}

impl fmt::Debug for MemoryWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("v1::MemoryWindow").field(&self.v2).finish()
    }
}

impl MemoryWindow {
    pub(crate) fn new(v2: crate::MemoryWindow, adapter: Adapter, r: *mut NdResult1) -> Self {
        Self {
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
