//! Hot paths of the wire crate: CRC-32C and one FPDU's encode and decode.
//!
//! `cargo bench -p netdirect-wire --bench wire` (divan; filter with a name, e.g. `-- crc32c`).
//! `bench/callgrind` runs the same cases for instruction counts (`ND_BENCH_CASE`, see
//! `bench/harness.rs`), so the case names here are part of its contract.
//!
//! What each case is, on the data path (RFC 5044 §4, RFC 5041 §4, RFC 5040 §4):
//! - `crc32c/N`: the CRC the sender appends and the receiver checks over every FPDU.
//! - `encode_send/N`: prefix (length + untagged DDP/RDMAP Send header) and trailer (pad + CRC)
//!   for an N-byte payload, gathered in place as the tcp provider sends it.
//! - `encode_write/N`: the same for a tagged RDMA Write segment.
//! - `decode_send/N`: the receive-side deframer over one whole Send FPDU: header, payload
//!   (borrowed, not copied) and trailer with the CRC check.

use divan::counter::BytesCount;
use divan::{black_box, Bencher};
use netdirect_wire::crc;
use netdirect_wire::ddp::DdpHeader;
use netdirect_wire::fpdu::{self, Deframer, Event, MAX_PREFIX_LEN};
use netdirect_wire::rdmap::Opcode;

#[path = "../../../bench/harness.rs"]
mod harness;

fn main() {
    let Some(case) = harness::Case::from_env() else {
        return divan::main();
    };
    let len = case.arg;
    match case.name.as_str() {
        "crc32c" => case.run(crc_op(len)),
        "encode_send" => case.run(encode_op(send_header(), len)),
        "encode_write" => case.run(encode_op(write_header(), len)),
        "decode_send" => case.run(decode_op(len)),
        _ => case.unknown(),
    }
}

/// 64 B is a small message, 4 KiB a page, 64 KiB − 64 about the largest FPDU payload (a
/// ULPDU is at most 65535 bytes, RFC 5044 §4.1).
const SIZES: &[usize] = &[64, 4096, 65536 - 64];

fn send_header() -> DdpHeader {
    DdpHeader::send(Opcode::Send, 1, 0, true, 0)
}

fn write_header() -> DdpHeader {
    DdpHeader::write(0x1234, 0x1000, true)
}

fn crc_op(len: usize) -> impl FnMut() -> u32 {
    let data = vec![0x5au8; len];
    move || crc::crc32c(black_box(&data))
}

/// Encode prefix and trailer for a `len`-byte payload under `ddp`, as the tcp provider's
/// sender does (the payload itself is gathered from the caller's buffer, never copied).
fn encode_op(ddp: DdpHeader, len: usize) -> impl FnMut() -> usize {
    let payload = vec![0x5au8; len];
    move || {
        let mut prefix = [0u8; MAX_PREFIX_LEN];
        let n = fpdu::encode_prefix(black_box(&ddp), &[], payload.len(), &mut prefix)
            .expect("fits one FPDU");
        let mut trailer = [0u8; 7];
        n + fpdu::encode_trailer(&prefix[..n], &[black_box(&payload)], true, &mut trailer)
    }
}

/// Feed one whole Send FPDU to a deframer; returns the payload bytes seen.
fn decode_op(len: usize) -> impl FnMut() -> usize {
    let frame = fpdu::encode_fpdu(&send_header(), &[], &vec![0x5au8; len], true);
    // One deframer for the whole run: each call feeds one complete FPDU, so it is back at a
    // frame boundary after every call, as on a live connection.
    let mut d = Deframer::new(true, fpdu::MAX_ULPDU);
    move || {
        let mut input = black_box(&frame[..]);
        let mut seen = 0;
        while !input.is_empty() {
            let (ev, used) = d.next(input).expect("valid FPDU");
            if let Some(Event::Payload(p)) = ev {
                seen += p.len();
            }
            input = &input[used..];
        }
        seen
    }
}

#[divan::bench(args = [64, 4096, 65536])]
fn crc32c(bencher: Bencher<'_, '_>, len: usize) {
    bencher
        .counter(BytesCount::new(len))
        .bench_local(crc_op(len));
}

#[divan::bench(args = SIZES)]
fn encode_send(bencher: Bencher<'_, '_>, len: usize) {
    bencher
        .counter(BytesCount::new(len))
        .bench_local(encode_op(send_header(), len));
}

#[divan::bench(args = SIZES)]
fn encode_write(bencher: Bencher<'_, '_>, len: usize) {
    bencher
        .counter(BytesCount::new(len))
        .bench_local(encode_op(write_header(), len));
}

#[divan::bench(args = SIZES)]
fn decode_send(bencher: Bencher<'_, '_>, len: usize) {
    bencher
        .counter(BytesCount::new(len))
        .bench_local(decode_op(len));
}
