//! `IND2QueuePair` over one TCP connection: the RDMAP/DDP/MPA data path of the `tcp` provider.
//!
//! One mutex guards a queue pair's state. The I/O is driven by whoever gets there: the poster
//! (a Send is written to the socket inside `send` when nothing is queued ahead of it), a
//! caller polling a completion queue (`get_results` reads the socket), or a blocking waiter
//! dispatched by the engine. Nothing on this path allocates: work requests live in
//! preallocated queues, frames are encoded into a reused staging buffer, and large payloads go
//! to the socket straight from registered memory.

mod queue;
mod rx;
mod tx;

use std::any::Any;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use netdirect_spi::kit::cq::{CqCore, ProgressSource, PushKind};
use netdirect_spi::kit::mr::{Access, AccessError, Registration};
use netdirect_spi::kit::overlapped::{OvCompleter, Overlapped, PendingRequests};
use netdirect_spi::traits::{self, MemoryRegion, MemoryWindow, QueuePairConfig};
use netdirect_spi::{fail, Error, NdResult, OpFlags, RequestType, Result, Sge, Status};
use netdirect_wire::handshake::{Negotiated, Rtr};
use rustix::event::epoll::EventFlags;
use socket2::Socket;

use crate::adapter::Shared;
use crate::cq::TcpCq;
use crate::engine::{Source, Stream};
use queue::{Seg, WrQueue};
use rx::Rx;
use tx::Tx;

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

/// A posted Receive.
#[derive(Debug)]
pub(crate) struct RecvWr {
    pub(crate) context: u64,
    pub(crate) total: u64,
}

/// What an initiator request puts on the wire.
#[derive(Debug, Clone, Copy)]
pub(crate) enum TxKind {
    Send,
}

/// A posted initiator request.
#[derive(Debug)]
pub(crate) struct SendWr {
    pub(crate) context: u64,
    pub(crate) kind: TxKind,
    pub(crate) flags: OpFlags,
    pub(crate) total: u64,
    pub(crate) request_type: RequestType,
}

pub(crate) struct Inner {
    pub(crate) conn: Conn,
    pub(crate) sock: Option<Stream>,
    pub(crate) crc: bool,
    pub(crate) rq: WrQueue<RecvWr>,
    pub(crate) sq: WrQueue<SendWr>,
    /// How many `sq` requests (from the front) have been encoded into `tx`.
    pub(crate) encoded: usize,
    pub(crate) tx: Tx,
    pub(crate) rx: Rx,
    /// The pending Accept, completed by the initiator's first FPDU.
    pub(crate) accept: Option<OvCompleter>,
    pub(crate) disconnect_waiters: PendingRequests<()>,
    /// Whether the connection ever came up (NotifyDisconnect needs it).
    pub(crate) was_connected: bool,
    /// Last registration a local SGE resolved to: most posts reuse the same buffer.
    cache: Option<Arc<Registration>>,
}

/// The `tcp` provider's queue pair.
pub(crate) struct TcpQp {
    me: Weak<Self>,
    pub(crate) shared: Arc<Shared>,
    rcq: Arc<TcpCq>,
    icq: Arc<TcpCq>,
    context: u64,
    max_transfer: u64,
    inline_size: u32,
    inner: Mutex<Inner>,
}

impl fmt::Debug for TcpQp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpQp")
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

impl TcpQp {
    pub(crate) fn new(shared: Arc<Shared>, cfg: &QueuePairConfig) -> Result<Arc<Self>> {
        let rcq = TcpCq::downcast(&cfg.receive_cq).ok_or(Error::invalid_parameter(2))?;
        let icq = TcpCq::downcast(&cfg.initiator_cq).ok_or(Error::invalid_parameter(3))?;
        if cfg.srq.is_some() {
            return fail(Status::NOT_SUPPORTED);
        }
        let info = shared.info;
        let qp = Arc::new_cyclic(|me| Self {
            me: me.clone(),
            shared: shared.clone(),
            rcq: rcq.clone(),
            icq: icq.clone(),
            context: cfg.context,
            max_transfer: u64::from(info.max_transfer_length),
            inline_size: cfg.inline_data_size,
            inner: Mutex::new(Inner {
                conn: Conn::Idle,
                sock: None,
                crc: false,
                rq: WrQueue::new(
                    cfg.receive_queue_depth as usize,
                    seg_capacity(cfg.max_receive_request_sge),
                ),
                sq: WrQueue::new(
                    cfg.initiator_queue_depth as usize,
                    seg_capacity(cfg.max_initiator_request_sge),
                ),
                encoded: 0,
                tx: Tx::new(),
                rx: Rx::new(),
                accept: None,
                disconnect_waiters: PendingRequests::new(),
                was_connected: false,
                cache: None,
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

    /// Complete an initiator request (suppressed for `SILENT_SUCCESS` successes).
    fn complete_send(&self, wr: &SendWr, status: Status) {
        if status == Status::SUCCESS && wr.flags.contains(OpFlags::SILENT_SUCCESS) {
            return;
        }
        self.icq().push(
            NdResult {
                status,
                bytes_transferred: 0,
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
        g: &mut Inner,
        s: &Sge,
        access: Access,
    ) -> std::result::Result<Seg, AccessError> {
        let addr = s.buffer as usize as u64;
        let len = u64::from(s.buffer_length);
        let reg = match &g.cache {
            Some(r) if r.token == s.memory_region_token && r.is_valid() => r.clone(),
            _ => {
                let r = self
                    .shared
                    .mrs
                    .lookup(s.memory_region_token)
                    .ok_or(AccessError::InvalidToken)?;
                g.cache = Some(r.clone());
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
        let total = queue::total_len(sge);
        if g.conn == Conn::Closed {
            drop(g);
            self.complete_recv(context, Status::CANCELED, 0, false);
            return Ok(());
        }
        let mut segs = [const {
            Seg {
                addr: 0,
                len: 0,
                reg: None,
            }
        }; 64];
        let n = sge.len().min(segs.len());
        for (i, s) in sge.iter().enumerate().take(n) {
            match self.check_local(&mut g, s, Access::LocalWrite) {
                Ok(seg) => segs[i] = seg,
                Err(_) => {
                    // An error completion moves the queue pair to the error state (R-QP-6).
                    self.complete_recv(context, Status::ACCESS_VIOLATION, 0, false);
                    self.terminate(&mut g, None);
                    return Ok(());
                }
            }
        }
        g.rq.push(RecvWr { context, total }, segs.into_iter().take(n));
        // A Send may be waiting for this buffer.
        if g.rx.is_stalled() {
            self.progress_locked(&mut g);
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
        let total = queue::total_len(sge);
        if total > self.max_transfer
            || (inline && total > u64::from(self.inline_size.max(tx::INLINE_COPY as u32)))
        {
            return fail(Status::BUFFER_OVERFLOW);
        }
        let wr = SendWr {
            context,
            kind: TxKind::Send,
            flags,
            total,
            request_type: RequestType::Send,
        };
        if g.conn == Conn::Closed {
            drop(g);
            self.complete_send(&wr, Status::CANCELED);
            return Ok(());
        }
        if inline {
            // Inline data is captured now: the application may reuse its buffer at once.
            let idx = g.sq.len();
            g.sq.push(wr, std::iter::empty());
            if idx == g.encoded && g.conn == Conn::Established {
                let crc = g.crc;
                // SAFETY: INLINE memory is only read during this call (the poster's contract).
                g.tx.encode_send_inline(sge, flags, crc);
                g.encoded += 1;
            } else {
                // Queued behind others: stage the bytes now so the buffer may be reused.
                g.tx.stash_inline(idx, sge);
            }
        } else {
            let mut segs = [const {
                Seg {
                    addr: 0,
                    len: 0,
                    reg: None,
                }
            }; 64];
            for (i, s) in sge.iter().enumerate() {
                match self.check_local(&mut g, s, Access::LocalRead) {
                    Ok(seg) => segs[i] = seg,
                    Err(_) => {
                        drop(g);
                        self.complete_send(&wr, Status::ACCESS_VIOLATION);
                        let mut g = self.lock();
                        self.terminate(&mut g, None);
                        return Ok(());
                    }
                }
            }
            g.sq.push(wr, segs.into_iter().take(sge.len()));
        }
        self.encode_pending(&mut g);
        self.flush_tx(&mut g);
        Ok(())
    }

    /// Encode every queued request that may go on the wire now.
    fn encode_pending(&self, g: &mut Inner) {
        if g.conn != Conn::Established {
            return;
        }
        while g.encoded < g.sq.len() {
            let i = g.encoded;
            let crc = g.crc;
            let Inner { sq, tx, .. } = g;
            let (wr, segs) = sq.get(i).expect("index below len");
            match wr.kind {
                TxKind::Send if wr.flags.contains(OpFlags::INLINE) => {
                    tx.encode_stashed_inline(i, wr.flags, crc)
                }
                TxKind::Send => tx.encode_send(segs, wr.total, wr.flags, crc),
            }
            g.encoded += 1;
        }
    }

    /// Write as much queued output as the socket takes; complete requests fully handed to TCP
    /// (RFC 5040 §5.5 rule 9: a Send is locally complete once the LLP accepted it).
    fn flush_tx(&self, g: &mut Inner) {
        let Some(sock) = g.sock.as_ref().map(|s| s.get()) else {
            return;
        };
        let result = g.tx.write_to(sock);
        if let Some(s) = &g.sock {
            s.set_wants_write(g.tx.has_output());
        }
        match result {
            Ok(done) => {
                for _ in 0..done {
                    if let Some(wr) = g.sq.pop() {
                        g.encoded -= 1;
                        self.complete_send(&wr, Status::SUCCESS);
                    }
                }
            }
            Err(_) => self.lost_connection(g),
        }
    }

    /// Drive this queue pair's I/O with the lock held.
    pub(crate) fn progress_locked(&self, g: &mut Inner) {
        if g.sock.is_none() {
            return;
        }

        if g.tx.has_output() {
            self.flush_tx(g);
        }
        self.progress_rx(g);
        if g.tx.has_output() {
            self.flush_tx(g);
        }
    }

    /// Flush every outstanding request with `ND_CANCELED`, Receives and initiator requests.
    fn flush_all(&self, g: &mut Inner) {
        g.tx.clear();
        g.encoded = 0;
        while let Some(wr) = g.sq.pop() {
            self.complete_send(&wr, Status::CANCELED);
        }
        while let Some(wr) = g.rq.pop() {
            self.complete_recv(wr.context, Status::CANCELED, 0, false);
        }
        g.rx.reset_message();
    }

    /// The connection is gone (peer closed, reset, or a local I/O error).
    pub(crate) fn lost_connection(&self, g: &mut Inner) {
        self.close(g, Status::CONNECTION_REFUSED);
    }

    /// Tear down: optionally send one Terminate first, then flush and close.
    pub(crate) fn terminate(&self, g: &mut Inner, term: Option<netdirect_wire::rdmap::Terminate>) {
        if let (Some(t), Some(sock)) = (term, g.sock.as_ref()) {
            // One Terminate per stream, never spliced into a half-written frame (siw rule).
            if g.conn != Conn::Closed && !g.tx.mid_frame() {
                g.tx.encode_terminate(&t, g.crc);
                let _ = g.tx.write_to(sock.get());
            }
        }
        self.close(g, Status::CONNECTION_REFUSED);
    }

    /// Close the connection: flush, half-close so the peer sees a FIN, finish waiters.
    /// `accept_status` is what a pending Accept gets (D9: the active side went away).
    fn close(&self, g: &mut Inner, accept_status: Status) {
        if g.conn == Conn::Closed && g.sock.is_none() {
            return;
        }
        if let Some(s) = &g.sock {
            let _ = s.get().shutdown(std::net::Shutdown::Write);
        }
        g.conn = Conn::Closed;
        self.flush_all(g);
        if let Some(a) = g.accept.take() {
            a.complete(accept_status);
        }
        g.disconnect_waiters.complete_all((), Status::SUCCESS);
        // Keep the socket (and its registration) until the queue pair goes away, so that
        // closing never turns into an RST that destroys a Terminate still in flight.
    }

    /// Attach an established connection (active side, at `CompleteConnect`).
    pub(crate) fn establish_active(
        &self,
        sock: Socket,
        neg: &Negotiated,
        leftover: &[u8],
    ) -> Result<()> {
        let mut g = self.lock();
        self.attach_socket(&mut g, sock, neg, leftover)?;
        g.conn = Conn::Established;
        match neg.rtr {
            Some(Rtr::Write) => {
                let crc = g.crc;
                g.tx.encode_rtr_write(crc);
            }
            Some(Rtr::Read) => {
                g.rx.expect_rtr_read_response();
                let crc = g.crc;
                g.tx.encode_rtr_read(crc);
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
        self.attach_socket(&mut g, sock, neg, &[])?;
        g.conn = Conn::AwaitRtr;
        g.accept = Some(accept);
        self.progress_rx(&mut g);
        Ok(())
    }

    fn attach_socket(
        &self,
        g: &mut Inner,
        sock: Socket,
        neg: &Negotiated,
        leftover: &[u8],
    ) -> Result<()> {
        if g.conn != Conn::Idle {
            return fail(Status::CONNECTION_ACTIVE);
        }
        let src: Weak<dyn Source> = self.me.clone();
        g.sock = Some(self.shared.engine.add_stream(sock, src));
        g.crc = neg.crc;
        g.was_connected = true;
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

    /// Whether the queue pair is attached to a connection (or was).
    pub(crate) fn conn(&self) -> Conn {
        self.lock().conn
    }

    /// `IND2Connector::Disconnect`: flush, send FIN; completes at once.
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

    /// Cancel a pending NotifyDisconnect (connector's `CancelOverlappedRequests`).
    pub(crate) fn cancel_notify_disconnect(&self) {
        self.lock().disconnect_waiters.cancel_all();
    }

    /// Cancel a pending Accept (connector's `CancelOverlappedRequests`): abandons the connection.
    pub(crate) fn cancel_accept(&self) {
        let mut g = self.lock();
        if let Some(a) = g.accept.take() {
            a.complete(Status::CANCELED);
            self.close(&mut g, Status::CANCELED);
        }
    }
}

impl ProgressSource for TcpQp {
    fn progress(&self) {
        let mut g = self.lock();
        self.progress_locked(&mut g);
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
}

impl traits::QueuePair for TcpQp {
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
        if sge.len() > 64 {
            return fail(Status::DATA_OVERRUN);
        }
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

impl Drop for TcpQp {
    fn drop(&mut self) {
        // Releasing a queue pair implies Disconnect and Flush (IND2Connector::Disconnect remarks).
        let g = self.inner.get_mut().unwrap_or_else(|e| e.into_inner());
        let mut g = std::mem::replace(
            g,
            Inner {
                conn: Conn::Closed,
                sock: None,
                crc: false,
                rq: WrQueue::new(1, 1),
                sq: WrQueue::new(1, 1),
                encoded: 0,
                tx: Tx::new(),
                rx: Rx::new(),
                accept: None,
                disconnect_waiters: PendingRequests::new(),
                was_connected: false,
                cache: None,
            },
        );
        self.close(&mut g, Status::CONNECTION_REFUSED);
    }
}
