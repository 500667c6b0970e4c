//! The receive side: FPDUs parsed from the byte stream, checked, and placed straight into
//! posted Receives or registered memory (RFC 5041 §5–§7, RFC 5040 §5).
//!
//! Small messages arrive in bulk through one `recv` into the stream buffer and are copied to
//! their destination; the bulk of a large segment — a Send's, an RDMA Write's, a Read
//! Response's — is read by `recv` directly into the destination, so it crosses memory once,
//! as with raw TCP.
//!
//! Every tagged segment and Read Request is checked against the registration table
//! ([`crate::protect`]) when its header arrives, before any of its payload is read: a
//! violation ends the stream with one Terminate, and its bytes are never placed. DDP carries
//! no message length, so each segment of a long Write is checked (and placed) on its own: a
//! Write whose later segment leaves the window has its earlier, in-bounds segments placed, as
//! on any RNIC (RFC 5041 §5.2); every byte placed was checked.

use std::sync::Arc;

use netdirect_spi::kit::mr::{Kind, Registration};
use netdirect_spi::Status;
use netdirect_wire::ddp::{DdpHeader, TaggedHeader, UntaggedHeader, QN_READ_REQUEST, QN_SEND};
use netdirect_wire::fpdu::{Deframer, Event, SegmentHeader};
use netdirect_wire::rdmap::{Opcode, TermError, Terminate};
use netdirect_wire::sequence::RxSequencer;
use std::io::IoSliceMut;

use rustix::io::Errno;
use rustix::net::{RecvAncillaryBuffer, RecvFlags};

use super::{Conn, Ending, InRead, Inner, ReadKind, TcpQp, TxKind};
use crate::mem;
use crate::protect;

/// Stream buffer size: enough for many small FPDUs per `recv`.
const RX_BUF: usize = 64 * 1024;
/// A segment remainder at least this large is read straight into its destination.
const DIRECT_MIN: usize = 4096;
/// What a read after a large payload takes into the stream buffer: the pad and CRC (at most
/// 7 bytes) and the next segment's headers (at most 2 + 18 + 28), rounded up.
const TAIL: usize = 64;

/// Where the payload of the current segment goes.
#[derive(Debug, Clone, Copy)]
enum Dest {
    /// No segment in progress.
    None,
    /// Nowhere (zero-length segments, Read Requests).
    Discard,
    /// Into the Receive at the front of the queue, at this message offset.
    Recv {
        pos: u64,
        solicited: bool,
        last: bool,
    },
    /// Into registered memory: the checked range `addr..end` still to fill (an RDMA Write
    /// segment, or a Read Response segment into our Read's sink).
    Tagged { addr: u64, end: u64 },
}

/// Inbound state of one stream.
#[derive(Debug)]
pub(crate) struct Rx {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    deframer: Option<Deframer>,
    seq: RxSequencer,
    dest: Dest,
    /// The registration `Dest::Tagged` places into, held while its segment is placed so the
    /// memory stays registered (and, for an owned buffer, allocated) meanwhile.
    dest_reg: Option<Arc<Registration>>,
    /// The current segment is the last of the Read Response the oldest outstanding Read
    /// waits for: that Read is answered once the segment's CRC checked out.
    response_ends: bool,
    /// A Send header waiting for a Receive to be posted.
    pub(crate) stalled: Option<SegmentHeader>,
    /// When the current stall began (the `ND_TCP_RNR_TIMEOUT_MS` clock).
    pub(crate) stall_since: Option<std::time::Instant>,
    /// An engine timer for the stall clock is set (at most one per queue pair).
    pub(crate) timer_armed: bool,
    /// The last `recv` returned less than asked: the socket was empty then.
    drained: bool,
    /// An event reported the peer's FIN (or an error): it sits behind the data, and only a
    /// `recv` that returns 0 reveals it, so `drained` must not skip that read. With the socket
    /// in the edge-triggered epoll set, data and FIN arriving together raise one event; a
    /// skipped read would lose the EOF for good, and with it the flush of the Receives that
    /// a peer's disconnect owes us (docs/ND-RULES.md R-QP-8, D4).
    hangup: bool,
    /// A Receive completed during the current progress pass.
    pub(crate) delivered: bool,
    /// The last segment header announced a large payload: the next header is probably
    /// followed by another one.
    bulk: bool,
    /// The peer's FIN (or a reset) was read after the end.
    eof: bool,
    /// The engine's leader sleeps in `recv` on the socket (`Source::lend_reader`): nobody
    /// else reads it meanwhile, or bytes could be processed out of order.
    lent: bool,
}

impl Rx {
    pub(crate) fn new() -> Self {
        Self {
            buf: Vec::new().into_boxed_slice(),
            start: 0,
            end: 0,
            deframer: None,
            seq: RxSequencer::new(),
            dest: Dest::None,
            dest_reg: None,
            response_ends: false,
            stalled: None,
            stall_since: None,
            timer_armed: false,
            drained: false,
            hangup: false,
            delivered: false,
            bulk: false,
            eof: false,
            lent: false,
        }
    }

    /// The peer closed its side or the socket failed: read until `recv` says so.
    pub(crate) fn hung_up(&mut self) {
        self.hangup = true;
    }

    /// Begin full operation with the negotiated CRC; `leftover` are bytes that followed the MPA
    /// frame in the same read.
    pub(crate) fn start(&mut self, crc: bool, leftover: &[u8]) {
        self.buf = vec![0u8; RX_BUF.max(leftover.len())].into_boxed_slice();
        self.buf[..leftover.len()].copy_from_slice(leftover);
        self.start = 0;
        self.end = leftover.len();
        self.deframer = Some(Deframer::new(crc, 65535));
    }

    /// Lend the socket's reading, and the receive buffer to read into, to the engine's
    /// leader, if nothing buffered waits for more bytes than a small read brings (a large
    /// payload is read straight into its destination by `fill`) and nothing else needs the
    /// stream. The buffer comes back through [`Rx::take_back`]; meanwhile it is empty here.
    pub(crate) fn lend(&mut self) -> Option<Box<[u8]>> {
        let idle = self.deframer.as_ref()?.payload_remaining() < DIRECT_MIN;
        if !idle || self.start != self.end || self.stalled.is_some() || self.hangup || self.lent {
            return None;
        }
        self.lent = true;
        // Nothing is buffered: the empty range stays valid in the empty buffer left here.
        self.start = 0;
        self.end = 0;
        Some(std::mem::take(&mut self.buf))
    }

    /// The leader's read into `buf` (see [`Rx::lend`]) is back, as if `fill` had made it:
    /// `Ok(n)` bytes at its start (`Ok(0)`: the peer's end of stream), or `Err(AGAIN)` if the
    /// leader was woken with nothing read. `asked`: how much of `buf` it offered the read.
    pub(crate) fn take_back(&mut self, buf: Box<[u8]>, got: Result<usize, Errno>, asked: usize) {
        self.lent = false;
        self.buf = buf;
        match got {
            Ok(0) => {
                // The end of the stream: the next read sees it again and ends the connection.
                self.hangup = true;
                self.drained = false;
            }
            Ok(n) => {
                // `lend` left the range empty at 0, and `fill` reads nothing while lent.
                debug_assert_eq!((self.start, self.end), (0, 0));
                self.end = n;
                self.drained = n < asked;
            }
            Err(Errno::AGAIN) => self.drained = false,
            Err(_) => {
                // The error was consumed by the leader's read; the next one reports the end.
                self.hangup = true;
                self.drained = false;
            }
        }
    }

    pub(crate) fn is_stalled(&self) -> bool {
        self.stalled.is_some()
    }

    /// The peer's FIN (or a reset) was read after the end: nothing more will arrive.
    pub(crate) fn at_end(&self) -> bool {
        self.eof
    }

    /// Forget a partly received message (its request was flushed).
    pub(crate) fn reset_message(&mut self) {
        self.dest = Dest::None;
        self.dest_reg = None;
        self.response_ends = false;
        self.stalled = None;
        self.stall_since = None;
    }
}

/// What the stream-reading loop must do after handling one event.
enum Next {
    Continue,
    /// Stop reading for now (stalled, or the connection ended).
    Stop,
}

impl TcpQp {
    /// Read and process everything the socket has.
    pub(super) fn progress_rx(&self, g: &mut Inner) {
        if g.rx.deframer.is_none() {
            return;
        }
        if g.conn == Conn::Closed {
            self.discard_input(g);
            return;
        }
        if let Some(h) = g.rx.stalled.take() {
            // The header was checked (sequence, RTR) when it arrived; only the Receive was
            // missing.
            let DdpHeader::Untagged(u) = h.ddp else {
                unreachable!("only Send headers stall")
            };
            if let Next::Stop = self.on_send(g, &h, &u) {
                return;
            }
            g.rx.stall_since = None;
            // Whatever arrived while the Send was held raised its edge then, and the edge
            // was spent on the stall: the socket must be read again, whatever the last
            // `recv` said.
            g.rx.drained = false;
            if let Some(s) = &g.sock {
                s.set_wants_read(true);
            }
        }
        loop {
            if g.rx.start == g.rx.end {
                if std::mem::take(&mut g.rx.drained) && !g.rx.hangup {
                    return;
                }
                match self.fill(g) {
                    Ok(true) => {}
                    Ok(false) => return,
                    Err(()) => {
                        self.lost_connection(g);
                        return;
                    }
                }
                continue;
            }
            let Inner { rx, .. } = &mut *g;
            let input = &rx.buf[rx.start..rx.end];
            let df = rx.deframer.as_mut().expect("checked above");
            match df.next(input) {
                Err(e) => {
                    let term = e.terminate();
                    self.terminate(g, term);
                    return;
                }
                Ok((None, used)) => rx.start += used,
                Ok((Some(Event::Payload(p)), used)) => {
                    let (off, len) = (p.as_ptr() as usize - rx.buf.as_ptr() as usize, p.len());
                    rx.start += used;
                    self.place(g, off, len);
                }
                Ok((Some(Event::Header(h)), used)) => {
                    rx.start += used;
                    if let Next::Stop = self.on_header(g, h) {
                        return;
                    }
                }
                Ok((Some(Event::End), used)) => {
                    rx.start += used;
                    if let Next::Stop = self.on_end(g) {
                        return;
                    }
                }
            }
        }
    }

    /// Read more from the socket: directly into the destination when a large payload
    /// remainder is expected, else into the stream buffer. `Ok(false)`: would block.
    ///
    /// A large remainder is read with one `recvmsg` into two pieces: the destination, then
    /// the first [`TAIL`] bytes of the stream buffer, which catch the segment's pad and CRC
    /// and the next segment's header. A stream of large segments (a long Write or Read
    /// Response) thus costs one system call per segment, and its payload crosses memory once.
    fn fill(&self, g: &mut Inner) -> Result<bool, ()> {
        let Some(sock) = g.sock.as_ref() else {
            return Ok(false);
        };
        if g.rx.lent {
            // The leader is reading; it hands what it reads to `take_back`.
            return Ok(false);
        }
        let remaining = g.rx.deframer.as_ref().map_or(0, |d| d.payload_remaining());
        if remaining >= DIRECT_MIN {
            if let Some((addr, n)) = self.direct_target(g, remaining) {
                // SAFETY: `direct_target` returns a range inside the current destination, which
                // was checked against a live registration for write access when the segment
                // header arrived; the request or `dest_reg` holding it is still there.
                let dst = unsafe { mem::slice_mut(addr, n) };
                // Only when the destination takes the whole remainder can what follows it be
                // read in the same call.
                let tail_len = if n == remaining { TAIL } else { 0 };
                let (got, placed) = {
                    let (tail, _) = g.rx.buf.split_at_mut(tail_len);
                    let mut iov = [IoSliceMut::new(&mut *dst), IoSliceMut::new(tail)];
                    let k = if tail_len > 0 { 2 } else { 1 };
                    match rustix::net::recvmsg(
                        sock.get(),
                        &mut iov[..k],
                        &mut RecvAncillaryBuffer::default(),
                        RecvFlags::DONTWAIT,
                    ) {
                        Ok(r) if r.bytes == 0 => return Err(()),
                        Ok(r) => (r.bytes, r.bytes.min(n)),
                        Err(Errno::AGAIN) => return Ok(false),
                        Err(Errno::INTR) => return Ok(true),
                        Err(_) => return Err(()),
                    }
                };
                let df = g.rx.deframer.as_mut().expect("present");
                df.payload_direct(&dst[..placed]);
                self.advance_dest(g, placed);
                g.rx.start = 0;
                g.rx.end = got - placed;
                g.rx.drained = got < n + tail_len;
                return Ok(true);
            }
        }
        let want = buffered_read_len(g.rx.bulk, remaining, g.rx.buf.len());
        match rustix::net::recv(sock.get(), &mut g.rx.buf[..want], RecvFlags::DONTWAIT) {
            Ok((0, _)) => Err(()),
            Ok((n, _)) => {
                g.rx.start = 0;
                g.rx.end = n;
                // A short read emptied the socket. Anything that arrives later raises a new
                // edge-triggered event, so skip the `recv` that would only say EAGAIN.
                g.rx.drained = n < want;
                Ok(true)
            }
            Err(Errno::AGAIN) => Ok(false),
            Err(Errno::INTR) => Ok(true),
            Err(_) => Err(()),
        }
    }

    /// After the end (a Terminate sent or received, a Disconnect), whatever the peer still
    /// sends is dropped unread (RFC 5041 §7.1: "silently drop everything that follows") — but
    /// read, so that closing the socket later sends a FIN, not the RST that unread data
    /// causes, which would make the peer discard our Terminate before reading it.
    pub(super) fn discard_input(&self, g: &mut Inner) {
        let Some(sock) = g.sock.as_ref() else { return };
        if g.rx.eof || g.rx.lent {
            return;
        }
        loop {
            match rustix::net::recv(sock.get(), &mut g.rx.buf[..], RecvFlags::DONTWAIT) {
                Ok((0, _)) | Err(Errno::PIPE | Errno::CONNRESET | Errno::NOTCONN) => {
                    g.rx.eof = true;
                    // A socket at its end is readable for ever: a blocked waiter must not
                    // keep waking for it.
                    sock.set_wants_read(false);
                    return;
                }
                Ok(_) | Err(Errno::INTR) => {}
                Err(_) => return,
            }
        }
    }

    /// The contiguous destination range for up to `want` next payload bytes.
    fn direct_target(&self, g: &Inner, want: usize) -> Option<(u64, usize)> {
        match g.rx.dest {
            Dest::Recv { pos, .. } => {
                let (_, segs) = g.rq.front()?;
                let mut base = 0u64;
                for s in segs {
                    let end = base + u64::from(s.len);
                    if pos < end {
                        let n = ((end - pos) as usize).min(want);
                        return Some((s.addr + (pos - base), n));
                    }
                    base = end;
                }
                None
            }
            Dest::Tagged { addr, end } if end > addr => {
                Some((addr, ((end - addr) as usize).min(want)))
            }
            _ => None,
        }
    }

    /// Account `n` payload bytes placed directly.
    fn advance_dest(&self, g: &mut Inner, n: usize) {
        match &mut g.rx.dest {
            Dest::Recv { pos, .. } => *pos += n as u64,
            Dest::Tagged { addr, .. } => *addr += n as u64,
            _ => {}
        }
    }

    /// Copy payload bytes `buf[off..off+len]` to the current destination.
    fn place(&self, g: &mut Inner, off: usize, len: usize) {
        match g.rx.dest {
            Dest::Recv { mut pos, .. } => {
                let Inner { rx, rq, .. } = &mut *g;
                let data = &rx.buf[off..off + len];
                if let Some((_, segs)) = rq.front() {
                    let mut base = 0u64;
                    let mut done = 0usize;
                    for s in segs {
                        let end = base + u64::from(s.len);
                        if done < data.len() && pos < end && pos >= base {
                            let n = ((end - pos) as usize).min(data.len() - done);
                            // SAFETY: inside a Receive segment checked for local write at post
                            // time; bounds were checked against the Receive's total length when
                            // the segment header arrived.
                            let dst = unsafe { mem::slice_mut(s.addr + (pos - base), n) };
                            dst.copy_from_slice(&data[done..done + n]);
                            done += n;
                            pos += n as u64;
                        }
                        base = end;
                    }
                }
                if let Dest::Recv { pos: p, .. } = &mut g.rx.dest {
                    *p += len as u64;
                }
            }
            Dest::Tagged { addr, end } => {
                // The deframer never delivers more payload than the header announced, and the
                // whole announced range was checked: `addr + len <= end`.
                let n = len.min((end - addr) as usize);
                // SAFETY: `addr..addr+n` lies in the range checked (token, rights, bounds)
                // against `dest_reg`, a live registration held for this segment.
                let dst = unsafe { mem::slice_mut(addr, n) };
                dst.copy_from_slice(&g.rx.buf[off..off + n]);
                self.advance_dest(g, n);
            }
            Dest::Discard | Dest::None => {}
        }
    }

    /// A segment header arrived: check it and choose the destination.
    fn on_header(&self, g: &mut Inner, h: SegmentHeader) -> Next {
        g.rx.bulk = h.payload_len as usize >= DIRECT_MIN;
        if let Err(e) = g.rx.seq.check(&h.ddp, h.payload_len) {
            self.terminate(g, h.terminate_for(e));
            return Next::Stop;
        }
        // The responder's first inbound FPDU is the RTR (or, without P2P, the first message).
        // A Terminate instead (an initiator that could not use our Reply, RFC 6581 §9.2)
        // never brought the connection up: the Accept completes ND_CONNECTION_REFUSED, as
        // for an active side that tears down after our Accept (docs/ND-RULES.md D9).
        let terminated = matches!(h.ddp, DdpHeader::Untagged(u) if u.opcode == Opcode::Terminate);
        if g.conn == Conn::AwaitRtr && !terminated {
            self.rtr_received(g);
            if is_rtr(&h) {
                if let Some(rr) = &h.read_request {
                    g.tx.encode_rtr_read_response(rr.sink_stag, rr.sink_to, g.crc);
                }
                g.rx.dest = Dest::Discard;
                return Next::Continue;
            }
        }
        match h.ddp {
            DdpHeader::Untagged(u) if u.opcode.is_send() => self.on_send(g, &h, &u),
            DdpHeader::Untagged(u) if u.opcode == Opcode::ReadRequest => {
                self.on_read_request(g, &h)
            }
            DdpHeader::Untagged(u) if u.opcode == Opcode::Terminate => {
                if let Some(t) = &h.terminate {
                    tracing::debug!(terminate = ?t, "peer terminated the stream");
                    self.attribute(g, t);
                }
                self.close(g, Status::CONNECTION_REFUSED, Ending::Abort);
                Next::Stop
            }
            DdpHeader::Tagged(t) if t.opcode == Opcode::Write => self.on_write(g, &h, &t),
            DdpHeader::Tagged(t) if t.opcode == Opcode::ReadResponse => {
                self.on_read_response(g, &h, &t)
            }
            _ => {
                // The deframer only lets the eight RDMAP opcodes through, with the T bit that
                // goes with each; anything else is unexpected here (RFC 5040 §4.8: 0x0/0x2/0x06).
                self.terminate(g, h.terminate_for(TermError::RdmapUnexpectedOpcode));
                Next::Stop
            }
        }
    }

    /// A Send-family segment: into the Receive at the head of the queue.
    fn on_send(&self, g: &mut Inner, h: &SegmentHeader, u: &UntaggedHeader) -> Next {
        if g.rq.front().is_none() && !self.take_from_srq(g) {
            // No Receive posted (on the queue pair or its SRQ): hold the segment and the rest
            // of the stream until one is; TCP flow control pushes back on the sender meanwhile,
            // and the connection survives unless the wait exceeds ND_TCP_RNR_TIMEOUT_MS
            // (R-QP-7, `on_timer`).
            self.stall(g, *h);
            return Next::Stop;
        }
        let Some((wr, _)) = g.rq.front() else {
            unreachable!("a Receive was just found");
        };
        let end = u64::from(u.mo) + u64::from(h.payload_len);
        if end > wr.total {
            // RFC 5041 §7.2: DDP message too long for the available buffer. The Receive
            // completes with ND_DATA_OVERRUN (docs/ND-RULES.md D5).
            let ctx = wr.context;
            g.rq.pop();
            self.complete_recv(ctx, Status::DATA_OVERRUN, 0, false);
            self.terminate(g, h.terminate_for(TermError::DdpUntaggedMessageTooLong));
            return Next::Stop;
        }
        if u.mo == 0 && u.opcode.carries_invalidate_stag() {
            // Send with Invalidate (RFC 5040 §5.3, §6.3; Linux peers send it): only a window
            // bound through this queue pair may be invalidated remotely (RFC 5040 §8.1.1
            // item 7); anything else is "STag cannot be invalidated" (docs/WIRE.md §5.5).
            match self.shared.mrs.lookup(u.inval_stag) {
                Some(r)
                    if r.kind == Kind::Window
                        && r.bound_qp.load(std::sync::atomic::Ordering::Acquire) == self.id =>
                {
                    self.unbind(&r);
                    g.windows.forget(&r);
                }
                _ => {
                    self.terminate(
                        g,
                        h.terminate_for(TermError::RdmapOperationCannotInvalidate),
                    );
                    return Next::Stop;
                }
            }
        }
        g.rx.dest = Dest::Recv {
            pos: u64::from(u.mo),
            solicited: u.opcode.is_solicited(),
            last: u.last,
        };
        Next::Continue
    }

    /// An RDMA Write segment: checked, then placed where it says (RFC 5040 §4.3).
    fn on_write(&self, g: &mut Inner, h: &SegmentHeader, t: &TaggedHeader) -> Next {
        if h.payload_len == 0 {
            // A zero-length tagged segment's STag and TO are not checked (RFC 5041 §5.2).
            g.rx.dest = Dest::Discard;
            return Next::Continue;
        }
        match protect::check_write(&self.shared.mrs, self.id, t.stag, t.to, h.payload_len) {
            Ok(reg) => {
                g.rx.dest = Dest::Tagged {
                    addr: t.to,
                    end: t.to + u64::from(h.payload_len),
                };
                g.rx.dest_reg = Some(reg);
                Next::Continue
            }
            Err(e) => {
                self.terminate(g, h.terminate_for(e));
                Next::Stop
            }
        }
    }

    /// An RDMA Read Request: within our IRD, its source checked, its Response queued from
    /// the registered memory (RFC 5040 §4.4, §5.2.1, §5.4).
    fn on_read_request(&self, g: &mut Inner, h: &SegmentHeader) -> Next {
        let Some(rr) = h.read_request else {
            self.terminate(g, h.terminate_for(TermError::DdpUntaggedMessageTooLong));
            return Next::Stop;
        };
        // With the probe negotiated, one zero-length Read beyond the IRD is allowed (module
        // docs of `qp`, `Rdma::admits`).
        if !g.rdma.admits(rr.size) {
            // More Read Requests than our IRD: QN 1 has no buffer for it (RFC 5040 §5.4,
            // RFC 5041 §7.2: 0x1/0x2/0x02; docs/WIRE.md §4.4).
            self.terminate(g, h.terminate_for(TermError::DdpUntaggedNoBuffer));
            return Next::Stop;
        }
        let src = match protect::check_read_source(&self.shared.mrs, self.id, &rr) {
            Ok(src) => src,
            Err(e) => {
                self.terminate(g, h.terminate_for(e));
                return Next::Stop;
            }
        };
        if rr.size > 0 {
            g.lazy = false;
        } else if !g.tx.has_output() {
            g.lazy = true;
        }
        let zero = rr.size == 0;
        let term = h.terminate_for(TermError::RdmapInvalidStag);
        g.rdma.irq.push_back(InRead { src, term, zero });
        g.rdma.irq_zero += usize::from(zero);
        g.tx.encode_read_response(rr.sink_stag, rr.sink_to, rr.src_to, rr.size, g.crc);
        g.rx.dest = Dest::Discard;
        Next::Continue
    }

    /// A Read Response segment: it must continue the oldest outstanding Read exactly, into
    /// that Read's sink, which must still be registered (RFC 5040 §4.5, §5.5 rule 20).
    fn on_read_response(&self, g: &mut Inner, h: &SegmentHeader, t: &TaggedHeader) -> Next {
        let len = h.payload_len;
        let Some(front) = g.rdma.orq.front() else {
            // No Read outstanding: "Read Response not matching an outstanding Read".
            self.terminate(g, h.terminate_for(TermError::DdpTaggedInvalidStag));
            return Next::Stop;
        };
        let (kind, expect) = (front.kind, front.expect);
        let sink = match kind {
            ReadKind::App { wr_seq, seg } => {
                let i = (wr_seq - g.front_seq) as usize;
                g.sq.get(i)
                    .and_then(|(_, segs)| segs.get(seg))
                    .and_then(|s| s.reg().cloned())
            }
            ReadKind::Probe | ReadKind::Rtr => None,
        };
        match protect::check_read_response(&expect, t.stag, t.to, len, t.last, sink.as_deref()) {
            Ok(()) => {
                if let Some(f) = g.rdma.orq.front_mut() {
                    f.expect.got += len;
                }
                g.rx.response_ends = t.last;
                if len > 0 {
                    g.rx.dest = Dest::Tagged {
                        addr: t.to,
                        end: t.to + u64::from(len),
                    };
                    g.rx.dest_reg = sink;
                } else {
                    g.rx.dest = Dest::Discard;
                }
                Next::Continue
            }
            Err(e) => {
                if let ReadKind::App { wr_seq, .. } = kind {
                    // Our sink was deregistered meanwhile: a local protection error; anything
                    // else is the peer's fault.
                    let st = if sink.as_ref().is_some_and(|r| !r.is_valid()) {
                        Status::ACCESS_VIOLATION
                    } else {
                        Status::REMOTE_ERROR
                    };
                    g.failed = Some((wr_seq, st));
                }
                self.terminate(g, h.terminate_for(e));
                Next::Stop
            }
        }
    }

    /// The oldest outstanding Read Request has its whole Response.
    fn read_answered(&self, g: &mut Inner) {
        let Some(r) = g.rdma.orq.pop_front() else {
            return;
        };
        g.rdma.answered += 1;
        match r.kind {
            ReadKind::App { wr_seq, .. } => {
                g.rdma.app_reads -= 1;
                let i = (wr_seq - g.front_seq) as usize;
                if let Some((wr, _)) = g.sq.get_mut(i) {
                    wr.answered += 1;
                }
            }
            ReadKind::Probe => g.rdma.probe_out = false,
            ReadKind::Rtr => {}
        }
    }

    /// A segment ended (its CRC checked): deliver a finished message.
    fn on_end(&self, g: &mut Inner) -> Next {
        match g.rx.dest {
            Dest::Recv {
                pos,
                solicited,
                last: true,
            } => {
                if let Some(wr) = g.rq.pop() {
                    self.complete_recv(wr.context, Status::SUCCESS, pos as u32, solicited);
                    g.rx.delivered = true;
                }
            }
            Dest::Tagged { .. } => g.rx.dest_reg = None,
            _ => {}
        }
        if std::mem::take(&mut g.rx.response_ends) {
            self.read_answered(g);
        }
        g.rx.dest = Dest::None;
        Next::Continue
    }

    /// A Terminate arrived: find the request it names, by the DDP header it carries (D bit):
    /// STag/TO for a Write, QN 1 + MSN for a Read, QN 0 + MSN for a Send (docs/WIRE.md §4.4).
    /// That request completes with `ND_ACCESS_VIOLATION` for a protection error (D6), else
    /// `ND_REMOTE_ERROR` (a Send: `STATUS_DATA_ERROR`, D5); the ones before it were processed
    /// by the target and complete as they are; the rest are flushed `ND_CANCELED`.
    ///
    /// Tagged segments carry no message number, so Writes to overlapping target ranges can
    /// all contain the refused TO. Among them the one whose own segmentation produced that
    /// segment is named ([`write_fit`]); the earliest wins a tie, as the target refuses the
    /// first bad segment it meets.
    ///
    /// A Terminate that names no segment (LLP errors such as a CRC error, and the other
    /// errors RFC 5040 §4.8 Figure 10 sends without the DDP header) still reports an error
    /// the peer found in what we sent: the oldest request on the wire completes
    /// `ND_REMOTE_ERROR` (docs/WIRE.md §4.4 proposes ND_REMOTE_ERROR for the requester of a
    /// CRC mismatch), as the first outstanding work request fails on a verbs queue pair
    /// whose peer reported an error, and the rest are flushed. A peer that failed by itself
    /// (a local catastrophic error, its connection lost) names nothing of ours: everything is
    /// flushed `ND_CANCELED`, as when it disconnects.
    fn attribute(&self, g: &mut Inner, t: &Terminate) {
        let Some(ddp) = t.ddp_header.and_then(|d| d.decode().ok()) else {
            let peer_failed = matches!(
                t.error,
                TermError::RdmapLocalCatastrophic(_)
                    | TermError::DdpLocalCatastrophic
                    | TermError::LlpConnectionLost
            );
            let on_wire = g.encoded > 0
                && g.sq.get(0).is_some_and(|(wr, _)| {
                    matches!(
                        wr.kind,
                        TxKind::Send | TxKind::Write { .. } | TxKind::Read { .. }
                    )
                });
            if !peer_failed && on_wire {
                g.failed = Some((g.front_seq, Status::REMOTE_ERROR));
            }
            return;
        };
        let status = if protect::is_protection_error(&t.error) {
            Status::ACCESS_VIOLATION
        } else {
            Status::REMOTE_ERROR
        };
        let seg_payload = g.tx.write_segment_payload();
        // The best-fitting Write so far: (queue index, fit).
        let mut write: Option<(usize, Fit)> = None;
        // Every request on the wire: the encoded ones, and a Read partly issued (ORD).
        for i in 0..g.sq.len() {
            let Some((wr, _)) = g.sq.get(i) else { break };
            let on_wire = i < g.encoded;
            let hit = match (ddp, wr.kind) {
                (DdpHeader::Tagged(th), TxKind::Write { stag, to }) => {
                    // A Write a Read Response already proved is not the culprit.
                    let proven = g.rdma.probe && g.rdma.answered >= wr.proof;
                    if on_wire && !proven && th.opcode == Opcode::Write && th.stag == stag {
                        let fit = write_fit(&th, t.ddp_seg_len, to, wr.total, seg_payload);
                        if fit > write.map_or(Fit::None, |(_, f)| f) {
                            write = Some((i, fit));
                        }
                    }
                    false
                }
                (DdpHeader::Untagged(u), TxKind::Read { .. }) => {
                    u.qn == QN_READ_REQUEST
                        && wr.issued > 0
                        && u.msn.wrapping_sub(wr.msn) < u32::from(wr.issued)
                }
                (DdpHeader::Untagged(u), TxKind::Send) => {
                    on_wire && u.qn == QN_SEND && u.msn == wr.msn
                }
                _ => false,
            };
            if hit {
                let st = match wr.kind {
                    // The receiver held it for want of a Receive until its RNR clock ran out
                    // (R-QP-7: ND_IO_TIMEOUT, as an RNR retry count exceeded on IB).
                    TxKind::Send if t.error == TermError::DdpUntaggedNoBuffer => Status::IO_TIMEOUT,
                    TxKind::Send => Status::DATA_ERROR,
                    _ => status,
                };
                g.failed = Some((g.front_seq + i as u64, st));
                return;
            }
        }
        if let Some((i, _)) = write {
            g.failed = Some((g.front_seq + i as u64, status));
        }
    }
}

/// How well a refused tagged segment fits one of our Writes (to `to`, `total` bytes, cut
/// into segments of `seg_payload` bytes by `Tx::encode_message`). Ordered: a better fit
/// names the Write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fit {
    /// The TO is not inside the Write.
    None,
    /// The TO is inside the Write, but the Write has no segment there with that L bit: the
    /// peer reported a header of its own making (accepted when nothing fits better).
    Inside,
    /// One of the Write's segments starts at the TO, with the same L bit.
    Segment,
    /// That, and its length matches the Terminate's DDP Segment Length, read either way
    /// peers fill it: the whole ULPDU (RFC 5040 §4.8) or only the payload (siw,
    /// docs/WIRE.md §4.2).
    Exact,
}

fn write_fit(
    th: &TaggedHeader,
    seg_len: Option<u16>,
    to: u64,
    total: u64,
    seg_payload: u64,
) -> Fit {
    let off = th.to.wrapping_sub(to);
    if off >= total.max(1) {
        return Fit::None;
    }
    let payload = (total - off).min(seg_payload);
    let last = off + payload >= total;
    if seg_payload == 0 || off % seg_payload != 0 || th.last != last {
        return Fit::Inside;
    }
    let tagged_hdr = netdirect_wire::ddp::TAGGED_LEN as u64;
    match seg_len.map(u64::from) {
        Some(l) if l == payload || l == payload + tagged_hdr => Fit::Exact,
        _ => Fit::Segment,
    }
}

/// How much a read into the stream buffer asks for, with `remaining` payload bytes of the
/// current segment still due (too few to go direct, or with no direct destination).
///
/// After a large segment's header (`bulk`) the read stops right after what follows: the rest
/// of this payload, its pad and CRC and the next segment's headers ([`TAIL`]), so that a next
/// large payload again goes straight to its destination rather than through this buffer. The
/// rest of the payload comes in the same read: reading only [`TAIL`] bytes at a time would
/// take dozens of calls for a payload just under [`DIRECT_MIN`] (a Send of 4096..~4140 bytes,
/// whose first bytes came with its header).
fn buffered_read_len(bulk: bool, remaining: usize, buf_len: usize) -> usize {
    if bulk {
        remaining.saturating_add(TAIL).min(buf_len)
    } else {
        buf_len
    }
}

/// A zero-length Write or Read Request: the MPA v2 ready-to-receive message.
fn is_rtr(h: &SegmentHeader) -> bool {
    match h.ddp {
        DdpHeader::Tagged(t) => t.opcode == Opcode::Write && h.payload_len == 0,
        DdpHeader::Untagged(u) => {
            u.opcode == Opcode::ReadRequest && h.read_request.is_some_and(|r| r.size == 0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tagged(to: u64, last: bool) -> TaggedHeader {
        TaggedHeader {
            last,
            opcode: Opcode::Write,
            stag: 7,
            to,
        }
    }

    /// Two Writes to the same address: 8 bytes, then 100 KiB (segments of 1000 bytes here).
    /// The refused first segment of the large one (L clear) is not the small one's (L set).
    #[test]
    fn a_refused_segment_names_the_write_that_sent_it() {
        let small = |th: &TaggedHeader, len| write_fit(th, len, 0x1000, 8, 1000);
        let large = |th: &TaggedHeader, len| write_fit(th, len, 0x1000, 100 * 1024, 1000);
        let first_of_large = tagged(0x1000, false);
        assert_eq!(small(&first_of_large, None), Fit::Inside);
        assert_eq!(large(&first_of_large, None), Fit::Segment);
        // The small one's only segment.
        let only = tagged(0x1000, true);
        assert_eq!(small(&only, None), Fit::Segment);
        assert_eq!(large(&only, None), Fit::Inside);
        // A later segment of the large one is outside the small one.
        assert_eq!(small(&tagged(0x1000 + 3000, false), None), Fit::None);
        assert_eq!(large(&tagged(0x1000 + 3000, false), None), Fit::Segment);
        // Not on a segment boundary.
        assert_eq!(large(&tagged(0x1000 + 3001, false), None), Fit::Inside);
        // The large one's last segment: 102400 = 102 * 1000 + 400.
        let tail = tagged(0x1000 + 102_000, true);
        assert_eq!(large(&tail, None), Fit::Segment);
        assert_eq!(large(&tail, Some(400)), Fit::Exact);
        assert_eq!(large(&tail, Some(400 + 14)), Fit::Exact);
        assert_eq!(large(&tail, Some(1000)), Fit::Segment);
        // Same TO and L, told apart only by the length: 8 bytes against 16.
        let w16 = |th: &TaggedHeader, len| write_fit(th, len, 0x1000, 16, 1000);
        assert_eq!(small(&only, Some(16)), Fit::Segment);
        assert_eq!(w16(&only, Some(16)), Fit::Exact);
        // A zero-length Write's one segment.
        assert_eq!(write_fit(&only, Some(0), 0x1000, 0, 1000), Fit::Exact);
        // TOs below the Write, and wrapping, fit nothing.
        assert_eq!(small(&tagged(0xFFF, true), None), Fit::None);
        assert_eq!(
            write_fit(&tagged(3, true), None, u64::MAX - 4, 16, 1000),
            Fit::Inside
        );
    }

    #[test]
    fn a_short_remainder_of_a_large_payload_comes_in_one_read() {
        // A 4100-byte Send whose header came with the previous segment's tail: ~4060 bytes of
        // payload remain, below DIRECT_MIN, so they go through the buffer, in one read that
        // also takes the pad, the CRC and the next header.
        let rem = 4060;
        assert!(rem < DIRECT_MIN);
        assert_eq!(buffered_read_len(true, rem, RX_BUF), rem + TAIL);
        // Between segments after a large one: only the next headers.
        assert_eq!(buffered_read_len(true, 0, RX_BUF), TAIL);
        // Never beyond the buffer.
        assert_eq!(buffered_read_len(true, 2 * RX_BUF, RX_BUF), RX_BUF);
        assert_eq!(buffered_read_len(true, usize::MAX, RX_BUF), RX_BUF);
        // Small messages: as many as the buffer holds.
        assert_eq!(buffered_read_len(false, 0, RX_BUF), RX_BUF);
        assert_eq!(buffered_read_len(false, 100, RX_BUF), RX_BUF);
    }
}
