//! Streaming FPDU receive parser (RFC 5044 §4, §5.1, §6: frame purely by
//! `ULPDU_Length`; FPDUs need not line up with TCP segments).

use super::{pad_len, CRC_LEN, LENGTH_FIELD_LEN, MAX_PREFIX_LEN, MAX_ULPDU, MIN_MULPDU};
use crate::crc;
use crate::ddp::{header_len_for_ctrl, DdpHeader, DDP_VERSION, TAGGED_LEN, UNTAGGED_LEN};
use crate::rdmap::{
    split_control_byte, Opcode, ReadRequest, TermDdpHeader, TermError, Terminate, RDMAP_VERSION,
    READ_REQUEST_LEN,
};

const DV_MASK: u8 = 0x03;
const TAG_BIT: u8 = 0x80;
const LAST_BIT: u8 = 0x40;

/// Everything known about one DDP segment once its headers have been received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// The DDP header (with the RDMAP opcode).
    pub ddp: DdpHeader,
    /// The Read Request header, for opcode [`Opcode::ReadRequest`].
    pub read_request: Option<ReadRequest>,
    /// The Terminate header, for opcode [`Opcode::Terminate`].
    pub terminate: Option<Terminate>,
    /// Payload bytes that follow the headers in this segment (delivered by
    /// `Payload` events or [`Deframer::payload_direct`]).
    pub payload_len: u32,
    /// The raw DDP header bytes (first `raw_ddp_len` bytes), to copy into the
    /// D field of a Terminate that reports this segment (RFC 5040 §4.8).
    pub raw_ddp: [u8; UNTAGGED_LEN],
    /// 14 or 18.
    pub raw_ddp_len: u8,
    /// The segment's `ULPDU_Length` (the DDP Segment Length of a Terminate's M field).
    pub ulpdu_len: u16,
}

impl SegmentHeader {
    /// The raw DDP header as a slice.
    #[must_use]
    pub fn raw_ddp(&self) -> &[u8] {
        &self.raw_ddp[..usize::from(self.raw_ddp_len)]
    }

    /// The raw DDP header in the form a [`Terminate`] carries it.
    #[must_use]
    pub fn term_ddp_header(&self) -> TermDdpHeader {
        TermDdpHeader::from_header(&self.ddp)
    }

    /// A Terminate reporting `error` for this segment, with the header-control
    /// fields RFC 5040 §4.8 Figure 10 asks for: nothing for LLP errors and
    /// local catastrophic errors; otherwise the DDP Segment Length and the DDP
    /// header, plus the Read Request header for RDMAP remote protection errors
    /// on a Read Request.
    #[must_use]
    pub fn terminate_for(&self, error: TermError) -> Terminate {
        let (layer, etype, _) = error.parts();
        if error.is_llp() || (layer == crate::rdmap::LAYER_RDMAP && etype == 0) {
            return Terminate::new(error);
        }
        let rdma_header = match (
            &self.read_request,
            layer == crate::rdmap::LAYER_RDMAP && etype == 1,
        ) {
            (Some(rr), true) => Some(rr.to_bytes()),
            _ => None,
        };
        Terminate {
            error,
            ddp_seg_len: Some(self.ulpdu_len),
            ddp_header: TermDdpHeader::new(self.raw_ddp()),
            rdma_header,
        }
    }
}

/// One step of receive progress, returned by [`Deframer::next`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// All headers of a new segment have arrived and are valid.
    Header(SegmentHeader),
    /// Some payload bytes of the current segment, borrowed from the input.
    Payload(&'a [u8]),
    /// The segment's pad and CRC have been consumed and the CRC verified (or
    /// ignored when CRCs are off). The next byte starts a new FPDU.
    End,
}

/// A fatal receive error and what the Terminate reporting it should carry.
///
/// Mapping of each check to its Terminate code:
///
/// | Condition | [`TermError`] | DDP header |
/// |---|---|---|
/// | CRC mismatch (RFC 5044 §4.4, §8; siw) | [`TermError::LlpCrcError`] 0x2/0x0/0x02 | no |
/// | `ULPDU_Length` < 14, or shorter than the DDP header its T bit announces | [`TermError::DdpUntaggedMessageTooLong`] 0x1/0x2/0x05 | no (not received) |
/// | DV ≠ 1 (RFC 5041 §7.2) | [`TermError::DdpTaggedInvalidVersion`] 0x1/0x1/0x04 or [`TermError::DdpUntaggedInvalidVersion`] 0x1/0x2/0x06 | no (docs/WIRE.md §4.4) |
/// | RV ≠ 1 (RFC 5040 §4.8) | [`TermError::RdmapInvalidVersion`] 0x0/0x2/0x05 | no |
/// | opcode not 0..=7, or T bit wrong for the opcode (RFC 5040 §4.8) | [`TermError::RdmapUnexpectedOpcode`] 0x0/0x2/0x06 | yes |
/// | untagged QN not the opcode's queue (Send 0, Read Request 1, Terminate 2) (RFC 5041 §7.2) | [`TermError::DdpUntaggedInvalidQn`] 0x1/0x2/0x01 | yes |
/// | `ULPDU_Length` > the receiver's limit, a Read Request whose ULPDU is not exactly 18 + 28 bytes (i.e. it carries payload), a Terminate header that does not fit its ULPDU | [`TermError::DdpUntaggedMessageTooLong`] 0x1/0x2/0x05 | yes |
///
/// The RFCs define no code for "segment length inconsistent with its
/// headers"; like Chelsio's cxgb4 (which maps its PDU-length error to DDP
/// untagged "message too long", `linux:drivers/infiniband/hw/cxgb4/qp.c`
/// `build_term_codes`), this crate reports all such length errors as
/// 0x1/0x2/0x05.
///
/// A caller contract violation of [`Deframer::payload_direct`] poisons the
/// deframer with [`TermError::RdmapLocalCatastrophic`]`(0xFF)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{error}")]
pub struct FramingError {
    /// What went wrong, as a Terminate code.
    pub error: TermError,
    /// The offending segment's raw DDP header (bytes, length 14 or 18), when
    /// it was received completely before the error was detected.
    pub ddp_header: Option<([u8; UNTAGGED_LEN], u8)>,
    /// The offending segment's `ULPDU_Length` (DDP Segment Length), when known
    /// and the error is not an LLP error.
    pub ddp_seg_len: Option<u16>,
}

impl FramingError {
    fn bare(error: TermError) -> Self {
        Self {
            error,
            ddp_header: None,
            ddp_seg_len: None,
        }
    }

    /// The Terminate to send for this error (RFC 5040 §4.8 Figure 10): LLP
    /// and local catastrophic errors carry no headers; other errors carry the
    /// DDP Segment Length (M) and the DDP header (D) when known.
    #[must_use]
    pub fn terminate(&self) -> Terminate {
        let (layer, etype, _) = self.error.parts();
        if self.error.is_llp() || (layer == crate::rdmap::LAYER_RDMAP && etype == 0) {
            return Terminate::new(self.error);
        }
        Terminate {
            error: self.error,
            ddp_seg_len: self.ddp_seg_len,
            ddp_header: self
                .ddp_header
                .and_then(|(b, l)| TermDdpHeader::new(&b[..usize::from(l).min(UNTAGGED_LEN)])),
            rdma_header: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Staging `ULPDU_Length` and the headers.
    Header,
    /// Delivering payload; `remaining` bytes left.
    Payload,
    /// Staging pad + CRC.
    Trailer,
    /// Poisoned by an error.
    Failed(FramingError),
}

/// Streaming FPDU deframer: turns any chunking of the inbound byte stream
/// into [`Event`]s, validating MPA framing, the CRC, and the DDP/RDMAP
/// headers (but not message sequencing: see [`crate::sequence`]).
///
/// Sans-IO and allocation-free: headers and trailers are staged in small
/// fixed buffers inside the deframer, payload is never copied.
#[derive(Debug, Clone)]
pub struct Deframer {
    crc_on: bool,
    max_ulpdu: usize,
    phase: Phase,
    hdr: [u8; MAX_PREFIX_LEN],
    staged: usize,
    remaining: usize,
    crc: u32,
    /// The current segment arrived whole in one input, so its CRC was checked at once, in one
    /// pass over the contiguous bytes, rather than in three pieces (headers, payload, pad); the
    /// verdict is reported at the segment's end, as usual. (A small Send is one segment: this
    /// saves two CRC calls and their setup per message.)
    crc_verdict: Option<bool>,
    trailer: [u8; 7],
    trailer_len: usize,
    trailer_got: usize,
}

impl Deframer {
    /// A deframer at the start of the Full Operation Phase.
    ///
    /// `crc_on`: whether CRCs were negotiated (RFC 5044 §7.1.1: on if either
    /// side set C); when false the CRC field is skipped unchecked.
    /// `max_ulpdu`: the largest `ULPDU_Length` accepted, clamped to
    /// 128..=65535 (use 65535 to accept what siw sends on loopback,
    /// docs/WIRE.md §2.6).
    #[must_use]
    pub fn new(crc_on: bool, max_ulpdu: usize) -> Self {
        Self {
            crc_on,
            max_ulpdu: max_ulpdu.clamp(MIN_MULPDU, MAX_ULPDU),
            phase: Phase::Header,
            hdr: [0; MAX_PREFIX_LEN],
            staged: 0,
            remaining: 0,
            crc: 0,
            crc_verdict: None,
            trailer: [0; 7],
            trailer_len: 0,
            trailer_got: 0,
        }
    }

    /// Parses from `input`; returns the next event (if any) and how many
    /// input bytes were consumed.
    ///
    /// * `Ok((Some(event), n))`: an event, with `n ≥ 1` bytes consumed (an
    ///   event is always produced by the call that supplied its last byte).
    /// * `Ok((None, n))`: all `n == input.len()` bytes were absorbed into the
    ///   internal header/trailer staging and more input is needed (`n` is 0
    ///   only for empty input).
    /// * `Payload` events borrow from `input`; nothing is copied.
    /// * After an `Err` the deframer is poisoned: every later call returns the
    ///   same error.
    ///
    /// Each call makes progress: with non-empty input it consumes at least
    /// one byte or returns an error.
    ///
    /// # Errors
    ///
    /// A [`FramingError`] naming the Terminate to send (see its table).
    pub fn next<'a>(
        &mut self,
        input: &'a [u8],
    ) -> Result<(Option<Event<'a>>, usize), FramingError> {
        let r = match self.phase {
            Phase::Failed(e) => return Err(e),
            Phase::Header => self.step_header(input),
            Phase::Payload => Ok(self.step_payload(input)),
            Phase::Trailer => self.step_trailer(input),
        };
        if let Err(e) = r {
            self.phase = Phase::Failed(e);
        }
        r
    }

    /// While in the payload phase: bytes of the current segment's payload not
    /// yet delivered; 0 otherwise.
    #[must_use]
    pub fn payload_remaining(&self) -> usize {
        match self.phase {
            Phase::Payload => self.remaining,
            _ => 0,
        }
    }

    /// The driver read `data` (at most [`Deframer::payload_remaining`] bytes)
    /// straight from the socket into its destination: account for it (CRC,
    /// counters) exactly as if a `Payload` event had returned it.
    ///
    /// Calling it outside the payload phase, or with more bytes than remain,
    /// is a caller bug: the deframer is then poisoned with
    /// [`TermError::RdmapLocalCatastrophic`]`(0xFF)` and the next
    /// [`Deframer::next`] call reports it. Empty `data` is a no-op.
    pub fn payload_direct(&mut self, data: &[u8]) {
        if data.is_empty() || matches!(self.phase, Phase::Failed(_)) {
            return;
        }
        if self.phase != Phase::Payload || data.len() > self.remaining {
            self.phase = Phase::Failed(FramingError::bare(TermError::RdmapLocalCatastrophic(0xFF)));
            return;
        }
        self.account_payload(data);
    }

    /// `true` when the deframer sits exactly between two FPDUs (no partial
    /// FPDU received): a TCP FIN here is a clean end of stream.
    #[must_use]
    pub fn at_boundary(&self) -> bool {
        self.phase == Phase::Header && self.staged == 0
    }

    /// The error this deframer is poisoned with, if any.
    #[must_use]
    pub fn error(&self) -> Option<&FramingError> {
        match &self.phase {
            Phase::Failed(e) => Some(e),
            _ => None,
        }
    }

    /// Whether CRCs are checked.
    #[must_use]
    pub fn crc_on(&self) -> bool {
        self.crc_on
    }

    fn account_payload(&mut self, data: &[u8]) {
        // With a verdict, these bytes were already covered: they are the stream's next bytes,
        // which the input that held the whole segment showed (stream semantics: unconsumed
        // input is presented again, or read from the socket by `payload_direct`, unchanged).
        if self.crc_on && self.crc_verdict.is_none() {
            self.crc = crc::crc32c_append(self.crc, data);
        }
        self.remaining -= data.len();
        if self.remaining == 0 {
            self.phase = Phase::Trailer;
        }
    }

    fn step_payload<'a>(&mut self, input: &'a [u8]) -> (Option<Event<'a>>, usize) {
        let n = self.remaining.min(input.len());
        if n == 0 {
            return (None, 0);
        }
        let data = &input[..n];
        self.account_payload(data);
        (Some(Event::Payload(data)), n)
    }

    fn step_header<'a>(
        &mut self,
        input: &'a [u8],
    ) -> Result<(Option<Event<'a>>, usize), FramingError> {
        // Copy what the input offers (up to the largest prefix) behind the staged bytes, and
        // validate all of it at once: `header_need` checks in prefix order, each check reading
        // only bytes below the need it guards (a Terminate's length may read past a too-short
        // ULPDU, but any length it reads there fails the same LENGTH check the shorter view
        // fails), so seeing more bytes at once gives the verdict staging them piece by piece
        // would (one call instead of one per header field; the chunking property test
        // `deframer_outcome_is_chunking_independent` holds the two equal). Bytes past the need are not staged:
        // they belong to the payload or the next FPDU and are left in the input.
        let avail = (MAX_PREFIX_LEN - self.staged).min(input.len());
        self.hdr[self.staged..self.staged + avail].copy_from_slice(&input[..avail]);
        let visible = self.staged + avail;
        let need = self.header_need(visible)?;
        if need > visible {
            self.staged = visible;
            return Ok((None, avail));
        }
        let consumed = need - self.staged;
        self.staged = need;
        let sh = self.finish_header()?;
        // All header bytes came from this input (none staged by an earlier call) and the
        // whole segment is there too: check its CRC now, in one pass.
        if self.crc_on {
            let len = LENGTH_FIELD_LEN + usize::from(sh.ulpdu_len) + self.trailer_len;
            match input.get(..len) {
                Some(f) if self.staged == consumed => {
                    let (covered, wire) = f.split_at(len - CRC_LEN);
                    let wire = u32::from_le_bytes([wire[0], wire[1], wire[2], wire[3]]);
                    self.crc_verdict = Some(crc::crc_matches(wire, crc::crc32c(covered)));
                }
                // RFC 5044 §4.4: the CRC covers the length field onwards.
                _ => self.crc = crc::crc32c(&self.hdr[..self.staged]),
            }
        }
        Ok((Some(Event::Header(sh)), consumed))
    }

    fn ulpdu_len(&self) -> usize {
        usize::from(u16::from_be_bytes([self.hdr[0], self.hdr[1]]))
    }

    /// An error for the current segment that carries its DDP header.
    fn err_with_header(&self, error: TermError, ddp_len: usize) -> FramingError {
        let mut raw = [0u8; UNTAGGED_LEN];
        raw[..ddp_len].copy_from_slice(&self.hdr[LENGTH_FIELD_LEN..LENGTH_FIELD_LEN + ddp_len]);
        FramingError {
            error,
            ddp_header: Some((raw, ddp_len as u8)),
            ddp_seg_len: u16::try_from(self.ulpdu_len()).ok(),
        }
    }

    /// An error for the current segment whose DDP header is not available.
    fn err_without_header(&self, error: TermError) -> FramingError {
        FramingError {
            error,
            ddp_header: None,
            ddp_seg_len: u16::try_from(self.ulpdu_len()).ok(),
        }
    }

    /// Validates the first `visible` bytes of `hdr` and returns the total prefix
    /// length (length field + headers) needed, as far as those bytes tell. The
    /// value never decreases as more bytes become visible; the header is
    /// complete when `visible` reaches it. Never asks for bytes beyond the
    /// ULPDU.
    fn header_need(&self, visible: usize) -> Result<usize, FramingError> {
        let h = &self.hdr[..visible];
        if h.len() < LENGTH_FIELD_LEN {
            return Ok(LENGTH_FIELD_LEN);
        }
        // RFC 5044 §4.1: ULPDU_Length.
        let ulpdu = self.ulpdu_len();
        // A ULPDU holds at least the smallest (tagged) DDP header (RFC 5041 §4).
        if ulpdu < TAGGED_LEN {
            return Err(self.err_without_header(TermError::LENGTH));
        }
        if h.len() < LENGTH_FIELD_LEN + 2 {
            return Ok(LENGTH_FIELD_LEN + 2);
        }
        let (ctrl, rdmap_ctrl) = (h[2], h[3]);
        // RFC 5041 §4.1, §7.2: DDP version; no DDP header in the Terminate
        // (docs/WIRE.md §4.4).
        if ctrl & DV_MASK != DDP_VERSION {
            return Err(self.err_without_header(if ctrl & TAG_BIT != 0 {
                TermError::DdpTaggedInvalidVersion
            } else {
                TermError::DdpUntaggedInvalidVersion
            }));
        }
        // RFC 5040 §4.1, §4.8: RDMAP version.
        let (rv, op) = split_control_byte(rdmap_ctrl);
        if rv != RDMAP_VERSION {
            return Err(self.err_without_header(TermError::RdmapInvalidVersion));
        }
        let ddp_len = header_len_for_ctrl(ctrl);
        if ulpdu < ddp_len {
            return Err(self.err_without_header(TermError::LENGTH));
        }
        let base = LENGTH_FIELD_LEN + ddp_len;
        if h.len() < base {
            return Ok(base);
        }
        // The whole DDP header is staged: later errors can carry it.
        // RFC 5040 §4.8: opcode known and consistent with the T bit.
        let opcode = match Opcode::from_bits(op) {
            Some(o) if o.is_tagged() == (ctrl & TAG_BIT != 0) => o,
            _ => return Err(self.err_with_header(TermError::RdmapUnexpectedOpcode, ddp_len)),
        };
        if ulpdu > self.max_ulpdu {
            return Err(self.err_with_header(TermError::LENGTH, ddp_len));
        }
        if let Some(qn) = opcode.queue() {
            // RFC 5041 §7.2 / RFC 5040 §5: QN 0 Sends, 1 Read Requests, 2 Terminate.
            let got = u32::from_be_bytes([h[8], h[9], h[10], h[11]]);
            if got != qn {
                return Err(self.err_with_header(TermError::DdpUntaggedInvalidQn, ddp_len));
            }
        }
        match opcode {
            // RFC 5040 §4.4: exactly the 28-byte header, no payload (siw `siw_proc_rreq`).
            // A single-segment message (L set): one that announces more segments is longer
            // than a Read Request can be.
            Opcode::ReadRequest => {
                if ulpdu != ddp_len + READ_REQUEST_LEN || ctrl & LAST_BIT == 0 {
                    return Err(self.err_with_header(TermError::LENGTH, ddp_len));
                }
                Ok(base + READ_REQUEST_LEN)
            }
            // RFC 5040 §4.8: variable-length Terminate header (nothing may follow it, and it
            // is one segment: checked once the header is whole, `finish_header`).
            Opcode::Terminate => {
                let need = Terminate::wire_len(&h[base..]).unwrap_or(4);
                if ddp_len + need > ulpdu {
                    return Err(self.err_with_header(TermError::LENGTH, ddp_len));
                }
                Ok(base + need)
            }
            _ => Ok(base),
        }
    }

    /// All headers are staged and validated: decode them and move on.
    fn finish_header(&mut self) -> Result<SegmentHeader, FramingError> {
        let ulpdu = self.ulpdu_len();
        let ddp_len = header_len_for_ctrl(self.hdr[2]);
        let base = LENGTH_FIELD_LEN + ddp_len;
        let prefix = self.staged;
        let (ddp, _) = DdpHeader::parse(&self.hdr[LENGTH_FIELD_LEN..base])
            .map_err(|e| self.err_without_header(e))?;
        let mut read_request = None;
        let mut terminate = None;
        match ddp.opcode() {
            Opcode::ReadRequest => {
                read_request = Some(
                    ReadRequest::parse(&self.hdr[base..prefix])
                        .map_err(|e| self.err_with_header(e, ddp_len))?,
                );
            }
            Opcode::Terminate => {
                // RFC 5040 §4.8, §5.4: the Terminate header (with the headers it copies) is
                // the whole message, in one segment (L=1).
                if prefix != LENGTH_FIELD_LEN + ulpdu || !ddp.last() {
                    return Err(self.err_with_header(TermError::LENGTH, ddp_len));
                }
                terminate = Some(
                    Terminate::parse(&self.hdr[base..prefix])
                        .map_err(|e| self.err_with_header(e, ddp_len))?
                        .0,
                );
            }
            _ => {}
        }
        // Fixed-size copies (inline moves, not a `memcpy` call): the 14 bytes every DDP header
        // has, then an untagged header's last 4; past a tagged header they stay zero.
        let mut raw_ddp = [0u8; UNTAGGED_LEN];
        let h = &self.hdr[LENGTH_FIELD_LEN..LENGTH_FIELD_LEN + UNTAGGED_LEN];
        raw_ddp[..TAGGED_LEN].copy_from_slice(&h[..TAGGED_LEN]);
        if ddp_len == UNTAGGED_LEN {
            raw_ddp[TAGGED_LEN..].copy_from_slice(&h[TAGGED_LEN..]);
        }
        // prefix ≤ 2 + ulpdu was checked by header_need.
        let payload_len = LENGTH_FIELD_LEN + ulpdu - prefix;
        self.remaining = payload_len;
        self.trailer_len = pad_len(ulpdu) + CRC_LEN;
        self.trailer_got = 0;
        self.phase = if payload_len > 0 {
            Phase::Payload
        } else {
            Phase::Trailer
        };
        Ok(SegmentHeader {
            ddp,
            read_request,
            terminate,
            // ulpdu ≤ 65535, so these conversions are lossless.
            payload_len: payload_len as u32,
            raw_ddp,
            raw_ddp_len: ddp_len as u8,
            ulpdu_len: ulpdu as u16,
        })
    }

    fn step_trailer<'a>(
        &mut self,
        input: &'a [u8],
    ) -> Result<(Option<Event<'a>>, usize), FramingError> {
        let take = (self.trailer_len - self.trailer_got).min(input.len());
        // The pad and CRC are kept only when the CRC is still to be checked against them: with a
        // verdict (the whole segment was checked in one pass) or no CRC they are just skipped.
        if self.crc_on && self.crc_verdict.is_none() {
            self.trailer[self.trailer_got..self.trailer_got + take].copy_from_slice(&input[..take]);
        }
        self.trailer_got += take;
        if self.trailer_got < self.trailer_len {
            return Ok((None, take));
        }
        let pad = self.trailer_len - CRC_LEN;
        if let Some(ok) = self.crc_verdict.take() {
            if !ok {
                return Err(FramingError::bare(TermError::LlpCrcError));
            }
        } else if self.crc_on {
            // RFC 5044 §4.4: the pad is covered; the CRC is little-endian on the wire.
            let computed = crc::crc32c_append(self.crc, &self.trailer[..pad]);
            let mut wire = [0u8; CRC_LEN];
            wire.copy_from_slice(&self.trailer[pad..pad + CRC_LEN]);
            if !crc::crc_matches(u32::from_le_bytes(wire), computed) {
                return Err(FramingError::bare(TermError::LlpCrcError));
            }
        }
        self.phase = Phase::Header;
        self.staged = 0;
        Ok((Some(Event::End), take))
    }
}
