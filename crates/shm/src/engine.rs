//! The adapter's driver: who makes progress, and how a waiting thread sleeps and wakes.
//!
//! There is no progress thread. A polling caller (`CompletionQueue::get_results`) drives its
//! queue pairs' rings directly, without a syscall. A blocking caller (`Overlapped::wait`, a CQ
//! Notify wait) calls [`Driver::wait_for`], which, with no progress pass first,
//!
//! 1. *arms* every connection of the adapter: sets this side's `waiting` word in the segment
//!    (`ring::wake::arm`) and re-checks whether the ring already has something to do (a record to
//!    consume, space for a blocked Send, a peer that closed); if so, disarms and drives it;
//! 2. if nothing is ready, sleeps in `epoll_wait` on the adapter's epoll set, which holds every
//!    connection's Unix socket (the peer sends one WAKE message when it finds our `waiting` word
//!    set — for space only if we said we want some; end-of-file when it disconnects or dies),
//!    the listeners, the connection attempts and an eventfd that [`Driver::notify`] writes when
//!    a request completes on another thread;
//! 3. dispatches what became ready on its own thread, and disarms.
//!
//! A second blocking thread does not sleep in `epoll_wait` too: it waits on a condition variable
//! that the first one (the leader) and every completion signal, as in the `tcp` provider.
//!
//! A blocking waiter costs no system call beyond its sleep and the read of the WAKE that ended
//! it: a completion the sleeping thread makes itself (the usual case: it dispatched the event
//! that completed its own request) wakes nobody, and the leader hands over to followers only
//! if there are any. Other threads are woken only when they sleep.
//!
//! Once the application takes the adapter's descriptor ([`Engine::fd`]) for its own event loop,
//! every connection stays armed for good, so the peers always send WAKE and the descriptor
//! becomes readable whenever there is something to do; the loop then calls `Adapter::progress`.
//!
//! So do the connections of an adapter with more than [`MANY_LINKS`]: arming and disarming
//! each per sleep, and driving each per progress pass, cost O(connections) per wait (at
//! 6,000 connections most of a connection setup's time). Kept armed, a sleep is an
//! `epoll_wait` and a progress pass what it returns, for a WAKE message per record.

use std::fmt;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use netdirect_spi::kit::overlapped::Driver;
use netdirect_spi::kit::progress::Activity;
use netdirect_spi::kit::timers::Timers;
use netdirect_spi::kit::waiters::{Waiters, WakeFd};
use rustix::event::epoll::{self, EventData, EventFlags};
use slab::Slab;

use crate::link::Link;

/// Something whose descriptor is in the epoll set: a listener, a connection attempt, a link.
pub(crate) trait Source: Send + Sync {
    /// The descriptor is readable (or hung up): do what can be done without blocking.
    fn on_ready(&self);

    /// A deadline set with [`Engine::add_timer`] passed (checked whenever the engine is driven).
    fn on_timer(&self) {}
}

const WAKE_TOKEN: u64 = 0;

/// Beyond this many connections an adapter keeps them all armed (the module's remarks).
const MANY_LINKS: usize = 64;

/// How often (ms) every connection is looked at while they all stay armed (work a caller left
/// undone raises no WAKE; receiver-not-ready bounds), and so how late such work may be taken.
const LOOK_MS: u64 = 50;
/// The deadlines' timerfd (no source has a key this large).
const TIMER_TOKEN: u64 = u64::MAX;

/// One per adapter.
pub(crate) struct Engine {
    epfd: OwnedFd,
    wake: WakeFd,
    sources: Mutex<Slab<Weak<dyn Source>>>,
    links: Mutex<Slab<Weak<Link>>>,
    /// The blocked threads: at most one leader asleep in `epoll_wait` (woken by the eventfd or
    /// a peer's WAKE), the others followers (`kit::waiters`).
    waiters: Waiters,
    fd_exported: AtomicBool,
    /// More than [`MANY_LINKS`] connections came: they stay armed, as with `fd_exported`.
    many: AtomicBool,
    /// When every connection was last looked at while they stay armed (`link::coarse_ms`).
    rnr_look: AtomicU64,
    /// Deadlines (listeners' waits for a REQUEST).
    timers: Timers<dyn Source>,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("sleepers", &self.waiters.sleepers())
            .finish()
    }
}

/// A descriptor in the epoll set; leaves it on drop (or [`Registered::into_inner`]). It may
/// share the descriptor with its owner ([`Engine::register_shared`]): one descriptor per
/// connection, not a duplicate for sending.
pub(crate) struct Registered {
    fd: Option<Arc<OwnedFd>>,
    engine: Arc<Engine>,
    key: usize,
}

impl fmt::Debug for Registered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Registered({})", self.key)
    }
}

impl Registered {
    pub(crate) fn fd(&self) -> &OwnedFd {
        self.fd.as_ref().expect("present until into_inner")
    }

    /// Leave the epoll set and give the descriptor back (a duplicate of it, in the unexpected
    /// case that it is shared; `None` if even that fails).
    pub(crate) fn into_inner(mut self) -> Option<OwnedFd> {
        self.retire();
        let fd = self.fd.take()?;
        Arc::try_unwrap(fd)
            .or_else(|shared| shared.try_clone())
            .ok()
    }

    fn retire(&mut self) {
        if let Some(fd) = &self.fd {
            let _ = epoll::delete(&self.engine.epfd, fd);
        }
        let mut s = self.engine.lock_sources();
        if s.contains(self.key) {
            s.remove(self.key);
        }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        if self.fd.is_some() {
            self.retire();
        }
    }
}

thread_local! {
    static LINKS: std::cell::RefCell<Vec<Weak<Link>>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Engine {
    pub(crate) fn new() -> std::io::Result<Arc<Self>> {
        let epfd = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        let wake = WakeFd::new()?;
        epoll::add(&epfd, &wake, EventData::new_u64(WAKE_TOKEN), EventFlags::IN)?;
        let timers = Timers::in_epoll(&epfd, TIMER_TOKEN)?;
        Ok(Arc::new(Self {
            epfd,
            wake,
            sources: Mutex::new(Slab::new()),
            links: Mutex::new(Slab::new()),
            waiters: Waiters::new(),
            fd_exported: AtomicBool::new(false),
            many: AtomicBool::new(false),
            rnr_look: AtomicU64::new(0),
            timers,
        }))
    }

    fn lock_sources(&self) -> MutexGuard<'_, Slab<Weak<dyn Source>>> {
        self.sources.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_links(&self) -> MutexGuard<'_, Slab<Weak<Link>>> {
        self.links.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Watch `fd` (level-triggered, readable or hung up) on behalf of `source`.
    pub(crate) fn register(
        self: &Arc<Self>,
        fd: OwnedFd,
        source: Weak<dyn Source>,
    ) -> std::io::Result<Registered> {
        self.register_shared(Arc::new(fd), source)
    }

    /// [`Engine::register`] a descriptor its owner keeps using (and closing with its last
    /// reference).
    pub(crate) fn register_shared(
        self: &Arc<Self>,
        fd: Arc<OwnedFd>,
        source: Weak<dyn Source>,
    ) -> std::io::Result<Registered> {
        let key = self.lock_sources().insert(source);
        let flags = EventFlags::IN | EventFlags::RDHUP;
        if let Err(e) = epoll::add(&self.epfd, &fd, EventData::new_u64(key as u64 + 1), flags) {
            self.lock_sources().remove(key);
            return Err(e.into());
        }
        Ok(Registered {
            fd: Some(fd),
            engine: self.clone(),
            key,
        })
    }

    /// Add a connection to those a waiter arms; returns its key for [`Engine::remove_link`].
    pub(crate) fn add_link(&self, link: Weak<Link>) -> usize {
        let (key, count) = {
            let mut links = self.lock_links();
            (links.insert(link), links.len())
        };
        // SeqCst, as the export's swap (`Engine::fd`).
        if count > MANY_LINKS && !self.many.swap(true, Ordering::SeqCst) {
            self.arm_exported();
        }
        // A leader already asleep armed the links it knew: this one's peer finds our
        // `waiting` word clear and sends no WAKE, so what it publishes (the RTR an Accept
        // waits for) would wake nobody. Wake the leader to arm again, with this link.
        if !self.fd_exported() && self.waiters.other_leader() {
            self.wake_leader();
        }
        key
    }

    pub(crate) fn remove_link(&self, key: usize) {
        let mut l = self.lock_links();
        if l.contains(key) {
            l.remove(key);
        }
    }

    /// Whether links stay armed: the adapter descriptor was handed to an event loop, or the
    /// adapter has many connections (see the module's remarks).
    pub(crate) fn fd_exported(&self) -> bool {
        self.fd_exported.load(Ordering::Acquire) || self.many.load(Ordering::Acquire)
    }

    /// Whether a thread is inside a blocking wait on this adapter, or the descriptor went to an
    /// event loop: then work may not be left for the application's next call (held
    /// acknowledgements, `qp`), since a sleeper armed before it was left would not see it.
    /// The caller stores its "work left" flag (`SeqCst`) before asking.
    pub(crate) fn anyone_waiting(&self) -> bool {
        // SeqCst: pairs with the export's swap and its look at the links (`Engine::fd`).
        self.fd_exported.load(Ordering::SeqCst)
            || self.many.load(Ordering::SeqCst)
            || self.waiters.anyone_waiting()
    }

    /// The adapter's overlapped descriptor: the epoll set. From the first call on every
    /// connection stays armed, so the descriptor reports ring activity too.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        // SeqCst: a polling pass that holds ACKs stores its flag and then looks for an
        // export (`anyone_waiting`); this swap comes before the links are looked at, so either
        // that pass sees the export and holds nothing, or the look below finds the flag.
        if !self.fd_exported.swap(true, Ordering::SeqCst) {
            self.arm_exported();
        }
        self.epfd.as_fd()
    }

    /// Arm every connection for the exported descriptor, and make the descriptor readable at
    /// once if one has work already: a record published while we were not armed came with no
    /// WAKE, and an ACK a polling pass held waits for a call nobody will make, while the
    /// event loop that adopted the descriptor waits for it to become readable (and the peer,
    /// perhaps, for that ACK). The event loop's `progress` then drives the connection.
    fn arm_exported(&self) {
        let mut work = false;
        self.for_each_link(|l| work |= l.arm());
        if work {
            self.wake_leader();
        }
    }

    /// Call `source.on_timer()` once `at` has passed.
    pub(crate) fn add_timer(&self, at: std::time::Instant, source: Weak<dyn Source>) {
        self.timers.add(at, source);
    }

    /// Fire the deadlines that passed; how long until the next one.
    fn run_timers(&self) -> Option<Duration> {
        self.timers.run_due(|s| s.on_timer())
    }

    /// Take and release the lock of every connected queue pair: whatever ran under one when
    /// this was called is over when it returns (`mr::Table::set_copy_barrier`).
    pub(crate) fn fence_queue_pairs(&self) {
        self.for_each_link(|l| l.fence());
    }

    /// Run `f` on every live link, without holding the registry lock while it runs.
    fn for_each_link(&self, mut f: impl FnMut(&Arc<Link>)) {
        LINKS.with(|scratch| {
            let Ok(mut list) = scratch.try_borrow_mut() else {
                // Re-entered from inside `f`: take a private list.
                let list: Vec<_> = self.lock_links().iter().map(|(_, l)| l.clone()).collect();
                for l in list.iter().filter_map(Weak::upgrade) {
                    f(&l);
                }
                return;
            };
            list.clear();
            list.extend(self.lock_links().iter().map(|(_, l)| l.clone()));
            for l in list.iter().filter_map(Weak::upgrade) {
                f(&l);
            }
            list.clear();
        });
    }

    /// Dispatch what is ready, sleeping at most `timeout` (`Some(ZERO)`: not at all).
    fn poll(&self, timeout: Option<Duration>) {
        let mut events = [MaybeUninit::<epoll::Event>::uninit(); 32];
        let ts = timeout.map(|t| rustix::time::Timespec {
            tv_sec: t.as_secs().min(i32::MAX as u64) as _,
            tv_nsec: t.subsec_nanos() as _,
        });
        let ready = match epoll::wait(&self.epfd, &mut events[..], ts.as_ref()) {
            Ok((ready, _)) => ready,
            Err(_) => return, // EINTR: the caller re-checks its condition
        };
        for ev in ready.iter() {
            let token = ev.data.u64();
            if token == WAKE_TOKEN {
                // Not necessarily the leader's dispatch: `WakeFd::drain`.
                self.wake.drain(&self.waiters);
                continue;
            }
            if token == TIMER_TOKEN {
                self.run_timers();
                continue;
            }
            let source = self
                .lock_sources()
                .get(token as usize - 1)
                .and_then(Weak::upgrade);
            if let Some(s) = source {
                s.on_ready();
            }
        }
    }

    /// Make the epoll set readable: the leader's `epoll_wait` (and an external event loop)
    /// returns. The count is reset by the next dispatch (`Engine::poll`), which passes it on
    /// if it was not the leader's (`WakeFd::drain`).
    fn wake_leader(&self) {
        self.wake.wake();
    }

    /// With many links: whether the periodic look at every link is due (and then it is taken
    /// now).
    fn look_due(&self) -> bool {
        let now = crate::link::coarse_ms();
        let last = self.rnr_look.load(Ordering::Relaxed);
        now.saturating_sub(last) >= LOOK_MS
            && self
                .rnr_look
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// The leader's turn: arm every connection and sleep unless one has work already, then
    /// dispatch what became ready and disarm (`ring::wake`).
    fn lead(&self, timeout: Option<Duration>) {
        let mut ready = false;
        let mut timeout = timeout;
        if let Some(d) = self.run_timers() {
            timeout = Some(timeout.map_or(d, |t| t.min(d)));
        }
        if self.many.load(Ordering::Acquire) {
            // Every link is armed for good: what gets work sends a WAKE. The look at every
            // link (work a caller left, receiver-not-ready bounds) comes every [`LOOK_MS`]
            // only, and no sleep lasts longer.
            if self.look_due() {
                self.for_each_link(|l| {
                    ready |= l.arm();
                    if let Some(d) = l.rnr_wait() {
                        timeout = Some(timeout.map_or(d, |t| t.min(d)));
                    }
                });
            }
            let most = Duration::from_millis(LOOK_MS);
            timeout = Some(timeout.map_or(most, |t| t.min(most)));
        } else {
            self.for_each_link(|l| {
                ready |= l.arm();
                // A message held for want of a Receive: wake when its bound runs out.
                if let Some(d) = l.rnr_wait() {
                    timeout = Some(timeout.map_or(d, |t| t.min(d)));
                }
            });
        }
        if !ready {
            self.poll(timeout);
        }
        if !self.fd_exported() {
            self.for_each_link(|l| l.disarm());
            // The descriptor may have been exported meanwhile (`Engine::fd` armed every
            // link, perhaps before this pass disarmed them): an exported descriptor must
            // hear every ring, so arm them again.
            if self.fd_exported() {
                self.arm_exported();
            }
        }
        if ready {
            // Work arrived before the `waiting` words were set, so no WAKE announces it:
            // take it now (the caller skipped the progress pass, `wait_for`), disarmed, so
            // that what it publishes does not make the peer send WAKEs nobody sleeps for.
            self.progress();
        }
    }
}

/// The engine as the kit's adapter uses it: its descriptor.
impl netdirect_spi::kit::adapter::Engine for Engine {
    fn fd(&self) -> BorrowedFd<'_> {
        Self::fd(self)
    }
}

impl Driver for Engine {
    fn progress(&self) {
        // An application's own drive (GetOverlappedResult, an event loop): the progress
        // engine stays away while they come (`kit::progress`).
        self.waiters.activity().touch_unless_engine();
        self.poll(Some(Duration::ZERO));
        self.run_timers();
        // With many links every one is armed: what has work sent a WAKE, which the poll
        // above took; all are driven every `LOOK_MS` only.
        if !self.many.load(Ordering::Acquire) || self.look_due() {
            self.for_each_link(|l| l.progress());
        }
    }

    fn wait(&self, timeout: Option<Duration>) {
        self.wait_for(&|| false, timeout);
    }

    fn activity(&self) -> Option<Arc<Activity>> {
        Some(self.waiters.activity().clone())
    }

    fn touch(&self) {
        self.waiters.activity().touch_unless_engine();
    }

    /// Sleep without a `progress` pass first: the leader arms every connection and re-checks
    /// its ring (`Link::arm`), driving it at once if it has work, and otherwise sleeps on the
    /// epoll set, where the other sources are level-triggered; so nothing a `progress` pass
    /// would have found is slept through. The caller has typically just polled its CQ, which
    /// looked at the same rings.
    fn wait_for(&self, done: &dyn Fn() -> bool, timeout: Option<Duration>) {
        let me = self.waiters.enter();
        // The role is taken and `done()` checked under the lock `notify` reads the roles
        // under: a completion elsewhere either precedes the check or finds this sleeper.
        let Some(_lead) = me.take_role(done, timeout) else {
            return;
        };
        self.lead(timeout);
        // `_lead` hands over to a follower, if any, before `me` leaves.
    }

    fn notify(&self) {
        let exported = self.fd_exported();
        if exported {
            // An external event loop watches the descriptor (and so does our leader).
            self.wake_leader();
        }
        // The leader's own dispatch wakes nobody; otherwise the leader (unless the write
        // above woke it already) and the followers, if any (`kit::waiters`).
        self.waiters.notify(exported, || self.wake_leader());
    }
}
