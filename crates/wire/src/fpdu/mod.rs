//! MPA FPDU framing (RFC 5044 §4): `ULPDU_Length | ULPDU | PAD | CRC`.
//!
//! * `ULPDU_Length` (16 bits, big-endian) counts the ULPDU only (RFC 5044 §4.1).
//! * `PAD` is 0–3 zero bytes so the FPDU length is a multiple of 4 (RFC 5044 §4.1).
//! * `CRC` is the CRC-32C over length, ULPDU and pad, sent **little-endian**;
//!   the field is present even when CRCs are not negotiated (then it is 0 on
//!   send and ignored on receive) (RFC 5044 §4.4; docs/WIRE.md §2.7).
//!
//! Markers (RFC 5044 §4.3) are never negotiated by this crate and not supported.
//!
//! The send side is split so a driver can gather payload from user buffers
//! without copying: [`encode_prefix`] writes the length and headers into a
//! small stack buffer, the payload slices are sent as they are, and
//! [`encode_trailer`] produces the pad and CRC. The receive side is the
//! streaming [`Deframer`].

mod deframer;

pub use deframer::{Deframer, Event, FramingError, SegmentHeader};

use crate::crc;
use crate::ddp::{DdpHeader, UNTAGGED_LEN};
use crate::rdmap::{Terminate, READ_REQUEST_LEN, TERMINATE_MAX_LEN};

/// Size of the `ULPDU_Length` field (RFC 5044 §4.1).
pub const LENGTH_FIELD_LEN: usize = 2;
/// Size of the CRC field (RFC 5044 §4.1).
pub const CRC_LEN: usize = 4;
/// Largest FPDU prefix of a data-carrying FPDU: length field + untagged DDP
/// header + Read Request header.
pub const MAX_HEADER_LEN: usize = LENGTH_FIELD_LEN + UNTAGGED_LEN + READ_REQUEST_LEN;
/// Largest FPDU prefix of any FPDU, Terminate included: length field +
/// untagged DDP header + the largest Terminate header (2 + 18 + 4 + 2 + 18 + 28).
/// Size prefix buffers with this when they may hold a Terminate.
pub const MAX_PREFIX_LEN: usize = LENGTH_FIELD_LEN + UNTAGGED_LEN + TERMINATE_MAX_LEN;
/// Largest encoded Terminate FPDU (prefix, no pad needed at the maximum, CRC).
pub const MAX_TERMINATE_FPDU_LEN: usize = MAX_PREFIX_LEN + CRC_LEN;
/// Largest value of the 16-bit `ULPDU_Length` field.
pub const MAX_ULPDU: usize = u16::MAX as usize;
/// Smallest MULPDU RFC 5044 §4.5 allows.
pub const MIN_MULPDU: usize = 128;
/// Largest MULPDU RFC 5044 §4.5 allows a sender to use.
pub const MAX_MULPDU: usize = 64768;

/// The ULPDU would not fit the 16-bit `ULPDU_Length` field (RFC 5044 §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("ULPDU of {ulpdu_len} bytes exceeds the 65535-byte MPA limit")]
pub struct FrameTooLong {
    /// The ULPDU length that was asked for.
    pub ulpdu_len: usize,
}

/// The MULPDU (largest ULPDU a sender may put in one FPDU) for an effective
/// MSS, without markers: `EMSS − (6 + EMSS mod 4)`, clamped to
/// [`MIN_MULPDU`]..=[`MAX_MULPDU`] (RFC 5044 §4.5).
#[must_use]
pub fn mulpdu(emss: usize) -> usize {
    emss.saturating_sub(6 + emss % 4)
        .clamp(MIN_MULPDU, MAX_MULPDU)
}

/// The largest payload one FPDU may carry: `min(mulpdu, 65535) − header_len`
/// (0 if the headers alone do not fit), where `header_len` is the ULPDU's
/// header bytes (14 tagged, 18 untagged, 46 for a Read Request)
/// (RFC 5041 §5.2 segmentation, RFC 5044 §4.5).
#[must_use]
pub fn max_payload(mulpdu: usize, header_len: usize) -> usize {
    mulpdu.min(MAX_ULPDU).saturating_sub(header_len)
}

/// Total FPDU length for a ULPDU of `ulpdu_len` bytes:
/// `round_up(2 + ulpdu_len, 4) + 4` (RFC 5044 §4.1).
#[must_use]
pub const fn fpdu_len(ulpdu_len: usize) -> usize {
    (LENGTH_FIELD_LEN + ulpdu_len).div_ceil(4) * 4 + CRC_LEN
}

/// Number of pad bytes after a ULPDU of `ulpdu_len` bytes (RFC 5044 §4.1).
#[must_use]
pub const fn pad_len(ulpdu_len: usize) -> usize {
    (4 - (LENGTH_FIELD_LEN + ulpdu_len) % 4) % 4
}

/// Writes `ULPDU_Length | DDP header | extra` into `out`, where
/// `ULPDU_Length = ddp.len() + extra.len() + payload_len` (RFC 5044 §4.1,
/// RFC 5041 §4). `extra` is the RDMAP header, if any (a Read Request's 28
/// bytes or a Terminate header). Returns the number of bytes written.
///
/// # Errors
///
/// [`FrameTooLong`] if the ULPDU exceeds 65535 bytes; nothing is written.
///
/// # Panics
///
/// If `out` is shorter than `2 + ddp.len() + extra.len()` (a local sizing
/// bug: [`MAX_PREFIX_LEN`] always suffices).
pub fn encode_prefix(
    ddp: &DdpHeader,
    extra: &[u8],
    payload_len: usize,
    out: &mut [u8],
) -> Result<usize, FrameTooLong> {
    let ulpdu_len = ddp.len() + extra.len() + payload_len;
    let len_field = u16::try_from(ulpdu_len).map_err(|_| FrameTooLong { ulpdu_len })?;
    let prefix_len = LENGTH_FIELD_LEN + ddp.len() + extra.len();
    let out = &mut out[..prefix_len];
    out[..2].copy_from_slice(&len_field.to_be_bytes());
    let n = LENGTH_FIELD_LEN + ddp.encode(&mut out[LENGTH_FIELD_LEN..]);
    out[n..].copy_from_slice(extra);
    Ok(prefix_len)
}

/// Writes the FPDU trailer into `out`: 0–3 zero pad bytes (so the FPDU length
/// is a multiple of 4) followed by the CRC-32C over `prefix ++ payload... ++
/// pad`, little-endian, or four zero bytes when `crc_on` is false
/// (RFC 5044 §4.1, §4.4). Returns the trailer length (4..=7). The payload is
/// read in place from the slices (zero-copy gather).
///
/// `prefix` must be exactly what [`encode_prefix`] wrote and the payload
/// slices must total the `payload_len` given to it.
pub fn encode_trailer(prefix: &[u8], payload: &[&[u8]], crc_on: bool, out: &mut [u8; 7]) -> usize {
    let total = prefix.len() + payload.iter().map(|p| p.len()).sum::<usize>();
    // The length field is counted in `total`, so pad to a multiple of 4 directly.
    let pad = (4 - total % 4) % 4;
    // The whole array rather than `out[..pad]`: a fixed-size store, not a `memset` call.
    *out = [0; 7];
    let value = if crc_on {
        // Empty pieces are skipped: each call has a fixed cost that dominates small frames.
        let mut c = crc::crc32c(prefix);
        for p in payload.iter().filter(|p| !p.is_empty()) {
            c = crc::crc32c_append(c, p);
        }
        if pad > 0 {
            c = crc::crc32c_append(c, &out[..pad]);
        }
        c
    } else {
        // RFC 5044 §4.4: without CRC the field is still present; send zeros
        // like siw does.
        0
    };
    out[pad..pad + CRC_LEN].copy_from_slice(&value.to_le_bytes());
    pad + CRC_LEN
}

/// A whole FPDU as a `Vec` (for tests and tools; the data path uses
/// [`encode_prefix`] + [`encode_trailer`]).
///
/// # Panics
///
/// If the ULPDU (`ddp.len() + extra.len() + payload.len()`) exceeds 65535 bytes.
#[must_use]
pub fn encode_fpdu(ddp: &DdpHeader, extra: &[u8], payload: &[u8], crc_on: bool) -> Vec<u8> {
    let mut prefix = vec![0u8; LENGTH_FIELD_LEN + ddp.len() + extra.len()];
    let n = encode_prefix(ddp, extra, payload.len(), &mut prefix)
        .expect("encode_fpdu: ULPDU longer than 65535 bytes");
    let mut trailer = [0u8; 7];
    let t = encode_trailer(&prefix[..n], &[payload], crc_on, &mut trailer);
    let mut out = Vec::with_capacity(n + payload.len() + t);
    out.extend_from_slice(&prefix[..n]);
    out.extend_from_slice(payload);
    out.extend_from_slice(&trailer[..t]);
    out
}

/// Encodes the stream's Terminate FPDU (untagged, QN 2, MSN 1, MO 0, L = 1,
/// RFC 5040 §5.4) into `out` without allocating; returns its length.
pub fn encode_terminate_fpdu(
    term: &Terminate,
    crc_on: bool,
    out: &mut [u8; MAX_TERMINATE_FPDU_LEN],
) -> usize {
    let mut hdr = [0u8; TERMINATE_MAX_LEN];
    let h = term.encode(&mut hdr);
    let ddp = DdpHeader::terminate();
    // At most 18 + 52 bytes: always fits the 16-bit length.
    let n = match encode_prefix(&ddp, &hdr[..h], 0, &mut out[..]) {
        Ok(n) => n,
        Err(_) => unreachable!("a Terminate ULPDU is at most 70 bytes"),
    };
    let (prefix, rest) = out.split_at_mut(n);
    let mut trailer = [0u8; 7];
    let t = encode_trailer(prefix, &[], crc_on, &mut trailer);
    rest[..t].copy_from_slice(&trailer[..t]);
    n + t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths() {
        assert_eq!(MAX_HEADER_LEN, 48);
        assert_eq!(MAX_PREFIX_LEN, 72);
        assert_eq!(fpdu_len(26), 32);
        assert_eq!(fpdu_len(27), 36);
        assert_eq!(pad_len(27), 3);
        assert_eq!(pad_len(26), 0);
        assert_eq!(mulpdu(1448), 1442);
        assert_eq!(mulpdu(1460), 1454);
        assert_eq!(mulpdu(10), MIN_MULPDU);
        assert_eq!(mulpdu(65483), MAX_MULPDU);
        assert_eq!(max_payload(1442, 18), 1424);
        assert_eq!(max_payload(1442, 14), 1428);
        assert_eq!(max_payload(10, 14), 0);
    }

    #[test]
    fn prefix_too_long() {
        let mut out = [0u8; MAX_PREFIX_LEN];
        let ddp = DdpHeader::write(1, 0, true);
        assert_eq!(
            encode_prefix(&ddp, &[], 65535 - 14 + 1, &mut out),
            Err(FrameTooLong { ulpdu_len: 65536 })
        );
        assert_eq!(encode_prefix(&ddp, &[], 65535 - 14, &mut out), Ok(16));
    }
}
