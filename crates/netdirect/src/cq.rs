//! `IND2CompletionQueue` and `IND2SharedReceiveQueue`.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use netdirect_spi::traits;

use crate::{Error, NdResult, NotifyType, Overlapped, Result, Sge, Status};

/// A completion queue (`IND2CompletionQueue`).
///
/// Every queue pair reports its completions to a CQ given at creation (one for Receives, one
/// for initiator requests, often the same). [`CompletionQueue::get_results`] takes them;
/// [`CompletionQueue::wait_for_context`] waits for one request's completion and keeps the others
/// for the next `get_results`; [`CompletionQueue::notify`] and
/// [`CompletionQueue::next_results`] wait without polling. Clones share the queue.
///
/// ```
/// use netdirect::{NdResult, Provider};
///
/// # fn main() -> netdirect::Result<()> {
/// let adapter = Provider::open("tcp")?.open_adapter_for("127.0.0.1:0".parse().unwrap())?;
/// let cq = adapter.create_completion_queue(64, 0, 0)?;
/// // Poll: nothing has completed yet. Polling also drives the provider's I/O.
/// let mut results = [NdResult::EMPTY; 16];
/// assert_eq!(cq.get_results(&mut results), 0);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct CompletionQueue {
    inner: Arc<dyn traits::CompletionQueue>,
    /// Completions taken from the queue by `wait_for` on behalf of another request, which
    /// `get_results` returns first.
    stash: Arc<Stash>,
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
            stash: Arc::default(),
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
    ///
    /// Completions that [`CompletionQueue::wait_for`] set aside while it looked for another
    /// come first, in the order they completed, then those still queued; so the order within
    /// each queue pair is kept.
    #[must_use = "the first `n` entries of `results` are completions that are not reported again"]
    pub fn get_results(&self, results: &mut [NdResult]) -> usize {
        if !self.stash.nonempty.load(Ordering::Acquire) {
            return self.inner.get_results(results);
        }
        let mut n = self.stash.lock().take_into(results);
        if n < results.len() {
            n += self.inner.get_results(&mut results[n..]);
        }
        n
    }

    /// Wait for the completion of the request posted with `context` (its
    /// `NdResult::request_context`), at most `timeout` (forever with `None`), and return it;
    /// every other completion found meanwhile is kept, in order, for the next
    /// [`CompletionQueue::get_results`] (or `wait_for`). A Rust extension: ND has no such call.
    ///
    /// Contexts are yours to choose: give each request whose completion you wait for this way
    /// one no other outstanding request on this CQ has (or use [`CompletionQueue::wait_for`]
    /// to match the queue pair's context too).
    ///
    /// # Errors
    ///
    /// * the completion's own status, when the request failed (the completion is consumed);
    /// * `ND_TIMEOUT` when `timeout` passed first (nothing is consumed: a later call finds
    ///   the completion);
    /// * the status of a failed `Notify`, other than an overrun's `ND_BUFFER_OVERFLOW`, which
    ///   makes this wait poll instead of sleep.
    ///
    /// ```no_run
    /// # fn demo(qp: &netdirect::QueuePair, cq: &netdirect::CompletionQueue, sge: netdirect::Sge)
    /// # -> netdirect::Result<()> {
    /// use netdirect::OpFlags;
    /// const SEND: u64 = 7;
    /// // SAFETY: the memory is left alone until the Send completes.
    /// unsafe { qp.send(SEND, &[sge], OpFlags::empty())? };
    /// let done = cq.wait_for_context(SEND, None)?;
    /// assert_eq!(done.request_context, SEND);
    /// # Ok(())
    /// # }
    /// ```
    pub fn wait_for_context(&self, context: u64, timeout: Option<Duration>) -> Result<NdResult> {
        self.wait_for(|r| r.request_context == context, timeout)
    }

    /// Wait for the first completion `matches` accepts, at most `timeout`, keeping the others
    /// for the next [`CompletionQueue::get_results`]: [`CompletionQueue::wait_for_context`]
    /// with a predicate of your own (a context and a queue pair, a request type, ...). Set-aside
    /// completions are looked at first, oldest first, then new ones as they arrive.
    ///
    /// It polls the queue (which drives the provider's I/O) and, when that comes back short,
    /// sleeps on a `Notify(ANY)`, which it withdraws before returning. Threads that wait on
    /// one CQ at once each find their own completion, whichever of them took it from the
    /// queue; a thread that calls `get_results` meanwhile may take it first, since it takes
    /// set-aside completions too.
    ///
    /// # Errors
    ///
    /// As [`CompletionQueue::wait_for_context`].
    pub fn wait_for(
        &self,
        mut matches: impl FnMut(&NdResult) -> bool,
        timeout: Option<Duration>,
    ) -> Result<NdResult> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut batch = [NdResult::EMPTY; 16];
        // After an overrun every Notify fails at once: poll instead.
        let mut overrun = false;
        loop {
            let armed = {
                // Held while polling and arming, so that a completion another waiter takes
                // from the queue is in the stash before this one looks there again, and no
                // short poll of another waiter can come between this one's poll and its
                // Notify (a short poll forgets what arrived before it, for Notify's sake).
                let mut stash = self.stash.lock();
                if let Some(r) = stash.take_first(&mut matches) {
                    return finished(r);
                }
                let mut found = None;
                loop {
                    let n = self.inner.get_results(&mut batch);
                    for r in &batch[..n] {
                        if found.is_none() && matches(r) {
                            found = Some(*r);
                        } else {
                            stash.push(*r);
                        }
                    }
                    if found.is_some() || n < batch.len() {
                        break;
                    }
                }
                if let Some(r) = found {
                    return finished(r);
                }
                if overrun {
                    None
                } else {
                    // Notify's race rule: an entry queued since the short poll completes
                    // it at once.
                    Some(self.inner.notify(NotifyType::Any)?)
                }
            };
            let left = match deadline {
                None => None,
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => {
                        if let Some(ov) = armed {
                            ov.cancel();
                        }
                        return Err(Error::new(Status::TIMEOUT));
                    }
                },
            };
            match armed {
                None => std::thread::yield_now(),
                Some(ov) => match ov.wait_timeout(left) {
                    Some(Ok(())) => {}
                    Some(Err(e)) if e.status() == Status::BUFFER_OVERFLOW => overrun = true,
                    Some(Err(e)) => return Err(e),
                    // Out of time: withdraw the Notify; the next turn reports the timeout
                    // after one last look.
                    None => ov.cancel(),
                },
            }
        }
    }

    /// `Notify`: arm the queue; the request completes on the next qualifying completion
    /// (immediately if one arrived after the last `get_results` that returned short).
    ///
    /// An overrun (more completions than the queue's depth) makes it complete with
    /// `ND_BUFFER_OVERFLOW`, this one and every later one, even after a `resize`: the overrun
    /// is remembered for the queue's life. Nothing is lost, though: the queue keeps every
    /// completion, `get_results` returns them all, and the queue pairs go on working; only
    /// waiting through `Notify` (and so [`CompletionQueue::next_results`]) no longer can, so
    /// an application that sees the overflow polls, or moves to a deeper CQ.
    ///
    /// Completions set aside by [`CompletionQueue::wait_for`] do not fire a Notify (they
    /// were taken from the queue): a `get_results` returns them first.
    pub fn notify(&self, ty: NotifyType) -> Result<Overlapped> {
        self.inner.notify(ty)
    }

    /// `Resize`: `ND_BUFFER_OVERFLOW` (queue unchanged) if `depth` is below the queued count;
    /// `ND_INVALID_PARAMETER` for 0 or more than the adapter's `MaxCompletionQueueDepth`;
    /// `ND_NOT_SUPPORTED` on an adapter without `ND_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED`.
    pub fn resize(&self, depth: u32) -> Result<()> {
        if !self.resizable {
            return Err(Error::new(Status::NOT_SUPPORTED));
        }
        if depth == 0 || depth > self.max_depth {
            return Err(Error::new(Status::INVALID_PARAMETER));
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

/// A completion `wait_for` found: `Ok` if it succeeded, else its status.
fn finished(r: NdResult) -> Result<NdResult> {
    if r.status == Status::SUCCESS {
        Ok(r)
    } else {
        Err(Error::new(r.status))
    }
}

/// Completions set aside by [`CompletionQueue::wait_for`], shared by the queue's clones.
#[derive(Debug, Default)]
struct Stash {
    entries: Mutex<VecDeque<NdResult>>,
    /// `entries` is not empty: lets `get_results` skip the lock (one load) when it is.
    nonempty: AtomicBool,
}

impl Stash {
    fn lock(&self) -> StashGuard<'_> {
        StashGuard {
            entries: self.entries.lock().unwrap_or_else(|e| e.into_inner()),
            nonempty: &self.nonempty,
        }
    }
}

/// The locked stash; keeps `nonempty` in step with the entries when dropped.
struct StashGuard<'a> {
    entries: MutexGuard<'a, VecDeque<NdResult>>,
    nonempty: &'a AtomicBool,
}

impl StashGuard<'_> {
    fn push(&mut self, r: NdResult) {
        self.entries.push_back(r);
    }

    /// Remove and return the oldest entry `matches` accepts.
    fn take_first(&mut self, matches: &mut impl FnMut(&NdResult) -> bool) -> Option<NdResult> {
        let i = self.entries.iter().position(matches)?;
        self.entries.remove(i)
    }

    /// Move the oldest entries into `out`; returns how many.
    fn take_into(&mut self, out: &mut [NdResult]) -> usize {
        let n = out.len().min(self.entries.len());
        for (slot, r) in out.iter_mut().zip(self.entries.drain(..n)) {
            *slot = r;
        }
        n
    }
}

impl Drop for StashGuard<'_> {
    fn drop(&mut self) {
        self.nonempty
            .store(!self.entries.is_empty(), Ordering::Release);
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
            return Err(Error::new(Status::INVALID_PARAMETER));
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
