//! CRC-32C as used by MPA FPDUs.
//!
//! RFC 5044 §4.4: the FPDU CRC is the iSCSI CRC32c (polynomial 0x1EDC6F41,
//! reflected 0x82F63B78, register initialised to all ones, result
//! complemented): the standard "CRC-32C". The 32-bit value is placed on the
//! wire **least-significant byte first** (`value.to_le_bytes()`), unlike every
//! other iWARP header field (iwarp-wire.md §2.7).

/// CRC-32C of `data`.
///
/// Standard CRC-32C: `crc32c(b"123456789") == 0xE306_9283`.
/// The returned value is sent on the wire as `value.to_le_bytes()`.
#[must_use]
pub fn crc32c(data: &[u8]) -> u32 {
    ::crc32c::crc32c(data)
}

/// Incremental CRC-32C: `crc32c_append(crc32c(a), b) == crc32c(a ++ b)`.
///
/// Start from `0` (the CRC of the empty string) to compute a CRC in pieces.
#[must_use]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    ::crc32c::crc32c_append(crc, data)
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

    #[test]
    fn append_matches_whole() {
        let data = b"hello, incremental world";
        for split in 0..=data.len() {
            let (a, b) = data.split_at(split);
            assert_eq!(crc32c_append(crc32c(a), b), crc32c(data));
        }
        assert_eq!(crc32c_append(0, data), crc32c(data));
    }

    #[test]
    #[cfg(not(fuzzing))]
    fn matches_compares() {
        assert!(crc_matches(1, 1));
        assert!(!crc_matches(1, 2));
    }
}
