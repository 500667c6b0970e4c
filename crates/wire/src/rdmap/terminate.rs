//! The RDMAP Terminate header (RFC 5040 §4.8).
//!
//! Layout after the untagged DDP header (QN 2, MSN 1, MO 0, L=1):
//!
//! ```text
//! Terminate Control (32, big-endian):
//!     Layer(4) | EType(4) | Error Code(8) | M | D | R | Reserved(13)
//! DDP Segment Length (16)        present if M or D
//! Terminated DDP Header (14/18)  present if D; length from its T bit
//! Terminated RDMA Header (28)    present if R
//! ```

use super::{TermError, READ_REQUEST_LEN};
use crate::ddp::{header_len_for_ctrl, DdpHeader, UNTAGGED_LEN};

/// Largest encoded Terminate header: control (4) + DDP segment length (2) +
/// untagged DDP header (18) + Read Request header (28).
pub const TERMINATE_MAX_LEN: usize = 4 + 2 + UNTAGGED_LEN + READ_REQUEST_LEN;

// RFC 5040 §4.8: header-control bits in the Terminate Control word.
const FLAG_M: u32 = 1 << 15;
const FLAG_D: u32 = 1 << 14;
const FLAG_R: u32 = 1 << 13;

/// The fields of a received Terminate control word: Layer, EType, Error Code, and the M, D
/// and R bits.
///
/// RFC 5040 §4.8 puts Layer in the top nibble and M/D/R at bits 15..13 (big-endian). Linux
/// siw declares the word as C bitfields in little-endian order, so on x86 it sends Layer and
/// EType swapped within the first byte and M/D/R in the *low* bits of the third byte (0.1.2),
/// which the RFC reserves (docs/WIRE.md §6.2). A word with reserved bits set where siw puts
/// its flags, and no other flag or reserved bit, is read siw's way; a peer that follows the
/// RFC keeps reserved bits 0 and is never read so. (A siw Terminate without any flag cannot
/// be told from an RFC one, and is read as the RFC says.)
fn control_fields(b: [u8; 4]) -> (u8, u8, u8, bool, bool, bool) {
    let ctrl = u32::from_be_bytes(b);
    let rfc = (
        b[0] >> 4,
        b[0] & 0x0F,
        b[1],
        ctrl & FLAG_M != 0,
        ctrl & FLAG_D != 0,
        ctrl & FLAG_R != 0,
    );
    let siw = (
        b[0] & 0x0F,
        b[0] >> 4,
        b[1],
        b[2] & 0x01 != 0,
        b[2] & 0x02 != 0,
        b[2] & 0x04 != 0,
    );
    let siw_flags_only = b[2] & 0xF8 == 0 && b[2] & 0x07 != 0 && b[3] == 0;
    if siw_flags_only {
        siw
    } else {
        rfc
    }
}
const DDP_FLAG_TAGGED: u8 = 0x80;

/// The "Terminated DDP Header" of a Terminate: the raw DDP header of the
/// offending segment, starting at its DDP control byte (RFC 5040 §4.8).
///
/// Invariant: 14 bytes when the header's T bit is set, 18 bytes otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TermDdpHeader {
    bytes: [u8; UNTAGGED_LEN],
    len: u8,
}

impl TermDdpHeader {
    /// Takes the DDP header at the start of `raw` (beginning with the DDP
    /// control byte); its length (14 tagged / 18 untagged) comes from the T
    /// bit, and any bytes after it are ignored. `None` if `raw` is too short.
    #[must_use]
    pub fn new(raw: &[u8]) -> Option<Self> {
        let len = header_len_for_ctrl(*raw.first()?);
        let src = raw.get(..len)?;
        let mut bytes = [0u8; UNTAGGED_LEN];
        bytes[..len].copy_from_slice(src);
        Some(Self {
            bytes,
            // len is 14 or 18.
            len: len as u8,
        })
    }

    /// Builds the raw form of a parsed DDP header.
    #[must_use]
    pub fn from_header(hdr: &DdpHeader) -> Self {
        let mut bytes = [0u8; UNTAGGED_LEN];
        let len = hdr.encode(&mut bytes);
        Self {
            bytes,
            len: len as u8,
        }
    }

    /// The 14 or 18 raw bytes.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// `true` when this is a tagged (14-byte) header.
    #[must_use]
    pub fn is_tagged(&self) -> bool {
        self.bytes[0] & DDP_FLAG_TAGGED != 0
    }

    /// Decodes the header, e.g. to attribute a received Terminate to a work
    /// request by QN/MSN or STag/TO (docs/WIRE.md §4.4).
    ///
    /// # Errors
    ///
    /// Whatever [`DdpHeader::parse`] reports for these bytes (a peer may have
    /// copied a header that was itself invalid: that may be why it terminated).
    pub fn decode(&self) -> Result<DdpHeader, TermError> {
        DdpHeader::parse(self.as_bytes()).map(|(h, _)| h)
    }
}

/// A Terminate message's RDMAP header (RFC 5040 §4.8).
///
/// The header-control bits are derived from the options: M = `ddp_seg_len`
/// is `Some`, D = `ddp_header` is `Some`, R = `rdma_header` is `Some`.
/// RFC 5040 §4.8 Figure 10 says which to include: none for LLP errors and
/// local catastrophic errors, DDP segment length + DDP header for DDP errors,
/// the DDP header "if possible" for RDMAP remote operation errors, and
/// additionally the Read Request header for RDMAP remote protection errors
/// caused by a Read Request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Terminate {
    /// Layer / EType / Error Code.
    pub error: TermError,
    /// DDP Segment Length of the offending segment (M bit). When only D is
    /// set, the field is still sent (as 0) but is not valid, so it parses as
    /// `None`. siw puts the segment's *payload* length here: treat it as
    /// diagnostic only (docs/WIRE.md §4.2).
    pub ddp_seg_len: Option<u16>,
    /// Terminated DDP Header (D bit).
    pub ddp_header: Option<TermDdpHeader>,
    /// Terminated RDMA Header (R bit): the 28-byte Read Request header,
    /// updated to show progress if the read had started (RFC 5040 §4.8).
    pub rdma_header: Option<[u8; READ_REQUEST_LEN]>,
}

impl Terminate {
    /// A Terminate with only Layer/EType/Code (all header-control bits 0), as
    /// RFC 5040 §7.1 rule 1 requires for errors found while building an
    /// outbound message, and Figure 10 for LLP and local catastrophic errors.
    #[must_use]
    pub const fn new(error: TermError) -> Self {
        Self {
            error,
            ddp_seg_len: None,
            ddp_header: None,
            rdma_header: None,
        }
    }

    /// The 32-bit Terminate Control word (RFC 5040 §4.8).
    #[must_use]
    pub fn control(&self) -> u32 {
        let (layer, etype, code) = self.error.parts();
        let mut w = (u32::from(layer & 0x0F) << 28)
            | (u32::from(etype & 0x0F) << 24)
            | (u32::from(code) << 16);
        if self.ddp_seg_len.is_some() {
            w |= FLAG_M;
        }
        if self.ddp_header.is_some() {
            w |= FLAG_D;
        }
        if self.rdma_header.is_some() {
            w |= FLAG_R;
        }
        w
    }

    /// Number of bytes [`Terminate::encode`] writes (4..=[`TERMINATE_MAX_LEN`]).
    #[must_use]
    pub fn encoded_len(&self) -> usize {
        let mut n = 4;
        if self.ddp_seg_len.is_some() || self.ddp_header.is_some() {
            n += 2;
        }
        if let Some(h) = &self.ddp_header {
            n += h.as_bytes().len();
        }
        if self.rdma_header.is_some() {
            n += READ_REQUEST_LEN;
        }
        n
    }

    /// Encodes the Terminate header into `out` (no allocation); returns the
    /// number of bytes written ([`Terminate::encoded_len`]).
    pub fn encode(&self, out: &mut [u8; TERMINATE_MAX_LEN]) -> usize {
        out[..4].copy_from_slice(&self.control().to_be_bytes());
        let mut n = 4;
        // RFC 5040 §4.8: the DDP Segment Length must be valid if M is set and
        // present if D is set.
        if self.ddp_seg_len.is_some() || self.ddp_header.is_some() {
            out[n..n + 2].copy_from_slice(&self.ddp_seg_len.unwrap_or(0).to_be_bytes());
            n += 2;
        }
        if let Some(h) = &self.ddp_header {
            let b = h.as_bytes();
            out[n..n + b.len()].copy_from_slice(b);
            n += b.len();
        }
        if let Some(r) = &self.rdma_header {
            out[n..n + READ_REQUEST_LEN].copy_from_slice(r);
            n += READ_REQUEST_LEN;
        }
        n
    }

    /// Parses a Terminate header from the start of `buf` (the bytes after the
    /// DDP header); returns it and the number of bytes it occupies. Trailing
    /// bytes are not examined. Unknown error codes parse as
    /// [`TermError::Unknown`]; reserved bits are ignored.
    ///
    /// # Errors
    ///
    /// `buf` shorter than the header its control bits announce:
    /// [`TermError::DdpUntaggedMessageTooLong`] (this crate's length-error code).
    pub fn parse(buf: &[u8]) -> Result<(Self, usize), TermError> {
        let need = Self::wire_len(buf).ok_or(TermError::LENGTH)?;
        if buf.len() < need {
            return Err(TermError::LENGTH);
        }
        let (layer, etype, code, m, d, r) = control_fields([buf[0], buf[1], buf[2], buf[3]]);
        let error = TermError::from_wire(layer, etype, code);
        let mut n = 4;
        let mut ddp_seg_len = None;
        if m || d {
            let len = u16::from_be_bytes([buf[4], buf[5]]);
            if m {
                ddp_seg_len = Some(len);
            }
            n += 2;
        }
        let mut ddp_header = None;
        if d {
            // wire_len checked the length, so `new` cannot fail here.
            let h = TermDdpHeader::new(&buf[n..]).ok_or(TermError::LENGTH)?;
            n += h.as_bytes().len();
            ddp_header = Some(h);
        }
        let mut rdma_header = None;
        if r {
            let mut a = [0u8; READ_REQUEST_LEN];
            a.copy_from_slice(&buf[n..n + READ_REQUEST_LEN]);
            rdma_header = Some(a);
            n += READ_REQUEST_LEN;
        }
        Ok((
            Self {
                error,
                ddp_seg_len,
                ddp_header,
                rdma_header,
            },
            n,
        ))
    }

    /// Given a prefix of a Terminate header, how long the whole header is,
    /// as far as can be told: `None` if even the control word is incomplete;
    /// otherwise a length that is final once `buf.len()` reaches it. Used by
    /// the deframer to stage a Terminate header byte by byte.
    pub(crate) fn wire_len(buf: &[u8]) -> Option<usize> {
        let b = buf.get(..4)?;
        let (.., m, d, r) = control_fields([b[0], b[1], b[2], b[3]]);
        let mut n = 4;
        if m || d {
            n += 2;
        }
        if d {
            match buf.get(n) {
                // Need the DDP control byte to know the header length.
                None => return Some(n + 1),
                Some(&ctrl) => n += header_len_for_ctrl(ctrl),
            }
        }
        if r {
            n += READ_REQUEST_LEN;
        }
        Some(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_word_matches_spec_example() {
        // docs/WIRE.md §8.5: 0x1/0x2/0x02, M=1, D=1 -> 0x1202c000.
        let ddp = [0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0];
        let t = Terminate {
            error: TermError::DdpUntaggedNoBuffer,
            ddp_seg_len: Some(26),
            ddp_header: TermDdpHeader::new(&ddp),
            rdma_header: None,
        };
        assert_eq!(t.control(), 0x1202_c000);
        let mut out = [0u8; TERMINATE_MAX_LEN];
        let n = t.encode(&mut out);
        assert_eq!(n, 24);
        assert_eq!(n, t.encoded_len());
        assert_eq!(Terminate::parse(&out[..n]), Ok((t, n)));
    }

    /// Linux siw's Terminates on x86 (its control word is a little-endian C bitfield): Layer
    /// and EType swapped, M/D/R in the low bits of the third byte. Read as siw meant them,
    /// copied DDP header included; RFC words keep their reading.
    #[test]
    fn siw_little_endian_control_words() {
        let ddp = [0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0];
        // 0x1/0x2/0x02 with M and D, as siw sends it: 21 02 03 00, length, DDP header.
        let mut b = vec![0x21, 0x02, 0x03, 0x00, 0x00, 26];
        b.extend_from_slice(&ddp);
        let (t, n) = Terminate::parse(&b).expect("parses");
        assert_eq!(n, b.len());
        assert_eq!(t.error, TermError::DdpUntaggedNoBuffer);
        assert_eq!(t.ddp_seg_len, Some(26));
        assert_eq!(t.ddp_header, TermDdpHeader::new(&ddp));
        // siw's "unexpected opcode" (0x0/0x2/0x06) with M and D: 20 06 03 00 — in the RFC
        // reading a known LLP code (0x2/0x0/0x06) with no headers, which it is not.
        let tagged = [0xC1, 0x4F, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        let mut b = vec![0x20, 0x06, 0x03, 0x00, 0x00, 14];
        b.extend_from_slice(&tagged);
        let (t, _) = Terminate::parse(&b).expect("parses");
        assert_eq!(t.error, TermError::RdmapUnexpectedOpcode);
        assert!(t.ddp_header.is_some());
        // No flags at all: nothing tells siw's word from an RFC one; the RFC reading stands.
        assert_eq!(
            Terminate::parse(&[0x21, 0x02, 0, 0]).unwrap().0.error,
            TermError::from_wire(2, 1, 2)
        );
        assert_eq!(
            Terminate::parse(&[0x12, 0x02, 0, 0]).unwrap().0.error,
            TermError::DdpUntaggedNoBuffer
        );
        // The RFC form of every word we send reads back unchanged.
        let t = Terminate {
            error: TermError::DdpUntaggedNoBuffer,
            ddp_seg_len: Some(26),
            ddp_header: TermDdpHeader::new(&ddp),
            rdma_header: None,
        };
        let mut out = [0u8; TERMINATE_MAX_LEN];
        let n = t.encode(&mut out);
        assert_eq!(Terminate::parse(&out[..n]), Ok((t, n)));
    }

    #[test]
    fn d_without_m_has_invalid_length() {
        let t = Terminate {
            error: TermError::RdmapUnexpectedOpcode,
            ddp_seg_len: None,
            ddp_header: TermDdpHeader::new(&[0xC1, 0x4F, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]),
            rdma_header: None,
        };
        let mut out = [0u8; TERMINATE_MAX_LEN];
        let n = t.encode(&mut out);
        assert_eq!(n, 4 + 2 + 14);
        assert_eq!(Terminate::parse(&out[..n]).unwrap().0, t);
        assert_eq!(Terminate::parse(&out[..n - 1]), Err(TermError::LENGTH));
    }
}
