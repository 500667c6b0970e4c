//! Fuzzes the inbound placement path of the `tcp` provider: the FPDU deframer and receive
//! sequencer feed every segment header to the remote-access checks
//! (`netdirect_tcp::protect`) against a registration table holding regions and windows with
//! every kind of right, bound to this queue pair or another, live and dead, as the provider
//! does before it places or sends a byte.
//!
//! The property: whatever the bytes, an accepted RDMA Write segment or Read Request names a
//! live registration that grants the access, is a region or a window bound through this
//! queue pair, and covers the whole byte range; an accepted Read Response segment continues
//! the outstanding Read exactly and lies in its sink.
//!
//! Input layout: byte 0 selects CRC on/off and how STags and TOs are taken: raw from the
//! stream, or steered onto the table's tokens and near their bounds (a fuzzer cannot guess
//! 32-bit random tokens); the rest is the stream, in chunks of 1..=256 bytes chosen by byte 1.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netdirect_spi::kit::mr::{Kind, NewRegistration, Registration, Table};
use netdirect_spi::MrFlags;
use netdirect_tcp::protect::{
    check_read_response, check_read_source, check_write, ExpectedResponse,
};
use netdirect_wire::ddp::DdpHeader;
use netdirect_wire::fpdu::{Deframer, Event};
use netdirect_wire::rdmap::{Opcode, ReadRequest};
use netdirect_wire::sequence::RxSequencer;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The queue pair the stream belongs to.
const QP: u64 = 1;

struct World {
    table: Table,
    regs: Vec<Arc<Registration>>,
}

fn world() -> World {
    let table = Table::new();
    let mut regs = Vec::new();
    let mut add = |base: usize, len: usize, flags: MrFlags, kind: Kind, qp: u64| {
        let r = table.insert(NewRegistration {
            base,
            len,
            flags,
            kind,
            parent: None,
            keepalive: None,
        });
        r.bound_qp.store(qp, Ordering::Release);
        regs.push(r);
    };
    let rw = MrFlags::ALLOW_REMOTE_READ | MrFlags::ALLOW_REMOTE_WRITE;
    add(0x10_0000, 0x1_0000, rw, Kind::Region, 0);
    add(0x20_0000, 0x1000, MrFlags::ALLOW_REMOTE_READ, Kind::Region, 0);
    add(0x30_0000, 0x1000, MrFlags::ALLOW_REMOTE_WRITE, Kind::Region, 0);
    add(0x40_0000, 0x1000, MrFlags::ALLOW_LOCAL_WRITE, Kind::Region, 0);
    add(0x10_8000, 0x100, rw, Kind::Window, QP);
    add(0x10_9000, 0x100, rw, Kind::Window, QP + 1);
    add(0x10_A000, 0x100, MrFlags::empty(), Kind::Window, QP);
    add(u64::MAX as usize - 0x1FFF, 0x1000, rw, Kind::Region, 0);
    // A dead one: deregistered, its token must never work.
    add(0x50_0000, 0x1000, rw, Kind::Region, 0);
    let dead = regs.last().expect("added").token;
    table.remove(dead);
    World { table, regs }
}

/// Steer a raw STag/TO pair onto the table: pick a registration, perturb the key or not,
/// and land near its bounds.
fn steer(w: &World, stag: u32, to: u64) -> (u32, u64) {
    let r = &w.regs[stag as usize % w.regs.len()];
    let token = if stag & 0x8000_0000 != 0 {
        r.token ^ ((stag >> 8) & 0xFF)
    } else {
        r.token
    };
    let span = r.len as u64 * 2 + 64;
    let to = (r.base as u64).wrapping_sub(32).wrapping_add(to % span);
    (token, to)
}

/// The range `to..to+len` is inside `r`, and `r` is live.
fn inside(r: &Registration, to: u64, len: u64) -> bool {
    let base = r.base as u64;
    r.is_valid() && to >= base && to.checked_add(len).is_some_and(|e| e <= base + r.len as u64)
}

fuzz_target!(|data: &[u8]| {
    let [mode, chunk, stream @ ..] = data else {
        return;
    };
    let crc_on = mode & 1 != 0;
    let steered = mode & 2 != 0;
    let chunk = usize::from(*chunk) + 1;
    let w = world();
    let sink = &w.regs[0];
    let mut d = Deframer::new(crc_on, 65535);
    let mut seq = RxSequencer::new();
    // One outstanding Read of 0x300 bytes into the first region, as the initiator side has.
    let mut expect = ExpectedResponse {
        sink_stag: sink.token,
        sink_to: sink.base as u64 + 0x100,
        size: 0x300,
        got: 0,
    };
    for piece in stream.chunks(chunk) {
        let mut input = piece;
        while !input.is_empty() {
            let (ev, used) = match d.next(input) {
                Ok(x) => x,
                Err(_) => return,
            };
            input = &input[used..];
            let Some(Event::Header(h)) = ev else { continue };
            if seq.check(&h.ddp, h.payload_len).is_err() {
                return;
            }
            let len = u64::from(h.payload_len);
            match h.ddp {
                DdpHeader::Tagged(t) if t.opcode == Opcode::Write && len > 0 => {
                    let (stag, to) = if steered {
                        steer(&w, t.stag, t.to)
                    } else {
                        (t.stag, t.to)
                    };
                    if let Ok(r) = check_write(&w.table, QP, stag, to, h.payload_len) {
                        assert_eq!(r.token, stag, "a Write placed under another token");
                        assert!(inside(&r, to, len), "a Write placed outside {r:?}");
                        assert!(
                            r.flags.contains(MrFlags::ALLOW_REMOTE_WRITE),
                            "a Write placed without the right: {r:?}"
                        );
                        if r.kind == Kind::Window {
                            assert_eq!(r.bound_qp.load(Ordering::Acquire), QP);
                        }
                    }
                }
                DdpHeader::Tagged(t) if t.opcode == Opcode::ReadResponse => {
                    // Steered: the expected STag (a raw one is a guess that almost never
                    // matches), and a TO near the expected one, from the input: right or off
                    // by a few bytes either way, so that refusing a TO out of turn is fuzzed.
                    let (stag, to) = if steered && t.stag & 1 == 0 {
                        let off = i64::from((t.to & 0xF) as i8) - 8;
                        let want = expect.sink_to + u64::from(expect.got);
                        let to = if t.to & 0x10 == 0 {
                            want
                        } else {
                            want.wrapping_add_signed(off)
                        };
                        (expect.sink_stag, to)
                    } else {
                        (t.stag, t.to)
                    };
                    let ok = check_read_response(
                        &expect,
                        stag,
                        to,
                        h.payload_len,
                        t.last,
                        Some(sink),
                    );
                    if ok.is_ok() {
                        if expect.size > 0 && len > 0 {
                            assert_eq!(stag, expect.sink_stag);
                            assert_eq!(to, expect.sink_to + u64::from(expect.got));
                            assert!(inside(sink, to, len));
                        }
                        assert!(u64::from(expect.got) + len <= u64::from(expect.size));
                        expect.got += h.payload_len;
                        if t.last {
                            assert_eq!(expect.got, expect.size, "a Read ended short");
                            // The next outstanding Read: a zero-length one.
                            expect = ExpectedResponse {
                                size: 0,
                                got: 0,
                                ..expect
                            };
                        }
                    }
                }
                DdpHeader::Untagged(u) if u.opcode == Opcode::ReadRequest => {
                    let Some(rr) = h.read_request else { continue };
                    let rr = if steered {
                        let (src_stag, src_to) = steer(&w, rr.src_stag, rr.src_to);
                        ReadRequest {
                            src_stag,
                            src_to,
                            size: rr.size % 0x2_0000,
                            ..rr
                        }
                    } else {
                        rr
                    };
                    if let Ok(src) = check_read_source(&w.table, QP, &rr) {
                        match src {
                            None => assert_eq!(rr.size, 0),
                            Some(r) => {
                                assert_eq!(r.token, rr.src_stag);
                                assert!(inside(&r, rr.src_to, u64::from(rr.size)));
                                assert!(r.flags.contains(MrFlags::ALLOW_REMOTE_READ));
                                if r.kind == Kind::Window {
                                    assert_eq!(r.bound_qp.load(Ordering::Acquire), QP);
                                }
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }
});
