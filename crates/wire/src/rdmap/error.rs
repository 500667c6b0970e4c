//! Terminate error classification: Layer / Error Type / Error Code.
//!
//! Sources: RDMAP layer RFC 5040 §4.8 Figure 9 and RFC 6580 §3.1; DDP layer
//! RFC 5041 §7.2 and RFC 6580 §3.2; LLP (MPA) layer RFC 5044 §8, RFC 6580
//! §3.3 and RFC 6581 §8. Tables reproduced in docs/WIRE.md §2.10, §3.7, §4.3.

/// Terminate Layer value of the RDMAP layer (RFC 5040 §4.8).
pub const LAYER_RDMAP: u8 = 0x0;
/// Terminate Layer value of the DDP layer (RFC 5040 §4.8).
pub const LAYER_DDP: u8 = 0x1;
/// Terminate Layer value of the lower layer protocol, here MPA (RFC 5040 §4.8).
pub const LAYER_LLP: u8 = 0x2;

// RDMAP error types (RFC 5040 §4.8).
const RDMAP_CATASTROPHIC: u8 = 0x0;
const RDMAP_PROTECTION: u8 = 0x1;
const RDMAP_OPERATION: u8 = 0x2;
// DDP error types (RFC 5041 §7.2).
const DDP_CATASTROPHIC: u8 = 0x0;
const DDP_TAGGED: u8 = 0x1;
const DDP_UNTAGGED: u8 = 0x2;
// LLP error type for MPA (RFC 5044 §8).
const LLP_MPA: u8 = 0x0;

/// Why a stream is being (or was) terminated: the Layer, EType and Error Code
/// of a Terminate message (RFC 5040 §4.8).
///
/// Every code defined by RFC 5040, RFC 5041, RFC 5044 and RFC 6581 has its
/// own variant. [`TermError::Unknown`] keeps any other triple a peer sends, so
/// that parsing a received Terminate never fails because of its code.
/// `Display` gives a plain-English description.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum TermError {
    // ----- Layer 0x0: RDMAP (RFC 5040 §4.8, RFC 6580 §3.1) -----
    /// 0x0/0x0/any: local catastrophic error. Any code is allowed; siw uses 0xFF.
    #[error("RDMAP local catastrophic error (code {0:#04x})")]
    RdmapLocalCatastrophic(u8),
    /// 0x0/0x1/0x00: remote protection error, invalid STag.
    #[error("RDMAP remote protection error: invalid STag")]
    RdmapInvalidStag,
    /// 0x0/0x1/0x01: remote protection error, base or bounds violation.
    #[error("RDMAP remote protection error: base or bounds violation")]
    RdmapBaseBounds,
    /// 0x0/0x1/0x02: remote protection error, access rights violation.
    #[error("RDMAP remote protection error: access rights violation")]
    RdmapAccessRights,
    /// 0x0/0x1/0x03: remote protection error, STag not associated with the RDMAP stream.
    #[error("RDMAP remote protection error: STag not associated with this stream")]
    RdmapStagNotAssociated,
    /// 0x0/0x1/0x04: remote protection error, Tagged Offset wrap.
    #[error("RDMAP remote protection error: tagged offset wraps")]
    RdmapToWrap,
    /// 0x0/0x1/0x09: remote protection error, STag cannot be invalidated.
    #[error("RDMAP remote protection error: STag cannot be invalidated")]
    RdmapProtectionCannotInvalidate,
    /// 0x0/0x1/0xFF: remote protection error, unspecified.
    #[error("RDMAP remote protection error (unspecified)")]
    RdmapProtectionUnspecified,
    /// 0x0/0x2/0x05: remote operation error, invalid RDMAP version.
    #[error("RDMAP remote operation error: invalid RDMAP version")]
    RdmapInvalidVersion,
    /// 0x0/0x2/0x06: remote operation error, unexpected opcode.
    #[error("RDMAP remote operation error: unexpected opcode")]
    RdmapUnexpectedOpcode,
    /// 0x0/0x2/0x07: remote operation error, catastrophic error localized to the RDMAP stream.
    #[error("RDMAP remote operation error: catastrophic error localized to this stream")]
    RdmapStreamCatastrophic,
    /// 0x0/0x2/0x08: remote operation error, global catastrophic error.
    #[error("RDMAP remote operation error: global catastrophic error")]
    RdmapGlobalCatastrophic,
    /// 0x0/0x2/0x09: remote operation error, STag cannot be invalidated.
    #[error("RDMAP remote operation error: STag cannot be invalidated")]
    RdmapOperationCannotInvalidate,
    /// 0x0/0x2/0xFF: remote operation error, unspecified.
    #[error("RDMAP remote operation error (unspecified)")]
    RdmapOperationUnspecified,

    // ----- Layer 0x1: DDP (RFC 5041 §7.2, RFC 6580 §3.2) -----
    /// 0x1/0x0/0x00: DDP local catastrophic error.
    #[error("DDP local catastrophic error")]
    DdpLocalCatastrophic,
    /// 0x1/0x1/0x00: tagged buffer error, invalid STag.
    #[error("DDP tagged buffer error: invalid STag")]
    DdpTaggedInvalidStag,
    /// 0x1/0x1/0x01: tagged buffer error, base or bounds violation.
    #[error("DDP tagged buffer error: base or bounds violation")]
    DdpTaggedBaseBounds,
    /// 0x1/0x1/0x02: tagged buffer error, STag not associated with the DDP stream.
    #[error("DDP tagged buffer error: STag not associated with this stream")]
    DdpTaggedStagNotAssociated,
    /// 0x1/0x1/0x03: tagged buffer error, Tagged Offset wrap.
    #[error("DDP tagged buffer error: tagged offset wraps")]
    DdpTaggedToWrap,
    /// 0x1/0x1/0x04: tagged buffer error, invalid DDP version.
    #[error("DDP tagged buffer error: invalid DDP version")]
    DdpTaggedInvalidVersion,
    /// 0x1/0x2/0x01: untagged buffer error, invalid queue number.
    #[error("DDP untagged buffer error: invalid queue number")]
    DdpUntaggedInvalidQn,
    /// 0x1/0x2/0x02: untagged buffer error, invalid MSN (no buffer available).
    #[error("DDP untagged buffer error: invalid MSN, no buffer available")]
    DdpUntaggedNoBuffer,
    /// 0x1/0x2/0x03: untagged buffer error, invalid MSN (MSN range not valid).
    #[error("DDP untagged buffer error: invalid MSN, MSN out of range")]
    DdpUntaggedInvalidMsnRange,
    /// 0x1/0x2/0x04: untagged buffer error, invalid message offset.
    #[error("DDP untagged buffer error: invalid message offset")]
    DdpUntaggedInvalidMo,
    /// 0x1/0x2/0x05: untagged buffer error, DDP message too long for the available buffer.
    #[error("DDP untagged buffer error: message too long for the available buffer")]
    DdpUntaggedMessageTooLong,
    /// 0x1/0x2/0x06: untagged buffer error, invalid DDP version.
    #[error("DDP untagged buffer error: invalid DDP version")]
    DdpUntaggedInvalidVersion,

    // ----- Layer 0x2: LLP = MPA (RFC 5044 §8, RFC 6580 §3.3, RFC 6581 §8) -----
    /// 0x2/0x0/0x01: TCP connection closed, terminated or lost.
    #[error("MPA error: TCP connection closed, terminated or lost")]
    LlpConnectionLost,
    /// 0x2/0x0/0x02: MPA CRC error.
    #[error("MPA error: CRC mismatch")]
    LlpCrcError,
    /// 0x2/0x0/0x03: MPA marker and ULPDU_Length field disagree.
    #[error("MPA error: marker and ULPDU length disagree")]
    LlpMarkerMismatch,
    /// 0x2/0x0/0x04: invalid MPA Request or Reply frame.
    #[error("MPA error: invalid MPA request or reply frame")]
    LlpInvalidMpaFrame,
    /// 0x2/0x0/0x05: local catastrophic error (enhanced connection setup, RFC 6581).
    #[error("MPA error: local catastrophic error")]
    LlpLocalCatastrophic,
    /// 0x2/0x0/0x06: insufficient IRD resources (RFC 6581).
    #[error("MPA error: insufficient IRD resources")]
    LlpInsufficientIrd,
    /// 0x2/0x0/0x07: no matching RTR option (RFC 6581).
    #[error("MPA error: no matching RTR option")]
    LlpNoMatchingRtr,

    /// Any Layer/EType/Code triple not listed above, as received from a peer.
    ///
    /// Invariant (kept by [`TermError::from_wire`]): never holds a triple that
    /// [`TermError::from_parts`] recognises. `layer` and `etype` are 4-bit
    /// fields; only their low nibble is encoded.
    #[error("unknown terminate code: layer {layer:#x}, type {etype:#x}, code {code:#04x}")]
    Unknown {
        /// Layer (4 bits).
        layer: u8,
        /// Error type (4 bits).
        etype: u8,
        /// Error code (8 bits).
        code: u8,
    },
}

impl TermError {
    /// The code this crate uses for any DDP segment whose ULPDU_Length does
    /// not match its headers (see `fpdu::FramingError` for the rationale).
    pub(crate) const LENGTH: Self = Self::DdpUntaggedMessageTooLong;

    /// `(layer, etype, code)` of this error.
    #[must_use]
    pub const fn parts(&self) -> (u8, u8, u8) {
        match *self {
            Self::RdmapLocalCatastrophic(c) => (LAYER_RDMAP, RDMAP_CATASTROPHIC, c),
            Self::RdmapInvalidStag => (LAYER_RDMAP, RDMAP_PROTECTION, 0x00),
            Self::RdmapBaseBounds => (LAYER_RDMAP, RDMAP_PROTECTION, 0x01),
            Self::RdmapAccessRights => (LAYER_RDMAP, RDMAP_PROTECTION, 0x02),
            Self::RdmapStagNotAssociated => (LAYER_RDMAP, RDMAP_PROTECTION, 0x03),
            Self::RdmapToWrap => (LAYER_RDMAP, RDMAP_PROTECTION, 0x04),
            Self::RdmapProtectionCannotInvalidate => (LAYER_RDMAP, RDMAP_PROTECTION, 0x09),
            Self::RdmapProtectionUnspecified => (LAYER_RDMAP, RDMAP_PROTECTION, 0xFF),
            Self::RdmapInvalidVersion => (LAYER_RDMAP, RDMAP_OPERATION, 0x05),
            Self::RdmapUnexpectedOpcode => (LAYER_RDMAP, RDMAP_OPERATION, 0x06),
            Self::RdmapStreamCatastrophic => (LAYER_RDMAP, RDMAP_OPERATION, 0x07),
            Self::RdmapGlobalCatastrophic => (LAYER_RDMAP, RDMAP_OPERATION, 0x08),
            Self::RdmapOperationCannotInvalidate => (LAYER_RDMAP, RDMAP_OPERATION, 0x09),
            Self::RdmapOperationUnspecified => (LAYER_RDMAP, RDMAP_OPERATION, 0xFF),
            Self::DdpLocalCatastrophic => (LAYER_DDP, DDP_CATASTROPHIC, 0x00),
            Self::DdpTaggedInvalidStag => (LAYER_DDP, DDP_TAGGED, 0x00),
            Self::DdpTaggedBaseBounds => (LAYER_DDP, DDP_TAGGED, 0x01),
            Self::DdpTaggedStagNotAssociated => (LAYER_DDP, DDP_TAGGED, 0x02),
            Self::DdpTaggedToWrap => (LAYER_DDP, DDP_TAGGED, 0x03),
            Self::DdpTaggedInvalidVersion => (LAYER_DDP, DDP_TAGGED, 0x04),
            Self::DdpUntaggedInvalidQn => (LAYER_DDP, DDP_UNTAGGED, 0x01),
            Self::DdpUntaggedNoBuffer => (LAYER_DDP, DDP_UNTAGGED, 0x02),
            Self::DdpUntaggedInvalidMsnRange => (LAYER_DDP, DDP_UNTAGGED, 0x03),
            Self::DdpUntaggedInvalidMo => (LAYER_DDP, DDP_UNTAGGED, 0x04),
            Self::DdpUntaggedMessageTooLong => (LAYER_DDP, DDP_UNTAGGED, 0x05),
            Self::DdpUntaggedInvalidVersion => (LAYER_DDP, DDP_UNTAGGED, 0x06),
            Self::LlpConnectionLost => (LAYER_LLP, LLP_MPA, 0x01),
            Self::LlpCrcError => (LAYER_LLP, LLP_MPA, 0x02),
            Self::LlpMarkerMismatch => (LAYER_LLP, LLP_MPA, 0x03),
            Self::LlpInvalidMpaFrame => (LAYER_LLP, LLP_MPA, 0x04),
            Self::LlpLocalCatastrophic => (LAYER_LLP, LLP_MPA, 0x05),
            Self::LlpInsufficientIrd => (LAYER_LLP, LLP_MPA, 0x06),
            Self::LlpNoMatchingRtr => (LAYER_LLP, LLP_MPA, 0x07),
            Self::Unknown { layer, etype, code } => (layer & 0x0F, etype & 0x0F, code),
        }
    }

    /// The 4-bit Layer field.
    #[must_use]
    pub const fn layer(&self) -> u8 {
        self.parts().0
    }

    /// The 4-bit Error Type field (its meaning depends on the layer).
    #[must_use]
    pub const fn etype(&self) -> u8 {
        self.parts().1
    }

    /// The 8-bit Error Code field.
    #[must_use]
    pub const fn code(&self) -> u8 {
        self.parts().2
    }

    /// The named variant for a known `(layer, etype, code)` triple, or `None`
    /// when the triple is not defined by the RFCs. Never returns
    /// [`TermError::Unknown`].
    #[must_use]
    pub const fn from_parts(layer: u8, etype: u8, code: u8) -> Option<Self> {
        Some(match (layer, etype, code) {
            (LAYER_RDMAP, RDMAP_CATASTROPHIC, c) => Self::RdmapLocalCatastrophic(c),
            (LAYER_RDMAP, RDMAP_PROTECTION, 0x00) => Self::RdmapInvalidStag,
            (LAYER_RDMAP, RDMAP_PROTECTION, 0x01) => Self::RdmapBaseBounds,
            (LAYER_RDMAP, RDMAP_PROTECTION, 0x02) => Self::RdmapAccessRights,
            (LAYER_RDMAP, RDMAP_PROTECTION, 0x03) => Self::RdmapStagNotAssociated,
            (LAYER_RDMAP, RDMAP_PROTECTION, 0x04) => Self::RdmapToWrap,
            (LAYER_RDMAP, RDMAP_PROTECTION, 0x09) => Self::RdmapProtectionCannotInvalidate,
            (LAYER_RDMAP, RDMAP_PROTECTION, 0xFF) => Self::RdmapProtectionUnspecified,
            (LAYER_RDMAP, RDMAP_OPERATION, 0x05) => Self::RdmapInvalidVersion,
            (LAYER_RDMAP, RDMAP_OPERATION, 0x06) => Self::RdmapUnexpectedOpcode,
            (LAYER_RDMAP, RDMAP_OPERATION, 0x07) => Self::RdmapStreamCatastrophic,
            (LAYER_RDMAP, RDMAP_OPERATION, 0x08) => Self::RdmapGlobalCatastrophic,
            (LAYER_RDMAP, RDMAP_OPERATION, 0x09) => Self::RdmapOperationCannotInvalidate,
            (LAYER_RDMAP, RDMAP_OPERATION, 0xFF) => Self::RdmapOperationUnspecified,
            (LAYER_DDP, DDP_CATASTROPHIC, 0x00) => Self::DdpLocalCatastrophic,
            (LAYER_DDP, DDP_TAGGED, 0x00) => Self::DdpTaggedInvalidStag,
            (LAYER_DDP, DDP_TAGGED, 0x01) => Self::DdpTaggedBaseBounds,
            (LAYER_DDP, DDP_TAGGED, 0x02) => Self::DdpTaggedStagNotAssociated,
            (LAYER_DDP, DDP_TAGGED, 0x03) => Self::DdpTaggedToWrap,
            (LAYER_DDP, DDP_TAGGED, 0x04) => Self::DdpTaggedInvalidVersion,
            (LAYER_DDP, DDP_UNTAGGED, 0x01) => Self::DdpUntaggedInvalidQn,
            (LAYER_DDP, DDP_UNTAGGED, 0x02) => Self::DdpUntaggedNoBuffer,
            (LAYER_DDP, DDP_UNTAGGED, 0x03) => Self::DdpUntaggedInvalidMsnRange,
            (LAYER_DDP, DDP_UNTAGGED, 0x04) => Self::DdpUntaggedInvalidMo,
            (LAYER_DDP, DDP_UNTAGGED, 0x05) => Self::DdpUntaggedMessageTooLong,
            (LAYER_DDP, DDP_UNTAGGED, 0x06) => Self::DdpUntaggedInvalidVersion,
            (LAYER_LLP, LLP_MPA, 0x01) => Self::LlpConnectionLost,
            (LAYER_LLP, LLP_MPA, 0x02) => Self::LlpCrcError,
            (LAYER_LLP, LLP_MPA, 0x03) => Self::LlpMarkerMismatch,
            (LAYER_LLP, LLP_MPA, 0x04) => Self::LlpInvalidMpaFrame,
            (LAYER_LLP, LLP_MPA, 0x05) => Self::LlpLocalCatastrophic,
            (LAYER_LLP, LLP_MPA, 0x06) => Self::LlpInsufficientIrd,
            (LAYER_LLP, LLP_MPA, 0x07) => Self::LlpNoMatchingRtr,
            _ => return None,
        })
    }

    /// Total version of [`TermError::from_parts`] for received Terminates:
    /// unknown triples become [`TermError::Unknown`] (layer and etype masked to
    /// 4 bits).
    #[must_use]
    pub const fn from_wire(layer: u8, etype: u8, code: u8) -> Self {
        let (layer, etype) = (layer & 0x0F, etype & 0x0F);
        match Self::from_parts(layer, etype, code) {
            Some(e) => e,
            None => Self::Unknown { layer, etype, code },
        }
    }

    /// `true` for DDP-layer errors, which per RFC 5040 §4.8 Figure 10 carry
    /// the DDP segment length and the offending DDP header in the Terminate.
    #[must_use]
    pub const fn is_ddp(&self) -> bool {
        self.layer() == LAYER_DDP
    }

    /// `true` for LLP (MPA) errors, whose Terminate carries no headers
    /// (RFC 5040 §4.8 Figure 10).
    #[must_use]
    pub const fn is_llp(&self) -> bool {
        self.layer() == LAYER_LLP
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_triple_roundtrips() {
        let mut known = 0;
        for layer in 0..16u8 {
            for etype in 0..16u8 {
                for code in 0..=255u8 {
                    let e = TermError::from_wire(layer, etype, code);
                    assert_eq!(e.parts(), (layer, etype, code));
                    if let Some(k) = TermError::from_parts(layer, etype, code) {
                        assert_eq!(k, e);
                        assert!(!matches!(k, TermError::Unknown { .. }));
                        known += 1;
                    } else {
                        assert!(matches!(e, TermError::Unknown { .. }));
                    }
                }
            }
        }
        // 256 RDMAP catastrophic codes + 13 RDMAP + 12 DDP + 7 LLP.
        assert_eq!(known, 256 + 13 + 12 + 7);
    }

    #[test]
    fn display_is_plain_english() {
        assert_eq!(
            TermError::LlpCrcError.to_string(),
            "MPA error: CRC mismatch"
        );
        assert_eq!(
            TermError::from_wire(3, 1, 2).to_string(),
            "unknown terminate code: layer 0x3, type 0x1, code 0x02"
        );
    }
}
