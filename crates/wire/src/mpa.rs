//! MPA Request/Reply frames of the Startup Phase (RFC 5044 §7.1.1), with the
//! MPA v2 enhanced connection-establishment word (RFC 6581 §6, §9).
//!
//! ```text
//! Key (16) | Flags M C R S Res(4) (1) | Rev (1) | PD_Length (16, BE) | Private Data
//! ```
//!
//! With S set (and Rev ≥ 2) the private data starts with the 4-byte word
//! `A | B | IRD(14)`, `C | D | ORD(14)`, big-endian. This module only encodes
//! and decodes frames; the negotiation rules are in [`crate::handshake`].

use crate::rdmap::TermError;

/// Key of an MPA Request frame: `"MPA ID Req Frame"` (RFC 5044 §7.1.1).
pub const KEY_REQUEST: [u8; 16] = *b"MPA ID Req Frame";
/// Key of an MPA Reply frame: `"MPA ID Rep Frame"` (RFC 5044 §7.1.1).
pub const KEY_REPLY: [u8; 16] = *b"MPA ID Rep Frame";
/// Length of the fixed part of a Request/Reply frame (RFC 5044 §7.1.1).
pub const HEADER_LEN: usize = 20;
/// Largest PD_Length RFC 5044 §7.1.1 allows (rule 9: larger is malformed).
pub const MAX_PRIVATE_DATA: usize = 512;
/// Largest private data Linux siw and cxgb4 accept, the v2 word included
/// (`MPA_MAX_PRIVDATA`, docs/WIRE.md §2.2). This crate never sends more.
pub const INTEROP_PRIVATE_DATA: usize = 256;
/// Size of the MPA v2 IRD/ORD word (RFC 6581 §6).
pub const ENHANCED_DATA_LEN: usize = 4;
/// Largest ULP private data this crate sends in an enhanced frame (256 − 4).
pub const INTEROP_ULP_PRIVATE_DATA: usize = INTEROP_PRIVATE_DATA - ENHANCED_DATA_LEN;
/// MPA revision of RFC 5044.
pub const REVISION_1: u8 = 1;
/// MPA revision required for RFC 6581 features.
pub const REVISION_2: u8 = 2;
/// Mask of the 14-bit IRD and ORD fields (RFC 6581 §9.1). The all-ones value
/// 0x3FFF means "the ULP negotiates this itself".
pub const IRD_ORD_MASK: u16 = 0x3FFF;
/// The largest depth an IRD or ORD field carries as a number (docs/WIRE.md §9): larger ones
/// are clamped to it, so that none turns into [`IRD_ORD_MASK`]'s "negotiated by the ULP".
pub const IRD_ORD_MAX: u16 = 0x3FFE;

bitflags::bitflags! {
    /// The flag byte of a Request/Reply frame (RFC 5044 §7.1.1, RFC 6581 §6).
    /// Of the four reserved bits, two (0x09) are dropped on decode and sent as 0; the other
    /// two are netdirect's private [`MpaFlags::COMPLETION_PROBE`] (0x04, offered in a Request)
    /// and [`MpaFlags::COMPLETION_PROBE_ACCEPTED`] (0x02, in a Reply).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct MpaFlags: u8 {
        /// M: the sender requires markers in what the peer sends.
        const MARKERS = 0x80;
        /// C: the sender wants CRCs (on for both directions if either sets it).
        const CRC = 0x40;
        /// R: the Reply rejects the connection (Reply only).
        const REJECT = 0x20;
        /// S: enhanced (RFC 6581): the private data starts with the IRD/ORD word.
        const ENHANCED = 0x10;
        /// Private to netdirect, in a reserved bit ("Res: send 0, never check", RFC 5044
        /// §7.1.1; Linux siw uses 0x08 privately the same way): in a Request, the Initiator
        /// offers netdirect's Write completion probe: it accepts one zero-length RDMA Read
        /// Request beyond the IRD it announces (see [`crate::handshake`]). Never sent in a
        /// Reply, so that a Responder which copies the Request's flag byte into its Reply (siw
        /// does, docs/WIRE.md §2.4) cannot seem to accept.
        const COMPLETION_PROBE = 0x04;
        /// Private to netdirect, in another reserved bit: in a Reply, the Responder accepts the
        /// probe the Request offered. Never sent in a Request, so no echo of one carries it.
        const COMPLETION_PROBE_ACCEPTED = 0x02;
    }
}

bitflags::bitflags! {
    /// Zero-length RTR message types offered or accepted in the MPA v2 word
    /// (RFC 6581 §9.2): B = Send, C = RDMA Write, D = RDMA Read.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct RtrTypes: u8 {
        /// B bit: zero-length Send.
        const SEND = 0x1;
        /// C bit: zero-length RDMA Write.
        const WRITE = 0x2;
        /// D bit: zero-length RDMA Read.
        const READ = 0x4;
    }
}

/// Which of the two startup frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameKind {
    /// MPA Request, sent by the Initiator.
    Request,
    /// MPA Reply, sent by the Responder.
    Reply,
}

impl FrameKind {
    /// The 16-byte key of this frame kind.
    #[must_use]
    pub const fn key(self) -> &'static [u8; 16] {
        match self {
            Self::Request => &KEY_REQUEST,
            Self::Reply => &KEY_REPLY,
        }
    }
}

// RFC 6581 §6 bit positions inside each 16-bit half of the word.
const BIT_HI: u16 = 0x8000; // A (IRD half) / C (ORD half)
const BIT_LO: u16 = 0x4000; // B (IRD half) / D (ORD half)

/// The MPA v2 "Enhanced RDMA Connection Establishment Data" word
/// (RFC 6581 §6, §9): `A | B | IRD(14)`, `C | D | ORD(14)`, big-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EnhancedData {
    /// A: peer-to-peer mode (an RTR message will be sent).
    pub p2p: bool,
    /// B/C/D: RTR types offered (Request) or accepted (Reply).
    pub rtr: RtrTypes,
    /// Inbound RDMA Read queue depth (14 bits).
    pub ird: u16,
    /// Outbound RDMA Read queue depth (14 bits).
    pub ord: u16,
}

impl EnhancedData {
    /// The 4 wire bytes. IRD and ORD above 0x3FFF are clamped to 0x3FFF.
    #[must_use]
    pub fn encode(&self) -> [u8; 4] {
        let mut hi = self.ird.min(IRD_ORD_MASK);
        if self.p2p {
            hi |= BIT_HI;
        }
        if self.rtr.contains(RtrTypes::SEND) {
            hi |= BIT_LO;
        }
        let mut lo = self.ord.min(IRD_ORD_MASK);
        if self.rtr.contains(RtrTypes::WRITE) {
            lo |= BIT_HI;
        }
        if self.rtr.contains(RtrTypes::READ) {
            lo |= BIT_LO;
        }
        let [a, b] = hi.to_be_bytes();
        let [c, d] = lo.to_be_bytes();
        [a, b, c, d]
    }

    /// Decodes the 4 wire bytes. Every bit pattern is valid.
    #[must_use]
    pub fn decode(word: [u8; 4]) -> Self {
        let hi = u16::from_be_bytes([word[0], word[1]]);
        let lo = u16::from_be_bytes([word[2], word[3]]);
        let mut rtr = RtrTypes::empty();
        rtr.set(RtrTypes::SEND, hi & BIT_LO != 0);
        rtr.set(RtrTypes::WRITE, lo & BIT_HI != 0);
        rtr.set(RtrTypes::READ, lo & BIT_LO != 0);
        Self {
            p2p: hi & BIT_HI != 0,
            rtr,
            ird: hi & IRD_ORD_MASK,
            ord: lo & IRD_ORD_MASK,
        }
    }
}

/// An MPA Request or Reply frame, borrowing its ULP private data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MpaFrame<'a> {
    /// Request or Reply (the key).
    pub kind: FrameKind,
    /// Flags. On encode, `ENHANCED` is set exactly when `enhanced` is `Some`.
    /// On decode, reserved bits other than netdirect's private
    /// [`MpaFlags::COMPLETION_PROBE`] and [`MpaFlags::COMPLETION_PROBE_ACCEPTED`] are dropped, and `ENHANCED` is dropped when
    /// `rev < 2` (the S bit is reserved in RFC 5044 frames).
    pub flags: MpaFlags,
    /// Revision: 0, 1 or 2 are decoded; 2 is needed for `enhanced`.
    pub rev: u8,
    /// The MPA v2 word, present when S is set (and `rev ≥ 2`).
    pub enhanced: Option<EnhancedData>,
    /// The ULP's private data (after the v2 word, if any).
    pub ulp_data: &'a [u8],
}

/// Why an MPA frame or handshake step failed. The connection must be closed;
/// [`MpaError::terminate_code`] gives the LLP Terminate code if one is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum MpaError {
    /// The first bytes are neither MPA key (RFC 5044 §7.1.2 rule 5).
    #[error("bytes are not an MPA Request or Reply (bad key)")]
    BadKey,
    /// A frame of the wrong kind: a Request where a Reply was expected (both
    /// sides acted as Initiator, RFC 5044 §7.1.2 rule 8) or a Reply where a
    /// Request was expected.
    #[error("received an unexpected MPA {0:?} frame")]
    UnexpectedKey(FrameKind),
    /// Rev above 2, or 0 during the handshake (RFC 6581 §6).
    #[error("unsupported MPA revision {0}")]
    UnsupportedRevision(u8),
    /// PD_Length above 512 (RFC 5044 §7.1.1), or local private data above
    /// what this crate sends ([`INTEROP_PRIVATE_DATA`] with the v2 word).
    #[error("MPA private data of {0} bytes is too long")]
    PrivateDataTooLong(usize),
    /// S set with Rev 2 but PD_Length < 4 (RFC 6581 §6).
    #[error("enhanced MPA frame without the IRD/ORD word")]
    MissingEnhancedData,
    /// The Reply asks for markers, which this crate does not support (siw
    /// fails such connections too, docs/WIRE.md §2.4).
    #[error("peer requires MPA markers, which are not supported")]
    MarkersRequested,
    /// Peer-to-peer mode was requested but the Reply neither echoes A nor
    /// accepts a Write or Read RTR (RFC 6581 §9.2).
    #[error("no matching RTR option")]
    NoMatchingRtr,
    /// The Reply's ORD exceeds the IRD we announced (RFC 6581 §9.1: the Initiator must set
    /// IRD ≥ the Responder's ORD, and cannot raise its own).
    #[error("the peer's ORD exceeds our IRD")]
    InsufficientIrd,
}

impl MpaError {
    /// The LLP (layer 0x2, type 0x0 MPA) Terminate error code for this error
    /// (RFC 5044 §8, RFC 6581 §8; docs/WIRE.md §2.10): 0x07 for
    /// [`MpaError::NoMatchingRtr`], 0x04 "invalid MPA Request or Reply
    /// frame" for everything else.
    #[must_use]
    pub const fn terminate_code(&self) -> u8 {
        match self {
            Self::NoMatchingRtr => 0x07,
            Self::InsufficientIrd => 0x06,
            _ => 0x04,
        }
    }

    /// The same as a [`TermError`].
    #[must_use]
    pub const fn term_error(&self) -> TermError {
        match self {
            Self::NoMatchingRtr => TermError::LlpNoMatchingRtr,
            Self::InsufficientIrd => TermError::LlpInsufficientIrd,
            _ => TermError::LlpInvalidMpaFrame,
        }
    }
}

impl MpaFrame<'_> {
    /// Total private data length (v2 word included).
    #[must_use]
    pub fn pd_len(&self) -> usize {
        self.ulp_data.len()
            + if self.enhanced.is_some() {
                ENHANCED_DATA_LEN
            } else {
                0
            }
    }

    /// Appends the frame's bytes to `out` (RFC 5044 §7.1.1, RFC 6581 §6).
    /// Sets `ENHANCED` iff `enhanced` is `Some`; the reserved bits are 0 except netdirect's
    /// private probe bits given in `flags`; `rev` is written as given.
    ///
    /// A frame whose [`MpaFrame::pd_len`] exceeds [`MAX_PRIVATE_DATA`] is
    /// still encoded (useful for negative tests) but peers reject it.
    ///
    /// # Panics
    ///
    /// If [`MpaFrame::pd_len`] exceeds 65535 (not representable).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let pd_len =
            u16::try_from(self.pd_len()).expect("MPA private data longer than 65535 bytes");
        let mut flags = self.flags;
        flags.set(MpaFlags::ENHANCED, self.enhanced.is_some());
        out.reserve(HEADER_LEN + usize::from(pd_len));
        out.extend_from_slice(self.kind.key());
        out.push(flags.bits());
        out.push(self.rev);
        out.extend_from_slice(&pd_len.to_be_bytes());
        if let Some(e) = &self.enhanced {
            out.extend_from_slice(&e.encode());
        }
        out.extend_from_slice(self.ulp_data);
    }

    /// The encoded frame as a new `Vec`.
    #[must_use]
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.encode(&mut v);
        v
    }
}

impl<'a> MpaFrame<'a> {
    /// Decodes a frame from the start of `buf`.
    ///
    /// * `Ok(None)`: `buf` is a valid prefix of a frame; more bytes are needed.
    /// * `Ok(Some((frame, n)))`: the frame occupies exactly `n = 20 +
    ///   PD_Length` bytes. Nothing past it is examined: an FPDU may follow in
    ///   the same buffer.
    ///
    /// Errors are reported as early as possible (a wrong key after its first
    /// differing byte, a bad Rev or PD_Length as soon as the header is in).
    ///
    /// # Errors
    ///
    /// [`MpaError::BadKey`], [`MpaError::UnsupportedRevision`] (Rev > 2),
    /// [`MpaError::PrivateDataTooLong`] (PD_Length > 512),
    /// [`MpaError::MissingEnhancedData`] (S with Rev 2 and PD_Length < 4).
    pub fn decode(buf: &'a [u8]) -> Result<Option<(Self, usize)>, MpaError> {
        // RFC 5044 §7.1.1 / §7.1.2 rule 5: the key.
        let k = buf.len().min(KEY_REQUEST.len());
        let kind = if buf[..k] == KEY_REQUEST[..k] {
            FrameKind::Request
        } else if buf[..k] == KEY_REPLY[..k] {
            FrameKind::Reply
        } else {
            return Err(MpaError::BadKey);
        };
        if buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let mut flags = MpaFlags::from_bits_truncate(buf[16]);
        let rev = buf[17];
        let pd_len = usize::from(u16::from_be_bytes([buf[18], buf[19]]));
        // RFC 6581 §6: revisions 0, 1 and 2 are defined (siw accepts exactly these).
        if rev > REVISION_2 {
            return Err(MpaError::UnsupportedRevision(rev));
        }
        // RFC 5044 §7.1.1, §7.1.2 rule 9.
        if pd_len > MAX_PRIVATE_DATA {
            return Err(MpaError::PrivateDataTooLong(pd_len));
        }
        // RFC 6581 §6: S is only defined for Rev ≥ 2; before that it is a
        // reserved bit, which receivers ignore (RFC 5044 §7.1.1).
        if rev < REVISION_2 {
            flags.remove(MpaFlags::ENHANCED);
        }
        let enhanced = flags.contains(MpaFlags::ENHANCED);
        if enhanced && pd_len < ENHANCED_DATA_LEN {
            return Err(MpaError::MissingEnhancedData);
        }
        let total = HEADER_LEN + pd_len;
        let Some(pd) = buf.get(HEADER_LEN..total) else {
            return Ok(None);
        };
        let (enhanced, ulp_data) = if enhanced {
            let (w, rest) = pd.split_at(ENHANCED_DATA_LEN);
            (Some(EnhancedData::decode([w[0], w[1], w[2], w[3]])), rest)
        } else {
            (None, pd)
        };
        Ok(Some((
            Self {
                kind,
                flags,
                rev,
                enhanced,
                ulp_data,
            },
            total,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enhanced_word_examples() {
        // docs/WIRE.md §8.1: P2P request offering Write and Read RTR.
        let w = EnhancedData {
            p2p: true,
            rtr: RtrTypes::WRITE | RtrTypes::READ,
            ird: 16,
            ord: 16,
        };
        assert_eq!(w.encode(), [0x80, 0x10, 0xc0, 0x10]);
        assert_eq!(EnhancedData::decode(w.encode()), w);
        let siw_reply = EnhancedData::decode([0x80, 0x10, 0x80, 0x10]);
        assert_eq!(siw_reply.rtr, RtrTypes::WRITE);
        let clamped = EnhancedData {
            p2p: false,
            rtr: RtrTypes::SEND,
            ird: 0xFFFF,
            ord: 0x4000,
        };
        assert_eq!(clamped.encode(), [0x7F, 0xFF, 0x3F, 0xFF]);
    }

    #[test]
    fn early_errors() {
        assert_eq!(MpaFrame::decode(b""), Ok(None));
        assert_eq!(MpaFrame::decode(b"MPA ID Re"), Ok(None));
        assert_eq!(MpaFrame::decode(b"MPA ID X"), Err(MpaError::BadKey));
        let mut hdr = KEY_REQUEST.to_vec();
        hdr.extend_from_slice(&[0x10, 2, 0, 2]);
        assert_eq!(MpaFrame::decode(&hdr), Err(MpaError::MissingEnhancedData));
        // Rev 1 with the S bit: S is reserved there, so no word is expected.
        hdr[17] = 1;
        assert_eq!(MpaFrame::decode(&hdr), Ok(None));
        hdr.extend_from_slice(b"ab");
        let (f, n) = MpaFrame::decode(&hdr).unwrap().unwrap();
        assert_eq!(
            (f.flags, f.enhanced, f.ulp_data, n),
            (MpaFlags::empty(), None, &b"ab"[..], 22)
        );
    }
}
