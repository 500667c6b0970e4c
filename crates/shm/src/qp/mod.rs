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
//! This module holds the queue pair's state and its `IND2QueuePair` face; the work is split by
//! concern, as `tcp`'s queue pair is:
//! - `post`: the posts, their checks and statuses, and the direct path into the ring;
//! - `tx`: queued requests and owed answers pushed as records, completed as answers return;
//! - `rx`: messages into Receives (the busy poller's lane and the general pass), pulled
//!   messages, shared receive queues, a message that finds no Receive;
//! - `onesided`: the peer's Writes and Reads served against our registrations, and our
//!   mapped requests copied through a grant;
//! - `conn`: the drive under the lock, held acknowledgements, establishment, Disconnect and
//!   the end of the connection;
//! - `hostile` (tests): a peer that writes garbage or forged records into the ring.
//!
//! # Held acknowledgements
//!
//! A Write completes when the target answers that its bytes are placed (an ACK). When a polling
//! pass of the target placed Writes and owes nothing but their ACKs, it holds them until the
//! application's next call into the provider instead of pushing an ACK record at once: an
//! application spinning on memory the peer writes reacts before they would go (ndrpingpong's
//! pattern, and `tcp` holds its zero-length Read Responses the same way), and its next Write
//! carries the ACK as a flag ([`flag::ACK`](crate::ring::flag::ACK)), so the answer costs no
//! cache line of its own. The next poll (the link reports work while ACKs are held), a Send,
//! Write, Read, Bind or Invalidate post, a Disconnect (or the queue pair's release) or a
//! blocking wait pushes what is still held. Nothing is held when the pass delivered a message
//! (the application may stop driving this connection), nor while any thread waits on the
//! adapter or its descriptor is exported (a sleeper armed before could sleep through it):
//! `ShmQp::may_hold_acks`. ACKs held when the descriptor is exported make it readable at once
//! (`Engine::fd`), as does a record that arrived while nothing was armed: the event loop's
//! progress pass then sends them.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, OnceLock, Weak};

use netdirect_spi::kit::cq::{ProgressSource, PushKind};
use netdirect_spi::kit::mr::{LocalCache, Registration};
use netdirect_spi::kit::mw;
use netdirect_spi::kit::overlapped::{OvCompleter, PendingRequests};
use netdirect_spi::kit::wrq::{RecvWr, WrQueue};
use netdirect_spi::traits::{self, QueuePairConfig};
use netdirect_spi::{Error, NdResult, OpFlags, RequestType, Result, Status};

use crate::adapter::Shared;
use crate::bias::{BiasedGuard, BiasedMutex};
use crate::cq::ShmCq;
use crate::link::Link;
use crate::mapped::Lease;
use crate::ring::{Consumer, Desc, Producer, INLINE_MAX, LEASE_LEN};
use crate::srq::ShmSrq;
use netdirect_spi::kit::srq::Seg as SrqSeg;

mod conn;
mod onesided;
mod place;
mod post;
mod rx;
mod tx;

/// Largest RDMA Write that travels in one cell with its descriptor.
const WRITE_INLINE_MAX: usize = INLINE_MAX - Desc::LEN;

/// Leases on the peer's regions kept at once (initiator side, `mapped`).
const MAX_LEASES: usize = 4;

/// Most SGEs an INLINE request may carry (the SGE limit does not apply to them), as in `tcp`.
const MAX_INLINE_SGE: usize = 64;

/// Idle polls between two checks of the socket for the peer's end-of-file (a killed peer is
/// noticed within this many polls of a busy-polling survivor; a sleeping one notices at once).
pub(crate) const LIVENESS_POLLS: u32 = 4096;

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
    /// A Write whose WRITE record asks for a lease (`flag::LEASE`): its ACK answers that.
    lease_ask: bool,
    /// A SendAndInvalidate whose INVAL record (the peer's window token, host order) is still
    /// to go into the ring, just before the Send's first record (`progress_tx`).
    inval: Option<u32>,
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
            lease_ask: false,
            inval: None,
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
    /// registration is held in `Inner::rx_reg`); whether it asked for a lease (`place`).
    Write(u64, bool),
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
    /// An ACK that grants a lease ([`Lease::encode`](crate::mapped::Lease::encode)'s bytes).
    Lease([u8; LEASE_LEN as usize]),
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

impl Answer {
    /// Whether the peer takes it in the middle of one of our messages (ACK and DONE, one cell
    /// each): the CHUNK records of a message partly in the ring must follow each other, and
    /// any other answer waits until the message is in (`ShmQp::push_answers`).
    fn goes_mid_message(&self) -> bool {
        matches!(self, Self::Ack | Self::Lease(_) | Self::Done { .. })
    }
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
    /// Checked each time more of it is pushed: a window invalidated or released, or a region
    /// deregistered, fails the rest (`tx::Halt::Revoked`).
    reg: Option<Arc<Registration>>,
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
    /// The record (kind, total) that ends the connection, still owed to the peer after
    /// `answers`: the connection ended for the application, the link lingers until there is
    /// room for it ([`ShmQp::linger`]).
    last_word: Option<(u8, u32)>,
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
    /// Leases on regions of the peer's memory (initiator side, `mapped`: placed Writes).
    /// At most [`MAX_LEASES`], the newest first; on the heap, off the Send path's lines.
    leases: Vec<Lease>,
    /// Target tokens whose last lease request was refused: not asked again soon.
    lease_denied: [u32; 4],
    /// A WRITE of ours asking for a lease awaits its ACK (one at a time).
    lease_asking: bool,
    /// We granted the peer leases that may still hold (target side): a Deregister's copy
    /// barrier and the end of the connection revoke them.
    leased: bool,
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
            last_word: None,
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
            leases: Vec::new(),
            lease_denied: [0; 4],
            lease_asking: false,
            leased: false,
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
    pub(crate) shared: Arc<Shared>,
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
    /// Reserved by a Connect under way (`kit::connector::Claim`).
    pub(crate) claimed: std::sync::atomic::AtomicBool,
}

impl fmt::Debug for ShmQp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShmQp")
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

/// Segment capacity per request: at least 4 even when fewer were asked for (`docs/ND-RULES.md`
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
        let rcq =
            ShmCq::downcast_on(&cfg.receive_cq, &shared).ok_or(Error::invalid_parameter(2))?;
        let icq =
            ShmCq::downcast_on(&cfg.initiator_cq, &shared).ok_or(Error::invalid_parameter(3))?;
        // CreateQueuePairWithSrq: the SRQ is parameter 4 (docs/ND-RULES.md §2.4).
        let srq = match &cfg.srq {
            Some(s) => Some(ShmSrq::downcast_on(s, &shared).ok_or(Error::invalid_parameter(4))?),
            None => None,
        };
        // The queues' sizes next (`_5` on), in the order of their parameters, before any is
        // sized from them.
        netdirect_spi::limits::queue_pair(&shared.info, cfg)?;
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
            claimed: Default::default(),
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

    /// Take and release the lock: what held it is over (`Engine::fence_queue_pairs`, a
    /// Deregister's copy barrier). A registration went: the leases we granted the peer are
    /// revoked, and a Write it was placing under one is over, when this returns (`mapped`).
    pub(crate) fn fence(&self) {
        let mut g = self.lock();
        self.revoke_leases(&mut g);
    }

    /// Revoke the leases we granted the peer, if any (target side; `mapped`).
    fn revoke_leases(&self, g: &mut Inner) {
        if g.leased {
            g.leased = false;
            if let Some(link) = self.link.get() {
                link.revoke_leases();
            }
        }
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
}

impl ProgressSource for ShmQp {
    fn progress(&self) {
        self.poll();
    }
}

/// The descriptor of a posted Read or Write: the remote token is in network byte order
/// (`GetRemoteToken`), so its host value is `from_be` of it, as in tcp.
#[inline]
fn remote_desc(remote_address: u64, remote_token: u32) -> Desc {
    Desc {
        token: u32::from_be(remote_token),
        addr: remote_address,
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
        // A last word still waiting for room goes now if it fits; no one is left to wait
        // for more room.
        self.stop_lingering(&mut g);
    }
}

#[cfg(test)]
mod hostile;
