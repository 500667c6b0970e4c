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

use std::cell::Cell;
use std::fmt;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::Duration;

use netdirect_spi::kit::overlapped::Driver;
use rustix::event::epoll::{self, EventData, EventFlags};
use rustix::event::{eventfd, EventfdFlags};
use slab::Slab;

use crate::link::Link;

/// Something whose descriptor is in the epoll set: a listener, a connection attempt, a link.
pub(crate) trait Source: Send + Sync {
    /// The descriptor is readable (or hung up): do what can be done without blocking.
    fn on_ready(&self);
}

const WAKE_TOKEN: u64 = 0;

/// One per adapter.
pub(crate) struct Engine {
    epfd: OwnedFd,
    wake: OwnedFd,
    sources: Mutex<Slab<Weak<dyn Source>>>,
    links: Mutex<Slab<Weak<Link>>>,
    /// Who sleeps how; followers wait on `cond` for `Roles::generation` to move.
    roles: Mutex<Roles>,
    cond: Condvar,
    /// Threads inside `wait_for`: while there are none (besides the notifying thread itself),
    /// `notify` costs no lock and no system call.
    sleepers: AtomicUsize,
    fd_exported: AtomicBool,
}

/// The blocked threads: at most one leader asleep in `epoll_wait` (woken by the eventfd or a
/// peer's WAKE), and followers asleep on the condition variable (woken by a new `generation`).
#[derive(Debug, Default)]
struct Roles {
    leader: bool,
    followers: usize,
    generation: u64,
}

thread_local! {
    /// The engine whose `wait_for` this thread is inside (its address, 0 if none) and whether
    /// it is that engine's leader: its own completions need not wake it.
    static WAITING: Cell<(usize, bool)> = const { Cell::new((0, false)) };
}

/// This thread's presence in `Engine::wait_for`: counted in `sleepers`, marked in `WAITING`;
/// both undone on drop (also if a source panics while the leader dispatches).
struct Presence<'a> {
    engine: &'a Engine,
    outer: (usize, bool),
}

impl<'a> Presence<'a> {
    fn enter(engine: &'a Engine) -> Self {
        // SeqCst: announced before `done()` is read (see `Driver::wait_for`).
        engine.sleepers.fetch_add(1, Ordering::SeqCst);
        let outer = WAITING.with(|w| w.replace((engine.addr(), false)));
        Self { engine, outer }
    }

    fn set_leading(&self, yes: bool) {
        WAITING.with(|w| w.set((self.engine.addr(), yes)));
    }
}

impl Drop for Presence<'_> {
    fn drop(&mut self) {
        WAITING.with(|w| w.set(self.outer));
        self.engine.sleepers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The leader role, given up on drop: followers (if any) are woken so that one takes over
/// the sleep while this thread returns to its caller.
struct Leadership<'a> {
    engine: &'a Engine,
}

impl Drop for Leadership<'_> {
    fn drop(&mut self) {
        let mut roles = self.engine.lock_roles();
        roles.leader = false;
        if roles.followers > 0 {
            roles.generation += 1;
            drop(roles);
            self.engine.cond.notify_all();
        }
    }
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("sleepers", &self.sleepers.load(Ordering::Relaxed))
            .finish()
    }
}

/// A descriptor in the epoll set; leaves it on drop (or [`Registered::into_inner`]).
pub(crate) struct Registered {
    fd: Option<OwnedFd>,
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

    /// Leave the epoll set and give the descriptor back.
    pub(crate) fn into_inner(mut self) -> OwnedFd {
        self.retire();
        self.fd.take().expect("present until into_inner")
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
        let wake = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        epoll::add(&epfd, &wake, EventData::new_u64(WAKE_TOKEN), EventFlags::IN)?;
        Ok(Arc::new(Self {
            epfd,
            wake,
            sources: Mutex::new(Slab::new()),
            links: Mutex::new(Slab::new()),
            roles: Mutex::new(Roles::default()),
            cond: Condvar::new(),
            sleepers: AtomicUsize::new(0),
            fd_exported: AtomicBool::new(false),
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
        self.lock_links().insert(link)
    }

    pub(crate) fn remove_link(&self, key: usize) {
        let mut l = self.lock_links();
        if l.contains(key) {
            l.remove(key);
        }
    }

    /// Whether the adapter descriptor was handed to an event loop (links stay armed).
    pub(crate) fn fd_exported(&self) -> bool {
        self.fd_exported.load(Ordering::Acquire)
    }

    /// The adapter's overlapped descriptor: the epoll set. From the first call on every
    /// connection stays armed, so the descriptor reports ring activity too.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        if !self.fd_exported.swap(true, Ordering::AcqRel) {
            self.for_each_link(|l| {
                l.arm();
            });
        }
        self.epfd.as_fd()
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
                let mut buf = [0u8; 8];
                let _ = rustix::io::read(&self.wake, &mut buf);
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

    fn lock_roles(&self) -> MutexGuard<'_, Roles> {
        self.roles.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// This engine's identity for `WAITING`.
    fn addr(&self) -> usize {
        self as *const Self as usize
    }

    /// Make the epoll set readable: the leader's `epoll_wait` (and an external event loop)
    /// returns. The count is drained by the next dispatch (`Engine::poll`).
    fn wake_leader(&self) {
        let _ = rustix::io::write(&self.wake, &1u64.to_ne_bytes());
    }

    /// The leader's turn: arm every connection and sleep unless one has work already, then
    /// dispatch what became ready and disarm (`ring::wake`).
    fn lead(&self, timeout: Option<Duration>) {
        let mut ready = false;
        let mut timeout = timeout;
        self.for_each_link(|l| {
            ready |= l.arm();
            // A message held for want of a Receive: wake when its bound runs out.
            if let Some(d) = l.rnr_wait() {
                timeout = Some(timeout.map_or(d, |t| t.min(d)));
            }
        });
        if !ready {
            self.poll(timeout);
        }
        if !self.fd_exported() {
            self.for_each_link(|l| l.disarm());
        }
        if ready {
            // Work arrived before the `waiting` words were set, so no WAKE announces it:
            // take it now (the caller skipped the progress pass, `wait_for`), disarmed, so
            // that what it publishes does not make the peer send WAKEs nobody sleeps for.
            self.progress();
        }
    }
}

impl Driver for Engine {
    fn progress(&self) {
        self.poll(Some(Duration::ZERO));
        self.for_each_link(|l| l.progress());
    }

    fn wait(&self, timeout: Option<Duration>) {
        self.wait_for(&|| false, timeout);
    }

    /// Sleep without a `progress` pass first: the leader arms every connection and re-checks
    /// its ring (`Link::arm`), driving it at once if it has work, and otherwise sleeps on the
    /// epoll set, where the other sources are level-triggered; so nothing a `progress` pass
    /// would have found is slept through. The caller has typically just polled its CQ, which
    /// looked at the same rings.
    fn wait_for(&self, done: &dyn Fn() -> bool, timeout: Option<Duration>) {
        let me = Presence::enter(self);
        // The role is taken and `done()` checked under the lock `notify` reads the roles
        // under: a completion elsewhere either precedes the check or finds this sleeper.
        let mut roles = self.lock_roles();
        if done() {
            return;
        }
        if roles.leader {
            roles.followers += 1;
            let seen = roles.generation;
            let t = timeout.unwrap_or(Duration::from_secs(3600));
            let (mut roles, _) = self
                .cond
                .wait_timeout_while(roles, t, |r| r.generation == seen)
                .unwrap_or_else(|e| e.into_inner());
            roles.followers -= 1;
            return;
        }
        roles.leader = true;
        drop(roles);
        let _lead = Leadership { engine: self };
        me.set_leading(true);
        self.lead(timeout);
        me.set_leading(false);
        // `_lead` hands over to a follower, if any, before `me` leaves.
    }

    fn notify(&self) {
        let exported = self.fd_exported();
        if exported {
            // An external event loop watches the descriptor (and so does our leader).
            self.wake_leader();
        }
        let (here, leading) = WAITING.with(Cell::get);
        let in_wait = here == self.addr();
        if in_wait && leading {
            // The leader's own dispatch: it returns to its caller right after, which re-checks
            // its condition, and hands over to the followers then (`Leadership`).
            return;
        }
        // SeqCst: pairs with `Presence::enter`; the request's status was stored (SeqCst)
        // before this call.
        if self.sleepers.load(Ordering::SeqCst) <= usize::from(in_wait) {
            // Nobody else sleeps: the caller itself re-checks its condition.
            return;
        }
        let mut roles = self.lock_roles();
        let wake_leader = roles.leader && !exported;
        let wake_followers = roles.followers > 0;
        if wake_followers {
            roles.generation += 1;
        }
        drop(roles);
        if wake_leader {
            self.wake_leader();
        }
        if wake_followers {
            self.cond.notify_all();
        }
    }
}
