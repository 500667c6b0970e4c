//! CRC-32C as used by MPA FPDUs.
//!
//! RFC 5044 §4.4: the FPDU CRC is the iSCSI CRC32c (polynomial 0x1EDC6F41,
//! reflected 0x82F63B78, register initialised to all ones, result
//! complemented): the standard "CRC-32C". The 32-bit value is placed on the
//! wire **least-significant byte first** (`value.to_le_bytes()`), unlike every
//! other iWARP header field (docs/WIRE.md §2.7).

/// CRC-32C of `data`.
///
/// Standard CRC-32C: `crc32c(b"123456789") == 0xE306_9283`.
/// The returned value is sent on the wire as `value.to_le_bytes()`.
#[must_use]
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c_append(0, data)
}

/// Incremental CRC-32C: `crc32c_append(crc32c(a), b) == crc32c(a ++ b)`.
///
/// Start from `0` (the CRC of the empty string) to compute a CRC in pieces.
#[must_use]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    // A small FPDU (a short Send, a Read Request, a Terminate) is checked in one call at each
    // end: the sender's whole frame, the receiver's whole segment, a few dozen bytes. There
    // the SSE 4.2 instruction walk below is the cheapest (no set-up, no dispatch); longer
    // inputs go to `crc-fast`, which folds several streams with carry-less multiplies
    // (VPCLMULQDQ where the CPU has it) at about twice the `crc32c` crate's rate.
    #[cfg(target_arch = "x86_64")]
    if data.len() <= SHORT_MAX {
        if let Some(c) = sse42::append(crc, data) {
            return c;
        }
    }
    // The digest's state is the CRC register, which holds the complement of the CRC so far.
    let mut d =
        crc_fast::Digest::new_with_init_state(crc_fast::CrcAlgorithm::Crc32Iscsi, u64::from(!crc));
    d.update(data);
    d.finalize() as u32
}

/// The longest input taken by [`sse42`]: up to here its one chain of `crc32` instructions
/// beats the folding set-up.
#[cfg(target_arch = "x86_64")]
const SHORT_MAX: usize = 255;

/// The crate's one `unsafe`: the SSE 4.2 `crc32` instruction, behind the CPU check.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod sse42 {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};

    /// `crc32c_append(crc, data)` if this CPU has SSE 4.2 (std caches the check: one load).
    pub(super) fn append(crc: u32, data: &[u8]) -> Option<u32> {
        if !std::arch::is_x86_feature_detected!("sse4.2") {
            return None;
        }
        // SAFETY: the CPU supports SSE 4.2, checked just above: the only requirement of
        // `walk`'s target feature. `walk` reads `data` through safe slices only.
        Some(unsafe { walk(crc, data) })
    }

    /// CRC-32C (Castagnoli, reflected) by the `crc32` instruction: eight bytes at a time
    /// (little-endian words, as the reflected CRC consumes bytes), then byte by byte. The
    /// register holds the complement of the CRC.
    #[target_feature(enable = "sse4.2")]
    unsafe fn walk(crc: u32, data: &[u8]) -> u32 {
        let mut words = data.chunks_exact(8);
        // The intrinsics are safe to call here: this function has their target feature.
        let mut c = u64::from(!crc);
        for w in &mut words {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            c = _mm_crc32_u64(c, u64::from_le_bytes(b));
        }
        // The instruction leaves the 32-bit CRC in the low half.
        let mut c = c as u32;
        for &b in words.remainder() {
            c = _mm_crc32_u8(c, b);
        }
        !c
    }
}

/// Compares a CRC received from the peer with the locally computed one.
///
/// Returns `true` when they are equal (RFC 5044 §4.4: on a mismatch the FPDU
/// is invalid).
///
/// # Fuzzing
///
/// When the crate is compiled with `cfg(fuzzing)` (as `cargo fuzz` does) this
/// always returns `true`, so that fuzzers can reach the code behind the CRC
/// check without having to forge valid CRCs. Never ship a build with that cfg.
#[must_use]
pub fn crc_matches(received: u32, computed: u32) -> bool {
    if cfg!(fuzzing) {
        true
    } else {
        received == computed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    /// The CRC examples of RFC 3720 Appendix B.4 (the iSCSI CRC32c that RFC 3385 chose and
    /// RFC 5044 §4.4 reuses), each as the four bytes sent on the wire, least significant
    /// first: 32 zero bytes, 32 bytes of 0xFF, 32 ascending, 32 descending, and a SCSI
    /// Read (10) command PDU of 48 bytes.
    #[test]
    fn rfc_3720_vectors() {
        let ascending: Vec<u8> = (0..32).collect();
        let descending: Vec<u8> = (0..32).rev().collect();
        let mut read_pdu = [0u8; 48];
        read_pdu[..2].copy_from_slice(&[0x01, 0xC0]);
        read_pdu[16] = 0x14;
        read_pdu[22] = 0x04;
        read_pdu[27] = 0x14;
        read_pdu[31] = 0x18;
        read_pdu[32] = 0x28;
        read_pdu[40] = 0x02;
        let cases: [(&[u8], [u8; 4]); 5] = [
            (&[0u8; 32], [0xAA, 0x36, 0x91, 0x8A]),
            (&[0xFFu8; 32], [0x43, 0xAB, 0xA8, 0x62]),
            (&ascending, [0x4E, 0x79, 0xDD, 0x46]),
            (&descending, [0x5C, 0xDB, 0x3F, 0x11]),
            (&read_pdu, [0x56, 0x3A, 0x96, 0xD9]),
        ];
        for (data, wire) in cases {
            assert_eq!(crc32c(data).to_le_bytes(), wire, "{data:02x?}");
            // The same through the long path: the bytes after 300 zero bytes, CRC appended.
            let mut long = vec![0u8; 300];
            long.extend_from_slice(data);
            let prefix = crc32c(&long[..300]);
            assert_eq!(crc32c_append(prefix, &long[300..]), crc32c(&long));
            assert_eq!(bitwise(0, data).to_le_bytes(), wire);
        }
    }

    #[test]
    fn append_matches_whole() {
        let data = b"hello, incremental world";
        for split in 0..=data.len() {
            let (a, b) = data.split_at(split);
            assert_eq!(crc32c_append(crc32c(a), b), crc32c(data));
        }
        assert_eq!(crc32c_append(0, data), crc32c(data));
    }

    /// CRC-32C bit by bit (the reflected polynomial 0x82F63B78 of RFC 5044 §4.4, register
    /// initialised to all ones, result complemented): slow and independent of both
    /// `crc-fast` and the SSE 4.2 walk, so it can judge either.
    fn bitwise(crc: u32, data: &[u8]) -> u32 {
        let mut c = !crc;
        for &b in data {
            c ^= u32::from(b);
            for _ in 0..8 {
                c = if c & 1 == 1 {
                    (c >> 1) ^ 0x82F6_3B78
                } else {
                    c >> 1
                };
            }
        }
        !c
    }

    /// The short path, called directly (not through `crc32c_append`, which on a CPU without
    /// SSE 4.2 never takes it), and the dispatcher both agree with the
    /// bitwise reference at every length around the words and the threshold, at every
    /// alignment, from any starting CRC.
    #[test]
    fn short_path_matches_a_bitwise_reference() {
        let data: Vec<u8> = (0..4200u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        #[cfg(target_arch = "x86_64")]
        let short = std::arch::is_x86_feature_detected!("sse4.2");
        #[cfg(target_arch = "x86_64")]
        if !short {
            eprintln!("no SSE 4.2: the short path is never taken here; crc-fast is checked");
        }
        for start in [0u32, 1, 0xFFFF_FFFF, 0x1234_5678] {
            for off in 0..8 {
                for len in (0..80).chain(250..262).chain([800, 4096 + 3]) {
                    let d = &data[off..off + len];
                    let want = bitwise(start, d);
                    let at = format!("start {start:#x} offset {off} length {len}");
                    assert_eq!(crc32c_append(start, d), want, "{at}");
                    #[cfg(target_arch = "x86_64")]
                    if short {
                        assert_eq!(sse42::append(start, d), Some(want), "{at}");
                    }
                }
            }
        }
    }

    proptest::proptest! {
        /// Any input, cut anywhere, from any starting CRC (lengths on both sides of the
        /// short path's limit and of crc-fast's folding blocks), against the bitwise
        /// reference.
        #[test]
        fn pieces_match_the_reference(
            start: u32,
            data in proptest::collection::vec(proptest::num::u8::ANY, 0..1600),
            cut in 0usize..1600,
        ) {
            let (a, b) = data.split_at(cut.min(data.len()));
            proptest::prop_assert_eq!(
                crc32c_append(crc32c_append(start, a), b),
                bitwise(start, &data)
            );
        }
    }

    #[test]
    #[cfg(not(fuzzing))]
    fn matches_compares() {
        assert!(crc_matches(1, 1));
        assert!(!crc_matches(1, 2));
    }
}
