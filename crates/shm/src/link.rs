//! One established connection: the mapped segment, the Unix socket kept open for its life, and
//! the lock-free state that lets a poller or a waiter decide whether the queue pair has work
//! without taking its lock.

use std::fmt;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use netdirect_spi::kit::overlapped::Driver;
use netdirect_spi::NdResult;

use crate::engine::{Engine, Registered, Source};
use crate::proto::{self, Msg, Port, Recv};
use crate::qp::ShmQp;
use crate::ring::{wake, Consumer, RingMem};
use crate::segment::{Chan, Segment, SideLine};

/// One connection's shared state.
pub(crate) struct Link {
    seg: Segment,
    /// 0: the active side (created the segment), 1: the passive side.
    side: usize,
    /// The socket, in the engine's epoll set until the peer's end-of-file.
    reg: Mutex<Option<Registered>>,
    /// The same socket, for sending (kept after it leaves the epoll set), and the active
    /// side's local port, until the local side closes: then both are closed, which frees the
    /// port even while a completion queue still polls this `Link` (`ShmCq`'s lock-free slots).
    sock: Mutex<Option<(Arc<OwnedFd>, Option<Port>)>>,
    engine: Arc<Engine>,
    link_key: AtomicU64,
    qp: Weak<ShmQp>,
    /// Mirror of the consumer's next position (for lock-free readiness checks).
    pub(crate) rx_pos: AtomicU64,
    /// The next record is a message but no Receive is posted: not ready until one is.
    pub(crate) rx_stalled: AtomicBool,
    /// When the held message's receiver-not-ready bound runs out ([`now_ns`]; 0: no bound
    /// running), R-QP-7.
    pub(crate) rnr_deadline: AtomicU64,
    /// The producer has queued Sends waiting for space; it last saw these tails.
    pub(crate) tx_blocked: AtomicBool,
    pub(crate) tx_seen: [AtomicU64; 2],
    /// The queue pair holds ACKs for the peer's Writes until the application's next call
    /// (`qp`: held acknowledgements): the next poll must drive it.
    pub(crate) acks_held: AtomicBool,
    /// End-of-file on the socket: the peer disconnected or died.
    pub(crate) peer_eof: AtomicBool,
    /// The local side closed the connection: nothing to wait for any more.
    closed: AtomicBool,
    /// Polls that found nothing to do, for the periodic liveness check.
    pub(crate) idle: AtomicU32,
    /// When a poller's next liveness check is due by time ([`coarse_ms`]).
    next_look: AtomicU64,
    /// The peer's process id (`SO_PEERCRED`), for pulling RTS messages; 0 if unknown.
    pub(crate) peer_pid: i32,
    /// Mapped RDMA Writes and Reads (`mapped`).
    pub(crate) maps: crate::mapped::Maps,
    /// This connection's nonce (`mapped`): a peer that read it from our memory may map ours.
    pub(crate) nonce: Box<[u64; 2]>,
}

impl fmt::Debug for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Link")
            .field("side", &self.side)
            .field("seg", &self.seg)
            .finish_non_exhaustive()
    }
}

impl Link {
    /// Adopt a connected socket (with the active side's local port) and a mapped segment for
    /// queue pair `qp`.
    pub(crate) fn new(
        engine: &Arc<Engine>,
        seg: Segment,
        side: usize,
        (sock, port): (OwnedFd, Option<Port>),
        peer_seg_addr: u64,
        qp: Weak<ShmQp>,
    ) -> std::io::Result<Arc<Self>> {
        // One descriptor: the epoll registration and the sending side share it.
        let sock = Arc::new(sock);
        let send = sock.clone();
        let peer_pid = rustix::net::sockopt::socket_peercred(&sock)
            .map_or(0, |c| c.pid.as_raw_nonzero().get());
        let mut registered = false;
        let link = Arc::new_cyclic(|me: &Weak<Self>| {
            let src: Weak<dyn Source> = me.clone();
            let reg = engine.register_shared(sock, src).ok();
            registered = reg.is_some();
            Self {
                seg,
                side,
                reg: Mutex::new(reg),
                sock: Mutex::new(Some((send, port))),
                engine: engine.clone(),
                link_key: AtomicU64::new(u64::MAX),
                qp,
                rx_pos: AtomicU64::new(0),
                rx_stalled: AtomicBool::new(false),
                rnr_deadline: AtomicU64::new(0),
                tx_blocked: AtomicBool::new(false),
                tx_seen: [AtomicU64::new(0), AtomicU64::new(0)],
                acks_held: AtomicBool::new(false),
                peer_eof: AtomicBool::new(false),
                closed: AtomicBool::new(false),
                idle: AtomicU32::new(0),
                next_look: AtomicU64::new(0),
                peer_pid,
                maps: crate::mapped::Maps::default(),
                nonce: Box::new(crate::mapped::fresh_nonce()),
            }
        });
        // Where a peer that may write our memory reads the proof of it (`mapped`).
        let nonce: *const [u64; 2] = &*link.nonce;
        link.me().nonce_addr.store(nonce as u64, Ordering::Release);
        // Large messages may be pulled from the peer's memory if the kernel lets us read it
        // (same user, no ptrace restriction): tell the peer by our `can_pull` word.
        if peer_pid > 0 && crate::mem::probe(peer_pid, peer_seg_addr, Segment::MAGIC) {
            link.me().can_pull.store(1, Ordering::Release);
        }
        // Whether the socket went into the epoll set, not whether it is still there: once it
        // is, another thread's wait may already have found the peer's end-of-file and taken it
        // out (`note_eof`), as when the peer completes its connect and closes at once. That
        // connection is established all the same; its queue pair then delivers what the peer
        // published before it closed, and sees it gone.
        if !registered {
            return Err(std::io::ErrorKind::Other.into());
        }
        let key = engine.add_link(Arc::downgrade(&link));
        link.link_key.store(key as u64, Ordering::Release);
        if engine.fd_exported() {
            link.arm();
        }
        Ok(link)
    }

    /// Our outgoing channel.
    pub(crate) fn tx(&self) -> Chan<'_> {
        self.seg.chan(self.side)
    }

    /// Our incoming channel.
    pub(crate) fn rx(&self) -> Chan<'_> {
        self.seg.chan(1 - self.side)
    }

    pub(crate) fn me(&self) -> &SideLine {
        self.seg.side(self.side)
    }

    pub(crate) fn peer(&self) -> &SideLine {
        self.seg.side(1 - self.side)
    }

    /// The peer can pull large messages from our memory.
    pub(crate) fn peer_can_pull(&self) -> bool {
        self.peer().can_pull.load(Ordering::Acquire) != 0
    }

    /// The peer set its `closed` word (Acquire: every record it published before is visible).
    pub(crate) fn peer_closed(&self) -> bool {
        self.peer().closed.load(Ordering::Acquire) != 0
    }

    /// We published records (or closed), which the peer may be asleep waiting for: wake it if
    /// it sleeps.
    pub(crate) fn wake_peer(&self) {
        if wake::peer_sleeps(&self.peer().waiting) {
            self.ring_doorbell();
        }
    }

    /// We freed ring space (consumed records): wake the peer only if it sleeps with output
    /// waiting for space (`ring::wake::WANTS_SPACE`).
    #[inline]
    pub(crate) fn wake_peer_for_space(&self) {
        if wake::peer_wants_space(&self.peer().waiting) {
            self.ring_doorbell();
        }
    }

    fn ring_doorbell(&self) {
        // A full socket already holds a WAKE the peer has not read: nothing lost.
        let _ = self.send_msg(&Msg::Wake, None);
    }

    /// Send a control message to the peer; `Err` once the local side closed.
    pub(crate) fn send_msg(
        &self,
        msg: &Msg,
        fd: Option<std::os::fd::BorrowedFd<'_>>,
    ) -> Result<(), rustix::io::Errno> {
        match &*self.sock.lock().unwrap_or_else(|e| e.into_inner()) {
            Some((s, _)) => proto::send(s, msg, fd),
            None => Err(rustix::io::Errno::PIPE),
        }
    }

    /// Receive a control message from the peer (end-of-file once the local side closed).
    pub(crate) fn recv_msg(&self) -> Recv {
        match &*self.sock.lock().unwrap_or_else(|e| e.into_inner()) {
            Some((s, _)) => proto::recv(s),
            None => Recv::Eof,
        }
    }

    /// The queue pair's output is blocked for want of ring space (`yes`; it stored the tails
    /// it saw in `tx_seen` first), or is not. Kept in `tx_blocked` for the lock-free checks
    /// and in our `waiting` word for the peer, which wakes us for freed space only if it finds
    /// the flag there. Space the peer freed before it could see the flag woke nobody: if the
    /// tails moved, a sleeper of this adapter is woken to take it (a poller finds it on its
    /// own, `has_work`).
    pub(crate) fn set_tx_blocked(&self, yes: bool) {
        self.tx_blocked.store(yes, Ordering::Release);
        wake::want_space(&self.me().waiting, yes);
        if yes && self.tails_moved() {
            self.engine.notify();
        }
    }

    /// The queue pair's output waits for room the ring lacked when it last looked at the
    /// tails `seen` (the producer's `seen_tails`): [`Link::set_tx_blocked`], with those tails
    /// stored first, so that their moving drives or wakes it.
    pub(crate) fn block_for_room(&self, seen: (u64, u64)) {
        self.tx_seen[0].store(seen.0, Ordering::Relaxed);
        self.tx_seen[1].store(seen.1, Ordering::Relaxed);
        self.set_tx_blocked(true);
    }

    /// The held message's receiver-not-ready bound ran out.
    pub(crate) fn rnr_expired(&self) -> bool {
        let d = self.rnr_deadline.load(Ordering::Relaxed);
        d != 0 && now_ns() >= d
    }

    /// How long until the held message's bound runs out, if one is running (a sleeper wakes
    /// by then to end the connection).
    pub(crate) fn rnr_wait(&self) -> Option<std::time::Duration> {
        match self.rnr_deadline.load(Ordering::Relaxed) {
            0 => None,
            d => Some(std::time::Duration::from_nanos(d.saturating_sub(now_ns()))),
        }
    }

    /// Whether the queue pair has something to do (lock-free).
    pub(crate) fn has_work(&self) -> bool {
        let rx = self.rx();
        let ready = if self.rx_stalled.load(Ordering::Acquire) {
            // Nothing to take until a Receive is posted, unless the wait timed out.
            self.rnr_expired()
        } else {
            Consumer::ready_at(&rx, self.rx_pos.load(Ordering::Relaxed))
        };
        // SeqCst: a waiter that arms after a holder checked for waiters sees the held ACKs
        // (`Engine::anyone_waiting`); a plain load on x86.
        ready
            || self.acks_held.load(Ordering::SeqCst)
            || (self.tx_blocked.load(Ordering::Acquire) && self.tails_moved())
            || self.peer_closed()
            || self.peer_eof.load(Ordering::Acquire)
    }

    fn tails_moved(&self) -> bool {
        let tx = self.tx();
        tx.tail().load(Ordering::Acquire) != self.tx_seen[0].load(Ordering::Relaxed)
            || tx.data_tail().load(Ordering::Acquire) != self.tx_seen[1].load(Ordering::Relaxed)
    }

    /// About to sleep: set our `waiting` word, then report whether there is work already.
    pub(crate) fn arm(&self) -> bool {
        if self.closed.load(Ordering::Acquire) {
            return false;
        }
        wake::arm(&self.me().waiting);
        // A Write the peer placed in our memory needs no driving, but the application may
        // be about to sleep waiting for its bytes (`mapped`: placed Writes).
        self.peer_placed() | self.has_work()
    }

    /// Awake again.
    pub(crate) fn disarm(&self) {
        wake::disarm(&self.me().waiting);
    }

    /// Read up to `max` messages from the socket: WAKE messages are dropped, end-of-file marks
    /// the peer gone (and takes the socket out of the epoll set, where it would stay readable
    /// for ever). Returns whether the peer is gone.
    ///
    /// A sleeper woken by the socket reads one message (`max` 1): usually the one WAKE that
    /// woke it, and reading on until `EAGAIN` would cost a second system call per wake-up.
    /// The epoll set is level-triggered, so a further message (another WAKE, or the
    /// end-of-file behind it) makes the next sleep return at once and is read then.
    pub(crate) fn service_socket(&self, max: usize) -> bool {
        if self.peer_eof.load(Ordering::Acquire) {
            return true;
        }
        self.take_back_memories();
        for _ in 0..max {
            match self.recv_msg() {
                Recv::Msg(msg, fd) => self.on_message(msg, fd),
                Recv::Empty => return false,
                Recv::Eof => {
                    self.note_eof();
                    return true;
                }
            }
        }
        false
    }

    /// End-of-file on the socket: the peer is gone; the socket leaves the epoll set.
    pub(crate) fn note_eof(&self) {
        self.peer_eof.store(true, Ordering::Release);
        // Leaves the epoll set; the socket stays open for sending until `close_local`.
        drop(self.reg.lock().unwrap_or_else(|e| e.into_inner()).take());
    }

    /// Whether the local side closed the connection.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// A busy poller's check: drive the queue pair only if it has work (or the periodic
    /// liveness check found the peer gone). Whether it was driven.
    pub(crate) fn poll_fast(&self) -> bool {
        self.wants_drive() && self.drive()
    }

    /// Whether the queue pair has work (or the periodic liveness check found the peer gone):
    /// a few loads, no lock, no reference counting. Counts as one poll for the liveness check,
    /// which reads the socket every `LIVENESS_POLLS` idle polls (a busy poller notices a dead
    /// peer within microseconds) or once [`LIVENESS_INTERVAL_MS`] passed since the last time,
    /// by the clock read every second idle poll (a slow poller notices it within that plus two
    /// polling periods, whatever its rate). The clock read costs about 3.6 ns: every second
    /// poll halves what a spinning poller pays for it.
    pub(crate) fn wants_drive(&self) -> bool {
        if self.closed.load(Ordering::Relaxed) {
            return false;
        }
        if self.has_work() {
            return true;
        }
        let n = self.idle.load(Ordering::Relaxed).wrapping_add(1);
        self.idle.store(n, Ordering::Relaxed);
        (n.is_multiple_of(crate::qp::LIVENESS_POLLS) || (n.is_multiple_of(2) && self.look_due()))
            && self.service_socket(64)
    }

    /// Whether a liveness check is due by time; if so, the next one is due an interval on.
    /// The coarse clock costs a few nanoseconds (a vDSO read, no system call) and ticks every
    /// few milliseconds, well inside the interval.
    fn look_due(&self) -> bool {
        let now = coarse_ms();
        if now < self.next_look.load(Ordering::Relaxed) {
            return false;
        }
        self.next_look
            .store(now + LIVENESS_INTERVAL_MS, Ordering::Relaxed);
        true
    }

    /// Drive the queue pair now; whether it still exists.
    pub(crate) fn drive(&self) -> bool {
        match self.qp.upgrade() {
            Some(qp) => {
                qp.progress_now();
                true
            }
            None => false,
        }
    }

    /// Drive the queue pair for a `GetResults` on `cq`, its completions for `cq` into `out`
    /// (`ShmQp::poll_lane`); how many.
    pub(crate) fn poll_lane(&self, cq: &crate::cq::ShmCq, out: &mut [NdResult]) -> usize {
        match self.qp.upgrade() {
            Some(qp) => qp.poll_lane(self, cq, out),
            None => 0,
        }
    }

    /// Wait for whatever runs under the queue pair's lock now (`Engine::fence_queue_pairs`).
    pub(crate) fn fence(&self) {
        if let Some(qp) = self.qp.upgrade() {
            qp.fence();
        }
    }

    /// Have the engine drive this connection once `at` has passed (a receiver-not-ready
    /// bound), whoever waits on the adapter, or none.
    pub(crate) fn wake_at(self: &Arc<Self>, at: std::time::Instant) {
        let src: Weak<dyn Source> = Arc::downgrade(self) as Weak<dyn Source>;
        self.engine.add_timer(at, src);
    }

    /// Drive the queue pair (the engine's progress).
    pub(crate) fn progress(&self) {
        if let Some(qp) = self.qp.upgrade() {
            qp.poll();
        }
    }

    /// The local side closes: tell the peer (its `closed` word, then end-of-file on the
    /// socket, which also wakes it if it sleeps) and stop arming.
    pub(crate) fn close_local(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.me().closed.store(1, Ordering::Release);
        if let Some((s, _port)) = self.sock.lock().unwrap_or_else(|e| e.into_inner()).take() {
            // End-of-file for the peer, sent before the descriptor goes (closing alone would
            // not say it while another descriptor of the socket were open).
            let _ = rustix::net::shutdown(&s, rustix::net::Shutdown::Write);
        }
        // The peer's memories we mapped: no grant can come any more.
        self.maps.forget_peer_memories();
        self.disarm();
        drop(self.reg.lock().unwrap_or_else(|e| e.into_inner()).take());
        self.unlink();
    }

    /// Leave the engine's list of links, once (its keys are reused by later links).
    fn unlink(&self) {
        let key = self.link_key.swap(u64::MAX, Ordering::AcqRel);
        if key != u64::MAX {
            self.engine.remove_link(key as usize);
        }
    }
}

/// The most time, in milliseconds, between two liveness checks of a polled connection
/// ([`Link::wants_drive`]): a dead peer is noticed within it plus two polling periods, inside
/// the 100 ms an application may expect (an RNIC reports a dead peer's queue pair within
/// its retry time) for any period up to 45 ms. A spinning poller pays one `recvmsg` for it
/// per interval.
pub(crate) const LIVENESS_INTERVAL_MS: u64 = 10;

/// `CLOCK_MONOTONIC_COARSE` in milliseconds (resolution: one scheduler tick).
pub(crate) fn coarse_ms() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse);
    t.tv_sec as u64 * 1000 + t.tv_nsec as u64 / 1_000_000
}

/// Nanoseconds since the first call in this process, plus one (so 0 never is a deadline).
pub(crate) fn now_ns() -> u64 {
    static BASE: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let base = BASE.get_or_init(std::time::Instant::now);
    base.elapsed().as_nanos() as u64 + 1
}

impl Source for Link {
    /// A deadline of this connection passed (its receiver-not-ready bound): drive it.
    fn on_timer(&self) {
        self.progress();
    }

    fn on_ready(&self) {
        // One message, usually the WAKE that woke us (see `service_socket`). If it brought no
        // work it was stale (sent while we took the work without sleeping): drain the rest,
        // so stale WAKEs cannot pile up and keep the next sleeps from sleeping.
        if !self.service_socket(1) && !self.has_work() {
            self.service_socket(64);
        }
        self.progress();
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.unlink();
    }
}
