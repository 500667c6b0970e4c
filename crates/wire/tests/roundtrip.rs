//! Property tests: every header type, MPA frame and Terminate round-trips.

mod strategies;

use netdirect_wire::ddp::DdpHeader;
use netdirect_wire::mpa::{EnhancedData, FrameKind, MpaFlags, MpaFrame};
use netdirect_wire::rdmap::{ReadRequest, TermError, Terminate, TERMINATE_MAX_LEN};
use proptest::prelude::*;
use strategies::*;

proptest! {
    #[test]
    fn ddp_header_roundtrip(h in ddp_header(), trailing in proptest::collection::vec(any::<u8>(), 0..8)) {
        let mut buf = [0u8; 18];
        let n = h.encode(&mut buf);
        prop_assert_eq!(n, h.len());
        let mut wire = buf[..n].to_vec();
        wire.extend_from_slice(&trailing);
        prop_assert_eq!(DdpHeader::parse(&wire), Ok((h, n)));
        // Every strict prefix is a length error, never a panic.
        for k in 0..n {
            prop_assert!(DdpHeader::parse(&wire[..k]).is_err());
        }
    }

    #[test]
    fn read_request_roundtrip(rr in read_request()) {
        let b = rr.to_bytes();
        prop_assert_eq!(ReadRequest::parse(&b), Ok(rr));
    }

    #[test]
    fn term_error_roundtrip(e in term_error()) {
        let (l, t, c) = e.parts();
        prop_assert_eq!(TermError::from_wire(l, t, c), e);
        prop_assert_eq!((e.layer(), e.etype(), e.code()), (l, t, c));
        prop_assert!(!e.to_string().is_empty());
    }

    #[test]
    fn terminate_roundtrip(t in terminate(), trailing in proptest::collection::vec(any::<u8>(), 0..8)) {
        let mut b = [0u8; TERMINATE_MAX_LEN];
        let n = t.encode(&mut b);
        prop_assert_eq!(n, t.encoded_len());
        let mut wire = b[..n].to_vec();
        wire.extend_from_slice(&trailing);
        prop_assert_eq!(Terminate::parse(&wire), Ok((t, n)));
        for k in 0..n {
            prop_assert!(Terminate::parse(&wire[..k]).is_err());
        }
    }

    #[test]
    fn enhanced_roundtrip(e in enhanced()) {
        prop_assert_eq!(EnhancedData::decode(e.encode()), e);
    }

    #[test]
    fn enhanced_decode_encode(w in any::<[u8; 4]>()) {
        prop_assert_eq!(EnhancedData::decode(w).encode(), w);
    }

    #[test]
    fn mpa_frame_roundtrip(
        request in any::<bool>(),
        flag_bits in 0u8..8,
        rev in 0u8..=2,
        e in proptest::option::of(enhanced()),
        ulp in proptest::collection::vec(any::<u8>(), 0..=508),
        trailing in proptest::collection::vec(any::<u8>(), 0..8),
    ) {
        let enhanced = if rev == 2 { e } else { None };
        let flags = MpaFlags::from_bits_truncate(flag_bits << 5);
        let frame = MpaFrame {
            kind: if request { FrameKind::Request } else { FrameKind::Reply },
            flags,
            rev,
            enhanced,
            ulp_data: &ulp,
        };
        let mut wire = frame.to_vec();
        let len = wire.len();
        prop_assert_eq!(len, 20 + frame.pd_len());
        wire.extend_from_slice(&trailing);
        let (got, n) = MpaFrame::decode(&wire).unwrap().unwrap();
        prop_assert_eq!(n, len);
        let mut want = frame;
        want.flags.set(MpaFlags::ENHANCED, enhanced.is_some());
        prop_assert_eq!(got, want);
        for k in 0..len {
            prop_assert_eq!(MpaFrame::decode(&wire[..k]), Ok(None));
        }
    }
}
