//! The single-producer/single-consumer ring of one direction of a connection.
//!
//! A direction is an array of `N` 64-byte *cells* (one cache line each) and a *data area* of `D`
//! bytes, both powers of two, plus one line the consumer writes (`tail`, `data_tail`). Positions
//! are absolute 64-bit counters; a cell or data offset is a position masked by `N - 1` or
//! `D - 1`, so no value read from shared memory is ever used as an address without a mask.
//!
//! A cell holds one *record*:
//!
//! ```text
//! 0   seq    u32  (position + 1) as u32, stored last with Release: the record is complete
//! 4   word   u32  kind (MSG, CHUNK, RTR, RTS, ACK, WRITE, WPULL, READ, RRESP, TERM, RNR,
//!                 MAPW, GRANT, DONE, MAPR) | flags << 8 (SOLICITED, FIRST, LAST, NO, ACK)
//! 8   len    u32  MSG, WRITE, READ, RRESP, MAPW, MAPR, GRANT: inline bytes (≤ 48); CHUNK,
//!                 RTS, WPULL: bytes in the data area
//! 12  total  u32  CHUNK with FIRST, RTS: the whole message's length; WRITE, WPULL, READ,
//!                 RRESP, MAPW, MAPR, GRANT: the one-sided request's length
//! 16  inline [u8; 48]
//! ```
//!
//! The consumer polls only the cell it expects next: one cache line carries both the "ready"
//! mark (the sequence number) and, for a message of at most [`INLINE_MAX`] bytes, the data —
//! one cache-line transfer per small message, as in a raw flag ping-pong. Every cell is written
//! once per lap, so a stale cell holds the sequence number of the previous lap (or 0 before the
//! first) and can never be mistaken for the next record; application data never lands in a
//! sequence word.
//!
//! Larger messages travel as CHUNK records whose bytes sit in the data area at the next free
//! offset (rounded up to 64 bytes so two records never share a line; a chunk may wrap around
//! the end of the area). Both sides derive that offset from the record lengths, so the offset
//! itself is never exchanged. A message larger than a chunk is several CHUNK records (FIRST on
//! the first, which carries the total, LAST on the last), which lets the consumer copy out the
//! first chunk while the producer fills the next.
//!
//! With `ND_SHM_PULL_MIN_KIB` set, a large Send is announced instead as one RTS record whose
//! data-area bytes are the sender's scatter list; the receiver pulls the message straight from
//! the sender's memory (`process_vm_readv`) into its Receive and answers with an ACK record,
//! which completes the Send.
//!
//! The consumer returns space by storing its positions in `tail`/`data_tail` (Release); the
//! producer reads them (Acquire) only when its cached copy says the ring is full. A tail that
//! is ahead of the head or more than a ring behind is a protocol violation.

use crate::sync::{AtomicU32, AtomicU64, Ordering};

/// Bytes per cell.
pub(crate) const CELL: usize = 64;
/// Offset of the inline bytes in a cell.
pub(crate) const INLINE_OFF: usize = 16;
/// Most bytes a message may carry inline in its cell.
pub(crate) const INLINE_MAX: usize = CELL - INLINE_OFF;
/// Data-area allocations are rounded up to this.
pub(crate) const DATA_ALIGN: u64 = 64;

/// Record kinds.
pub(crate) mod kind {
    /// A whole message, inline.
    pub(crate) const MSG: u8 = 1;
    /// Part (or all) of a message, in the data area.
    pub(crate) const CHUNK: u8 = 2;
    /// Ready to receive: the active side's first record, which completes the passive Accept.
    pub(crate) const RTR: u8 = 3;
    /// A large message to be pulled from the sender's memory (cross-memory attach): the data
    /// area holds its scatter list, `(address, length)` pairs of 16 bytes; `total` is its size.
    pub(crate) const RTS: u8 = 4;
    /// The receiver pulled (or refused) the oldest RTS message, or placed the oldest RDMA
    /// Write: the initiator may complete it. `len` 0, or [`super::LEASE_LEN`] when it answers
    /// a WRITE with [`super::flag::LEASE`] and grants the lease (`mapped`: placed Writes).
    pub(crate) const ACK: u8 = 5;
    /// An RDMA Write. Inline bytes 0..16 are its descriptor ([`Desc`](super::Desc)); `total`
    /// is its length; `len` counts the inline bytes (descriptor included, 16..=48). When
    /// `total` exceeds `len - 16`, `len` is 16 and the data follows as CHUNK records (no
    /// FIRST; LAST on the last one).
    pub(crate) const WRITE: u8 = 6;
    /// An RDMA Write the target pulls from the initiator's memory (cross-memory attach): the
    /// data area holds the descriptor and then the initiator's scatter list, 16 bytes each;
    /// `total` is the Write's length.
    pub(crate) const WPULL: u8 = 7;
    /// An RDMA Read request: the inline bytes are its descriptor (`len` 16); `total` its size.
    pub(crate) const READ: u8 = 8;
    /// The response to the oldest RDMA Read: `total` is its size; the bytes are inline
    /// (`len == total` ≤ 48) or follow as CHUNK records (`len` 0).
    pub(crate) const RRESP: u8 = 9;
    /// The sender refused the initiator's oldest one-sided request (token, rights or bounds):
    /// that request completes `ND_ACCESS_VIOLATION` and the connection ends.
    pub(crate) const TERM: u8 = 10;
    /// The receiver held the sender's oldest unreceived message longer than its
    /// receiver-not-ready bound without a Receive (R-QP-7): that Send fails `ND_IO_TIMEOUT`
    /// (if it has not completed yet) and the connection ends. `total` names the message: the
    /// count of the sender's messages the receiver took before it (wrapping).
    pub(crate) const RNR: u8 = 11;
    /// A mapped RDMA Write, asked for: the inline bytes are its descriptor (`len` 16), `total`
    /// its length. The target answers GRANT; the initiator sends nothing else until it has
    /// answered that with DONE.
    pub(crate) const MAPW: u8 = 12;
    /// The answer to the initiator's MAPW or MAPR: inline bytes 0..8 the id of the target's shared
    /// memory (its descriptor came over the socket first), 8..16 the offset of the Write in it
    /// (`len` 16, `total` the Write's length); with [`super::flag::NO`] (`len` 0) refused:
    /// the Write goes the ordinary way.
    pub(crate) const GRANT: u8 = 13;
    /// The initiator copied the granted Write or Read (or, with [`super::flag::NO`], could not
    /// map the memory and sends the request the ordinary way next): the target lets go of the
    /// region.
    pub(crate) const DONE: u8 = 14;
    /// A mapped RDMA Read, asked for: as MAPW, for reading. The target answers GRANT; the
    /// initiator sends nothing else until it has answered that with DONE.
    pub(crate) const MAPR: u8 = 15;
    /// The sender's oldest unreceived message is longer than the Receive it reached: that
    /// Receive completed `ND_DATA_OVERRUN` and the connection ends; the Send fails
    /// `STATUS_DATA_ERROR` if it has not completed yet (docs/ND-RULES.md D5, as a tcp Send a
    /// Terminate names). `total` names the message as [`RNR`] does.
    pub(crate) const OVERRUN: u8 = 16;
    /// The Send that follows invalidates the receiver's window whose token (host order) is
    /// `total` (ND v1's SendAndInvalidate; RFC 5040 §5.3, Send with Invalidate): a window not
    /// bound through the receiving queue pair ends the connection. No payload.
    pub(crate) const INVAL: u8 = 17;
    /// The kinds whose bytes are in the data area (written by `Producer::push_data`, given
    /// back by `Consumer::skip`); the others carry theirs inline, in the cell.
    pub(crate) const fn in_data_area(kind: u8) -> bool {
        matches!(kind, CHUNK | RTS | WPULL)
    }
}

/// The 16-byte descriptor of a one-sided request: the target's token (host order) and the
/// address in the target's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Desc {
    pub(crate) token: u32,
    pub(crate) addr: u64,
}

impl Desc {
    pub(crate) const LEN: usize = 16;

    pub(crate) fn encode(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(&self.token.to_le_bytes());
        b[8..].copy_from_slice(&self.addr.to_le_bytes());
        b
    }

    pub(crate) fn decode(b: &[u8]) -> Self {
        let mut t = [0u8; 4];
        let mut a = [0u8; 8];
        t.copy_from_slice(&b[..4]);
        a.copy_from_slice(&b[8..16]);
        Self {
            token: u32::from_le_bytes(t),
            addr: u64::from_le_bytes(a),
        }
    }
}

/// The inline bytes of an ACK that grants a lease: the target's shared memory id, the
/// region's address and length in the target, its offset in the memory, and the epoch the
/// lease holds in (`mapped`), 8 bytes each.
pub(crate) const LEASE_LEN: u32 = 40;

/// Most scatter entries of an RTS record.
pub(crate) const RTS_MAX_SGES: usize = 32;

/// Record flags.
pub(crate) mod flag {
    /// The Send carried `SEND_AND_SOLICIT_EVENT`.
    pub(crate) const SOLICITED: u8 = 1;
    /// First chunk of a message (`total` is valid).
    pub(crate) const FIRST: u8 = 2;
    /// Last chunk of a message.
    pub(crate) const LAST: u8 = 4;
    /// A GRANT that refuses, a DONE that did not copy.
    pub(crate) const NO: u8 = 8;
    /// On a WRITE record only: an ACK rides on it, exactly as if an ACK record came just
    /// before it. The target of a Write holds its ACK until its own next Write (or its next
    /// call into the provider): in a Write ping-pong the answer then costs no cache line of
    /// its own (`qp`: held acknowledgements).
    pub(crate) const ACK: u8 = 16;
    /// On a WRITE record only: the initiator asks for a lease on the Write's region (`mapped`:
    /// placed Writes); the ACK that answers it grants one or, plain, refuses.
    pub(crate) const LEASE: u8 = 32;
}

/// The header of one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) kind: u8,
    pub(crate) flags: u8,
    pub(crate) len: u32,
    pub(crate) total: u32,
}

/// The peer broke the ring protocol (or wrote garbage into the segment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Violation;

/// The shared memory of one direction. Implemented over the mapped segment, and over plain
/// heap memory with loom's atomics for the models.
pub(crate) trait RingMem {
    /// Number of cells (a power of two).
    fn cells(&self) -> u32;
    /// Size of the data area (a power of two).
    fn data_len(&self) -> u64;
    /// The sequence word of cell `i` (`i < cells()`).
    fn seq(&self, i: u32) -> &AtomicU32;
    /// The other header words of cell `i`: word, len, total.
    fn meta(&self, i: u32) -> [&AtomicU32; 3];
    /// Cells consumed (written by the consumer).
    fn tail(&self) -> &AtomicU64;
    /// Data bytes consumed (written by the consumer).
    fn data_tail(&self) -> &AtomicU64;
    /// Copy `len` bytes from `src` into cell `i`'s inline area at `off`.
    ///
    /// # Safety
    /// `off + len <= INLINE_MAX`; `src` is readable for `len` bytes; the caller is the producer
    /// and the cell is not yet published.
    unsafe fn write_inline(&self, i: u32, off: usize, src: *const u8, len: usize);
    /// Copy `len` bytes of cell `i`'s inline area at `off` to `dst`.
    ///
    /// # Safety
    /// `off + len <= INLINE_MAX`; `dst` is writable for `len` bytes; the caller is the consumer
    /// and has seen the cell published.
    unsafe fn read_inline(&self, i: u32, off: usize, dst: *mut u8, len: usize);
    /// Copy `len` bytes from `src` into the data area at offset `at`.
    ///
    /// # Safety
    /// `at + len <= data_len()`; `src` readable; the range is free (producer side).
    unsafe fn write_data(&self, at: u64, src: *const u8, len: usize);
    /// Copy `len` bytes of the data area at offset `at` to `dst`.
    ///
    /// # Safety
    /// `at + len <= data_len()`; `dst` writable; the range was published (consumer side).
    unsafe fn read_data(&self, at: u64, dst: *mut u8, len: usize);
}

/// Where the bytes of an outgoing message come from: in order, as raw pieces.
///
/// # Safety
/// Every piece handed to `f` must be readable for its length for the duration of the call, and
/// the pieces for `off..off + len` must add up to exactly `len` bytes.
pub(crate) unsafe trait Gather {
    /// Call `f` with the pieces that make up message bytes `off..off + len`, in order.
    fn pieces(&self, off: u64, len: usize, f: impl FnMut(*const u8, usize));
}

/// Where the bytes of an incoming message go.
///
/// # Safety
/// Every piece handed to `f` must be writable for its length, not aliased by any reference,
/// and the pieces for `off..off + len` must add up to at most `len` bytes.
pub(crate) unsafe trait Scatter {
    /// Call `f` with the writable pieces for message bytes `off..off + len`, in order.
    fn pieces(&mut self, off: u64, len: usize, f: impl FnMut(*mut u8, usize));
}

fn seq_of(pos: u64) -> u32 {
    (pos as u32).wrapping_add(1)
}

fn round_up(len: u64) -> u64 {
    (len + DATA_ALIGN - 1) & !(DATA_ALIGN - 1)
}

/// The producer's private state (never in shared memory).
#[derive(Debug, Default)]
pub(crate) struct Producer {
    head: u64,
    cached_tail: u64,
    data_head: u64,
    cached_data_tail: u64,
    /// The position after the last record the owner marked ([`Producer::mark`]).
    marked: u64,
}

impl Producer {
    /// Whether a record using `data` bytes of the data area fits now; refreshes the cached
    /// tails from shared memory only when the cached ones say no.
    pub(crate) fn has_room<M: RingMem>(&mut self, m: &M, data: u64) -> Result<bool, Violation> {
        self.has_room_for(m, 1, data)
    }

    /// Whether `cells` records using `data` bytes of the data area in all fit now (a Write's
    /// descriptor and its one chunk, published together).
    pub(crate) fn has_room_for<M: RingMem>(
        &mut self,
        m: &M,
        cells: u64,
        data: u64,
    ) -> Result<bool, Violation> {
        let n = u64::from(m.cells());
        let d = m.data_len();
        let need = round_up(data);
        if self.head + cells - self.cached_tail <= n
            && self.data_head + need - self.cached_data_tail <= d
        {
            return Ok(true);
        }
        let t = m.tail().load(Ordering::Acquire);
        let dt = m.data_tail().load(Ordering::Acquire);
        if t > self.head || self.head - t > n || dt > self.data_head || self.data_head - dt > d {
            return Err(Violation);
        }
        self.cached_tail = t;
        self.cached_data_tail = dt;
        Ok(self.head + cells - t <= n && self.data_head + need - dt <= d)
    }

    /// Mark every record published so far (the queue pair marks its requests, not its
    /// answers: a placed Write waits for the requests before it, `mapped`).
    #[inline]
    pub(crate) fn mark(&mut self) {
        self.marked = self.head;
    }

    /// Whether the consumer has taken every record up to the last [`Producer::mark`] (one
    /// Acquire load: what it did with them happens before what the caller does next). A tail
    /// beyond the head is garbage and counts as not taken.
    pub(crate) fn taken<M: RingMem>(&self, m: &M) -> bool {
        let t = m.tail().load(Ordering::Acquire);
        t >= self.marked && t <= self.head
    }

    /// The (tail, data tail) the producer last saw: a blocked producer may retry once they move.
    pub(crate) fn seen_tails(&self) -> (u64, u64) {
        (self.cached_tail, self.cached_data_tail)
    }

    /// Publish a record whose inline bytes come from `src` (message bytes `off..off + len`,
    /// at most [`INLINE_MAX`]). The caller checked [`Producer::has_room`] for 0 data bytes.
    pub(crate) fn push_inline<M: RingMem, G: Gather>(
        &mut self,
        m: &M,
        kind: u8,
        flags: u8,
        src: &G,
        off: u64,
        len: usize,
    ) {
        debug_assert!(len <= INLINE_MAX);
        let i = (self.head as u32) & (m.cells() - 1);
        let mut at = 0;
        src.pieces(off, len, |p, n| {
            // SAFETY: `Gather`'s contract: readable pieces adding up to `len` ≤ INLINE_MAX
            // bytes; the cell is ours until the sequence word is stored below.
            unsafe { m.write_inline(i, at, p, n) };
            at += n;
        });
        self.publish(m, i, kind, flags, len as u32, 0);
    }

    /// As [`Producer::push_inline`], with `total` in the header (the WRITE, READ and RRESP
    /// records).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn push_header<M: RingMem, G: Gather>(
        &mut self,
        m: &M,
        kind: u8,
        flags: u8,
        total: u32,
        src: &G,
        off: u64,
        len: usize,
    ) {
        debug_assert!(len <= INLINE_MAX);
        let i = (self.head as u32) & (m.cells() - 1);
        let mut at = 0;
        src.pieces(off, len, |p, n| {
            // SAFETY: as in `push_inline`.
            unsafe { m.write_inline(i, at, p, n) };
            at += n;
        });
        self.publish(m, i, kind, flags, len as u32, total);
    }

    /// Publish a CHUNK record carrying message bytes `off..off + len` in the data area. The
    /// caller checked [`Producer::has_room`] for `len` bytes (`len <= data_len()`).
    pub(crate) fn push_chunk<M: RingMem, G: Gather>(
        &mut self,
        m: &M,
        flags: u8,
        total: u32,
        src: &G,
        off: u64,
        len: usize,
    ) {
        self.push_data(m, kind::CHUNK, flags, total, src, off, len);
    }

    /// Publish a record of `kind` whose `len` bytes (`src` bytes `off..off + len`) go to the
    /// data area. The caller checked [`Producer::has_room`] for `len` bytes.
    pub(crate) fn push_data<M: RingMem, G: Gather>(
        &mut self,
        m: &M,
        kind: u8,
        flags: u8,
        total: u32,
        src: &G,
        off: u64,
        len: usize,
    ) {
        debug_assert!(kind::in_data_area(kind));
        let i = (self.head as u32) & (m.cells() - 1);
        let d = m.data_len();
        let mut pos = self.data_head;
        src.pieces(off, len, |mut p, mut n| {
            while n > 0 {
                let at = pos & (d - 1);
                let k = (n as u64).min(d - at) as usize;
                // SAFETY: `at + k <= d`; the range lies in the space `has_room` reserved; `p`
                // is readable for `n` bytes (`Gather`).
                unsafe { m.write_data(at, p, k) };
                // SAFETY: `k <= n`, inside the piece.
                p = unsafe { p.add(k) };
                n -= k;
                pos += k as u64;
            }
        });
        self.data_head += round_up(len as u64);
        self.publish(m, i, kind, flags, len as u32, total);
    }

    fn publish<M: RingMem>(&mut self, m: &M, i: u32, kind: u8, flags: u8, len: u32, total: u32) {
        let [word, l, t] = m.meta(i);
        word.store(u32::from(kind) | (u32::from(flags) << 8), Ordering::Relaxed);
        l.store(len, Ordering::Relaxed);
        t.store(total, Ordering::Relaxed);
        m.seq(i).store(seq_of(self.head), Ordering::Release);
        self.head += 1;
    }
}

/// The consumer's private state (never in shared memory).
#[derive(Debug, Default)]
pub(crate) struct Consumer {
    pos: u64,
    data_pos: u64,
}

impl Consumer {
    /// The next expected position (mirrored for lock-free readiness checks).
    pub(crate) fn pos(&self) -> u64 {
        self.pos
    }

    /// Whether the record at `pos` has been published (one Acquire load).
    pub(crate) fn ready_at<M: RingMem>(m: &M, pos: u64) -> bool {
        let i = (pos as u32) & (m.cells() - 1);
        m.seq(i).load(Ordering::Acquire) == seq_of(pos)
    }

    /// The next record, if published, checked for shape: known kind, inline length within the
    /// cell, chunk length within the data area.
    #[inline]
    pub(crate) fn peek<M: RingMem>(&self, m: &M) -> Result<Option<Record>, Violation> {
        let i = (self.pos as u32) & (m.cells() - 1);
        if m.seq(i).load(Ordering::Acquire) != seq_of(self.pos) {
            return Ok(None);
        }
        let [word, l, t] = m.meta(i);
        let w = word.load(Ordering::Relaxed);
        // An ACK rides on a WRITE only (`flag::ACK`).
        if w & (u32::from(flag::ACK) << 8) != 0 && w as u8 != kind::WRITE {
            return Err(Violation);
        }
        let r = Record {
            kind: w as u8,
            flags: (w >> 8) as u8,
            len: l.load(Ordering::Relaxed),
            total: t.load(Ordering::Relaxed),
        };
        let ok = match r.kind {
            kind::MSG => r.len as usize <= INLINE_MAX,
            kind::CHUNK => u64::from(r.len) <= m.data_len(),
            // An ACK's length (0, or a lease's) is checked where it is taken: this function
            // is on every poll's path.
            kind::RTR | kind::ACK | kind::TERM | kind::RNR | kind::OVERRUN => true,
            kind::INVAL => r.len == 0,
            kind::RTS => r.len.is_multiple_of(16) && r.len as usize <= RTS_MAX_SGES * 16,
            kind::WRITE => (Desc::LEN..=INLINE_MAX).contains(&(r.len as usize)),
            kind::WPULL => {
                r.len.is_multiple_of(16)
                    && (2 * Desc::LEN..=(RTS_MAX_SGES + 1) * 16).contains(&(r.len as usize))
            }
            kind::READ => r.len as usize == Desc::LEN,
            kind::RRESP => r.len as usize <= INLINE_MAX && r.len <= r.total,
            kind::MAPW | kind::MAPR => r.len as usize == Desc::LEN,
            kind::GRANT => r.len == if r.flags & flag::NO != 0 { 0 } else { 16 },
            kind::DONE => r.len == 0,
            _ => false,
        };
        if ok {
            Ok(Some(r))
        } else {
            Err(Violation)
        }
    }

    /// Copy the inline bytes of the current record (`len` of them, as peeked) into `dst` at
    /// message offset `off`.
    pub(crate) fn read_inline<M: RingMem, S: Scatter>(
        &self,
        m: &M,
        len: usize,
        dst: &mut S,
        off: u64,
    ) {
        let len = len.min(INLINE_MAX);
        let i = (self.pos as u32) & (m.cells() - 1);
        let mut at = 0;
        dst.pieces(off, len, |p, n| {
            let n = n.min(INLINE_MAX - at);
            // SAFETY: `at + n <= INLINE_MAX`; the cell was published (peeked); `p` is
            // writable for `n` bytes (`Scatter`).
            unsafe { m.read_inline(i, at, p, n) };
            at += n;
        });
    }

    /// Copy the data-area bytes of the current CHUNK record (`len`, as peeked, ≤ data_len)
    /// into `dst` at message offset `off`, and account them.
    pub(crate) fn read_chunk<M: RingMem, S: Scatter>(
        &mut self,
        m: &M,
        len: usize,
        dst: &mut S,
        off: u64,
    ) {
        let d = m.data_len();
        let len = (len as u64).min(d) as usize;
        let mut pos = self.data_pos;
        let mut left = len;
        dst.pieces(off, len, |mut p, n| {
            let mut n = n.min(left);
            left -= n;
            while n > 0 {
                let at = pos & (d - 1);
                let k = (n as u64).min(d - at) as usize;
                // SAFETY: `at + k <= d`; published bytes of the current record; `p` writable
                // for `n` bytes (`Scatter`).
                unsafe { m.read_data(at, p, k) };
                // SAFETY: inside the piece.
                p = unsafe { p.add(k) };
                n -= k;
                pos += k as u64;
            }
        });
        self.data_pos += round_up(len as u64);
    }

    /// Move past the current record.
    pub(crate) fn advance(&mut self) {
        self.pos += 1;
    }

    /// Move past the current record `r` (as peeked) unread, with its bytes in the data area
    /// if it has any: a side whose connection ended drops what the peer still sends, so that
    /// the peer's output is never stuck behind ours (`ShmQp::linger`).
    pub(crate) fn skip(&mut self, r: &Record) {
        if kind::in_data_area(r.kind) {
            self.data_pos += round_up(u64::from(r.len));
        }
        self.pos += 1;
    }

    /// Give the space of every consumed record back to the producer.
    pub(crate) fn release<M: RingMem>(&self, m: &M) {
        m.data_tail().store(self.data_pos, Ordering::Release);
        m.tail().store(self.pos, Ordering::Release);
    }
}

/// The wake-up handshake: a side about to sleep sets its `waiting` word and then re-checks
/// its condition; a side that changed something the other may be waiting for (published a
/// record, freed space, closed) checks the other's `waiting` word afterwards. The two full
/// fences make it a Dekker handshake: either the sleeper sees the change or the changer sees
/// the sleeper, so a wake-up is never lost (checked by the loom models below).
///
/// The word holds two flags. [`wake::ASLEEP`]: the side sleeps (or an event loop watches its
/// descriptor); a new record wakes it. [`wake::WANTS_SPACE`]: the side holds output the ring
/// had no room for; freed space wakes it, but only then — a consumer frees space with every
/// record it takes, and a ping-pong peer asleep waiting for the reply must not be woken by
/// the consumption of its own message (that second doorbell cost a `sendmsg`, a `recvmsg` and
/// a spurious wake-up per message). The owner sets and clears each flag with read-modify-write
/// operations, as two of its threads may (a sleeper arms while another posts).
pub(crate) mod wake {
    use crate::sync::{fence, AtomicU32, Ordering};

    /// The side sleeps: wake it for a record (or a close).
    pub(crate) const ASLEEP: u32 = 1;
    /// The side has output waiting for ring space: wake it, if it sleeps, for freed space.
    pub(crate) const WANTS_SPACE: u32 = 2;

    /// Announce that this side is about to sleep. The caller re-checks its condition next.
    pub(crate) fn arm(waiting: &AtomicU32) {
        waiting.fetch_or(ASLEEP, Ordering::AcqRel);
        fence(Ordering::SeqCst);
    }

    /// This side is awake again (busy-polling sides never set the word, so their peers never
    /// pay for a wake-up).
    pub(crate) fn disarm(waiting: &AtomicU32) {
        waiting.fetch_and(!ASLEEP, Ordering::AcqRel);
    }

    /// This side's output found no room (`yes`) or all fit. When the flag rises, the caller
    /// re-checks the ring's space next: a consumer that freed space before it could see the
    /// flag did not wake anyone.
    pub(crate) fn want_space(waiting: &AtomicU32, yes: bool) {
        let had = waiting.load(Ordering::Relaxed) & WANTS_SPACE != 0;
        if yes && !had {
            // AcqRel: a sleeper of this side whose `arm` reads this value (its fence acquires)
            // then sees what the caller stored before (the blocked output, `Link::tx_blocked`).
            waiting.fetch_or(WANTS_SPACE, Ordering::AcqRel);
            fence(Ordering::SeqCst);
        } else if !yes && had {
            waiting.fetch_and(!WANTS_SPACE, Ordering::AcqRel);
        }
    }

    /// After publishing a record (or closing): whether the peer must be woken.
    pub(crate) fn peer_sleeps(peer_waiting: &AtomicU32) -> bool {
        fence(Ordering::SeqCst);
        peer_waiting.load(Ordering::Relaxed) & ASLEEP != 0
    }

    /// After freeing space: whether the peer must be woken (it sleeps and waits for space).
    pub(crate) fn peer_wants_space(peer_waiting: &AtomicU32) -> bool {
        fence(Ordering::SeqCst);
        peer_waiting.load(Ordering::Relaxed) == ASLEEP | WANTS_SPACE
    }
}

/// The handshake that keeps a copy into (or out of) the peer's memory — a granted mapped
/// Write or Read, a Write placed under a lease (`mapped`) — from outliving the target's
/// permission: the initiator makes its `copying` word odd (it lives in its own line) before
/// it looks whether the target closed or revoked its leases, and even again after the copy;
/// the target, closing or revoking, stores `closed` or a new lease epoch before it looks
/// whether the initiator copies, and waits until the word is even. The fences make it a
/// Dekker handshake: either the initiator sees the close or revocation and copies nothing,
/// or the target sees the copy and waits for its end (`loom_grant_close`).
pub(crate) mod grant {
    use crate::sync::{fence, AtomicU32, AtomicU64, Ordering};

    /// Initiator, about to copy under a grant: whether it still holds (the peer has not
    /// closed). Call [`copied`] afterwards either way.
    pub(crate) fn start_copy(copying: &AtomicU32, peer_closed: &AtomicU32) -> bool {
        announce(copying);
        peer_closed.load(Ordering::Acquire) == 0
    }

    /// Initiator, about to place a Write under a lease of `epoch`: whether it still holds
    /// (the peer has neither closed nor revoked). Call [`copied`] afterwards either way.
    pub(crate) fn start_place(
        copying: &AtomicU32,
        peer_closed: &AtomicU32,
        peer_epoch: &AtomicU64,
        epoch: u64,
    ) -> bool {
        announce(copying);
        peer_closed.load(Ordering::Acquire) == 0 && peer_epoch.load(Ordering::Acquire) == epoch
    }

    fn announce(copying: &AtomicU32) {
        // Only this side writes the word: odd now.
        let v = copying.load(Ordering::Relaxed);
        copying.store(v.wrapping_add(1) | 1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// Initiator: the copy is over (Release: the target's wait then sees every byte of it).
    pub(crate) fn copied(copying: &AtomicU32) {
        let v = copying.load(Ordering::Relaxed);
        copying.store(v.wrapping_add(1) & !1, Ordering::Release);
    }

    /// Target: revoke every lease given out (they carry an older epoch). The caller then
    /// waits while [`peer_copying`].
    pub(crate) fn revoke(epoch: &AtomicU64) {
        let v = epoch.load(Ordering::Relaxed);
        epoch.store(v.wrapping_add(1), Ordering::Relaxed);
    }

    /// Target, its `closed` word or new lease epoch stored: whether the peer is still copying.
    pub(crate) fn peer_copying(peer_copying: &AtomicU32) -> bool {
        fence(Ordering::SeqCst);
        peer_copying.load(Ordering::Acquire) & 1 != 0
    }
}

#[cfg(loom)]
pub(crate) mod loom_mem;

#[cfg(all(test, loom))]
mod loom_models;
