//! The adapter's I/O engine.
//!
//! There is no progress thread. Whoever waits drives the I/O:
//! * a polling caller (`CompletionQueue::get_results`) reads its queue pairs' sockets directly
//!   with non-blocking `recv` — no readiness syscall in between;
//! * a blocking caller (`Overlapped::wait`) calls [`Engine::wait`], which sleeps in `poll(2)` on
//!   the control set (an epoll descriptor holding listeners, handshakes, connection attempts and
//!   an eventfd) together with every data socket, and dispatches what became ready on its own
//!   thread: one wake-up per event. Several blocking callers share this leader/follower style:
//!   one sleeps in `poll`, the others on a condition variable; a completion made on another
//!   thread wakes them (the eventfd for the leader, the condition variable for followers),
//!   and the leader wakes the followers when it returns, so that one of them takes over.
//!
//! A blocking waiter costs no system call beyond its sleep and its reads: a completion the
//! sleeping thread makes itself (the usual case: it dispatched the event that completed its
//! own request) wakes nobody, and the leader hands over to followers only if there are any.
//! Other threads are woken only when they sleep (`kit::waiters`).
//!
//! Data sockets ("streams") are deliberately *not* kept in an epoll set while nobody needs it:
//! a socket with a waiter on its wait queue pays an epoll callback for every arriving segment,
//! which cost a busy-polling 8-byte ping-pong about 0.5 µs per message in an A/B run during
//! development (same binary with and without the registration). They join the epoll set only once an application takes the adapter's
//! descriptor for its own event loop ([`Engine::fd`]); from then on the descriptor becomes
//! readable when a socket needs attention or a request completed on another thread (the eventfd
//! is written then), and the loop calls `Adapter::progress`.

use std::fmt;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::wake::{Sleeper, Woke};
use netdirect_spi::kit::overlapped::Driver;
use netdirect_spi::kit::progress::Activity;
use netdirect_spi::kit::timers::Timers;
use netdirect_spi::kit::waiters::{Waiters, WakeFd};
use rustix::event::epoll::{self, EventData, EventFlags};
use rustix::event::{PollFd, PollFlags};
use slab::Slab;
use socket2::Socket;

/// Something registered with the engine: a listener, a pending handshake, a queue pair.
pub(crate) trait Source: Send + Sync {
    /// The socket is ready (readable, writable or hung up); drain what can be drained.
    /// Sockets are edge-triggered, so a source must read until `EAGAIN` or remember that it
    /// stopped early and resume on its own later.
    fn on_ready(&self, events: EventFlags);

    /// A deadline set with [`Engine::add_timer`] passed (checked whenever the engine is driven).
    fn on_timer(&self) {}

    /// The leader would sleep in a blocking `recv` on this source's stream (`crate::wake`).
    /// `Some(buf)`: the source has nothing buffered that it could process, lends its receive
    /// buffer to read into, and reads nothing from the socket itself until
    /// [`Source::return_reader`]. `None`: not now (the leader sleeps in `poll` instead).
    fn lend_reader(&self) -> Option<Box<[u8]>> {
        None
    }

    /// The buffer [`Source::lend_reader`] lent, after the leader's `recv` into its first
    /// `asked` bytes: how many it read (`Ok(0)`: the peer's end of stream; fewer than `asked`:
    /// the socket is empty now), or `Err(AGAIN)` if it was woken with nothing read.
    // The buffer is the lender's own, moved back to it (no default source lends one).
    #[allow(clippy::boxed_local)]
    fn return_reader(
        &self,
        _buf: Box<[u8]>,
        _got: Result<usize, rustix::io::Errno>,
        _asked: usize,
    ) {
    }
}

/// Token 0 is the eventfd; control sources get `slab key + 1`; streams `STREAM_TOKEN | key`.
const WAKE_TOKEN: u64 = 0;
const STREAM_TOKEN: u64 = 1 << 63;
/// The deadlines' timerfd (no control source has a key this large).
const TIMER_TOKEN: u64 = STREAM_TOKEN - 1;

/// A data socket and what the engine needs to watch it.
pub(crate) struct StreamShared {
    sock: Socket,
    /// The owner has output the socket did not take: wait for writability too.
    wants_write: AtomicBool,
    /// The owner would read what arrives. Not while it holds a Send for want of a Receive
    /// (the bytes stay in the socket, which stays readable) nor once it read the end of the
    /// stream (a socket at EOF is readable forever): a leader polling such a socket would
    /// wake at once, again and again. A stream that wants neither is left out of the set.
    wants_read: AtomicBool,
    /// [`Sleeper::prepare`] was done: made only before the leader's first sleep in `recv` on
    /// it, which most connections never see (a connection setup saves its system calls).
    prepared: AtomicBool,
}

struct StreamEntry {
    shared: Arc<StreamShared>,
    source: Weak<dyn Source>,
}

/// One epoll set per adapter.
pub(crate) struct Engine {
    epfd: OwnedFd,
    wake: WakeFd,
    sources: Mutex<Slab<Weak<dyn Source>>>,
    streams: Mutex<Slab<StreamEntry>>,
    /// The leader's reusable scratch space (only the leader locks it).
    scratch: Mutex<LeaderScratch>,
    /// The blocked threads: at most one leader asleep in `poll(2)` (woken by the eventfd), the
    /// others followers (`kit::waiters`).
    waiters: Waiters,
    /// The epoll descriptor was handed out (an application's event loop watches it).
    fd_exported: AtomicBool,
    /// Streams are kept in the epoll set: the descriptor was handed out, or the adapter has
    /// more than [`MANY_STREAMS`] (see there).
    in_epoll: AtomicBool,
    /// Deadlines (connect timeouts, listeners' waits for a request).
    timers: Timers<dyn Source>,
    /// The leader asleep in `recv` instead of `poll`, and how to wake it (`crate::wake`).
    sleeper: Sleeper,
}

/// What the leader reuses from one wait to the next (no allocation per wait).
#[derive(Default)]
struct LeaderScratch {
    streams: Vec<(Arc<StreamShared>, Weak<dyn Source>)>,
}

/// The most a sleep in `recv` reads: a few small messages. The source reads the rest itself
/// (a large payload straight into its destination).
const SLEEP_READ: usize = 4096;

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("sleepers", &self.waiters.sleepers())
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
        let wake = WakeFd::new()?;
        epoll::add(&epfd, &wake, EventData::new_u64(WAKE_TOKEN), EventFlags::IN)?;
        let timers = Timers::in_epoll(&epfd, TIMER_TOKEN)?;
        Ok(Arc::new(Self {
            epfd,
            wake,
            sources: Mutex::new(Slab::new()),
            streams: Mutex::new(Slab::new()),
            scratch: Mutex::new(LeaderScratch::default()),
            waiters: Waiters::new(),
            fd_exported: AtomicBool::new(false),
            in_epoll: AtomicBool::new(false),
            timers,
            sleeper: Sleeper::default(),
        }))
    }

    /// The adapter's overlapped descriptor (the epoll set). From the first call on, data
    /// sockets are watched by the epoll set as well, so the descriptor reports them.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd_exported.store(true, Ordering::SeqCst);
        self.streams_into_epoll(&self.lock_streams());
        self.epfd.as_fd()
    }

    /// Keep every stream in the epoll set from now on (once: later streams join as they
    /// come). Under the stream lock, so that `add_stream` and this agree on who adds a stream.
    fn streams_into_epoll(&self, streams: &Slab<StreamEntry>) {
        if self.in_epoll.swap(true, Ordering::SeqCst) {
            return;
        }
        for (key, e) in streams.iter() {
            let _ = epoll::add(
                &self.epfd,
                &e.shared.sock,
                EventData::new_u64(STREAM_TOKEN | key as u64),
                stream_flags(),
            );
        }
        // A leader asleep in `poll(2)` or `recv` built its set from the streams: it must
        // sleep on the epoll set instead (`wait_for`).
        if self.waiters.other_leader() {
            self.wake_leader();
        }
    }

    /// Whether streams are in the epoll set (the descriptor was handed out, or there are
    /// many): a stream with queued output then only hears about writability on an edge, so
    /// none may sit on output waiting for the next progress call.
    pub(crate) fn fd_exported(&self) -> bool {
        self.in_epoll.load(Ordering::Relaxed)
    }

    fn lock_streams(&self) -> std::sync::MutexGuard<'_, Slab<StreamEntry>> {
        self.streams.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adopt a connected data socket owned by `source` (a queue pair), which drives it itself
    /// when polled; the engine watches it for blocking waiters.
    pub(crate) fn add_stream(self: &Arc<Self>, sock: Socket, source: Weak<dyn Source>) -> Stream {
        let shared = Arc::new(StreamShared {
            sock,
            wants_write: AtomicBool::new(false),
            wants_read: AtomicBool::new(true),
            prepared: AtomicBool::new(false),
        });
        let mut streams = self.lock_streams();
        let key = streams.insert(StreamEntry {
            shared: shared.clone(),
            source,
        });
        if self.in_epoll.load(Ordering::SeqCst) {
            let _ = epoll::add(
                &self.epfd,
                &shared.sock,
                EventData::new_u64(STREAM_TOKEN | key as u64),
                stream_flags(),
            );
        } else if streams.len() > MANY_STREAMS {
            self.streams_into_epoll(&streams);
        }
        drop(streams);
        // A leader already asleep built its poll set without this stream: wake it to rebuild,
        // or what arrives on the new connection (the RTR an Accept waits for) wakes nobody.
        self.interest_grew();
        Stream {
            shared,
            engine: self.clone(),
            key,
        }
    }

    /// Watch `sock` (edge-triggered) on behalf of `source`, for input and output.
    pub(crate) fn register<S: AsFd>(
        self: &Arc<Self>,
        sock: S,
        source: Weak<dyn Source>,
    ) -> std::io::Result<Registered<S>> {
        self.register_for(sock, source, true)
    }

    /// [`Engine::register`], for input only when `output` is false: a source with nothing to
    /// write is not woken by the writability a new connection raises at once.
    pub(crate) fn register_for<S: AsFd>(
        self: &Arc<Self>,
        sock: S,
        source: Weak<dyn Source>,
        output: bool,
    ) -> std::io::Result<Registered<S>> {
        let key = self.lock_sources().insert(source);
        let mut flags = EventFlags::IN | EventFlags::RDHUP | EventFlags::ET;
        if output {
            flags |= EventFlags::OUT;
        }
        if let Err(e) = epoll::add(&self.epfd, &sock, EventData::new_u64(key as u64 + 1), flags) {
            self.lock_sources().remove(key);
            return Err(e.into());
        }
        // A leader asleep with no source registered polls the wake eventfd instead of the
        // epoll set (`sleep_on_all`): it must rebuild its set to hear this socket.
        self.interest_grew();
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
                // Not necessarily the leader's dispatch: `WakeFd::drain`.
                self.wake.drain(&self.waiters);
                continue;
            }
            if token == TIMER_TOKEN {
                self.run_timers();
                continue;
            }
            let source = if token & STREAM_TOKEN != 0 {
                let key = (token & !STREAM_TOKEN) as usize;
                self.lock_streams()
                    .get(key)
                    .and_then(|e| e.source.upgrade())
            } else {
                self.lock_sources()
                    .get(token as usize - 1)
                    .and_then(Weak::upgrade)
            };
            if let Some(s) = source {
                s.on_ready(flags);
            }
        }
    }
}

impl Engine {
    /// Call `source.on_timer()` once `at` has passed.
    pub(crate) fn add_timer(&self, at: Instant, source: Weak<dyn Source>) {
        self.timers.add(at, source);
        // A leader asleep on the wake eventfd alone, or in `recv`, took its deadline from the
        // timers before this one existed: it must look again.
        self.interest_grew();
    }

    /// Forget every timer of `source` (it no longer needs one).
    pub(crate) fn cancel_timers(&self, source: &Weak<dyn Source>) {
        self.timers.cancel(source);
    }

    /// Fire expired timers; returns how long until the next one.
    fn run_timers(&self) -> Option<Duration> {
        self.timers.run_due(|s| s.on_timer())
    }
}

impl Engine {
    /// Drive every data socket once (when they are not in the epoll set).
    fn progress_streams(&self) {
        thread_local! {
            static SCRATCH: std::cell::RefCell<Vec<Weak<dyn Source>>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        SCRATCH.with(|scratch| {
            let Ok(mut list) = scratch.try_borrow_mut() else {
                return;
            };
            list.clear();
            list.extend(self.lock_streams().iter().map(|(_, e)| e.source.clone()));
            // The stream lock is released before the sources run: they take their own locks
            // and may add streams.
            for s in list.iter().filter_map(Weak::upgrade) {
                s.on_ready(EventFlags::IN | EventFlags::OUT);
            }
            list.clear();
        });
    }

    /// The leader's sleep: `poll(2)` on the control set and every data socket, then the
    /// dispatch of what became ready. Allocates nothing up to [`STACK_FDS`] descriptors.
    fn sleep_on_all(&self, scratch: &mut LeaderScratch, timeout: Option<Duration>) {
        scratch.streams.clear();
        // SeqCst loads (here and below): see `Stream::set_interest`.
        scratch.streams.extend(
            self.lock_streams()
                .iter()
                .filter(|(_, e)| {
                    e.shared.wants_read.load(Ordering::SeqCst)
                        || e.shared.wants_write.load(Ordering::SeqCst)
                })
                .map(|(_, e)| (e.shared.clone(), e.source.clone())),
        );
        // One stream to read and nothing else to hear (no listener or connecting socket,
        // nothing to write, no deadline the backstop could overshoot): sleep in `recv` on it,
        // one system call fewer. The backstop may end the sleep before `timeout`; the caller
        // then waits again for what is left.
        if timeout.is_none_or(|t| t >= crate::wake::BACKSTOP)
            && scratch.streams.len() == 1
            && self.lock_sources().is_empty()
            && self.sleep_in_recv(scratch)
        {
            scratch.streams.clear();
            return;
        }
        let ts = timeout.map(|t| rustix::time::Timespec {
            tv_sec: t.as_secs().min(i32::MAX as u64) as _,
            tv_nsec: t.subsec_nanos() as _,
        });
        {
            let streams = &scratch.streams;
            let n = streams.len() + 1;
            // With only data sockets in play (no listener or connecting socket registered),
            // the epoll set holds nothing the leader must hear but the wake eventfd (the
            // timers' deadline is `timeout`): poll the eventfd itself, which is cheaper on
            // every wake-up than polling the epoll set (`register` wakes us to rebuild).
            let control: BorrowedFd<'_> = if self.lock_sources().is_empty() {
                self.wake.as_fd()
            } else {
                self.epfd.as_fd()
            };
            let entry = |i: usize| match i.checked_sub(1).and_then(|i| streams.get(i)) {
                None => PollFd::new(&control, PollFlags::IN),
                Some((sh, _)) => {
                    let mut f = PollFlags::empty();
                    if sh.wants_read.load(Ordering::SeqCst) {
                        f |= PollFlags::IN | PollFlags::RDHUP;
                    }
                    if sh.wants_write.load(Ordering::SeqCst) {
                        f |= PollFlags::OUT;
                    }
                    PollFd::new(&sh.sock, f)
                }
            };
            let mut on_stack: [PollFd<'_>; STACK_FDS];
            let mut on_heap: Vec<PollFd<'_>>;
            let fds: &mut [PollFd<'_>] = if n <= STACK_FDS {
                // Entries past `n` are never passed to `poll`.
                on_stack = std::array::from_fn(|i| entry(if i < n { i } else { 0 }));
                &mut on_stack[..n]
            } else {
                on_heap = (0..n).map(entry).collect();
                &mut on_heap
            };
            // On EINTR nothing is reported ready; the caller re-checks its condition.
            let _ = rustix::event::poll(fds, ts.as_ref());
            if !fds[0].revents().is_empty() {
                self.poll(Some(Duration::ZERO));
            }
            for (f, (_, src)) in fds[1..].iter().zip(streams) {
                let r = f.revents();
                if r.is_empty() {
                    continue;
                }
                let mut ev = EventFlags::IN | EventFlags::OUT;
                if r.intersects(PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR) {
                    // The FIN (or error) sits behind the data: the source must read to it.
                    ev |= EventFlags::RDHUP;
                }
                if let Some(s) = src.upgrade() {
                    s.on_ready(ev);
                }
            }
        }
        scratch.streams.clear();
    }
}

impl Engine {
    /// The leader's sleep in `recv` on the one stream of `scratch`, if its source lends its
    /// reader and the wake signal reaches this thread (`crate::wake`). `false`: not taken.
    fn sleep_in_recv(&self, scratch: &mut LeaderScratch) -> bool {
        let (sh, src) = &scratch.streams[0];
        if !sh.wants_read.load(Ordering::SeqCst)
            || sh.wants_write.load(Ordering::SeqCst)
            || !self.sleeper.available()
        {
            return false;
        }
        let Some(src) = src.upgrade() else {
            return false;
        };
        let Some(mut buf) = src.lend_reader() else {
            return false;
        };
        if !sh.prepared.swap(true, Ordering::Relaxed) {
            // Only the leader sleeps in `recv`, one at a time.
            Sleeper::prepare(&sh.sock);
        }
        let asked = buf.len().min(SLEEP_READ);
        let got = match self.sleeper.recv(&sh.sock, &mut buf[..asked]) {
            Woke::Read(r) => r,
            Woke::Early | Woke::TimedOut => Err(rustix::io::Errno::AGAIN),
        };
        src.return_reader(buf, got, asked);
        true
    }
}

/// Beyond this many streams an adapter keeps them in its epoll set, as with the descriptor
/// handed out: a leader's `poll(2)` over every stream costs O(streams) per sleep (at 4,000
/// connections, sleeps took most of a connection setup's time), where `epoll_wait` costs
/// what is ready. Below it the streams stay out: a watched socket pays an epoll callback per
/// arriving segment (the module's remarks).
const MANY_STREAMS: usize = 64;

/// How many descriptors (the epoll set and data sockets) the leader's `poll` set holds on the
/// stack; a larger set is allocated per sleep.
const STACK_FDS: usize = 16;

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
        if !self.in_epoll.load(Ordering::Relaxed) {
            self.progress_streams();
        }
        self.run_timers();
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

    /// Sleep without a `progress` pass first: the leader's sleep is on every descriptor that
    /// pass would read (the epoll set, whose ready list keeps undelivered edges, and every
    /// data socket, level-triggered, or with the descriptor exported their edges in the epoll
    /// set), and due timers fire before the check, so nothing a `progress` pass would have
    /// found is slept through. The caller has typically just polled its CQ, which read its
    /// sockets: a second pass would only repeat `EAGAIN`s.
    fn wait_for(&self, done: &dyn Fn() -> bool, timeout: Option<Duration>) {
        let me = self.waiters.enter();
        // Timers first: what they complete is this thread's own doing, which wakes nobody,
        // so the check below must come after.
        let timeout = match (timeout, self.run_timers()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // The role is taken and `done()` checked under the lock `notify` reads the roles
        // under: a completion elsewhere either precedes the check or finds this sleeper.
        let Some(_lead) = me.take_role(done, timeout) else {
            return;
        };
        {
            let mut scratch = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
            if self.in_epoll.load(Ordering::SeqCst) {
                self.poll(timeout);
            } else {
                self.sleep_on_all(&mut scratch, timeout);
            }
        }
        self.run_timers();
        // `_lead` hands over to a follower, if any, before `me` leaves.
    }

    fn notify(&self) {
        let exported = self.fd_exported.load(Ordering::Relaxed);
        if exported {
            // An external event loop watches the descriptor (and so does our leader).
            self.wake_leader();
        }
        // The leader's own dispatch wakes nobody; otherwise the leader (unless the write
        // above woke it already) and the followers, if any (`kit::waiters`).
        self.waiters.notify(exported, || self.wake_leader());
    }
}

impl Engine {
    /// A stream wants an event the sleeping leader's `poll` set may lack: have the leader
    /// rebuild it. Not with the descriptor exported (streams sit in the epoll set with every
    /// event then), nor when this thread is the leader (it rebuilds the set before its next
    /// sleep).
    fn interest_grew(&self) {
        if self.in_epoll.load(Ordering::Relaxed) {
            return;
        }
        if self.waiters.other_leader() {
            self.wake_leader();
        }
    }

    /// Make the epoll set readable: the leader's `poll` (and an external event loop) returns.
    /// The count is reset by the next dispatch (`Engine::poll`), which passes it on if it was
    /// not the leader's (`WakeFd::drain`).
    fn wake_leader(&self) {
        self.wake.wake();
        // Or the leader sleeps in `recv`, where only a signal reaches it.
        self.sleeper.wake();
    }
}

fn stream_flags() -> EventFlags {
    EventFlags::IN | EventFlags::OUT | EventFlags::RDHUP | EventFlags::ET
}

/// A data socket adopted by the engine ([`Engine::add_stream`]); leaves it on drop.
pub(crate) struct Stream {
    shared: Arc<StreamShared>,
    engine: Arc<Engine>,
    key: usize,
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Stream({})", self.key)
    }
}

impl Stream {
    /// The socket.
    pub(crate) fn get(&self) -> &Socket {
        &self.shared.sock
    }

    /// Whether a blocked waiter should also wake for writability (the owner has output the
    /// socket did not take).
    pub(crate) fn set_wants_write(&self, yes: bool) {
        self.set_interest(&self.shared.wants_write, yes);
    }

    /// Whether a blocked waiter should wake for what arrives (see `StreamShared::wants_read`).
    pub(crate) fn set_wants_read(&self, yes: bool) {
        self.set_interest(&self.shared.wants_read, yes);
    }

    /// A leader asleep in `poll` asks for what the stream wanted when it went to sleep: one
    /// that wants more now (output another thread queued, a Receive that ended a stall) must
    /// rebuild its set, or it would sleep through the event — and a peer that waits for that
    /// output would wait for ever. The swap and the leader's loads are `SeqCst`, and so is
    /// `sleepers`: either the leader's set already has the new interest, or it is found here.
    fn set_interest(&self, flag: &AtomicBool, yes: bool) {
        let was = flag.swap(yes, Ordering::SeqCst);
        if yes && !was {
            self.engine.interest_grew();
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.engine.in_epoll.load(Ordering::SeqCst) {
            let _ = epoll::delete(&self.engine.epfd, &self.shared.sock);
        }
        let mut s = self.engine.lock_streams();
        if s.contains(self.key) {
            s.remove(self.key);
        }
        // The socket closes when the last reference (possibly a waiter's) goes.
    }
}
