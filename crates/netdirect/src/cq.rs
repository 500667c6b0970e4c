//! `IND2CompletionQueue` and `IND2SharedReceiveQueue`.

use std::fmt;
use std::sync::{Arc, Weak};

use netdirect_spi::traits;

use crate::{NdResult, NotifyType, Overlapped, Result, Sge};

/// A completion queue (`IND2CompletionQueue`).
#[derive(Clone)]
pub struct CompletionQueue {
    inner: Arc<dyn traits::CompletionQueue>,
    /// The adapter that made it (`Adapter::create_queue_pair` refuses another's).
    pub(crate) adapter: Weak<dyn traits::Adapter>,
    /// The adapter's `MaxCompletionQueueDepth`, which `resize` may not exceed.
    max_depth: u32,
    /// The adapter has `ND_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED`.
    resizable: bool,
}

impl fmt::Debug for CompletionQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.inner, f)
    }
}

impl CompletionQueue {
    pub(crate) fn from_spi(
        inner: Arc<dyn traits::CompletionQueue>,
        adapter: &Arc<dyn traits::Adapter>,
        info: &crate::AdapterInfo,
    ) -> Self {
        Self {
            inner,
            adapter: Arc::downgrade(adapter),
            max_depth: info.max_completion_queue_depth,
            resizable: info
                .adapter_flags
                .contains(crate::AdapterFlags::CQ_RESIZE_SUPPORTED),
        }
    }

    /// The SPI object.
    pub fn as_spi(&self) -> &Arc<dyn traits::CompletionQueue> {
        &self.inner
    }

    /// `GetResults`: move up to `results.len()` completions into `results`; returns how many.
    ///
    /// Call it until it returns fewer than asked. Within one queue pair, initiator requests
    /// complete in issue order and Receives in issue order. With a software provider this call
    /// also drives the I/O of the queue pairs that complete here, so polling it is all a
    /// busy-polling application needs to do.
    pub fn get_results(&self, results: &mut [NdResult]) -> usize {
        self.inner.get_results(results)
    }

    /// `Notify`: arm the queue; the request completes on the next qualifying completion
    /// (immediately if one arrived after the last `get_results` that returned short).
    /// `ND_BUFFER_OVERFLOW` reports an overrun: the CQ and its queue pairs are unusable.
    pub fn notify(&self, ty: NotifyType) -> Result<Overlapped> {
        self.inner.notify(ty)
    }

    /// `Resize`: `ND_BUFFER_OVERFLOW` (queue unchanged) if `depth` is below the queued count;
    /// `ND_INVALID_PARAMETER` for 0 or more than the adapter's `MaxCompletionQueueDepth`;
    /// `ND_NOT_SUPPORTED` on an adapter without `ND_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED`.
    pub fn resize(&self, depth: u32) -> Result<()> {
        if !self.resizable {
            return Err(crate::Error::new(crate::Status::NOT_SUPPORTED));
        }
        if depth == 0 || depth > self.max_depth {
            return Err(crate::Error::new(crate::Status::INVALID_PARAMETER));
        }
        self.inner.resize(depth)
    }

    /// `GetNotifyAffinity`: `(group, affinity mask)`.
    pub fn get_notify_affinity(&self) -> Result<(u16, usize)> {
        self.inner.get_notify_affinity()
    }

    /// `CancelOverlappedRequests`: every pending Notify completes with `ND_CANCELED`, in order,
    /// before this returns.
    pub fn cancel_overlapped_requests(&self) -> Result<()> {
        self.inner.cancel_overlapped_requests()
    }

    /// Wait for at least one completion without blocking a thread: `get_results`, and when it
    /// comes back empty, arm `Notify(ANY)` and await it (the race rule of `Notify` guarantees a
    /// completion that slipped in between is not missed). Runtime-agnostic; something must drive
    /// the adapter meanwhile (a reactor watching `Adapter::fd`, see `examples/tokio_echo.rs`).
    pub async fn next_results(&self, results: &mut [NdResult]) -> Result<usize> {
        loop {
            let n = self.get_results(results);
            if n > 0 || results.is_empty() {
                return Ok(n);
            }
            // Dropping this future (a timeout, a `select!`) withdraws its Notify: an armed
            // request nobody awaits would pile up.
            self.notify(NotifyType::Any)?.cancel_on_drop().await?;
        }
    }

    /// `GetOverlappedResult` of a request of this CQ (the same as `ov.get_overlapped_result`).
    pub fn get_overlapped_result(&self, ov: &Overlapped, wait: bool) -> Result<()> {
        ov.get_overlapped_result(wait)
    }
}

/// A shared receive queue (`IND2SharedReceiveQueue`).
#[derive(Clone)]
pub struct SharedReceiveQueue {
    inner: Arc<dyn traits::SharedReceiveQueue>,
    /// The adapter that made it (`Adapter::create_queue_pair_with_srq` refuses another's).
    pub(crate) adapter: Weak<dyn traits::Adapter>,
    /// The adapter's `MaxSharedReceiveQueueDepth`, which `modify` may not exceed.
    max_depth: u32,
}

impl fmt::Debug for SharedReceiveQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.inner, f)
    }
}

impl SharedReceiveQueue {
    pub(crate) fn from_spi(
        inner: Arc<dyn traits::SharedReceiveQueue>,
        adapter: &Arc<dyn traits::Adapter>,
        max_depth: u32,
    ) -> Self {
        Self {
            inner,
            adapter: Arc::downgrade(adapter),
            max_depth,
        }
    }

    /// The SPI object.
    pub fn as_spi(&self) -> &Arc<dyn traits::SharedReceiveQueue> {
        &self.inner
    }

    /// `Receive`. Synchronous errors (nothing is queued): `ND_NO_MORE_ENTRIES` (queue full),
    /// `ND_DATA_OVERRUN` (too many SGEs), `ND_BUFFER_OVERFLOW` (more than `MaxTransferLength`
    /// bytes), `ND_ACCESS_VIOLATION` (an SGE outside a registration with local write).
    ///
    /// # Safety
    /// The memory the SGEs name (inside registered regions) must not be read or written by the
    /// application until the Receive completes: the provider writes it at any time before.
    pub unsafe fn receive(&self, context: u64, sge: &[Sge]) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.inner.receive(context, sge) }
    }

    /// `Modify` (0 leaves a value unchanged): `ND_BUFFER_OVERFLOW` (nothing changed) if
    /// `depth` is below the number posted; `ND_INVALID_PARAMETER` above the adapter's
    /// `MaxSharedReceiveQueueDepth`.
    pub fn modify(&self, depth: u32, notify_threshold: u32) -> Result<()> {
        if depth > self.max_depth {
            return Err(crate::Error::new(crate::Status::INVALID_PARAMETER));
        }
        self.inner.modify(depth, notify_threshold)
    }

    /// `Notify`: completes when fewer than the threshold receives remain posted.
    pub fn notify(&self) -> Result<Overlapped> {
        self.inner.notify()
    }

    /// `GetNotifyAffinity`.
    pub fn get_notify_affinity(&self) -> Result<(u16, usize)> {
        self.inner.get_notify_affinity()
    }

    /// `CancelOverlappedRequests`.
    pub fn cancel_overlapped_requests(&self) -> Result<()> {
        self.inner.cancel_overlapped_requests()
    }

    /// `GetOverlappedResult`.
    pub fn get_overlapped_result(&self, ov: &Overlapped, wait: bool) -> Result<()> {
        ov.get_overlapped_result(wait)
    }
}
