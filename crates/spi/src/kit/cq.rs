//! A completion queue that software providers share (`IND2CompletionQueue`, `docs/ND-RULES.md` §2.5).
//!
//! [`CqCore`] holds the completions, the notification state and the queue pairs that complete
//! into it. `get_results` drives those queue pairs' I/O itself when the queue is empty, so a
//! busy-polling caller needs no helper thread: the poll *is* the progress.

mod direct;

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, Weak};

use crate::kit::overlapped::{Driver, OvRecycler, Overlapped, PendingRequests};
use crate::kit::progress::Activity;
use crate::{Error, NdResult, NotifyType, Result, Status};

/// Something whose I/O a completion queue drives when polled: a provider's queue pair.
pub trait ProgressSource: Send + Sync {
    /// Make whatever progress is possible without blocking. Never called with the CQ's lock
    /// held (the source pushes completions into the CQ).
    fn progress(&self);
}

#[derive(Debug, Default)]
struct Triggers {
    /// An entry arrived since the last short `get_results` and has not fired a notification.
    any: bool,
    /// ... and it was a solicited Receive or an error.
    solicited: bool,
    /// ... and it was an error.
    error: bool,
}

struct Inner {
    entries: VecDeque<NdResult>,
    depth: u32,
    /// The CQ overflowed: it and its queue pairs are unusable (Notify gives `ND_BUFFER_OVERFLOW`).
    overrun: bool,
    triggers: Triggers,
    /// A Notify was armed and no `get_results` has found the queue empty since: if it is ANY
    /// (still armed), the next one that does need not drive I/O (see
    /// [`CqCore::get_results`]). Not for SOLICITED or ERRORS: an application that waits for
    /// those polls to take the other completions, and a poll should find what arrived.
    fresh_arm: bool,
    /// The Notify requests, with their types.
    waiters: PendingRequests<NotifyType>,
    /// Notify requests' allocations, reused once the application let go of them.
    recycler: OvRecycler,
}

impl Inner {
    /// The notification type in force: the strongest of the Notify requests still pending
    /// (ANY over SOLICITED over ERRORS, `IND2CompletionQueue::Notify`), if any. Derived from
    /// the requests, so one withdrawn on its own (`Overlapped::cancel`, a dropped future)
    /// arms nothing: the next entry is remembered for the next Notify, not spent on nobody.
    fn armed(&self) -> Option<NotifyType> {
        self.waiters.pending_kinds().max_by_key(|&t| rank(t))
    }
}

/// The precedence of notification types.
fn rank(t: NotifyType) -> u8 {
    match t {
        NotifyType::Errors => 1,
        NotifyType::Solicited => 2,
        NotifyType::Any => 3,
    }
}

/// A software completion queue.
pub struct CqCore {
    inner: Mutex<Inner>,
    /// `entries.len()` as of the last change, stored (not read-modify-written) under the lock:
    /// lets a poller see an empty queue without taking the lock (see [`CqCore::queued_hint`]).
    queued: AtomicUsize,
    /// A Notify is armed or the queue overran, stored under the lock like `queued`: a
    /// completion made by a polling call's own drive must then take the queue (and its
    /// notification rules), not go straight to the caller (`direct`).
    owes_notify: AtomicBool,
    /// Some entry is remembered for the next Notify (`Inner::triggers`), stored under the
    /// lock: lets a lock-free empty poll see whether it must forget them (`short_poll`).
    triggered: AtomicBool,
    sources: RwLock<Vec<Weak<dyn ProgressSource>>>,
    /// The length of `sources` at which `attach` next forgets released queue pairs.
    sweep_at: AtomicUsize,
    driver: Arc<dyn Driver>,
    /// The driver's application-activity mark, moved by every poll (`kit::progress`).
    activity: Option<Arc<Activity>>,
    /// Polls that found nothing, counted with plain stores (`CqCore::note_empty_poll`).
    empty_polls: AtomicU32,
    /// The adapter's `MaxCompletionQueueDepth`: `Resize` beyond it is refused.
    max_depth: u32,
}

impl fmt::Debug for CqCore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = self.lock();
        f.debug_struct("CqCore")
            .field("depth", &i.depth)
            .field("queued", &i.entries.len())
            .finish()
    }
}

/// Extra facts about a completion that matter for notification.
#[derive(Debug, Clone, Copy, Default)]
pub struct PushKind {
    /// A Receive of a Send that carried `SEND_AND_SOLICIT_EVENT`.
    pub solicited: bool,
}

/// Empty polls between two adapter-wide drives ([`CqCore::note_empty_poll`]): about 0.4 ms
/// of a thread spinning on an empty queue.
pub const IDLE_POLLS: u32 = 8192;
/// Empty polls between two activity marks ([`CqCore::note_empty_poll`]): a few microseconds
/// of spinning, against the progress engine's 10 ms back-off.
pub const ACTIVITY_POLLS: u32 = 64;

impl CqCore {
    /// A queue of `depth` entries (the caller validated `depth`).
    pub fn new(depth: u32, driver: Arc<dyn Driver>) -> Self {
        Self {
            inner: Mutex::new(Inner {
                entries: VecDeque::with_capacity(depth as usize),
                depth,
                overrun: false,
                triggers: Triggers::default(),
                fresh_arm: false,
                waiters: PendingRequests::new(),
                recycler: OvRecycler::new(),
            }),
            queued: AtomicUsize::new(0),
            owes_notify: AtomicBool::new(false),
            triggered: AtomicBool::new(false),
            sources: RwLock::new(Vec::new()),
            sweep_at: AtomicUsize::new(8),
            activity: driver.activity(),
            empty_polls: AtomicU32::new(0),
            driver,
            max_depth: u32::MAX,
        }
    }

    /// The queue of an adapter whose `MaxCompletionQueueDepth` is `max`, which `Resize` may
    /// not exceed.
    #[must_use]
    pub fn with_max_depth(mut self, max: u32) -> Self {
        self.max_depth = max;
        self
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// This queue's identity for the thread-local collector.
    fn id(&self) -> usize {
        self as *const Self as usize
    }

    /// Run `drive` (I/O that may complete requests here) on behalf of a `get_results` that
    /// found the queue empty: completions it makes on this thread for this queue go straight
    /// into `out` (up to its length) when nothing could tell that from push-then-take — the
    /// queue is empty, no Notify is armed, no overrun (`direct` module). Returns how many
    /// went to `out`; any others were queued, after them, as usual.
    pub fn drive_collecting(&self, out: &mut [NdResult], drive: impl FnOnce()) -> usize {
        direct::collect(self.id(), out, drive)
    }

    /// The driver of the adapter this CQ belongs to.
    pub fn driver(&self) -> &Arc<dyn Driver> {
        &self.driver
    }

    /// Whether this CQ belongs to the adapter whose engine is `driver`. `CreateQueuePair`
    /// refuses another adapter's CQ (`ND_INVALID_PARAMETER_2`/`_3`): its Notify requests are
    /// completed by its own adapter's engine, which would never read the queue pair's
    /// connection, so a wait on them could sleep forever.
    pub fn belongs_to<D: ?Sized>(&self, driver: &Arc<D>) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&self.driver), Arc::as_ptr(driver))
    }

    /// Register a queue pair whose I/O `get_results` drives.
    pub fn attach(&self, source: Weak<dyn ProgressSource>) {
        let mut s = self.sources.write().unwrap_or_else(|e| e.into_inner());
        // Forget released queue pairs once the list doubled since the last sweep, not at every
        // attach: a sweep per attach made setting up N connections on one CQ cost O(N²).
        if s.len() >= self.sweep_at.load(Ordering::Relaxed) {
            s.retain(|w| w.strong_count() > 0);
            self.sweep_at.store((2 * s.len()).max(8), Ordering::Relaxed);
        }
        s.push(source);
    }

    /// Drive the I/O of every attached queue pair once, or the whole adapter's if none is
    /// attached.
    pub fn progress(&self) {
        let sources = self.sources.read().unwrap_or_else(|e| e.into_inner());
        if sources.is_empty() {
            drop(sources);
            self.driver.progress();
            return;
        }
        for s in sources.iter() {
            if let Some(s) = s.upgrade() {
                s.progress();
            }
        }
    }

    /// Queue one completion. Never fails: beyond the depth the CQ enters the overrun state, which
    /// `notify` reports as `ND_BUFFER_OVERFLOW`, but the completion itself is kept, not lost.
    pub fn push(&self, r: NdResult, kind: PushKind) {
        if direct::offer(self.id(), &r, || self.may_bypass()) {
            return;
        }
        let mut i = self.lock();
        if i.entries.len() >= i.depth as usize {
            i.overrun = true;
            self.owes_notify.store(true, Ordering::Release);
        }
        i.entries.push_back(r);
        self.queued.store(i.entries.len(), Ordering::Release);
        let error = r.status != Status::SUCCESS;
        self.trigger(&mut i, kind.solicited, error);
    }

    /// Fire or remember a notification for a new entry (`docs/ND-RULES.md` §2.5 "Notify rules").
    fn trigger(&self, i: &mut Inner, solicited: bool, error: bool) {
        let armed = i.armed();
        let fires = match armed {
            Some(NotifyType::Any) => true,
            Some(NotifyType::Solicited) => solicited || error,
            Some(NotifyType::Errors) => error,
            None => false,
        } || (armed.is_some() && i.overrun);
        if fires {
            let status = if i.overrun {
                Status::BUFFER_OVERFLOW
            } else {
                Status::SUCCESS
            };
            self.owes_notify.store(i.overrun, Ordering::Release);
            i.waiters.complete_each(status);
            // The entry that fired a notification cannot fire a later one.
            self.clear_triggers(i);
        } else {
            if armed.is_none() {
                // Every Notify was withdrawn: completions may go straight to pollers again.
                self.owes_notify.store(i.overrun, Ordering::Release);
            }
            i.triggers.any = true;
            self.triggered.store(true, Ordering::Release);
            i.triggers.solicited |= solicited || error;
            i.triggers.error |= error;
        }
    }

    /// `GetResults`: move up to `out.len()` completions into `out`; returns how many.
    ///
    /// When the queue is empty this first drives the attached queue pairs' I/O (non-blocking),
    /// so a caller that polls makes progress itself — except once per arming: the first call
    /// that finds the queue empty after a Notify(ANY) was armed (while it is still pending)
    /// reports nothing without driving. That call is the re-poll a blocking application makes
    /// between arming and sleeping (the race-free order, docs/ND-RULES.md §2.5 "Race rule"), and
    /// whatever wait follows makes the progress the drive would have made: a
    /// `Driver::wait_for` drives before it sleeps or sleeps on every descriptor the drive
    /// would read, `GetOverlappedResult(false)` and a polled future drive, and an event loop
    /// on the adapter's descriptor sees it readable. What the drive would find is processed
    /// then, and fires the Notify, so here it would only cost a system call that says
    /// `EAGAIN`. The race rule is about *completions*, which this reports in full; bytes not
    /// yet read from a socket are none yet. An application that arms and then keeps polling
    /// still makes progress: only that one call skips the drive.
    pub fn get_results(&self, out: &mut [NdResult]) -> usize {
        if out.is_empty() {
            return 0;
        }
        let (n, drive) = self.take(out, true);
        if n > 0 || !drive {
            if n > 0 {
                // A thread taking completions is driving as much as one finding none: a
                // progress engine that took it for idle would lead, and read the sockets this
                // thread is about to read (a hand-off per message).
                if let Some(a) = &self.activity {
                    a.touch();
                }
            }
            return n;
        }
        let n = self.drive_collecting(out, || self.progress());
        if n == 0 {
            self.note_empty_poll();
        }
        if n == out.len() || (n > 0 && self.queued_hint() == 0) {
            return n;
        }
        // What the drive queued beyond what it collected follows (a short return must mean
        // nothing is left, IND2CompletionQueue::Notify).
        n + self.take_queued(&mut out[n..])
    }

    /// Move queued completions into `out`. Also says whether the caller should drive I/O
    /// and look again (`first`: this is the first look of a `get_results`): when nothing was
    /// queued, unless this is the first empty look since a Notify(ANY) still pending was
    /// armed (see [`CqCore::get_results`]).
    fn take(&self, out: &mut [NdResult], first: bool) -> (usize, bool) {
        let mut i = self.lock();
        let n = out.len().min(i.entries.len());
        for (slot, r) in out.iter_mut().zip(i.entries.drain(..n)) {
            *slot = r;
        }
        if n > 0 {
            self.queued.store(i.entries.len(), Ordering::Release);
        }
        if n < out.len() {
            // A short poll reported everything queued: later entries must fire the next Notify.
            self.clear_triggers(&mut i);
        }
        let drive = first && n == 0;
        let skip = drive && std::mem::take(&mut i.fresh_arm) && i.armed() == Some(NotifyType::Any);
        (n, drive && !skip)
    }

    /// Forget the entries remembered for the next Notify (they were reported, or fired one).
    fn clear_triggers(&self, i: &mut Inner) {
        i.triggers = Triggers::default();
        self.triggered.store(false, Ordering::Release);
    }

    /// A provider's `get_results` that returns short without [`CqCore::get_results`] (a
    /// lock-free empty check, or after [`CqCore::drive_collecting`] found the queue empty):
    /// the race rule's "short poll", after which only newer entries fire a Notify at once.
    /// Costs one load unless an entry is remembered; forgets nothing while one is queued.
    pub fn short_poll(&self) {
        if self.triggered.load(Ordering::Acquire) {
            let mut i = self.lock();
            if i.entries.is_empty() {
                self.clear_triggers(&mut i);
            }
        }
    }

    /// A poll found nothing. Two things count such polls, with plain loads and stores (a lost
    /// count between two polling threads only delays what it counts toward):
    ///
    /// * every [`ACTIVITY_POLLS`]th one marks the application as driving, so that a progress
    ///   engine stays away (`kit::progress`; a thread that polls finds its queue empty often
    ///   when it waits for a message; a poll that takes completions marks it too,
    ///   `get_results`);
    /// * every [`IDLE_POLLS`]th one drives the whole adapter, not only the queue pairs attached
    ///   to this queue: a thread that polls one queue while a queue pair of another one, which
    ///   nobody polls, must progress for its request to complete (one thread with both ends of
    ///   a connection, or a target whose peer's completions need it to place them) then still
    ///   makes progress, for one adapter-wide pass per [`IDLE_POLLS`] empty polls.
    #[inline]
    pub fn note_empty_poll(&self) {
        let n = self.empty_polls.load(Ordering::Relaxed).wrapping_add(1);
        if n.is_multiple_of(ACTIVITY_POLLS) {
            if let Some(a) = &self.activity {
                a.touch();
            }
        }
        if n < IDLE_POLLS {
            self.empty_polls.store(n, Ordering::Relaxed);
        } else {
            self.empty_polls.store(0, Ordering::Relaxed);
            self.driver.progress();
        }
    }

    /// Move up to `out.len()` queued completions into `out` without driving I/O (the rest of
    /// a `get_results` whose drive collected fewer than asked); returns how many.
    pub fn take_queued(&self, out: &mut [NdResult]) -> usize {
        if out.is_empty() {
            return 0;
        }
        self.take(out, false).0
    }

    /// `Notify`: arm the queue. Completes at once when an entry that qualifies arrived after the
    /// last short `get_results` (the race rule), or with `ND_BUFFER_OVERFLOW` after an overrun.
    pub fn notify(&self, ty: NotifyType) -> Overlapped {
        let mut i = self.lock();
        let (ov, c) = i.recycler.pending(&self.driver);
        if i.overrun {
            c.complete(Status::BUFFER_OVERFLOW);
            return ov;
        }
        let t = &i.triggers;
        let now = match ty {
            NotifyType::Any => t.any,
            NotifyType::Solicited => t.solicited,
            NotifyType::Errors => t.error,
        };
        if now {
            self.clear_triggers(&mut i);
            c.complete(Status::SUCCESS);
            // This request raised the type in force to its own (ANY takes precedence over
            // SOLICITED, which takes precedence over ERRORS) and an entry satisfies it: the
            // requests pending complete with it, as all do on one completion event.
            i.waiters.complete_each(Status::SUCCESS);
            return ov;
        }
        self.owes_notify.store(true, Ordering::Release);
        c.allow_cancel();
        i.waiters.push(ty, c);
        i.fresh_arm = true;
        ov
    }

    /// `Resize`: change the depth; `ND_INVALID_PARAMETER` for 0 or beyond the adapter's
    /// maximum ([`CqCore::with_max_depth`]), `ND_BUFFER_OVERFLOW` (queue unchanged) if fewer
    /// than the queued entries.
    pub fn resize(&self, depth: u32) -> Result<()> {
        if depth == 0 || depth > self.max_depth {
            return Err(Error::new(Status::INVALID_PARAMETER));
        }
        let mut i = self.lock();
        if (depth as usize) < i.entries.len() {
            return Err(Error::new(Status::BUFFER_OVERFLOW));
        }
        let want = depth as usize;
        if i.entries.capacity() < want {
            let extra = want - i.entries.len();
            // The caller bounds `depth` (MaxCompletionQueueDepth); should memory run out all
            // the same, the queue stays as it was.
            if i.entries.try_reserve(extra).is_err() {
                return Err(Error::new(Status::INSUFFICIENT_RESOURCES));
            }
        }
        i.depth = depth;
        Ok(())
    }

    /// The current depth.
    pub fn depth(&self) -> u32 {
        self.lock().depth
    }

    /// Number of queued completions.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// The number of queued completions, read without the lock: exact when no push or take
    /// runs concurrently, else the count before or after it. Every change is a plain store
    /// made under the lock, so a push is not charged an extra atomic read-modify-write (about
    /// 2 ns each on this VM's EPYC, even uncontended) for the benefit of a lock-free empty check. A provider whose poll drives its
    /// I/O checks this before and after the drive and calls [`CqCore::get_results`] only
    /// when it is not zero; a racing push it misses is found by the next poll, as with a
    /// lock (`GetResults` reports what was queued when it looked, docs/ND-RULES.md §2.5).
    pub fn queued_hint(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }

    /// Whether a completion made now may go straight to the `GetResults` call of the thread
    /// that made it, instead of through the queue: nothing is queued (so FIFO order with
    /// earlier entries holds, when the maker's earlier completions were queued under the same
    /// lock it holds now) and no Notify is armed and no overrun happened (so no notification
    /// can be owed to the entry). Two loads. `direct` asks this; so may a provider whose poll
    /// completes requests itself (`shm`'s inline messages).
    pub fn may_bypass(&self) -> bool {
        self.queued.load(Ordering::Acquire) == 0 && !self.owes_notify.load(Ordering::Acquire)
    }

    /// Whether no completion is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `CancelOverlappedRequests`: every pending Notify completes with `ND_CANCELED`, in order.
    pub fn cancel_overlapped_requests(&self) {
        let mut i = self.lock();
        self.owes_notify.store(i.overrun, Ordering::Release);
        i.waiters.cancel_all();
    }
}

impl Drop for CqCore {
    fn drop(&mut self) {
        // "CQ Notify requests complete with ND_CANCELED when the CQ is destroyed."
        self.cancel_overlapped_requests();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kit::overlapped::tests::NullDriver;
    use crate::RequestType;

    fn r(status: Status) -> NdResult {
        NdResult {
            status,
            bytes_transferred: 0,
            qp_context: 1,
            request_context: 2,
            request_type: RequestType::Send,
        }
    }

    /// A queue pair stand-in whose I/O, when driven, completes `n` requests into `cq` (contexts
    /// 0, 1, ...) and one into `other`, if given.
    struct Completer {
        cq: Arc<CqCore>,
        other: Option<Arc<CqCore>>,
        n: u64,
    }

    impl ProgressSource for Completer {
        fn progress(&self) {
            for k in 0..self.n {
                let mut e = r(Status::SUCCESS);
                e.request_context = k;
                self.cq.push(e, PushKind::default());
            }
            if let Some(o) = &self.other {
                o.push(r(Status::SUCCESS), PushKind::default());
            }
        }
    }

    fn driven(n: u64, other: Option<Arc<CqCore>>) -> (Arc<CqCore>, Arc<Completer>) {
        let cq = Arc::new(CqCore::new(8, Arc::new(NullDriver)));
        let src = Arc::new(Completer {
            cq: cq.clone(),
            other,
            n,
        });
        let weak: Weak<dyn ProgressSource> = Arc::downgrade(&src) as Weak<dyn ProgressSource>;
        cq.attach(weak);
        (cq, src)
    }

    #[test]
    fn driven_completions_come_back_in_order_and_the_rest_stays_queued() {
        let other = Arc::new(CqCore::new(8, Arc::new(NullDriver)));
        let (cq, _src) = driven(3, Some(other.clone()));
        let mut out = [NdResult::EMPTY; 2];
        assert_eq!(cq.get_results(&mut out), 2);
        assert_eq!(
            [out[0].request_context, out[1].request_context],
            [0, 1],
            "made by this call's drive, in order"
        );
        assert_eq!(cq.queued_hint(), 1, "the third had no room: queued");
        assert_eq!(other.queued_hint(), 1, "another CQ's completion went to it");
        // The queued one was pushed (its notification rules apply): Notify fires at once.
        assert!(cq.notify(NotifyType::Any).is_complete());
        let mut one = [NdResult::EMPTY; 1];
        assert_eq!(cq.get_results(&mut one), 1);
        assert_eq!(one[0].request_context, 2);
    }

    #[test]
    fn an_armed_notify_is_not_bypassed_by_a_driven_completion() {
        let (cq, _src) = driven(1, None);
        let ov = cq.notify(NotifyType::Any);
        let mut out = [NdResult::EMPTY; 4];
        // The re-poll right after arming does not drive (`get_results`); the next one does.
        assert_eq!(cq.get_results(&mut out), 0);
        assert!(!ov.is_complete());
        assert_eq!(cq.get_results(&mut out), 1);
        assert_eq!(
            ov.try_result(),
            Some(Ok(())),
            "the completion the drive made fired the armed Notify"
        );
    }

    #[test]
    fn notify_race_rule() {
        let cq = CqCore::new(4, Arc::new(NullDriver));
        // An entry queued before Notify, never reported: Notify fires at once.
        cq.push(r(Status::SUCCESS), PushKind::default());
        assert!(cq.notify(NotifyType::Any).is_complete());
        // That entry cannot fire a second time.
        let ov = cq.notify(NotifyType::Any);
        assert!(!ov.is_complete());
        cq.push(r(Status::SUCCESS), PushKind::default());
        assert_eq!(ov.try_result(), Some(Ok(())));
    }

    #[test]
    fn solicited_only_fires_on_solicited_or_error() {
        let cq = CqCore::new(8, Arc::new(NullDriver));
        let ov = cq.notify(NotifyType::Solicited);
        cq.push(r(Status::SUCCESS), PushKind::default());
        assert!(!ov.is_complete());
        cq.push(r(Status::SUCCESS), PushKind { solicited: true });
        assert!(ov.is_complete());
        let ov = cq.notify(NotifyType::Solicited);
        cq.push(r(Status::CANCELED), PushKind::default());
        assert!(ov.is_complete(), "errors always satisfy a notify");
    }

    #[test]
    fn errors_fires_only_on_error_and_overrun_outlives_resize() {
        let cq = CqCore::new(2, Arc::new(NullDriver));
        let ov = cq.notify(NotifyType::Errors);
        cq.push(r(Status::SUCCESS), PushKind { solicited: true });
        assert!(!ov.is_complete(), "a solicited success is not an error");
        cq.push(r(Status::REMOTE_ERROR), PushKind::default());
        assert_eq!(ov.try_result(), Some(Ok(())));
        // Overrun: the third entry is kept; the CQ stays unusable even after growing.
        let pending = cq.notify(NotifyType::Errors);
        cq.push(r(Status::SUCCESS), PushKind::default());
        assert_eq!(
            pending.try_result(),
            Some(Err(Error::new(Status::BUFFER_OVERFLOW)))
        );
        cq.resize(16).expect("grow");
        assert_eq!(
            cq.notify(NotifyType::Any).try_result(),
            Some(Err(Error::new(Status::BUFFER_OVERFLOW)))
        );
        let mut out = [NdResult::EMPTY; 4];
        assert_eq!(cq.get_results(&mut out), 3, "nothing is lost");
    }

    #[test]
    fn short_poll_clears_and_all_waiters_fire_together() {
        let cq = CqCore::new(8, Arc::new(NullDriver));
        cq.push(r(Status::SUCCESS), PushKind::default());
        let mut out = [NdResult::EMPTY; 4];
        assert_eq!(cq.get_results(&mut out), 1);
        let a = cq.notify(NotifyType::Solicited);
        let b = cq.notify(NotifyType::Any);
        assert!(!a.is_complete() && !b.is_complete());
        cq.push(r(Status::SUCCESS), PushKind::default());
        assert!(
            a.is_complete() && b.is_complete(),
            "ANY upgraded the SOLICITED request"
        );
    }

    #[test]
    fn overrun_and_resize() {
        let cq = CqCore::new(2, Arc::new(NullDriver)).with_max_depth(4);
        cq.push(r(Status::SUCCESS), PushKind::default());
        cq.push(r(Status::SUCCESS), PushKind::default());
        assert_eq!(cq.resize(1).unwrap_err().status(), Status::BUFFER_OVERFLOW);
        for beyond in [0, 5] {
            let e = cq.resize(beyond).unwrap_err().status();
            assert_eq!(e, Status::INVALID_PARAMETER, "depth {beyond}");
        }
        cq.push(r(Status::SUCCESS), PushKind::default());
        assert_eq!(cq.len(), 3, "nothing is lost");
        assert_eq!(
            cq.notify(NotifyType::Any).try_result(),
            Some(Err(Error::new(Status::BUFFER_OVERFLOW)))
        );
    }

    #[test]
    fn rearmed_notify_starts_pending() {
        // Notify requests are recycled (`OvRecycler`): a re-armed one must not inherit the
        // earlier one's completion.
        let cq = CqCore::new(64, Arc::new(NullDriver));
        let mut prev = None;
        for _ in 0..5 {
            let ov = cq.notify(NotifyType::Any);
            assert!(!ov.is_complete());
            cq.push(r(Status::SUCCESS), PushKind::default());
            assert_eq!(ov.try_result(), Some(Ok(())));
            let mut out = [NdResult::EMPTY; 4];
            assert_eq!(cq.get_results(&mut out), 1);
            // Keep the last one across the next Notify, as applications do.
            prev = Some(ov);
        }
        drop(prev);
    }

    /// Counts the drives `get_results` makes.
    #[derive(Default)]
    struct Counter(AtomicUsize);
    impl ProgressSource for Counter {
        fn progress(&self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn first_poll_after_arming_does_not_drive() {
        let cq = CqCore::new(8, Arc::new(NullDriver));
        let qp = Arc::new(Counter::default());
        let weak: Weak<dyn ProgressSource> = Arc::downgrade(&qp) as _;
        cq.attach(weak);
        let drives = || qp.0.load(Ordering::Relaxed);
        let mut out = [NdResult::EMPTY; 4];
        assert_eq!(cq.get_results(&mut out), 0);
        assert_eq!(drives(), 1, "an empty poll drives I/O");
        let ov = cq.notify(NotifyType::Any);
        assert_eq!(cq.get_results(&mut out), 0);
        assert_eq!(drives(), 1, "the re-poll after arming does not");
        assert_eq!(cq.get_results(&mut out), 0);
        assert_eq!(
            drives(),
            2,
            "later polls drive again (an app that only polls progresses)"
        );
        // What is queued is always reported, also by the first poll after arming.
        cq.push(r(Status::SUCCESS), PushKind::default());
        assert_eq!(ov.try_result(), Some(Ok(())));
        let ov = cq.notify(NotifyType::Any);
        cq.push(r(Status::SUCCESS), PushKind::default());
        assert!(ov.is_complete());
        let ov = cq.notify(NotifyType::Any);
        assert!(!ov.is_complete());
        assert_eq!(
            cq.get_results(&mut out),
            2,
            "queued entries, reported at once"
        );
        assert_eq!(drives(), 2);
        assert_eq!(cq.get_results(&mut out), 0);
        assert_eq!(
            drives(),
            2,
            "the first empty poll since arming skips the drive"
        );
        assert_eq!(cq.get_results(&mut out), 0);
        assert_eq!(drives(), 3, "one skip per arm");
        // A Notify that already fired, or was canceled, lets the next poll drive.
        let ov = cq.notify(NotifyType::Any);
        cq.cancel_overlapped_requests();
        assert_eq!(ov.try_result(), Some(Err(Error::CANCELED)));
        assert_eq!(cq.get_results(&mut out), 0);
        assert_eq!(drives(), 4);
    }

    #[test]
    fn queued_hint_follows_pushes_and_takes() {
        let cq = CqCore::new(2, Arc::new(NullDriver));
        assert_eq!(cq.queued_hint(), 0);
        for n in 1..=3 {
            // The third overruns the depth: it is kept, and counted.
            cq.push(r(Status::SUCCESS), PushKind::default());
            assert_eq!(cq.queued_hint(), n);
        }
        let mut two = [NdResult::EMPTY; 2];
        assert_eq!(cq.get_results(&mut two), 2);
        assert_eq!(cq.queued_hint(), 1);
        let mut four = [NdResult::EMPTY; 4];
        assert_eq!(cq.get_results(&mut four), 1);
        assert_eq!(cq.queued_hint(), 0);
        assert_eq!(cq.get_results(&mut four), 0);
        assert_eq!(cq.queued_hint(), 0);
    }

    #[test]
    fn cancel_completes_notify() {
        let cq = CqCore::new(1, Arc::new(NullDriver));
        let ov = cq.notify(NotifyType::Any);
        cq.cancel_overlapped_requests();
        assert_eq!(ov.try_result(), Some(Err(Error::CANCELED)));
    }

    /// A Notify withdrawn on its own (a dropped future) arms nothing: the next entry is not
    /// spent firing it, and a later Notify completes at once for that entry.
    #[test]
    fn a_withdrawn_notify_does_not_swallow_the_next_entry() {
        let cq = CqCore::new(4, Arc::new(NullDriver));
        let mut out = [NdResult::EMPTY; 2];
        assert_eq!(cq.get_results(&mut out), 0, "a short poll");
        let ov = cq.notify(NotifyType::Any);
        ov.cancel();
        assert_eq!(ov.try_result(), Some(Err(Error::CANCELED)));
        cq.push(r(Status::SUCCESS), PushKind::default());
        let again = cq.notify(NotifyType::Any);
        assert_eq!(
            again.try_result(),
            Some(Ok(())),
            "an entry arrived after the short poll and was never reported"
        );
        // While it is withdrawn, completions may go straight to a poller again.
        assert_eq!(cq.get_results(&mut out), 1);
        let ov = cq.notify(NotifyType::Solicited);
        ov.cancel();
        cq.push(r(Status::SUCCESS), PushKind::default());
        assert!(
            !cq.owes_notify.load(Ordering::Acquire),
            "nothing armed any more"
        );
    }

    /// An ANY that completes at once (an entry arrived since the last short poll) raises the
    /// type in force over a pending SOLICITED: both complete on that entry.
    #[test]
    fn an_immediate_any_completes_a_pending_solicited() {
        let cq = CqCore::new(4, Arc::new(NullDriver));
        let mut out = [NdResult::EMPTY; 2];
        assert_eq!(cq.get_results(&mut out), 0);
        let solicited = cq.notify(NotifyType::Solicited);
        cq.push(r(Status::SUCCESS), PushKind::default());
        assert!(!solicited.is_complete(), "an unsolicited entry");
        let any = cq.notify(NotifyType::Any);
        assert_eq!(any.try_result(), Some(Ok(())));
        assert_eq!(
            solicited.try_result(),
            Some(Ok(())),
            "completed with the ANY"
        );
        // That entry fired them: it fires nothing more.
        assert!(!cq.notify(NotifyType::Any).is_complete());
    }

    /// A drive that completes more than the direct collector holds: the rest, queued, comes
    /// back in the same call, so a short return means nothing is left.
    #[test]
    fn a_short_get_results_leaves_nothing_queued() {
        let cq = Arc::new(CqCore::new(64, Arc::new(NullDriver)));
        let src = Arc::new(Completer {
            cq: cq.clone(),
            other: None,
            n: 20,
        });
        let weak: Weak<dyn ProgressSource> = Arc::downgrade(&src) as Weak<dyn ProgressSource>;
        cq.attach(weak);
        let mut out = [NdResult::EMPTY; 32];
        assert_eq!(cq.get_results(&mut out), 20);
        let contexts: Vec<u64> = out[..20].iter().map(|e| e.request_context).collect();
        assert_eq!(contexts, (0..20).collect::<Vec<u64>>(), "in order");
        assert_eq!(cq.queued_hint(), 0);
    }

    /// A lock-free empty poll (`short_poll`) is a short poll for the race rule: an entry
    /// reported before it fires no later Notify; one still queued is not forgotten.
    #[test]
    fn a_lock_free_short_poll_forgets_reported_entries_only() {
        let cq = CqCore::new(4, Arc::new(NullDriver));
        cq.push(r(Status::SUCCESS), PushKind::default());
        let mut one = [NdResult::EMPTY; 1];
        assert_eq!(
            cq.get_results(&mut one),
            1,
            "not short: the entry is remembered"
        );
        cq.short_poll();
        let ov = cq.notify(NotifyType::Any);
        assert!(
            !ov.is_complete(),
            "everything was reported before the short poll"
        );
        cq.cancel_overlapped_requests();
        cq.push(r(Status::SUCCESS), PushKind::default());
        cq.short_poll();
        assert!(
            cq.notify(NotifyType::Any).is_complete(),
            "one is still queued"
        );
    }
}
