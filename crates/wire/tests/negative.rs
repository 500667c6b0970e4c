//! Negative cases: each malformed input gives its specific error.

mod common;

use common::{deframe, deframe_one, hex};
use netdirect_wire::ddp::{DdpHeader, TaggedHeader, UntaggedHeader};
use netdirect_wire::fpdu::{encode_fpdu, Deframer, Event, FramingError};
use netdirect_wire::handshake::{Initiator, InitiatorConfig, Responder};
use netdirect_wire::mpa::{
    EnhancedData, FrameKind, MpaError, MpaFlags, MpaFrame, RtrTypes, KEY_REPLY, KEY_REQUEST,
};
use netdirect_wire::rdmap::{Opcode, ReadRequest, TermError};
use netdirect_wire::sequence::RxSequencer;

const SEND_8_3: &str = "00 1a 41 43 00 00 00 00 00 00 00 00 00 00 00 01
    00 00 00 00 01 23 45 67 89 ab cd ef 19 a4 c4 6a";

fn frame(
    kind: FrameKind,
    flags: MpaFlags,
    rev: u8,
    e: Option<EnhancedData>,
    ulp: &[u8],
) -> Vec<u8> {
    MpaFrame {
        kind,
        flags,
        rev,
        enhanced: e,
        ulp_data: ulp,
    }
    .to_vec()
}

fn word(p2p: bool, rtr: RtrTypes) -> Option<EnhancedData> {
    Some(EnhancedData {
        p2p,
        rtr,
        ird: 8,
        ord: 8,
    })
}

fn initiator(p2p: bool) -> Initiator {
    Initiator::new(InitiatorConfig {
        crc: false,
        ird: 8,
        ord: 8,
        p2p,
        private_data: Vec::new(),
        probe: false,
    })
}

/// The error a Terminate FPDU carries, deframed with or without CRC checks.
fn terminate_error(fpdu: &[u8], crc: bool) -> Option<TermError> {
    let mut d = Deframer::new(crc, 65535);
    let (ev, _) = d.next(fpdu).expect("a valid FPDU");
    let Some(Event::Header(h)) = ev else {
        panic!("expected a header, got {ev:?}");
    };
    h.terminate.map(|t| t.error)
}

fn err(d: &mut Deframer, input: &[u8]) -> FramingError {
    deframe(d, input).expect_err("must fail")
}

// ---------------------------------------------------------------- MPA

#[test]
fn mpa_bad_key() {
    let mut f = frame(FrameKind::Request, MpaFlags::empty(), 1, None, b"");
    f[9] = b'x';
    assert_eq!(MpaFrame::decode(&f), Err(MpaError::BadKey));
    assert_eq!(Responder::new().handle_request(&f), Err(MpaError::BadKey));
    assert_eq!(initiator(false).handle_reply(&f), Err(MpaError::BadKey));
    assert_eq!(MpaError::BadKey.terminate_code(), 0x04);
    assert_eq!(MpaError::BadKey.term_error(), TermError::LlpInvalidMpaFrame);
    // An FPDU where a frame is expected.
    assert_eq!(MpaFrame::decode(&hex(SEND_8_3)), Err(MpaError::BadKey));
}

#[test]
fn mpa_rev_3() {
    let f = frame(FrameKind::Reply, MpaFlags::empty(), 3, None, b"");
    assert_eq!(MpaFrame::decode(&f), Err(MpaError::UnsupportedRevision(3)));
    // Reported as soon as the 20-byte header is in, before the private data.
    let mut g = frame(FrameKind::Request, MpaFlags::empty(), 3, None, b"abcd");
    g.truncate(20);
    assert_eq!(MpaFrame::decode(&g), Err(MpaError::UnsupportedRevision(3)));
    // Rev 0 frames decode but the handshake refuses them.
    let r0 = frame(FrameKind::Reply, MpaFlags::empty(), 0, None, b"");
    assert!(MpaFrame::decode(&r0).unwrap().is_some());
    assert_eq!(
        initiator(false).handle_reply(&r0),
        Err(MpaError::UnsupportedRevision(0))
    );
    let q0 = frame(FrameKind::Request, MpaFlags::empty(), 0, None, b"");
    assert_eq!(
        Responder::new().handle_request(&q0),
        Err(MpaError::UnsupportedRevision(0))
    );
}

#[test]
fn mpa_private_data_too_long() {
    let ulp = vec![0u8; 513];
    let f = frame(FrameKind::Request, MpaFlags::empty(), 1, None, &ulp);
    assert_eq!(
        MpaFrame::decode(&f[..20]),
        Err(MpaError::PrivateDataTooLong(513))
    );
    assert_eq!(MpaFrame::decode(&f), Err(MpaError::PrivateDataTooLong(513)));
    // 512 bytes is fine (RFC limit), even above the 256-byte interop cap.
    let f = frame(
        FrameKind::Request,
        MpaFlags::empty(),
        2,
        word(false, RtrTypes::empty()),
        &ulp[..508],
    );
    assert!(Responder::new().handle_request(&f).unwrap().is_some());
    // Local private data above 252 bytes is refused.
    let cfg = InitiatorConfig {
        private_data: vec![0; 253],
        ..InitiatorConfig::default()
    };
    assert_eq!(
        Initiator::try_new(cfg).err(),
        Some(MpaError::PrivateDataTooLong(253))
    );
}

#[test]
fn mpa_missing_enhanced_data() {
    let mut f = KEY_REPLY.to_vec();
    f.extend_from_slice(&[0x10, 2, 0, 3, 0, 0, 0]);
    assert_eq!(MpaFrame::decode(&f), Err(MpaError::MissingEnhancedData));
}

#[test]
fn mpa_both_initiators_and_wrong_kind() {
    let req = initiator(false).request();
    assert_eq!(
        initiator(false).handle_reply(&req),
        Err(MpaError::UnexpectedKey(FrameKind::Request))
    );
    let rep = frame(
        FrameKind::Reply,
        MpaFlags::empty(),
        2,
        word(false, RtrTypes::empty()),
        b"",
    );
    assert_eq!(
        Responder::new().handle_request(&rep),
        Err(MpaError::UnexpectedKey(FrameKind::Reply))
    );
    // Even before the key is complete the bytes already tell a kind apart.
    assert_eq!(MpaFrame::decode(&KEY_REQUEST[..10]), Ok(None));
}

#[test]
fn mpa_markers_in_reply() {
    let f = frame(
        FrameKind::Reply,
        MpaFlags::MARKERS,
        2,
        word(false, RtrTypes::empty()),
        b"",
    );
    assert_eq!(
        initiator(false).handle_reply(&f),
        Err(MpaError::MarkersRequested)
    );
}

/// RFC 6581 §9.1: a Reply whose ORD exceeds the IRD we announced cannot be met (our IRD is
/// fixed): the Initiator answers with the LLP Terminate 0x2/0x0/0x06. A Reply offering only a
/// Read RTR to a peer with IRD 0 leaves no usable RTR (the Read would need an IRD slot).
#[test]
fn mpa_reply_ord_beyond_our_ird() {
    // A v2 Reply accepting peer-to-peer with `rtr`, the Responder's IRD and ORD.
    let reply = |rtr: RtrTypes, ird: u16, ord: u16| {
        frame(
            FrameKind::Reply,
            MpaFlags::empty(),
            2,
            Some(EnhancedData {
                p2p: true,
                rtr,
                ird,
                ord,
            }),
            b"",
        )
    };
    let f = reply(RtrTypes::WRITE, 8, 9);
    let init = initiator(true);
    let e = init
        .clone()
        .handle_reply(&f)
        .expect_err("ORD 9 against our IRD 8");
    assert_eq!(e, MpaError::InsufficientIrd);
    let t = init.terminate_for(&e, &f).expect("a Terminate");
    assert_eq!(
        terminate_error(&t, false),
        Some(TermError::LlpInsufficientIrd)
    );
    // 0x3FFF leaves the limit to the ULP; equal is fine.
    for ord in [8, 0x3FFF] {
        let f = reply(RtrTypes::WRITE, 8, ord);
        assert!(initiator(true).handle_reply(&f).is_ok(), "ORD {ord:#x}");
    }
    assert_eq!(
        initiator(true).handle_reply(&reply(RtrTypes::READ, 0, 0)),
        Err(MpaError::NoMatchingRtr)
    );
}

#[test]
fn mpa_no_matching_rtr() {
    // P2P asked, Reply does not echo A.
    let f = frame(
        FrameKind::Reply,
        MpaFlags::empty(),
        2,
        word(false, RtrTypes::WRITE),
        b"",
    );
    assert_eq!(
        initiator(true).handle_reply(&f),
        Err(MpaError::NoMatchingRtr)
    );
    // A echoed but only a Send RTR accepted.
    let f = frame(
        FrameKind::Reply,
        MpaFlags::empty(),
        2,
        word(true, RtrTypes::SEND),
        b"",
    );
    assert_eq!(
        initiator(true).handle_reply(&f),
        Err(MpaError::NoMatchingRtr)
    );
    // RFC 6581 §9.2: the Initiator answers with one Terminate 0x2/0x0/0x07, framed with the
    // CRC the exchange agreed: here the Reply's C (ours was off).
    let f = frame(
        FrameKind::Reply,
        MpaFlags::CRC,
        2,
        word(true, RtrTypes::SEND),
        b"",
    );
    let init = initiator(true);
    let e = init.clone().handle_reply(&f).expect_err("no usable RTR");
    let t = init.terminate_for(&e, &f).expect("a Terminate");
    assert_eq!(terminate_error(&t, true), Some(TermError::LlpNoMatchingRtr));
    // Other failures: no framing to speak in, no Terminate.
    assert_eq!(init.terminate_for(&MpaError::MarkersRequested, &f), None);
    assert_eq!(MpaError::NoMatchingRtr.terminate_code(), 0x07);
    assert_eq!(
        MpaError::NoMatchingRtr.term_error(),
        TermError::LlpNoMatchingRtr
    );
}

// ---------------------------------------------------------------- FPDU

#[test]
fn bad_crc() {
    let mut f = hex(SEND_8_3);
    f[25] ^= 1; // payload bit flip
    let e = deframe_one(true, &f).unwrap_err();
    assert_eq!(e.error, TermError::LlpCrcError);
    assert_eq!(e.terminate().control(), 0x2002_0000);
    // Ignored with CRCs off.
    assert!(deframe_one(false, &f).is_ok());
    // Wrong byte order of the CRC is a mismatch too.
    let mut g = hex(SEND_8_3);
    g[28..].reverse();
    assert_eq!(
        deframe_one(true, &g).unwrap_err().error,
        TermError::LlpCrcError
    );
}

/// The CRC of a segment that arrives whole is checked in one pass when its header is parsed,
/// that of a segment in pieces as the pieces come; either way the mismatch is reported at the
/// segment's end, after its header and payload events.
#[test]
fn bad_crc_is_reported_at_the_end_whole_or_in_pieces() {
    let mut f = hex(SEND_8_3);
    f[25] ^= 1;
    for piece in [f.len(), 1, 3, 20] {
        let mut d = Deframer::new(true, 65535);
        let mut events = Vec::new();
        let mut rest: &[u8] = &f;
        let err = loop {
            let chunk = &rest[..piece.min(rest.len())];
            match d.next(chunk) {
                Ok((ev, n)) => {
                    if let Some(ev) = ev {
                        events.push(match ev {
                            Event::Header(_) => "header",
                            Event::Payload(_) => "payload",
                            Event::End => "end",
                        });
                    }
                    rest = &rest[n..];
                    assert!(!rest.is_empty(), "the stream ended without the error");
                }
                Err(e) => break e,
            }
        };
        assert_eq!(err.error, TermError::LlpCrcError, "pieces of {piece}");
        assert_eq!(events.first(), Some(&"header"), "pieces of {piece}");
        assert!(events.contains(&"payload") && !events.contains(&"end"));
    }
}

#[test]
fn bad_ddp_version() {
    let mut f = hex(SEND_8_3);
    f[2] = 0x42; // untagged, DV 2
    let e = deframe_one(false, &f).unwrap_err();
    assert_eq!(e.error, TermError::DdpUntaggedInvalidVersion);
    assert_eq!(e.ddp_header, None);
    let mut w = encode_fpdu(&DdpHeader::write(1, 0, true), &[], b"x", false);
    w[2] = 0xC0; // tagged, DV 0
    assert_eq!(
        deframe_one(false, &w).unwrap_err().error,
        TermError::DdpTaggedInvalidVersion
    );
}

#[test]
fn bad_rdmap_version() {
    let mut f = hex(SEND_8_3);
    f[3] = 0x03; // RV 0
    assert_eq!(
        deframe_one(false, &f).unwrap_err().error,
        TermError::RdmapInvalidVersion
    );
}

#[test]
fn unknown_opcode() {
    for op in [0x48u8, 0x4A, 0x4F] {
        let mut f = hex(SEND_8_3);
        f[3] = op;
        let e = deframe_one(false, &f).unwrap_err();
        assert_eq!(e.error, TermError::RdmapUnexpectedOpcode);
        // Remote operation error: the DDP header is included (RFC 5040 Fig. 10).
        let (raw, len) = e.ddp_header.unwrap();
        assert_eq!(&raw[..usize::from(len)], &f[2..20]);
        let t = e.terminate();
        assert!(t.ddp_header.is_some());
        assert_eq!(t.ddp_seg_len, Some(26));
    }
    // Tagged Send / untagged Write: T bit inconsistent with the opcode.
    let mut f = hex(SEND_8_3);
    f[2] = 0xC1;
    assert_eq!(
        deframe_one(false, &f).unwrap_err().error,
        TermError::RdmapUnexpectedOpcode
    );
    let mut w = encode_fpdu(&DdpHeader::write(1, 0, true), &[], &[0; 8], false);
    w[2] = 0x41;
    assert_eq!(
        deframe_one(false, &w).unwrap_err().error,
        TermError::RdmapUnexpectedOpcode
    );
}

#[test]
fn ulpdu_too_short() {
    // Shorter than any DDP header.
    let e = err(&mut Deframer::new(false, 65535), &[0x00, 0x0d, 0xC1, 0x40]);
    assert_eq!(e.error, TermError::DdpUntaggedMessageTooLong);
    assert_eq!(e.ddp_seg_len, Some(13));
    // Long enough for a tagged header, but this one is untagged (18 bytes).
    let e = err(
        &mut Deframer::new(false, 65535),
        &[0x00, 0x10, 0x41, 0x43, 0, 0],
    );
    assert_eq!(e.error, TermError::DdpUntaggedMessageTooLong);
    assert_eq!(e.ddp_header, None);
    // Read Request whose ULPDU cannot hold the 28-byte header.
    let mut f = encode_fpdu(&DdpHeader::read_request(1), &[0; 20], &[], false);
    f[1] = 38;
    let e = err(&mut Deframer::new(false, 65535), &f);
    assert_eq!(e.error, TermError::DdpUntaggedMessageTooLong);
    assert!(e.ddp_header.is_some());
    // Terminate whose control word announces more than the ULPDU holds.
    let f = encode_fpdu(
        &DdpHeader::terminate(),
        &[0x10, 0x02, 0xE0, 0x00],
        &[],
        false,
    );
    let e = err(&mut Deframer::new(false, 65535), &f);
    assert_eq!(e.error, TermError::DdpUntaggedMessageTooLong);
    // Single-segment messages that announce more segments (L clear), or a Terminate with
    // bytes after its header: longer than the message can be.
    let rr = ReadRequest {
        sink_stag: 1,
        sink_to: 0,
        size: 8,
        src_stag: 2,
        src_to: 0,
    };
    let mut f = encode_fpdu(&DdpHeader::read_request(1), &rr.to_bytes(), &[], false);
    assert_eq!(f[2] & 0x40, 0x40, "L is set by the encoder");
    f[2] &= !0x40;
    let e = err(&mut Deframer::new(false, 65535), &f);
    assert_eq!(
        e.error,
        TermError::DdpUntaggedMessageTooLong,
        "Read Request, L=0"
    );
    let term = [0x10, 0x02, 0x00, 0x00];
    let mut f = encode_fpdu(&DdpHeader::terminate(), &term, &[], false);
    f[2] &= !0x40;
    let e = err(&mut Deframer::new(false, 65535), &f);
    assert_eq!(
        e.error,
        TermError::DdpUntaggedMessageTooLong,
        "Terminate, L=0"
    );
    let f = encode_fpdu(&DdpHeader::terminate(), &term, &[0; 8], false);
    let e = err(&mut Deframer::new(false, 65535), &f);
    assert_eq!(
        e.error,
        TermError::DdpUntaggedMessageTooLong,
        "Terminate with bytes after its header"
    );
}

#[test]
fn ulpdu_above_max() {
    let f = encode_fpdu(&DdpHeader::write(1, 0, true), &[], &[7; 200], false);
    let e = err(&mut Deframer::new(false, 200), &f);
    assert_eq!(e.error, TermError::DdpUntaggedMessageTooLong);
    assert_eq!(e.ddp_seg_len, Some(214));
    assert!(e.ddp_header.is_some());
    assert!(deframe(&mut Deframer::new(false, 214), &f).is_ok());
    // The limit is never below the RFC minimum MULPDU of 128.
    let g = encode_fpdu(&DdpHeader::write(1, 0, true), &[], &[7; 100], false);
    assert!(deframe(&mut Deframer::new(false, 0), &g).is_ok());
}

#[test]
fn read_request_with_payload() {
    let rr = ReadRequest::default().to_bytes();
    let f = encode_fpdu(&DdpHeader::read_request(1), &rr, &[1, 2, 3, 4], true);
    let e = deframe_one(true, &f).unwrap_err();
    assert_eq!(e.error, TermError::DdpUntaggedMessageTooLong);
    assert_eq!(e.ddp_seg_len, Some(18 + 28 + 4));
}

#[test]
fn wrong_queue_numbers() {
    let bad = |opcode, qn| {
        DdpHeader::Untagged(UntaggedHeader {
            last: true,
            opcode,
            inval_stag: 0,
            qn,
            msn: 1,
            mo: 0,
        })
    };
    let f = encode_fpdu(&bad(Opcode::Send, 1), &[], b"x", false);
    assert_eq!(
        deframe_one(false, &f).unwrap_err().error,
        TermError::DdpUntaggedInvalidQn
    );
    let f = encode_fpdu(&bad(Opcode::Terminate, 0), &[0; 4], &[], false);
    assert_eq!(
        deframe_one(false, &f).unwrap_err().error,
        TermError::DdpUntaggedInvalidQn
    );
    let f = encode_fpdu(&bad(Opcode::ReadRequest, 0), &[0; 28], &[], false);
    assert_eq!(
        deframe_one(false, &f).unwrap_err().error,
        TermError::DdpUntaggedInvalidQn
    );
}

#[test]
fn poisoned_after_error_and_direct_misuse() {
    let mut f = hex(SEND_8_3);
    f[25] ^= 1;
    let mut d = Deframer::new(true, 65535);
    let e = err(&mut d, &f);
    assert_eq!(d.next(&hex(SEND_8_3)), Err(e));

    // payload_direct outside the payload phase is a local bug.
    let mut d = Deframer::new(true, 65535);
    d.payload_direct(&[1]);
    assert_eq!(
        d.next(&hex(SEND_8_3)).unwrap_err().error,
        TermError::RdmapLocalCatastrophic(0xFF)
    );
    // More than remains, likewise.
    let mut d = Deframer::new(true, 65535);
    let s = hex(SEND_8_3);
    let (ev, n) = d.next(&s).unwrap();
    assert!(matches!(ev, Some(Event::Header(_))));
    assert_eq!(d.payload_remaining(), 8);
    d.payload_direct(&s[n..n + 9]);
    assert!(d.error().is_some());
}

// ---------------------------------------------------------------- sequence

fn send(msn: u32, mo: u32, last: bool) -> DdpHeader {
    DdpHeader::send(Opcode::Send, msn, mo, last, 0)
}

#[test]
fn msn_out_of_sequence() {
    let mut rx = RxSequencer::new();
    rx.check(&send(1, 0, true), 4).unwrap();
    assert_eq!(
        rx.check(&send(3, 0, true), 4),
        Err(TermError::DdpUntaggedInvalidMsnRange)
    );
    assert_eq!(
        rx.check(&send(1, 0, true), 4),
        Err(TermError::DdpUntaggedInvalidMsnRange)
    );
    rx.check(&send(2, 0, true), 4).unwrap();
    // Each queue counts separately.
    rx.check(&DdpHeader::read_request(1), 0).unwrap();
    assert_eq!(
        rx.check(&DdpHeader::read_request(1), 0),
        Err(TermError::DdpUntaggedInvalidMsnRange)
    );
}

#[test]
fn mo_gap() {
    let mut rx = RxSequencer::new();
    rx.check(&send(1, 0, false), 100).unwrap();
    assert_eq!(
        rx.check(&send(1, 101, true), 1),
        Err(TermError::DdpUntaggedInvalidMo)
    );
    assert_eq!(
        rx.check(&send(1, 99, true), 1),
        Err(TermError::DdpUntaggedInvalidMo)
    );
    rx.check(&send(1, 100, true), 1).unwrap();
    // The first segment must start at MO 0.
    assert_eq!(
        rx.check(&send(2, 4, true), 1),
        Err(TermError::DdpUntaggedInvalidMo)
    );
}

#[test]
fn tagged_continuity() {
    let mut rx = RxSequencer::new();
    let w = |stag, to, last| {
        DdpHeader::Tagged(TaggedHeader {
            last,
            opcode: Opcode::Write,
            stag,
            to,
        })
    };
    rx.check(&w(9, 1000, false), 10).unwrap();
    assert_eq!(
        rx.check(&w(8, 1010, true), 1),
        Err(TermError::DdpTaggedInvalidStag)
    );
    assert_eq!(
        rx.check(&w(9, 1011, true), 1),
        Err(TermError::DdpTaggedBaseBounds)
    );
    assert!(rx.check(&w(9, 1010, true), 1).unwrap().last);
}
