//! `IND2QueuePair` over one TCP connection: the RDMAP/DDP/MPA data path of the `tcp` provider.
//!
//! One mutex guards a queue pair's state. The I/O is driven by whoever gets there: the poster
//! (a request is written to the socket inside the post when nothing is queued ahead of it), a
//! caller polling a completion queue (`get_results` reads the socket), or a blocking waiter
//! dispatched by the engine. Nothing on this path allocates: work requests live in
//! preallocated queues, frames are encoded into a reused staging buffer, and large payloads go
//! to the socket straight from registered memory and come from it straight into registered
//! memory.
//!
//! # The initiator queue
//!
//! Sends, RDMA Writes, RDMA Reads, Binds and Invalidates share one FIFO (`sq`) and complete
//! in order on the initiator CQ (RFC 5040 §5.5 rules 13 and 15). A request goes through three
//! stages: *encoded* (its FPDUs are queued in `tx`, in post order), *sent* (TCP took all of
//! them), *complete*:
//!
//! * a Send when sent (rule 9: the LLP accepted it);
//! * a Read when the Read Response of each of its Read Requests has arrived (rule 19);
//! * a Write, with the completion probe negotiated, when a Read Response to a Read Request
//!   sent after it has arrived (see [`netdirect_wire::handshake`]: the target answers a Read
//!   only after placing everything before it, so a Terminate, not a response, comes back when
//!   the Write was refused, and the Write can complete with `ND_ACCESS_VIOLATION`); against a
//!   peer without the probe, when sent;
//! * Bind and Invalidate when their turn comes (they act at post time).
//!
//! Read Requests use ORD slots: at most the connection's ORD application Reads are in flight,
//! and the queue holds back the request that would exceed it together with everything after
//! it (RFC 5040 §5.4, §6.1). `READ_FENCE` holds a request back until every earlier Read is
//! complete (§5.5 rule 12). A probe (one zero-length Read Request) is sent after the last Write
//! of a batch when no Read follows it; at most one is in flight, outside the ORD.
//!
//! # Inbound one-sided traffic
//!
//! Every inbound Write segment, Read Request and Read Response is checked by
//! [`crate::protect`] before a byte is placed or sent; a violation sends one Terminate and
//! ends the connection. Read Responses to the peer's Read Requests are queued behind whatever
//! is already in `tx`, with their source memory referenced, not copied; at most the
//! connection's IRD of them (plus one zero-length probe) may be queued (RFC 5040 §5.4).

mod rx;
mod tx;

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Instant;

use netdirect_spi::kit::cq::{CqCore, ProgressSource, PushKind};
use netdirect_spi::kit::mr::{Access, AccessError, LocalCache, Registration};
use netdirect_spi::kit::mw;
use netdirect_spi::kit::overlapped::{OvCompleter, Overlapped, PendingRequests};
use netdirect_spi::kit::qp::{self, Posts, Request};
use netdirect_spi::kit::srq::Seg as SrqSeg;
use netdirect_spi::traits::{self, MemoryRegion, MemoryWindow, QueuePairConfig};
use netdirect_spi::{fail, Error, NdResult, OpFlags, RequestType, Result, Sge, Status};
use netdirect_wire::fpdu::SegmentHeader;
use netdirect_wire::handshake::{Negotiated, Rtr};
use netdirect_wire::rdmap::{ReadRequest, TermError, Terminate};
use rustix::event::epoll::EventFlags;
use socket2::Socket;

use crate::adapter::Shared;
use crate::cq::TcpCq;
use crate::engine::{Source, Stream};
use crate::protect::ExpectedResponse;
use crate::srq::TcpSrq;
use netdirect_spi::kit::wrq::{total_len, RecvWr, Seg, WrQueue};
use rx::Rx;
use tx::Tx;

/// Most SGEs an INLINE request may carry (the SGE limit does not apply to them, §2.9).
const MAX_INLINE_SGE: usize = 64;
/// Most SGEs of a Send that takes the direct path (`TcpQp::send_direct`).
const DIRECT_SGE: usize = 4;

/// Where the connection of a queue pair stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Conn {
    /// Never connected: Receive and Flush work, Send gives `ND_CONNECTION_INVALID`.
    Idle,
    /// Responder after Accept: nothing may be sent until the initiator's first FPDU (its RTR)
    /// arrives (RFC 5044 §7.1.2 rule 4); posted requests wait.
    AwaitRtr,
    /// Full operation.
    Established,
    /// Disconnected or terminated: every request completes with `ND_CANCELED`.
    Closed,
}

/// What an initiator request does.
#[derive(Debug, Clone, Copy)]
pub(crate) enum TxKind {
    Send,
    /// RDMA Write to the peer's `to` under `stag` (the STag's host value).
    Write {
        stag: u32,
        to: u64,
    },
    /// RDMA Read from the peer's `to` under `stag`.
    Read {
        stag: u32,
        to: u64,
    },
    Bind,
    Invalidate,
}

/// A posted initiator request.
#[derive(Debug)]
pub(crate) struct SendWr {
    pub(crate) context: u64,
    pub(crate) kind: TxKind,
    pub(crate) flags: OpFlags,
    pub(crate) total: u64,
    pub(crate) request_type: RequestType,
    /// An error found at post time: the request never reaches the wire, completes with this
    /// status in its turn, and ends the connection (R-QP-6). Nothing after it is sent.
    pub(crate) error: Option<Status>,
    /// Send: its MSN on QN 0. Read: the MSN of its first Read Request on QN 1.
    pub(crate) msn: u32,
    /// Read: Read Requests it needs (one per non-empty SGE, at least one), issued, answered.
    pub(crate) parts: u16,
    pub(crate) issued: u16,
    pub(crate) answered: u16,
    /// Write: the count of answered Read Requests that proves it placed (module docs).
    pub(crate) proof: u64,
}

impl SendWr {
    fn new(context: u64, kind: TxKind, flags: OpFlags, total: u64) -> Self {
        let request_type = match kind {
            TxKind::Send => RequestType::Send,
            TxKind::Write { .. } => RequestType::Write,
            TxKind::Read { .. } => RequestType::Read,
            TxKind::Bind => RequestType::Bind,
            TxKind::Invalidate => RequestType::Invalidate,
        };
        Self {
            context,
            kind,
            flags,
            total,
            request_type,
            error: None,
            msn: 0,
            parts: 1,
            issued: 0,
            answered: 0,
            proof: 0,
        }
    }
}

/// Why an outbound Read Request was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadKind {
    /// For an application Read: the sequence number of its work request and the SGE it fills.
    App { wr_seq: u64, seg: usize },
    /// A Write completion probe.
    Probe,
    /// The MPA v2 Read RTR.
    Rtr,
}

/// An outbound Read Request waiting for its Response.
#[derive(Debug)]
pub(crate) struct OutRead {
    pub(crate) kind: ReadKind,
    pub(crate) expect: ExpectedResponse,
}

/// An inbound Read Request whose Response is queued and not yet fully handed to TCP.
#[derive(Debug)]
pub(crate) struct InRead {
    /// Keeps the source registration (and owned memory) alive until the Response is sent,
    /// and tells whether it still may be: a window invalidated or released, or a region
    /// deregistered, since the request was checked fails the rest (`revoked_response`).
    src: Option<Arc<Registration>>,
    /// The Terminate that fails the request then: "invalid STag" with its headers.
    term: Terminate,
    /// A zero-length Read: the peer's probe may be any of those queued.
    zero: bool,
}

/// One-sided state of a connection (RFC 5040 §5.4, §6.1).
#[derive(Debug, Default)]
pub(crate) struct Rdma {
    /// Inbound Read Requests we queue (our IRD) and outbound ones we keep in flight (our
    /// ORD): the values `GetReadLimits` reports.
    pub(crate) ird: u32,
    pub(crate) ord: u32,
    /// Both ends negotiated the Write completion probe.
    pub(crate) probe: bool,
    /// Outbound Read Requests awaiting their Response, oldest first (responses come in
    /// request order, RFC 5040 §5.5 rule 20).
    pub(crate) orq: VecDeque<OutRead>,
    /// Application Read Requests in flight (≤ `ord`).
    pub(crate) app_reads: u32,
    /// A probe is in flight.
    pub(crate) probe_out: bool,
    /// Read Requests of every kind issued, and answered.
    pub(crate) issued: u64,
    pub(crate) answered: u64,
    /// The largest `proof` of an encoded Write: a probe is due while it exceeds `issued`.
    pub(crate) write_proof: u64,
    /// Inbound Read Requests whose Response is queued, oldest first.
    pub(crate) irq: VecDeque<InRead>,
    /// How many of them are zero-length.
    pub(crate) irq_zero: usize,
}

impl Rdma {
    fn with_capacity(n: usize) -> Self {
        Self {
            orq: VecDeque::with_capacity(n),
            irq: VecDeque::with_capacity(n),
            ..Self::default()
        }
    }

    /// Whether one more inbound Read Request of `size` bytes is within our IRD (RFC 5040
    /// §5.4). With the Write completion probe negotiated, the peer may have one zero-length
    /// probe in flight beyond its application Reads (at most the IRD): so `ird + 1` requests
    /// may be queued as long as one of them is zero-length. Which zero-length one is the
    /// probe cannot be told (an application may Read zero bytes too), so any may be.
    pub(crate) fn admits(&self, size: u32) -> bool {
        let queued = self.irq.len();
        let ird = self.ird as usize;
        queued < ird || (self.probe && queued == ird && (size == 0 || self.irq_zero > 0))
    }
}

/// How a connection ends.
#[derive(Debug, Clone, Copy)]
enum Ending {
    /// Local Disconnect: hand TCP what it takes of the queue, keep the stream framed, FIN.
    Graceful,
    /// A protocol error: one Terminate after the frame on the wire, then FIN (RFC 5040 §5.4).
    Terminate(Terminate),
    /// The peer closed, reset or terminated: drop the queue, FIN.
    Abort,
}

pub(crate) struct Inner {
    pub(crate) conn: Conn,
    pub(crate) sock: Option<Stream>,
    pub(crate) crc: bool,
    pub(crate) rq: WrQueue<RecvWr>,
    pub(crate) sq: WrQueue<SendWr>,
    /// How many `sq` requests (from the front) have been encoded into `tx`.
    pub(crate) encoded: usize,
    /// How many `sq` requests (from the front) TCP has fully taken.
    pub(crate) sent: usize,
    /// The sequence number of the request at the front of `sq` (posts are numbered in order).
    pub(crate) front_seq: u64,
    pub(crate) tx: Tx,
    pub(crate) rx: Rx,
    pub(crate) rdma: Rdma,
    /// Everything queued in `tx` is zero-length Read Responses the receive path produced:
    /// they may wait for the next progress call, to leave with the application's next message
    /// (module `rx`: deferred responses).
    pub(crate) lazy: bool,
    /// The request a received Terminate (or a bad Read Response) names, and its status; the
    /// others are flushed `ND_CANCELED` (iwarp-wire.md §4.4, attribution).
    pub(crate) failed: Option<(u64, Status)>,
    /// Windows bound through this queue pair (unbound when the connection ends).
    /// Windows bound through this queue pair.
    pub(crate) windows: mw::BoundWindows,
    /// Closed, with output still to hand to TCP before the FIN.
    pub(crate) shutdown_pending: bool,
    /// The pending Accept, completed by the initiator's first FPDU.
    pub(crate) accept: Option<OvCompleter>,
    pub(crate) disconnect_waiters: PendingRequests<()>,
    /// Whether the connection ever came up (NotifyDisconnect needs it).
    pub(crate) was_connected: bool,
    /// Last registration a local SGE resolved to: most posts reuse the same buffer. Weak, so
    /// that it never keeps a deregistered region's Deregister pending.
    cache: LocalCache,
    /// With a shared receive queue: where a taken Receive's segments land before they join
    /// `rq` (sized once, at creation), and whether this queue pair is on the SRQ's stalled
    /// list.
    srq_scratch: Vec<SrqSeg>,
    srq_listed: bool,
}

impl Inner {
    fn new(rq: WrQueue<RecvWr>, sq: WrQueue<SendWr>) -> Self {
        Self {
            conn: Conn::Idle,
            sock: None,
            crc: false,
            rq,
            sq,
            encoded: 0,
            sent: 0,
            front_seq: 0,
            tx: Tx::new(),
            rx: Rx::new(),
            rdma: Rdma::with_capacity(16),
            lazy: false,
            failed: None,
            windows: mw::BoundWindows::default(),
            shutdown_pending: false,
            accept: None,
            disconnect_waiters: PendingRequests::new(),
            was_connected: false,
            cache: LocalCache::default(),
            srq_scratch: Vec::new(),
            srq_listed: false,
        }
    }
}

/// The `tcp` provider's queue pair.
pub(crate) struct TcpQp {
    me: Weak<Self>,
    /// This queue pair's id (windows bound through it carry it).
    id: u64,
    pub(crate) shared: Arc<Shared>,
    rcq: Arc<TcpCq>,
    icq: Arc<TcpCq>,
    /// `CreateQueuePairWithSrq`: Receives come from here, one message at a time, into `rq`.
    srq: Option<Arc<TcpSrq>>,
    context: u64,
    max_transfer: u64,
    inline_size: u32,
    inner: Mutex<Inner>,
    /// Reserved by a Connect under way (`kit::connector::Claim`).
    pub(crate) claimed: std::sync::atomic::AtomicBool,
}

impl fmt::Debug for TcpQp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpQp")
            .field("id", &self.id)
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

/// Segment capacity per request: at least 4 even when fewer were asked for, because ND
/// applications post 2 SGEs on queue pairs created with 1 (`nd-reference.md` D12) and the SPI
/// lets providers allocate more than requested.
fn seg_capacity(requested: u32) -> usize {
    requested.max(4) as usize
}

/// The SGE a Read's `part`-th Read Request fills (the `part`-th non-empty SGE; `None` when
/// the Read has no data), and the offset of that SGE's bytes in the Read.
fn read_part(segs: &[Seg], part: u16) -> (Option<usize>, u64) {
    let mut off = 0u64;
    let mut n = 0u16;
    for (i, s) in segs.iter().enumerate() {
        if s.len > 0 {
            if n == part {
                return (Some(i), off);
            }
            n += 1;
        }
        off += u64::from(s.len);
    }
    (None, 0)
}

impl TcpQp {
    pub(crate) fn new(shared: Arc<Shared>, cfg: &QueuePairConfig) -> Result<Arc<Self>> {
        let rcq =
            TcpCq::downcast_on(&cfg.receive_cq, &shared).ok_or(Error::invalid_parameter(2))?;
        let icq =
            TcpCq::downcast_on(&cfg.initiator_cq, &shared).ok_or(Error::invalid_parameter(3))?;
        // CreateQueuePairWithSrq: the SRQ is parameter 4 (nd-reference.md §2.4).
        let srq = match &cfg.srq {
            Some(s) => Some(TcpSrq::downcast_on(s, &shared).ok_or(Error::invalid_parameter(4))?),
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
        let mut inner = Inner::new(
            WrQueue::new(rq_depth, rq_segs),
            WrQueue::new(
                cfg.initiator_queue_depth as usize,
                seg_capacity(cfg.max_initiator_request_sge),
            ),
        );
        if srq.is_some() {
            inner.srq_scratch = vec![SrqSeg::default(); rq_segs];
        }
        let info = shared.info;
        let qp = Arc::new_cyclic(|me| Self {
            me: me.clone(),
            id: netdirect_spi::kit::mr::new_qp_id(),
            shared: shared.clone(),
            rcq: rcq.clone(),
            icq: icq.clone(),
            srq,
            context: cfg.context,
            max_transfer: u64::from(info.max_transfer_length),
            inline_size: cfg.inline_data_size,
            inner: Mutex::new(inner),
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

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn rcq(&self) -> &CqCore {
        &self.rcq.core
    }

    fn icq(&self) -> &CqCore {
        &self.icq.core
    }

    /// Complete a Receive.
    fn complete_recv(&self, context: u64, status: Status, bytes: u32, solicited: bool) {
        self.rcq().push(
            NdResult::receive(self.context, context, status, bytes),
            PushKind { solicited },
        );
    }

    /// Complete an initiator request (suppressed for `SILENT_SUCCESS` successes).
    fn complete_send(&self, wr: &SendWr, status: Status) {
        if status == Status::SUCCESS && wr.flags.contains(OpFlags::SILENT_SUCCESS) {
            return;
        }
        let bytes = match (status, wr.kind) {
            (Status::SUCCESS, TxKind::Send | TxKind::Write { .. } | TxKind::Read { .. }) => {
                u32::try_from(wr.total).unwrap_or(u32::MAX)
            }
            _ => 0,
        };
        self.icq().push(
            NdResult {
                status,
                bytes_transferred: bytes,
                qp_context: self.context,
                request_context: wr.context,
                request_type: wr.request_type,
            },
            PushKind::default(),
        );
    }

    /// Resolve and check one local SGE; the registration is kept with the request.
    fn check_local(
        &self,
        cache: &mut LocalCache,
        s: &Sge,
        access: Access,
    ) -> std::result::Result<Seg, AccessError> {
        let addr = s.buffer as usize as u64;
        let len = u64::from(s.buffer_length);
        let reg = cache
            .resolve(&self.shared.mrs, s.memory_region_token)
            .ok_or(AccessError::InvalidToken)?;
        reg.check(addr, len, access)?;
        Ok(Seg::new(addr, s.buffer_length, Some(reg)))
    }

    /// A Receive whose memory failed its check completes ND_ACCESS_VIOLATION, after the
    /// Receives posted before it are flushed (completions keep posting order). Out of line:
    /// the repost of every message passes the call.
    #[cold]
    #[inline(never)]
    fn refuse_receive(&self, g: &mut Inner, context: u64) {
        if g.conn == Conn::Idle {
            // Never connected: there is no connection for the error to end, and Connect says
            // ND_CONNECTION_ACTIVE only of a queue pair that has one. Flushed as Flush of an
            // unconnected queue pair does; the queue pair stays ready to connect.
            self.flush_all(g);
        } else {
            // An error completion moves the queue pair to the error state (R-QP-6).
            self.end(g, local_catastrophic(), Status::CONNECTION_REFUSED);
        }
        self.complete_recv(context, Status::ACCESS_VIOLATION, 0, false);
    }

    /// `Send`, `Write` and `Read`: validation, local SGE checks, then the initiator queue.
    ///
    /// # Safety
    /// See [`traits::QueuePair::send`], `write` and `read`.
    unsafe fn post_request(
        &self,
        context: u64,
        sge: &[Sge],
        flags: OpFlags,
        kind: TxKind,
    ) -> Result<()> {
        // The flags parameter is the 4th of Send and the 6th of Read and Write.
        let (allowed, param) = match kind {
            TxKind::Send => (
                OpFlags::SILENT_SUCCESS
                    | OpFlags::READ_FENCE
                    | OpFlags::SEND_AND_SOLICIT_EVENT
                    | OpFlags::INLINE,
                4,
            ),
            TxKind::Write { .. } => (
                OpFlags::SILENT_SUCCESS | OpFlags::READ_FENCE | OpFlags::INLINE,
                6,
            ),
            _ => (OpFlags::SILENT_SUCCESS | OpFlags::READ_FENCE, 6),
        };
        if !allowed.contains(flags) {
            return Err(Error::invalid_parameter(param));
        }
        let is_read = matches!(kind, TxKind::Read { .. });
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
        if total > self.max_transfer
            || (inline && total > u64::from(self.inline_size.max(tx::INLINE_COPY as u32)))
        {
            return fail(Status::BUFFER_OVERFLOW);
        }
        let mut wr = SendWr::new(context, kind, flags, total);
        if g.conn == Conn::Closed {
            drop(g);
            self.complete_send(&wr, Status::CANCELED);
            return Ok(());
        }
        if is_read && g.rdma.ord == 0 {
            // The connection grants no outbound Reads (Connect/Accept outboundReadLimit 0, or
            // a peer with IRD 0): the Read can never be issued. Not a status Read returns
            // (IND2QueuePair::Read): it completes ND_INVALID_DEVICE_REQUEST in its turn, a
            // malformed request (nd-reference.md §2.5, the ND2_RESULT status table).
            wr.error = Some(Status::INVALID_DEVICE_REQUEST);
            g.sq.push_bare(wr);
            self.encode_pending(&mut g);
            self.flush_tx(&mut g);
            return Ok(());
        }
        // The common small Send, with nothing queued before it: framed on the stack and
        // written at once, past the stash and the staging queue (`send_direct`).
        let wr = if matches!(kind, TxKind::Send)
            && g.conn == Conn::Established
            && g.sq.is_empty()
            && !g.tx.has_output()
            && total <= tx::DIRECT_MAX as u64
            && sge.len() <= DIRECT_SGE
        {
            // SAFETY: forwarded contract of this function.
            match unsafe { self.send_direct(&mut g, wr, sge, inline) } {
                Ok(()) => return Ok(()),
                Err(wr) => wr,
            }
        } else {
            wr
        };
        if inline {
            // Inline data is captured now: the application may reuse its buffer at once.
            g.tx.stash_inline(sge);
            g.sq.push_bare(wr);
        } else {
            // A Read's sink must be locally writable; a Send's or Write's source readable.
            let access = if is_read {
                Access::LocalWrite
            } else {
                Access::LocalRead
            };
            let Inner { sq, cache, .. } = &mut *g;
            let mut wr = Some(wr);
            let checked = sq.push_with(
                sge.len(),
                |i| self.check_local(cache, &sge[i], access),
                |segs| {
                    let mut wr = wr.take().expect("built once");
                    if is_read {
                        let nonempty = segs.iter().filter(|s| s.len > 0).count();
                        wr.parts = nonempty.max(1) as u16;
                    }
                    wr
                },
            );
            if checked.is_err() {
                // Queued without segments, to fail in its turn (R-QP-6).
                let mut wr = wr.take().expect("not queued");
                wr.error = Some(Status::ACCESS_VIOLATION);
                g.sq.push_bare(wr);
            }
        }
        self.encode_pending(&mut g);
        self.flush_tx(&mut g);
        Ok(())
    }

    /// A Send of at most [`tx::DIRECT_MAX`] bytes with nothing queued before it (no request,
    /// no output): framed on the stack and written with one `send(2)` within the post, and
    /// complete once TCP took all of it, as any Send (`complete_ready`). What the socket does
    /// not take is queued as ordinary output, from where `flush_tx` writes and completes it
    /// (or reports the broken socket). This skips the inline stash, the staging buffer and the
    /// chunk queue: `bench/callgrind`'s tcp post+poll of 8 bytes went from 3,780 to 2,984
    /// instructions (docs/ARCHITECTURE.md, "The path of one Send"). Gives the request back when
    /// it does not qualify: memory the registration check refuses takes the ordinary path,
    /// which fails it in its turn.
    ///
    /// # Safety
    /// As [`traits::QueuePair::send`]: INLINE memory is readable during the call; other
    /// memory is readable and unchanged until the Send completes (it is copied here).
    unsafe fn send_direct(
        &self,
        g: &mut Inner,
        mut wr: SendWr,
        sge: &[Sge],
        inline: bool,
    ) -> std::result::Result<(), SendWr> {
        let Some(sock) = g.sock.as_ref().map(|s| s.get()) else {
            return Err(wr);
        };
        let mut pieces: [&[u8]; DIRECT_SGE] = [&[]; DIRECT_SGE];
        for (piece, s) in pieces.iter_mut().zip(sge) {
            if !inline
                && self
                    .check_local(&mut g.cache, s, Access::LocalRead)
                    .is_err()
            {
                return Err(wr);
            }
            // SAFETY: INLINE memory is readable during this call (the poster's contract);
            // otherwise the range lies in a live registration with local read access (checked
            // just above) and the poster leaves it alone until completion. It is copied into
            // the frame before this call returns.
            *piece =
                unsafe { crate::mem::slice(s.buffer as usize as u64, s.buffer_length as usize) };
        }
        let Some((n, msn)) =
            g.tx.encode_send_direct(&pieces[..sge.len()], wr.flags, g.crc)
        else {
            return Err(wr);
        };
        wr.msn = msn;
        let flags = rustix::net::SendFlags::NOSIGNAL | rustix::net::SendFlags::DONTWAIT;
        // Full socket, a signal, or a broken connection: the queued frame's `flush_tx` below
        // tries again and reports what it finds.
        let written = rustix::net::send(sock, g.tx.direct_frame(n), flags).unwrap_or(0);
        g.lazy = false;
        if written == n {
            // The queue was empty: this Send is the oldest, and complete (under the lock, so
            // completions keep posting order).
            self.complete_send(&wr, Status::SUCCESS);
            return Ok(());
        }
        g.tx.queue_direct(n, written);
        g.sq.push_bare(wr);
        g.encoded += 1;
        self.flush_tx(g);
        Ok(())
    }

    /// Encode every queued request that may go on the wire now, in order; stop at one that
    /// must wait (an ORD slot, a fence, an error before it), since everything after it waits
    /// too (RFC 5040 §5.4 and §5.5 rule 13).
    fn encode_pending(&self, g: &mut Inner) {
        if g.conn != Conn::Established {
            return;
        }
        let crc = g.crc;
        let front_seq = g.front_seq;
        while g.encoded < g.sq.len() {
            let i = g.encoded;
            let Inner { sq, tx, rdma, .. } = g;
            let (wr, segs) = sq.get_mut(i).expect("index below len");
            if wr.error.is_some() {
                break;
            }
            // ND_OP_FLAG_READ_FENCE: every earlier Read completes before this one starts
            // (RFC 5040 §5.5 rule 12, "fence"; a purely local rule, iwarp-wire.md §5.2).
            if wr.flags.contains(OpFlags::READ_FENCE) && wr.issued == 0 && rdma.app_reads > 0 {
                break;
            }
            let inline = wr.flags.contains(OpFlags::INLINE);
            match wr.kind {
                TxKind::Send if inline => wr.msn = tx.encode_stashed_inline(wr.flags, None, crc),
                TxKind::Send => wr.msn = tx.encode_send(segs, wr.total, wr.flags, crc),
                TxKind::Write { stag, to } => {
                    if inline {
                        tx.encode_stashed_inline(wr.flags, Some((stag, to)), crc);
                    } else {
                        tx.encode_write(segs, wr.total, stag, to, crc);
                    }
                    // The next Read Request issued proves this Write placed.
                    wr.proof = rdma.issued + 1;
                    rdma.write_proof = wr.proof;
                }
                TxKind::Read { stag, to } => {
                    let wr_seq = front_seq + i as u64;
                    // One Read Request per non-empty SGE (a request names one sink STag,
                    // RFC 5040 §4.4), each in an ORD slot of its own (§5.4).
                    while wr.issued < wr.parts && rdma.app_reads < rdma.ord {
                        let (seg, off) = read_part(segs, wr.issued);
                        let (sink_stag, sink_to, size) = match seg {
                            Some(k) => (
                                // Queued by push_with: each segment holds its registration.
                                segs[k].reg().map_or(0, |r| r.token),
                                segs[k].addr,
                                segs[k].len,
                            ),
                            None => (0, 0, 0),
                        };
                        let rr = ReadRequest {
                            sink_stag,
                            sink_to,
                            size,
                            src_stag: stag,
                            src_to: to.wrapping_add(off),
                        };
                        let msn = tx.encode_read_request(&rr, crc);
                        if wr.issued == 0 {
                            wr.msn = msn;
                        }
                        wr.issued += 1;
                        rdma.app_reads += 1;
                        rdma.issued += 1;
                        rdma.orq.push_back(OutRead {
                            kind: ReadKind::App {
                                wr_seq,
                                seg: seg.unwrap_or(usize::MAX),
                            },
                            expect: ExpectedResponse {
                                sink_stag,
                                sink_to,
                                size,
                                got: 0,
                            },
                        });
                    }
                    if wr.issued < wr.parts {
                        // Out of ORD slots: this Read and everything after it wait.
                        break;
                    }
                    tx.mark_done();
                }
                TxKind::Bind | TxKind::Invalidate => tx.mark_done(),
            }
            g.encoded += 1;
            g.lazy = false;
        }
        self.maybe_probe(g);
    }

    /// Send a Write completion probe if Writes wait for one and none is in flight: a
    /// zero-length Read Request outside the ORD (module documentation).
    fn maybe_probe(&self, g: &mut Inner) {
        let r = &mut g.rdma;
        if !r.probe || r.probe_out || r.write_proof <= r.issued || g.conn != Conn::Established {
            return;
        }
        // RFC 5040 §5.2.1: a zero-size Read names no memory; the target answers it with a
        // zero-length Read Response after everything sent before it.
        let rr = ReadRequest::default();
        g.tx.encode_read_request(&rr, g.crc);
        r.probe_out = true;
        r.issued += 1;
        r.orq.push_back(OutRead {
            kind: ReadKind::Probe,
            expect: ExpectedResponse {
                sink_stag: 0,
                sink_to: 0,
                size: 0,
                got: 0,
            },
        });
        g.lazy = false;
    }

    /// Complete, in order, every request at the front of the queue that is done.
    fn complete_ready(&self, g: &mut Inner) {
        loop {
            let Some((wr, _)) = g.sq.front() else { return };
            let ready = match wr.error {
                Some(_) => true,
                None => {
                    g.encoded > 0
                        && g.sent > 0
                        && match wr.kind {
                            TxKind::Write { .. } => !g.rdma.probe || g.rdma.answered >= wr.proof,
                            TxKind::Read { .. } => wr.answered == wr.parts,
                            _ => true,
                        }
                }
            };
            if !ready {
                return;
            }
            let wr = g.sq.pop().expect("front exists");
            g.front_seq += 1;
            match wr.error {
                None => {
                    g.encoded -= 1;
                    g.sent -= 1;
                    self.complete_send(&wr, Status::SUCCESS);
                }
                Some(status) => {
                    // R-QP-6: an error completion ends the connection; what follows is
                    // flushed with ND_CANCELED.
                    self.complete_send(&wr, status);
                    self.end(g, local_catastrophic(), Status::CONNECTION_REFUSED);
                    return;
                }
            }
        }
    }

    /// Write as much queued output as the socket takes; account the requests and Read
    /// Responses TCP fully took, and complete what is done.
    fn flush_tx(&self, g: &mut Inner) {
        let Some(sock) = g.sock.as_ref().map(|s| s.get()) else {
            return;
        };
        if !g.rdma.irq.is_empty() && g.conn != Conn::Closed {
            if let Some(term) = revoked_response(&g.rdma) {
                // Only the rest of the frame on the wire goes, then the Terminate (`close`):
                // the peer's Read completes ND_ACCESS_VIOLATION.
                self.terminate(g, term);
                return;
            }
        }
        let result = g.tx.write_to(sock);
        g.lazy = false;
        if let Some(s) = &g.sock {
            s.set_wants_write(g.tx.has_output());
        }
        match result {
            Ok(w) => {
                g.sent += w.done;
                for _ in 0..w.responses {
                    if let Some(r) = g.rdma.irq.pop_front() {
                        g.rdma.irq_zero -= usize::from(r.zero);
                    }
                }
            }
            Err(_) => {
                // The socket is broken (reset, EPIPE): nothing queued can go any more, and a
                // socket that reports itself writable for ever must leave the leader's poll
                // set, or every blocking wait of the adapter would spin on it.
                g.tx.clear();
                g.shutdown_pending = false;
                if let Some(s) = &g.sock {
                    s.set_wants_write(false);
                }
                self.lost_connection(g);
                return;
            }
        }
        if g.conn == Conn::Closed {
            if g.shutdown_pending && !g.tx.has_output() {
                g.shutdown_pending = false;
                if let Some(s) = &g.sock {
                    let _ = s.get().shutdown(std::net::Shutdown::Write);
                }
            }
            return;
        }
        self.complete_ready(g);
    }

    /// Drive this queue pair's I/O with the lock held.
    pub(crate) fn progress_locked(&self, g: &mut Inner) {
        if g.sock.is_none() {
            return;
        }
        if g.tx.has_output() {
            self.flush_tx(g);
        }
        g.rx.delivered = false;
        self.progress_rx(g);
        if g.conn == Conn::Closed {
            if g.tx.has_output() {
                self.flush_tx(g);
            }
            return;
        }
        // Read Responses may have freed ORD slots, lifted a fence, or proved Writes.
        self.encode_pending(g);
        self.complete_ready(g);
        if g.tx.has_output() {
            // Zero-length Read Responses (the peer's Write completion probes) may wait for
            // the next progress call, to leave with the application's next message: the
            // application, spinning on memory a peer writes, reacts before they are sent
            // (ndrpingpong's pattern). Not when a Receive was delivered (the application may
            // stop driving this connection), nor with the descriptor exported (only an edge
            // would bring us back). The next progress call, a post, or a blocking wait
            // (which polls for writability, `wants_write`) sends them.
            if g.lazy && !g.rx.delivered && !self.shared.engine.fd_exported() {
                if let Some(s) = &g.sock {
                    s.set_wants_write(true);
                }
            } else {
                self.flush_tx(g);
            }
        }
    }

    /// Flush every outstanding request with `ND_CANCELED` (the one a Terminate named, and the
    /// ones before it that were done, get their own status), Receives and initiator requests.
    fn flush_all(&self, g: &mut Inner) {
        let failed = g.failed.take();
        let sent = g.sent;
        let mut i = 0;
        while let Some(wr) = g.sq.pop() {
            let seq = g.front_seq;
            g.front_seq += 1;
            let status = match failed {
                Some((f, st)) if f == seq => st,
                // Before the culprit: the target processed these in order, so they were placed.
                Some((f, _))
                    if seq < f
                        && wr.error.is_none()
                        && i < sent
                        && match wr.kind {
                            TxKind::Read { .. } => wr.answered == wr.parts,
                            _ => true,
                        } =>
                {
                    Status::SUCCESS
                }
                _ => Status::CANCELED,
            };
            self.complete_send(&wr, status);
            i += 1;
        }
        g.encoded = 0;
        g.sent = 0;
        while let Some(wr) = g.rq.pop() {
            self.complete_recv(wr.context, Status::CANCELED, 0, false);
        }
        g.rx.reset_message();
        if let Some(s) = &g.sock {
            // No longer held for a Receive; what follows is read (and dropped) up to the end.
            s.set_wants_read(!g.rx.at_end());
        }
        let r = &mut g.rdma;
        r.orq.clear();
        r.irq.clear();
        r.irq_zero = 0;
        r.app_reads = 0;
        r.probe_out = false;
        // A window is usable through its queue pair only: with the connection gone it is
        // unbound, which also lets its region be deregistered.
        g.windows.unbind_all(&self.shared.mrs);
    }

    /// Unbind a window registration (idempotent): its token dies, its region is free again.
    fn unbind(&self, w: &Registration) {
        mw::unbind(&self.shared.mrs, w);
    }

    /// The connection is gone (peer closed, reset, or a local I/O error). A peer that only
    /// closed its sending side still reads: what is queued for it (Read Responses it asked
    /// for before its FIN) goes out if TCP takes it (RFC 5040 §6.2 graceful close).
    pub(crate) fn lost_connection(&self, g: &mut Inner) {
        self.close(g, Status::CONNECTION_REFUSED, Ending::Graceful);
    }

    /// Tear down because of a protocol error: one Terminate after the frame on the wire (never
    /// spliced into it, as siw does), then flush and close (RFC 5040 §5.4, §6.2.1).
    pub(crate) fn terminate(&self, g: &mut Inner, term: Terminate) {
        self.close(g, Status::CONNECTION_REFUSED, Ending::Terminate(term));
    }

    /// Tear down after a local error; `status` is what a pending Accept gets.
    fn end(&self, g: &mut Inner, term: Terminate, status: Status) {
        self.close(g, status, Ending::Terminate(term));
    }

    /// Close the connection: settle the output, flush every request, FIN, finish waiters.
    /// `accept_status` is what a pending Accept gets (D9: the active side went away).
    fn close(&self, g: &mut Inner, accept_status: Status, how: Ending) {
        if g.conn == Conn::Closed && g.sock.is_none() {
            return;
        }
        let was_open = g.conn != Conn::Closed;
        g.conn = Conn::Closed;
        if let Some(sock) = g.sock.as_ref().map(|s| s.get()) {
            if was_open {
                match how {
                    Ending::Graceful | Ending::Terminate(_) => {
                        // What was queued before the end (among it Read Responses the peer
                        // waits for) goes if TCP takes it now, unless a Response in it may no
                        // longer be read (`revoked_response`); the rest is dropped, keeping the
                        // stream framed (the frame on the wire was taken before).
                        let readable = revoked_response(&g.rdma).is_none();
                        if readable && g.tx.write_to(sock).is_err() {
                            // A broken socket (reset): nothing queued can go.
                            g.tx.clear();
                        }
                        g.tx.cut_to_current_frame();
                        if let Ending::Terminate(t) = how {
                            // Exactly one Terminate per stream (RFC 5040 §5.4).
                            g.tx.encode_terminate(&t, g.crc);
                        }
                    }
                    Ending::Abort => g.tx.clear(),
                }
                if g.tx.write_to(sock).is_err() {
                    g.tx.clear();
                }
            }
            g.lazy = false;
            // Exactly while output is left: a stream that wants writing stays in the sleeping
            // thread's poll set, and a socket shut down for writing reports itself writable
            // for ever, so a wish left over (deferred probe answers, written just above)
            // would make every blocking wait of the adapter spin.
            if let Some(s) = &g.sock {
                s.set_wants_write(g.tx.has_output());
            }
            if g.tx.has_output() {
                // The rest (and the FIN) go as the socket drains; closing never turns into
                // an RST that would destroy a Terminate still in flight.
                g.shutdown_pending = true;
            } else {
                let _ = sock.shutdown(std::net::Shutdown::Write);
            }
        }
        self.flush_all(g);
        if let Some(a) = g.accept.take() {
            a.complete(accept_status);
        }
        g.disconnect_waiters.complete_all((), Status::SUCCESS);
        // Keep the socket (and its registration) until the queue pair goes away.
    }

    /// Attach an established connection (active side, at `CompleteConnect`).
    pub(crate) fn establish_active(
        &self,
        sock: Socket,
        neg: &Negotiated,
        leftover: &[u8],
    ) -> Result<()> {
        let mut g = self.lock();
        // Our IRD is what we announced; our ORD what the acceptor's IRD allows of ours
        // (RFC 6581 §9.1; without the v2 word, what we asked for).
        let ord = if neg.enhanced {
            neg.local_ord.min(neg.peer_ird)
        } else {
            neg.local_ord
        };
        let (ird, ord) = (u32::from(neg.local_ird), u32::from(ord));
        self.attach_socket(&mut g, sock, neg, leftover, ird, ord)?;
        g.conn = Conn::Established;
        match neg.rtr {
            Some(Rtr::Write) => {
                let crc = g.crc;
                g.tx.encode_rtr_write(crc);
            }
            Some(Rtr::Read) => {
                let crc = g.crc;
                g.tx.encode_rtr_read(crc);
                g.rdma.issued += 1;
                g.rdma.orq.push_back(OutRead {
                    kind: ReadKind::Rtr,
                    expect: ExpectedResponse {
                        sink_stag: 0,
                        sink_to: 0,
                        size: 0,
                        got: 0,
                    },
                });
            }
            None => {}
        }
        self.encode_pending(&mut g);
        self.flush_tx(&mut g);
        self.progress_rx(&mut g);
        Ok(())
    }

    /// Attach an accepted connection (passive side, at `Accept`): wait for the RTR.
    pub(crate) fn establish_passive(
        &self,
        sock: Socket,
        neg: &Negotiated,
        accept: OvCompleter,
    ) -> Result<()> {
        let mut g = self.lock();
        let (ird, ord) = (u32::from(neg.local_ird), u32::from(neg.local_ord));
        self.attach_socket(&mut g, sock, neg, &[], ird, ord)?;
        g.conn = Conn::AwaitRtr;
        g.accept = Some(accept);
        // The whole drive: the RTR, and a Read Request behind it, may be in the socket
        // already; what they make us send (a Read Response) goes out now, not at a later poll
        // that a blocking application may never make.
        self.progress_locked(&mut g);
        Ok(())
    }

    fn attach_socket(
        &self,
        g: &mut Inner,
        sock: Socket,
        neg: &Negotiated,
        leftover: &[u8],
        ird: u32,
        ord: u32,
    ) -> Result<()> {
        if g.conn != Conn::Idle {
            return fail(Status::CONNECTION_ACTIVE);
        }
        let src: Weak<dyn Source> = self.me.clone();
        g.sock = Some(self.shared.engine.add_stream(sock, src));
        g.crc = neg.crc;
        g.was_connected = true;
        g.rdma.ird = ird;
        g.rdma.ord = ord;
        g.rdma.probe = neg.probe;
        g.rx.start(neg.crc, leftover);
        g.tx.start(self.shared.config.mulpdu);
        Ok(())
    }

    /// The first FPDU arrived on the passive side: the connection is fully established.
    fn rtr_received(&self, g: &mut Inner) {
        if g.conn == Conn::AwaitRtr {
            g.conn = Conn::Established;
            if let Some(a) = g.accept.take() {
                a.complete(Status::SUCCESS);
            }
            self.encode_pending(g);
        }
    }

    /// Take the SRQ's oldest Receive into `rq` for the message arriving now. `false` when this
    /// queue pair has no SRQ, or the SRQ is empty (the queue pair is then on its stalled list
    /// and the next post there drives it: [`TcpQp::srq_posted`]).
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
        srq.take_into(rq, srq_scratch, &self.me, srq_listed)
    }

    /// A Receive was posted to this queue pair's SRQ while it was on the stalled list (which
    /// the poster took it off): resume the held Send on the poster's thread.
    pub(crate) fn srq_posted(&self) {
        let mut g = self.lock();
        g.srq_listed = false;
        self.progress_locked(&mut g);
    }

    /// An inbound Send found no Receive: hold it (and the stream behind it) and start the
    /// `ND_TCP_RNR_TIMEOUT_MS` clock, once per stall, with at most one engine timer per queue
    /// pair (R-QP-7).
    fn stall(&self, g: &mut Inner, h: SegmentHeader) {
        g.rx.stalled = Some(h);
        // The rest stays in the socket until a Receive comes: a blocked waiter must not
        // wake for it (the post or the RNR timer resumes the stream).
        if let Some(s) = &g.sock {
            s.set_wants_read(false);
        }
        let since = *g.rx.stall_since.get_or_insert_with(Instant::now);
        if !g.rx.timer_armed {
            g.rx.timer_armed = true;
            let src: Weak<dyn Source> = self.me.clone();
            self.shared
                .engine
                .add_timer(since + self.shared.config.rnr_timeout, src);
        }
    }

    /// End the connection if the current stall has lasted `ND_TCP_RNR_TIMEOUT_MS` (see
    /// `on_timer`); otherwise return its deadline, if there is a stall.
    fn stall_expired(&self, g: &mut Inner) -> Option<Instant> {
        let (Some(h), Some(since)) = (g.rx.stalled, g.rx.stall_since) else {
            return None;
        };
        let deadline = since + self.shared.config.rnr_timeout;
        if Instant::now() < deadline {
            return Some(deadline);
        }
        tracing::debug!(qp = self.id, "no Receive for an inbound Send in time");
        self.terminate(g, h.terminate_for(TermError::DdpUntaggedNoBuffer));
        None
    }

    /// Whether the queue pair is attached to a connection (or was).
    pub(crate) fn conn(&self) -> Conn {
        self.lock().conn
    }

    /// `IND2Connector::Disconnect`: flush, send FIN; completes at once.
    pub(crate) fn disconnect(&self) {
        let mut g = self.lock();
        self.close(&mut g, Status::CONNECTION_REFUSED, Ending::Graceful);
    }

    /// `IND2Connector::NotifyDisconnect`.
    pub(crate) fn notify_disconnect(&self) -> Overlapped {
        let mut g = self.lock();
        let ended = g.conn == Conn::Closed;
        g.disconnect_waiters
            .wait_for_event((), ended, self.shared.engine.clone())
    }

    /// Cancel a pending NotifyDisconnect (connector's `CancelOverlappedRequests`).
    pub(crate) fn cancel_notify_disconnect(&self) {
        self.lock().disconnect_waiters.cancel_all();
    }

    /// Cancel a pending Accept (connector's `CancelOverlappedRequests`): abandons the connection.
    pub(crate) fn cancel_accept(&self) {
        let mut g = self.lock();
        if let Some(a) = g.accept.take() {
            a.complete(Status::CANCELED);
            // The same CancelOverlappedRequests cancels a NotifyDisconnect posted meanwhile
            // (R-CANCEL-1), after the Accept (FIFO), not with the success the close gives it.
            g.disconnect_waiters.cancel_all();
            self.close(&mut g, Status::CANCELED, Ending::Abort);
        }
    }
}

/// The Terminate for the first queued Read Response whose source registration went since its
/// Read Request was checked (a window invalidated or released, a region deregistered). Its
/// transfer fails (IND2QueuePair::Invalidate: "any in-progress data transfers that reference
/// the memory window will fail"), as a Write's next segment into such memory does
/// (`on_write`): "invalid STag" (0x0/0x1/0x00), the status a Read Request naming it now
/// would get.
fn revoked_response(r: &Rdma) -> Option<Terminate> {
    r.irq
        .iter()
        .find(|q| q.src.as_ref().is_some_and(|s| !s.is_valid()))
        .map(|q| q.term)
}

/// The Terminate for a local fatal error (RFC 5040 §4.8: 0x0/0x0, siw's code 0xFF).
fn local_catastrophic() -> Terminate {
    Terminate::new(TermError::RdmapLocalCatastrophic(0xFF))
}

impl ProgressSource for TcpQp {
    fn progress(&self) {
        let mut g = self.lock();
        self.progress_locked(&mut g);
        // A CQ poll drives its queue pairs directly, not the engine's timers: a receiver that
        // only polls must still bound a stall (R-QP-7). One clock read per poll, while stalled.
        if g.rx.stalled.is_some() {
            self.stall_expired(&mut g);
        }
    }
}

impl Source for TcpQp {
    fn on_ready(&self, events: EventFlags) {
        let mut g = self.lock();
        if events.intersects(EventFlags::RDHUP | EventFlags::HUP | EventFlags::ERR) {
            g.rx.hung_up();
        }
        self.progress_locked(&mut g);
    }

    fn lend_reader(&self) -> Option<Box<[u8]>> {
        let mut g = self.lock();
        if g.conn == Conn::Closed {
            return None;
        }
        g.rx.lend()
    }

    fn return_reader(
        &self,
        buf: Box<[u8]>,
        got: std::result::Result<usize, rustix::io::Errno>,
        asked: usize,
    ) {
        let mut g = self.lock();
        g.rx.take_back(buf, got, asked);
        self.progress_locked(&mut g);
    }

    /// The receiver-not-ready clock of a held Send ran out (R-QP-7): no Receive came within
    /// `ND_TCP_RNR_TIMEOUT_MS`. Refuse the Send the way DDP refuses an untagged message with no
    /// buffer (RFC 5041 §7.2, 0x1/0x2/0x02, naming its QN and MSN) and end the connection; the
    /// sender completes that Send with `ND_IO_TIMEOUT`. This side reports nothing for it (the
    /// receiver "sees no CQE"); its SRQ's Receives stay there for the other queue pairs.
    fn on_timer(&self) {
        let mut g = self.lock();
        g.rx.timer_armed = false;
        if let Some(deadline) = self.stall_expired(&mut g) {
            // A later stall than the one this timer was set for.
            g.rx.timer_armed = true;
            let src: Weak<dyn Source> = self.me.clone();
            self.shared.engine.add_timer(deadline, src);
        }
    }
}

impl Posts for TcpQp {
    fn flush(&self) -> Result<()> {
        let mut g = self.lock();
        if g.conn == Conn::Idle {
            self.flush_all(&mut g);
        } else {
            self.close(&mut g, Status::CANCELED, Ending::Graceful);
        }
        Ok(())
    }

    #[inline]
    unsafe fn post(
        &self,
        context: u64,
        sge: &[Sge],
        flags: OpFlags,
        request: Request,
    ) -> Result<()> {
        // The remote token is the STag in network byte order (GetRemoteToken), so its bytes
        // are the wire bytes: its host value is `from_be` of it.
        let kind = match request {
            Request::Send => TxKind::Send,
            Request::Read {
                remote_address,
                remote_token,
            } => TxKind::Read {
                stag: u32::from_be(remote_token),
                to: remote_address,
            },
            Request::Write {
                remote_address,
                remote_token,
            } => TxKind::Write {
                stag: u32::from_be(remote_token),
                to: remote_address,
            },
        };
        // SAFETY: forwarded contract.
        unsafe { self.post_request(context, sge, flags, kind) }
    }

    /// `Receive`.
    ///
    /// # Safety
    /// See [`traits::QueuePair::receive`].
    unsafe fn post_receive(&self, context: u64, sge: &[Sge]) -> Result<()> {
        if self.srq.is_some() {
            // Its Receives are posted to the shared receive queue; this queue pair has none
            // of its own to hold them.
            return fail(Status::INVALID_DEVICE_REQUEST);
        }
        let mut g = self.lock();
        let total = g.rq.check_receive(sge, self.max_transfer)?;
        if g.conn == Conn::Closed {
            drop(g);
            self.complete_recv(context, Status::CANCELED, 0, false);
            return Ok(());
        }
        let Inner { rq, cache, .. } = &mut *g;
        let wr = RecvWr { context, total };
        let checked = rq.push_checked(wr, sge, Access::LocalWrite, cache, &self.shared.mrs);
        if checked.is_err() {
            self.refuse_receive(&mut g, context);
            return Ok(());
        }
        // A Send may be waiting for this buffer.
        if g.rx.is_stalled() {
            self.progress_locked(&mut g);
        }
        Ok(())
    }

    /// `Bind`: the window is bound (and its token valid) when this returns; the completion
    /// follows in order on the initiator CQ.
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
        qp::check_window_post(g.conn == Conn::Idle, g.sq.is_full())?;
        let ended = g.conn == Conn::Closed;
        let wr = SendWr::new(context, TxKind::Bind, flags, 0);
        if !window.bind_through(region, buffer, len, flags, self.id, ended, &mut g.windows)? {
            drop(g);
            self.complete_send(&wr, Status::CANCELED);
            return Ok(());
        }
        g.sq.push_bare(wr);
        self.encode_pending(&mut g);
        self.flush_tx(&mut g);
        Ok(())
    }

    /// `Invalidate`: the window stops working when this returns; the completion follows in
    /// order (`ND_INVALID_DEVICE_REQUEST` for a window not bound through this queue pair).
    fn post_invalidate(
        &self,
        context: u64,
        window: &Arc<dyn MemoryWindow>,
        flags: OpFlags,
    ) -> Result<()> {
        let window = mw::invalidate_object(&self.shared, window, flags)?;
        let mut g = self.lock();
        qp::check_window_post(g.conn == Conn::Idle, g.sq.is_full())?;
        let mut wr = SendWr::new(context, TxKind::Invalidate, flags, 0);
        if g.conn == Conn::Closed {
            drop(g);
            self.complete_send(&wr, Status::CANCELED);
            return Ok(());
        }
        wr.error = window.invalidate_through(self.id, &mut g.windows);
        g.sq.push_bare(wr);
        self.encode_pending(&mut g);
        self.flush_tx(&mut g);
        Ok(())
    }
}

impl Drop for TcpQp {
    fn drop(&mut self) {
        // Releasing a queue pair implies Disconnect and Flush (IND2Connector::Disconnect remarks).
        let g = self.inner.get_mut().unwrap_or_else(|e| e.into_inner());
        let mut g = std::mem::replace(g, Inner::new(WrQueue::new(1, 1), WrQueue::new(1, 1)));
        self.close(&mut g, Status::CONNECTION_REFUSED, Ending::Graceful);
        // Read what the peer sent and nobody will: closing a socket with unread data sends an
        // RST, which can destroy our Terminate or FIN before the peer reads it.
        self.discard_input(&mut g);
    }
}

#[cfg(test)]
mod ird_tests {
    use super::*;

    fn rdma(ird: u32, probe: bool, queued: &[u32]) -> Rdma {
        let mut r = Rdma {
            ird,
            probe,
            ..Rdma::default()
        };
        for &size in queued {
            r.irq.push_back(InRead {
                src: None,
                term: local_catastrophic(),
                zero: size == 0,
            });
            r.irq_zero += usize::from(size == 0);
        }
        r
    }

    /// With IRD 1 and the probe on, the peer may have one application Read and the probe in
    /// flight, and any queued zero-length Read may be the probe: after an application's
    /// zero-length Read was answered, the probe still queued does not take the IRD slot from
    /// the next application Read.
    #[test]
    fn the_probe_may_be_any_zero_length_read() {
        assert!(rdma(1, true, &[]).admits(100));
        assert!(
            rdma(1, true, &[0]).admits(0),
            "a zero-length Read and the probe"
        );
        assert!(
            rdma(1, true, &[0]).admits(100),
            "the probe queued, then a Read"
        );
        assert!(rdma(1, true, &[100]).admits(0), "a Read, then the probe");
        assert!(!rdma(1, true, &[100]).admits(100), "two Reads beyond IRD 1");
        assert!(!rdma(1, true, &[0, 100]).admits(0), "beyond IRD + 1");
        assert!(!rdma(1, false, &[0]).admits(0), "no probe negotiated");
    }
}
