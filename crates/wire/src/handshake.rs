//! MPA Startup Phase state machines, sans-IO (RFC 5044 §7.1.2, RFC 6581 §9).
//!
//! Initiator (active side):
//! 1. [`Initiator::request`] → send the bytes; send nothing else until the
//!    Reply is in (RFC 5044 §7.1.2 rule 3; siw kills connections that do).
//! 2. Feed received bytes to [`Initiator::handle_reply`] until it returns an
//!    outcome; keep the unconsumed bytes (FPDUs may follow in the same read).
//! 3. If [`Negotiated::rtr`] is `Some`, the first FPDU must be that RTR
//!    ([`rtr_fpdu`]); then normal traffic.
//!
//! Responder (passive side):
//! 1. Feed bytes to [`Responder::handle_request`] until it returns the
//!    [`ConnectRequest`].
//! 2. Send [`accept`] or [`reject`] bytes ([`must_reject`] requests must be
//!    rejected).
//! 3. After accepting, send no FPDU until the first inbound FPDU (the RTR in
//!    P2P mode, [`is_rtr`]) has been received (RFC 5044 §7.1.2 rule 4).
//!
//! This crate always sends Rev 2 frames with S set, never requests markers,
//! and never sends more than [`INTEROP_PRIVATE_DATA`] bytes of private data.
//!
//! # The Write completion probe (private to netdirect)
//!
//! An RDMA Write has no response on the wire (RFC 5040 §4.3), so an initiator cannot learn
//! from the protocol alone that the target accepted it. A zero-length RDMA Read Request sent
//! after a batch of Writes can: the target processes a Read Request only after every earlier
//! message (RFC 5040 §5.5 rules 12 and 17), and answers a zero-length Read without touching
//! memory (§5.2.1), so its zero-length Read Response proves that the Writes before it were
//! placed, and a protection error on one of them arrives as a Terminate instead.
//!
//! Such probes must not use the application's read budget (its IRD/ORD, which
//! `GetReadLimits` reports exactly), so an endpoint that accepts them says so with
//! reserved MPA flag bits that other implementations send as 0 and ignore (RFC 5044 §7.1.1):
//! the Initiator offers it with [`MpaFlags::COMPLETION_PROBE`] in its Request
//! ([`InitiatorConfig::probe`]), a Responder that supports it accepts with a *different* bit,
//! [`MpaFlags::COMPLETION_PROBE_ACCEPTED`], in its Reply ([`AcceptConfig::probe`]), and then
//! both ends accept one zero-length Read Request beyond their IRD ([`Negotiated::probe`]).
//! Two bits, because a Responder may build its Reply from the Request's header and so echo
//! every flag (Linux siw does, docs/WIRE.md §2.4): an echo of the offer is not an acceptance.
//! Against a peer that does not accept, nothing changes on the wire.

use crate::ddp::{DdpHeader, QN_READ_REQUEST};
use crate::fpdu::{encode_fpdu, SegmentHeader};
use crate::mpa::{
    EnhancedData, FrameKind, MpaError, MpaFlags, MpaFrame, RtrTypes, INTEROP_PRIVATE_DATA,
    INTEROP_ULP_PRIVATE_DATA, IRD_ORD_MASK, IRD_ORD_MAX, REVISION_1, REVISION_2,
};
use crate::rdmap::{Opcode, ReadRequest, Terminate, TERMINATE_MAX_LEN};
use crate::sequence::TxMsn;

/// The zero-length message the Initiator sends as its Ready-To-Receive in MPA
/// v2 peer-to-peer mode (RFC 6581 §9.2). Zero-length Send RTRs are never
/// chosen (siw refuses them: they would consume a posted Receive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rtr {
    /// Zero-length RDMA Write (C bit).
    Write,
    /// Zero-length RDMA Read (D bit); uses one ORD slot of the Initiator and
    /// one IRD slot of the Responder.
    Read,
}

impl Rtr {
    fn bit(self) -> RtrTypes {
        match self {
            Self::Write => RtrTypes::WRITE,
            Self::Read => RtrTypes::READ,
        }
    }
}

/// What the Initiator asks for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InitiatorConfig {
    /// Request CRCs (C). RFC 5044 §4.4 makes CRCs the default; recommended.
    pub crc: bool,
    /// Our IRD (inbound Read depth) to announce; clamped to 0x3FFE. Keep it
    /// ≤ 128 for siw (docs/WIRE.md §9).
    pub ird: u16,
    /// Our ORD (outbound Read depth) to announce; clamped to 0x3FFE, raised to
    /// 1 when `p2p` (a Read RTR needs one ORD slot, as siw/irdma do).
    pub ord: u16,
    /// Request peer-to-peer mode (A = 1) offering Write and Read RTRs (C, D).
    pub p2p: bool,
    /// ULP private data, at most [`INTEROP_ULP_PRIVATE_DATA`] (252) bytes.
    pub private_data: Vec<u8>,
    /// Offer the Write completion probe: set [`MpaFlags::COMPLETION_PROBE`] in the Request
    /// (see the module documentation).
    pub probe: bool,
}

/// The result of a successful MPA negotiation, on either side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// MPA revision of the Reply (1 or 2).
    pub rev: u8,
    /// CRCs are generated and checked in both directions (C set in either
    /// frame, RFC 5044 §7.1.1).
    pub crc: bool,
    /// The peer's IRD from its v2 word (0 when the peer sent none, as siw reports).
    pub peer_ird: u16,
    /// The peer's ORD from its v2 word (0 when the peer sent none).
    pub peer_ord: u16,
    /// Both frames carried the MPA v2 word.
    pub enhanced: bool,
    /// The agreed RTR, `None` when peer-to-peer mode is not in use. The
    /// Initiator sends it; the Responder waits for it.
    pub rtr: Option<Rtr>,
    /// The peer's ULP private data.
    pub private_data: Vec<u8>,
    /// The IRD we announced (after this module's adjustments).
    pub local_ird: u16,
    /// The ORD we announced (after this module's adjustments).
    pub local_ord: u16,
    /// Both ends set [`MpaFlags::COMPLETION_PROBE`]: each accepts one zero-length Read
    /// Request beyond its IRD, and may send one beyond its ORD (module documentation).
    pub probe: bool,
}

/// How the Responder answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitiatorOutcome {
    /// R = 0: the connection goes to the Full Operation Phase.
    Accepted(Negotiated),
    /// R = 1: the Responder refused; its ULP private data (v2 word removed).
    Rejected {
        /// The Responder's ULP private data.
        private_data: Vec<u8>,
    },
}

/// The Initiator's side of the MPA exchange.
#[derive(Debug, Clone)]
pub struct Initiator {
    cfg: InitiatorConfig,
}

fn check_len(len: usize, limit: usize) -> Result<(), MpaError> {
    if len > limit {
        Err(MpaError::PrivateDataTooLong(len))
    } else {
        Ok(())
    }
}

impl Initiator {
    /// Validates and adjusts `cfg` (IRD/ORD clamped to 0x3FFE).
    ///
    /// The ORD is announced as given: with ORD 0 only the Write RTR is offered, since a Read
    /// RTR would take an ORD slot the application did not ask for (RFC 6581 §9.2) and the
    /// peer's `GetReadLimits` must show the application's value.
    ///
    /// # Errors
    ///
    /// [`MpaError::PrivateDataTooLong`] if `cfg.private_data` exceeds
    /// [`INTEROP_ULP_PRIVATE_DATA`] (252) bytes.
    pub fn try_new(mut cfg: InitiatorConfig) -> Result<Self, MpaError> {
        check_len(cfg.private_data.len(), INTEROP_ULP_PRIVATE_DATA)?;
        cfg.ird = cfg.ird.min(IRD_ORD_MAX);
        cfg.ord = cfg.ord.min(IRD_ORD_MAX);
        Ok(Self { cfg })
    }

    /// Like [`Initiator::try_new`].
    ///
    /// # Panics
    ///
    /// If `cfg.private_data` exceeds [`INTEROP_ULP_PRIVATE_DATA`] (252) bytes;
    /// use [`Initiator::try_new`] when the length is not already checked.
    #[must_use]
    pub fn new(cfg: InitiatorConfig) -> Self {
        match Self::try_new(cfg) {
            Ok(i) => i,
            Err(e) => panic!("Initiator::new: {e}"),
        }
    }

    /// The IRD announced in the Request.
    #[must_use]
    pub fn ird(&self) -> u16 {
        self.cfg.ird
    }

    /// The ORD announced in the Request.
    #[must_use]
    pub fn ord(&self) -> u16 {
        self.cfg.ord
    }

    /// The MPA Request bytes to send: Rev 2, S, C as configured, never M; the
    /// v2 word with A/C/D set when `p2p` (RFC 5044 §7.1.1, RFC 6581 §6, §9);
    /// [`MpaFlags::COMPLETION_PROBE`] when `probe`.
    #[must_use]
    pub fn request(&self) -> Vec<u8> {
        let mut flags = if self.cfg.crc {
            MpaFlags::CRC
        } else {
            MpaFlags::empty()
        };
        // Private, in a reserved bit that other implementations ignore (module documentation).
        flags.set(MpaFlags::COMPLETION_PROBE, self.cfg.probe);
        let rtr = match (self.cfg.p2p, self.cfg.ord) {
            (false, _) => RtrTypes::empty(),
            // RFC 6581 §9.2: a Read RTR takes an ORD slot; offer it only when we have one.
            (true, 0) => RtrTypes::WRITE,
            (true, _) => RtrTypes::WRITE | RtrTypes::READ,
        };
        MpaFrame {
            kind: FrameKind::Request,
            flags,
            rev: REVISION_2,
            enhanced: Some(EnhancedData {
                p2p: self.cfg.p2p,
                rtr,
                ird: self.cfg.ird,
                ord: self.cfg.ord,
            }),
            ulp_data: &self.cfg.private_data,
        }
        .to_vec()
    }

    /// The Terminate to send when [`Initiator::handle_reply`] failed on the Reply in `buf`
    /// with an error that ends a negotiation the Reply itself completed, so that FPDU framing
    /// is on: [`MpaError::NoMatchingRtr`] (RFC 6581 §9.2 item 3: "it sends a Terminate with
    /// 0x2/0x0/0x07 and closes", docs/WIRE.md §2.9) and [`MpaError::InsufficientIrd`]
    /// (§9.1, 0x2/0x0/0x06). Framed with the CRC setting the
    /// exchange agreed (either side's C). `None` for any other failure: a frame that could
    /// not be read leaves no framing to speak in, and the connection just closes (RFC 5044
    /// §7.1.2).
    #[must_use]
    pub fn terminate_for(&self, err: &MpaError, buf: &[u8]) -> Option<Vec<u8>> {
        if !matches!(err, MpaError::NoMatchingRtr | MpaError::InsufficientIrd) {
            return None;
        }
        let (f, _) = MpaFrame::decode(buf).ok()??;
        let crc = self.cfg.crc || f.flags.contains(MpaFlags::CRC);
        let mut body = [0u8; TERMINATE_MAX_LEN];
        let n = Terminate::new(err.term_error()).encode(&mut body);
        Some(encode_fpdu(&DdpHeader::terminate(), &body[..n], &[], crc))
    }

    /// Feeds the bytes received so far (the caller keeps bytes this call does
    /// not consume). `Ok(None)`: need more bytes. `Ok(Some((outcome, n)))`:
    /// the Reply took exactly `n` bytes; anything after it is FPDU data.
    /// No partial state is kept between calls: each call parses `buf` from
    /// its start, so always pass everything received since the Request.
    ///
    /// Rules: Rev 1 and 2 are accepted (a Rev 1 or non-enhanced Reply means
    /// no v2 features: `rtr = None`, peer IRD/ORD 0); CRC is on if either
    /// side set C; A in a Reply to a non-P2P Request is ignored (old
    /// softiwarp sets it always); with P2P requested, the Reply must echo A
    /// and accept Write (preferred) or Read.
    ///
    /// # Errors
    ///
    /// Frame errors of [`MpaFrame::decode`]; [`MpaError::UnexpectedKey`] for a
    /// Request (both sides are Initiators, RFC 5044 §7.1.2 rule 8);
    /// [`MpaError::UnsupportedRevision`] for Rev 0; [`MpaError::MarkersRequested`]
    /// for M set; [`MpaError::NoMatchingRtr`] (LLP code 0x07) as above.
    pub fn handle_reply(
        &mut self,
        buf: &[u8],
    ) -> Result<Option<(InitiatorOutcome, usize)>, MpaError> {
        let Some((f, n)) = MpaFrame::decode(buf)? else {
            return Ok(None);
        };
        if f.kind != FrameKind::Reply {
            return Err(MpaError::UnexpectedKey(f.kind));
        }
        if f.rev < REVISION_1 {
            return Err(MpaError::UnsupportedRevision(f.rev));
        }
        // RFC 5044 §7.1.2 rule 2: R = 1 rejects; pass the ULP data up.
        if f.flags.contains(MpaFlags::REJECT) {
            let private_data = f.ulp_data.to_vec();
            return Ok(Some((InitiatorOutcome::Rejected { private_data }, n)));
        }
        // docs/WIRE.md §2.4: markers are not supported (siw fails these too).
        if f.flags.contains(MpaFlags::MARKERS) {
            return Err(MpaError::MarkersRequested);
        }
        // RFC 6581 §9.2 item 3: send exactly one of the types in the Reply.
        let rtr = match (self.cfg.p2p, f.enhanced) {
            (true, Some(e)) => {
                if !e.p2p {
                    return Err(MpaError::NoMatchingRtr);
                }
                if e.rtr.contains(RtrTypes::WRITE) {
                    Some(Rtr::Write)
                } else if e.rtr.contains(RtrTypes::READ) && self.cfg.ord > 0 && e.ird > 0 {
                    // A Read RTR takes one of our ORD slots and one of the peer's IRD.
                    Some(Rtr::Read)
                } else {
                    return Err(MpaError::NoMatchingRtr);
                }
            }
            // RFC 6581 §10: a non-enhanced Reply gives no v2 features.
            _ => None,
        };
        // RFC 6581 §9.1: our IRD (announced, fixed) must cover the Responder's ORD; 0x3FFF
        // leaves the limit to the ULP.
        if let Some(e) = f.enhanced {
            if e.ord != IRD_ORD_MASK && self.cfg.ird != IRD_ORD_MASK && e.ord > self.cfg.ird {
                return Err(MpaError::InsufficientIrd);
            }
        }
        let (peer_ird, peer_ord) = f.enhanced.map_or((0, 0), |e| (e.ird, e.ord));
        let negotiated = Negotiated {
            rev: f.rev,
            crc: self.cfg.crc || f.flags.contains(MpaFlags::CRC),
            peer_ird,
            peer_ord,
            enhanced: f.enhanced.is_some(),
            rtr,
            private_data: f.ulp_data.to_vec(),
            local_ird: self.cfg.ird,
            local_ord: self.cfg.ord,
            // The accepting bit, never the offered one: a Reply that echoes our Request's flag
            // byte (siw's) carries the offer, not an acceptance; anything else means no probes.
            probe: self.cfg.probe && f.flags.contains(MpaFlags::COMPLETION_PROBE_ACCEPTED),
        };
        Ok(Some((InitiatorOutcome::Accepted(negotiated), n)))
    }
}

/// An MPA Request as the Responder received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectRequest {
    /// Revision (1 or 2).
    pub rev: u8,
    /// C: the Initiator wants CRCs.
    pub crc: bool,
    /// M: the Initiator requires markers; see [`must_reject`].
    pub markers: bool,
    /// The v2 word, when the Request is enhanced (Rev 2 with S).
    pub enhanced: Option<EnhancedData>,
    /// The Initiator's ULP private data (v2 word removed).
    pub private_data: Vec<u8>,
    /// The Initiator offered netdirect's Write completion probe
    /// ([`MpaFlags::COMPLETION_PROBE`]).
    pub probe: bool,
}

/// The Responder's side of the MPA exchange (parses the Request).
#[derive(Debug, Clone, Default)]
pub struct Responder {
    _private: (),
}

impl Responder {
    /// A Responder waiting for the Request.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the bytes received so far; same need-more / consumed contract as
    /// [`Initiator::handle_reply`] (an FPDU never follows a Request, but bytes
    /// after the frame are left alone anyway). Each call parses `buf` from
    /// its start.
    ///
    /// # Errors
    ///
    /// Frame errors of [`MpaFrame::decode`]; [`MpaError::UnexpectedKey`] for a
    /// Reply; [`MpaError::UnsupportedRevision`] for Rev 0.
    pub fn handle_request(
        &mut self,
        buf: &[u8],
    ) -> Result<Option<(ConnectRequest, usize)>, MpaError> {
        let Some((f, n)) = MpaFrame::decode(buf)? else {
            return Ok(None);
        };
        if f.kind != FrameKind::Request {
            return Err(MpaError::UnexpectedKey(f.kind));
        }
        if f.rev < REVISION_1 {
            return Err(MpaError::UnsupportedRevision(f.rev));
        }
        // RFC 5044 §7.1.1: R is not checked in Requests.
        let req = ConnectRequest {
            rev: f.rev,
            crc: f.flags.contains(MpaFlags::CRC),
            markers: f.flags.contains(MpaFlags::MARKERS),
            enhanced: f.enhanced,
            private_data: f.ulp_data.to_vec(),
            probe: f.flags.contains(MpaFlags::COMPLETION_PROBE),
        };
        Ok(Some((req, n)))
    }
}

/// `true` when the Request must be rejected (use [`reject`], not [`accept`]):
/// it requires markers, which this crate cannot send (siw rejects these too,
/// docs/WIRE.md §2.4).
#[must_use]
pub fn must_reject(req: &ConnectRequest) -> bool {
    req.markers
}

/// What the Responder accepts with.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AcceptConfig {
    /// Our CRC wish; the final setting is `req.crc || crc`.
    pub crc: bool,
    /// Our IRD (raised to 1 if a Read RTR is chosen; clamped to 0x3FFE).
    pub ird: u16,
    /// Our ORD (lowered to the Initiator's IRD unless that is 0x3FFF,
    /// RFC 6581 §9.1; clamped to 0x3FFE).
    pub ord: u16,
    /// ULP private data: at most 252 bytes (256 for a Rev 1 Request).
    pub private_data: Vec<u8>,
    /// Support netdirect's Write completion probe: answer a Request that offers it
    /// ([`MpaFlags::COMPLETION_PROBE`]) with [`MpaFlags::COMPLETION_PROBE_ACCEPTED`] (module
    /// documentation).
    pub probe: bool,
}

/// Revision of our Reply: Rev 1 answers Rev 1 (RFC 6581 §10).
fn reply_rev(req: &ConnectRequest) -> u8 {
    if req.enhanced.is_some() {
        REVISION_2
    } else {
        req.rev.clamp(REVISION_1, REVISION_2)
    }
}

fn reply_pd_limit(req: &ConnectRequest) -> usize {
    if req.enhanced.is_some() {
        INTEROP_ULP_PRIVATE_DATA
    } else {
        INTEROP_PRIVATE_DATA
    }
}

/// Builds the accepting Reply and the negotiated result.
///
/// * Rev 1 (or non-enhanced) Request → Rev 1 Reply without the word
///   (RFC 6581 §10); no RTR, peer IRD/ORD 0.
/// * Enhanced Request → Rev 2 + S Reply; A echoed; RTR: Write if offered,
///   else Read, else (A = 1 with nothing usable) propose Write; only the
///   chosen type is set (RFC 6581 §9.2; siw's choice). A Read RTR raises our
///   IRD to ≥ 1. Our ORD is limited to the Initiator's IRD (RFC 6581 §9.1).
/// * C is set when either side wants CRCs.
/// * [`MpaFlags::COMPLETION_PROBE_ACCEPTED`] is set when the Request offers the probe
///   ([`MpaFlags::COMPLETION_PROBE`]) and `cfg.probe`.
///
/// Markers are not supported: if [`must_reject`] is true the caller must
/// call [`reject`] instead (this function ignores M).
///
/// # Errors
///
/// [`MpaError::PrivateDataTooLong`] when `cfg.private_data` exceeds the limit.
pub fn try_accept(
    req: &ConnectRequest,
    cfg: &AcceptConfig,
) -> Result<(Vec<u8>, Negotiated), MpaError> {
    check_len(cfg.private_data.len(), reply_pd_limit(req))?;
    let rev = reply_rev(req);
    let crc = req.crc || cfg.crc;
    let mut ird = cfg.ird.min(IRD_ORD_MAX);
    let mut ord = cfg.ord.min(IRD_ORD_MAX);
    let mut rtr = None;
    let word = req.enhanced.map(|e| {
        if e.p2p {
            let chosen = if e.rtr.contains(RtrTypes::WRITE) {
                Rtr::Write
            } else if e.rtr.contains(RtrTypes::READ) {
                Rtr::Read
            } else {
                Rtr::Write
            };
            if chosen == Rtr::Read && ird == 0 {
                ird = 1;
            }
            rtr = Some(chosen);
        }
        if e.ird != IRD_ORD_MASK {
            ord = ord.min(e.ird);
        }
        EnhancedData {
            p2p: e.p2p,
            rtr: rtr.map_or(RtrTypes::empty(), Rtr::bit),
            ird,
            ord,
        }
    });
    let mut flags = if crc {
        MpaFlags::CRC
    } else {
        MpaFlags::empty()
    };
    let probe = req.probe && cfg.probe;
    flags.set(MpaFlags::COMPLETION_PROBE_ACCEPTED, probe);
    let bytes = MpaFrame {
        kind: FrameKind::Reply,
        flags,
        rev,
        enhanced: word,
        ulp_data: &cfg.private_data,
    }
    .to_vec();
    let (peer_ird, peer_ord) = req.enhanced.map_or((0, 0), |e| (e.ird, e.ord));
    let negotiated = Negotiated {
        rev,
        crc,
        peer_ird,
        peer_ord,
        enhanced: word.is_some(),
        rtr,
        private_data: req.private_data.clone(),
        local_ird: ird,
        local_ord: ord,
        probe,
    };
    Ok((bytes, negotiated))
}

/// Like [`try_accept`].
///
/// # Panics
///
/// If `cfg.private_data` is longer than 252 bytes (256 for a Rev 1 Request).
#[must_use]
pub fn accept(req: &ConnectRequest, cfg: &AcceptConfig) -> (Vec<u8>, Negotiated) {
    match try_accept(req, cfg) {
        Ok(r) => r,
        Err(e) => panic!("accept: {e}"),
    }
}

/// Builds a rejecting Reply (R = 1, RFC 5044 §7.1.2 rule 2): same revision
/// rule as [`accept`]; C echoed from the Request (as siw does, giving the
/// flag byte `0x70` of docs/WIRE.md §8.2 for an enhanced C=1 Request), M
/// never set; when the Request was enhanced the v2 word comes first (A
/// echoed, no RTR, IRD = ORD = 0), then `private_data`.
///
/// # Errors
///
/// [`MpaError::PrivateDataTooLong`] when `private_data` exceeds the limit
/// (252 bytes, 256 for a Rev 1 Request).
pub fn try_reject(req: &ConnectRequest, private_data: &[u8]) -> Result<Vec<u8>, MpaError> {
    check_len(private_data.len(), reply_pd_limit(req))?;
    Ok(MpaFrame {
        kind: FrameKind::Reply,
        flags: if req.crc {
            MpaFlags::REJECT | MpaFlags::CRC
        } else {
            MpaFlags::REJECT
        },
        rev: reply_rev(req),
        enhanced: req.enhanced.map(|e| EnhancedData {
            p2p: e.p2p,
            rtr: RtrTypes::empty(),
            ird: 0,
            ord: 0,
        }),
        ulp_data: private_data,
    }
    .to_vec())
}

/// Like [`try_reject`].
///
/// # Panics
///
/// If `private_data` is longer than 252 bytes (256 for a Rev 1 Request).
#[must_use]
pub fn reject(req: &ConnectRequest, private_data: &[u8]) -> Vec<u8> {
    match try_reject(req, private_data) {
        Ok(r) => r,
        Err(e) => panic!("reject: {e}"),
    }
}

/// The Initiator's RTR FPDU in siw's form (docs/WIRE.md §2.9): a Write RTR
/// is a zero-length tagged Write to STag 1, TO 0; a Read RTR is a Read
/// Request for 0 bytes (sink STag 0/TO 0, source STag 1/TO 0) whose MSN is
/// taken from `tx` (QN 1), so later Read Requests continue the sequence.
#[must_use]
pub fn rtr_fpdu(rtr: Rtr, tx: &mut TxMsn, crc_on: bool) -> Vec<u8> {
    match rtr {
        Rtr::Write => encode_fpdu(&DdpHeader::write(1, 0, true), &[], &[], crc_on),
        Rtr::Read => {
            let rr = ReadRequest {
                sink_stag: 0,
                sink_to: 0,
                size: 0,
                src_stag: 1,
                src_to: 0,
            };
            let ddp = DdpHeader::read_request(tx.next(QN_READ_REQUEST));
            encode_fpdu(&ddp, &rr.to_bytes(), &[], crc_on)
        }
    }
}

/// `true` when `seg` is the RTR the Responder waits for: a zero-length RDMA
/// Write (STag/TO not checked, RFC 5041 §5.2) or a zero-size Read Request
/// (source not validated, RFC 5040 §5.2.1; it must still be answered with a
/// zero-length Read Response).
#[must_use]
pub fn is_rtr(rtr: Rtr, seg: &SegmentHeader) -> bool {
    match rtr {
        Rtr::Write => seg.ddp.opcode() == Opcode::Write && seg.ddp.last() && seg.payload_len == 0,
        Rtr::Read => seg.read_request.is_some_and(|r| r.size == 0),
    }
}
