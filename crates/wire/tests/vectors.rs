//! The worked byte examples of docs/WIRE.md §8 (each verified with tshark)
//! and the RFC 5044 CRC vectors (§8.6).

mod common;

use common::{deframe_one, hex};
use netdirect_wire::crc::{crc32c, crc32c_append};
use netdirect_wire::ddp::{DdpHeader, TaggedHeader, UntaggedHeader};
use netdirect_wire::fpdu::{encode_fpdu, encode_prefix, encode_terminate_fpdu, encode_trailer};
use netdirect_wire::fpdu::{MAX_PREFIX_LEN, MAX_TERMINATE_FPDU_LEN};
use netdirect_wire::handshake::{
    self, AcceptConfig, ConnectRequest, Initiator, InitiatorConfig, InitiatorOutcome, Negotiated,
    Responder, Rtr,
};
use netdirect_wire::mpa::{EnhancedData, FrameKind, MpaFlags, MpaFrame, RtrTypes};
use netdirect_wire::rdmap::{Opcode, ReadRequest, TermDdpHeader, TermError, Terminate};
use netdirect_wire::sequence::TxMsn;

const REQUEST_8_1: &str = "4d 50 41 20 49 44 20 52 65 71 20 46 72 61 6d 65
    50 02 00 0c 00 10 00 10 72 75 73 74 2d 6e 64 21";
const REPLY_8_2: &str = "4d 50 41 20 49 44 20 52 65 70 20 46 72 61 6d 65
    50 02 00 04 00 10 00 10";
const SEND_8_3: &str = "00 1a 41 43 00 00 00 00 00 00 00 00 00 00 00 01
    00 00 00 00 01 23 45 67 89 ab cd ef 19 a4 c4 6a";
const WRITE_8_4: &str = "00 1b c1 40 00 00 1a 2b 00 00 7f 00 00 00 10 00
    48 65 6c 6c 6f 2c 20 69 57 41 52 50 21 00 00 00 b5 c8 fc f4";
const READ_REQUEST_8_5: &str = "00 2e 41 41 00 00 00 00 00 00 00 01 00 00 00 01
    00 00 00 00 00 00 03 05 00 00 00 00 00 00 20 00
    00 00 00 08 00 00 1a 2b 00 00 7f 00 00 00 10 00 80 24 ea 37";
const READ_RESPONSE_8_5: &str = "00 16 c1 42 00 00 03 05 00 00 00 00 00 00 20 00
    00 01 02 03 04 05 06 07 7b 82 06 19";
const TERMINATE_8_5: &str = "00 2a 41 47 00 00 00 00 00 00 00 02 00 00 00 01
    00 00 00 00 12 02 c0 00 00 1a 41 43 00 00 00 00
    00 00 00 00 00 00 00 02 00 00 00 00 fb cf 9f a9";
const WRITE_RTR_8_5: &str = "00 0e c1 40 00 00 00 01 00 00 00 00 00 00 00 00 eb d3 4c 5f";

fn request_8_1() -> ConnectRequest {
    ConnectRequest {
        rev: 2,
        crc: true,
        markers: false,
        enhanced: Some(EnhancedData {
            p2p: false,
            rtr: RtrTypes::empty(),
            ird: 16,
            ord: 16,
        }),
        private_data: b"rust-nd!".to_vec(),
        probe: false,
    }
}

#[test]
fn mpa_request_8_1() {
    let want = hex(REQUEST_8_1);
    let init = Initiator::new(InitiatorConfig {
        crc: true,
        ird: 16,
        ord: 16,
        p2p: false,
        private_data: b"rust-nd!".to_vec(),
        probe: false,
    });
    assert_eq!(init.request(), want);

    let (f, n) = MpaFrame::decode(&want).unwrap().unwrap();
    assert_eq!(n, 32);
    assert_eq!(f.kind, FrameKind::Request);
    assert_eq!(f.flags, MpaFlags::CRC | MpaFlags::ENHANCED);
    assert_eq!(f.rev, 2);
    assert_eq!(f.ulp_data, b"rust-nd!");
    assert_eq!(f.enhanced, request_8_1().enhanced);
    assert_eq!(f.to_vec(), want);

    let (req, n) = Responder::new().handle_request(&want).unwrap().unwrap();
    assert_eq!(n, 32);
    assert_eq!(req, request_8_1());
}

#[test]
fn mpa_reply_8_2() {
    let want = hex(REPLY_8_2);
    let cfg = AcceptConfig {
        crc: true,
        ird: 16,
        ord: 16,
        private_data: Vec::new(),
        probe: false,
    };
    let (bytes, neg) = handshake::accept(&request_8_1(), &cfg);
    assert_eq!(bytes, want);
    assert_eq!(
        neg,
        Negotiated {
            rev: 2,
            crc: true,
            peer_ird: 16,
            peer_ord: 16,
            enhanced: true,
            rtr: None,
            private_data: b"rust-nd!".to_vec(),
            local_ird: 16,
            local_ord: 16,
            probe: false,
        }
    );

    let mut init = Initiator::new(InitiatorConfig {
        crc: true,
        ird: 16,
        ord: 16,
        p2p: false,
        private_data: b"rust-nd!".to_vec(),
        probe: false,
    });
    // The Reply followed by the first FPDU in the same buffer.
    let mut buf = want.clone();
    buf.extend_from_slice(&hex(SEND_8_3));
    let (out, n) = init.handle_reply(&buf).unwrap().unwrap();
    assert_eq!(n, 24);
    assert_eq!(
        out,
        InitiatorOutcome::Accepted(Negotiated {
            rev: 2,
            crc: true,
            peer_ird: 16,
            peer_ord: 16,
            enhanced: true,
            rtr: None,
            private_data: Vec::new(),
            local_ird: 16,
            local_ord: 16,
            probe: false,
        })
    );

    // A reject has flag byte 0x70 (docs/WIRE.md §8.2).
    let rej = handshake::reject(&request_8_1(), b"no");
    assert_eq!(rej[16], 0x70);
    assert_eq!(rej[20..24], [0, 0, 0, 0]);
    let mut manual = want;
    manual[16] = 0x70;
    let (out, _) = init.handle_reply(&manual).unwrap().unwrap();
    assert_eq!(
        out,
        InitiatorOutcome::Rejected {
            private_data: Vec::new()
        }
    );
    let (out, n) = init.handle_reply(&rej).unwrap().unwrap();
    assert_eq!(n, rej.len());
    assert_eq!(
        out,
        InitiatorOutcome::Rejected {
            private_data: b"no".to_vec()
        }
    );
}

#[test]
fn p2p_words_8_1() {
    let init = Initiator::new(InitiatorConfig {
        crc: true,
        ird: 16,
        ord: 16,
        p2p: true,
        private_data: Vec::new(),
        probe: false,
    });
    let req = init.request();
    assert_eq!(req[20..24], [0x80, 0x10, 0xc0, 0x10]);
    let (creq, _) = Responder::new().handle_request(&req).unwrap().unwrap();
    let (rep, neg) = handshake::accept(
        &creq,
        &AcceptConfig {
            crc: false,
            ird: 16,
            ord: 16,
            private_data: Vec::new(),
            probe: false,
        },
    );
    // siw's Reply choosing Write.
    assert_eq!(rep[20..24], [0x80, 0x10, 0x80, 0x10]);
    assert_eq!(neg.rtr, Some(Rtr::Write));
}

#[test]
fn send_fpdu_8_3() {
    let want = hex(SEND_8_3);
    let ddp = DdpHeader::send(Opcode::Send, 1, 0, true, 0);
    let payload = hex("01 23 45 67 89 ab cd ef");
    assert_eq!(encode_fpdu(&ddp, &[], &payload, true), want);

    // Zero-copy path, payload gathered from two slices.
    let mut prefix = [0u8; MAX_PREFIX_LEN];
    let n = encode_prefix(&ddp, &[], payload.len(), &mut prefix).unwrap();
    assert_eq!(n, 20);
    let mut trailer = [0u8; 7];
    let t = encode_trailer(
        &prefix[..n],
        &[&payload[..3], &payload[3..]],
        true,
        &mut trailer,
    );
    assert_eq!(t, 4);
    assert_eq!(trailer[..4], [0x19, 0xa4, 0xc4, 0x6a]);
    assert_eq!(crc32c(&want[..28]), 0x6ac4_a419);

    // CRC off: zeros in the CRC field.
    let off = encode_fpdu(&ddp, &[], &payload, false);
    assert_eq!(off[..28], want[..28]);
    assert_eq!(off[28..], [0, 0, 0, 0]);

    let seg = deframe_one(true, &want).unwrap();
    assert_eq!(seg.hdr.ddp, ddp);
    assert_eq!(seg.hdr.payload_len, 8);
    assert_eq!(seg.hdr.ulpdu_len, 26);
    assert_eq!(seg.hdr.raw_ddp(), &want[2..20]);
    assert_eq!(seg.payload, payload);
    assert_eq!(deframe_one(false, &off).unwrap(), seg);
}

#[test]
fn write_fpdu_8_4() {
    let want = hex(WRITE_8_4);
    let ddp = DdpHeader::Tagged(TaggedHeader {
        last: true,
        opcode: Opcode::Write,
        stag: 0x1a2b,
        to: 0x7f00_0000_1000,
    });
    assert_eq!(encode_fpdu(&ddp, &[], b"Hello, iWARP!", true), want);
    assert_eq!(crc32c(&want[..32]), 0xf4fc_c8b5);
    let seg = deframe_one(true, &want).unwrap();
    assert_eq!(seg.hdr.ddp, ddp);
    assert_eq!(seg.payload, b"Hello, iWARP!");
}

#[test]
fn read_request_8_5() {
    let want = hex(READ_REQUEST_8_5);
    let rr = ReadRequest {
        sink_stag: 0x305,
        sink_to: 0x2000,
        size: 8,
        src_stag: 0x1a2b,
        src_to: 0x7f00_0000_1000,
    };
    let ddp = DdpHeader::read_request(1);
    assert_eq!(encode_fpdu(&ddp, &rr.to_bytes(), &[], true), want);
    assert_eq!(crc32c(&want[..48]), 0x37ea_2480);
    assert_eq!(ReadRequest::parse(&want[20..48]), Ok(rr));
    let seg = deframe_one(true, &want).unwrap();
    assert_eq!(seg.hdr.ddp, ddp);
    assert_eq!(seg.hdr.read_request, Some(rr));
    assert_eq!(seg.hdr.payload_len, 0);
}

#[test]
fn read_response_8_5() {
    let want = hex(READ_RESPONSE_8_5);
    let ddp = DdpHeader::read_response(0x305, 0x2000, true);
    let payload = [0u8, 1, 2, 3, 4, 5, 6, 7];
    assert_eq!(encode_fpdu(&ddp, &[], &payload, true), want);
    assert_eq!(crc32c(&want[..24]), 0x1906_827b);
    let seg = deframe_one(true, &want).unwrap();
    assert_eq!(seg.hdr.ddp, ddp);
    assert_eq!(seg.payload, payload);
}

#[test]
fn terminate_8_5() {
    let want = hex(TERMINATE_8_5);
    let offending = DdpHeader::Untagged(UntaggedHeader {
        last: true,
        opcode: Opcode::Send,
        inval_stag: 0,
        qn: 0,
        msn: 2,
        mo: 0,
    });
    let term = Terminate {
        error: TermError::DdpUntaggedNoBuffer,
        ddp_seg_len: Some(26),
        ddp_header: Some(TermDdpHeader::from_header(&offending)),
        rdma_header: None,
    };
    assert_eq!(term.control(), 0x1202_c000);
    let mut out = [0u8; MAX_TERMINATE_FPDU_LEN];
    let n = encode_terminate_fpdu(&term, true, &mut out);
    assert_eq!(out[..n], want[..]);
    assert_eq!(crc32c(&want[..44]), 0xa99f_cffb);

    let seg = deframe_one(true, &want).unwrap();
    assert_eq!(seg.hdr.ddp, DdpHeader::terminate());
    assert_eq!(seg.hdr.terminate, Some(term));
    assert_eq!(seg.hdr.payload_len, 0);
    let t = seg.hdr.terminate.unwrap();
    assert_eq!(t.error.parts(), (1, 2, 2));
    assert_eq!(t.ddp_header.unwrap().decode(), Ok(offending));
}

#[test]
fn write_rtr_8_5() {
    let want = hex(WRITE_RTR_8_5);
    let mut tx = TxMsn::new();
    assert_eq!(handshake::rtr_fpdu(Rtr::Write, &mut tx, true), want);
    assert_eq!(crc32c(&want[..16]), 0x5f4c_d3eb);
    let seg = deframe_one(true, &want).unwrap();
    assert!(handshake::is_rtr(Rtr::Write, &seg.hdr));
    assert!(!handshake::is_rtr(Rtr::Read, &seg.hdr));

    // The Read RTR takes MSN 1 on QN 1 and leaves the next Read at MSN 2.
    let read = handshake::rtr_fpdu(Rtr::Read, &mut tx, true);
    let seg = deframe_one(true, &read).unwrap();
    assert!(handshake::is_rtr(Rtr::Read, &seg.hdr));
    assert_eq!(seg.hdr.ddp, DdpHeader::read_request(1));
    assert_eq!(tx.next(1), 2);
}

#[test]
fn crc_vectors_8_6() {
    assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    // RFC 5044 Figure 5: marker + first FPDU (Send of 24 zero bytes, MSN 1).
    let mut f5 = hex("00 00 00 00 00 2a 41 43 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00");
    f5.extend_from_slice(&[0; 24]);
    assert_eq!(crc32c(&f5), 0x8399_2352);
    assert_eq!(crc32c(&f5).to_le_bytes(), [0x52, 0x23, 0x99, 0x83]);
    // RFC 5044 Figure 6: FPDU with a marker (FPDUPTR 0x14) inside it.
    let mut f6 = hex("00 2a 41 43 00 00 00 00 00 00 00 00 00 00 00 02 00 00 00 00 00 00 00 14");
    f6.extend_from_slice(&[0; 24]);
    assert_eq!(crc32c(&f6), 0x9858_9284);
    assert_eq!(crc32c(&f6).to_le_bytes(), [0x84, 0x92, 0x58, 0x98]);
    // Incremental over the same data.
    assert_eq!(crc32c_append(crc32c(&f6[..7]), &f6[7..]), 0x9858_9284);
}
