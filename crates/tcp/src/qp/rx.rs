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

mod segments;

/// Stream buffer size once the stream is busy: enough for many small FPDUs per `recv`.
const RX_BUF: usize = 64 * 1024;
/// Stream buffer size at first: a connection that only ever carries a few small messages
/// (most of 10,000 held connections) never takes more memory, and a connection setup pays
/// one page fault, not sixteen. A `recv` that fills it grows it to [`RX_BUF`].
const RX_BUF_FIRST: usize = 4 * 1024;
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
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) deframer: Option<Deframer>,
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
    /// A read filled the first, small buffer: the next read takes the full size.
    grow: bool,
    /// The engine's leader sleeps in `recv` on the socket (`Source::lend_reader`): nobody
    /// else reads it meanwhile, or bytes could be processed out of order.
    pub(super) lent: bool,
    /// The error a read or write of the socket returned (the kernel reports it once):
    /// why the connection was lost (`TcpQp::stream_ended`).
    pub(crate) failure: Option<Errno>,
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
            grow: false,
            lent: false,
            failure: None,
        }
    }

    /// The peer closed its side or the socket failed: read until `recv` says so.
    pub(crate) fn hung_up(&mut self) {
        self.hangup = true;
    }

    /// A read or write of the socket failed with `e`: the first such error says why the
    /// connection ended (the kernel reports a socket error once).
    pub(crate) fn note_failure(&mut self, e: Errno) {
        if !matches!(e, Errno::AGAIN | Errno::INTR) {
            self.failure.get_or_insert(e);
        }
    }

    /// Begin full operation with the negotiated CRC; `leftover` are bytes that followed the MPA
    /// frame in the same read.
    pub(crate) fn start(&mut self, crc: bool, leftover: &[u8]) {
        self.buf = vec![0u8; RX_BUF_FIRST.max(leftover.len())].into_boxed_slice();
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
                self.note_read(n);
            }
            Err(Errno::AGAIN) => self.drained = false,
            Err(e) => {
                // The error was consumed by the leader's read; the next one reports the end.
                self.note_failure(e);
                self.hangup = true;
                self.drained = false;
            }
        }
    }

    /// A read of `n` bytes into the stream buffer: one that filled the first, small buffer
    /// means the stream brings more, so the next read takes the full size (this one's bytes
    /// are still being parsed).
    fn note_read(&mut self, n: usize) {
        self.grow |= n == self.buf.len() && n < RX_BUF;
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
                        self.stream_ended(g);
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
                        Err(e) => {
                            g.rx.note_failure(e);
                            return Err(());
                        }
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
        if std::mem::take(&mut g.rx.grow) {
            // Nothing is buffered (`fill` runs once the buffer is consumed).
            g.rx.buf = vec![0u8; RX_BUF].into_boxed_slice();
        }
        let want = buffered_read_len(g.rx.bulk, remaining, g.rx.buf.len());
        match rustix::net::recv(sock.get(), &mut g.rx.buf[..want], RecvFlags::DONTWAIT) {
            Ok((0, _)) => Err(()),
            Ok((n, _)) => {
                g.rx.note_read(n);
                g.rx.start = 0;
                g.rx.end = n;
                // A short read emptied the socket. Anything that arrives later raises a new
                // edge-triggered event, so skip the `recv` that would only say EAGAIN.
                g.rx.drained = n < want;
                Ok(true)
            }
            Err(Errno::AGAIN) => Ok(false),
            Err(Errno::INTR) => Ok(true),
            Err(e) => {
                g.rx.note_failure(e);
                Err(())
            }
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

#[cfg(test)]
mod tests {
    use super::*;

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
