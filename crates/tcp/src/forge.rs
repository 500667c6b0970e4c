//! A hostile iWARP peer, for the fuzz target `tcp_stream` (`fuzz/`): a plain TCP client that
//! does a correct MPA v2 exchange with a victim queue pair of this provider (in this process)
//! and then sends whatever the input describes — Sends, RDMA Writes, Read Requests, Read
//! Responses nobody asked for, Terminates, with right or wrong sequence numbers, STags,
//! offsets, lengths and CRCs, or raw bytes — and ends with a FIN.
//!
//! [`run`] checks what the provider promises any peer (the brief's "bad input" rule, the
//! docs/WIRE.md §4.4 checks): whatever it receives, the victim neither panics nor hangs (its
//! posted Receive completes, delivered or flushed), and no byte of its memory changes outside
//! the region it exposed for remote writing and that Receive.
//!
//! Not part of the provider's API (hidden from the documentation). The `netdirect-wire`
//! encoders build the FPDUs, so framing and CRCs are right unless the input asks otherwise:
//! a fuzzer could not get past a CRC by itself.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use netdirect_spi::kit::overlapped::Overlapped;
use netdirect_spi::traits::{
    self, CompletionQueue, Connector, MemoryRegion, Provider, QueuePairConfig,
};
use netdirect_spi::{MrFlags, NdResult, ReadLimits, Sge, Status};
use netdirect_wire::ddp::DdpHeader;
use netdirect_wire::fpdu::encode_fpdu;
use netdirect_wire::handshake::{rtr_fpdu, Initiator, InitiatorConfig, InitiatorOutcome};
use netdirect_wire::rdmap::{Opcode, ReadRequest};
use netdirect_wire::sequence::TxMsn;

/// The victim's buffer.
const BUF: usize = 64 * 1024;
/// Its posted Receive.
const RECV: Range<usize> = 0..256;
/// Exposed for remote read and write.
const RW: Range<usize> = 16 * 1024..20 * 1024;
/// Exposed for remote read only.
const RO: Range<usize> = 24 * 1024..28 * 1024;
/// How long anything may take before the victim counts as hung.
const LIMIT: Duration = Duration::from_secs(10);

/// Input bytes that describe one forged message (before its payload).
const HEADER: usize = 6;

/// One forged stream against a fresh victim, from fuzzer bytes; panics when a promise breaks.
///
/// Input: byte 0 steers (bit 0: STags are the victim's real ones, picked by a byte, instead of
/// raw; bit 1: a message's flags may corrupt its CRC). Then messages of `HEADER` (6) bytes —
/// kind, flags, STag byte, offset (2, signed, from the picked region's start), payload length
/// — each followed by that many payload bytes. Kinds (modulo 6): Send (flags pick Send,
/// Send with Solicited Event or with Invalidate, the last flag, a wrong MSN, a nonzero MO),
/// RDMA Write, Read Request (the offset doubles as its size), Read Response, Terminate (the
/// payload as its body), raw bytes.
pub fn run(input: &[u8]) {
    let Some((&steer, mut rest)) = input.split_first() else {
        return;
    };
    let p = crate::TcpProvider::new();
    let a = p.open_adapter(crate::ADAPTER_ID).expect("adapter");
    // No progress engine: both sides are driven by this thread, step by step (a second
    // driver would race the states the tests set up), and no thread may outlive a fuzz run.
    a.set_progress_mode(netdirect_spi::kit::progress::ProgressMode::Manual)
        .expect("manual progress");
    let cq = a.create_completion_queue(64, 0, 0).expect("cq");
    let qp = a
        .create_queue_pair(QueuePairConfig::single_cq(cq.clone(), 4))
        .expect("queue pair");
    let mut buf = vec![0xAAu8; BUF].into_boxed_slice();
    let base = buf.as_mut_ptr();
    let region = |range: Range<usize>, flags: MrFlags| -> Arc<dyn MemoryRegion> {
        let mr = a.create_memory_region().expect("mr");
        // SAFETY: the range lies in `buf`, which outlives every registration (they are
        // dropped at the end of this function, before it).
        unsafe { mr.register(base.wrapping_add(range.start), range.len(), flags, None) }
            .expect("register")
            .wait()
            .expect("registered");
        mr
    };
    let local = region(0..BUF, MrFlags::ALLOW_LOCAL_WRITE);
    let rw = region(
        RW,
        MrFlags::ALLOW_LOCAL_WRITE | MrFlags::ALLOW_REMOTE_WRITE | MrFlags::ALLOW_REMOTE_READ,
    );
    let ro = region(RO, MrFlags::ALLOW_REMOTE_READ);
    let sge = Sge::new(base, RECV.len() as u32, local.get_local_token());
    // SAFETY: the Receive's bytes are not read until it completes.
    unsafe { qp.receive(1, &[sge]) }.expect("receive");

    let conn = a.create_connector().expect("connector");
    let l = a.create_listener().expect("listener");
    l.bind("127.0.0.1:0".parse().expect("address"))
        .expect("bind");
    l.listen(0).expect("listen");
    let addr = l.get_local_address().expect("address");
    // The MPA exchange, both sides on this thread: the attacker's Request, the victim's
    // Accept (its Reply goes out), the attacker's RTR, which completes the Accept.
    let (mut s, init) = request(addr);
    let accepted = accept(&l, &conn, &qp);
    let (mut msn, crc) = rtr(&mut s, init);
    accepted
        .wait_timeout(Some(LIMIT))
        .expect("accepted in time")
        .expect("accepted");

    // The STags and offsets a steered message may name: the two exposed regions, the
    // local-only one, and an STag one bit off the writable region's. (A local token is the
    // STag's value; `GetRemoteToken` would give it in network byte order.)
    let rw_stag = rw.get_local_token();
    let ro_stag = ro.get_local_token();
    let pick = |b: u8| -> (u32, u64) {
        let at = |r: Range<usize>| base as u64 + r.start as u64;
        match b % 4 {
            0 => (rw_stag, at(RW)),
            1 => (ro_stag, at(RO)),
            2 => (local.get_local_token(), at(0..BUF)),
            _ => (rw_stag ^ 0x100, at(RW)),
        }
    };

    let mut out = Vec::new();
    let mut sends = TxMsn::new();
    while rest.len() >= HEADER {
        let (h, tail) = rest.split_at(HEADER);
        let (kind, flags, sel) = (h[0] % 6, h[1], h[2]);
        let off = i64::from(i16::from_le_bytes([h[3], h[4]]));
        let take = usize::from(h[5]).min(tail.len());
        let (payload, tail) = tail.split_at(take);
        rest = tail;
        let (stag, start) = if steer & 1 != 0 {
            pick(sel)
        } else {
            (u32::from_le_bytes([sel, h[3], h[4], h[5]]), off as u64)
        };
        let to = start.wrapping_add_signed(off);
        let last = flags & 1 != 0;
        let mut fpdu = match kind {
            0 => {
                let opcode = [
                    Opcode::Send,
                    Opcode::SendSe,
                    Opcode::SendInvalidate,
                    Opcode::SendSeInvalidate,
                ][usize::from(flags >> 1) & 3];
                let n = if flags & 8 != 0 {
                    u32::from(sel)
                } else {
                    sends.next(0)
                };
                let mo = if flags & 16 != 0 { off as u32 } else { 0 };
                encode_fpdu(
                    &DdpHeader::send(opcode, n, mo, last, stag),
                    &[],
                    payload,
                    crc,
                )
            }
            1 => encode_fpdu(&DdpHeader::write(stag, to, last), &[], payload, crc),
            2 => {
                let rr = ReadRequest {
                    sink_stag: 0x5151_5151,
                    sink_to: 0x1000,
                    size: off as u32 & 0xFFFF,
                    src_stag: stag,
                    src_to: to,
                };
                let n = if flags & 8 != 0 {
                    u32::from(sel)
                } else {
                    msn.next(1)
                };
                encode_fpdu(&DdpHeader::read_request(n), &rr.to_bytes(), &[], crc)
            }
            3 => encode_fpdu(&DdpHeader::read_response(stag, to, last), &[], payload, crc),
            4 => encode_fpdu(&DdpHeader::terminate(), &[], payload, crc),
            _ => payload.to_vec(),
        };
        if steer & 2 != 0 && flags & 0x80 != 0 {
            // Corrupt one byte (the CRC, or the header when there is none).
            if let Some(b) = fpdu.last_mut() {
                *b ^= 0x5A;
            }
        }
        out.extend_from_slice(&fpdu);
    }

    // The stream and a FIN (at most a few KiB: the socket takes them at once; the victim may
    // have closed already, which does not matter). What the victim answers (Read Responses,
    // a Terminate) stays unread: it never waits on us, its sends queue. All on this thread:
    // no helper thread may outlive a run (libFuzzer's leak check runs right after it).
    let _ = s.write_all(&out);
    let _ = s.shutdown(Shutdown::Write);
    let r = next(&cq);
    // End the connection (it may have ended already).
    if let Ok(ov) = conn.disconnect() {
        let _ = ov.wait_timeout(Some(LIMIT));
    }
    drop(qp);
    // The only request is the Receive; it completes with a status, whatever it is.
    assert!(
        r.request_context == 1 && r.status != Status::PENDING,
        "unexpected completion {r:?}"
    );
    if r.status == Status::SUCCESS {
        assert!(r.bytes_transferred as usize <= RECV.len(), "{r:?}");
    }
    let outside = buf[RECV.end..RW.start]
        .iter()
        .chain(&buf[RW.end..])
        .all(|&b| b == 0xAA);
    assert!(
        outside,
        "a byte outside the writable region and the Receive changed"
    );
    drop((rw, ro, local));
}

/// The victim's side of the connection: take the request and accept it (the Reply goes out);
/// the returned Accept completes once the RTR arrives.
fn accept(
    l: &Arc<dyn traits::Listener>,
    conn: &Arc<dyn Connector>,
    qp: &Arc<dyn traits::QueuePair>,
) -> Overlapped {
    let ov = l.get_connection_request(conn).expect("request");
    ov.wait_timeout(Some(LIMIT))
        .expect("a request in time")
        .expect("request");
    conn.accept(
        qp,
        ReadLimits {
            inbound: 4,
            outbound: 4,
        },
        &[],
    )
    .expect("accept")
}

/// The attacker connects and sends its MPA v2 Request (no Write completion probe: a plain
/// iWARP peer).
fn request(addr: std::net::SocketAddr) -> (TcpStream, Initiator) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(LIMIT)).expect("set_read_timeout");
    s.set_nodelay(true).expect("set_nodelay");
    let init = Initiator::new(InitiatorConfig {
        crc: true,
        ird: 4,
        ord: 4,
        p2p: true,
        private_data: Vec::new(),
        probe: false,
    });
    s.write_all(&init.request()).expect("send the MPA Request");
    (s, init)
}

/// The attacker reads the MPA Reply and sends the RTR; returns the Read Request sequence and
/// whether CRCs are on.
fn rtr(s: &mut TcpStream, mut init: Initiator) -> (TxMsn, bool) {
    let mut got = Vec::new();
    let neg = loop {
        let mut chunk = [0u8; 1024];
        let n = s.read(&mut chunk).expect("read the MPA Reply");
        assert!(n > 0, "the victim closed before its MPA Reply");
        got.extend_from_slice(&chunk[..n]);
        match init.handle_reply(&got) {
            Ok(None) => {}
            Ok(Some((InitiatorOutcome::Accepted(neg), _))) => break neg,
            other => panic!("the victim did not accept: {other:?}"),
        }
    };
    let rtr = neg.rtr.expect("an RTR agreed");
    let mut msn = TxMsn::new();
    s.write_all(&rtr_fpdu(rtr, &mut msn, neg.crc))
        .expect("send the RTR");
    (msn, neg.crc)
}

/// The next completion on `cq`, driving the victim's I/O; panics if none comes in time.
fn next(cq: &Arc<dyn CompletionQueue>) -> NdResult {
    let end = Instant::now() + LIMIT;
    let mut r = [NdResult::EMPTY];
    while cq.get_results(&mut r) == 0 {
        assert!(Instant::now() < end, "no completion: the victim hangs");
        std::thread::yield_now();
    }
    r[0]
}

#[cfg(test)]
mod tests {
    use super::run;

    /// The fuzz target's entry on a few inputs of each kind, steered and raw.
    #[test]
    fn run_survives_each_message_kind() {
        for steer in 0..4u8 {
            for kind in 0..6u8 {
                for flags in [0u8, 1, 0x83, 0x19] {
                    let mut input = vec![steer, kind, flags, 0, 16, 0, 24];
                    input.extend((0..24).map(|i| i as u8));
                    run(&input);
                }
            }
        }
        // RDMA Writes of 16 bytes that start 16 bytes before the writable region, end 8 bytes
        // past it, or aim at the read-only one, with the right STags: refused.
        for (sel, off) in [(0u8, -16i16), (0, 4096 - 8), (1, 0)] {
            let [a, b] = off.to_le_bytes();
            let mut input = vec![1, 1, 1, sel, a, b, 16];
            input.extend([0x5A; 16]);
            run(&input);
        }
        run(&[0]);
    }
}
