//! `IND2QueuePair` over a shared segment: Sends become ring records, Receives are filled from
//! the peer's ring when a poller or waiter drives the queue pair.
//!
//! One mutex guards a queue pair's state (both queues, the ring positions). The hot path takes
//! it once per post and once per poll that finds a record; a poll that finds nothing does not
//! take it: [`ShmQp::poll`] first asks the link, lock-free, whether the expected cell has been
//! published. Work requests live in preallocated queues; nothing on the path allocates, and
//! nothing makes a syscall unless the peer sleeps (one WAKE message) or, every
//! [`LIVENESS_POLLS`] idle polls, to check the socket for the peer's end-of-file.

use std::any::Any;
use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use netdirect_spi::kit::cq::{ProgressSource, PushKind};
use netdirect_spi::kit::mr::{Access, AccessError, Registration};
use netdirect_spi::kit::overlapped::{OvCompleter, Overlapped, PendingRequests};
use netdirect_spi::traits::{self, MemoryRegion, MemoryWindow, QueuePairConfig};
use netdirect_spi::{fail, Error, NdResult, OpFlags, RequestType, Result, Sge, Status};

use crate::adapter::Shared;
use crate::cq::ShmCq;
use crate::link::Link;
use crate::mem::{self, InlineSges, Owned, OwnedMut, Seg, Segs, Src};
use crate::ring::{flag, kind, Consumer, Producer, Violation, INLINE_MAX, RTS_MAX_SGES};

/// Idle polls between two checks of the socket for the peer's end-of-file (a killed peer is
/// noticed within this many polls of a busy-polling survivor; a sleeping one notices at once).
pub(crate) const LIVENESS_POLLS: u32 = 4096;

/// Largest inline (`ND_OP_FLAG_INLINE`) Send, as in `tcp`.
const INLINE_LIMIT: u64 = 1024;

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

#[derive(Debug)]
struct SendWr {
    context: u64,
    flags: OpFlags,
    total: u64,
    /// `INLINE` data captured at post time because the Send had to wait.
    inline: Option<Vec<u8>>,
    /// Announced as an RTS record: the peer pulls it; it completes on the peer's ACK.
    rts: bool,
}

/// A FIFO of work requests, each with up to `per` segments, in one preallocated slab.
#[derive(Debug)]
struct WrQueue<T> {
    wrs: VecDeque<(T, u16)>,
    segs: Vec<Seg>,
    per: usize,
    cap: usize,
    head_slot: usize,
}

impl<T> WrQueue<T> {
    fn new(cap: usize, per: usize) -> Self {
        let cap = cap.max(1);
        Self {
            wrs: VecDeque::with_capacity(cap),
            segs: vec![Seg::default(); cap * per],
            per,
            cap,
            head_slot: 0,
        }
    }
    fn len(&self) -> usize {
        self.wrs.len()
    }
    fn is_full(&self) -> bool {
        self.wrs.len() >= self.cap
    }
    fn max_segs(&self) -> usize {
        self.per
    }
    fn push(&mut self, wr: T, segs: &mut [Seg]) {
        debug_assert!(!self.is_full() && segs.len() <= self.per);
        let mut slot = self.head_slot + self.wrs.len();
        if slot >= self.cap {
            slot -= self.cap; // no division on the hot path
        }
        let base = slot * self.per;
        let n = segs.len();
        for (dst, s) in self.segs[base..base + n].iter_mut().zip(segs) {
            *dst = std::mem::take(s);
        }
        self.wrs.push_back((wr, n as u16));
    }
    fn front_mut(&mut self) -> Option<&mut T> {
        self.wrs.front_mut().map(|(wr, _)| wr)
    }
    fn front(&self) -> Option<(&T, &[Seg])> {
        let (wr, n) = self.wrs.front()?;
        let base = self.head_slot * self.per;
        Some((wr, &self.segs[base..base + *n as usize]))
    }
    fn pop(&mut self) -> Option<T> {
        let (wr, n) = self.wrs.pop_front()?;
        let base = self.head_slot * self.per;
        for s in &mut self.segs[base..base + n as usize] {
            s.reg = None;
        }
        self.head_slot += 1;
        if self.head_slot == self.cap {
            self.head_slot = 0;
        }
        Some(wr)
    }
}

/// What became of an RTS record.
enum Pulled {
    Done,
    Stalled,
    Closed,
}

/// A chunked message being received into the front Receive.
#[derive(Debug, Clone, Copy)]
struct RxMsg {
    pos: u64,
    total: u64,
    solicited: bool,
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
    /// ACK records owed to the peer for RTS messages we pulled.
    acks_owed: u32,
    rx_msg: Option<RxMsg>,
    accept: Option<OvCompleter>,
    disconnect_waiters: PendingRequests<()>,
    /// Last registration a local SGE resolved to: most posts reuse the same buffer.
    cache: Option<Arc<Registration>>,
    /// Scratch for checked segments (no allocation per post).
    scratch: Vec<Seg>,
}

impl Inner {
    fn empty() -> Self {
        Self {
            conn: Conn::Closed,
            link: None,
            prod: Producer::default(),
            cons: Consumer::default(),
            rq: WrQueue::new(1, 1),
            sq: WrQueue::new(1, 1),
            tx_sent: 0,
            acks_owed: 0,
            rx_msg: None,
            accept: None,
            disconnect_waiters: PendingRequests::new(),
            cache: None,
            scratch: Vec::new(),
        }
    }
}

/// The `shm` provider's queue pair.
pub(crate) struct ShmQp {
    me: Weak<Self>,
    shared: Arc<Shared>,
    rcq: Arc<ShmCq>,
    icq: Arc<ShmCq>,
    context: u64,
    max_transfer: u64,
    inline_size: u64,
    /// Set once, at establishment: lets a poll check the ring without the lock.
    link: OnceLock<Arc<Link>>,
    inner: Mutex<Inner>,
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

fn total_len(sge: &[Sge]) -> u64 {
    sge.iter().map(|s| u64::from(s.buffer_length)).sum()
}

impl ShmQp {
    pub(crate) fn new(shared: Arc<Shared>, cfg: &QueuePairConfig) -> Result<Arc<Self>> {
        let rcq = ShmCq::downcast(&cfg.receive_cq).ok_or(Error::invalid_parameter(2))?;
        let icq = ShmCq::downcast(&cfg.initiator_cq).ok_or(Error::invalid_parameter(3))?;
        if cfg.srq.is_some() {
            return fail(Status::NOT_SUPPORTED);
        }
        let info = shared.info;
        let per = seg_capacity(
            cfg.max_receive_request_sge
                .max(cfg.max_initiator_request_sge),
        );
        let qp = Arc::new_cyclic(|me| Self {
            me: me.clone(),
            shared: shared.clone(),
            rcq: rcq.clone(),
            icq: icq.clone(),
            context: cfg.context,
            max_transfer: u64::from(info.max_transfer_length),
            inline_size: u64::from(cfg.inline_data_size).max(INLINE_LIMIT),
            link: OnceLock::new(),
            inner: Mutex::new(Inner {
                conn: Conn::Idle,
                link: None,
                prod: Producer::default(),
                cons: Consumer::default(),
                rq: WrQueue::new(
                    cfg.receive_queue_depth as usize,
                    seg_capacity(cfg.max_receive_request_sge),
                ),
                sq: WrQueue::new(
                    cfg.initiator_queue_depth as usize,
                    seg_capacity(cfg.max_initiator_request_sge),
                ),
                tx_sent: 0,
                acks_owed: 0,
                rx_msg: None,
                accept: None,
                disconnect_waiters: PendingRequests::new(),
                cache: None,
                scratch: vec![Seg::default(); per.max(64)],
            }),
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

    pub(crate) fn weak(&self) -> Weak<Self> {
        self.me.clone()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn complete_recv(&self, context: u64, status: Status, bytes: u32, solicited: bool) {
        self.rcq.push(
            NdResult {
                status,
                bytes_transferred: bytes,
                qp_context: self.context,
                request_context: context,
                request_type: RequestType::Receive,
            },
            PushKind { solicited },
        );
    }

    fn complete_send(&self, context: u64, flags: OpFlags, status: Status) {
        if status == Status::SUCCESS && flags.contains(OpFlags::SILENT_SUCCESS) {
            return;
        }
        self.icq.push(
            NdResult {
                status,
                bytes_transferred: 0,
                qp_context: self.context,
                request_context: context,
                request_type: RequestType::Send,
            },
            PushKind::default(),
        );
    }

    /// Resolve and check one local SGE; the registration is kept with the request.
    fn check_local(
        &self,
        cache: &mut Option<Arc<Registration>>,
        s: &Sge,
        access: Access,
    ) -> std::result::Result<Seg, AccessError> {
        let addr = s.buffer as usize as u64;
        let len = u64::from(s.buffer_length);
        let reg = match cache {
            Some(r) if r.token == s.memory_region_token && r.is_valid() => r.clone(),
            _ => {
                let r = self
                    .shared
                    .mrs
                    .lookup(s.memory_region_token)
                    .ok_or(AccessError::InvalidToken)?;
                *cache = Some(r.clone());
                r
            }
        };
        reg.check(addr, len, access)?;
        Ok(Seg {
            addr,
            len: s.buffer_length,
            reg: Some(reg),
        })
    }

    /// Whether every SGE lies in the cached registration with local read access (the common
    /// case of a small Send from the buffer used last), checked without touching reference
    /// counts.
    fn cached_readable(&self, g: &Inner, sge: &[Sge]) -> bool {
        let Some(r) = &g.cache else { return false };
        sge.iter().all(|s| {
            s.memory_region_token == r.token
                && r.check(
                    s.buffer as usize as u64,
                    u64::from(s.buffer_length),
                    Access::LocalRead,
                )
                .is_ok()
        })
    }

    /// Check every SGE into `g.scratch[..sge.len()]`.
    fn check_all(&self, g: &mut Inner, sge: &[Sge], access: Access) -> bool {
        let Inner { cache, scratch, .. } = g;
        if scratch.len() < sge.len() {
            scratch.resize(sge.len(), Seg::default());
        }
        for (dst, s) in scratch.iter_mut().zip(sge) {
            match self.check_local(cache, s, access) {
                Ok(seg) => *dst = seg,
                Err(_) => return false,
            }
        }
        true
    }

    /// `Receive`.
    ///
    /// # Safety
    /// See [`traits::QueuePair::receive`].
    unsafe fn post_receive(&self, context: u64, sge: &[Sge]) -> Result<()> {
        let mut g = self.lock();
        if sge.len() > g.rq.max_segs() {
            return fail(Status::DATA_OVERRUN);
        }
        if g.rq.is_full() {
            return fail(Status::NO_MORE_ENTRIES);
        }
        let total = total_len(sge);
        if g.conn == Conn::Closed {
            drop(g);
            self.complete_recv(context, Status::CANCELED, 0, false);
            return Ok(());
        }
        if !self.check_all(&mut g, sge, Access::LocalWrite) {
            // An error completion moves the queue pair to the error state (R-QP-6).
            self.complete_recv(context, Status::ACCESS_VIOLATION, 0, false);
            self.close(&mut g, Status::CONNECTION_REFUSED);
            return Ok(());
        }
        let Inner { rq, scratch, .. } = &mut *g;
        rq.push(RecvWr { context, total }, &mut scratch[..sge.len()]);
        // A message may be waiting for this buffer.
        if let Some(link) = &g.link {
            if link.rx_stalled.load(Ordering::Acquire) {
                link.rx_stalled.store(false, Ordering::Release);
                self.progress_rx(&mut g);
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
        if !inline && sge.len() > g.sq.max_segs() {
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
            self.complete_send(context, flags, Status::CANCELED);
            return Ok(());
        }
        let direct = g.sq.len() == 0 && g.conn == Conn::Established && total <= INLINE_MAX as u64;
        if inline {
            if direct {
                // SAFETY: INLINE memory is readable during this call (the poster's contract).
                let src = unsafe { InlineSges::new(sge) };
                if self.try_push_small(&mut g, &src, total as usize, flags) {
                    drop(g);
                    self.complete_send(context, flags, Status::SUCCESS);
                    return Ok(());
                }
            }
            // Queued behind others (or no room): capture the bytes now so the buffer may be
            // reused at once.
            let mut data = Vec::with_capacity(total as usize);
            // SAFETY: as above.
            unsafe { mem::capture(sge, &mut data) };
            let wr = SendWr {
                context,
                flags,
                total,
                inline: Some(data),
                rts: false,
            };
            g.sq.push(wr, &mut []);
        } else {
            if direct && self.cached_readable(&g, sge) {
                // SAFETY: every SGE lies in the cached live registration with local read
                // access (checked just above), and the poster promised not to write the memory
                // until the Send completes; it is copied into the ring within this call.
                let src = unsafe { InlineSges::new(sge) };
                if self.try_push_small(&mut g, &src, total as usize, flags) {
                    drop(g);
                    self.complete_send(context, flags, Status::SUCCESS);
                    return Ok(());
                }
            }
            if !self.check_all(&mut g, sge, Access::LocalRead) {
                drop(g);
                self.complete_send(context, flags, Status::ACCESS_VIOLATION);
                let mut g = self.lock();
                self.close(&mut g, Status::CONNECTION_REFUSED);
                return Ok(());
            }
            let wr = SendWr {
                context,
                flags,
                total,
                inline: None,
                rts: false,
            };
            let Inner { sq, scratch, .. } = &mut *g;
            sq.push(wr, &mut scratch[..sge.len()]);
        }
        self.progress_tx(&mut g);
        Ok(())
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
        link.wake_peer();
        true
    }

    /// Move queued Sends into the ring while there is room; complete those fully written.
    fn progress_tx(&self, g: &mut Inner) {
        if g.conn != Conn::Established {
            return;
        }
        let Some(link) = self.link.get() else { return };
        let tx = link.tx();
        let chunk = self.shared.config.chunk as u64;
        let pull_min = self.shared.config.pull_min;
        let mut pushed = false;
        let mut blocked = false;
        // ACKs for messages we pulled come first: the peer's Sends wait for them.
        while g.acks_owed > 0 {
            match g.prod.has_room(&tx, 0) {
                Ok(true) => {
                    g.prod.push_inline(&tx, kind::ACK, 0, &Owned(&[]), 0, 0);
                    g.acks_owed -= 1;
                    pushed = true;
                }
                Ok(false) => {
                    blocked = true;
                    break;
                }
                Err(Violation) => {
                    self.close(g, Status::CONNECTION_REFUSED);
                    return;
                }
            }
        }
        loop {
            if blocked {
                break;
            }
            let Inner {
                prod, sq, tx_sent, ..
            } = &mut *g;
            let Some((wr, segs)) = sq.front() else { break };
            if wr.rts {
                break; // waiting for the peer's ACK; later Sends complete after it
            }
            let total = wr.total;
            if pull_min > 0
                && total >= pull_min
                && *tx_sent == 0
                && wr.inline.is_none()
                && segs.len() <= RTS_MAX_SGES
                && link.peer_can_pull()
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
                    list[k * 16 + 8..k * 16 + 16].copy_from_slice(&u64::from(sg.len).to_le_bytes());
                }
                let n = segs.len() * 16;
                match prod.has_room(&tx, n as u64) {
                    Ok(true) => {}
                    Ok(false) => {
                        blocked = true;
                        break;
                    }
                    Err(Violation) => {
                        self.close(g, Status::CONNECTION_REFUSED);
                        return;
                    }
                }
                prod.push_data(&tx, kind::RTS, sol, total as u32, &Owned(&list[..n]), 0, n);
                if let Some(wr) = sq.front_mut() {
                    wr.rts = true;
                }
                pushed = true;
                break;
            }
            let sol = if wr.flags.contains(OpFlags::SEND_AND_SOLICIT_EVENT) {
                flag::SOLICITED
            } else {
                0
            };
            let src = match &wr.inline {
                Some(d) => Src::Owned(Owned(d)),
                None => Src::Segs(Segs(segs)),
            };
            let mut violation = false;
            let done = if total <= INLINE_MAX as u64 {
                match prod.has_room(&tx, 0) {
                    Ok(true) => {
                        prod.push_inline(&tx, kind::MSG, sol, &src, 0, total as usize);
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
            } else {
                loop {
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
                    if *tx_sent == 0 {
                        f |= flag::FIRST;
                    }
                    if *tx_sent + n == total {
                        f |= flag::LAST;
                    }
                    prod.push_chunk(&tx, f, total as u32, &src, *tx_sent, n as usize);
                    *tx_sent += n;
                    pushed = true;
                }
            };
            if violation {
                self.close(g, Status::CONNECTION_REFUSED);
                return;
            }
            if !done {
                break;
            }
            *tx_sent = 0;
            let wr = sq.pop().expect("present");
            self.complete_send(wr.context, wr.flags, Status::SUCCESS);
        }
        if pushed {
            link.wake_peer();
        }
        if blocked && g.conn == Conn::Established {
            let (t, dt) = g.prod.seen_tails();
            link.tx_seen[0].store(t, Ordering::Relaxed);
            link.tx_seen[1].store(dt, Ordering::Relaxed);
            link.tx_blocked.store(true, Ordering::Release);
        } else {
            link.tx_blocked.store(false, Ordering::Release);
        }
    }

    /// Consume published records into posted Receives.
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
                kind::ACK => {
                    // The peer pulled our oldest RTS message: it is complete.
                    match g.sq.front() {
                        Some((wr, _)) if wr.rts => {}
                        _ => return self.violation(g),
                    }
                    let wr = g.sq.pop().expect("present");
                    g.tx_sent = 0;
                    self.complete_send(wr.context, wr.flags, Status::SUCCESS);
                    g.cons.advance();
                    consumed = true;
                    continue;
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
                            link.rx_stalled.store(true, Ordering::Release);
                            break;
                        }
                        Pulled::Closed => return,
                    }
                }
                _ => {}
            }
            let first = r.kind == kind::MSG || r.flags & flag::FIRST != 0;
            if first {
                if g.rx_msg.is_some() {
                    return self.violation(g);
                }
                let Some((wr, _)) = g.rq.front() else {
                    // No Receive posted: leave the record in the ring until one is.
                    link.rx_stalled.store(true, Ordering::Release);
                    break;
                };
                let total = if r.kind == kind::MSG {
                    u64::from(r.len)
                } else {
                    u64::from(r.total)
                };
                if total > wr.total {
                    // The message does not fit the Receive: ND_DATA_OVERRUN, and the
                    // connection terminates (nd-reference.md D5, as tcp).
                    let ctx = wr.context;
                    g.rq.pop();
                    self.complete_recv(ctx, Status::DATA_OVERRUN, 0, false);
                    g.cons.advance();
                    g.cons.release(&rx);
                    self.close(g, Status::CONNECTION_REFUSED);
                    return;
                }
                g.rx_msg = Some(RxMsg {
                    pos: 0,
                    total,
                    solicited: r.flags & flag::SOLICITED != 0,
                });
            }
            let Some(mut m) = g.rx_msg else {
                return self.violation(g);
            };
            let len = u64::from(r.len);
            let last = m.pos + len == m.total;
            if len > m.total - m.pos
                || (r.kind == kind::CHUNK && (r.flags & flag::LAST != 0) != last)
            {
                return self.violation(g);
            }
            {
                let Inner { rq, cons, .. } = &mut *g;
                let (_, segs) = rq.front().expect("checked when the message began");
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
                let wr = g.rq.pop().expect("present");
                self.complete_recv(wr.context, Status::SUCCESS, m.total as u32, m.solicited);
            } else {
                g.rx_msg = Some(m);
            }
        }
        if consumed {
            g.cons.release(&rx);
            link.rx_pos.store(g.cons.pos(), Ordering::Relaxed);
            // Space was freed: a producer blocked on a full ring may be asleep.
            link.wake_peer();
        }
        if peer_closed {
            self.close(g, Status::CONNECTION_REFUSED);
        }
    }

    /// An RTS record: pull the message from the peer's memory into the front Receive.
    fn pull(&self, g: &mut Inner, link: &Link, r: crate::ring::Record) -> Pulled {
        let rx = link.rx();
        let Some((wr, _)) = g.rq.front() else {
            return Pulled::Stalled;
        };
        let total = u64::from(r.total);
        if total > wr.total {
            let ctx = wr.context;
            g.rq.pop();
            self.complete_recv(ctx, Status::DATA_OVERRUN, 0, false);
            g.cons.advance();
            g.cons.release(&rx);
            self.close(g, Status::CONNECTION_REFUSED);
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
        g.acks_owed += 1;
        self.complete_recv(
            wr.context,
            Status::SUCCESS,
            total as u32,
            r.flags & flag::SOLICITED != 0,
        );
        Pulled::Done
    }

    /// Garbage in the ring: terminate the connection.
    fn violation(&self, g: &mut Inner) {
        self.close(g, Status::CONNECTION_REFUSED);
    }

    /// Drive this queue pair with the lock held.
    fn progress_locked(&self, g: &mut Inner) {
        self.progress_rx(g);
        if g.sq.len() > 0 || g.acks_owed > 0 {
            self.progress_tx(g);
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
        g.tx_sent = 0;
        g.acks_owed = 0;
        while let Some(wr) = g.sq.pop() {
            self.complete_send(wr.context, wr.flags, Status::CANCELED);
        }
        while let Some(wr) = g.rq.pop() {
            self.complete_recv(wr.context, Status::CANCELED, 0, false);
        }
        g.rx_msg = None;
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

    /// Active side, at `CompleteConnect`: the first record is the RTR.
    pub(crate) fn establish_active(&self, link: Arc<Link>) -> Result<()> {
        if self.conn() != Conn::Idle {
            return fail(Status::CONNECTION_ACTIVE);
        }
        self.register_link(&link);
        let mut g = self.lock();
        self.attach(&mut g, link.clone())?;
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
    pub(crate) fn establish_passive(&self, link: Arc<Link>, accept: OvCompleter) -> Result<()> {
        if self.conn() != Conn::Idle {
            return fail(Status::CONNECTION_ACTIVE);
        }
        self.register_link(&link);
        let mut g = self.lock();
        self.attach(&mut g, link)?;
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
            self.close(&mut g, Status::CANCELED);
        }
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
        _context: u64,
        _region: &Arc<dyn MemoryRegion>,
        _window: &Arc<dyn MemoryWindow>,
        _buffer: *const u8,
        _len: usize,
        _flags: OpFlags,
    ) -> Result<()> {
        fail(Status::NOT_SUPPORTED)
    }

    fn invalidate(
        &self,
        _context: u64,
        _window: &Arc<dyn MemoryWindow>,
        _flags: OpFlags,
    ) -> Result<()> {
        fail(Status::NOT_SUPPORTED)
    }

    unsafe fn read(&self, _c: u64, _s: &[Sge], _a: u64, _t: u32, _f: OpFlags) -> Result<()> {
        fail(Status::NOT_SUPPORTED)
    }

    unsafe fn write(&self, _c: u64, _s: &[Sge], _a: u64, _t: u32, _f: OpFlags) -> Result<()> {
        fail(Status::NOT_SUPPORTED)
    }
}

impl Drop for ShmQp {
    fn drop(&mut self) {
        // Releasing a queue pair implies Disconnect and Flush.
        let g = self.inner.get_mut().unwrap_or_else(|e| e.into_inner());
        let mut g = std::mem::replace(g, Inner::empty());
        self.close(&mut g, Status::CONNECTION_REFUSED);
    }
}

#[cfg(test)]
mod hostile {
    //! A live connection whose peer writes garbage into its ring: the victim terminates the
    //! connection (or delivers bounded bytes), never reads outside the segment, never hangs.

    use super::*;
    use crate::ring::RingMem;
    use netdirect_spi::traits::{Adapter, CompletionQueue, Connector, Provider};
    use netdirect_spi::{MrFlags, ReadLimits};
    use std::time::{Duration, Instant};

    struct Side {
        _adapter: Arc<dyn Adapter>,
        cq: Arc<dyn CompletionQueue>,
        qp: Arc<dyn traits::QueuePair>,
        conn: Arc<dyn Connector>,
        _mr: Arc<dyn MemoryRegion>,
        buf: Box<[u8]>,
        token: u32,
    }

    fn side() -> Side {
        let p = crate::ShmProvider::new();
        let a = p.open_adapter(crate::ADAPTER_ID).unwrap();
        let cq = a.create_completion_queue(64, 0, 0).unwrap();
        let qp = a
            .create_queue_pair(QueuePairConfig {
                receive_cq: cq.clone(),
                initiator_cq: cq.clone(),
                srq: None,
                context: 0,
                receive_queue_depth: 8,
                initiator_queue_depth: 8,
                max_receive_request_sge: 1,
                max_initiator_request_sge: 1,
                inline_data_size: 0,
            })
            .unwrap();
        let mut buf = vec![0u8; 4096].into_boxed_slice();
        let mr = a.create_memory_region().unwrap();
        // SAFETY: the buffer lives in the `Side`, which outlives the registration's use.
        unsafe {
            mr.register(
                buf.as_mut_ptr(),
                buf.len(),
                MrFlags::ALLOW_LOCAL_WRITE,
                None,
            )
        }
        .unwrap()
        .wait()
        .unwrap();
        let token = mr.get_local_token();
        let conn = a.create_connector().unwrap();
        Side {
            _adapter: a,
            cq,
            qp,
            conn,
            _mr: mr,
            buf,
            token,
        }
    }

    fn connect() -> (Side, Side) {
        let (mut victim, attacker) = (side(), side());
        let l = victim._adapter.create_listener().unwrap();
        l.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        l.listen(0).unwrap();
        let addr = l.get_local_address().unwrap();
        let sge = Sge::new(victim.buf.as_mut_ptr(), 64, victim.token);
        // SAFETY: the buffer is only read after the Receive completes (or not at all).
        unsafe { victim.qp.receive(1, &[sge]).unwrap() };
        std::thread::scope(|t| {
            t.spawn(|| {
                let ov = l.get_connection_request(&victim.conn).unwrap();
                ov.wait_timeout(Some(Duration::from_secs(10)))
                    .unwrap()
                    .unwrap();
                let ov = victim
                    .conn
                    .accept(&victim.qp, ReadLimits::default(), &[])
                    .unwrap();
                ov.wait_timeout(Some(Duration::from_secs(10)))
                    .unwrap()
                    .unwrap();
            });
            let ov = attacker
                .conn
                .connect(&attacker.qp, addr, ReadLimits::default(), &[])
                .unwrap();
            ov.wait_timeout(Some(Duration::from_secs(10)))
                .unwrap()
                .unwrap();
            attacker.conn.complete_connect().unwrap().wait().unwrap();
        });
        (victim, attacker)
    }

    fn next(cq: &Arc<dyn CompletionQueue>) -> NdResult {
        let end = Instant::now() + Duration::from_secs(10);
        let mut r = [NdResult::EMPTY];
        while cq.get_results(&mut r) == 0 {
            assert!(Instant::now() < end, "no completion: the victim hangs");
        }
        r[0]
    }

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
            let a = ShmQp::downcast(&attacker.qp).unwrap();
            let link = a.link.get().unwrap().clone();
            let tx = link.tx();
            // The attacker's ring to the victim: position 0 held its RTR; forge position 1 on.
            for pos in 1..4u32 {
                let i = pos & (tx.cells() - 1);
                let [w, l, t] = tx.meta(i);
                let kind = match round % 4 {
                    0 => rng(&mut seed) & 0xFF,
                    1 => 1,
                    2 => 2,
                    _ => rng(&mut seed) & 3,
                };
                w.store(kind | (rng(&mut seed) & 0x700), Ordering::Relaxed);
                l.store(
                    if round % 2 == 0 {
                        rng(&mut seed)
                    } else {
                        rng(&mut seed) % 200
                    },
                    Ordering::Relaxed,
                );
                t.store(rng(&mut seed) % 300, Ordering::Relaxed);
                tx.seq(i).store(pos + 1, Ordering::Release);
            }
            link.wake_peer();
            let r = next(&victim.cq);
            match r.status {
                Status::SUCCESS => assert!(r.bytes_transferred <= 64, "{r:?}"),
                Status::DATA_OVERRUN | Status::CANCELED => {}
                s => panic!("unexpected status {s}"),
            }
            drop(attacker);
        }
    }
}
