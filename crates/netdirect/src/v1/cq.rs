//! `INDCompletionQueue`: v2 completions handed back as the caller's own `ND_RESULT`s.

use std::fmt;

use super::{Adapter, NdResult1};
use crate::{Error, NdResult, NotifyType, Overlapped, Result, Status};

/// A v1 completion queue (`INDCompletionQueue`). Clones share it.
///
/// Every v1 post names an [`NdResult1`] of the caller's; when the request completes,
/// [`CompletionQueue::get_results`] writes its status and byte count there and returns that
/// pointer (v1 has no request context: the pointer is the identity).
#[derive(Clone)]
pub struct CompletionQueue {
    pub(crate) v2: crate::CompletionQueue,
    pub(crate) adapter: Adapter,
}

impl fmt::Debug for CompletionQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("v1::CompletionQueue")
            .field(&self.v2)
            .finish()
    }
}

/// Results moved per turn of `get_results` (a stack buffer).
const BATCH: usize = 16;

/// Write a v2 completion into the `ND_RESULT` its request was posted with; that pointer.
#[inline]
fn deliver(r: &NdResult) -> *mut NdResult1 {
    let p = r.request_context as usize as *mut NdResult1;
    // SAFETY: every request reaching a v1 queue was posted by a v1 endpoint with a non-null
    // `ND_RESULT` the poster keeps valid and untouched until it is returned by
    // `get_results` (the posts' contracts); only `get_results` writes it.
    unsafe {
        (*p).status = r.status;
        (*p).bytes_transferred = r.bytes_transferred as usize;
    }
    p
}

impl CompletionQueue {
    pub(crate) fn new(v2: crate::CompletionQueue, adapter: Adapter) -> Self {
        Self { v2, adapter }
    }

    /// `GetResults`: for up to `results.len()` completed requests, fill in the
    /// [`NdResult1`] the request was posted with (`status`, `bytes_transferred`) and store
    /// its pointer in `results`; returns how many (0: none completed). Polling also drives
    /// the provider's I/O.
    ///
    /// Writing the results is what the posts' `# Safety` contracts allow: each pointer names
    /// memory the caller keeps for the request until it is returned here.
    #[inline]
    pub fn get_results(&self, results: &mut [*mut NdResult1]) -> usize {
        if let [one] = results {
            // The polling loop's case: one result, no batch buffer to fill.
            let mut r = [NdResult::EMPTY];
            if self.v2.get_results(&mut r) == 0 {
                return 0;
            }
            *one = deliver(&r[0]);
            return 1;
        }
        let mut done = 0;
        let mut batch = [NdResult::EMPTY; BATCH];
        while done < results.len() {
            let want = (results.len() - done).min(BATCH);
            let n = self.v2.get_results(&mut batch[..want]);
            for (r, out) in batch[..n].iter().zip(&mut results[done..]) {
                *out = deliver(r);
            }
            done += n;
            if n < want {
                break;
            }
        }
        done
    }

    /// `Notify`: `ND_CQ_NOTIFY_ERRORS` (0), `ND_CQ_NOTIFY_ANY` (1) or `ND_CQ_NOTIFY_SOLICITED`
    /// (2), else `ND_INVALID_PARAMETER_1`. Completes on the next qualifying completion (at
    /// once if one arrived since the last short `get_results`); `ND_BUFFER_OVERFLOW` after
    /// an overrun; `ND_CANCELED` when cancelled.
    pub fn notify(&self, ty: u32) -> Result<Overlapped> {
        let ty = NotifyType::from_raw(ty).ok_or(Error::invalid_parameter(1))?;
        self.v2.notify(ty)
    }

    /// `Resize` to `n_entries`: `ND_INVALID_PARAMETER` for 0 or beyond `MaxCqEntries`,
    /// `ND_BUFFER_OVERFLOW` below the results queued now.
    pub fn resize(&self, n_entries: usize) -> Result<()> {
        let depth = u32::try_from(n_entries).map_err(|_| Error::new(Status::INVALID_PARAMETER))?;
        self.v2.resize(depth)
    }

    /// `CancelOverlappedRequests`: pending Notifies complete `ND_CANCELED`.
    pub fn cancel_overlapped_requests(&self) -> Result<()> {
        self.v2.cancel_overlapped_requests()
    }

    /// `GetOverlappedResult`, with v1's byte count (0).
    pub fn get_overlapped_result(&self, ov: &Overlapped, wait: bool) -> Result<usize> {
        ov.get_overlapped_result(wait).map(|()| 0)
    }

    /// The v2 completion queue underneath (its `Notify` is v1's; reaping through it takes
    /// results from the v1 queue without writing their `ND_RESULT`s).
    ///
    /// # Safety
    /// No queue pair may be created on it: [`CompletionQueue::get_results`] takes every
    /// request context it finds for an `ND_RESULT` pointer and writes through it.
    pub unsafe fn as_v2(&self) -> &crate::CompletionQueue {
        &self.v2
    }

    /// The adapter that made it.
    pub fn adapter(&self) -> &Adapter {
        &self.adapter
    }
}
