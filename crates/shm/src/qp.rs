//! `IND2QueuePair` over a shared segment: Sends become ring records, Receives are filled from
//! the peer's ring when a poller or waiter drives the queue pair.
//!
//! One mutex guards a queue pair's state (both queues, the ring positions). The hot path takes
//! it once per post and once per poll that finds a record; a poll that finds nothing does not
//! take it: [`ShmQp::poll`] first asks the link, lock-free, whether the expected cell has been
//! published. Work requests live in preallocated queues; nothing on the path allocates, and
//! nothing makes a syscall unless the peer sleeps (one WAKE message) or, every
//! [`LIVENESS_POLLS`] idle polls, to check the socket for the peer's end-of-file.
//!
//! # Held acknowledgements
//!
//! A Write completes when the target answers that its bytes are placed (an ACK). When a
//! polling pass of the target placed Writes and owes nothing but their ACKs, it holds them
//! until the application's next call into the provider instead of pushing an ACK record at
//! once: an application spinning on memory the peer writes reacts before they would go
//! (ndrpingpong's pattern, and `tcp` holds its zero-length Read Responses the same way), and
//! its next Write carries the ACK as a flag ([`flag::ACK`]), so the answer costs no cache line
//! of its own. The next poll (the link reports work while ACKs are held), a Send, Write, Read,
//! Bind or Invalidate post, a Disconnect (or the queue pair's release) or a blocking wait
//! pushes what is still held. Nothing is held when the pass delivered a message (the
//! application may stop driving this connection), nor while any thread waits on the adapter
//! or its descriptor is exported (a sleeper armed before could sleep through it):
//! `ShmQp::may_hold_acks`. ACKs held when the descriptor is exported make it readable at once
//! (`Engine::fd`), as does a record that arrived while nothing was armed: the event loop's
//! progress pass then sends them.

use std::any::Any;
use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock, Weak};

use netdirect_spi::kit::cq::{ProgressSource, PushKind};
use netdirect_spi::kit::mr::{Access, AccessError, Kind, LocalCache, Registration};
use netdirect_spi::kit::mw;
use netdirect_spi::kit::overlapped::{OvCompleter, Overlapped, PendingRequests};
use netdirect_spi::kit::wrq::{total_len, WrQueue};
use netdirect_spi::traits::{self, MemoryRegion, MemoryWindow, QueuePairConfig};
use netdirect_spi::{fail, Error, NdResult, OpFlags, RequestType, Result, Sge, Status};

use crate::adapter::Shared;
use crate::bias::{BiasedGuard, BiasedMutex};
use crate::cq::ShmCq;
use crate::link::Link;
use crate::mem::{self, InlineSges, Owned, OwnedMut, Prefixed, Seg, Segs, Src};
use crate::ring::{flag, kind, Consumer, Desc, Producer, Violation, INLINE_MAX, RTS_MAX_SGES};
use crate::srq::ShmSrq;
use netdirect_spi::kit::srq::Seg as SrqSeg;

/// Largest RDMA Write that travels in one cell with its descriptor.
const WRITE_INLINE_MAX: usize = INLINE_MAX - Desc::LEN;

/// Most SGEs an INLINE request may carry (the SGE limit does not apply to them), as in `tcp`.
const MAX_INLINE_SGE: usize = 64;

/// Idle polls between two checks of the socket for the peer's end-of-file (a killed peer is
/// noticed within this many polls of a busy-polling survivor; a sleeping one notices at once).
pub(crate) const LIVENESS_POLLS: u32 = 4096;

/// The common record, alone: `r` (just peeked, a MSG record: callers test the kind first, so
/// other records skip it) is a whole message in its cell, and the front Receive, posted on
/// this queue pair, can hold it. If so it is copied there, the consumer moves past it (not yet
/// released: [`release_rx`]), the Receive leaves the queue and its context is returned for its
/// completion; else nothing happens (no Receive, an SRQ, too long, a message in progress: the
/// general path of `progress_rx` deals with it).
// Always inlined into the poll lane (`take_messages`), with `WrQueue::pop` and `release_rx`:
// as calls they cost 62 instructions of a message's round (callgrind, post_poll shm/8 1,354 ->
// 1,292) and 1.6 % of the shm ping-pong's interquartile mean (faster in 10 of 12 reps).
#[inline(always)]
fn take_inline_msg(
    g: &mut Inner,
    link: &Link,
    rx: &crate::segment::Chan<'_>,
    r: crate::ring::Record,
) -> Option<u64> {
    debug_assert_eq!(r.kind, kind::MSG);
    if g.rx_msg.is_some() || g.conn != Conn::Established {
        return None;
    }
    let Inner { rq, cons, .. } = g;
    let (wr, segs) = rq.front()?;
    if u64::from(r.len) > wr.total {
        return None;
    }
    cons.read_inline(rx, r.len as usize, &mut Segs(segs), 0);
    cons.advance();
    let wr = rq.pop().expect("present");
    if link.rnr_deadline.load(Ordering::Relaxed) != 0 {
        link.rnr_deadline.store(0, Ordering::Relaxed);
    }
    g.rx_msgs = g.rx_msgs.wrapping_add(1);
    Some(wr.context)
}

/// Give the ring space of the records consumed so far back to the peer, mirror the position for
/// lock-free pollers, and wake the peer if it sleeps waiting for that space (only such a peer,
/// not one asleep waiting for our reply: `ring::wake`).
// Inlined into the poll lane: see `take_inline_msg`.
#[inline(always)]
fn release_rx(g: &Inner, link: &Link, rx: &crate::segment::Chan<'_>) {
    g.cons.release(rx);
    link.rx_pos.store(g.cons.pos(), Ordering::Relaxed);
    link.wake_peer_for_space();
}

/// Largest inline (`ND_OP_FLAG_INLINE`) Send, as in `tcp`.
const INLINE_LIMIT: u64 = 1024;
/// Answers (ACKs, Read responses, grants) we may owe a peer at once: its initiator queue's
/// most (the adapter's `MaxInitiatorQueueDepth`), whose requests each wait for one.
pub(crate) const MAX_ANSWERS_OWED: usize = 16384;

/// Where the connection of a queue pair stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Conn {
    /// Never connected: Receive and Flush work, Send gives `ND_CONNECTION_INVALID`.
    Idle,
    /// Passive side after Accept: waiting for the active side's RTR record; Sends wait.
    AwaitRtr,
    /// Full operation.
    Established,
    /// Disconnected or terminated: every request completes with `ND_CANCELED`.
    Closed,
}

#[derive(Debug)]
struct RecvWr {
    context: u64,
    total: u64,
}

/// What an initiator request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Send,
    /// RDMA Write to the peer's memory.
    Write(Desc),
    /// RDMA Read from the peer's memory.
    Read(Desc),
    /// Bind and Invalidate act at post time and complete in their turn.
    Bind,
    Invalidate,
}

#[derive(Debug)]
struct SendWr {
    context: u64,
    flags: OpFlags,
    total: u64,
    op: Op,
    /// `INLINE` data captured at post time because the request had to wait.
    inline: Option<Vec<u8>>,
    /// Its records are in the ring and it completes on the peer's answer: the ACK of an RTS
    /// Send or of a Write (the target placed it), the response of a Read, or a TERM record
    /// (the target refused it). The target answers in the order of the requests, so an
    /// answer always belongs to the oldest waiting request; requests behind it may already be
    /// in the ring (pipelined) but complete after it.
    awaiting: bool,
    /// An error found at post time: completes with this status in its turn and ends the
    /// connection (R-QP-6).
    error: Option<Status>,
    /// A Send in more than one record (RTS, or chunks): its number among the messages we
    /// started (`Inner::tx_msgs`), which an RNR record names.
    msn: Option<u32>,
}

impl SendWr {
    fn new(context: u64, flags: OpFlags, total: u64, op: Op) -> Self {
        Self {
            context,
            flags,
            total,
            op,
            inline: None,
            awaiting: false,
            error: None,
            msn: None,
        }
    }
}

/// What became of a peer's one-sided request.
enum Served {
    Done,
    /// Refused by the protection checks: TERM, then the connection ends.
    Refused,
    /// A record that breaks the protocol.
    Broken,
}

/// What became of an RTS record.
enum Pulled {
    Done,
    Stalled,
    Closed,
}

/// Where the bytes of a chunked incoming record sequence go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sink {
    /// A Send: the front Receive.
    Recv,
    /// The peer's RDMA Write: our memory at this address (checked when the Write began; the
    /// registration is held in `Inner::rx_reg`).
    Write(u64),
    /// The response to our front Read: its sink segments.
    Read,
}

/// A chunked message being received.
#[derive(Debug, Clone, Copy)]
struct RxMsg {
    pos: u64,
    total: u64,
    solicited: bool,
    sink: Sink,
}

/// One answer owed to the peer, in the order owed (ACK, a Read response, a mapped Write's or
/// Read's GRANT; DONE is the initiator's answer to a GRANT).
#[derive(Debug)]
enum Answer {
    Ack,
    Read(Resp),
    /// The mapped Write or Read may go into (out of) our shared memory `id` at `off`
    /// (`mapped`).
    Grant {
        id: u64,
        off: u64,
        len: u32,
    },
    /// The mapped Write or Read must go the ordinary way.
    Deny,
    /// We copied the granted Write or Read (or, `copied: false`, could not).
    Done {
        copied: bool,
    },
}

/// Where the initiator's mapped Write or Read stands (`mapped`): it is the request being
/// pushed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MapOut {
    /// No mapped request asked for.
    Idle,
    /// MAPW or MAPR is in the ring; nothing else is pushed until the GRANT.
    Asked,
    /// Refused (or not mappable here): the request goes the ordinary way.
    Denied,
}

/// The response to the peer's RDMA Read, being pushed into our ring (target side).
#[derive(Debug)]
struct Resp {
    addr: u64,
    total: u64,
    sent: u64,
    /// The RRESP header record is in the ring; CHUNK records follow.
    hdr: bool,
    /// The source registration, held until the last byte is in the ring (a Deregister waits).
    _reg: Option<Arc<Registration>>,
}

struct Inner {
    conn: Conn,
    link: Option<Arc<Link>>,
    prod: Producer,
    cons: Consumer,
    rq: WrQueue<RecvWr>,
    sq: WrQueue<SendWr>,
    /// Bytes of the front Send already in the ring.
    tx_sent: u64,
    /// The first `in_ring` requests of `sq` are entirely in the ring: each waits for the
    /// peer's answer (`awaiting`) or for the ones before it to complete. The next one is being
    /// pushed (`tx_sent`, `tx_hdr`).
    in_ring: usize,
    /// Reads among them still waiting for their response (at most the ORD).
    reads_out: u32,
    /// The Write being pushed has its header record in the ring; its CHUNK records follow.
    tx_hdr: bool,
    /// Messages whose first record we pushed, and messages of the peer we took (wrapping
    /// counts): the peer's RNR record names the message it held by our count of it.
    tx_msgs: u32,
    rx_msgs: u32,
    /// What we owe the peer for its requests, in the order they came (ACK for an RTS message
    /// we pulled or a Write we placed, the response to a Read): it matches each answer to its
    /// oldest waiting request.
    answers: VecDeque<Answer>,
    /// Read responses among `answers` (at most our IRD).
    answers_reads: u32,
    rx_msg: Option<RxMsg>,
    /// The registration an incoming chunked Write is placed into.
    rx_reg: Option<Arc<Registration>>,
    /// Our mapped Write or Read being asked for (initiator side).
    map_out: MapOut,
    /// Target tokens whose last MAPW or MAPR was refused (heap memory, say): their Writes and
    /// Reads go the ordinary way at once, without asking again (a refusal costs a round trip
    /// in which no other request of ours moves).
    map_denied: [u32; 4],
    /// The registration the peer's granted mapped Write or Read goes into (comes out of), held
    /// until its DONE (target side).
    map_hold: Option<Arc<Registration>>,
    /// Read limits of the connection: Reads the peer may have in flight toward us (IRD) and
    /// Reads we may issue (ORD).
    ird: u32,
    ord: u32,
    /// We published records: the peer's `waiting` word must be checked before the lock is
    /// released ([`ShmQp::flush_wake`]). (Freed space is checked for at once, against the
    /// peer's other flag: `Link::wake_peer_for_space`.)
    wake_owed: bool,
    /// The ACKs in `answers` are held for the application's next call (module docs); the
    /// link's `acks_held` mirrors it for lock-free pollers.
    acks_held: bool,
    /// Windows bound through this queue pair (unbound when the connection ends).
    windows: mw::BoundWindows,
    /// Last registration a peer's one-sided request resolved to (weak: a Deregister must not
    /// wait for it).
    rcache: LocalCache,
    accept: Option<OvCompleter>,
    disconnect_waiters: PendingRequests<()>,
    /// Last registration a local SGE resolved to: most posts reuse the same buffer.
    cache: LocalCache,
    /// Where a Receive taken from the SRQ lands before it moves into `rq`.
    srq_scratch: Vec<SrqSeg>,
    /// On the SRQ's stalled list.
    srq_listed: bool,
}

impl Inner {
    /// The mapping for the request being pushed was refused (or cannot be made here): it goes
    /// the ordinary way, and its target token is not asked for again soon.
    fn mapping_refused(&mut self) {
        self.map_out = MapOut::Denied;
        if let Some((wr, _)) = self.sq.get(self.in_ring) {
            if let Op::Write(d) | Op::Read(d) = wr.op {
                self.map_denied.rotate_right(1);
                self.map_denied[0] = d.token;
            }
        }
    }

    /// A queue pair's state before it connects (`Conn::Idle`).
    fn new(rq: WrQueue<RecvWr>, sq: WrQueue<SendWr>, srq_scratch: Vec<SrqSeg>) -> Self {
        Self {
            conn: Conn::Idle,
            link: None,
            prod: Producer::default(),
            cons: Consumer::default(),
            rq,
            sq,
            tx_sent: 0,
            in_ring: 0,
            tx_msgs: 0,
            rx_msgs: 0,
            reads_out: 0,
            tx_hdr: false,
            answers: VecDeque::new(),
            answers_reads: 0,
            rx_msg: None,
            rx_reg: None,
            map_out: MapOut::Idle,
            map_denied: [0; 4],
            map_hold: None,
            ird: 0,
            ord: 0,
            wake_owed: false,
            acks_held: false,
            windows: mw::BoundWindows::default(),
            rcache: LocalCache::default(),
            accept: None,
            disconnect_waiters: PendingRequests::new(),
            cache: LocalCache::default(),
            srq_scratch,
            srq_listed: false,
        }
    }

    /// A placeholder that owns nothing, left behind when the state is moved out.
    fn empty() -> Self {
        Self {
            conn: Conn::Closed,
            ..Self::new(WrQueue::new(1, 1), WrQueue::new(1, 1), Vec::new())
        }
    }
}

/// The `shm` provider's queue pair.
pub(crate) struct ShmQp {
    me: Weak<Self>,
    shared: Arc<Shared>,
    rcq: Arc<ShmCq>,
    icq: Arc<ShmCq>,
    /// `CreateQueuePairWithSrq`: Receives come from here, one message at a time, into `rq`.
    srq: Option<Arc<ShmSrq>>,
    context: u64,
    /// This queue pair's id (a window bound through it carries it).
    id: u64,
    max_transfer: u64,
    inline_size: u64,
    /// Set once, at establishment: lets a poll check the ring without the lock.
    link: OnceLock<Arc<Link>>,
    /// Biased to the first thread that takes it (`bias`): a connection driven by one thread
    /// (posts and polls, as ND's examples and MPI ranks do) takes it with no locked
    /// instruction. The first time another thread takes it (a second poster, a Deregister's
    /// copy barrier from another thread: `fence`) the bias goes for good, at the cost of one
    /// `membarrier`.
    inner: BiasedMutex<Inner>,
}

impl fmt::Debug for ShmQp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShmQp")
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

/// Segment capacity per request: at least 4 even when fewer were asked for (`nd-reference.md`
/// D12), as in `tcp`.
fn seg_capacity(requested: u32) -> usize {
    requested.max(4) as usize
}

/// What an initiator completion reports in `BytesTransferred`: the request's length when it
/// succeeded, else 0 (as `tcp`; `tests/lengths.rs` in the conformance suite).
fn reported_len(status: Status, total: u64) -> u32 {
    if status == Status::SUCCESS {
        u32::try_from(total).unwrap_or(u32::MAX)
    } else {
        0
    }
}

impl ShmQp {
    pub(crate) fn new(shared: Arc<Shared>, cfg: &QueuePairConfig) -> Result<Arc<Self>> {
        let rcq = ShmCq::downcast(&cfg.receive_cq).ok_or(Error::invalid_parameter(2))?;
        let icq = ShmCq::downcast(&cfg.initiator_cq).ok_or(Error::invalid_parameter(3))?;
        // CreateQueuePairWithSrq: the SRQ is parameter 4 (nd-reference.md §2.4).
        let srq = match &cfg.srq {
            Some(s) => Some(ShmSrq::downcast_on(s, &shared).ok_or(Error::invalid_parameter(4))?),
            None => None,
        };
        // With an SRQ, `rq` holds only the Receive taken for the message being received.
        let (rq_depth, rq_segs) = match &srq {
            Some(s) => (1, s.max_segs()),
            None => (
                cfg.receive_queue_depth as usize,
                seg_capacity(cfg.max_receive_request_sge),
            ),
        };
        let srq_scratch = vec![SrqSeg::default(); if srq.is_some() { rq_segs } else { 0 }];
        let info = shared.info;
        let qp = Arc::new_cyclic(|me| Self {
            me: me.clone(),
            shared: shared.clone(),
            rcq: rcq.clone(),
            icq: icq.clone(),
            srq,
            context: cfg.context,
            id: netdirect_spi::kit::mr::new_qp_id(),
            max_transfer: u64::from(info.max_transfer_length),
            inline_size: u64::from(cfg.inline_data_size).max(INLINE_LIMIT),
            link: OnceLock::new(),
            inner: BiasedMutex::new(Inner::new(
                WrQueue::new(rq_depth, rq_segs),
                WrQueue::new(
                    cfg.initiator_queue_depth as usize,
                    seg_capacity(cfg.max_initiator_request_sge),
                ),
                srq_scratch,
            )),
        });
        let src: Weak<dyn ProgressSource> = qp.me.clone();
        rcq.core.attach(src.clone());
        if !Arc::ptr_eq(&rcq, &icq) {
            icq.core.attach(src);
        }
        Ok(qp)
    }

    pub(crate) fn downcast(qp: &Arc<dyn traits::QueuePair>) -> Option<Arc<Self>> {
        qp.as_any()
            .downcast_ref::<Self>()
            .and_then(|q| q.me.upgrade())
    }

    /// The connection, once established.
    pub(crate) fn link(&self) -> Option<&Arc<Link>> {
        self.link.get()
    }

    pub(crate) fn weak(&self) -> Weak<Self> {
        self.me.clone()
    }

    fn lock(&self) -> BiasedGuard<'_, Inner> {
        self.inner.lock()
    }

    /// Take and release the lock: what held it is over (`Engine::fence_queue_pairs`).
    pub(crate) fn fence(&self) {
        drop(self.lock());
    }

    fn complete_recv(&self, context: u64, status: Status, bytes: u32, solicited: bool) {
        self.rcq.push(
            NdResult::receive(self.context, context, status, bytes),
            PushKind { solicited },
        );
    }

    /// Complete a Send that never entered the send queue (done or flushed within its post):
    /// a success reports its length, as `complete_wr` does.
    fn complete_send(&self, context: u64, flags: OpFlags, status: Status, total: u64) {
        if status == Status::SUCCESS && flags.contains(OpFlags::SILENT_SUCCESS) {
            return;
        }
        self.icq.push(
            NdResult {
                status,
                bytes_transferred: reported_len(status, total),
                qp_context: self.context,
                request_context: context,
                request_type: RequestType::Send,
            },
            PushKind::default(),
        );
    }

    /// Complete an initiator request (suppressed for `SILENT_SUCCESS` successes). A successful
    /// Send, Write or Read reports its length, as in `tcp` (`tests/lengths.rs` in the
    /// conformance suite).
    fn complete_wr(&self, wr: &SendWr, status: Status) {
        if status == Status::SUCCESS && wr.flags.contains(OpFlags::SILENT_SUCCESS) {
            return;
        }
        let (request_type, bytes) = match wr.op {
            Op::Send => (RequestType::Send, wr.total),
            Op::Write(_) => (RequestType::Write, wr.total),
            Op::Read(_) => (RequestType::Read, wr.total),
            Op::Bind => (RequestType::Bind, 0),
            Op::Invalidate => (RequestType::Invalidate, 0),
        };
        self.icq.push(
            NdResult {
                status,
                bytes_transferred: reported_len(status, bytes),
                qp_context: self.context,
                request_context: wr.context,
                request_type,
            },
            PushKind::default(),
        );
    }

    /// Whether every SGE lies in the cached registration with local read access (the common
    /// case of a small Send from the buffer used last), checked without taking a reference
    /// (`LocalCache::covers`): the bytes are copied out before the post returns, under the
    /// lock, and a Deregister waits for that (the adapter's copy barrier, `adapter::open`).
    fn cached_readable(&self, g: &Inner, sge: &[Sge]) -> bool {
        sge.iter().all(|s| {
            g.cache.covers(
                &self.shared.mrs,
                s.memory_region_token,
                s.buffer as usize as u64,
                u64::from(s.buffer_length),
                Access::LocalRead,
            )
        })
    }

    /// `Receive`.
    ///
    /// # Safety
    /// See [`traits::QueuePair::receive`].
    unsafe fn post_receive(&self, context: u64, sge: &[Sge]) -> Result<()> {
        if self.srq.is_some() {
            // Its Receives are posted to the shared receive queue (as tcp).
            return fail(Status::INVALID_DEVICE_REQUEST);
        }
        let mut g = self.lock();
        if sge.len() > g.rq.max_segs() {
            return fail(Status::DATA_OVERRUN);
        }
        if g.rq.is_full() {
            return fail(Status::NO_MORE_ENTRIES);
        }
        let total = total_len(sge);
        if total > self.max_transfer {
            // "The request referenced more data than is supported" (IND2QueuePair::Receive).
            return fail(Status::BUFFER_OVERFLOW);
        }
        if g.conn == Conn::Closed {
            drop(g);
            self.complete_recv(context, Status::CANCELED, 0, false);
            return Ok(());
        }
        // Checked straight into the queue's slots (no copy through scratch).
        let Inner { rq, cache, .. } = &mut *g;
        let wr = RecvWr { context, total };
        let queued = rq.push_checked(wr, sge, Access::LocalWrite, cache, &self.shared.mrs);
        if queued.is_err() {
            // An error completion moves the queue pair to the error state (R-QP-6). The
            // Receives posted before it are flushed first: completions keep posting order.
            self.close(&mut g, Status::CONNECTION_REFUSED);
            self.complete_recv(context, Status::ACCESS_VIOLATION, 0, false);
            return Ok(());
        }
        // A message may be waiting for this buffer.
        if let Some(link) = &g.link {
            if link.rx_stalled.load(Ordering::Acquire) {
                link.rx_stalled.store(false, Ordering::Release);
                // The whole drive: what the held records owe (an ACK, a Read response, a
                // GRANT) goes out now too; no poll would find it (`Link::has_work` sees the
                // ring, not owed answers).
                self.progress_locked(&mut g);
            }
        }
        Ok(())
    }

    /// `Send`.
    ///
    /// # Safety
    /// See [`traits::QueuePair::send`].
    unsafe fn post_send(&self, context: u64, sge: &[Sge], flags: OpFlags) -> Result<()> {
        let allowed = OpFlags::SILENT_SUCCESS
            | OpFlags::READ_FENCE
            | OpFlags::SEND_AND_SOLICIT_EVENT
            | OpFlags::INLINE;
        if !allowed.contains(flags) {
            return Err(Error::invalid_parameter(4));
        }
        let mut g = self.lock();
        if g.conn == Conn::Idle {
            return fail(Status::CONNECTION_INVALID);
        }
        let inline = flags.contains(OpFlags::INLINE);
        let max_sge = if inline {
            MAX_INLINE_SGE
        } else {
            g.sq.max_segs()
        };
        if sge.len() > max_sge {
            return fail(Status::DATA_OVERRUN);
        }
        if g.sq.is_full() {
            return fail(Status::NO_MORE_ENTRIES);
        }
        let total = total_len(sge);
        if total > self.max_transfer || (inline && total > self.inline_size) {
            return fail(Status::BUFFER_OVERFLOW);
        }
        if g.conn == Conn::Closed {
            drop(g);
            self.complete_send(context, flags, Status::CANCELED, 0);
            return Ok(());
        }
        self.push_held_acks(&mut g);
        // Into the ring within the post when nothing queued waits to go in before it (requests
        // already in the ring and waiting for answers do not stop it) and no fence holds it.
        let fenced = flags.contains(OpFlags::READ_FENCE) && g.reads_out > 0;
        // Nor when answers are owed: they go first, and one may be a Read response half in
        // the ring, whose chunks nothing may split (`push_answers`).
        let direct = g.sq.len() == g.in_ring
            && g.answers.is_empty()
            && g.conn == Conn::Established
            && total <= INLINE_MAX as u64
            && !fenced;
        // Into the cell within this call: INLINE memory, or memory inside the cached
        // registration with local read access (checked without taking a reference).
        if direct && (inline || self.cached_readable(&g, sge)) {
            // SAFETY: INLINE memory is readable during this call (the poster's contract);
            // otherwise every SGE lies in the cached live registration with local read access
            // (checked just above), and the poster promised not to write the memory until the
            // Send completes. It is copied into the ring within this call.
            let src = unsafe { InlineSges::new(sge) };
            if self.try_push_small(&mut g, &src, total as usize, flags) {
                self.pushed_send(g, context, flags, total);
                return Ok(());
            }
            if g.conn == Conn::Closed {
                // The ring broke the protocol and the connection ended (`try_push_small`):
                // everything queued was flushed, and so is this Send.
                drop(g);
                self.complete_send(context, flags, Status::CANCELED, 0);
                return Ok(());
            }
        }
        if inline {
            // Queued behind others (or no room): capture the bytes now so the buffer may be
            // reused at once.
            let mut data = Vec::with_capacity(total as usize);
            // SAFETY: INLINE memory is readable during this call.
            unsafe { mem::capture(sge, &mut data) };
            let mut wr = SendWr::new(context, flags, total, Op::Send);
            wr.inline = Some(data);
            g.sq.push_bare(wr);
        } else {
            let Inner { sq, cache, .. } = &mut *g;
            let wr = SendWr::new(context, flags, total, Op::Send);
            if let Err((mut wr, _)) =
                sq.push_checked(wr, sge, Access::LocalRead, cache, &self.shared.mrs)
            {
                // Completes ND_ACCESS_VIOLATION in its turn, then the connection ends.
                wr.error = Some(Status::ACCESS_VIOLATION);
                sq.push_bare(wr);
            }
        }
        self.progress_tx(&mut g);
        Ok(())
    }

    /// A Send just put in the ring by its post: complete at once when nothing is ahead of it,
    /// else queue it, already in the ring, to complete in its turn. The completion is queued
    /// before the lock goes: a Send another thread pushes next must not complete first.
    fn pushed_send(&self, mut g: BiasedGuard<'_, Inner>, context: u64, flags: OpFlags, total: u64) {
        if g.sq.is_empty() {
            self.complete_send(context, flags, Status::SUCCESS, total);
            return;
        }
        g.sq.push_bare(SendWr::new(context, flags, total, Op::Send));
        g.in_ring += 1;
    }

    /// Put a message of at most `INLINE_MAX` bytes in one cell, if there is room.
    fn try_push_small<G: crate::ring::Gather>(
        &self,
        g: &mut Inner,
        src: &G,
        len: usize,
        flags: OpFlags,
    ) -> bool {
        let Some(link) = self.link.get() else {
            return false;
        };
        let tx = link.tx();
        match g.prod.has_room(&tx, 0) {
            Ok(true) => {}
            Ok(false) => return false,
            Err(Violation) => {
                self.close(g, Status::CONNECTION_REFUSED);
                return false;
            }
        }
        let f = if flags.contains(OpFlags::SEND_AND_SOLICIT_EVENT) {
            flag::SOLICITED
        } else {
            0
        };
        g.prod.push_inline(&tx, kind::MSG, f, src, 0, len);
        g.tx_msgs = g.tx_msgs.wrapping_add(1);
        link.wake_peer();
        true
    }

    /// `Write` and `Read`: validation and local SGE checks, then the initiator queue.
    ///
    /// # Safety
    /// See [`traits::QueuePair::write`] and `read`.
    unsafe fn post_rdma(&self, context: u64, sge: &[Sge], flags: OpFlags, op: Op) -> Result<()> {
        let is_read = matches!(op, Op::Read(_));
        let allowed = if is_read {
            OpFlags::SILENT_SUCCESS | OpFlags::READ_FENCE
        } else {
            OpFlags::SILENT_SUCCESS | OpFlags::READ_FENCE | OpFlags::INLINE
        };
        // The flags parameter is the 6th of Read and Write.
        if !allowed.contains(flags) {
            return Err(Error::invalid_parameter(6));
        }
        let mut g = self.lock();
        if g.conn == Conn::Idle {
            return fail(Status::CONNECTION_INVALID);
        }
        let inline = flags.contains(OpFlags::INLINE);
        let max_sge = if inline {
            MAX_INLINE_SGE
        } else {
            g.sq.max_segs()
        };
        if sge.len() > max_sge {
            return fail(Status::DATA_OVERRUN);
        }
        if g.sq.is_full() {
            return fail(Status::NO_MORE_ENTRIES);
        }
        let total = total_len(sge);
        if total > self.max_transfer || (inline && total > self.inline_size) {
            return fail(Status::BUFFER_OVERFLOW);
        }
        if is_read && g.conn != Conn::Closed && g.ord == 0 {
            // The connection grants no outbound Reads (Connect/Accept outboundReadLimit 0, or
            // a peer with IRD 0): such a Read could never be issued (as tcp).
            return fail(Status::INVALID_DEVICE_REQUEST);
        }
        let mut wr = SendWr::new(context, flags, total, op);
        if g.conn == Conn::Closed {
            drop(g);
            self.complete_wr(&wr, Status::CANCELED);
            return Ok(());
        }
        if inline {
            if let Op::Write(d) = op {
                let fenced = flags.contains(OpFlags::READ_FENCE) && g.reads_out > 0;
                // As for a direct Send (`post_send`): nothing queued, and no answer owed but
                // perhaps one ACK, which rides on the Write (`flag::ACK`).
                let ack = match g.answers.len() {
                    0 => Some(false),
                    1 if matches!(g.answers.front(), Some(Answer::Ack)) => Some(true),
                    _ => None,
                };
                if let (Some(ack), true) = (
                    ack,
                    g.sq.len() == g.in_ring && g.conn == Conn::Established && !fenced,
                ) {
                    // SAFETY: INLINE memory is readable during this call (the poster's
                    // contract); it is copied into the ring within this call.
                    let src = unsafe { InlineSges::new(sge) };
                    match self.try_push_write_inline(&mut g, d, &src, total as usize, ack) {
                        Some(true) => {
                            if ack {
                                g.answers.pop_front();
                                self.release_acks(&mut g);
                            }
                            wr.awaiting = true;
                            g.sq.push_bare(wr);
                            g.in_ring += 1;
                            return Ok(());
                        }
                        Some(false) => {}
                        None => {
                            // The connection ended under us: everything was flushed.
                            drop(g);
                            self.complete_wr(&wr, Status::CANCELED);
                            return Ok(());
                        }
                    }
                }
            }
            // It waits: capture the bytes now so the buffer may be reused at once.
            let mut data = Vec::with_capacity(total as usize);
            // SAFETY: INLINE memory is readable during this call.
            unsafe { mem::capture(sge, &mut data) };
            wr.inline = Some(data);
        } else {
            // A Read's sink must be locally writable; a Write's source readable.
            let access = if is_read {
                Access::LocalWrite
            } else {
                Access::LocalRead
            };
            let Inner { sq, cache, .. } = &mut *g;
            if let Err((mut wr, _)) = sq.push_checked(wr, sge, access, cache, &self.shared.mrs) {
                // Completes ND_ACCESS_VIOLATION in its turn, then the connection ends.
                wr.error = Some(Status::ACCESS_VIOLATION);
                sq.push_bare(wr);
            }
            self.progress_tx(&mut g);
            return Ok(());
        }
        g.sq.push_bare(wr);
        self.progress_tx(&mut g);
        Ok(())
    }

    /// Put an `INLINE` Write (at most the inline size, which is below a chunk) in the ring
    /// within the post, if there is room for all of it: one cell with its descriptor when at
    /// most [`WRITE_INLINE_MAX`] bytes, else the descriptor and one CHUNK record. Nothing is
    /// captured, so nothing is allocated. With `ack`, the WRITE record carries the ACK owed
    /// to the peer ([`flag::ACK`]; the caller takes it off `answers`). `Some(true)` pushed,
    /// `Some(false)` no room, `None` the connection ended.
    fn try_push_write_inline<G: crate::ring::Gather>(
        &self,
        g: &mut Inner,
        d: Desc,
        src: &G,
        len: usize,
        ack: bool,
    ) -> Option<bool> {
        let link = self.link.get()?;
        let tx = link.tx();
        let small = len <= WRITE_INLINE_MAX;
        let room = if small {
            g.prod.has_room(&tx, 0)
        } else if len <= self.shared.config.chunk {
            g.prod.has_room_for(&tx, 2, len as u64)
        } else {
            Ok(false)
        };
        match room {
            Ok(true) => {}
            Ok(false) => return Some(false),
            Err(Violation) => {
                self.close(g, Status::CONNECTION_REFUSED);
                return None;
            }
        }
        let head = d.encode();
        let f = if ack { flag::ACK } else { 0 };
        if small {
            let src = Prefixed {
                head: &head,
                rest: src,
            };
            g.prod
                .push_header(&tx, kind::WRITE, f, len as u32, &src, 0, Desc::LEN + len);
        } else {
            let h = &Owned(&head);
            g.prod
                .push_header(&tx, kind::WRITE, f, len as u32, h, 0, Desc::LEN);
            g.prod.push_chunk(&tx, flag::LAST, len as u32, src, 0, len);
        }
        link.wake_peer();
        Some(true)
    }

    /// Push the answers we owe, in order, as far as they fit. `Ok(true)`: all of them.
    ///
    /// While one of our own messages or Writes is partly in the ring (`tx_sent`, `tx_hdr`) its
    /// CHUNK records must follow each other: the peer tells them from a Read response's only
    /// by their order. Only answers the peer takes in the middle of a message go in then (ACK
    /// and DONE, one cell each); the rest wait until the message is in.
    fn push_answers(
        &self,
        g: &mut Inner,
        tx: &crate::segment::Chan<'_>,
    ) -> Result<bool, Violation> {
        let mid_message = g.tx_sent > 0 || g.tx_hdr;
        while let Some(a) = g.answers.front() {
            if mid_message && !matches!(a, Answer::Ack | Answer::Done { .. }) {
                return Ok(false);
            }
            let done = match a {
                Answer::Ack => g.prod.has_room(tx, 0)?.then(|| {
                    g.prod.push_inline(tx, kind::ACK, 0, &Owned(&[]), 0, 0);
                }),
                Answer::Read(_) => self.push_resp(g, tx)?.then_some(()),
                &Answer::Grant { id, off, len } => g.prod.has_room(tx, 0)?.then(|| {
                    let mut b = [0u8; 16];
                    b[..8].copy_from_slice(&id.to_le_bytes());
                    b[8..].copy_from_slice(&off.to_le_bytes());
                    g.prod
                        .push_header(tx, kind::GRANT, 0, len, &Owned(&b), 0, 16);
                }),
                Answer::Deny => g.prod.has_room(tx, 0)?.then(|| {
                    g.prod
                        .push_inline(tx, kind::GRANT, flag::NO, &Owned(&[]), 0, 0);
                }),
                &Answer::Done { copied } => g.prod.has_room(tx, 0)?.then(|| {
                    let f = if copied { 0 } else { flag::NO };
                    g.prod.push_inline(tx, kind::DONE, f, &Owned(&[]), 0, 0);
                }),
            };
            if done.is_none() {
                return Ok(false);
            }
            if let Some(Answer::Read(_)) = g.answers.pop_front() {
                g.answers_reads -= 1;
            }
        }
        Ok(true)
    }

    /// Push as much of the response at the front of `answers` as fits. `Ok(true)`: all of it
    /// is in the ring (the caller pops it).
    fn push_resp(&self, g: &mut Inner, tx: &crate::segment::Chan<'_>) -> Result<bool, Violation> {
        let chunk = self.shared.config.chunk as u64;
        let Inner { prod, answers, .. } = g;
        let Some(Answer::Read(r)) = answers.front_mut() else {
            return Ok(true);
        };
        // SAFETY of the source: `[addr, addr + total)` passed the remote-read check against
        // a live registration, which `r` holds until the last byte is in the ring.
        let seg = mem::target(r.addr, r.total);
        let src = Segs(std::slice::from_ref(&seg));
        if !r.hdr {
            if !prod.has_room(tx, 0)? {
                return Ok(false);
            }
            if r.total as usize <= INLINE_MAX {
                let n = r.total as usize;
                prod.push_header(tx, kind::RRESP, 0, r.total as u32, &src, 0, n);
                return Ok(true);
            }
            prod.push_header(tx, kind::RRESP, 0, r.total as u32, &Owned(&[]), 0, 0);
            r.hdr = true;
        }
        while r.sent < r.total {
            let n = chunk.min(r.total - r.sent);
            if !prod.has_room(tx, n)? {
                return Ok(false);
            }
            let f = if r.sent + n == r.total { flag::LAST } else { 0 };
            prod.push_chunk(tx, f, r.total as u32, &src, r.sent, n as usize);
            r.sent += n;
        }
        Ok(true)
    }

    /// Move queued requests into the ring while there is room, in order; complete those done.
    fn progress_tx(&self, g: &mut Inner) {
        // Whatever was held goes with the rest of the answers.
        self.release_acks(g);
        if g.conn != Conn::Established {
            return;
        }
        let Some(link) = self.link.get() else { return };
        let tx = link.tx();
        let chunk = self.shared.config.chunk as u64;
        let pull_min = self.shared.config.pull_min;
        let write_pull_min = self.shared.config.write_pull_min;
        let map_min = self.shared.config.map_min;
        let mut pushed = false;
        let mut blocked = false;
        loop {
            // Answers to the peer's requests come first, in order, before each of our requests
            // (its requests wait for them), but never inside one of ours (`push_answers`).
            if !g.answers.is_empty() {
                // Part of a response may go in even when the rest must wait: the peer may be
                // asleep waiting for it.
                pushed = true;
                match self.push_answers(g, &tx) {
                    Ok(all) => blocked = !all && g.tx_sent == 0 && !g.tx_hdr,
                    Err(Violation) => {
                        self.close(g, Status::CONNECTION_REFUSED);
                        return;
                    }
                }
            }
            if blocked {
                break;
            }
            let Inner {
                prod,
                sq,
                tx_sent,
                tx_hdr,
                in_ring,
                reads_out,
                ord,
                map_out,
                map_denied,
                tx_msgs,
                ..
            } = &mut *g;
            // Requests go into the ring in post order while earlier ones wait for answers
            // (pipelined); they complete in order (RFC 5040 §5.5 rules 13 and 15).
            let i = *in_ring;
            let Some((wr, segs)) = sq.get(i) else { break };
            if let Some(status) = wr.error {
                if i > 0 {
                    break; // completes in its turn, once the ones before it have
                }
                let wr = sq.pop().expect("present");
                self.complete_wr(&wr, status);
                // R-QP-6: an error completion ends the connection; the rest is flushed.
                self.close(g, Status::CONNECTION_REFUSED);
                return;
            }
            // ND_OP_FLAG_READ_FENCE: every earlier Read completes before this request starts
            // (RFC 5040 §5.5 rule 12); a Read beyond the ORD waits for a slot (§5.4).
            let is_read = matches!(wr.op, Op::Read(_));
            if (wr.flags.contains(OpFlags::READ_FENCE) && *reads_out > 0)
                || (is_read && *reads_out >= *ord)
            {
                break;
            }
            let total = wr.total;
            let src = match &wr.inline {
                Some(d) => Src::Owned(Owned(d)),
                None => Src::Segs(Segs(segs)),
            };
            let mut violation = false;
            // Sent as an RTS record: the peer pulls it and ACKs.
            let mut rts = false;
            // A Send of more than one record started: its message number (`SendWr::msn`).
            let mut started = None;
            // Whether the request is now fully in the ring (or, for Bind and Invalidate, done).
            let done = match wr.op {
                Op::Bind | Op::Invalidate => true,
                // A mapped Write or Read asked for: nothing goes in until the GRANT (`mapped`).
                Op::Write(_) | Op::Read(_) if *map_out == MapOut::Asked => false,
                // Large enough, and not refused lately: ask for a mapping.
                Op::Write(d) | Op::Read(d)
                    if !*tx_hdr
                        && *map_out == MapOut::Idle
                        && map_min > 0
                        && total >= map_min
                        && wr.inline.is_none()
                        && !map_denied.contains(&d.token)
                        && link.prove() =>
                {
                    match prod.has_room(&tx, 0) {
                        Ok(true) => {
                            let k = if is_read { kind::MAPR } else { kind::MAPW };
                            link.maps.asking(true);
                            let head = d.encode();
                            prod.push_header(&tx, k, 0, total as u32, &Owned(&head), 0, 16);
                            *map_out = MapOut::Asked;
                            pushed = true;
                        }
                        Ok(false) => blocked = true,
                        Err(Violation) => violation = true,
                    }
                    false
                }
                Op::Read(d) => match prod.has_room(&tx, 0) {
                    Ok(true) => {
                        let head = d.encode();
                        prod.push_header(&tx, kind::READ, 0, total as u32, &Owned(&head), 0, 16);
                        pushed = true;
                        true
                    }
                    Ok(false) => {
                        blocked = true;
                        false
                    }
                    Err(Violation) => {
                        violation = true;
                        false
                    }
                },
                Op::Write(d) if !*tx_hdr => {
                    let head = d.encode();
                    let pull = write_pull_min > 0
                        && total >= write_pull_min
                        && wr.inline.is_none()
                        && segs.len() <= RTS_MAX_SGES
                        && link.peer_can_pull();
                    let mut list = [0u8; (RTS_MAX_SGES + 1) * 16];
                    let need = if pull {
                        list[..16].copy_from_slice(&head);
                        for (k, sg) in segs.iter().enumerate() {
                            let e = &mut list[16 + k * 16..32 + k * 16];
                            e[..8].copy_from_slice(&sg.addr.to_le_bytes());
                            e[8..].copy_from_slice(&u64::from(sg.len).to_le_bytes());
                        }
                        16 + segs.len() * 16
                    } else {
                        0
                    };
                    match prod.has_room(&tx, need as u64) {
                        Ok(true) if pull => {
                            // The target pulls the bytes itself, straight into its memory.
                            let l = &Owned(&list[..need]);
                            prod.push_data(&tx, kind::WPULL, 0, total as u32, l, 0, need);
                            pushed = true;
                            true
                        }
                        Ok(true) if total as usize <= WRITE_INLINE_MAX => {
                            let p = Prefixed {
                                head: &head,
                                rest: &src,
                            };
                            let n = Desc::LEN + total as usize;
                            prod.push_header(&tx, kind::WRITE, 0, total as u32, &p, 0, n);
                            pushed = true;
                            true
                        }
                        Ok(true) => {
                            // The descriptor now, the bytes as CHUNK records below.
                            prod.push_header(
                                &tx,
                                kind::WRITE,
                                0,
                                total as u32,
                                &Owned(&head),
                                0,
                                16,
                            );
                            *tx_hdr = true;
                            pushed = true;
                            false
                        }
                        Ok(false) => {
                            blocked = true;
                            false
                        }
                        Err(Violation) => {
                            violation = true;
                            false
                        }
                    }
                }
                Op::Send
                    if pull_min > 0
                        && total >= pull_min
                        && *tx_sent == 0
                        && wr.inline.is_none()
                        && segs.len() <= RTS_MAX_SGES
                        && link.peer_can_pull() =>
                {
                    // Large: announce the scatter list; the peer pulls the bytes itself.
                    let sol = if wr.flags.contains(OpFlags::SEND_AND_SOLICIT_EVENT) {
                        flag::SOLICITED
                    } else {
                        0
                    };
                    let mut list = [0u8; RTS_MAX_SGES * 16];
                    for (k, sg) in segs.iter().enumerate() {
                        list[k * 16..k * 16 + 8].copy_from_slice(&sg.addr.to_le_bytes());
                        list[k * 16 + 8..k * 16 + 16]
                            .copy_from_slice(&u64::from(sg.len).to_le_bytes());
                    }
                    let n = segs.len() * 16;
                    match prod.has_room(&tx, n as u64) {
                        Ok(true) => {
                            let l = &Owned(&list[..n]);
                            prod.push_data(&tx, kind::RTS, sol, total as u32, l, 0, n);
                            started = Some(*tx_msgs);
                            *tx_msgs = tx_msgs.wrapping_add(1);
                            pushed = true;
                            rts = true;
                            true
                        }
                        Ok(false) => {
                            blocked = true;
                            false
                        }
                        Err(Violation) => {
                            violation = true;
                            false
                        }
                    }
                }
                Op::Send if total <= INLINE_MAX as u64 => {
                    let sol = if wr.flags.contains(OpFlags::SEND_AND_SOLICIT_EVENT) {
                        flag::SOLICITED
                    } else {
                        0
                    };
                    match prod.has_room(&tx, 0) {
                        Ok(true) => {
                            prod.push_inline(&tx, kind::MSG, sol, &src, 0, total as usize);
                            *tx_msgs = tx_msgs.wrapping_add(1);
                            pushed = true;
                            true
                        }
                        Ok(false) => {
                            blocked = true;
                            false
                        }
                        Err(Violation) => {
                            violation = true;
                            false
                        }
                    }
                }
                Op::Send | Op::Write(_) => false,
            };
            // The chunked bytes of a large Send, or of a Write whose descriptor is in the ring.
            let chunked = !done
                && !blocked
                && !violation
                && (wr.op == Op::Send || (matches!(wr.op, Op::Write(_)) && *tx_hdr));
            let mut finished = done;
            if chunked {
                let is_send = wr.op == Op::Send;
                let sol = if is_send && wr.flags.contains(OpFlags::SEND_AND_SOLICIT_EVENT) {
                    flag::SOLICITED
                } else {
                    0
                };
                finished = loop {
                    if *tx_sent == total {
                        break true;
                    }
                    let n = chunk.min(total - *tx_sent);
                    match prod.has_room(&tx, n) {
                        Ok(true) => {}
                        Ok(false) => {
                            blocked = true;
                            break false;
                        }
                        Err(Violation) => {
                            violation = true;
                            break false;
                        }
                    }
                    let mut f = sol;
                    // A Send's first chunk starts a message; a Write's chunks continue its
                    // WRITE record.
                    if *tx_sent == 0 && is_send {
                        f |= flag::FIRST;
                        started = Some(*tx_msgs);
                        *tx_msgs = tx_msgs.wrapping_add(1);
                    }
                    if *tx_sent + n == total {
                        f |= flag::LAST;
                    }
                    prod.push_chunk(&tx, f, total as u32, &src, *tx_sent, n as usize);
                    *tx_sent += n;
                    pushed = true;
                };
            }
            if violation {
                self.close(g, Status::CONNECTION_REFUSED);
                return;
            }
            if !finished {
                if let (Some(m), Some((w, _))) = (started, sq.get_mut(i)) {
                    w.msn = Some(m);
                }
                break;
            }
            *tx_sent = 0;
            *tx_hdr = false;
            *map_out = MapOut::Idle;
            // A Send is complete once its bytes are in the ring (or when the peer ACKs an
            // RTS); Writes and Reads when the peer answers.
            let wait = match wr.op {
                Op::Send => rts,
                Op::Write(_) | Op::Read(_) => true,
                Op::Bind | Op::Invalidate => false,
            };
            if let Some((wr, _)) = sq.get_mut(i) {
                wr.awaiting = wait;
                if started.is_some() {
                    wr.msn = started;
                }
            }
            if is_read {
                *reads_out += 1;
            }
            *in_ring += 1;
        }
        self.complete_front(g);
        if pushed {
            g.wake_owed = true;
        }
        self.flush_wake(g);
        if blocked && g.conn == Conn::Established {
            let (t, dt) = g.prod.seen_tails();
            link.tx_seen[0].store(t, Ordering::Relaxed);
            link.tx_seen[1].store(dt, Ordering::Relaxed);
            link.set_tx_blocked(true);
        } else {
            link.set_tx_blocked(false);
        }
    }

    /// Complete, in order, the requests at the front that are in the ring and wait for no
    /// answer (a Send whose bytes are in the ring is complete: local completion, as `tcp`
    /// completes a Send once TCP took it).
    fn complete_front(&self, g: &mut Inner) {
        while g.in_ring > 0 {
            match g.sq.front() {
                Some((wr, _)) if !wr.awaiting => {}
                _ => return,
            }
            let wr = g.sq.pop().expect("present");
            g.in_ring -= 1;
            self.complete_wr(&wr, Status::SUCCESS);
        }
    }

    /// The peer answered the request at the front (ACK, the end of a Read response): it is
    /// complete, and so are the ones behind it that waited only for their turn.
    fn answered(&self, g: &mut Inner) {
        if let Some(wr) = g.sq.front_mut() {
            wr.awaiting = false;
            if matches!(wr.op, Op::Read(_)) {
                g.reads_out -= 1;
            }
        }
        self.complete_front(g);
    }

    /// The request at the front, if it is in the ring and waits for the peer's answer.
    fn awaited(&self, g: &Inner) -> Option<Op> {
        match g.sq.front() {
            Some((wr, _)) if g.in_ring > 0 && wr.awaiting => Some(wr.op),
            _ => None,
        }
    }

    /// Consume published records: messages into posted Receives, the peer's one-sided
    /// requests into (or out of) our memory, answers to ours.
    fn progress_rx(&self, g: &mut Inner) {
        if g.conn == Conn::Closed {
            return;
        }
        let Some(link) = self.link.get() else { return };
        // Read before draining: every record the peer published before it closed is delivered.
        let peer_closed = link.peer_closed() || link.peer_eof.load(Ordering::Acquire);
        let rx = link.rx();
        let mut consumed = false;
        loop {
            let r = match g.cons.peek(&rx) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(Violation) => return self.violation(g),
            };
            if r.kind == kind::MSG {
                // The common case first (anything else about a MSG is the general path's).
                if let Some(context) = take_inline_msg(g, link, &rx, r) {
                    consumed = true;
                    let solicited = r.flags & flag::SOLICITED != 0;
                    self.complete_recv(context, Status::SUCCESS, r.len, solicited);
                    continue;
                }
            }
            match r.kind {
                kind::RTR => {
                    g.cons.advance();
                    consumed = true;
                    if g.conn == Conn::AwaitRtr {
                        self.rtr_received(g);
                    }
                    continue;
                }
                _ if g.conn != Conn::Established => return self.violation(g),
                kind::GRANT => {
                    // The answer to our MAPW or MAPR (`mapped`), between records of nothing else.
                    if g.map_out != MapOut::Asked || g.rx_msg.is_some() {
                        return self.violation(g);
                    }
                    let mut cell = [0u8; 16];
                    if r.len == 16 {
                        g.cons.read_inline(&rx, 16, &mut OwnedMut(&mut cell), 0);
                    }
                    g.cons.advance();
                    consumed = true;
                    if r.flags & flag::NO != 0 {
                        g.mapping_refused();
                    } else if !self.mapped_copy(g, link, &cell, r.total) {
                        return self.violation(g);
                    }
                    // The memory's MAP message, if any, was taken by `mapped_copy`.
                    link.maps.asking(false);
                    continue;
                }
                kind::DONE => {
                    // The peer copied the Write or Read we granted (or could not): let go.
                    if g.map_hold.take().is_none() {
                        return self.violation(g);
                    }
                    g.cons.advance();
                    consumed = true;
                    continue;
                }
                kind::ACK => {
                    // The peer pulled our RTS message or placed our Write: it is complete.
                    if !matches!(self.awaited(g), Some(Op::Send | Op::Write(_))) {
                        return self.violation(g);
                    }
                    self.answered(g);
                    g.cons.advance();
                    consumed = true;
                    continue;
                }
                kind::RNR | kind::OVERRUN => {
                    // The peer held our oldest unreceived message past its bound (R-QP-7), or
                    // it did not fit the Receive it reached (D5): a Send still in progress
                    // fails ND_IO_TIMEOUT or STATUS_DATA_ERROR (as tcp's Send a Terminate
                    // names); the rest is flushed.
                    g.cons.advance();
                    g.cons.release(&rx);
                    // The record names the message held (`total`: its number among ours). Only
                    // if that is still ours to complete (an RTS Send at the front, or the Send
                    // being pushed when nothing waits before it) does it fail; a message whose
                    // bytes were all in the ring completed already, and what follows it is
                    // flushed.
                    let held =
                        g.sq.front()
                            .is_some_and(|(wr, _)| wr.op == Op::Send && wr.msn == Some(r.total));
                    let rts = matches!(self.awaited(g), Some(Op::Send));
                    let pushing = g.in_ring == 0 && g.tx_sent > 0;
                    if held && (rts || pushing) {
                        let wr = g.sq.pop().expect("present");
                        g.in_ring = g.in_ring.saturating_sub(1);
                        let status = if r.kind == kind::RNR {
                            Status::IO_TIMEOUT
                        } else {
                            Status::DATA_ERROR
                        };
                        self.complete_wr(&wr, status);
                    }
                    self.close(g, Status::CONNECTION_REFUSED);
                    return;
                }
                kind::TERM => {
                    // The peer refused our oldest one-sided request (nd-reference.md D6): it
                    // completes ND_ACCESS_VIOLATION, everything else is flushed.
                    g.cons.advance();
                    g.cons.release(&rx);
                    if matches!(self.awaited(g), Some(Op::Write(_) | Op::Read(_))) {
                        let wr = g.sq.pop().expect("present");
                        g.in_ring -= 1;
                        self.complete_wr(&wr, Status::ACCESS_VIOLATION);
                    } else if g.in_ring == 0 && (g.map_out == MapOut::Asked || g.tx_hdr) {
                        // Our mapped Write's MAPW (or Read's MAPR) was refused, or the Write
                        // whose chunks we are still pushing: it is the oldest.
                        let wr = g.sq.pop().expect("present");
                        self.complete_wr(&wr, Status::ACCESS_VIOLATION);
                    }
                    self.close(g, Status::CONNECTION_REFUSED);
                    return;
                }
                kind::RTS => {
                    if g.rx_msg.is_some() {
                        return self.violation(g);
                    }
                    match self.pull(g, link, r) {
                        Pulled::Done => {
                            consumed = true;
                            continue;
                        }
                        Pulled::Stalled => {
                            if self.stall(link) {
                                return self.give_up(g, link);
                            }
                            break;
                        }
                        Pulled::Closed => return,
                    }
                }
                kind::WRITE | kind::WPULL | kind::READ | kind::MAPW | kind::MAPR => {
                    // Each request is owed an answer. A peer has at most its initiator queue
                    // of them awaiting ours (its Reads within that): one that asks for more
                    // does not take our answers, and would grow this queue without bound.
                    if g.rx_msg.is_some() || g.answers.len() >= MAX_ANSWERS_OWED {
                        return self.violation(g);
                    }
                    if r.flags & flag::ACK != 0 {
                        // The ACK riding on this Write answers our oldest waiting request,
                        // before the Write itself is looked at (it may still be refused).
                        if !matches!(self.awaited(g), Some(Op::Send | Op::Write(_))) {
                            return self.violation(g);
                        }
                        self.answered(g);
                    }
                    match self.serve(g, link, r) {
                        Served::Done => {
                            consumed = true;
                            continue;
                        }
                        Served::Refused => return self.refuse(g, link),
                        Served::Broken => return self.violation(g),
                    }
                }
                kind::RRESP => {
                    // The response to our front Read.
                    if g.rx_msg.is_some() {
                        return self.violation(g);
                    }
                    let size_ok =
                        g.sq.front()
                            .is_some_and(|(wr, _)| wr.total == u64::from(r.total));
                    if !matches!(self.awaited(g), Some(Op::Read(_))) || !size_ok {
                        return self.violation(g);
                    }
                    if r.len == r.total {
                        let Inner { sq, cons, .. } = &mut *g;
                        let (_, segs) = sq.front().expect("checked above");
                        cons.read_inline(&rx, r.len as usize, &mut Segs(segs), 0);
                        self.answered(g);
                    } else if r.len == 0 {
                        g.rx_msg = Some(RxMsg {
                            pos: 0,
                            total: u64::from(r.total),
                            solicited: false,
                            sink: Sink::Read,
                        });
                    } else {
                        return self.violation(g);
                    }
                    g.cons.advance();
                    consumed = true;
                    continue;
                }
                _ => {}
            }
            let first = r.kind == kind::MSG || r.flags & flag::FIRST != 0;
            if first {
                if g.rx_msg.is_some() {
                    return self.violation(g);
                }
                if g.rq.front().is_none() && !self.take_from_srq(g) {
                    // No Receive posted (here or in the SRQ): leave the record in the ring
                    // until one is; the connection survives (nd-reference.md §2.4) unless
                    // the wait exceeds the bound (R-QP-7).
                    if self.stall(link) {
                        return self.give_up(g, link);
                    }
                    break;
                }
                if link.rnr_deadline.load(Ordering::Relaxed) != 0 {
                    link.rnr_deadline.store(0, Ordering::Relaxed);
                }
                let Some((wr, _)) = g.rq.front() else {
                    return self.violation(g);
                };
                let total = if r.kind == kind::MSG {
                    u64::from(r.len)
                } else {
                    u64::from(r.total)
                };
                if total > wr.total {
                    // The message does not fit the Receive: ND_DATA_OVERRUN, and the
                    // connection terminates (nd-reference.md D5, as tcp).
                    g.cons.advance();
                    g.cons.release(&rx);
                    return self.overrun(g, link);
                }
                g.rx_msg = Some(RxMsg {
                    pos: 0,
                    total,
                    solicited: r.flags & flag::SOLICITED != 0,
                    sink: Sink::Recv,
                });
                g.rx_msgs = g.rx_msgs.wrapping_add(1);
            }
            let Some(mut m) = g.rx_msg else {
                return self.violation(g);
            };
            let len = u64::from(r.len);
            let last = m.pos + len == m.total;
            if len > m.total - m.pos
                || (r.kind == kind::CHUNK && (r.flags & flag::LAST != 0) != last)
                || (r.kind == kind::MSG && m.sink != Sink::Recv)
            {
                return self.violation(g);
            }
            // The registration is re-checked for every chunk of a Write: a Deregister or
            // Invalidate meanwhile refuses the rest, as tcp checks each segment.
            if matches!(m.sink, Sink::Write(_)) && !g.rx_reg.as_ref().is_some_and(|r| r.is_valid())
            {
                return self.refuse(g, link);
            }
            {
                let Inner { rq, sq, cons, .. } = &mut *g;
                let target;
                let segs: &[Seg] = match m.sink {
                    Sink::Recv => rq.front().expect("checked when the message began").1,
                    Sink::Read => sq.front().expect("checked by the RRESP record").1,
                    Sink::Write(addr) => {
                        target = mem::target(addr, m.total);
                        std::slice::from_ref(&target)
                    }
                };
                let mut dst = Segs(segs);
                if r.kind == kind::MSG {
                    cons.read_inline(&rx, r.len as usize, &mut dst, m.pos);
                } else {
                    cons.read_chunk(&rx, r.len as usize, &mut dst, m.pos);
                }
            }
            m.pos += len;
            g.cons.advance();
            consumed = true;
            if last {
                g.rx_msg = None;
                match m.sink {
                    Sink::Recv => {
                        let wr = g.rq.pop().expect("present");
                        self.complete_recv(
                            wr.context,
                            Status::SUCCESS,
                            m.total as u32,
                            m.solicited,
                        );
                    }
                    Sink::Read => self.answered(g),
                    Sink::Write(_) => {
                        g.rx_reg = None;
                        g.answers.push_back(Answer::Ack);
                    }
                }
            } else {
                g.rx_msg = Some(m);
            }
        }
        if consumed {
            release_rx(g, link, &rx);
        }
        if peer_closed {
            self.close(g, Status::CONNECTION_REFUSED);
        }
    }

    /// The busy poller's lane (issue 5): a `GetResults` on `cq` that finds our link with work
    /// drives us here, under one lock round trip, and gets back how many completions it found
    /// for `cq` in `out`. Whole inline messages for posted Receives go first and alone
    /// ([`ShmQp::take_messages`]); only when that leaves other work does the general drive
    /// (`progress_locked`) run, with what it completes for `cq` collected straight into the
    /// rest of `out` (`CqCore::drive_collecting`, the rule `kit::cq`'s direct module keeps).
    pub(crate) fn poll_lane(&self, link: &Link, cq: &ShmCq, out: &mut [NdResult]) -> usize {
        let mut g = self.lock();
        let (taken, drained) = self.take_messages(&mut g, link, cq, out);
        if taken > 0 && (taken == out.len() || drained) {
            return taken;
        }
        let rest = &mut out[taken..];
        taken
            + cq.core
                .drive_collecting(rest, || self.progress_locked(&mut g))
    }

    /// The records at the head of the ring that are whole inline messages for posted
    /// Receives, taken into them with their completions put in `out`; how many. Nothing is
    /// taken unless the connection is plainly established with no other work on the ring
    /// side (held ACKs, a blocked Send, a stalled message) and `cq` is our receive queue and
    /// may be bypassed (`CqCore::may_bypass`, under our lock, under which all our completions
    /// are made: our own earlier ones keep their order). Nor is it tried while requests of ours
    /// wait in the ring for the peer's answers: the next record is then likely an answer (or a
    /// Write riding one, in an RDMA Write ping-pong), which the general drive would only look
    /// at a second time.
    ///
    /// Also whether the lane stopped at an empty ring: as nothing else was pending when it
    /// started (the conditions above, which only change under our lock), the general drive has
    /// nothing to do now, and a peer's close is found by the next poll (`Link::wants_drive`).
    fn take_messages(
        &self,
        g: &mut Inner,
        link: &Link,
        cq: &ShmCq,
        out: &mut [NdResult],
    ) -> (usize, bool) {
        if !std::ptr::eq(&*self.rcq, cq)
            || g.conn != Conn::Established
            || g.in_ring != 0
            || g.acks_held
            || link.tx_blocked.load(Ordering::Relaxed)
            || link.rx_stalled.load(Ordering::Relaxed)
            || !cq.core.may_bypass()
        {
            return (0, false);
        }
        let rx = link.rx();
        let mut n = 0;
        let mut drained = false;
        while let Some(slot) = out.get_mut(n) {
            let r = match g.cons.peek(&rx) {
                Ok(Some(r)) => r,
                Ok(None) => {
                    drained = true;
                    break;
                }
                Err(Violation) => break,
            };
            if r.kind != kind::MSG {
                break;
            }
            let Some(context) = take_inline_msg(g, link, &rx, r) else {
                break;
            };
            *slot = NdResult::receive(self.context, context, Status::SUCCESS, r.len);
            n += 1;
        }
        if n > 0 {
            release_rx(g, link, &rx);
        }
        (n, drained)
    }

    /// Wake the peer if we published records since the last check (the changer's half of
    /// the wake-up handshake, `ring::wake`).
    fn flush_wake(&self, g: &mut Inner) {
        if g.wake_owed {
            g.wake_owed = false;
            if let Some(link) = self.link.get() {
                link.wake_peer();
            }
        }
    }

    /// Check a peer's one-sided access of `len` bytes at `d` against our registrations
    /// (target side; RFC 5040 §8.1.1 as `tcp`'s `protect`): a live token (index and key), a
    /// window bound through this queue pair, the right, and the whole range inside, with
    /// `addr + len` overflow caught. A zero-length access names no memory and is not checked
    /// (RFC 5041 §5.2): `Ok(None)`.
    fn check_remote(
        &self,
        g: &mut Inner,
        d: Desc,
        len: u64,
        access: Access,
    ) -> std::result::Result<Option<Arc<Registration>>, AccessError> {
        if len == 0 {
            return Ok(None);
        }
        let reg = g
            .rcache
            .resolve(&self.shared.mrs, d.token)
            .ok_or(AccessError::InvalidToken)?;
        // A window serves only the queue pair it was bound through (IND2MemoryWindow).
        if reg.kind == Kind::Window && reg.bound_qp.load(Ordering::Acquire) != self.id {
            return Err(AccessError::InvalidToken);
        }
        reg.check(d.addr, len, access)?;
        Ok(Some(reg))
    }

    /// The descriptor of the peer's MAPW or READ record at the head of the ring (its 16 inline
    /// bytes), checked for `len` bytes of `access` ([`ShmQp::check_remote`]).
    fn request(
        &self,
        g: &mut Inner,
        rx: &crate::segment::Chan<'_>,
        len: u64,
        access: Access,
    ) -> std::result::Result<(Desc, Option<Arc<Registration>>), AccessError> {
        let mut cell = [0u8; Desc::LEN];
        g.cons
            .read_inline(rx, Desc::LEN, &mut OwnedMut(&mut cell), 0);
        let d = Desc::decode(&cell);
        Ok((d, self.check_remote(g, d, len, access)?))
    }

    /// A WRITE, WPULL, MAPW or READ record from the peer (we are the target).
    fn serve(&self, g: &mut Inner, link: &Link, r: crate::ring::Record) -> Served {
        let rx = link.rx();
        let total = u64::from(r.total);
        match r.kind {
            kind::MAPW | kind::MAPR => {
                // One granted request at a time: the peer pushes nothing else until its DONE.
                if g.map_hold.is_some() {
                    return Served::Broken;
                }
                let read = r.kind == kind::MAPR;
                // A Read asked for by MAPR counts against the IRD as any other (RFC 5040 §5.4).
                if read && g.answers_reads >= g.ird {
                    return Served::Broken;
                }
                let access = if read {
                    Access::RemoteRead
                } else {
                    Access::RemoteWrite
                };
                let Ok((d, reg)) = self.request(g, &rx, total, access) else {
                    return Served::Refused;
                };
                g.cons.advance();
                // Granted only for shared memory, to a peer that showed it may read and write
                // our memory anyway, once it has the memory's descriptor (`mapped`).
                // Never through a memory window: an Invalidate must fail the transfers in
                // progress through it (IND2QueuePair::Invalidate), and a granted copy cannot be
                // stopped; a window's chunks are checked one by one instead.
                let grant = reg
                    .as_deref()
                    .filter(|r| r.kind != Kind::Window)
                    .and_then(|r| {
                        let m = r.shared_memory()?;
                        let off = m.offset_of(d.addr, total)?;
                        (total > 0 && link.peer_proved() && link.offer_memory(r, m))
                            .then(|| (m.id(), off))
                    });
                match grant {
                    Some((id, off)) => {
                        g.map_hold = reg;
                        g.answers.push_back(Answer::Grant {
                            id,
                            off,
                            len: r.total,
                        });
                    }
                    None => g.answers.push_back(Answer::Deny),
                }
                Served::Done
            }
            kind::WRITE => {
                let mut cell = [0u8; INLINE_MAX];
                let n = r.len as usize; // 16..=48, checked by `peek`
                g.cons.read_inline(&rx, n, &mut OwnedMut(&mut cell[..n]), 0);
                let d = Desc::decode(&cell[..Desc::LEN]);
                let inline = (n - Desc::LEN) as u64;
                if inline > 0 && inline != total {
                    return Served::Broken;
                }
                // The common case (ndrpingpong), a one-cell Write into the region the last
                // one went to with no registration removed since, is checked against the
                // cache's copy of its range and rights and takes no reference: the copy ends
                // under this queue pair's lock, which a Deregister waits for
                // (`LocalCache::covers`, the adapter's copy barrier).
                let cached = inline == total
                    && g.rcache.covers(
                        &self.shared.mrs,
                        d.token,
                        d.addr,
                        total,
                        Access::RemoteWrite,
                    );
                let reg = match cached {
                    true => None,
                    false => match self.check_remote(g, d, total, Access::RemoteWrite) {
                        Ok(reg) => reg,
                        Err(_) => return Served::Refused,
                    },
                };
                g.cons.advance();
                if inline == total {
                    let seg = mem::target(d.addr, total);
                    let src = Owned(&cell[Desc::LEN..n]);
                    // SAFETY: `seg` passed the remote-write check against a registration that
                    // stays live across the copy: held in `reg`, or (cached) kept by the lock.
                    unsafe { mem::copy(&src, &seg, total as usize) };
                    drop(reg);
                    g.answers.push_back(Answer::Ack);
                } else {
                    // The bytes follow as CHUNK records.
                    g.rx_reg = reg;
                    g.rx_msg = Some(RxMsg {
                        pos: 0,
                        total,
                        solicited: false,
                        sink: Sink::Write(d.addr),
                    });
                }
                Served::Done
            }
            kind::WPULL => {
                let mut list = [0u8; (RTS_MAX_SGES + 1) * 16];
                let n = r.len as usize; // checked by `peek`: 32..=528, a multiple of 16
                g.cons.read_chunk(&rx, n, &mut OwnedMut(&mut list[..n]), 0);
                let d = Desc::decode(&list[..Desc::LEN]);
                let mut remote = [(0u64, 0u64); RTS_MAX_SGES];
                let k = n / 16 - 1;
                let mut sum = 0u64;
                for (j, e) in remote.iter_mut().enumerate().take(k) {
                    let b = &list[16 + j * 16..32 + j * 16];
                    let addr = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
                    let len = u64::from_le_bytes(b[8..].try_into().expect("8 bytes"));
                    *e = (addr, len);
                    sum = sum.saturating_add(len);
                }
                if sum != total {
                    return Served::Broken;
                }
                let Ok(reg) = self.check_remote(g, d, total, Access::RemoteWrite) else {
                    return Served::Refused;
                };
                let seg = mem::target(d.addr, total);
                // The kernel checks the peer's ranges; ours passed the check against `reg`,
                // held across the copy.
                if mem::pull(
                    link.peer_pid,
                    std::slice::from_ref(&seg),
                    &remote[..k],
                    total,
                )
                .is_err()
                {
                    return Served::Broken;
                }
                drop(reg);
                g.cons.advance();
                g.answers.push_back(Answer::Ack);
                Served::Done
            }
            _ => {
                // READ: at most IRD of the peer's Reads in flight (RFC 5040 §5.4); one more
                // breaks the protocol.
                if g.answers_reads >= g.ird {
                    return Served::Broken;
                }
                let Ok((d, reg)) = self.request(g, &rx, total, Access::RemoteRead) else {
                    return Served::Refused;
                };
                g.cons.advance();
                g.answers.push_back(Answer::Read(Resp {
                    addr: d.addr,
                    total,
                    sent: 0,
                    hdr: false,
                    _reg: reg,
                }));
                g.answers_reads += 1;
                Served::Done
            }
        }
    }

    /// The target granted our mapped Write or Read `cell` (memory id, offset) for `total`
    /// bytes: copy the Write into its memory (the Read out of it), answer DONE, and count the
    /// request as in the ring (complete in its turn: the bytes are placed). When its memory
    /// cannot be mapped, answer DONE with `flag::NO` and send the request the ordinary way.
    /// `false`: the grant does not fit the request being pushed (a protocol violation).
    fn mapped_copy(&self, g: &mut Inner, link: &Link, cell: &[u8; 16], total: u32) -> bool {
        let id = u64::from_le_bytes(cell[..8].try_into().expect("8 bytes"));
        let off = u64::from_le_bytes(cell[8..].try_into().expect("8 bytes"));
        let i = g.in_ring;
        let n = total as usize;
        let copied = match g.sq.get(i) {
            // The local segments passed the local-read (Write) or local-write (Read) check at
            // post and are held by the request; `copy_into` and `copy_out` bound the peer's
            // side by the mapping.
            Some((wr, segs)) if wr.inline.is_none() && wr.total == u64::from(total) => {
                let m = link.peer_memory(id);
                // The target may have closed since it granted (its hold then ends): no copy.
                let ok = m.is_some() && link.start_copy();
                let copied = match (wr.op, m) {
                    (Op::Write(_), Some(m)) if ok => mem::copy_into(&m, off, &Segs(segs), n),
                    (Op::Read(_), Some(m)) if ok => mem::copy_out(&m, off, &mut Segs(segs), n),
                    (Op::Write(_) | Op::Read(_), _) => false,
                    _ => return false,
                };
                link.copied();
                copied
            }
            _ => return false,
        };
        g.answers.push_back(Answer::Done { copied });
        if copied {
            if let Some((wr, _)) = g.sq.get_mut(i) {
                wr.awaiting = false;
            }
            g.in_ring += 1;
            g.map_out = MapOut::Idle;
        } else {
            // Not mappable here: as refused by the target.
            g.mapping_refused();
        }
        true
    }

    /// The peer's one-sided request broke our protection rules: tell it with a TERM record
    /// (its request completes `ND_ACCESS_VIOLATION`), then end the connection; our own
    /// outstanding requests are flushed with `ND_CANCELED` (R-QP-6). Not one byte was placed
    /// or read.
    fn refuse(&self, g: &mut Inner, link: &Link) {
        self.last_word(g, link, kind::TERM, 0);
    }

    /// Push the answers still owed for the peer's earlier requests (they were served), then
    /// the record `kind` that ends the connection, and close. When our ring has no room for
    /// all of it the peer sees only the end (its requests complete `ND_CANCELED`).
    fn last_word(&self, g: &mut Inner, link: &Link, kind: u8, total: u32) {
        let tx = link.tx();
        if self.push_answers(g, &tx) == Ok(true) && g.prod.has_room(&tx, 0) == Ok(true) {
            g.prod.push_header(&tx, kind, 0, total, &Owned(&[]), 0, 0);
        }
        link.wake_peer();
        self.close(g, Status::CONNECTION_REFUSED);
    }

    /// An RTS record: pull the message from the peer's memory into the front Receive.
    fn pull(&self, g: &mut Inner, link: &Link, r: crate::ring::Record) -> Pulled {
        let rx = link.rx();
        if g.rq.front().is_none() && !self.take_from_srq(g) {
            return Pulled::Stalled;
        }
        let Some((wr, _)) = g.rq.front() else {
            return Pulled::Stalled;
        };
        let total = u64::from(r.total);
        if total > wr.total {
            g.cons.advance();
            g.cons.release(&rx);
            self.overrun(g, link);
            return Pulled::Closed;
        }
        let mut list = [0u8; RTS_MAX_SGES * 16];
        let n = r.len as usize; // checked by `peek`: a multiple of 16, at most the array
        g.cons.read_chunk(&rx, n, &mut OwnedMut(&mut list[..n]), 0);
        let mut remote = [(0u64, 0u64); RTS_MAX_SGES];
        let mut sum = 0u64;
        for (k, e) in remote.iter_mut().enumerate().take(n / 16) {
            let b = &list[k * 16..k * 16 + 16];
            let addr = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
            let len = u64::from_le_bytes(b[8..].try_into().expect("8 bytes"));
            *e = (addr, len);
            sum = sum.saturating_add(len);
        }
        let (_, segs) = g.rq.front().expect("checked above");
        if sum != total || mem::pull(link.peer_pid, segs, &remote[..n / 16], total).is_err() {
            // A scatter list that does not add up, or memory the peer does not own.
            g.cons.advance();
            self.violation(g);
            return Pulled::Closed;
        }
        let wr = g.rq.pop().expect("present");
        g.cons.advance();
        // A Receive came: the receiver-not-ready clock of the held message stops (R-QP-7).
        link.rnr_deadline.store(0, Ordering::Relaxed);
        g.rx_msgs = g.rx_msgs.wrapping_add(1);
        g.answers.push_back(Answer::Ack);
        self.complete_recv(
            wr.context,
            Status::SUCCESS,
            total as u32,
            r.flags & flag::SOLICITED != 0,
        );
        Pulled::Done
    }

    /// Take the SRQ's oldest Receive into `rq` for the message arriving now. `false` when this
    /// queue pair has no SRQ, or the SRQ is empty (the queue pair is then on its stalled list
    /// and the next post there drives it: [`ShmQp::srq_posted`]).
    fn take_from_srq(&self, g: &mut Inner) -> bool {
        let Some(srq) = &self.srq else {
            return false;
        };
        let Inner {
            srq_scratch,
            srq_listed,
            rq,
            ..
        } = g;
        let Some(t) = srq.take_or_wait(srq_scratch, &self.me, srq_listed) else {
            return false;
        };
        let n = t.segs.min(rq.max_segs()).min(srq_scratch.len());
        let taken = rq.push_with(
            n,
            |i| {
                let s = &mut srq_scratch[i];
                Ok::<_, std::convert::Infallible>(Seg::new(s.addr, s.len, s.reg.take()))
            },
            |_| RecvWr {
                context: t.context,
                total: t.total,
            },
        );
        taken.is_ok()
    }

    /// A Receive was posted to this queue pair's SRQ while it was on the stalled list (which
    /// the poster took it off): resume the held message on the poster's thread.
    pub(crate) fn srq_posted(&self) {
        let mut g = self.lock();
        g.srq_listed = false;
        if let Some(link) = self.link.get() {
            link.rx_stalled.store(false, Ordering::Release);
        }
        self.progress_locked(&mut g);
    }

    /// The record at the front of the ring waits for a Receive: stop polling it until one is
    /// posted, and start the receiver-not-ready clock (once per stall). Whether the bound
    /// has already run out.
    fn stall(&self, link: &Link) -> bool {
        link.rx_stalled.store(true, Ordering::Release);
        if link.rnr_deadline.load(Ordering::Relaxed) == 0 {
            let bound = self.shared.config.rnr_timeout;
            let at = crate::link::now_ns().saturating_add((bound.as_nanos() as u64).max(1));
            link.rnr_deadline.store(at, Ordering::Relaxed);
            // Driven when the bound runs out even if nothing else happens: a sleeping leader
            // and an event loop on the adapter's descriptor wake for it.
            if let Some(l) = self.link.get() {
                l.wake_at(std::time::Instant::now() + bound);
            }
            return false;
        }
        link.rnr_expired()
    }

    /// The held message's bound ran out (R-QP-7): tell the sender (its Send fails
    /// `ND_IO_TIMEOUT`) and end the connection. No completion is reported here for it, and an
    /// SRQ keeps its Receives.
    fn give_up(&self, g: &mut Inner, link: &Link) {
        // The record names the message held: the one after those we took.
        let held = g.rx_msgs;
        self.last_word(g, link, kind::RNR, held);
    }

    /// The sender's next message is longer than the front Receive: that Receive completes
    /// `ND_DATA_OVERRUN` (nd-reference.md D5), the sender is told which message failed (its
    /// Send, if still in progress, fails `STATUS_DATA_ERROR`), and the connection ends. The
    /// message's record is already consumed.
    fn overrun(&self, g: &mut Inner, link: &Link) {
        if let Some(wr) = g.rq.pop() {
            self.complete_recv(wr.context, Status::DATA_OVERRUN, 0, false);
        }
        // The record names the message: the one after those we took (as `give_up`).
        let failed = g.rx_msgs;
        self.last_word(g, link, kind::OVERRUN, failed);
    }

    /// Garbage in the ring: terminate the connection.
    fn violation(&self, g: &mut Inner) {
        self.close(g, Status::CONNECTION_REFUSED);
    }

    /// Drive this queue pair with the lock held.
    #[inline]
    fn progress_locked(&self, g: &mut Inner) {
        if g.acks_held {
            // What an earlier pass held goes now (module docs: held acknowledgements), with
            // whatever this pass owes (`progress_tx` releases it).
            self.progress_rx(g);
            self.progress_tx(g);
        } else {
            let took = g.rx_msgs;
            self.progress_rx(g);
            if (!g.sq.is_empty() || !g.answers.is_empty()) && !self.may_hold_acks(g, took) {
                self.progress_tx(g);
            }
        }
        self.flush_wake(g);
    }

    /// Whether the ACKs this pass owes may wait for the application's next call (module docs:
    /// held acknowledgements); if so they are marked held. `took`: the count of the peer's
    /// messages taken before the pass. (Out of line: the Send path only tests its condition.)
    #[inline(never)]
    fn may_hold_acks(&self, g: &mut Inner, took: u32) -> bool {
        let Some(link) = self.link.get() else {
            return false;
        };
        if g.conn != Conn::Established
            || g.rx_msgs != took
            || g.sq.len() != g.in_ring
            || g.answers.is_empty()
            || !g.answers.iter().all(|a| matches!(a, Answer::Ack))
            || link.tx_blocked.load(Ordering::Relaxed)
        {
            return false;
        }
        // The flag first, then the look for waiters (both SeqCst): a thread that enters a wait
        // after the look arms the link and finds the flag (`Link::has_work`).
        link.acks_held.store(true, Ordering::SeqCst);
        if self.shared.engine.anyone_waiting() {
            link.acks_held.store(false, Ordering::Relaxed);
            return false;
        }
        g.acks_held = true;
        true
    }

    /// The held ACKs are no longer held (they are about to be pushed, or one rides on a
    /// Write).
    fn release_acks(&self, g: &mut Inner) {
        if !g.acks_held {
            return;
        }
        g.acks_held = false;
        if let Some(link) = self.link.get() {
            // A poller that still sees `true` drives the queue pair once for nothing.
            link.acks_held.store(false, Ordering::Relaxed);
        }
    }

    /// A post that cannot carry a held ACK pushes the held ones first, so that it may still go
    /// straight into the ring (an inline Send need not capture its bytes).
    #[inline]
    fn push_held_acks(&self, g: &mut Inner) {
        if g.acks_held {
            self.push_held_acks_now(g);
        }
    }

    #[inline(never)]
    fn push_held_acks_now(&self, g: &mut Inner) {
        self.release_acks(g);
        let Some(link) = self.link.get() else { return };
        match self.push_answers(g, &link.tx()) {
            Ok(_) => link.wake_peer(),
            Err(Violation) => self.close(g, Status::CONNECTION_REFUSED),
        }
    }

    /// A poll: cheap when there is nothing to do (no lock, no syscall).
    pub(crate) fn poll(&self) {
        if let Some(link) = self.link.get() {
            link.poll_fast();
        }
    }

    /// Drive the queue pair now.
    pub(crate) fn progress_now(&self) {
        let mut g = self.lock();
        self.progress_locked(&mut g);
    }

    /// Flush every outstanding request with `ND_CANCELED`.
    fn flush_all(&self, g: &mut Inner) {
        self.release_acks(g);
        g.tx_sent = 0;
        g.tx_hdr = false;
        g.in_ring = 0;
        g.reads_out = 0;
        g.answers.clear();
        g.answers_reads = 0;
        while let Some(wr) = g.sq.pop() {
            self.complete_wr(&wr, Status::CANCELED);
        }
        while let Some(wr) = g.rq.pop() {
            self.complete_recv(wr.context, Status::CANCELED, 0, false);
        }
        g.rx_msg = None;
        g.rx_reg = None;
        g.map_out = MapOut::Idle;
        g.map_hold = None;
        // A window is usable through its queue pair only: with the connection gone it is
        // unbound, which also lets its region be deregistered (as tcp).
        g.windows.unbind_all(&self.shared.mrs);
    }

    /// Close the connection: tell the peer, flush, finish waiters. `accept_status` is what a
    /// pending Accept gets (D9: the active side went away).
    fn close(&self, g: &mut Inner, accept_status: Status) {
        if g.conn == Conn::Closed {
            return;
        }
        g.conn = Conn::Closed;
        if let Some(link) = &g.link {
            link.close_local();
            if g.map_hold.is_some() {
                // The peer may be copying through the mapping we granted: the registration
                // stays held until it is done (a Deregister waits for that).
                link.wait_peer_copy();
            }
        }
        self.flush_all(g);
        if let Some(a) = g.accept.take() {
            a.complete(accept_status);
        }
        g.disconnect_waiters.complete_all((), Status::SUCCESS);
    }

    fn attach(&self, g: &mut Inner, link: Arc<Link>) -> Result<()> {
        if g.conn != Conn::Idle {
            return fail(Status::CONNECTION_ACTIVE);
        }
        let _ = self.link.set(link.clone());
        g.link = Some(link);
        g.prod = Producer::default();
        g.cons = Consumer::default();
        Ok(())
    }

    /// Let the completion queues poll `link` (before taking our lock: see `ShmCq::poll_links`).
    fn register_link(&self, link: &Arc<Link>) {
        self.rcq.add_link(link);
        if !Arc::ptr_eq(&self.rcq, &self.icq) {
            self.icq.add_link(link);
        }
    }

    /// Active side, at `CompleteConnect`: the first record is the RTR. `ird`/`ord` are the
    /// connection's negotiated read limits from this side's point of view.
    pub(crate) fn establish_active(&self, link: Arc<Link>, ird: u32, ord: u32) -> Result<()> {
        if self.conn() != Conn::Idle {
            return fail(Status::CONNECTION_ACTIVE);
        }
        self.register_link(&link);
        let mut g = self.lock();
        self.attach(&mut g, link.clone())?;
        (g.ird, g.ord) = (ird, ord);
        g.conn = Conn::Established;
        let tx = link.tx();
        if g.prod.has_room(&tx, 0) != Ok(true) {
            self.close(&mut g, Status::CONNECTION_REFUSED);
            return Ok(());
        }
        g.prod.push_inline(&tx, kind::RTR, 0, &Owned(&[]), 0, 0);
        link.wake_peer();
        self.progress_locked(&mut g);
        Ok(())
    }

    /// Passive side, at `Accept`: wait for the RTR.
    pub(crate) fn establish_passive(
        &self,
        link: Arc<Link>,
        accept: OvCompleter,
        ird: u32,
        ord: u32,
    ) -> Result<()> {
        if self.conn() != Conn::Idle {
            return fail(Status::CONNECTION_ACTIVE);
        }
        self.register_link(&link);
        let mut g = self.lock();
        self.attach(&mut g, link)?;
        (g.ird, g.ord) = (ird, ord);
        g.conn = Conn::AwaitRtr;
        g.accept = Some(accept);
        self.progress_locked(&mut g);
        Ok(())
    }

    fn rtr_received(&self, g: &mut Inner) {
        g.conn = Conn::Established;
        if let Some(a) = g.accept.take() {
            a.complete(Status::SUCCESS);
        }
        self.progress_tx(g);
    }

    pub(crate) fn conn(&self) -> Conn {
        self.lock().conn
    }

    /// `IND2Connector::Disconnect`: flush, tell the peer; completes at once.
    pub(crate) fn disconnect(&self) {
        let mut g = self.lock();
        // The peer's Writes we placed complete successfully: their held ACKs go first.
        self.push_held_acks(&mut g);
        self.close(&mut g, Status::CONNECTION_REFUSED);
    }

    /// `IND2Connector::NotifyDisconnect`.
    pub(crate) fn notify_disconnect(&self) -> Overlapped {
        let mut g = self.lock();
        if g.conn == Conn::Closed {
            return Overlapped::completed(self.shared.engine.clone(), Status::SUCCESS);
        }
        let (ov, c) = Overlapped::pending(self.shared.engine.clone());
        g.disconnect_waiters.push((), c);
        ov
    }

    pub(crate) fn cancel_notify_disconnect(&self) {
        self.lock().disconnect_waiters.cancel_all();
    }

    /// Cancel a pending Accept: abandons the connection.
    pub(crate) fn cancel_accept(&self) {
        let mut g = self.lock();
        if let Some(a) = g.accept.take() {
            a.complete(Status::CANCELED);
            // The same CancelOverlappedRequests cancels a NotifyDisconnect posted meanwhile
            // (R-CANCEL-1), after the Accept (FIFO), not with the success the close gives it.
            g.disconnect_waiters.cancel_all();
            self.close(&mut g, Status::CANCELED);
        }
    }
}

impl ShmQp {
    /// `Bind`: the window is bound (and its token valid) when this returns; the completion
    /// follows in order on the initiator CQ. The checks and statuses are tcp's (R-MW-1,
    /// IND2QueuePair::Bind).
    fn post_bind(
        &self,
        context: u64,
        region: &Arc<dyn MemoryRegion>,
        window: &Arc<dyn MemoryWindow>,
        buffer: *const u8,
        len: usize,
        flags: OpFlags,
    ) -> Result<()> {
        // The order of the checks is the kit's (`kit::mw` module docs).
        let (region, window) = mw::bind_objects(&self.shared, region, window, flags)?;
        let mut g = self.lock();
        if g.conn == Conn::Idle {
            return fail(Status::CONNECTION_INVALID);
        }
        if g.sq.is_full() {
            return fail(Status::NO_MORE_ENTRIES);
        }
        let ended = g.conn == Conn::Closed;
        let wr = SendWr::new(context, flags, 0, Op::Bind);
        if !window.bind_through(region, buffer, len, flags, self.id, ended, &mut g.windows)? {
            drop(g);
            self.complete_wr(&wr, Status::CANCELED);
            return Ok(());
        }
        g.sq.push_bare(wr);
        self.progress_tx(&mut g);
        Ok(())
    }

    /// `Invalidate`: the window stops working when this returns; the completion follows in
    /// order (`ND_INVALID_DEVICE_REQUEST`, ending the connection, for a window not bound
    /// through this queue pair, nd-reference.md §2.9).
    fn post_invalidate(
        &self,
        context: u64,
        window: &Arc<dyn MemoryWindow>,
        flags: OpFlags,
    ) -> Result<()> {
        let window = mw::invalidate_object(&self.shared, window, flags)?;
        let mut g = self.lock();
        if g.conn == Conn::Idle {
            return fail(Status::CONNECTION_INVALID);
        }
        if g.sq.is_full() {
            return fail(Status::NO_MORE_ENTRIES);
        }
        let mut wr = SendWr::new(context, flags, 0, Op::Invalidate);
        if g.conn == Conn::Closed {
            drop(g);
            self.complete_wr(&wr, Status::CANCELED);
            return Ok(());
        }
        wr.error = window.invalidate_through(self.id, &mut g.windows);
        g.sq.push_bare(wr);
        self.progress_tx(&mut g);
        Ok(())
    }
}

impl ProgressSource for ShmQp {
    fn progress(&self) {
        self.poll();
    }
}

impl traits::QueuePair for ShmQp {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn flush(&self) -> Result<()> {
        let mut g = self.lock();
        if g.conn == Conn::Idle {
            self.flush_all(&mut g);
        } else {
            self.close(&mut g, Status::CANCELED);
        }
        Ok(())
    }

    unsafe fn send(&self, context: u64, sge: &[Sge], flags: OpFlags) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.post_send(context, sge, flags) }
    }

    unsafe fn receive(&self, context: u64, sge: &[Sge]) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.post_receive(context, sge) }
    }

    fn bind(
        &self,
        context: u64,
        region: &Arc<dyn MemoryRegion>,
        window: &Arc<dyn MemoryWindow>,
        buffer: *const u8,
        len: usize,
        flags: OpFlags,
    ) -> Result<()> {
        self.post_bind(context, region, window, buffer, len, flags)
    }

    fn invalidate(
        &self,
        context: u64,
        window: &Arc<dyn MemoryWindow>,
        flags: OpFlags,
    ) -> Result<()> {
        self.post_invalidate(context, window, flags)
    }

    unsafe fn read(
        &self,
        context: u64,
        sge: &[Sge],
        remote_address: u64,
        remote_token: u32,
        flags: OpFlags,
    ) -> Result<()> {
        // The remote token is in network byte order (GetRemoteToken): its host value is
        // `from_be` of it, as in tcp.
        let d = Desc {
            token: u32::from_be(remote_token),
            addr: remote_address,
        };
        // SAFETY: forwarded contract.
        unsafe { self.post_rdma(context, sge, flags, Op::Read(d)) }
    }

    unsafe fn write(
        &self,
        context: u64,
        sge: &[Sge],
        remote_address: u64,
        remote_token: u32,
        flags: OpFlags,
    ) -> Result<()> {
        let d = Desc {
            token: u32::from_be(remote_token),
            addr: remote_address,
        };
        // SAFETY: forwarded contract.
        unsafe { self.post_rdma(context, sge, flags, Op::Write(d)) }
    }
}

impl Drop for ShmQp {
    fn drop(&mut self) {
        // Releasing a queue pair implies Disconnect and Flush.
        let g = self.inner.get_mut();
        let mut g = std::mem::replace(g, Inner::empty());
        // As Disconnect: the held ACKs of the peer's placed Writes go first.
        self.push_held_acks(&mut g);
        self.close(&mut g, Status::CONNECTION_REFUSED);
    }
}

#[cfg(test)]
mod hostile {
    //! A live connection whose peer writes garbage into its ring: the victim terminates the
    //! connection (or delivers bounded bytes), never reads outside the segment, never hangs.

    use super::*;
    use crate::forge::{connect, connect_with, expose, next, Forger, EXPOSED};
    use crate::ring::RingMem;

    /// A small deterministic generator (no dependency needed).
    fn rng(state: &mut u64) -> u32 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        (*state >> 16) as u32
    }

    #[test]
    fn garbage_records_terminate_or_stay_in_bounds() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for round in 0..40 {
            let (victim, attacker) = connect();
            // The attacker's ring to the victim: position 0 held its RTR; forge position 1 on.
            let mut f = Forger::new(&attacker);
            for _ in 1..4u32 {
                let kind = match round % 4 {
                    0 => rng(&mut seed) & 0xFF,
                    1 => 1,
                    2 => 2,
                    _ => rng(&mut seed) & 3,
                };
                let word = kind | (rng(&mut seed) & 0x700);
                let len = if round % 2 == 0 {
                    rng(&mut seed)
                } else {
                    rng(&mut seed) % 200
                };
                f.record(word, len, rng(&mut seed) % 300, &[]);
            }
            f.wake();
            let r = next(&victim.cq);
            match r.status {
                Status::SUCCESS => assert!(r.bytes_transferred <= 64, "{r:?}"),
                Status::DATA_OVERRUN | Status::CANCELED => {}
                s => panic!("unexpected status {s}"),
            }
            drop(attacker);
        }
    }

    /// The mapped-request records (`mapped`) out of turn end the connection: a GRANT nobody
    /// asked for, a DONE for a grant nobody gave. A MAPW or MAPR for memory that cannot be
    /// shared (heap memory registered raw) is refused with a GRANT carrying `flag::NO`, and
    /// the connection goes on: the message after it is delivered.
    #[test]
    #[allow(unsafe_code)]
    fn mapped_records_out_of_turn() {
        for case in 0..4 {
            // A MAPR needs an inbound Read credit (IRD) like any Read.
            let limits = netdirect_spi::ReadLimits {
                inbound: 1,
                outbound: 1,
            };
            let (mut victim, attacker) = connect_with(limits);
            let base = victim.buf.as_mut_ptr();
            let exposed = expose(&mut victim);
            let d = Desc {
                token: exposed.get_local_token(),
                addr: base as u64 + EXPOSED.start as u64,
            }
            .encode();
            let mut f = Forger::new(&attacker);
            match case {
                0 => f.record(u32::from(kind::GRANT), 16, 512, &[0; 16]),
                1 => f.record(u32::from(kind::DONE), 0, 0, &[]),
                2 => f.record(u32::from(kind::MAPW), 16, 512, &d),
                _ => f.record(u32::from(kind::MAPR), 16, 512, &d),
            }
            f.record(u32::from(kind::MSG), 8, 0, &[]);
            f.wake();
            let r = next(&victim.cq);
            let want = if case >= 2 {
                Status::SUCCESS
            } else {
                Status::CANCELED
            };
            assert_eq!(r.status, want, "case {case}: {r:?}");
            drop(attacker);
            drop(exposed);
        }
    }

    /// A peer that sends requests (zero-length Writes here: no token needed) and never takes
    /// our answers from its ring is cut off once we owe it more answers than any initiator
    /// queue could be waiting for, instead of queueing them without bound.
    #[test]
    fn a_peer_that_never_takes_our_answers_is_cut_off() {
        let (victim, attacker) = connect();
        let mut f = Forger::new(&attacker);
        let cells = ShmQp::downcast(&attacker.qp)
            .and_then(|q| q.link().map(|l| l.tx().cells()))
            .expect("connected");
        let d = Desc { token: 0, addr: 0 }.encode();
        let mut sent = 0usize;
        let end = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let mut r = [NdResult::EMPTY];
        loop {
            if victim.cq.get_results(&mut r) == 1 {
                assert_eq!(r[0].status, Status::CANCELED, "the victim's Receive: {r:?}");
                break;
            }
            while f.in_flight() < cells - 1 {
                f.record(u32::from(kind::WRITE), Desc::LEN as u32, 0, &d);
                sent += 1;
            }
            assert!(
                sent <= MAX_ANSWERS_OWED + 4 * cells as usize,
                "{sent} requests without an answer taken, and the connection goes on"
            );
            assert!(std::time::Instant::now() < end, "the victim hangs");
        }
        assert!(sent > MAX_ANSWERS_OWED, "cut off after {sent}: too early");
    }

    /// An ACK riding on anything but a WRITE, or on a WRITE when none of our requests waits
    /// for an answer, breaks the protocol: the connection ends (the Receive is flushed). A
    /// zero-length WRITE without it is served and the message behind it delivered; with it,
    /// while our Write waits, it completes that Write first.
    #[test]
    #[allow(unsafe_code)]
    fn a_riding_ack_only_on_a_write_that_answers_one() {
        let d = Desc { token: 0, addr: 0 }.encode();
        let ack = u32::from(flag::ACK) << 8;
        let (msg, write) = (u32::from(kind::MSG), u32::from(kind::WRITE));
        for case in 0..4 {
            let (mut victim, attacker) = connect();
            if case == 3 {
                let sge = Sge::new(victim.buf.as_mut_ptr().wrapping_add(512), 8, victim.token);
                // SAFETY: INLINE: the bytes are read during the call.
                unsafe { victim.qp.write(5, &[sge], 0, 0, OpFlags::INLINE) }.expect("Write");
            }
            let mut f = Forger::new(&attacker);
            match case {
                0 => f.record(msg | ack, 8, 0, &[]),
                1 => f.record(write | ack, Desc::LEN as u32, 0, &d),
                2 => f.record(write, Desc::LEN as u32, 0, &d),
                _ => f.record(write | ack, Desc::LEN as u32, 0, &d),
            }
            f.record(msg, 8, 0, &[]);
            f.wake();
            if case == 3 {
                let r = next(&victim.cq);
                assert_eq!((r.request_context, r.status), (5, Status::SUCCESS), "{r:?}");
            }
            let r = next(&victim.cq);
            let want = if case >= 2 {
                Status::SUCCESS
            } else {
                Status::CANCELED
            };
            assert_eq!(
                (r.request_context, r.status),
                (1, want),
                "case {case}: {r:?}"
            );
        }
    }

    /// The ACK a polling pass held rides on the next INLINE Write: one record, not two.
    #[test]
    #[allow(unsafe_code)]
    fn a_held_ack_rides_on_the_next_write() {
        let (mut victim, attacker) = connect();
        let mut f = Forger::new(&attacker);
        let d = Desc { token: 0, addr: 0 }.encode();
        f.record(u32::from(kind::WRITE), Desc::LEN as u32, 0, &d);
        let mut r = [NdResult::EMPTY];
        let tx = ShmQp::downcast(&victim.qp).unwrap().link().unwrap().clone();
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        // Polled until the WRITE is taken: its ACK is held (nothing went into our ring).
        while tx.rx().tail().load(Ordering::Acquire) < 2 {
            assert_eq!(victim.cq.get_results(&mut r), 0, "{r:?}");
            assert!(std::time::Instant::now() < end, "the WRITE is never taken");
        }
        let ours = tx.tx();
        assert_eq!(
            ours.seq(0).load(Ordering::Acquire),
            0,
            "an ACK record went alone"
        );
        let sge = Sge::new(victim.buf.as_mut_ptr().wrapping_add(512), 8, victim.token);
        // SAFETY: INLINE: the bytes are read during the call.
        unsafe { victim.qp.write(5, &[sge], 0, 0, OpFlags::INLINE) }.expect("Write");
        let [word, len, _] = ours.meta(0);
        assert_eq!(
            ours.seq(0).load(Ordering::Acquire),
            1,
            "the Write is in the ring"
        );
        assert_eq!(
            word.load(Ordering::Relaxed),
            u32::from(kind::WRITE) | u32::from(flag::ACK) << 8,
            "the WRITE carries the ACK"
        );
        assert_eq!(len.load(Ordering::Relaxed), (Desc::LEN + 8) as u32);
        assert_eq!(ours.seq(1).load(Ordering::Acquire), 0, "one record");
    }

    /// A busy poll takes whole inline messages for posted Receives (`ShmQp::poll_lane`): in
    /// order, as many as the caller has room for, each in its own Receive; what does not fit
    /// stays in the ring for the next poll.
    #[test]
    fn a_poll_hands_inline_messages_over_in_order() {
        let (mut victim, attacker) = connect();
        for (i, off) in [(2u64, 64usize), (3, 128)] {
            let sge = Sge::new(victim.buf.as_mut_ptr().wrapping_add(off), 64, victim.token);
            // SAFETY: the slot is read only after its Receive completed.
            unsafe { victim.qp.receive(i, &[sge]) }.expect("receive");
        }
        let mut f = Forger::new(&attacker);
        for msg in [&b"one"[..], b"two", b"three"] {
            f.record(u32::from(kind::MSG), msg.len() as u32, 0, msg);
        }
        let mut got = Vec::new();
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while got.len() < 3 {
            let mut r = [NdResult::EMPTY; 2];
            let n = victim.cq.get_results(&mut r);
            got.extend_from_slice(&r[..n]);
            assert!(
                std::time::Instant::now() < end,
                "messages not taken: {got:?}"
            );
        }
        let seen: Vec<_> = got
            .iter()
            .map(|r| {
                (
                    r.status,
                    r.request_type,
                    r.request_context,
                    r.bytes_transferred,
                )
            })
            .collect();
        let recv = RequestType::Receive;
        let ok = Status::SUCCESS;
        assert_eq!(seen, [(ok, recv, 1, 3), (ok, recv, 2, 3), (ok, recv, 3, 5)]);
        assert_eq!(&victim.buf[..3], b"one");
        assert_eq!(&victim.buf[64..67], b"two");
        assert_eq!(&victim.buf[128..133], b"three");
    }

    /// With a Notify armed, a poll's own drive does not hand its completions over past the
    /// queue (`CqCore::may_bypass`): they are queued, fire the Notify, and the same poll
    /// returns them.
    #[test]
    fn a_poll_under_an_armed_notify_fires_it() {
        let (victim, attacker) = connect();
        let ov = victim
            .cq
            .notify(netdirect_spi::NotifyType::Any)
            .expect("notify");
        assert_eq!(ov.status(), Status::PENDING);
        let mut f = Forger::new(&attacker);
        f.record(u32::from(kind::MSG), 4, 0, b"ping");
        let r = next(&victim.cq);
        assert_eq!(
            (r.status, r.request_context, r.bytes_transferred),
            (Status::SUCCESS, 1, 4)
        );
        assert_eq!(ov.status(), Status::SUCCESS, "the Notify fired");
    }

    /// A MAP message (a memory's descriptor) that no MAPW or MAPR of ours asked for is
    /// dropped: nothing is mapped, and the connection goes on. The same message while we ask
    /// is taken.
    #[test]
    fn unasked_memory_is_not_mapped() {
        let (victim, attacker) = connect();
        let peer = ShmQp::downcast(&attacker.qp)
            .unwrap()
            .link()
            .unwrap()
            .clone();
        let me = ShmQp::downcast(&victim.qp).unwrap().link().unwrap().clone();
        let m = netdirect_spi::kit::shared_mem::SharedMemory::new(1 << 20).unwrap();
        for asking in [false, true] {
            me.maps.asking(asking);
            let msg = crate::proto::Msg::Map { id: m.id() };
            peer.send_msg(&msg, Some(m.fd())).unwrap();
            me.service_socket(64);
            assert_eq!(
                me.find_peer_memory(m.id()).is_some(),
                asking,
                "asking: {asking}"
            );
        }
        let mut f = Forger::new(&attacker);
        f.record(u32::from(kind::MSG), 8, 0, &[]);
        f.wake();
        assert_eq!(next(&victim.cq).status, Status::SUCCESS);
    }

    /// Forged one-sided records (WRITE, WPULL, READ with random tokens, addresses, lengths and
    /// bytes) toward a victim that exposes 1 KiB in the middle of a 4 KiB buffer: whatever the
    /// victim makes of them, no byte outside the exposed range (and the Receive's 64 bytes)
    /// changes, and it never hangs.
    #[test]
    #[allow(unsafe_code)]
    fn forged_one_sided_records_stay_inside_the_exposed_range() {
        const LO: usize = EXPOSED.start;
        const HI: usize = EXPOSED.end;
        let mut seed = 0x51A7_E5EE_D000_0001u64;
        for round in 0..120 {
            let (mut victim, attacker) = connect();
            let base = victim.buf.as_mut_ptr();
            let exposed = expose(&mut victim);
            let token = exposed.get_local_token();
            victim.buf[64..].fill(0xAA);
            let mut f = Forger::new(&attacker);
            // Position 0 held the attacker's RTR: forge position 1, then an 8-byte message.
            let kind = [kind::WRITE, kind::WPULL, kind::READ, kind::MAPW, kind::MAPR][round % 5];
            let tok = match rng(&mut seed) % 4 {
                0 => rng(&mut seed),
                1 => token ^ (1 + rng(&mut seed) % 255),
                _ => token,
            };
            let lo = base as u64 + LO as u64;
            // Around the edges of the range as often as inside it.
            let off = match rng(&mut seed) % 3 {
                0 => -i64::from(rng(&mut seed) % 16),
                1 => (HI - LO) as i64 - i64::from(rng(&mut seed) % 16),
                _ => i64::from(rng(&mut seed) % (HI - LO) as u32),
            };
            let addr = lo.wrapping_add_signed(off);
            let total = match rng(&mut seed) % 3 {
                0 | 1 if kind == kind::WRITE => rng(&mut seed) % 33,
                0 => rng(&mut seed) % 40,
                1 => rng(&mut seed) % 2000,
                _ => rng(&mut seed),
            };
            let d = Desc { token: tok, addr }.encode();
            let mut cell = [0u8; INLINE_MAX];
            cell[..16].copy_from_slice(&d);
            for b in &mut cell[16..] {
                *b = rng(&mut seed) as u8;
            }
            let (len, data) = match kind {
                // Mostly well-formed (the inline bytes are the whole Write), so the range
                // checks are what decides.
                kind::WRITE if round % 2 == 0 => (16 + total.min(32), 0),
                kind::WRITE => (16 + rng(&mut seed) % 33, 0),
                kind::READ | kind::MAPW | kind::MAPR => (16, 0),
                _ => (16 * (2 + rng(&mut seed) % 4), 1),
            };
            if data != 0 {
                // The descriptor and up to four scatter entries.
                let mut list = [0u8; 80];
                list[..16].copy_from_slice(&d);
                for b in &mut list[16..] {
                    *b = rng(&mut seed) as u8;
                }
                f.data(&list[..len as usize]);
                f.record(u32::from(kind), len, total, &[]);
            } else {
                f.record(u32::from(kind), len, total, &cell[..len as usize]);
            }
            // Then an 8-byte message at position 2: delivered if the forged record was
            // accepted, flushed with the Receive otherwise.
            f.record(u32::from(kind::MSG), 8, 0, &[]);
            f.wake();
            let r = next(&victim.cq);
            assert!(
                matches!(r.status, Status::SUCCESS | Status::CANCELED),
                "round {round}: {r:?}"
            );
            let outside = victim.buf[64..LO]
                .iter()
                .chain(&victim.buf[HI..])
                .all(|&b| b == 0xAA);
            assert!(
                outside,
                "round {round}: a byte outside the exposed range changed"
            );
            drop(attacker);
            drop(exposed);
        }
    }
}
