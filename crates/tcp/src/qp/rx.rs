//! The receive side: FPDUs parsed from the byte stream, checked, and placed straight into
//! posted Receives or registered memory (RFC 5041 §5–§7, RFC 5040 §5).
//!
//! Small messages arrive in bulk through one `recv` into the stream buffer and are copied to
//! their destination; the bulk of a large segment is read by `recv` directly into the
//! destination, so it crosses memory once, as with raw TCP.

use netdirect_spi::Status;
use netdirect_wire::ddp::DdpHeader;
use netdirect_wire::fpdu::{Deframer, Event, SegmentHeader};
use netdirect_wire::rdmap::{Opcode, TermError};
use netdirect_wire::sequence::RxSequencer;
use rustix::io::Errno;
use rustix::net::RecvFlags;

use super::{Conn, Inner, TcpQp};
use crate::mem;

/// Stream buffer size: enough for many small FPDUs per `recv`.
const RX_BUF: usize = 64 * 1024;
/// A segment remainder at least this large is read straight into its destination.
const DIRECT_MIN: usize = 4096;

/// Where the payload of the current segment goes.
#[derive(Debug, Clone, Copy)]
enum Dest {
    /// No segment in progress.
    None,
    /// Nowhere (zero-length RTR Write, an answered RTR Read Response, ...).
    Discard,
    /// Into the Receive at the front of the queue, at this message offset.
    Recv {
        pos: u64,
        solicited: bool,
        last: bool,
    },
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
    /// A Send header waiting for a Receive to be posted.
    stalled: Option<SegmentHeader>,
    /// Our Read RTR's zero-length response is still to come.
    rtr_read_response: bool,
    /// The last `recv` returned less than asked: the socket was empty then.
    drained: bool,
    /// An event reported the peer's FIN (or an error): it sits behind the data, and only a
    /// `recv` that returns 0 reveals it, so `drained` must not skip that read. With the socket
    /// in the edge-triggered epoll set, data and FIN arriving together raise one event; a
    /// skipped read would lose the EOF for good, and with it the flush of the Receives that
    /// a peer's disconnect owes us (nd-reference.md R-QP-8, D4).
    hangup: bool,
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
            stalled: None,
            rtr_read_response: false,
            drained: false,
            hangup: false,
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

    pub(crate) fn is_stalled(&self) -> bool {
        self.stalled.is_some()
    }

    pub(crate) fn expect_rtr_read_response(&mut self) {
        self.rtr_read_response = true;
    }

    /// Forget a partly received message (its Receive was flushed).
    pub(crate) fn reset_message(&mut self) {
        self.dest = Dest::None;
        self.stalled = None;
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
        if g.conn == Conn::Closed || g.rx.deframer.is_none() {
            return;
        }
        if let Some(h) = g.rx.stalled.take() {
            if let Next::Stop = self.on_header(g, h) {
                return;
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
                    self.terminate(g, Some(term));
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
    fn fill(&self, g: &mut Inner) -> Result<bool, ()> {
        let Some(sock) = g.sock.as_ref() else {
            return Ok(false);
        };
        let remaining = g.rx.deframer.as_ref().map_or(0, |d| d.payload_remaining());
        if remaining >= DIRECT_MIN {
            if let Some((addr, n)) = self.direct_target(g, remaining) {
                // SAFETY: `direct_target` returns a range inside the current destination, which
                // was checked against a live registration for write access when the segment
                // header arrived; the request holding it is still queued.
                let dst = unsafe { mem::slice_mut(addr, n) };
                return match rustix::net::recv(sock.get(), &mut *dst, RecvFlags::DONTWAIT) {
                    Ok((0, _)) => Err(()),
                    Ok((k, _)) => {
                        let df = g.rx.deframer.as_mut().expect("present");
                        df.payload_direct(&dst[..k]);
                        self.advance_dest(g, k);
                        Ok(true)
                    }
                    Err(Errno::AGAIN) => Ok(false),
                    Err(Errno::INTR) => Ok(true),
                    Err(_) => Err(()),
                };
            }
        }
        match rustix::net::recv(sock.get(), &mut g.rx.buf[..], RecvFlags::DONTWAIT) {
            Ok((0, _)) => Err(()),
            Ok((n, _)) => {
                g.rx.start = 0;
                g.rx.end = n;
                // A short read emptied the socket. Anything that arrives later raises a new
                // edge-triggered event, so skip the `recv` that would only say EAGAIN.
                g.rx.drained = n < g.rx.buf.len();
                Ok(true)
            }
            Err(Errno::AGAIN) => Ok(false),
            Err(Errno::INTR) => Ok(true),
            Err(_) => Err(()),
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
            _ => None,
        }
    }

    /// Account `n` payload bytes placed directly.
    fn advance_dest(&self, g: &mut Inner, n: usize) {
        if let Dest::Recv { pos, .. } = &mut g.rx.dest {
            *pos += n as u64;
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
            Dest::Discard | Dest::None => {}
        }
    }

    /// A segment header arrived: check it and choose the destination.
    fn on_header(&self, g: &mut Inner, h: SegmentHeader) -> Next {
        // The responder's first inbound FPDU is the RTR (or, without P2P, the first message).
        if g.conn == Conn::AwaitRtr {
            self.rtr_received(g);
            if is_rtr(&h) {
                if let Some(rr) = &h.read_request {
                    g.tx.encode_empty_read_response(rr.sink_stag, rr.sink_to, g.crc);
                }
                g.rx.dest = Dest::Discard;
                return Next::Continue;
            }
        }
        if let Err(e) = g.rx.seq.check(&h.ddp, h.payload_len) {
            self.terminate(g, Some(h.terminate_for(e)));
            return Next::Stop;
        }
        match h.ddp {
            DdpHeader::Untagged(u) if is_send(u.opcode) => {
                let Some((wr, _)) = g.rq.front() else {
                    // No Receive posted: hold the segment (and the rest of the stream) until
                    // one is; TCP flow control pushes back on the sender meanwhile.
                    g.rx.stalled = Some(h);
                    return Next::Stop;
                };
                let end = u64::from(u.mo) + u64::from(h.payload_len);
                if end > wr.total {
                    // RFC 5041 §7.2: DDP message too long for the available buffer. The
                    // Receive completes with ND_DATA_OVERRUN (nd-reference.md D5).
                    let ctx = wr.context;
                    g.rq.pop();
                    self.complete_recv(ctx, Status::DATA_OVERRUN, 0, false);
                    self.terminate(
                        g,
                        Some(h.terminate_for(TermError::DdpUntaggedMessageTooLong)),
                    );
                    return Next::Stop;
                }
                let solicited = matches!(u.opcode, Opcode::SendSe | Opcode::SendSeInvalidate);
                g.rx.dest = Dest::Recv {
                    pos: u64::from(u.mo),
                    solicited,
                    last: u.last,
                };
                Next::Continue
            }
            DdpHeader::Tagged(t)
                if t.opcode == Opcode::ReadResponse
                    && h.payload_len == 0
                    && g.rx.rtr_read_response =>
            {
                g.rx.rtr_read_response = false;
                g.rx.dest = Dest::Discard;
                Next::Continue
            }
            DdpHeader::Tagged(t) if t.opcode == Opcode::Write && h.payload_len == 0 => {
                // A zero-length tagged message's STag and TO must not be checked (RFC 5041 §5.2).
                g.rx.dest = Dest::Discard;
                Next::Continue
            }
            DdpHeader::Untagged(u)
                if u.opcode == Opcode::ReadRequest
                    && h.read_request.is_some_and(|r| r.size == 0) =>
            {
                // A zero-length Read is answered with a zero-length Response, unchecked
                // (RFC 5040 §5.2.1).
                let rr = h.read_request.expect("checked");
                g.tx.encode_empty_read_response(rr.sink_stag, rr.sink_to, g.crc);
                g.rx.dest = Dest::Discard;
                Next::Continue
            }
            DdpHeader::Untagged(u) if u.opcode == Opcode::Terminate => {
                tracing::debug!(terminate = ?h.terminate, "peer terminated the stream");
                self.close(g, Status::CONNECTION_REFUSED);
                Next::Stop
            }
            _ => {
                // One-sided operations arrive with the one-sided support; until then they are
                // an unexpected opcode for this stream (RFC 5040 §4.8: 0x0/0x2/0x06).
                self.terminate(g, Some(h.terminate_for(TermError::RdmapUnexpectedOpcode)));
                Next::Stop
            }
        }
    }

    /// A segment ended (its CRC checked): deliver a finished message.
    fn on_end(&self, g: &mut Inner) -> Next {
        if let Dest::Recv {
            pos,
            solicited,
            last: true,
        } = g.rx.dest
        {
            if let Some(wr) = g.rq.pop() {
                self.complete_recv(wr.context, Status::SUCCESS, pos as u32, solicited);
            }
        }
        g.rx.dest = Dest::None;
        Next::Continue
    }
}

fn is_send(op: Opcode) -> bool {
    matches!(
        op,
        Opcode::Send | Opcode::SendSe | Opcode::SendInvalidate | Opcode::SendSeInvalidate
    )
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
