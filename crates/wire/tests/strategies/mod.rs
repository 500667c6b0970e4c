//! proptest strategies shared by the property tests.
#![allow(dead_code)]

use netdirect_wire::ddp::{DdpHeader, TaggedHeader, UntaggedHeader, UNTAGGED_LEN};
use netdirect_wire::mpa::{EnhancedData, RtrTypes};
use netdirect_wire::rdmap::{Opcode, ReadRequest, TermDdpHeader, TermError, Terminate};
use proptest::prelude::*;

pub(crate) fn opcode() -> impl Strategy<Value = Opcode> {
    (0u8..8).prop_map(|b| Opcode::from_bits(b).unwrap())
}

pub(crate) fn send_opcode() -> impl Strategy<Value = Opcode> {
    prop_oneof![
        Just(Opcode::Send),
        Just(Opcode::SendInvalidate),
        Just(Opcode::SendSe),
        Just(Opcode::SendSeInvalidate),
    ]
}

/// Any well-formed DDP header (T bit consistent with the opcode).
pub(crate) fn ddp_header() -> impl Strategy<Value = DdpHeader> {
    (
        opcode(),
        any::<bool>(),
        any::<u32>(),
        any::<u64>(),
        any::<[u32; 3]>(),
    )
        .prop_map(|(opcode, last, stag, to, [qn, msn, mo])| {
            if opcode.is_tagged() {
                DdpHeader::Tagged(TaggedHeader {
                    last,
                    opcode,
                    stag,
                    to,
                })
            } else {
                DdpHeader::Untagged(UntaggedHeader {
                    last,
                    opcode,
                    inval_stag: stag,
                    qn,
                    msn,
                    mo,
                })
            }
        })
}

pub(crate) fn read_request() -> impl Strategy<Value = ReadRequest> {
    (
        any::<u32>(),
        any::<u64>(),
        any::<u32>(),
        any::<u32>(),
        any::<u64>(),
    )
        .prop_map(|(sink_stag, sink_to, size, src_stag, src_to)| ReadRequest {
            sink_stag,
            sink_to,
            size,
            src_stag,
            src_to,
        })
}

/// Any Terminate code, known or not.
pub(crate) fn term_error() -> impl Strategy<Value = TermError> {
    (0u8..16, 0u8..16, any::<u8>()).prop_map(|(l, e, c)| TermError::from_wire(l, e, c))
}

pub(crate) fn terminate() -> impl Strategy<Value = Terminate> {
    (
        term_error(),
        proptest::option::of(any::<u16>()),
        proptest::option::of(any::<[u8; UNTAGGED_LEN]>()),
        proptest::option::of(any::<[u8; 28]>()),
    )
        .prop_map(|(error, ddp_seg_len, ddp, rdma_header)| Terminate {
            error,
            ddp_seg_len,
            ddp_header: ddp.and_then(|b| TermDdpHeader::new(&b)),
            rdma_header,
        })
}

pub(crate) fn enhanced() -> impl Strategy<Value = EnhancedData> {
    (any::<bool>(), 0u8..8, 0u16..=0x3FFF, 0u16..=0x3FFF).prop_map(|(p2p, rtr, ird, ord)| {
        EnhancedData {
            p2p,
            rtr: RtrTypes::from_bits_truncate(rtr),
            ird,
            ord,
        }
    })
}

/// One valid FPDU's parts: DDP header, RDMAP extra header, payload.
pub(crate) fn fpdu_parts() -> impl Strategy<Value = (DdpHeader, Vec<u8>, Vec<u8>)> {
    let payload = || proptest::collection::vec(any::<u8>(), 0..3000);
    prop_oneof![
        // Sends.
        (send_opcode(), any::<[u32; 3]>(), any::<bool>(), payload()).prop_map(
            |(op, [msn, mo, inval], last, p)| (
                DdpHeader::send(op, msn, mo, last, inval),
                vec![],
                p
            )
        ),
        // Writes and Read Responses.
        (
            any::<bool>(),
            any::<u32>(),
            any::<u64>(),
            any::<bool>(),
            payload()
        )
            .prop_map(|(write, stag, to, last, p)| {
                let h = if write {
                    DdpHeader::write(stag, to, last)
                } else {
                    DdpHeader::read_response(stag, to, last)
                };
                (h, vec![], p)
            }),
        // Read Requests.
        (any::<u32>(), read_request()).prop_map(|(msn, rr)| (
            DdpHeader::read_request(msn),
            rr.to_bytes().to_vec(),
            vec![]
        )),
        // Terminates.
        terminate().prop_map(|t| {
            let mut b = [0u8; netdirect_wire::rdmap::TERMINATE_MAX_LEN];
            let n = t.encode(&mut b);
            (DdpHeader::terminate(), b[..n].to_vec(), vec![])
        }),
    ]
}
