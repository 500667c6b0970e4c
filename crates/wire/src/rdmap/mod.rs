//! RDMAP: the Remote Direct Memory Access Protocol layer (RFC 5040 §4).
//!
//! RDMAP owns the second byte of every DDP header (the RDMAP control byte:
//! version and opcode) and the extra headers that follow the DDP header for
//! some operations: the 28-byte Read Request header ([`ReadRequest`]) and the
//! variable-length Terminate header ([`Terminate`]). The Terminate error
//! classification of all three layers lives here as [`TermError`].

mod error;
mod terminate;

pub use error::{TermError, LAYER_DDP, LAYER_LLP, LAYER_RDMAP};
pub use terminate::{TermDdpHeader, Terminate, TERMINATE_MAX_LEN};

/// The RDMAP version this crate speaks: the RV field of the RDMAP control byte
/// is `01b` (RFC 5040 §4.1). `00b` is the pre-IETF RDMA Consortium RDMAP and
/// is rejected.
pub const RDMAP_VERSION: u8 = 1;

/// Length in bytes of the RDMA Read Request header that follows the untagged
/// DDP header of a Read Request (RFC 5040 §4.4).
pub const READ_REQUEST_LEN: usize = 28;

// RFC 5040 §4.1: RDMAP control byte = RV(2) | Rsv(2) | Opcode(4).
const RV_SHIFT: u32 = 6;
const OPCODE_MASK: u8 = 0x0F;

/// RDMAP opcodes implemented by this crate (RFC 5040 §4.1 Figure 4).
///
/// RFC 7306 (Immediate Data 0x8/0x9, Atomics 0xA/0xB) and the experimental
/// 0xF are deliberately not represented: like Linux siw, the receive side
/// answers them with a Terminate "unexpected opcode" (0x0/0x2/0x06).
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Opcode {
    /// RDMA Write: tagged, no RDMAP header (RFC 5040 §4.3).
    Write = 0,
    /// RDMA Read Request: untagged on QN 1, 28-byte header, no payload (RFC 5040 §4.4).
    ReadRequest = 1,
    /// RDMA Read Response: tagged, no RDMAP header (RFC 5040 §4.5).
    ReadResponse = 2,
    /// Send: untagged on QN 0 (RFC 5040 §4.6).
    Send = 3,
    /// Send with Invalidate: untagged on QN 0, STag to invalidate in the DDP header (RFC 5040 §4.6).
    SendInvalidate = 4,
    /// Send with Solicited Event (RFC 5040 §4.6).
    SendSe = 5,
    /// Send with Solicited Event and Invalidate (RFC 5040 §4.6).
    SendSeInvalidate = 6,
    /// Terminate: untagged on QN 2, Terminate header (RFC 5040 §4.8).
    Terminate = 7,
}

impl Opcode {
    /// Decodes the 4-bit opcode field. Returns `None` for every value this
    /// crate does not implement (8..=15, and anything above 15).
    #[must_use]
    pub const fn from_bits(bits: u8) -> Option<Self> {
        Some(match bits {
            0 => Self::Write,
            1 => Self::ReadRequest,
            2 => Self::ReadResponse,
            3 => Self::Send,
            4 => Self::SendInvalidate,
            5 => Self::SendSe,
            6 => Self::SendSeInvalidate,
            7 => Self::Terminate,
            _ => return None,
        })
    }

    /// The 4-bit wire value of this opcode.
    #[must_use]
    pub const fn bits(self) -> u8 {
        self as u8
    }

    /// `true` for the opcodes carried in tagged DDP segments (Write and Read
    /// Response); `false` for the untagged ones (RFC 5040 §4.1 Figure 4).
    #[must_use]
    pub const fn is_tagged(self) -> bool {
        matches!(self, Self::Write | Self::ReadResponse)
    }

    /// The untagged queue number this opcode must use, `None` for tagged
    /// opcodes (RFC 5040 §5: QN 0 Sends, QN 1 Read Requests, QN 2 Terminate).
    #[must_use]
    pub const fn queue(self) -> Option<u32> {
        match self {
            Self::Write | Self::ReadResponse => None,
            Self::ReadRequest => Some(crate::ddp::QN_READ_REQUEST),
            Self::Terminate => Some(crate::ddp::QN_TERMINATE),
            Self::Send | Self::SendInvalidate | Self::SendSe | Self::SendSeInvalidate => {
                Some(crate::ddp::QN_SEND)
            }
        }
    }

    /// `true` for the four Send variants.
    #[must_use]
    pub const fn is_send(self) -> bool {
        matches!(
            self,
            Self::Send | Self::SendInvalidate | Self::SendSe | Self::SendSeInvalidate
        )
    }

    /// `true` when the untagged header's RsvdULP field carries an STag to
    /// invalidate (Send with Invalidate, Send with SE and Invalidate; RFC 5040 §4.6).
    #[must_use]
    pub const fn carries_invalidate_stag(self) -> bool {
        matches!(self, Self::SendInvalidate | Self::SendSeInvalidate)
    }

    /// `true` when the sender asks for a Solicited Event (RFC 5040 §5.3).
    #[must_use]
    pub const fn is_solicited(self) -> bool {
        matches!(self, Self::SendSe | Self::SendSeInvalidate)
    }

    /// The RDMAP control byte for this opcode: RV = 1, Rsv = 0 (RFC 5040 §4.1).
    #[must_use]
    pub const fn control_byte(self) -> u8 {
        (RDMAP_VERSION << RV_SHIFT) | self as u8
    }
}

/// Splits an RDMAP control byte into (RDMAP version, 4-bit opcode field)
/// (RFC 5040 §4.1). The reserved bits are ignored.
#[must_use]
pub const fn split_control_byte(byte: u8) -> (u8, u8) {
    (byte >> RV_SHIFT, byte & OPCODE_MASK)
}

/// The RDMA Read Request header (RFC 5040 §4.4), 28 bytes, big-endian.
///
/// Follows the 18-byte untagged DDP header of a Read Request on QN 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ReadRequest {
    /// Data Sink STag: the requester's buffer; copied into the Read Response.
    pub sink_stag: u32,
    /// Data Sink Tagged Offset.
    pub sink_to: u64,
    /// RDMA Read Message Size (RDMARDSZ) in bytes. Zero means: do not validate
    /// the source, answer with a zero-length Read Response (RFC 5040 §5.2.1).
    pub size: u32,
    /// Data Source STag: the responder's buffer.
    pub src_stag: u32,
    /// Data Source Tagged Offset.
    pub src_to: u64,
}

impl ReadRequest {
    /// Writes the 28-byte header (RFC 5040 §4.4 Figure 7).
    pub fn encode(&self, out: &mut [u8; READ_REQUEST_LEN]) {
        out[0..4].copy_from_slice(&self.sink_stag.to_be_bytes());
        out[4..12].copy_from_slice(&self.sink_to.to_be_bytes());
        out[12..16].copy_from_slice(&self.size.to_be_bytes());
        out[16..20].copy_from_slice(&self.src_stag.to_be_bytes());
        out[20..28].copy_from_slice(&self.src_to.to_be_bytes());
    }

    /// The header as a fresh array.
    #[must_use]
    pub fn to_bytes(&self) -> [u8; READ_REQUEST_LEN] {
        let mut out = [0; READ_REQUEST_LEN];
        self.encode(&mut out);
        out
    }

    /// Parses the first 28 bytes of `buf` (extra bytes are ignored; the
    /// deframer separately rejects a Read Request that carries payload).
    ///
    /// # Errors
    ///
    /// Fewer than 28 bytes: [`TermError::DdpUntaggedMessageTooLong`], the
    /// code this crate uses for every DDP segment whose length does not fit
    /// its headers (see [`crate::fpdu::FramingError`]).
    pub fn parse(buf: &[u8]) -> Result<Self, TermError> {
        let b: &[u8; READ_REQUEST_LEN] = buf
            .get(..READ_REQUEST_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or(TermError::LENGTH)?;
        Ok(Self {
            sink_stag: be32(&b[0..4]),
            sink_to: be64(&b[4..12]),
            size: be32(&b[12..16]),
            src_stag: be32(&b[16..20]),
            src_to: be64(&b[20..28]),
        })
    }
}

/// Big-endian u32 from exactly 4 bytes (callers slice correctly).
pub(crate) fn be32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(b);
    u32::from_be_bytes(a)
}

/// Big-endian u64 from exactly 8 bytes (callers slice correctly).
pub(crate) fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    u64::from_be_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcode_bits_roundtrip() {
        for b in 0..=255u8 {
            match Opcode::from_bits(b) {
                Some(op) => assert_eq!(op.bits(), b),
                None => assert!(b > 7),
            }
        }
    }

    #[test]
    fn control_bytes() {
        assert_eq!(Opcode::Write.control_byte(), 0x40);
        assert_eq!(Opcode::Send.control_byte(), 0x43);
        assert_eq!(Opcode::Terminate.control_byte(), 0x47);
        assert_eq!(split_control_byte(0x42), (1, 2));
        assert_eq!(split_control_byte(0x7F), (1, 0xF));
    }

    #[test]
    fn read_request_short() {
        assert_eq!(ReadRequest::parse(&[0; 27]), Err(TermError::LENGTH));
    }
}
