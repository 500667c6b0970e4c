//! Where NDK callbacks run, and the object-lifetime rules they obey (nd-v1-ndk §2.5, §2.7).
//!
//! Every callback runs on the adapter's callback thread ([`Dispatcher`]), never inside a
//! consumer's call and never inside a provider lock: an ND request's completion hook
//! (`Overlapped::wake_on_completion`, run by whichever thread completes it, usually the
//! progress engine) only queues the callback, and the callback thread runs it with nothing
//! held, so a callback may call back into any NDK function, close included. One thread per
//! adapter also serializes the callbacks, which NDK requires per CQ.
//!
//! [`Core`] is the lifetime state of one NDK object: how many of its requests and event
//! registrations are outstanding (armed, or queued, or with their callback running), how many
//! successors still hold it open, and the close that waits for both to reach zero. The close
//! completion is queued only then, so it is the object's last callback; the object then lets
//! its antecedents go, after its close callback has returned.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Wake, Waker};

use super::status::NtStatus;
use crate::Overlapped;

/// A queued callback.
pub(crate) type Task = Box<dyn FnOnce() + Send>;

/// A request completion callback (`NDK_FN_REQUEST_COMPLETION`; the context is the closure's).
pub type RequestCompletion = Box<dyn FnOnce(NtStatus) + Send>;
/// A close completion callback (`NDK_FN_CLOSE_COMPLETION`).
pub type CloseCompletion = Box<dyn FnOnce() + Send>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

thread_local! {
    static ON_DISPATCHER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread is an NDK callback thread.
pub fn on_callback_thread() -> bool {
    ON_DISPATCHER.with(std::cell::Cell::get)
}

#[derive(Default)]
struct Queue {
    tasks: VecDeque<Task>,
    /// A task is running.
    running: bool,
    stop: bool,
}

/// One adapter's callback thread and its queue.
pub(crate) struct Dispatcher {
    q: Mutex<Queue>,
    /// Signalled when a task is queued, and when the queue drains.
    cv: Condvar,
}

impl fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let q = lock(&self.q);
        f.debug_struct("Dispatcher")
            .field("queued", &q.tasks.len())
            .field("running", &q.running)
            .finish()
    }
}

impl Dispatcher {
    /// A dispatcher with its thread (`ndk-callbacks`); `None` if no thread could be made.
    pub(crate) fn start() -> Option<Arc<Self>> {
        let d = Arc::new(Self {
            q: Mutex::default(),
            cv: Condvar::new(),
        });
        let me = d.clone();
        std::thread::Builder::new()
            .name("ndk-callbacks".into())
            .spawn(move || me.run())
            .ok()?;
        Some(d)
    }

    fn run(&self) {
        ON_DISPATCHER.with(|c| c.set(true));
        let mut q = lock(&self.q);
        loop {
            if let Some(t) = q.tasks.pop_front() {
                q.running = true;
                drop(q);
                // A panicking consumer callback must not take every later callback with it.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(t));
                q = lock(&self.q);
                q.running = false;
                if q.tasks.is_empty() {
                    self.cv.notify_all();
                }
                continue;
            }
            if q.stop {
                return;
            }
            q = self.cv.wait(q).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Queue `t` to run on the callback thread.
    pub(crate) fn post(&self, t: Task) {
        let mut q = lock(&self.q);
        q.tasks.push_back(t);
        drop(q);
        self.cv.notify_all();
    }

    /// Block until nothing is queued or running (the adapter's blocking close). Not on the
    /// callback thread, which would wait for itself.
    pub(crate) fn drain(&self) {
        if on_callback_thread() {
            return;
        }
        let mut q = lock(&self.q);
        while q.running || !q.tasks.is_empty() {
            q = self.cv.wait(q).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Let the thread end once the queue is empty.
    pub(crate) fn stop(&self) {
        lock(&self.q).stop = true;
        self.cv.notify_all();
    }
}

/// A completion hook: queues its task when the request completes (once, whichever of the
/// waker or the "already complete" answer comes first).
struct Hook {
    dispatcher: Arc<Dispatcher>,
    task: Mutex<Option<Task>>,
}

impl Wake for Hook {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Runs on the completing thread, possibly inside a provider lock: only queue.
        if let Some(t) = lock(&self.task).take() {
            self.dispatcher.post(t);
        }
    }
}

/// Run `task` on the callback thread once `ov` has completed.
pub(crate) fn on_completion(d: &Arc<Dispatcher>, ov: &Overlapped, task: Task) {
    let hook = Arc::new(Hook {
        dispatcher: d.clone(),
        task: Mutex::new(Some(task)),
    });
    let waker = Waker::from(hook.clone());
    if ov.wake_on_completion(&waker) {
        hook.wake_by_ref();
    }
}

/// The NDK object types (`NDK_OBJECT_TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ObjectType {
    /// `NdkObjectTypeAdapter`.
    Adapter = 1,
    /// `NdkObjectTypeQp`.
    Qp = 2,
    /// `NdkObjectTypeCq`.
    Cq = 3,
    /// `NdkObjectTypeMr`.
    Mr = 4,
    /// `NdkObjectTypeMw`.
    Mw = 5,
    /// `NdkObjectTypePd`.
    Pd = 6,
    /// `NdkObjectTypeSharedEndpoint`.
    SharedEndpoint = 7,
    /// `NdkObjectTypeConnector`.
    Connector = 8,
    /// `NdkObjectTypeListener`.
    Listener = 9,
    /// `NdkObjectTypeSrq`.
    Srq = 10,
}

#[derive(Default)]
struct Life {
    /// Requests and event registrations whose callback has not yet returned (or been
    /// skipped).
    outstanding: usize,
    /// Successors not yet closed.
    successors: usize,
    /// Close has started: event callbacks are skipped from now on.
    closing: bool,
    /// The close finished (its completion queued or returned inline).
    closed: bool,
    close_cb: Option<CloseCompletion>,
    /// Runs when the close finishes, before the close completion: lets go of the ND objects.
    finalize: Option<Task>,
    antecedents: Vec<Arc<Core>>,
}

/// The lifetime state of one NDK object (module docs).
pub(crate) struct Core {
    pub(crate) ty: ObjectType,
    pub(crate) disp: Arc<Dispatcher>,
    life: Mutex<Life>,
}

impl fmt::Debug for Core {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = lock(&self.life);
        f.debug_struct("Core")
            .field("type", &self.ty)
            .field("outstanding", &l.outstanding)
            .field("successors", &l.successors)
            .field("closing", &l.closing)
            .finish()
    }
}

impl Core {
    /// A new object, a successor of each of `antecedents` until it is closed.
    pub(crate) fn new(
        ty: ObjectType,
        disp: &Arc<Dispatcher>,
        antecedents: &[&Arc<Self>],
    ) -> Arc<Self> {
        let core = Arc::new(Self {
            ty,
            disp: disp.clone(),
            life: Mutex::default(),
        });
        for a in antecedents {
            core.depend_on(a);
        }
        core
    }

    /// Make this object a successor of `a` (QP → connector at Connect/Accept, MR → MW at
    /// Bind): `a`'s close pends until this one has closed.
    pub(crate) fn depend_on(&self, a: &Arc<Self>) {
        lock(&a.life).successors += 1;
        lock(&self.life).antecedents.push(a.clone());
    }

    /// Whether close has started (event callbacks stop).
    pub(crate) fn is_closing(&self) -> bool {
        lock(&self.life).closing
    }

    /// A request or event registration starts: its callback (or its skip) must come before
    /// the close completion. Returns `false` (nothing counted) once close has started.
    pub(crate) fn begin(&self) -> bool {
        let mut l = lock(&self.life);
        if l.closing {
            return false;
        }
        l.outstanding += 1;
        true
    }

    /// [`Core::begin`] even while closing (a request's completion must still be reported).
    pub(crate) fn begin_always(&self) {
        lock(&self.life).outstanding += 1;
    }

    /// A guard that calls [`Core::end`] when dropped: at the end of a callback task, even
    /// one whose consumer callback panicked (the close must still come).
    pub(crate) fn ending(self: &Arc<Self>) -> Ending {
        Ending(self.clone())
    }

    /// A request's or registration's callback has returned (or was skipped).
    pub(crate) fn end(self: &Arc<Self>) {
        let mut l = lock(&self.life);
        l.outstanding -= 1;
        self.maybe_finish(l);
    }

    /// Start closing: event callbacks stop. The object's own close code cancels what is
    /// pending (`cancel`), then [`Core::finish_close`].
    pub(crate) fn start_close(&self) -> bool {
        let mut l = lock(&self.life);
        let first = !l.closing;
        l.closing = true;
        first
    }

    /// Finish a close once nothing is outstanding and no successor is open: inline
    /// (`STATUS_SUCCESS`, no callback) if that is already so, else `STATUS_PENDING` and `cb`
    /// later on the callback thread, as the object's last callback.
    pub(crate) fn finish_close(self: &Arc<Self>, finalize: Task, cb: CloseCompletion) -> NtStatus {
        let mut l = lock(&self.life);
        if l.closed || l.close_cb.is_some() {
            // A second close: the consumer broke the contract; answer without a callback.
            return NtStatus::INVALID_DEVICE_STATE;
        }
        l.finalize = Some(finalize);
        if l.outstanding == 0 && l.successors == 0 {
            l.closed = true;
            let finalize = l.finalize.take();
            let antecedents = std::mem::take(&mut l.antecedents);
            drop(l);
            if let Some(f) = finalize {
                f();
            }
            release(antecedents);
            return NtStatus::SUCCESS;
        }
        l.close_cb = Some(cb);
        NtStatus::PENDING
    }

    /// A successor has closed.
    fn successor_closed(self: &Arc<Self>) {
        let mut l = lock(&self.life);
        l.successors -= 1;
        self.maybe_finish(l);
    }

    /// Queue the close completion if the close waits and nothing holds it any more.
    fn maybe_finish(self: &Arc<Self>, mut l: MutexGuard<'_, Life>) {
        if !(l.outstanding == 0 && l.successors == 0 && !l.closed) {
            return;
        }
        let Some(cb) = l.close_cb.take() else {
            return;
        };
        l.closed = true;
        let finalize = l.finalize.take();
        let antecedents = std::mem::take(&mut l.antecedents);
        drop(l);
        self.disp.post(Box::new(move || {
            if let Some(f) = finalize {
                f();
            }
            cb();
            // After the close callback returned: an antecedent's close may complete now.
            release(antecedents);
        }));
    }
}

/// See [`Core::ending`].
pub(crate) struct Ending(Arc<Core>);

impl Drop for Ending {
    fn drop(&mut self) {
        self.0.end();
    }
}

fn release(antecedents: Vec<Arc<Core>>) {
    for a in antecedents {
        a.successor_closed();
    }
}

/// How requests that may pend complete (an adapter-wide choice, `OpenParams::completion`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CompletionMode {
    /// Work finished during the call returns its status inline (no callback); only work that
    /// is still in progress returns `STATUS_PENDING`. The default.
    #[default]
    Inline,
    /// Every request that may pend returns `STATUS_PENDING` and reports its status, success
    /// or failure, through its completion callback: what a consumer must handle from a
    /// provider that completes everything in hardware.
    Pending,
}

impl CompletionMode {
    /// `inline` or `pending` (the `ND_NDK_COMPLETION` spelling).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "inline" => Some(Self::Inline),
            "pending" => Some(Self::Pending),
            _ => None,
        }
    }
}

/// Report a request that finished during the call with `status`: inline (`after` runs, no
/// callback), or in [`CompletionMode::Pending`] through `cb` on the callback thread.
pub(crate) fn finish(
    core: &Arc<Core>,
    mode: CompletionMode,
    status: NtStatus,
    cb: RequestCompletion,
) -> NtStatus {
    if mode == CompletionMode::Inline || status == NtStatus::PENDING {
        return status;
    }
    core.begin_always();
    let c = core.clone();
    core.disp.post(Box::new(move || {
        let _end = c.ending();
        cb(status);
    }));
    NtStatus::PENDING
}

/// Report a request the engine runs as `ov`: inline if it has completed and the mode allows,
/// else `STATUS_PENDING` and `cb` once it completes. `after` runs first either way, on the
/// thread that reports (the consumer's, inline; the callback thread, else) and may change the
/// status (a follow-up step that failed).
pub(crate) fn track(
    core: &Arc<Core>,
    mode: CompletionMode,
    ov: crate::Result<Overlapped>,
    after: impl FnOnce(NtStatus) -> NtStatus + Send + 'static,
    cb: RequestCompletion,
) -> NtStatus {
    let ov = match ov {
        Ok(ov) => ov,
        Err(e) => return finish(core, mode, after(NtStatus::from(e)), cb),
    };
    if mode == CompletionMode::Inline {
        if let Some(r) = ov.try_result() {
            return after(r.map_or_else(NtStatus::from, |()| NtStatus::SUCCESS));
        }
    }
    core.begin_always();
    let c = core.clone();
    let done = ov.clone();
    on_completion(
        &core.disp,
        &ov,
        Box::new(move || {
            let _end = c.ending();
            let s = done.try_result().map_or(NtStatus::INTERNAL_ERROR, |r| {
                r.map_or_else(NtStatus::from, |()| NtStatus::SUCCESS)
            });
            cb(after(s));
        }),
    );
    NtStatus::PENDING
}
