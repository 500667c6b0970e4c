//! Send/Receive: 1 and several SGEs, zero-byte messages, 1 MiB messages, both ways (§2.9).

use std::ops::Range;

use netdirect::{OpFlags, Status};

use super::{await_request, client_side, server_side};
use crate::check::{
    expect_bytes, expect_empty, expect_pending, expect_results, next_results, pattern, wait_ok,
    Check, Context, Expect,
};
use crate::side::{Ctx, Side, SideConfig};

const MIB: usize = 1 << 20;
/// Sends read from `[0, RECV_AREA)`, Receives write `[RECV_AREA, 2 * RECV_AREA)`.
const RECV_AREA: usize = 4 * MIB;

/// One message: where the sender gathers it from and where the receiver scatters it to
/// (offsets inside the send and receive areas), and its length.
struct Msg {
    name: &'static str,
    send: &'static [(usize, usize)],
    recv: &'static [(usize, usize)],
    len: usize,
}

/// The messages, sent in this order in each direction. The 5-SGE shapes differ on the two
/// ends, so every byte crosses an SGE boundary at a different place.
const MSGS: &[Msg] = &[
    Msg {
        name: "1 SGE into a larger 1-SGE Receive",
        send: &[(0, 1000)],
        recv: &[(0, 2000)],
        len: 1000,
    },
    Msg {
        name: "5 odd-sized SGEs into 5 other odd-sized SGEs",
        send: &[
            (8192 + 1, 1),
            (8192 + 100, 7),
            (8192 + 999, 333),
            (8192 + 5003, 4097),
            (8192 + 12001, 65),
        ],
        recv: &[
            (8192 + 11, 100),
            (8192 + 3000, 1),
            (8192 + 7777, 2000),
            (8192 + 12345, 3),
            (8192 + 20001, 2399),
        ],
        len: 4503,
    },
    Msg {
        name: "zero-byte Send into a zero-SGE Receive",
        send: &[],
        recv: &[],
        len: 0,
    },
    Msg {
        name: "zero-byte Send into a 64-byte Receive",
        send: &[],
        recv: &[(40000, 64)],
        len: 0,
    },
    Msg {
        name: "1 MiB #1",
        send: &[(MIB, MIB)],
        recv: &[(MIB, MIB)],
        len: MIB,
    },
    Msg {
        name: "1 MiB #2",
        send: &[(2 * MIB, MIB)],
        recv: &[(2 * MIB, MIB)],
        len: MIB,
    },
    Msg {
        name: "1 MiB #3",
        send: &[(3 * MIB, MIB)],
        recv: &[(3 * MIB + 7, MIB)],
        len: MIB,
    },
];

/// Request contexts: client → server messages and server → client messages.
const C2S: u64 = 0xC250_0000;
const S2C: u64 = 0x52C0_0000;

fn ranges(base: usize, spec: &[(usize, usize)]) -> Vec<Range<usize>> {
    spec.iter().map(|&(o, l)| base + o..base + o + l).collect()
}

fn config() -> SideConfig {
    SideConfig {
        buf_len: 2 * RECV_AREA + 4096,
        depth: 16,
        sge: 8,
        ..SideConfig::default()
    }
}

/// Pre-post a Receive for every message of the direction `dir`.
fn post_receives(side: &Side, dir: u64) -> Check {
    for (i, m) in MSGS.iter().enumerate() {
        side.recv(dir + i as u64, &ranges(RECV_AREA, m.recv))
            .ctx(&format!("post Receive for '{}'", m.name))?;
    }
    Ok(())
}

/// Send every message (bytes: `pattern(dir + i)`), then check every Send completion: in
/// order, with its context, the QP context and the Send type.
fn send_all(side: &Side, dir: u64) -> Check {
    for (i, m) in MSGS.iter().enumerate() {
        let r = ranges(0, m.send);
        // SAFETY: Sends only read the buffer, and no Send from this area is outstanding yet.
        unsafe { side.write(&r, &pattern(dir + i as u64, m.len)) };
    }
    for (i, m) in MSGS.iter().enumerate() {
        side.send(dir + i as u64, &ranges(0, m.send), OpFlags::empty())
            .ctx(&format!("Send '{}'", m.name))?;
    }
    let got = next_results(&side.scq, MSGS.len(), "Send completions")?;
    let want: Vec<Expect> = (0..MSGS.len())
        .map(|i| Expect::send(Status::SUCCESS, dir + i as u64, side.qp_context))
        .collect();
    expect_results(&got, &want, "Send completions")?;
    expect_empty(&side.scq, "initiator CQ")
}

/// Wait for every message of direction `dir` and check each completion and each byte.
fn receive_all(side: &Side, dir: u64) -> Check {
    let got = next_results(&side.rcq, MSGS.len(), "Receive completions")?;
    let want: Vec<Expect> = MSGS
        .iter()
        .enumerate()
        .map(|(i, m)| {
            Expect::recv(
                Status::SUCCESS,
                dir + i as u64,
                side.qp_context,
                Some(m.len as u32),
            )
        })
        .collect();
    expect_results(&got, &want, "Receive completions")?;
    for (i, m) in MSGS.iter().enumerate() {
        let r = ranges(RECV_AREA, m.recv);
        // SAFETY: every Receive has completed; no request writes the receive area any more.
        let bytes = unsafe { side.read(&r, m.len) };
        expect_bytes(&bytes, &pattern(dir + i as u64, m.len), m.name)?;
        if m.len == 0 && !r.is_empty() {
            // A zero-byte message leaves the Receive's memory alone.
            let total = r.iter().map(Range::len).sum();
            // SAFETY: as above.
            let untouched = unsafe { side.read(&r, total) };
            expect_bytes(&untouched, &vec![0; total], m.name)?;
        }
    }
    expect_empty(&side.rcq, "receive CQ")
}

pub(super) fn send_receive_server(ctx: &Ctx) -> Check {
    let side = server_side(ctx, config())?;
    post_receives(&side, C2S)?;
    let (_listener, _) = await_request(ctx, &side)?;
    let aov = side.connector.accept(&side.qp, 0, 0, &[]).ctx("Accept")?;
    wait_ok(&aov, "Accept")?;
    // iWARP: the passive side waits for a Receive to complete before it Sends (§2.9).
    receive_all(&side, C2S)?;
    let nd = side.connector.notify_disconnect().ctx("NotifyDisconnect")?;
    expect_pending(&nd, "NotifyDisconnect while connected")?;
    send_all(&side, S2C)?;
    // The client disconnects once it has everything.
    wait_ok(&nd, "NotifyDisconnect after the client's Disconnect")?;
    let d = side
        .connector
        .disconnect()
        .ctx("Disconnect after the peer's")?;
    wait_ok(&d, "Disconnect after the peer's (R-CONN-3)")?;
    ctx.linger();
    Ok(())
}

pub(super) fn send_receive_client(ctx: &Ctx) -> Check {
    let side = client_side(ctx, config())?;
    post_receives(&side, S2C)?;
    let ov = side.connect(ctx.client_local(), ctx.addr, 0, 0, &[])?;
    wait_ok(&ov, "Connect")?;
    let cc = side.connector.complete_connect().ctx("CompleteConnect")?;
    wait_ok(&cc, "CompleteConnect")?;
    send_all(&side, C2S)?;
    receive_all(&side, S2C)?;
    let d = side.connector.disconnect().ctx("Disconnect")?;
    wait_ok(&d, "Disconnect")
}
