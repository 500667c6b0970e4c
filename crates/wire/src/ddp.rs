//! DDP: Direct Data Placement segment headers (RFC 5041 §4).
//!
//! The first byte of every ULPDU is the DDP control byte
//! `T(1) | L(1) | Rsvd(4) | DV(2)` (RFC 5041 §4.1); the second byte is
//! `RsvdULP[0:7]`, which RDMAP uses as its control byte (RFC 5040 §4.1). A
//! tagged header (T=1) is 14 bytes, an untagged one (T=0) 18 bytes.

use crate::rdmap::{be32, be64, split_control_byte, Opcode, TermError, RDMAP_VERSION};

/// The DDP version this crate speaks (DV field, RFC 5041 §4.1).
pub const DDP_VERSION: u8 = 1;
/// Length of a tagged DDP header: control, RsvdULP(8), STag(32), TO(64) (RFC 5041 §4.2).
pub const TAGGED_LEN: usize = 14;
/// Length of an untagged DDP header: control, RsvdULP(40), QN, MSN, MO (RFC 5041 §4.3).
pub const UNTAGGED_LEN: usize = 18;

/// Untagged queue number of Sends (RFC 5040 §5.3).
pub const QN_SEND: u32 = 0;
/// Untagged queue number of RDMA Read Requests (RFC 5040 §5.2.1).
pub const QN_READ_REQUEST: u32 = 1;
/// Untagged queue number of Terminate messages (RFC 5040 §5.4).
pub const QN_TERMINATE: u32 = 2;

// RFC 5041 §4.1 DDP control byte.
const FLAG_TAGGED: u8 = 0x80;
const FLAG_LAST: u8 = 0x40;
const DV_MASK: u8 = 0x03;

/// Tagged buffer DDP header (RFC 5041 §4.2), used by RDMA Write and RDMA Read
/// Response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TaggedHeader {
    /// L bit: last segment of the message.
    pub last: bool,
    /// RDMAP opcode; must be [`Opcode::Write`] or [`Opcode::ReadResponse`].
    pub opcode: Opcode,
    /// Data Sink STag, identical on every segment of a message.
    pub stag: u32,
    /// Tagged Offset of this segment's first payload byte.
    pub to: u64,
}

/// Untagged buffer DDP header (RFC 5041 §4.3), used by Sends, Read Requests
/// and Terminate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UntaggedHeader {
    /// L bit: last segment of the message.
    pub last: bool,
    /// RDMAP opcode; must be an untagged opcode.
    pub opcode: Opcode,
    /// `RsvdULP[8:39]`: the STag to invalidate for Send with Invalidate (RFC 5040
    /// §4.6). Must be 0 on send for other opcodes; parsed as received (the
    /// receiver ignores it for other opcodes).
    pub inval_stag: u32,
    /// Queue number.
    pub qn: u32,
    /// Message sequence number (per QN, starts at 1; RFC 5041 §4.3).
    pub msn: u32,
    /// Message offset of this segment's payload.
    pub mo: u32,
}

/// A DDP segment header of either kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DdpHeader {
    /// T = 1.
    Tagged(TaggedHeader),
    /// T = 0.
    Untagged(UntaggedHeader),
}

impl DdpHeader {
    /// Tagged header of an RDMA Write segment.
    #[must_use]
    pub const fn write(stag: u32, to: u64, last: bool) -> Self {
        Self::Tagged(TaggedHeader {
            last,
            opcode: Opcode::Write,
            stag,
            to,
        })
    }

    /// Tagged header of an RDMA Read Response segment (STag/TO are the Read
    /// Request's sink STag and sink TO plus this segment's offset).
    #[must_use]
    pub const fn read_response(stag: u32, to: u64, last: bool) -> Self {
        Self::Tagged(TaggedHeader {
            last,
            opcode: Opcode::ReadResponse,
            stag,
            to,
        })
    }

    /// Untagged header of a Send-family segment on QN 0. `inval_stag` is only
    /// sent for the invalidate opcodes (0 otherwise). `opcode` must be one of
    /// the four Send opcodes.
    #[must_use]
    pub const fn send(opcode: Opcode, msn: u32, mo: u32, last: bool, inval_stag: u32) -> Self {
        Self::Untagged(UntaggedHeader {
            last,
            opcode,
            inval_stag: if opcode.carries_invalidate_stag() {
                inval_stag
            } else {
                0
            },
            qn: QN_SEND,
            msn,
            mo,
        })
    }

    /// Untagged header of an RDMA Read Request (QN 1, MO 0, L = 1; RFC 5040 §5.2.1).
    #[must_use]
    pub const fn read_request(msn: u32) -> Self {
        Self::Untagged(UntaggedHeader {
            last: true,
            opcode: Opcode::ReadRequest,
            inval_stag: 0,
            qn: QN_READ_REQUEST,
            msn,
            mo: 0,
        })
    }

    /// Untagged header of the stream's single Terminate (QN 2, MSN 1, MO 0,
    /// L = 1; RFC 5040 §5.4).
    #[must_use]
    pub const fn terminate() -> Self {
        Self::Untagged(UntaggedHeader {
            last: true,
            opcode: Opcode::Terminate,
            inval_stag: 0,
            qn: QN_TERMINATE,
            msn: 1,
            mo: 0,
        })
    }

    /// Encoded length: [`TAGGED_LEN`] or [`UNTAGGED_LEN`].
    #[must_use]
    #[allow(clippy::len_without_is_empty)] // a header is never empty
    pub const fn len(&self) -> usize {
        match self {
            Self::Tagged(_) => TAGGED_LEN,
            Self::Untagged(_) => UNTAGGED_LEN,
        }
    }

    /// `true` for a tagged header.
    #[must_use]
    pub const fn is_tagged(&self) -> bool {
        matches!(self, Self::Tagged(_))
    }

    /// The RDMAP opcode.
    #[must_use]
    pub const fn opcode(&self) -> Opcode {
        match self {
            Self::Tagged(h) => h.opcode,
            Self::Untagged(h) => h.opcode,
        }
    }

    /// The L (last segment) bit.
    #[must_use]
    pub const fn last(&self) -> bool {
        match self {
            Self::Tagged(h) => h.last,
            Self::Untagged(h) => h.last,
        }
    }

    /// Writes the header (big-endian, DV = 1, RV = 1, reserved bits 0) to the
    /// start of `out` and returns [`DdpHeader::len`].
    ///
    /// # Panics
    ///
    /// If `out` is shorter than [`DdpHeader::len`] (a local sizing bug;
    /// `[u8; UNTAGGED_LEN]` always fits).
    pub fn encode(&self, out: &mut [u8]) -> usize {
        let out = &mut out[..self.len()];
        // RFC 5041 §4.1: T | L | Rsvd | DV.
        let mut ctrl = DDP_VERSION;
        if self.last() {
            ctrl |= FLAG_LAST;
        }
        if self.is_tagged() {
            ctrl |= FLAG_TAGGED;
        }
        out[0] = ctrl;
        // RFC 5040 §4.1: RDMAP control byte in RsvdULP[0:7].
        out[1] = self.opcode().control_byte();
        match self {
            // RFC 5041 §4.2.
            Self::Tagged(h) => {
                out[2..6].copy_from_slice(&h.stag.to_be_bytes());
                out[6..14].copy_from_slice(&h.to.to_be_bytes());
            }
            // RFC 5041 §4.3.
            Self::Untagged(h) => {
                out[2..6].copy_from_slice(&h.inval_stag.to_be_bytes());
                out[6..10].copy_from_slice(&h.qn.to_be_bytes());
                out[10..14].copy_from_slice(&h.msn.to_be_bytes());
                out[14..18].copy_from_slice(&h.mo.to_be_bytes());
            }
        }
        self.len()
    }

    /// Parses a DDP header (plus the RDMAP control byte) from the start of
    /// `buf`; returns it and its length. Reserved bits are ignored.
    ///
    /// # Errors
    ///
    /// Checked in this order:
    /// * fewer than 2 bytes → [`TermError::DdpUntaggedMessageTooLong`] (length error);
    /// * DV ≠ 1 → [`TermError::DdpTaggedInvalidVersion`] (T = 1) or
    ///   [`TermError::DdpUntaggedInvalidVersion`] (T = 0) (RFC 5041 §7.2; siw `siw_get_hdr`);
    /// * RV ≠ 1 → [`TermError::RdmapInvalidVersion`] (RFC 5040 §4.8);
    /// * opcode not 0..=7, or T bit inconsistent with the opcode (Write and
    ///   Read Response tagged, the rest untagged) → [`TermError::RdmapUnexpectedOpcode`]
    ///   (RFC 5040 §4.8);
    /// * `buf` shorter than the header → length error as above.
    pub fn parse(buf: &[u8]) -> Result<(Self, usize), TermError> {
        let (&ctrl, &rdmap) = match buf {
            [c, r, ..] => (c, r),
            _ => return Err(TermError::LENGTH),
        };
        let tagged = ctrl & FLAG_TAGGED != 0;
        let last = ctrl & FLAG_LAST != 0;
        // RFC 5041 §4.1 / §7.2: DDP version.
        if ctrl & DV_MASK != DDP_VERSION {
            return Err(if tagged {
                TermError::DdpTaggedInvalidVersion
            } else {
                TermError::DdpUntaggedInvalidVersion
            });
        }
        // RFC 5040 §4.1 / §4.8: RDMAP version, opcode.
        let (rv, op) = split_control_byte(rdmap);
        if rv != RDMAP_VERSION {
            return Err(TermError::RdmapInvalidVersion);
        }
        let opcode = Opcode::from_bits(op).ok_or(TermError::RdmapUnexpectedOpcode)?;
        if opcode.is_tagged() != tagged {
            return Err(TermError::RdmapUnexpectedOpcode);
        }
        if tagged {
            let b = buf.get(..TAGGED_LEN).ok_or(TermError::LENGTH)?;
            let h = TaggedHeader {
                last,
                opcode,
                stag: be32(&b[2..6]),
                to: be64(&b[6..14]),
            };
            Ok((Self::Tagged(h), TAGGED_LEN))
        } else {
            let b = buf.get(..UNTAGGED_LEN).ok_or(TermError::LENGTH)?;
            let h = UntaggedHeader {
                last,
                opcode,
                inval_stag: be32(&b[2..6]),
                qn: be32(&b[6..10]),
                msn: be32(&b[10..14]),
                mo: be32(&b[14..18]),
            };
            Ok((Self::Untagged(h), UNTAGGED_LEN))
        }
    }
}

/// Length of the DDP header announced by a DDP control byte (T bit).
pub(crate) const fn header_len_for_ctrl(ctrl: u8) -> usize {
    if ctrl & FLAG_TAGGED != 0 {
        TAGGED_LEN
    } else {
        UNTAGGED_LEN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_byte_values() {
        // docs/WIRE.md §3.1.
        let mut b = [0u8; UNTAGGED_LEN];
        DdpHeader::write(1, 0, true).encode(&mut b);
        assert_eq!(b[..2], [0xC1, 0x40]);
        DdpHeader::read_response(1, 0, false).encode(&mut b);
        assert_eq!(b[..2], [0x81, 0x42]);
        DdpHeader::send(Opcode::Send, 1, 0, true, 7).encode(&mut b);
        assert_eq!(b[..6], [0x41, 0x43, 0, 0, 0, 0]);
        DdpHeader::send(Opcode::SendInvalidate, 1, 0, false, 7).encode(&mut b);
        assert_eq!(b[..6], [0x01, 0x44, 0, 0, 0, 7]);
    }

    #[test]
    fn parse_errors() {
        assert_eq!(DdpHeader::parse(&[0x41]), Err(TermError::LENGTH));
        assert_eq!(
            DdpHeader::parse(&[0xC2, 0x40]),
            Err(TermError::DdpTaggedInvalidVersion)
        );
        assert_eq!(
            DdpHeader::parse(&[0x40, 0x43]),
            Err(TermError::DdpUntaggedInvalidVersion)
        );
        assert_eq!(
            DdpHeader::parse(&[0x41, 0x03]),
            Err(TermError::RdmapInvalidVersion)
        );
        assert_eq!(
            DdpHeader::parse(&[0x41, 0x48]),
            Err(TermError::RdmapUnexpectedOpcode)
        );
        assert_eq!(
            DdpHeader::parse(&[0xC1, 0x43]),
            Err(TermError::RdmapUnexpectedOpcode)
        );
        assert_eq!(
            DdpHeader::parse(&[0x41, 0x40]),
            Err(TermError::RdmapUnexpectedOpcode)
        );
        assert_eq!(DdpHeader::parse(&[0xC1, 0x40, 0]), Err(TermError::LENGTH));
    }
}
