//! The overlapped-request model (`IND2Overlapped`, `docs/ND-RULES.md` §2.3, §6.4, §6.5) in Rust form.
//!
//! Every asynchronous ND method returns an [`Overlapped`]: a handle to one request that the caller
//! can poll ([`Overlapped::get_overlapped_result`] with `wait = false` gives `ND_PENDING`), block on
//! (`wait = true`), or await (it is a [`Future`]). The provider keeps an [`OvCompleter`] and fills in
//! the final status exactly once.
//!
//! ND's rule G6 says "whenever a completion may be expected, return `ND_PENDING` and deliver the
//! completion": here an operation that finishes at once simply returns an `Overlapped` that is
//! already complete, which serves both the synchronous and the pending client styles.
//!
//! Progress: this crate has no threads. A waiting caller drives the provider's I/O itself through
//! the [`Driver`] it was given, so a blocked `wait` needs one wake-up per event.
//!
//! Providers make requests with [`Overlapped::pending`] and [`Overlapped::completed`]; those two
//! are hidden from the application-facing documentation (the `netdirect` crate re-exports
//! [`Overlapped`] for applications, which only ever receive one).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::{Error, Result, Status};

/// How a provider makes progress on behalf of a waiting caller.
///
/// Implemented by each provider's I/O engine (one per adapter).
pub trait Driver: Send + Sync + fmt::Debug {
    /// Make whatever progress is possible without blocking (read sockets, place data, complete
    /// requests). Spurious calls are harmless.
    fn progress(&self);

    /// Block the calling thread until something may have changed: I/O became ready or another
    /// thread completed a request (see [`Driver::notify`]), or `timeout` passed. The caller re-checks
    /// its condition afterwards, so spurious returns are allowed; it must never spin.
    fn wait(&self, timeout: Option<Duration>);

    /// A request completed or a notification fired: wake threads blocked in [`Driver::wait`] and
    /// signal the adapter's overlapped descriptor.
    fn notify(&self);

    /// The mark the application's threads move when they poll or wait on this driver, which
    /// a progress engine watches (`kit::progress`); `None`: the driver has no engine.
    fn activity(&self) -> Option<Arc<crate::kit::progress::Activity>> {
        None
    }

    /// An application thread looked at a request this driver completes and found it done:
    /// move the activity mark as [`Driver::progress`] does, so that a progress engine that
    /// finished the request first does not take the application for idle and go on doing its
    /// I/O (a hand-off per request, and a spinning thread on the application's core). The
    /// default does nothing (no engine).
    fn touch(&self) {}

    /// What a blocked [`Overlapped::wait`] does once per turn: make progress, and sleep unless
    /// `done()` holds. Returns when `done()` holds, something may have changed, or `timeout`
    /// passed; the caller re-checks `done()` afterwards (spurious returns are allowed).
    ///
    /// The default is [`Driver::progress`], then [`Driver::wait`] unless `done()`. A driver
    /// may do better, provided that:
    /// * it never sleeps while `done()` holds: `done()` is checked after the thread is
    ///   counted as a sleeper for [`Driver::notify`], so a completion on another thread
    ///   between the check and the sleep still wakes it (`done()` reads the request's status
    ///   with `SeqCst`, for that pairing);
    /// * it never sleeps while progress is possible that the sleep would not report: then it
    ///   may skip the `progress` call the default makes (the caller typically polled just
    ///   before, and the sleep itself is on the descriptors that would report anything new).
    ///
    /// `done` may be called with the driver's internal locks held: it must only read state
    /// (typically one request's status), never call into the driver.
    fn wait_for(&self, done: &dyn Fn() -> bool, timeout: Option<Duration>) {
        self.progress();
        if !done() {
            self.wait(timeout);
        }
    }
}

/// How to withdraw one pending request (a Rust extension: ND cancels per object).
type Canceller = Box<dyn Fn() + Send + Sync>;

/// What [`Overlapped::cancel`] does for a request.
enum Cancel {
    /// Nothing: the provider cannot withdraw it; it completes normally.
    No,
    /// Complete it with `ND_CANCELED` (a flag rather than a closure: a CQ's Notify is armed
    /// once per message by a blocking application, and must not allocate).
    Itself,
    /// Ask the provider.
    Custom(Canceller),
}

/// Wakers kept per request before the older ones are woken to re-register.
const MAX_WAKERS: usize = 4;

struct OvState {
    status: AtomicI32,
    /// The wakers of the tasks awaiting the request: one per task (clones of one request may
    /// be awaited by several), woken together on completion. The vector keeps its capacity
    /// when a recycled request is reused (`OvRecycler`), so re-arming does not allocate.
    wakers: Mutex<Vec<Waker>>,
    driver: Arc<dyn Driver>,
    cancel: Mutex<Cancel>,
}

/// One asynchronous ND request: the Rust form of an `OVERLAPPED` the provider completes.
///
/// Cloning gives another handle to the same request. Dropping every handle does not cancel the
/// request (it runs to completion, as an ND request whose `OVERLAPPED` nobody checks), but its
/// result, success or failure, is then lost: hence `#[must_use]`. Finish it with
/// [`Overlapped::wait`], `.await`, or poll it with [`Overlapped::get_overlapped_result`]
/// (`wait = false`) or [`Overlapped::try_result`].
#[derive(Clone)]
#[must_use = "an ND request's result is lost unless you wait for it, await it or poll it"]
pub struct Overlapped {
    state: Arc<OvState>,
}

/// The provider's side of an [`Overlapped`]: completes it exactly once.
pub struct OvCompleter {
    state: Arc<OvState>,
}

impl Overlapped {
    /// A new pending request and the completer the provider keeps (for providers).
    #[doc(hidden)]
    pub fn pending(driver: Arc<dyn Driver>) -> (Self, OvCompleter) {
        let state = Arc::new(OvState {
            status: AtomicI32::new(Status::PENDING.0),
            wakers: Mutex::new(Vec::new()),
            driver,
            cancel: Mutex::new(Cancel::No),
        });
        (
            Self {
                state: state.clone(),
            },
            OvCompleter { state },
        )
    }

    /// A request that finished immediately with `status` (for providers).
    #[doc(hidden)]
    pub fn completed(driver: Arc<dyn Driver>, status: Status) -> Self {
        let (ov, c) = Self::pending(driver);
        c.complete(status);
        ov
    }

    /// The current status: `ND_PENDING` while in progress, then the final status.
    pub fn status(&self) -> Status {
        // SeqCst pairs with the store in `OvCompleter::complete` followed by the driver's
        // check for sleepers (`Driver::wait_for`): of a waiter that announced itself and then
        // reads the status, and a completer that stores it and then looks for sleepers, at
        // least one sees the other.
        Status(self.state.status.load(Ordering::SeqCst))
    }

    /// True once the final status is known.
    pub fn is_complete(&self) -> bool {
        self.status() != Status::PENDING
    }

    /// `IND2Overlapped::GetOverlappedResult`: the final status of the request.
    ///
    /// With `wait = false` an unfinished request gives `Err` with `ND_PENDING` (see
    /// [`Error::is_pending`]). With `wait = true` the call drives the provider's I/O and blocks until
    /// the request completes. `Ok(())` means `ND_SUCCESS`; every other final status is an `Err`
    /// carrying it exactly (for example `ND_CANCELED` after `cancel_overlapped_requests`).
    pub fn get_overlapped_result(&self, wait: bool) -> Result<()> {
        if wait {
            self.wait()
        } else {
            if self.is_complete() {
                self.state.driver.touch();
            } else {
                self.state.driver.progress();
            }
            Error::check(self.status())
        }
    }

    /// Block until the request completes, driving I/O; the same as
    /// `get_overlapped_result(true)`.
    pub fn wait(&self) -> Result<()> {
        self.wait_timeout(None).unwrap_or(Err(Error::PENDING))
    }

    /// Block at most `timeout` (forever with `None`). `None` is returned if it is still pending.
    #[must_use = "`None` means the request is still pending"]
    pub fn wait_timeout(&self, timeout: Option<Duration>) -> Option<Result<()>> {
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        let driver = &self.state.driver;
        loop {
            if let Some(r) = self.try_result() {
                // Done before the wait began (by another thread, or the engine) is still a
                // sign of the application (`Driver::touch`).
                driver.touch();
                return Some(r);
            }
            let left = match deadline {
                Some(d) => match d.checked_duration_since(std::time::Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => {
                        // Out of time: one last non-blocking look.
                        driver.progress();
                        return self.try_result();
                    }
                },
                None => None,
            };
            driver.wait_for(&|| self.is_complete(), left);
        }
    }

    /// Withdraw this one request: it completes with `ND_CANCELED` unless it already finished.
    /// (ND itself cancels per object, `CancelOverlappedRequests`; this is the per-request
    /// form a dropped future needs.) Requests the provider cannot withdraw individually keep
    /// running and complete normally.
    pub fn cancel(&self) {
        if self.is_complete() {
            return;
        }
        let how = std::mem::replace(
            &mut *self.state.cancel.lock().unwrap_or_else(|e| e.into_inner()),
            Cancel::No,
        );
        match how {
            Cancel::No => {}
            Cancel::Itself => {
                OvCompleter {
                    state: self.state.clone(),
                }
                .complete(Status::CANCELED);
            }
            Cancel::Custom(c) => c(),
        }
    }

    /// A future that resolves like this request and, if dropped before it does, cancels the
    /// request ([`Overlapped::cancel`]). Memory the request uses stays alive regardless: the
    /// provider holds its registrations until it is done with them.
    pub fn cancel_on_drop(self) -> CancelOnDrop {
        CancelOnDrop { ov: self }
    }

    /// The final result if the request has completed, without driving I/O.
    #[must_use]
    pub fn try_result(&self) -> Option<Result<()>> {
        self.is_complete().then(|| Error::check(self.status()))
    }

    /// The driver that makes progress on this request: a front-end that blocks in a wait of
    /// its own (a Win32 event, a completion port) waits in [`Driver::wait_for`] on it, so the
    /// waiting thread drives the I/O as [`Overlapped::wait`] does, and calls
    /// [`Driver::notify`] when what that wait watches changes.
    pub fn driver(&self) -> &Arc<dyn Driver> {
        &self.state.driver
    }

    /// A completion hook: `waker` is woken, on the thread that completes the request, when it
    /// completes. Returns `true` instead if the request has completed already; a `true` can
    /// also come after the waker was registered and woken (a completion racing this call), so
    /// what the waker does must be idempotent.
    ///
    /// Unlike polling the request as a future, this neither drives I/O nor replaces an earlier
    /// waker: it is how a front-end (the C ABI's `OVERLAPPED`, events and completion ports)
    /// learns of a completion no thread is waiting for.
    pub fn wake_on_completion(&self, waker: &Waker) -> bool {
        if self.is_complete() {
            return true;
        }
        self.state
            .wakers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(waker.clone());
        // A completion between the first check and the push took the vector before the push:
        // it did not wake this waker, so the caller must see `true`.
        self.is_complete()
    }
}

impl fmt::Debug for Overlapped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Overlapped")
            .field("status", &self.status())
            .finish()
    }
}

/// Awaiting an `Overlapped` yields its final result.
///
/// The future drives the provider once per poll and registers its waker; it is woken when the
/// request completes. Something must make progress while it sleeps: another thread using the
/// adapter, or a reactor watching the adapter's overlapped descriptor (`Adapter::fd`) that calls
/// `Adapter::progress` when it is readable.
impl Future for Overlapped {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some(r) = self.try_result() {
            return Poll::Ready(r);
        }
        self.state.driver.progress();
        let crowd = {
            let mut w = self.state.wakers.lock().unwrap_or_else(|e| e.into_inner());
            let mut crowd = Vec::new();
            if !w.iter().any(|old| old.will_wake(cx.waker())) {
                if w.len() >= MAX_WAKERS {
                    // Tasks that moved on, or a crowd: wake them all (below, unlocked), and
                    // those still awaiting register again (none is lost).
                    crowd = std::mem::take(&mut *w);
                }
                w.push(cx.waker().clone());
            }
            crowd
        };
        crowd.into_iter().for_each(Waker::wake);
        // Re-check after registering so a completion between the check and the registration is
        // not missed.
        match self.try_result() {
            Some(r) => Poll::Ready(r),
            None => Poll::Pending,
        }
    }
}

/// See [`Overlapped::cancel_on_drop`].
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct CancelOnDrop {
    ov: Overlapped,
}

impl Future for CancelOnDrop {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.ov).poll(cx)
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.ov.cancel();
    }
}

impl OvCompleter {
    /// Let [`Overlapped::cancel`] complete this request with `ND_CANCELED` by itself: for
    /// notification-type requests (GetConnectionRequest, Notify, NotifyDisconnect) whose
    /// provider skips requests that are no longer pending when it fires.
    pub fn allow_cancel(&self) {
        *self.state.cancel.lock().unwrap_or_else(|e| e.into_inner()) = Cancel::Itself;
    }

    /// For a request made cancellable by [`OvCompleter::allow_cancel`]: take it out of
    /// cancellation's reach before doing what its success means (handing it a connection).
    /// `false` if it completed or a cancel has already claimed it (it completes
    /// `ND_CANCELED`, if it has not yet): then do nothing for it. After `true` only this
    /// completer completes it.
    pub fn claim(&self) -> bool {
        let mut how = self.state.cancel.lock().unwrap_or_else(|e| e.into_inner());
        // `Overlapped::cancel` takes the mode under this lock before it completes, so a
        // cancel that got here first left `No` behind.
        if matches!(*how, Cancel::Itself) && self.is_pending() {
            *how = Cancel::No;
            true
        } else {
            false
        }
    }

    /// Tell the request how to withdraw itself (see [`Overlapped::cancel`]). The closure must
    /// complete the request with `ND_CANCELED` (through its completer) if it is still pending.
    pub fn set_canceller(&self, cancel: impl Fn() + Send + Sync + 'static) {
        *self.state.cancel.lock().unwrap_or_else(|e| e.into_inner()) =
            Cancel::Custom(Box::new(cancel));
    }

    /// Set the final status (anything but `ND_PENDING`). Only the first call has an effect;
    /// returns whether this call completed the request.
    pub fn complete(&self, status: Status) -> bool {
        debug_assert!(status != Status::PENDING);
        let done = self
            .state
            .status
            // SeqCst: see `Overlapped::status`.
            .compare_exchange(
                Status::PENDING.0,
                status.0,
                Ordering::SeqCst,
                Ordering::SeqCst,
            )
            .is_ok();
        if done {
            // The canceller may hold references to the provider object; let them go.
            drop(std::mem::replace(
                &mut *self.state.cancel.lock().unwrap_or_else(|e| e.into_inner()),
                Cancel::No,
            ));
            // Woken without the lock held (a waker may run code that polls this request), and
            // the emptied vector put back for its capacity.
            let mut wakers =
                std::mem::take(&mut *self.state.wakers.lock().unwrap_or_else(|e| e.into_inner()));
            if wakers.capacity() > 0 {
                wakers.drain(..).for_each(Waker::wake);
                let mut slot = self.state.wakers.lock().unwrap_or_else(|e| e.into_inner());
                if slot.is_empty() {
                    *slot = wakers;
                }
            }
            self.state.driver.notify();
        }
        done
    }

    /// Whether the request is still pending.
    pub fn is_pending(&self) -> bool {
        self.state.status.load(Ordering::Acquire) == Status::PENDING.0
    }

    /// A user handle to the same request.
    pub fn handle(&self) -> Overlapped {
        Overlapped {
            state: self.state.clone(),
        }
    }
}

impl fmt::Debug for OvCompleter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OvCompleter")
            .field("status", &Status(self.state.status.load(Ordering::Acquire)))
            .finish()
    }
}

/// Reuses the allocations of finished requests for new ones of the same object: a CQ's
/// Notify, which a blocking application re-arms once per message, then allocates only while
/// the application still holds its earlier requests.
///
/// A request is reused only when nothing else refers to it any more (its completer is gone
/// and the application dropped every handle; `Arc::get_mut` proves it), so no handle can ever
/// see a finished request turn pending again. Two are kept because an application typically
/// still holds the request that just fired while it arms the next one.
#[derive(Default)]
pub struct OvRecycler {
    spare: [Option<Arc<OvState>>; 2],
    /// The slot the next fresh allocation replaces when both are in use.
    next: usize,
}

impl OvRecycler {
    /// An empty recycler.
    pub const fn new() -> Self {
        Self {
            spare: [None, None],
            next: 0,
        }
    }

    /// A new pending request, as [`Overlapped::pending`], in a recycled allocation if one is
    /// free.
    pub fn pending(&mut self, driver: &Arc<dyn Driver>) -> (Overlapped, OvCompleter) {
        let spare = &mut self.spare;
        let free = (0..spare.len())
            .find(|&i| spare[i].as_mut().is_some_and(|a| Arc::get_mut(a).is_some()));
        let state = match free {
            Some(i) => {
                let arc = spare[i].as_mut().expect("found above");
                let st = Arc::get_mut(arc).expect("found above: no other reference");
                *st.status.get_mut() = Status::PENDING.0;
                st.wakers
                    .get_mut()
                    .unwrap_or_else(|e| e.into_inner())
                    .clear();
                *st.cancel.get_mut().unwrap_or_else(|e| e.into_inner()) = Cancel::No;
                if !Arc::ptr_eq(&st.driver, driver) {
                    st.driver = driver.clone();
                }
                arc.clone()
            }
            None => {
                let (ov, _) = Overlapped::pending(driver.clone());
                let slot = match self.spare.iter().position(Option::is_none) {
                    Some(i) => i,
                    None => {
                        self.next = (self.next + 1) % self.spare.len();
                        self.next
                    }
                };
                self.spare[slot] = Some(ov.state.clone());
                ov.state
            }
        };
        (
            Overlapped {
                state: state.clone(),
            },
            OvCompleter { state },
        )
    }
}

impl fmt::Debug for OvRecycler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let held = self.spare.iter().filter(|s| s.is_some()).count();
        f.debug_struct("OvRecycler").field("held", &held).finish()
    }
}

/// The pending overlapped requests of one object, in issue order, so that
/// `CancelOverlappedRequests` completes them FIFO (`docs/ND-RULES.md` R-CANCEL-1).
#[derive(Debug, Default)]
pub struct PendingRequests<K> {
    list: Vec<(K, OvCompleter)>,
}

impl<K: Copy + PartialEq> PendingRequests<K> {
    /// An empty list.
    pub const fn new() -> Self {
        Self { list: Vec::new() }
    }

    /// Remember a pending request of kind `kind`.
    pub fn push(&mut self, kind: K, c: OvCompleter) {
        self.list.retain(|(_, c)| c.is_pending());
        self.list.push((kind, c));
    }

    /// A request of `kind` that waits here for an event (completed later by
    /// [`PendingRequests::complete_all`]), or, when the event has `happened` already, one
    /// completed at once with `ND_SUCCESS`: `IND2Connector::NotifyDisconnect` on a connection
    /// that is still up, or that has ended.
    pub fn wait_for_event(
        &mut self,
        kind: K,
        happened: bool,
        driver: Arc<dyn Driver>,
    ) -> Overlapped {
        if happened {
            return Overlapped::completed(driver, Status::SUCCESS);
        }
        let (ov, c) = Overlapped::pending(driver);
        self.push(kind, c);
        ov
    }

    /// Complete the oldest pending request of `kind` with `status`; false if there is none.
    pub fn complete_first(&mut self, kind: K, status: Status) -> bool {
        self.list.retain(|(_, c)| c.is_pending());
        if let Some(i) = self.list.iter().position(|(k, _)| *k == kind) {
            let (_, c) = self.list.remove(i);
            c.complete(status);
            true
        } else {
            false
        }
    }

    /// Complete every pending request of `kind` with `status`, oldest first.
    pub fn complete_all(&mut self, kind: K, status: Status) -> usize {
        let mut n = 0;
        self.list.retain(|(k, c)| {
            if *k == kind {
                n += usize::from(c.complete(status));
                false
            } else {
                c.is_pending()
            }
        });
        n
    }

    /// The kinds of the requests still pending (one withdrawn on its own is not).
    pub fn pending_kinds(&self) -> impl Iterator<Item = K> + '_ {
        self.list
            .iter()
            .filter(|(_, c)| c.is_pending())
            .map(|(k, _)| *k)
    }

    /// Complete every pending request, of any kind, with `status`, oldest first; returns how
    /// many this call completed.
    pub fn complete_each(&mut self, status: Status) -> usize {
        let n = self.list.iter().filter(|(_, c)| c.complete(status)).count();
        self.list.clear();
        n
    }

    /// Whether a request of `kind` is pending.
    pub fn has(&self, kind: K) -> bool {
        self.list.iter().any(|(k, c)| *k == kind && c.is_pending())
    }

    /// Complete everything with `ND_CANCELED`, oldest first; returns how many were canceled.
    pub fn cancel_all(&mut self) -> usize {
        let n = self
            .list
            .iter()
            .filter(|(_, c)| c.complete(Status::CANCELED))
            .count();
        self.list.clear();
        n
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A driver with nothing to drive, for tests.
    #[derive(Debug, Default)]
    pub(crate) struct NullDriver;
    impl Driver for NullDriver {
        fn progress(&self) {}
        fn wait(&self, timeout: Option<Duration>) {
            std::thread::sleep(
                timeout
                    .unwrap_or(Duration::from_millis(1))
                    .min(Duration::from_millis(1)),
            );
        }
        fn notify(&self) {}
    }

    /// Clones of one request awaited by two tasks: both are woken when it completes.
    #[test]
    fn every_task_awaiting_a_clone_is_woken() {
        use std::sync::atomic::AtomicUsize;
        use std::task::Wake;
        struct Count(AtomicUsize);
        impl Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let (ov, c) = Overlapped::pending(Arc::new(NullDriver));
        let (t1, t2) = (
            Arc::new(Count(AtomicUsize::new(0))),
            Arc::new(Count(AtomicUsize::new(0))),
        );
        let (w1, w2) = (Waker::from(t1.clone()), Waker::from(t2.clone()));
        let mut f1 = ov.clone();
        let mut f2 = ov;
        assert!(Pin::new(&mut f1)
            .poll(&mut Context::from_waker(&w1))
            .is_pending());
        assert!(Pin::new(&mut f2)
            .poll(&mut Context::from_waker(&w2))
            .is_pending());
        // Polled again by the first task: still one registration each.
        assert!(Pin::new(&mut f1)
            .poll(&mut Context::from_waker(&w1))
            .is_pending());
        c.complete(Status::SUCCESS);
        assert_eq!(t1.0.load(Ordering::Relaxed), 1, "the first task");
        assert_eq!(t2.0.load(Ordering::Relaxed), 1, "the second task");
    }

    /// The completion hook fires once, on completion; a finished request says so instead.
    #[test]
    fn a_completion_hook_is_woken_on_completion() {
        use std::sync::atomic::AtomicUsize;
        use std::task::Wake;
        struct Count(AtomicUsize);
        impl Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let (ov, c) = Overlapped::pending(Arc::new(NullDriver));
        let hook = Arc::new(Count(AtomicUsize::new(0)));
        assert!(!ov.wake_on_completion(&Waker::from(hook.clone())));
        assert_eq!(hook.0.load(Ordering::Relaxed), 0, "not before completion");
        c.complete(Status::SUCCESS);
        assert_eq!(hook.0.load(Ordering::Relaxed), 1, "woken by the completion");
        assert!(ov.wake_on_completion(&Waker::from(hook.clone())));
        assert_eq!(
            hook.0.load(Ordering::Relaxed),
            1,
            "a finished request wakes nothing"
        );
    }

    /// A claimed request is out of a cancel's reach; a cancelled one cannot be claimed.
    #[test]
    fn claim_and_cancel_exclude_each_other() {
        let (ov, c) = Overlapped::pending(Arc::new(NullDriver));
        c.allow_cancel();
        assert!(c.claim());
        ov.cancel();
        assert!(!ov.is_complete(), "claimed: the cancel does nothing");
        c.complete(Status::SUCCESS);
        assert_eq!(ov.try_result(), Some(Ok(())));

        let (ov, c) = Overlapped::pending(Arc::new(NullDriver));
        c.allow_cancel();
        ov.cancel();
        assert!(!c.claim(), "cancelled first");
        assert_eq!(ov.try_result(), Some(Err(Error::CANCELED)));

        let (_ov, c) = Overlapped::pending(Arc::new(NullDriver));
        assert!(!c.claim(), "never made cancellable: nothing to claim from");
    }

    #[test]
    fn pending_then_complete() {
        let (ov, c) = Overlapped::pending(Arc::new(NullDriver));
        assert!(ov.get_overlapped_result(false).unwrap_err().is_pending());
        assert!(c.complete(Status::CANCELED));
        assert!(!c.complete(Status::SUCCESS), "second completion is ignored");
        assert_eq!(
            ov.get_overlapped_result(true).unwrap_err().status(),
            Status::CANCELED
        );
    }

    #[test]
    fn dropping_a_cancel_on_drop_future_cancels() {
        let (ov, c) = Overlapped::pending(Arc::new(NullDriver));
        let c = Arc::new(c);
        let c2 = c.clone();
        c.set_canceller(move || {
            c2.complete(Status::CANCELED);
        });
        let fut = ov.clone().cancel_on_drop();
        drop(fut);
        assert_eq!(ov.try_result(), Some(Err(Error::CANCELED)));
        // A finished request is not disturbed by a later drop.
        let (ov, c) = Overlapped::pending(Arc::new(NullDriver));
        c.complete(Status::SUCCESS);
        drop(ov.clone().cancel_on_drop());
        assert_eq!(ov.try_result(), Some(Ok(())));
    }

    #[test]
    fn recycler_reuses_only_released_requests() {
        let d: Arc<dyn Driver> = Arc::new(NullDriver);
        let mut r = OvRecycler::new();
        let (a, ca) = r.pending(&d);
        assert!(ca.complete(Status::SUCCESS));
        drop(ca);
        // The application still holds `a` while arming the next request.
        let (b, cb) = r.pending(&d);
        assert!(
            !Arc::ptr_eq(&a.state, &b.state),
            "a held request is not reused"
        );
        let a_ptr = Arc::as_ptr(&a.state);
        drop(a);
        let (c, cc) = r.pending(&d);
        assert_eq!(Arc::as_ptr(&c.state), a_ptr, "a released request is reused");
        assert!(!c.is_complete(), "the reused request is pending again");
        assert!(c.try_result().is_none());
        // `b` is still pending (its completer lives): never reused, even once the handle goes.
        drop(b);
        let (d2, _cd) = r.pending(&d);
        assert!(!Arc::ptr_eq(&d2.state, &cb.state));
        assert!(!Arc::ptr_eq(&d2.state, &c.state));
        assert!(cb.is_pending());
        // A clone keeps a finished request from being reused.
        assert!(cc.complete(Status::CANCELED));
        drop(cc);
        let keep = c.clone();
        drop(c);
        let (e, _ce) = r.pending(&d);
        assert!(!Arc::ptr_eq(&e.state, &keep.state));
        assert_eq!(keep.try_result(), Some(Err(Error::CANCELED)));
    }

    #[test]
    fn a_self_cancelling_request_cancels_once() {
        let (ov, c) = Overlapped::pending(Arc::new(NullDriver));
        c.allow_cancel();
        ov.cancel();
        assert_eq!(ov.try_result(), Some(Err(Error::CANCELED)));
        assert!(!c.complete(Status::SUCCESS), "already final");
        // Once complete, the request no longer cancels.
        let (ov, c) = Overlapped::pending(Arc::new(NullDriver));
        c.allow_cancel();
        assert!(c.complete(Status::SUCCESS));
        ov.cancel();
        assert_eq!(ov.try_result(), Some(Ok(())));
    }

    #[test]
    fn cancel_is_fifo() {
        let d: Arc<dyn Driver> = Arc::new(NullDriver);
        let mut p = PendingRequests::new();
        let (a, ca) = Overlapped::pending(d.clone());
        let (b, cb) = Overlapped::pending(d);
        p.push(1u8, ca);
        p.push(2u8, cb);
        assert_eq!(p.cancel_all(), 2);
        assert_eq!(a.status(), Status::CANCELED);
        assert_eq!(b.status(), Status::CANCELED);
    }

    #[test]
    fn an_event_that_happened_completes_its_request_at_once_and_one_to_come_waits() {
        let d: Arc<dyn Driver> = Arc::new(NullDriver);
        let mut p = PendingRequests::new();
        let done = p.wait_for_event((), true, d.clone());
        assert_eq!(done.status(), Status::SUCCESS);
        assert!(!p.has(()), "a request completed at once is not kept");
        let waiting = p.wait_for_event((), false, d);
        assert_eq!(waiting.status(), Status::PENDING);
        assert_eq!(p.complete_all((), Status::SUCCESS), 1);
        assert_eq!(waiting.status(), Status::SUCCESS);
    }
}
