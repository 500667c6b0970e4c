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
//!
//! # Where the code is
//!
//! This module holds the queue pair's state, its construction, its completions and its faces
//! to the engine; the work is split by concern, as `shm`'s queue pair is:
//! - `post`: the posts (the kit's `Posts`), their checks and statuses, and the direct path;
//! - `sq`: the initiator queue's stages, from encoding to in-order completion;
//! - `tx`: FPDUs framed, queued and written to the socket;
//! - `rx`: FPDUs read from the socket, checked and placed;
//! - `stall`: a Send that finds no Receive, and the shared receive queue's Receives;
//! - `conn`: the drive under the lock, Flush, establishment, Disconnect and the end of the
//!   connection.

mod conn;
mod post;
mod rx;
mod sq;
mod stall;
mod tx;

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use netdirect_spi::kit::cq::{CqCore, ProgressSource, PushKind};
use netdirect_spi::kit::mr::{LocalCache, Registration};
use netdirect_spi::kit::mw;
use netdirect_spi::kit::overlapped::{OvCompleter, PendingRequests};
use netdirect_spi::kit::srq::Seg as SrqSeg;
use netdirect_spi::traits::{self, QueuePairConfig};
use netdirect_spi::{Error, NdResult, OpFlags, RequestType, Result, Status};
use netdirect_wire::rdmap::{TermError, Terminate};
use rustix::event::epoll::EventFlags;

use crate::adapter::Shared;
use crate::claim::PortClaim;
use crate::cq::TcpCq;
use crate::engine::{Source, Stream};
use crate::protect::ExpectedResponse;
use crate::srq::TcpSrq;
use netdirect_spi::kit::wrq::{RecvWr, Seg, WrQueue};
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
    /// Send: the peer's STag (host value) a Send with Invalidate names (ND v1's
    /// SendAndInvalidate).
    pub(crate) inval: Option<u32>,
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
            inval: None,
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
    /// The claim on the connector's explicit port (R-CONN-2, `crate::claim`), held until
    /// the connection closes.
    pub(crate) port_claim: Option<PortClaim>,
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
    /// others are flushed `ND_CANCELED` (docs/WIRE.md §4.4, attribution).
    pub(crate) failed: Option<(u64, Status)>,
    /// Windows bound through this queue pair (unbound when the connection ends).
    /// Windows bound through this queue pair.
    pub(crate) windows: mw::BoundWindows,
    /// Closed, with output still to hand to TCP before the FIN.
    pub(crate) shutdown_pending: bool,
    /// The last write left output queued: the socket was full (`sq::TcpQp::flush_tx`).
    pub(crate) tx_blocked: bool,
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
            port_claim: None,
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
            tx_blocked: false,
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
/// applications post 2 SGEs on queue pairs created with 1 (`docs/ND-RULES.md` D12) and the SPI
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
        // CreateQueuePairWithSrq: the SRQ is parameter 4 (docs/ND-RULES.md §2.4).
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
