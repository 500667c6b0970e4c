//! The transmit side: RDMAP messages framed as DDP segments in MPA FPDUs (RFC 5040 §4,
//! RFC 5041 §5, RFC 5044 §4), queued as chunks and written with one `sendmsg` per batch.
//!
//! Small payloads (≤ [`INLINE_COPY`]) are copied next to their headers so an 8-byte Send is a
//! single contiguous 32-byte write; larger payloads are written straight from registered
//! memory (gathered by `sendmsg`), never copied.

use std::collections::VecDeque;
use std::io::IoSlice;

use netdirect_spi::{OpFlags, Sge};
use netdirect_wire::ddp::{
    DdpHeader, TaggedHeader, UntaggedHeader, QN_READ_REQUEST, QN_SEND, QN_TERMINATE, UNTAGGED_LEN,
};
use netdirect_wire::fpdu;
use netdirect_wire::rdmap::{Opcode, ReadRequest, Terminate, READ_REQUEST_LEN, TERMINATE_MAX_LEN};
use netdirect_wire::sequence::TxMsn;
use rustix::io::Errno;
use rustix::net::{SendAncillaryBuffer, SendFlags};
use socket2::Socket;

use super::queue::Seg;
use crate::mem;

/// Payloads up to this many bytes are copied into the staging buffer rather than gathered.
pub(crate) const INLINE_COPY: usize = 1024;

/// Most iovecs per `sendmsg` (well below `IOV_MAX`).
const MAX_IOV: usize = 64;

#[derive(Debug, Clone, Copy)]
enum Chunk {
    /// Bytes in `staged`.
    Staged { start: u32, len: u32 },
    /// Bytes in registered memory.
    User { addr: u64, len: u32 },
    /// The oldest encoded work request is fully queued before this point.
    Done,
}

/// Outbound state of one stream.
#[derive(Debug)]
pub(crate) struct Tx {
    staged: Vec<u8>,
    chunks: VecDeque<Chunk>,
    /// Bytes of `chunks.front()` already written.
    head_done: usize,
    msn: TxMsn,
    mulpdu: usize,
    /// Inline payloads of requests queued behind others, captured at post time.
    stash: Vec<u8>,
    stash_lens: VecDeque<u32>,
    stash_off: usize,
}

impl Tx {
    pub(crate) fn new() -> Self {
        Self {
            staged: Vec::with_capacity(4096),
            chunks: VecDeque::with_capacity(64),
            head_done: 0,
            msn: TxMsn::new(),
            mulpdu: 65504,
            stash: Vec::new(),
            stash_lens: VecDeque::new(),
            stash_off: 0,
        }
    }

    pub(crate) fn start(&mut self, mulpdu: usize) {
        self.mulpdu = mulpdu;
    }

    pub(crate) fn has_output(&self) -> bool {
        !self.chunks.is_empty()
    }

    /// Drop everything not yet written (the stream is being torn down).
    pub(crate) fn clear(&mut self) {
        if self.head_done == 0 {
            self.chunks.clear();
        } else {
            // Keep the partly written chunk's frame bytes? The stream is dead anyway: nothing
            // more is sent after a teardown except a Terminate, which we skip in that case.
            self.chunks.clear();
            self.head_done = 0;
        }
        self.staged.clear();
        self.stash.clear();
        self.stash_lens.clear();
        self.stash_off = 0;
    }

    /// Whether a frame is partly on the wire (no Terminate may be injected then, as siw does).
    pub(crate) fn mid_frame(&self) -> bool {
        self.head_done > 0
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
        let len: usize = payload.iter().map(|p| p.len()).sum();
        let start = self.stage_prefix(hdr, extra, len);
        for p in payload {
            self.staged.extend_from_slice(p);
        }
        let mut trailer = [0u8; 7];
        let t = fpdu::encode_trailer(&self.staged[start..], &[], crc, &mut trailer);
        self.staged.extend_from_slice(&trailer[..t]);
        let len = self.staged.len() - start;
        self.chunks.push_back(Chunk::Staged {
            start: start as u32,
            len: len as u32,
        });
    }

    /// Encode a Send of the registered segments `segs` (`total` bytes).
    pub(crate) fn encode_send(&mut self, segs: &[Seg], total: u64, flags: OpFlags, crc: bool) {
        let opcode = if flags.contains(OpFlags::SEND_AND_SOLICIT_EVENT) {
            Opcode::SendSe
        } else {
            Opcode::Send
        };
        let msn = self.msn.next(QN_SEND);
        let max = fpdu::max_payload(self.mulpdu, UNTAGGED_LEN) as u64;
        let mut off = 0u64;
        loop {
            let n = (total - off).min(max);
            let last = off + n == total;
            let hdr = DdpHeader::Untagged(UntaggedHeader {
                last,
                opcode,
                inval_stag: 0,
                qn: QN_SEND,
                msn,
                mo: off as u32,
            });
            let mut pieces: [&[u8]; MAX_IOV] = [&[]; MAX_IOV];
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
                });
            }
            off += n;
            if last {
                break;
            }
        }
        self.chunks.push_back(Chunk::Done);
    }

    /// Encode an INLINE Send straight from the caller's SGEs (read only during this call).
    pub(crate) fn encode_send_inline(&mut self, sge: &[Sge], flags: OpFlags, crc: bool) {
        let mut pieces: [&[u8]; MAX_IOV] = [&[]; MAX_IOV];
        let k = sge.len().min(MAX_IOV);
        for (p, s) in pieces.iter_mut().zip(sge) {
            // SAFETY: INLINE data is read during the post call only; the caller's contract
            // covers these bytes for that long.
            *p = unsafe { mem::slice(s.buffer as usize as u64, s.buffer_length as usize) };
        }
        self.encode_inline_pieces(&pieces[..k], flags, crc);
    }

    fn encode_inline_pieces(&mut self, pieces: &[&[u8]], flags: OpFlags, crc: bool) {
        let opcode = if flags.contains(OpFlags::SEND_AND_SOLICIT_EVENT) {
            Opcode::SendSe
        } else {
            Opcode::Send
        };
        let msn = self.msn.next(QN_SEND);
        let hdr = DdpHeader::Untagged(UntaggedHeader {
            last: true,
            opcode,
            inval_stag: 0,
            qn: QN_SEND,
            msn,
            mo: 0,
        });
        self.stage_frame(&hdr, &[], pieces, crc);
        self.chunks.push_back(Chunk::Done);
    }

    /// Capture the inline payload of a request that must wait behind others.
    pub(crate) fn stash_inline(&mut self, _index: usize, sge: &[Sge]) {
        let mut n = 0u32;
        for s in sge {
            // SAFETY: as in `encode_send_inline`.
            let p = unsafe { mem::slice(s.buffer as usize as u64, s.buffer_length as usize) };
            self.stash.extend_from_slice(p);
            n += s.buffer_length;
        }
        self.stash_lens.push_back(n);
    }

    /// Encode the oldest stashed inline request.
    pub(crate) fn encode_stashed_inline(&mut self, _index: usize, flags: OpFlags, crc: bool) {
        let n = self.stash_lens.pop_front().unwrap_or(0) as usize;
        let stash = std::mem::take(&mut self.stash);
        let off = self.stash_off;
        self.encode_inline_pieces(&[&stash[off..off + n]], flags, crc);
        self.stash = stash;
        self.stash_off += n;
        if self.stash_lens.is_empty() {
            self.stash.clear();
            self.stash_off = 0;
        }
    }

    /// The zero-length RDMA Write used as the MPA v2 RTR (RFC 6581 §9.2; STag 1 / TO 0 as siw
    /// sends it, since some hardware treats STag 0 specially).
    pub(crate) fn encode_rtr_write(&mut self, crc: bool) {
        let hdr = DdpHeader::Tagged(TaggedHeader {
            last: true,
            opcode: Opcode::Write,
            stag: 1,
            to: 0,
        });
        self.stage_frame(&hdr, &[], &[], crc);
    }

    /// The zero-length RDMA Read Request used as the MPA v2 RTR.
    pub(crate) fn encode_rtr_read(&mut self, crc: bool) {
        let msn = self.msn.next(QN_READ_REQUEST);
        let hdr = DdpHeader::Untagged(UntaggedHeader {
            last: true,
            opcode: Opcode::ReadRequest,
            inval_stag: 0,
            qn: QN_READ_REQUEST,
            msn,
            mo: 0,
        });
        let rr = ReadRequest {
            sink_stag: 0,
            sink_to: 0,
            size: 0,
            src_stag: 1,
            src_to: 0,
        };
        let mut extra = [0u8; READ_REQUEST_LEN];
        rr.encode(&mut extra);
        self.stage_frame(&hdr, &extra, &[], crc);
    }

    /// A zero-length Read Response (the answer to a Read RTR, or to any zero-length Read).
    pub(crate) fn encode_empty_read_response(&mut self, sink_stag: u32, sink_to: u64, crc: bool) {
        let hdr = DdpHeader::Tagged(TaggedHeader {
            last: true,
            opcode: Opcode::ReadResponse,
            stag: sink_stag,
            to: sink_to,
        });
        self.stage_frame(&hdr, &[], &[], crc);
    }

    /// The stream's single Terminate (RFC 5040 §5.4: QN 2, MSN 1, MO 0, L=1).
    pub(crate) fn encode_terminate(&mut self, t: &Terminate, crc: bool) {
        let hdr = DdpHeader::Untagged(UntaggedHeader {
            last: true,
            opcode: Opcode::Terminate,
            inval_stag: 0,
            qn: QN_TERMINATE,
            msn: 1,
            mo: 0,
        });
        let mut body = [0u8; TERMINATE_MAX_LEN];
        let n = t.encode(&mut body);
        self.stage_frame(&hdr, &body[..n], &[], crc);
    }

    /// Write queued chunks until the socket would block. Returns how many work requests were
    /// completely handed to TCP.
    pub(crate) fn write_to(&mut self, sock: &Socket) -> std::io::Result<usize> {
        let mut done = 0;
        loop {
            while let Some(Chunk::Done) = self.chunks.front() {
                self.chunks.pop_front();
                done += 1;
            }
            if self.chunks.is_empty() {
                self.staged.clear();
                return Ok(done);
            }
            let mut iov: [IoSlice<'_>; MAX_IOV] = [IoSlice::new(&[]); MAX_IOV];
            let mut k = 0;
            for (i, c) in self.chunks.iter().enumerate() {
                let skip = if i == 0 { self.head_done } else { 0 };
                let s: &[u8] = match *c {
                    Chunk::Staged { start, len } => {
                        &self.staged[start as usize + skip..(start + len) as usize]
                    }
                    // SAFETY: the range was checked against a live registration when the
                    // request was posted, and the request (which holds that registration)
                    // is still queued.
                    Chunk::User { addr, len } => unsafe { &mem::slice(addr, len as usize)[skip..] },
                    Chunk::Done => continue,
                };
                iov[k] = IoSlice::new(s);
                k += 1;
                if k == MAX_IOV {
                    break;
                }
            }
            let flags = SendFlags::NOSIGNAL | SendFlags::DONTWAIT;
            let sent = if k == 1 {
                // The common small message: plain send(2) skips the msghdr handling.
                rustix::net::send(sock, &iov[0], flags)
            } else {
                rustix::net::sendmsg(sock, &iov[..k], &mut SendAncillaryBuffer::default(), flags)
            };
            match sent {
                Ok(n) => done += self.advance(n),
                Err(Errno::AGAIN) => return Ok(done),
                Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Account `n` written bytes; returns the `Done` markers passed.
    fn advance(&mut self, mut n: usize) -> usize {
        let mut done = 0;
        while let Some(c) = self.chunks.front() {
            let len = match *c {
                Chunk::Done => {
                    self.chunks.pop_front();
                    done += 1;
                    continue;
                }
                Chunk::Staged { len, .. } | Chunk::User { len, .. } => len as usize,
            };
            let left = len - self.head_done;
            if n >= left && n > 0 || left == 0 {
                n -= left;
                self.head_done = 0;
                self.chunks.pop_front();
            } else {
                self.head_done += n;
                break;
            }
        }
        done
    }
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
