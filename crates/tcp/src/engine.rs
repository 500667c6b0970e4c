//! The adapter's I/O engine: an epoll set of every socket the adapter owns, plus an eventfd.
//!
//! There is no progress thread. Whoever waits drives the I/O:
//! * a polling caller (`CompletionQueue::get_results`) reads its queue pairs' sockets directly;
//! * a blocking caller (`Overlapped::wait`) calls [`Engine::wait`], which sleeps in `epoll_wait`
//!   on the whole set and dispatches what became ready on its own thread, so one message costs
//!   one wake-up. Several blocking callers share the set leader/follower style: one sleeps in
//!   `epoll_wait`, the others on a condition variable that every completion signals.
//!
//! The epoll descriptor doubles as the adapter's overlapped file ([`Engine::fd`]): it becomes
//! readable when a socket needs attention or a request completed on another thread (the eventfd
//! inside it is written then), and the owner of an external event loop calls
//! `Adapter::progress` when it is.

use std::fmt;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use netdirect_spi::kit::overlapped::Driver;
use rustix::event::epoll::{self, EventData, EventFlags};
use rustix::event::{eventfd, EventfdFlags};
use slab::Slab;

/// Something registered with the engine: a listener, a pending handshake, a queue pair.
pub(crate) trait Source: Send + Sync {
    /// The socket is ready (readable, writable or hung up); drain what can be drained.
    /// Sockets are edge-triggered, so a source must read until `EAGAIN` or remember that it
    /// stopped early and resume on its own later.
    fn on_ready(&self, events: EventFlags);

    /// A deadline set with [`Engine::add_timer`] passed (checked whenever the engine is driven).
    fn on_timer(&self) {}
}

/// Token 0 is the eventfd; sources get `slab key + 1`.
const WAKE_TOKEN: u64 = 0;

/// One epoll set per adapter.
pub(crate) struct Engine {
    epfd: OwnedFd,
    wake: OwnedFd,
    sources: Mutex<Slab<Weak<dyn Source>>>,
    /// Held by the thread sleeping in `epoll_wait` (the leader).
    leader: Mutex<()>,
    /// Followers sleep here; bumped on every notify.
    generation: Mutex<u64>,
    cond: Condvar,
    /// Threads inside `wait`: `notify` only pays for the eventfd write when someone sleeps
    /// or an external event loop watches the descriptor.
    sleepers: AtomicUsize,
    fd_exported: AtomicBool,
    /// Deadlines (connect timeouts). Few and short-lived: a plain list.
    timers: Mutex<Vec<(Instant, Weak<dyn Source>)>>,
    /// Whether `timers` may be non-empty (keeps the polling path free of the lock).
    has_timers: AtomicBool,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("sleepers", &self.sleepers.load(Ordering::Relaxed))
            .finish()
    }
}

/// A socket registered in the engine. It leaves the epoll set (and the token is retired) when
/// dropped or taken back with [`Registered::into_inner`], before the socket can be closed or
/// handed to another source, so a reused token never reaches the wrong source.
pub(crate) struct Registered<S: AsFd> {
    sock: Option<S>,
    engine: Arc<Engine>,
    key: usize,
}

impl<S: AsFd> fmt::Debug for Registered<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Registered({})", self.key)
    }
}

impl<S: AsFd> Registered<S> {
    /// The socket.
    pub(crate) fn get(&self) -> &S {
        self.sock.as_ref().expect("present until into_inner")
    }

    /// Leave the epoll set and give the socket back.
    pub(crate) fn into_inner(mut self) -> S {
        self.retire();
        self.sock.take().expect("present until into_inner")
    }

    fn retire(&mut self) {
        if let Some(s) = &self.sock {
            let _ = epoll::delete(&self.engine.epfd, s);
        }
        let mut slab = self.engine.lock_sources();
        if slab.contains(self.key) {
            slab.remove(self.key);
        }
    }
}

impl<S: AsFd> Drop for Registered<S> {
    fn drop(&mut self) {
        if self.sock.is_some() {
            self.retire();
        }
    }
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
            leader: Mutex::new(()),
            generation: Mutex::new(0),
            cond: Condvar::new(),
            sleepers: AtomicUsize::new(0),
            fd_exported: AtomicBool::new(false),
            timers: Mutex::new(Vec::new()),
            has_timers: AtomicBool::new(false),
        }))
    }

    /// The adapter's overlapped descriptor (the epoll set).
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd_exported.store(true, Ordering::Relaxed);
        self.epfd.as_fd()
    }

    /// Watch `sock` (edge-triggered) on behalf of `source`.
    pub(crate) fn register<S: AsFd>(
        self: &Arc<Self>,
        sock: S,
        source: Weak<dyn Source>,
    ) -> std::io::Result<Registered<S>> {
        let key = self.lock_sources().insert(source);
        let flags = EventFlags::IN | EventFlags::OUT | EventFlags::RDHUP | EventFlags::ET;
        if let Err(e) = epoll::add(&self.epfd, &sock, EventData::new_u64(key as u64 + 1), flags) {
            self.lock_sources().remove(key);
            return Err(e.into());
        }
        Ok(Registered {
            sock: Some(sock),
            engine: self.clone(),
            key,
        })
    }

    fn lock_sources(&self) -> std::sync::MutexGuard<'_, Slab<Weak<dyn Source>>> {
        self.sources.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Dispatch whatever is ready, sleeping at most `timeout` (`Some(ZERO)`: do not sleep).
    fn poll(&self, timeout: Option<Duration>) {
        let mut events = [MaybeUninit::<epoll::Event>::uninit(); 64];
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
            let flags = ev.flags;
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
                s.on_ready(flags);
            }
        }
    }
}

impl Engine {
    /// Call `source.on_timer()` once `at` has passed.
    pub(crate) fn add_timer(&self, at: Instant, source: Weak<dyn Source>) {
        self.timers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((at, source));
        self.has_timers.store(true, Ordering::Release);
    }

    /// Fire expired timers; returns how long until the next one.
    fn run_timers(&self) -> Option<Duration> {
        if !self.has_timers.load(Ordering::Acquire) {
            return None;
        }
        let now = Instant::now();
        let mut due = Vec::new();
        let next = {
            let mut t = self.timers.lock().unwrap_or_else(|e| e.into_inner());
            t.retain(|(at, s)| {
                if *at <= now {
                    due.push(s.clone());
                    false
                } else {
                    s.strong_count() > 0
                }
            });
            if t.is_empty() {
                self.has_timers.store(false, Ordering::Release);
            }
            t.iter().map(|(at, _)| *at - now).min()
        };
        for s in due.iter().filter_map(Weak::upgrade) {
            s.on_timer();
        }
        next
    }
}

impl Driver for Engine {
    fn progress(&self) {
        self.poll(Some(Duration::ZERO));
        self.run_timers();
    }

    fn wait(&self, timeout: Option<Duration>) {
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        if let Ok(_leader) = self.leader.try_lock() {
            let timeout = match (timeout, self.run_timers()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            self.poll(timeout);
            self.run_timers();
            drop(_leader);
            // Let followers re-check what this thread's dispatch completed.
            self.bump();
        } else {
            let g = self.generation.lock().unwrap_or_else(|e| e.into_inner());
            let seen = *g;
            let t = timeout.unwrap_or(Duration::from_secs(3600));
            let _ = self.cond.wait_timeout_while(g, t, |g| *g == seen);
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }

    fn notify(&self) {
        if self.sleepers.load(Ordering::SeqCst) > 0 || self.fd_exported.load(Ordering::Relaxed) {
            let _ = rustix::io::write(&self.wake, &1u64.to_ne_bytes());
            self.bump();
        }
    }
}

impl Engine {
    fn bump(&self) {
        *self.generation.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.cond.notify_all();
    }
}
