//! The transmit side: RDMAP messages framed as DDP segments in MPA FPDUs (RFC 5040 §4,
//! RFC 5041 §5, RFC 5044 §4), queued as chunks and written with one `sendmsg` per batch:
//! Sends, RDMA Writes, Read Requests, the Read Responses a peer asked for, and the Terminate.
//!
//! Small payloads (≤ [`INLINE_COPY`]) are copied next to their headers so an 8-byte Send is a
//! single contiguous 32-byte write; larger payloads are written straight from registered
//! memory (gathered by `sendmsg`), never copied.

use std::collections::VecDeque;
use std::io::IoSlice;

use netdirect_spi::{OpFlags, Sge};
use netdirect_wire::ddp::{
    DdpHeader, TaggedHeader, UntaggedHeader, QN_READ_REQUEST, QN_SEND, TAGGED_LEN, UNTAGGED_LEN,
};
use netdirect_wire::fpdu;
use netdirect_wire::rdmap::{Opcode, ReadRequest, Terminate, READ_REQUEST_LEN, TERMINATE_MAX_LEN};
use netdirect_wire::sequence::TxMsn;
use rustix::io::Errno;
use rustix::net::{SendAncillaryBuffer, SendFlags};
use socket2::Socket;

use crate::mem;
use netdirect_spi::kit::wrq::Seg;

/// Payloads up to this many bytes are copied into the staging buffer rather than gathered.
pub(crate) const INLINE_COPY: usize = 1024;

/// Largest Send payload [`Tx::encode_send_direct`] frames in one piece: the ping-pong sizes,
/// where the staging path's bookkeeping cost more than the bytes.
pub(crate) const DIRECT_MAX: usize = 256;
/// Room for a direct frame: prefix, payload, pad and CRC.
pub(crate) const DIRECT_FRAME: usize = fpdu::LENGTH_FIELD_LEN + UNTAGGED_LEN + DIRECT_MAX + 7;

/// Most iovecs per `sendmsg` (well below `IOV_MAX`).
const MAX_IOV: usize = 64;
/// Pieces that fit the small stack arrays of the common case (one frame, or a header, one
/// payload and a trailer).
const FEW_IOV: usize = 4;
/// Written bytes at the front of the staging buffer are dropped once there are this many and
/// they are at least half of it ([`Tx::compact`]).
const COMPACT_MIN: usize = 64 << 10;

#[derive(Debug, Clone, Copy)]
enum Chunk {
    /// Bytes in `staged`; `end`: the last chunk of an FPDU.
    Staged { start: u32, len: u32, end: bool },
    /// Bytes in registered memory (always in the middle of an FPDU).
    User { addr: u64, len: u32 },
    /// The oldest encoded work request is fully queued before this point.
    Done,
    /// The oldest queued inbound Read's Response is fully queued before this point.
    Resp,
}

/// What one [`Tx::write_to`] call handed to TCP completely.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Written {
    /// Work requests (`Done` markers passed).
    pub(crate) done: usize,
    /// Read Responses (`Resp` markers passed).
    pub(crate) responses: usize,
    /// Bytes TCP took.
    pub(crate) bytes: usize,
}

/// The DDP/RDMAP framing of one outbound message (RFC 5040 §4, RFC 5041 §4).
#[derive(Debug, Clone, Copy)]
enum Msg {
    /// Untagged on QN 0 (Send family): every segment carries the MSN and its MO, and a
    /// Send with Invalidate the STag to invalidate (0 for the others).
    Send {
        opcode: Opcode,
        msn: u32,
        inval: u32,
    },
    /// Tagged (RDMA Write, Read Response): every segment carries the STag and its TO.
    Tagged { opcode: Opcode, stag: u32, to: u64 },
}

impl Msg {
    fn header_len(&self) -> usize {
        match self {
            Self::Send { .. } => UNTAGGED_LEN,
            Self::Tagged { .. } => TAGGED_LEN,
        }
    }

    /// The header of the segment carrying message bytes from `off` (RFC 5041 §5.2: MO, or
    /// the initial TO plus the offset; the L bit on the last segment only).
    fn header(&self, off: u64, last: bool) -> DdpHeader {
        match *self {
            Self::Send { opcode, msn, inval } => DdpHeader::Untagged(UntaggedHeader {
                last,
                opcode,
                inval_stag: inval,
                qn: QN_SEND,
                msn,
                mo: off as u32,
            }),
            // A TO range that wraps is sent as it is: the target must refuse it with
            // "TO wrap" (RFC 5041 §7.1), so the initiator learns of it.
            Self::Tagged { opcode, stag, to } => DdpHeader::Tagged(TaggedHeader {
                last,
                opcode,
                stag,
                to: to.wrapping_add(off),
            }),
        }
    }
}

/// Outbound state of one stream.
#[derive(Debug)]
pub(crate) struct Tx {
    staged: Vec<u8>,
    chunks: VecDeque<Chunk>,
    /// Bytes of `chunks.front()` already written.
    head_done: usize,
    /// The chunks written so far ended inside an FPDU (the last one popped was not a frame's
    /// end): the front chunk continues a frame even when none of it is written yet.
    mid_frame: bool,
    msn: TxMsn,
    mulpdu: usize,
    /// Inline payloads of requests not encoded yet, captured at post time.
    stash: Vec<u8>,
    stash_lens: VecDeque<u32>,
    stash_off: usize,
    /// The frame [`Tx::encode_send_direct`] builds, kept here rather than on the stack so no
    /// Send zeroes 283 bytes first (a `memset` call per message).
    direct: [u8; DIRECT_FRAME],
}

impl Tx {
    pub(crate) fn new() -> Self {
        Self {
            staged: Vec::with_capacity(4096),
            chunks: VecDeque::with_capacity(64),
            head_done: 0,
            mid_frame: false,
            msn: TxMsn::new(),
            mulpdu: 65504,
            stash: Vec::new(),
            stash_lens: VecDeque::new(),
            stash_off: 0,
            direct: [0; DIRECT_FRAME],
        }
    }

    pub(crate) fn start(&mut self, mulpdu: usize) {
        self.mulpdu = mulpdu;
    }

    /// The payload of each full segment of an RDMA Write (`encode_message`'s segmentation):
    /// a Write's segments start at its TO plus multiples of this.
    pub(crate) fn write_segment_payload(&self) -> u64 {
        fpdu::max_payload(self.mulpdu, TAGGED_LEN) as u64
    }

    pub(crate) fn has_output(&self) -> bool {
        !self.chunks.is_empty()
    }

    /// Drop everything not yet written (the stream is being torn down).
    pub(crate) fn clear(&mut self) {
        self.chunks.clear();
        self.head_done = 0;
        self.mid_frame = false;
        self.staged.clear();
        self.clear_stash();
    }

    fn clear_stash(&mut self) {
        self.stash.clear();
        self.stash_lens.clear();
        self.stash_off = 0;
    }

    /// Teardown: drop every queued message except the rest of a frame that is partly on the
    /// wire, so that the stream stays framed and one last Terminate can follow it
    /// (RFC 5040 §5.4). The application bytes that rest still refers to are copied now: their
    /// requests are about to complete (flushed), after which the memory is no longer ours.
    pub(crate) fn cut_to_current_frame(&mut self) {
        // A write can stop exactly between two chunks of one frame (a large message's frame is
        // its prefix, the application's bytes and the trailer): nothing of the front chunk is
        // written then, but the frame is begun.
        if self.head_done == 0 && !self.mid_frame {
            self.clear();
            return;
        }
        // Rare (teardown while a frame is half-written): a fresh buffer is fine here.
        let mut rest = Vec::new();
        for c in &self.chunks {
            match *c {
                Chunk::Staged { start, len, end } => {
                    rest.extend_from_slice(&self.staged[start as usize..(start + len) as usize]);
                    if end {
                        break;
                    }
                }
                // SAFETY: the request that owns these bytes is still queued (it is flushed
                // after this call), so its registration keeps them valid.
                Chunk::User { addr, len } => {
                    rest.extend_from_slice(unsafe { mem::slice(addr, len as usize) })
                }
                Chunk::Done | Chunk::Resp => {}
            }
        }
        self.chunks.clear();
        self.clear_stash();
        self.staged = rest;
        self.chunks.push_back(Chunk::Staged {
            start: 0,
            len: self.staged.len() as u32,
            end: true,
        });
    }

    fn stage_prefix(&mut self, hdr: &DdpHeader, extra: &[u8], payload_len: usize) -> usize {
        let start = self.staged.len();
        self.staged.resize(start + fpdu::MAX_HEADER_LEN + 64, 0);
        let n = fpdu::encode_prefix(hdr, extra, payload_len, &mut self.staged[start..])
            .expect("segments are sized to the MULPDU");
        self.staged.truncate(start + n);
        start
    }

    /// One whole FPDU whose payload is `payload` (copied): prefix, payload, pad and CRC.
    fn stage_frame(&mut self, hdr: &DdpHeader, extra: &[u8], payload: &[&[u8]], crc: bool) {
        let start = self.staged.len();
        let most = fpdu::LENGTH_FIELD_LEN + hdr.len() + extra.len() + payload_len(payload) + 7;
        self.staged.resize(start + most, 0);
        let len = frame_into(hdr, extra, payload, crc, &mut self.staged[start..]);
        self.staged.truncate(start + len);
        self.chunks.push_back(Chunk::Staged {
            start: start as u32,
            len: len as u32,
            end: true,
        });
    }

    /// Encode one message whose `total` bytes are those of the registered segments `segs`,
    /// segmented to the MULPDU (RFC 5041 §5.2, RFC 5044 §4.5). Payloads up to
    /// [`INLINE_COPY`] are copied next to their header; larger ones are queued as references
    /// to the registered memory and written from there by `sendmsg` (no copy).
    fn encode_message(&mut self, msg: Msg, segs: &[Seg], total: u64, crc: bool) {
        // The piece list lives on the stack, sized for the common case: initialising 64 of
        // them per message was most of an 8-byte Send's cost (and 1 KiB of cold stack to
        // touch after a blocking wake-up).
        if segs.len() <= FEW_IOV {
            self.encode_message_n::<FEW_IOV>(msg, segs, total, crc);
        } else {
            self.encode_message_n::<MAX_IOV>(msg, segs, total, crc);
        }
    }

    fn encode_message_n<const N: usize>(&mut self, msg: Msg, segs: &[Seg], total: u64, crc: bool) {
        let max = fpdu::max_payload(self.mulpdu, msg.header_len()) as u64;
        let mut off = 0u64;
        loop {
            let n = (total - off).min(max);
            let last = off + n == total;
            let hdr = msg.header(off, last);
            let mut pieces: [&[u8]; N] = [&[]; N];
            let k = gather(segs, off, n, &mut pieces);
            if n as usize <= INLINE_COPY || k == MAX_IOV {
                self.stage_frame(&hdr, &[], &pieces[..k], crc);
            } else {
                let start = self.stage_prefix(&hdr, &[], n as usize);
                let plen = self.staged.len() - start;
                let mut trailer = [0u8; 7];
                let t =
                    fpdu::encode_trailer(&self.staged[start..], &pieces[..k], crc, &mut trailer);
                self.chunks.push_back(Chunk::Staged {
                    start: start as u32,
                    len: plen as u32,
                    end: false,
                });
                for p in &pieces[..k] {
                    self.chunks.push_back(Chunk::User {
                        addr: p.as_ptr() as usize as u64,
                        len: p.len() as u32,
                    });
                }
                let ts = self.staged.len();
                self.staged.extend_from_slice(&trailer[..t]);
                self.chunks.push_back(Chunk::Staged {
                    start: ts as u32,
                    len: t as u32,
                    end: true,
                });
            }
            off += n;
            if last {
                break;
            }
        }
    }

    /// The Send family's opcode and Invalidate STag (RFC 5040 §4.1: Send with Invalidate,
    /// ND v1's SendAndInvalidate, names the STag in the untagged header).
    fn send_opcode(flags: OpFlags, inval: Option<u32>) -> (Opcode, u32) {
        let se = flags.contains(OpFlags::SEND_AND_SOLICIT_EVENT);
        match inval {
            None if se => (Opcode::SendSe, 0),
            None => (Opcode::Send, 0),
            Some(stag) if se => (Opcode::SendSeInvalidate, stag),
            Some(stag) => (Opcode::SendInvalidate, stag),
        }
    }

    /// Encode a Send of the registered segments `segs` (`total` bytes); returns its MSN.
    pub(crate) fn encode_send(
        &mut self,
        segs: &[Seg],
        total: u64,
        flags: OpFlags,
        inval: Option<u32>,
        crc: bool,
    ) -> u32 {
        let msn = self.msn.next(QN_SEND);
        let (opcode, inval) = Self::send_opcode(flags, inval);
        self.encode_message(Msg::Send { opcode, msn, inval }, segs, total, crc);
        self.chunks.push_back(Chunk::Done);
        msn
    }

    /// Frame a Send whose payload is `pieces` (together at most [`DIRECT_MAX`] bytes and one
    /// segment's worth) as one FPDU, [`Tx::direct_frame`], for the caller to write straight
    /// to the socket when nothing is queued before it; returns the frame's length and the
    /// Send's MSN, or `None` when the payload does not fit one direct frame. The MSN is taken:
    /// the frame must reach the wire, directly or through [`Tx::queue_direct`].
    pub(crate) fn encode_send_direct(
        &mut self,
        pieces: &[&[u8]],
        flags: OpFlags,
        crc: bool,
    ) -> Option<(usize, u32)> {
        if payload_len(pieces) > DIRECT_MAX.min(fpdu::max_payload(self.mulpdu, UNTAGGED_LEN)) {
            return None;
        }
        let msn = self.msn.next(QN_SEND);
        let hdr = Msg::Send {
            opcode: Self::send_opcode(flags, None).0,
            msn,
            inval: 0,
        }
        .header(0, true);
        Some((frame_into(&hdr, &[], pieces, crc, &mut self.direct), msn))
    }

    /// The first `n` bytes of the frame [`Tx::encode_send_direct`] built last.
    pub(crate) fn direct_frame(&self, n: usize) -> &[u8] {
        &self.direct[..n]
    }

    /// Queue the rest of the direct frame of `n` bytes of which the socket took `written`
    /// bytes (maybe none) as the oldest output, with its request's `Done` marker: from here
    /// it is written and accounted as any encoded request. Only valid with nothing queued
    /// (`!has_output()`).
    pub(crate) fn queue_direct(&mut self, n: usize, written: usize) {
        debug_assert!(self.chunks.is_empty() && written < n);
        self.staged.clear();
        self.staged.extend_from_slice(&self.direct[..n]);
        self.chunks.push_back(Chunk::Staged {
            start: 0,
            len: n as u32,
            end: true,
        });
        self.chunks.push_back(Chunk::Done);
        // Begun on the wire when `written > 0`: teardown keeps the rest, so the stream stays
        // framed (`cut_to_current_frame`).
        self.head_done = written;
    }

    /// Encode an RDMA Write of `segs` to `stag`/`to` (RFC 5040 §4.3: tagged, no RDMAP header).
    pub(crate) fn encode_write(&mut self, segs: &[Seg], total: u64, stag: u32, to: u64, crc: bool) {
        let msg = Msg::Tagged {
            opcode: Opcode::Write,
            stag,
            to,
        };
        self.encode_message(msg, segs, total, crc);
        self.chunks.push_back(Chunk::Done);
    }

    /// Capture the inline payload of a request (INLINE: the memory is read during the post
    /// only, RFC-free ND semantics); it is encoded from here, in order.
    pub(crate) fn stash_inline(&mut self, sge: &[Sge]) {
        let mut n = 0u32;
        for s in sge {
            // SAFETY: INLINE data is read during the post call only; the caller's contract
            // covers these bytes for that long.
            let p = unsafe { mem::slice(s.buffer as usize as u64, s.buffer_length as usize) };
            self.stash.extend_from_slice(p);
            n += s.buffer_length;
        }
        self.stash_lens.push_back(n);
    }

    /// Encode the oldest stashed inline payload as a Send (returns its MSN) or, with
    /// `write = Some((stag, to))`, as an RDMA Write; a Send with `inval` as a Send with
    /// Invalidate.
    pub(crate) fn encode_stashed_inline(
        &mut self,
        flags: OpFlags,
        write: Option<(u32, u64)>,
        inval: Option<u32>,
        crc: bool,
    ) -> u32 {
        let n = self.stash_lens.pop_front().unwrap_or(0) as usize;
        let msn;
        let msg = match write {
            None => {
                msn = self.msn.next(QN_SEND);
                let (opcode, inval) = Self::send_opcode(flags, inval);
                Msg::Send { opcode, msn, inval }
            }
            Some((stag, to)) => {
                msn = 0;
                Msg::Tagged {
                    opcode: Opcode::Write,
                    stag,
                    to,
                }
            }
        };
        let stash = std::mem::take(&mut self.stash);
        let off = self.stash_off;
        let seg = [Seg::new(
            stash[off..].as_ptr() as usize as u64,
            n as u32,
            None,
        )];
        // Inline payloads (≤ the inline limit, at most INLINE_COPY bytes) are always copied
        // into the staged frame, so the stash may be reused afterwards.
        debug_assert!(n <= INLINE_COPY);
        self.encode_message(msg, &seg, n as u64, crc);
        self.chunks.push_back(Chunk::Done);
        self.stash = stash;
        self.stash_off += n;
        if self.stash_lens.is_empty() {
            self.stash.clear();
            self.stash_off = 0;
        } else if self.stash_off >= COMPACT_MIN && self.stash_off >= self.stash.len() / 2 {
            // Requests keep waiting (behind fenced Reads, say): drop the encoded front, as
            // `compact` does for `staged`, so the stash cannot grow without bound.
            self.stash.drain(..self.stash_off);
            self.stash_off = 0;
        }
        msn
    }

    /// Encode an RDMA Read Request (RFC 5040 §4.4: untagged, QN 1, the next MSN, MO 0, the
    /// 28-byte header, no payload); returns its MSN. No `Done` marker: the caller adds one
    /// once the whole work request is queued ([`Tx::mark_done`]).
    pub(crate) fn encode_read_request(&mut self, rr: &ReadRequest, crc: bool) -> u32 {
        let msn = self.msn.next(QN_READ_REQUEST);
        let mut extra = [0u8; READ_REQUEST_LEN];
        rr.encode(&mut extra);
        self.stage_frame(&DdpHeader::read_request(msn), &extra, &[], crc);
        msn
    }

    /// The current work request is fully queued.
    pub(crate) fn mark_done(&mut self) {
        self.chunks.push_back(Chunk::Done);
    }

    /// Encode the RDMA Read Response to a Read Request (RFC 5040 §4.5: tagged to the
    /// request's sink STag, TO advancing per segment, the source bytes sent straight from
    /// registered memory), followed by a `Resp` marker. `src` is the checked source range.
    pub(crate) fn encode_read_response(
        &mut self,
        sink_stag: u32,
        sink_to: u64,
        src: u64,
        size: u32,
        crc: bool,
    ) {
        let msg = Msg::Tagged {
            opcode: Opcode::ReadResponse,
            stag: sink_stag,
            to: sink_to,
        };
        let seg = [Seg::new(src, size, None)];
        self.encode_message(msg, &seg, u64::from(size), crc);
        self.chunks.push_back(Chunk::Resp);
    }

    /// The zero-length RDMA Write used as the MPA v2 RTR (RFC 6581 §9.2; STag 1 / TO 0 as siw
    /// sends it, since some hardware treats STag 0 specially).
    pub(crate) fn encode_rtr_write(&mut self, crc: bool) {
        let hdr = DdpHeader::write(1, 0, true);
        self.stage_frame(&hdr, &[], &[], crc);
    }

    /// The zero-length RDMA Read Request used as the MPA v2 RTR.
    pub(crate) fn encode_rtr_read(&mut self, crc: bool) {
        let rr = ReadRequest {
            sink_stag: 0,
            sink_to: 0,
            size: 0,
            src_stag: 1,
            src_to: 0,
        };
        self.encode_read_request(&rr, crc);
    }

    /// The zero-length Read Response answering a Read RTR (no `Resp` marker: the RTR takes no
    /// IRD slot of the application's).
    pub(crate) fn encode_rtr_read_response(&mut self, sink_stag: u32, sink_to: u64, crc: bool) {
        let hdr = DdpHeader::read_response(sink_stag, sink_to, true);
        self.stage_frame(&hdr, &[], &[], crc);
    }

    /// The stream's single Terminate (RFC 5040 §5.4: QN 2, MSN 1, MO 0, L=1).
    pub(crate) fn encode_terminate(&mut self, t: &Terminate, crc: bool) {
        let mut body = [0u8; TERMINATE_MAX_LEN];
        let n = t.encode(&mut body);
        self.stage_frame(&DdpHeader::terminate(), &body[..n], &[], crc);
    }

    /// Write queued chunks until the socket would block. Returns what was completely handed
    /// to TCP.
    pub(crate) fn write_to(&mut self, sock: &Socket) -> std::io::Result<Written> {
        self.compact();
        // Each chunk makes at most one I/O vector entry: few chunks, a small array (as in
        // `encode_message`).
        if self.chunks.len() <= FEW_IOV {
            self.write_to_n::<FEW_IOV>(sock)
        } else {
            self.write_to_n::<MAX_IOV>(sock)
        }
    }

    fn write_to_n<const N: usize>(&mut self, sock: &Socket) -> std::io::Result<Written> {
        let mut w = Written::default();
        loop {
            self.pop_markers(&mut w);
            if self.chunks.is_empty() {
                self.staged.clear();
                return Ok(w);
            }
            let mut iov: [IoSlice<'_>; N] = [IoSlice::new(&[]); N];
            let mut k = 0;
            // Staged bytes that follow each other in `staged` (small frames queued back to
            // back) go out as one piece: a Write and its probe make one `send(2)`.
            let mut staged_run: Option<(usize, usize)> = None;
            for (i, c) in self.chunks.iter().enumerate() {
                let skip = if i == 0 { self.head_done } else { 0 };
                let s: &[u8] = match *c {
                    Chunk::Staged { start, len, .. } => {
                        let (a, b) = (start as usize + skip, (start + len) as usize);
                        if let Some((run_start, run_end)) = staged_run {
                            if run_end == a && k > 0 {
                                iov[k - 1] = IoSlice::new(&self.staged[run_start..b]);
                                staged_run = Some((run_start, b));
                                continue;
                            }
                        }
                        if k == N {
                            break;
                        }
                        staged_run = Some((a, b));
                        &self.staged[a..b]
                    }
                    // SAFETY: the range was checked against a live registration when the
                    // request was posted (or the Read Request arrived), and the request or the
                    // inbound Read record (which holds that registration) is still queued.
                    Chunk::User { addr, len } => {
                        if k == N {
                            break;
                        }
                        staged_run = None;
                        unsafe { &mem::slice(addr, len as usize)[skip..] }
                    }
                    Chunk::Done | Chunk::Resp => continue,
                };
                iov[k] = IoSlice::new(s);
                k += 1;
            }
            let flags = SendFlags::NOSIGNAL | SendFlags::DONTWAIT;
            let sent = if k == 1 {
                // The common small message: plain send(2) skips the msghdr handling.
                rustix::net::send(sock, &iov[0], flags)
            } else {
                rustix::net::sendmsg(sock, &iov[..k], &mut SendAncillaryBuffer::default(), flags)
            };
            match sent {
                Ok(n) => {
                    w.bytes += n;
                    self.advance(n, &mut w);
                }
                Err(Errno::AGAIN) => return Ok(w),
                Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Drop the written bytes at the front of `staged` once they are most of it. `staged` is
    /// otherwise emptied only when every queued chunk is written, which a stream that never
    /// fully drains (a sender that outpaces its peer keeps requests queued) never reaches: it
    /// would grow for as long as that lasts, and its `u32` offsets would wrap. Moving the live
    /// tail down costs at most the bytes appended since the last move, so it is O(1) per byte.
    fn compact(&mut self) {
        let first = self.chunks.iter().find_map(|c| match *c {
            Chunk::Staged { start, .. } => Some(start as usize),
            _ => None,
        });
        let Some(first) = first else {
            // Nothing queued refers to `staged`.
            self.staged.clear();
            return;
        };
        if first < COMPACT_MIN || first < self.staged.len() / 2 {
            return;
        }
        self.staged.drain(..first);
        for c in &mut self.chunks {
            if let Chunk::Staged { start, .. } = c {
                *start -= first as u32;
            }
        }
    }

    fn pop_markers(&mut self, w: &mut Written) {
        loop {
            match self.chunks.front() {
                Some(Chunk::Done) => w.done += 1,
                Some(Chunk::Resp) => w.responses += 1,
                _ => return,
            }
            self.chunks.pop_front();
        }
    }

    /// Account `n` written bytes and the markers passed.
    fn advance(&mut self, mut n: usize, w: &mut Written) {
        loop {
            self.pop_markers(w);
            let Some(c) = self.chunks.front() else { return };
            let len = match *c {
                Chunk::Staged { len, .. } | Chunk::User { len, .. } => len as usize,
                Chunk::Done | Chunk::Resp => unreachable!("markers popped above"),
            };
            let left = len - self.head_done;
            if n >= left {
                n -= left;
                self.head_done = 0;
                self.mid_frame = !matches!(c, Chunk::Staged { end: true, .. });
                self.chunks.pop_front();
            } else {
                self.head_done += n;
                return;
            }
        }
    }
}

fn payload_len(payload: &[&[u8]]) -> usize {
    payload.iter().map(|p| p.len()).sum()
}

/// Write one whole FPDU into `out` (prefix, `extra`, the payload copied, pad and CRC: RFC 5044
/// §4.1) and return its length. `out` holds at least 2 + header + extra + payload + 7 bytes.
fn frame_into(
    hdr: &DdpHeader,
    extra: &[u8],
    payload: &[&[u8]],
    crc: bool,
    out: &mut [u8],
) -> usize {
    let mut n = fpdu::encode_prefix(hdr, extra, payload_len(payload), out)
        .expect("segments are sized to the MULPDU");
    for p in payload {
        out[n..n + p.len()].copy_from_slice(p);
        n += p.len();
    }
    let mut trailer = [0u8; 7];
    let t = fpdu::encode_trailer(&out[..n], &[], crc, &mut trailer);
    out[n..n + t].copy_from_slice(&trailer[..t]);
    n + t
}

/// The pieces of registered memory holding message bytes `off..off+n` of `segs`, as slices.
/// Returns how many pieces were filled (at most `out.len()`).
fn gather(segs: &[Seg], off: u64, n: u64, out: &mut [&[u8]]) -> usize {
    let mut k = 0;
    let mut pos = 0u64;
    let end = off + n;
    for s in segs {
        let (s_start, s_end) = (pos, pos + u64::from(s.len));
        pos = s_end;
        if s_end <= off || s.len == 0 {
            continue;
        }
        if s_start >= end || k == out.len() {
            break;
        }
        let a = off.max(s_start) - s_start;
        let b = end.min(s_end) - s_start;
        // SAFETY: each segment was checked against a live registration when it was posted and
        // the request holding that registration is still queued.
        out[k] = unsafe { mem::slice(s.addr + a, (b - a) as usize) };
        k += 1;
    }
    k
}

#[cfg(test)]
mod tests;
