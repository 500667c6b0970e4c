//! One-sided RDMA: Read and Write of every size and SGE count, read fence, read limits,
//! memory windows (IND2QueuePair Read/Write/Bind/Invalidate, IND2MemoryWindow; §2.7–§2.9,
//! R-MW-1, R-MR-2, R-SIZE-1, D6, D11).
//!
//! The target tells the initiator where to go with a Send carrying an [`Area`] (remote token,
//! address, length), as ndrping's PeerInfo does.

use std::ops::Range;

use netdirect::{MrFlags, OpFlags, RequestType, Status};

use super::{any_port, await_request, client_bye, client_side, server_bye, server_side};
use crate::check::{
    expect_bytes, expect_empty, expect_results, expect_status, fast_pattern, next_results, wait_ok,
    Check, Context, Expect,
};
use crate::side::{listen, Ctx, Side, SideConfig};
use crate::{ensure, ensure_eq};

const MIB: usize = 1 << 20;
/// The largest transfer checked (R-SIZE-1: MaxRegistrationSize ≥ 64 MiB; ndmw reads 32 MiB).
const BIG: usize = 64 * MIB;

/// Where a peer may Read or Write: its remote token, the address, the length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Area {
    pub(crate) token: u32,
    pub(crate) addr: u64,
    pub(crate) len: u64,
}

/// Bytes of an encoded [`Area`].
pub(crate) const AREA_LEN: usize = 20;

impl Area {
    pub(crate) fn encode(&self) -> [u8; AREA_LEN] {
        let mut b = [0u8; AREA_LEN];
        b[..4].copy_from_slice(&self.token.to_ne_bytes());
        b[4..12].copy_from_slice(&self.addr.to_le_bytes());
        b[12..20].copy_from_slice(&self.len.to_le_bytes());
        b
    }

    pub(crate) fn decode(b: &[u8]) -> Self {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        Self {
            token: u32::from_ne_bytes(b[..4].try_into().expect("4 bytes")),
            addr: u64_at(4),
            len: u64_at(12),
        }
    }
}

/// An expectation for an initiator completion of any type.
pub(crate) fn done(ty: RequestType, status: Status, ctx: u64, qp: u64) -> Expect {
    Expect {
        status,
        request_type: ty,
        request_context: ctx,
        qp_context: qp,
        bytes: None,
    }
}

/// The message area: the last 64 KiB of a side's buffer, one 4 KiB slot per message.
pub(crate) fn msg_slot(side: &Side, slot: usize) -> Range<usize> {
    let base = side.buf.len() - 64 * 1024 + slot * 4096;
    base..base + 4096
}

/// Send `bytes` from message slot `slot`; waits for the Send completion.
pub(crate) fn send_msg(side: &Side, slot: usize, ctx: u64, bytes: &[u8]) -> Check {
    let r = msg_slot(side, slot);
    let r = r.start..r.start + bytes.len();
    // SAFETY: no request uses this slot now.
    unsafe { side.write(std::slice::from_ref(&r), bytes) };
    side.send(ctx, &[r], OpFlags::empty()).ctx("Send")?;
    let c = next_results(&side.scq, 1, "Send")?;
    Expect::send(Status::SUCCESS, ctx, side.qp_context).check(&c[0], "Send")
}

/// Post a Receive into message slot `slot`.
pub(crate) fn post_msg(side: &Side, slot: usize, ctx: u64) -> Check {
    side.recv(ctx, &[msg_slot(side, slot)]).ctx("post Receive")
}

/// Wait for the next Receive (context `ctx`) and return its bytes.
pub(crate) fn recv_msg(side: &Side, slot: usize, ctx: u64, what: &str) -> Check<Vec<u8>> {
    let r = next_results(&side.rcq, 1, what)?;
    Expect::recv(Status::SUCCESS, ctx, side.qp_context, None).check(&r[0], what)?;
    // SAFETY: the Receive into this slot has completed.
    Ok(unsafe { side.read(&[msg_slot(side, slot)], r[0].bytes_transferred as usize) })
}

/// `size` bytes as `n` SGE ranges starting at `base`, of uneven lengths, separated by gaps
/// of `gap` bytes (so every SGE boundary is somewhere new). Zero bytes: `n` empty SGEs.
pub(crate) fn split(
    base: usize,
    size: usize,
    n: usize,
    gap: usize,
    skew: usize,
) -> Vec<Range<usize>> {
    let mut out = Vec::with_capacity(n);
    let mut at = base;
    let mut left = size;
    for i in 0..n {
        let share = if i + 1 == n {
            left
        } else {
            // Uneven: every other SGE gets a little more or less.
            let even = size / n;
            let wobble = if i % 2 == 0 { skew } else { 0 };
            (even + wobble).min(left)
        };
        out.push(at..at + share);
        at += share + gap;
        left -= share;
    }
    out
}

fn config(buf_len: usize, sge: u32) -> SideConfig {
    SideConfig {
        buf_len,
        depth: 16,
        sge,
        ..SideConfig::default()
    }
}

// ---------------------------------------------------------------------------------------------
// rdma-write-read

/// Client buffer: [source area | read-back area | messages].
const SRC: usize = 0;
const RB: usize = BIG + MIB;
const RW_BUF: usize = 2 * (BIG + MIB) + 64 * 1024;
/// Request contexts.
const INFO: u64 = 0x1AF0;
const VERIFY: u64 = 0x7E51;
const SERVER_DONE: u64 = 0x5D0E;
const WRITE_CTX: u64 = 0x3000_0000;
const READ_CTX: u64 = 0x4000_0000;
/// What the server writes into the client's memory, and where.
const SERVER_SEED: u64 = 0x5E4E_5EED;
const SERVER_LEN: usize = MIB + 13;

fn verify_msg(offset: u64, len: u64, seed: u64, area: Area) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&offset.to_le_bytes());
    v.extend_from_slice(&len.to_le_bytes());
    v.extend_from_slice(&seed.to_le_bytes());
    v.extend_from_slice(&area.encode());
    v
}

fn parse_verify(b: &[u8]) -> Check<(usize, usize, u64, Area)> {
    ensure!(
        b.len() == 24 + AREA_LEN,
        "verify message of {} bytes",
        b.len()
    );
    let u = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    Ok((u(0) as usize, u(8) as usize, u(16), Area::decode(&b[24..])))
}

pub(crate) fn write_read_server(ctx: &Ctx) -> Check {
    let side = server_side(ctx, config(RW_BUF, 4))?;
    // The target region: the same buffer registered a second time, with remote rights.
    let rmr = side.register_again(MrFlags::ALLOW_REMOTE_READ | MrFlags::ALLOW_REMOTE_WRITE)?;
    post_msg(&side, 0, VERIFY)?;
    side.recv(super::BYE, &[]).ctx("post bye Receive")?;
    let (_listener, _) = await_request(ctx, &side)?;
    let aov = side.connector.accept(&side.qp, 8, 4, &[]).ctx("Accept")?;
    wait_ok(&aov, "Accept")?;
    let area = Area {
        token: rmr.get_remote_token(),
        addr: side.addr(0),
        len: (side.buf.len() - 64 * 1024) as u64,
    };
    send_msg(&side, 1, INFO, &area.encode())?;
    // The client writes and reads; then it tells us what our memory must hold now.
    let v = recv_msg(&side, 0, VERIFY, "verify message")?;
    let (off, len, seed, client) = parse_verify(&v)?;
    // SAFETY: the client is done writing this range (it waited for its Write completions).
    let got = unsafe { side.read(&[off..off + len], len) };
    expect_bytes(
        &got,
        &fast_pattern(seed, len),
        "server memory after the client's Writes",
    )?;

    // The passive side initiates too: a 2-SGE Write and a 3-SGE Read back, a zero-byte
    // Write and Read, all against the client's memory (its ORD/IRD: Accept(8, 4)).
    let src = split(0, SERVER_LEN, 2, 5, 1000);
    let rb = split(BIG, SERVER_LEN, 3, 9, 77);
    // SAFETY: no request covers these ranges yet.
    unsafe { side.write(&src, &fast_pattern(SERVER_SEED, SERVER_LEN)) };
    side.rdma_write(1, &src, client.addr, client.token, OpFlags::empty())
        .ctx("server Write")?;
    side.rdma_read(2, &rb, client.addr, client.token, OpFlags::empty())
        .ctx("server Read")?;
    side.rdma_write(3, &[], client.addr, client.token, OpFlags::empty())
        .ctx("server zero-byte Write")?;
    side.rdma_read(4, &[], client.addr, client.token, OpFlags::empty())
        .ctx("server zero-byte Read")?;
    let q = side.qp_context;
    let r = next_results(&side.scq, 4, "server's one-sided requests")?;
    expect_results(
        &r,
        &[
            done(RequestType::Write, Status::SUCCESS, 1, q),
            done(RequestType::Read, Status::SUCCESS, 2, q),
            done(RequestType::Write, Status::SUCCESS, 3, q),
            done(RequestType::Read, Status::SUCCESS, 4, q),
        ],
        "server's one-sided requests",
    )?;
    // SAFETY: the Read completed.
    let back = unsafe { side.read(&rb, SERVER_LEN) };
    expect_bytes(
        &back,
        &fast_pattern(SERVER_SEED, SERVER_LEN),
        "server's Read back",
    )?;
    send_msg(&side, 2, SERVER_DONE, &[])?;
    server_bye(ctx, &side)
}

pub(crate) fn write_read_client(ctx: &Ctx) -> Check {
    let adapter = ctx.adapter(ctx.client_local())?;
    let info = adapter.query();
    let max = info.max_initiator_sge.min(info.max_read_sge);
    let side = Side::on(
        &adapter,
        SideConfig {
            qp_context: super::CLIENT_QP,
            ..config(RW_BUF, max)
        },
    )?;
    let rmr = side.register_again(MrFlags::ALLOW_REMOTE_READ | MrFlags::ALLOW_REMOTE_WRITE)?;
    post_msg(&side, 0, INFO)?;
    post_msg(&side, 1, SERVER_DONE)?;
    let ov = side.connect(ctx.client_local(), ctx.addr, 4, 8, &[])?;
    wait_ok(&ov, "Connect")?;
    let cc = side.connector.complete_connect().ctx("CompleteConnect")?;
    wait_ok(&cc, "CompleteConnect")?;
    let limits = side.connector.get_read_limits().ctx("GetReadLimits")?;
    ensure_eq!(
        (limits.inbound, limits.outbound),
        (4, 8),
        "GetReadLimits after Connect(4, 8) / Accept(8, 4)"
    );
    let info = recv_msg(&side, 0, INFO, "the server's area")?;
    let area = Area::decode(&info);
    let q = side.qp_context;
    let mut case = 0u64;
    for size in [0, 1, 4096, MIB, BIG] {
        for n in [1, 3, max as usize] {
            if size == BIG && n == 3 {
                continue;
            }
            case += 1;
            let what = format!("{size} bytes in {n} SGEs");
            let seed = 0xC0DE_0000 + case;
            let src = split(SRC, size, n, 3, 11);
            let rb = split(RB, size, n.max(2) - 1, 7, 5);
            // Small transfers land at a different remote offset each time.
            let roff = if size >= MIB { 0 } else { case * 4099 };
            let data = fast_pattern(seed, size);
            // SAFETY: no request covers these ranges now.
            unsafe {
                side.write(&src, &data);
                side.write(&rb, &vec![0; size]);
            }
            side.rdma_write(
                WRITE_CTX + case,
                &src,
                area.addr + roff,
                area.token,
                OpFlags::empty(),
            )
            .ctx(&format!("Write {what}"))?;
            // RFC 5040 §5.5: a Read after a Write to the same range returns what was written.
            side.rdma_read(
                READ_CTX + case,
                &rb,
                area.addr + roff,
                area.token,
                OpFlags::empty(),
            )
            .ctx(&format!("Read {what}"))?;
            let r = next_results(&side.scq, 2, &what)?;
            expect_results(
                &r,
                &[
                    done(RequestType::Write, Status::SUCCESS, WRITE_CTX + case, q),
                    done(RequestType::Read, Status::SUCCESS, READ_CTX + case, q),
                ],
                &what,
            )?;
            // SAFETY: the Read completed.
            let got = unsafe { side.read(&rb, size) };
            expect_bytes(&got, &data, &format!("read back {what}"))?;
        }
    }
    // SILENT_SUCCESS: no completion for a Write that succeeds; the Read after it has one.
    let src = [SRC..SRC + 100];
    // SAFETY: no request covers it.
    unsafe { side.write(&src, &fast_pattern(1, 100)) };
    side.rdma_write(0x51, &src, area.addr, area.token, OpFlags::SILENT_SUCCESS)
        .ctx("silent Write")?;
    side.rdma_read(
        0x52,
        &[RB..RB + 100],
        area.addr,
        area.token,
        OpFlags::empty(),
    )
    .ctx("Read after a silent Write")?;
    let r = next_results(&side.scq, 1, "silent Write, Read")?;
    done(RequestType::Read, Status::SUCCESS, 0x52, q)
        .check(&r[0], "the Read after a silent Write")?;
    // SAFETY: the Read completed.
    expect_bytes(
        &unsafe { side.read(&[RB..RB + 100], 100) },
        &fast_pattern(1, 100),
        "silent Write",
    )?;
    // INLINE: the source is read during the call, from memory that is not registered.
    let inline_src = fast_pattern(2, 200);
    let sge: Vec<netdirect::Sge> = [0..50, 50..51, 51..200]
        .iter()
        .map(|r| netdirect::Sge::new(inline_src[r.clone()].as_ptr() as *mut u8, r.len() as u32, 0))
        .collect();
    // SAFETY: INLINE: the bytes are read during the call only.
    unsafe {
        side.qp
            .write(0x53, &sge, area.addr + 4096, area.token, OpFlags::INLINE)
    }
    .ctx("INLINE Write from unregistered memory")?;
    drop(sge);
    drop(inline_src);
    side.rdma_read(
        0x54,
        &[RB..RB + 200],
        area.addr + 4096,
        area.token,
        OpFlags::empty(),
    )
    .ctx("Read after an INLINE Write")?;
    let r = next_results(&side.scq, 2, "INLINE Write, Read")?;
    expect_results(
        &r,
        &[
            done(RequestType::Write, Status::SUCCESS, 0x53, q),
            done(RequestType::Read, Status::SUCCESS, 0x54, q),
        ],
        "INLINE Write, Read",
    )?;
    // SAFETY: the Read completed.
    expect_bytes(
        &unsafe { side.read(&[RB..RB + 200], 200) },
        &fast_pattern(2, 200),
        "INLINE Write",
    )?;
    // The server checks its own memory: a last Write of an odd size at an odd offset.
    let (voff, vlen, vseed) = (12_345usize, MIB + 3, 0xF1A1_5EEDu64);
    // SAFETY: no request covers it.
    unsafe { side.write(&[SRC..SRC + vlen], &fast_pattern(vseed, vlen)) };
    side.rdma_write(
        0x55,
        &[SRC..SRC + vlen],
        area.addr + voff as u64,
        area.token,
        OpFlags::empty(),
    )
    .ctx("final Write")?;
    let r = next_results(&side.scq, 1, "final Write")?;
    done(RequestType::Write, Status::SUCCESS, 0x55, q).check(&r[0], "final Write")?;
    let mine = Area {
        token: rmr.get_remote_token(),
        addr: side.addr(0),
        len: (side.buf.len() - 64 * 1024) as u64,
    };
    send_msg(
        &side,
        2,
        VERIFY,
        &verify_msg(voff as u64, vlen as u64, vseed, mine),
    )?;
    // The server writes into our memory and reads it back, then says so.
    recv_msg(&side, 1, SERVER_DONE, "the server's done message")?;
    // SAFETY: the server is done with our memory.
    let got = unsafe { side.read(&[0..SERVER_LEN], SERVER_LEN) };
    expect_bytes(
        &got,
        &fast_pattern(SERVER_SEED, SERVER_LEN),
        "the server's Write",
    )?;
    expect_empty(&side.scq, "initiator CQ")?;
    client_bye(&side)
}

// ---------------------------------------------------------------------------------------------
// rdma-read-fence

const FENCE_LEN: usize = 256 * 1024;
const FENCE_SEED: u64 = 0xFE4C_E000;
/// Server buffer: [source | write-back target | messages].
const FENCE_BUF: usize = 2 * FENCE_LEN + 64 * 1024 + 4096;

pub(crate) fn read_fence_server(ctx: &Ctx) -> Check {
    let side = server_side(ctx, config(FENCE_BUF, 4))?;
    let rmr = side.register_again(MrFlags::ALLOW_REMOTE_READ | MrFlags::ALLOW_REMOTE_WRITE)?;
    // SAFETY: nothing is posted yet.
    unsafe { side.write(&[0..FENCE_LEN], &fast_pattern(FENCE_SEED, FENCE_LEN)) };
    post_msg(&side, 0, 0xF1)?;
    post_msg(&side, 1, 0xF2)?;
    side.recv(super::BYE, &[]).ctx("post bye Receive")?;
    let (_listener, _) = await_request(ctx, &side)?;
    let aov = side.connector.accept(&side.qp, 4, 0, &[]).ctx("Accept")?;
    wait_ok(&aov, "Accept")?;
    let area = Area {
        token: rmr.get_remote_token(),
        addr: side.addr(0),
        len: (2 * FENCE_LEN) as u64,
    };
    send_msg(&side, 2, INFO, &area.encode())?;
    // The fenced Send carries the first bytes the client read: it waited for the Read.
    let m = recv_msg(&side, 0, 0xF1, "the fenced Send")?;
    expect_bytes(
        &m,
        &fast_pattern(FENCE_SEED, FENCE_LEN)[..64],
        "a Send fenced behind a Read carries what the Read brought (READ_FENCE)",
    )?;
    recv_msg(&side, 1, 0xF2, "the client's done message")?;
    // The fenced Write put back what the Reads fetched.
    // SAFETY: the client is done.
    let back = unsafe { side.read(&[FENCE_LEN..2 * FENCE_LEN], FENCE_LEN) };
    expect_bytes(
        &back,
        &fast_pattern(FENCE_SEED, FENCE_LEN),
        "a Write fenced behind Reads writes what they fetched (READ_FENCE)",
    )?;
    server_bye(ctx, &side)
}

pub(crate) fn read_fence_client(ctx: &Ctx) -> Check {
    let side = client_side(ctx, config(FENCE_LEN + 64 * 1024 + 4096, 4))?;
    post_msg(&side, 0, INFO)?;
    let ov = side.connect(ctx.client_local(), ctx.addr, 0, 4, &[])?;
    wait_ok(&ov, "Connect")?;
    let cc = side.connector.complete_connect().ctx("CompleteConnect")?;
    wait_ok(&cc, "CompleteConnect")?;
    let area = Area::decode(&recv_msg(&side, 0, INFO, "the server's area")?);
    let q = side.qp_context;
    // Round 1: Read 256 KiB, then a Send of its first 64 bytes with READ_FENCE.
    side.rdma_read(1, &[0..FENCE_LEN], area.addr, area.token, OpFlags::empty())
        .ctx("Read")?;
    side.send(2, &[0..64], OpFlags::READ_FENCE)
        .ctx("fenced Send")?;
    // Round 2: four Reads of a quarter each (more than the ORD of 4 can hold with the
    // previous one), then a Write of the whole range back with READ_FENCE.
    let quarter = FENCE_LEN / 4;
    for i in 0..4 {
        let r = i * quarter..(i + 1) * quarter;
        side.rdma_read(
            3 + i as u64,
            std::slice::from_ref(&r),
            area.addr + r.start as u64,
            area.token,
            OpFlags::empty(),
        )
        .ctx("Read a quarter")?;
    }
    side.rdma_write(
        7,
        &[0..FENCE_LEN],
        area.addr + FENCE_LEN as u64,
        area.token,
        OpFlags::READ_FENCE,
    )
    .ctx("fenced Write")?;
    let r = next_results(&side.scq, 7, "Reads and fenced requests")?;
    let mut want = vec![
        done(RequestType::Read, Status::SUCCESS, 1, q),
        Expect::send(Status::SUCCESS, 2, q),
    ];
    for i in 0..4 {
        want.push(done(RequestType::Read, Status::SUCCESS, 3 + i, q));
    }
    want.push(done(RequestType::Write, Status::SUCCESS, 7, q));
    expect_results(&r, &want, "Reads and fenced requests, in order")?;
    send_msg(&side, 1, 0xF2, &[])?;
    client_bye(&side)
}

// ---------------------------------------------------------------------------------------------
// rdma-read-limits

const LIMIT_READS: u64 = 24;

pub(crate) fn read_limits_server(ctx: &Ctx) -> Check {
    let side = server_side(ctx, config(MIB + 64 * 1024, 4))?;
    let rmr = side.register_again(MrFlags::ALLOW_REMOTE_READ)?;
    // SAFETY: nothing is posted yet.
    unsafe { side.write(&[0..MIB], &fast_pattern(0x11D, MIB)) };
    side.recv(super::BYE, &[]).ctx("post bye Receive")?;
    let (_listener, _) = await_request(ctx, &side)?;
    let l = side.connector.get_read_limits().ctx("GetReadLimits")?;
    ensure_eq!(
        (l.inbound, l.outbound),
        (3, 0),
        "passive GetReadLimits before Accept (Connect(0, 3))"
    );
    let aov = side.connector.accept(&side.qp, 3, 0, &[]).ctx("Accept")?;
    wait_ok(&aov, "Accept")?;
    let l = side.connector.get_read_limits().ctx("GetReadLimits")?;
    ensure_eq!(
        (l.inbound, l.outbound),
        (3, 0),
        "passive GetReadLimits after Accept(3, 0): the application's values, no probe slot"
    );
    // ORD 0: this side may not Read at all (a Read would fail in its turn and end the
    // connection: rdma_rules.rs, a_read_without_outbound_reads_fails_in_its_turn).
    let area = Area {
        token: rmr.get_remote_token(),
        addr: side.addr(0),
        len: MIB as u64,
    };
    send_msg(&side, 0, INFO, &area.encode())?;
    // The client Reads far more than the IRD of 3; an IRD overrun would terminate the
    // connection (RFC 5040 §5.4) and the bye would never come.
    server_bye(ctx, &side)
}

pub(crate) fn read_limits_client(ctx: &Ctx) -> Check {
    let side = client_side(
        ctx,
        SideConfig {
            depth: 64,
            ..config(MIB + 64 * 1024, 4)
        },
    )?;
    post_msg(&side, 0, INFO)?;
    let ov = side.connect(ctx.client_local(), ctx.addr, 0, 3, &[])?;
    wait_ok(&ov, "Connect")?;
    let l = side.connector.get_read_limits().ctx("GetReadLimits")?;
    ensure_eq!(
        (l.inbound, l.outbound),
        (0, 3),
        "active GetReadLimits after Connect(0, 3) / Accept(3, 0)"
    );
    let cc = side.connector.complete_connect().ctx("CompleteConnect")?;
    wait_ok(&cc, "CompleteConnect")?;
    let area = Area::decode(&recv_msg(&side, 0, INFO, "the server's area")?);
    let q = side.qp_context;
    // 24 Reads, every third one of 4 SGEs (4 Read Requests), posted at once: the queue holds
    // them back to keep at most 3 in flight, in order.
    let chunk = MIB / LIMIT_READS as usize / 8 * 8;
    let mut want = Vec::new();
    for i in 0..LIMIT_READS {
        let base = i as usize * chunk;
        let ranges = if i % 3 == 0 {
            split(base, chunk, 4, 0, 8)
        } else {
            vec![base..base + chunk]
        };
        side.rdma_read(
            100 + i,
            &ranges,
            area.addr + base as u64,
            area.token,
            OpFlags::empty(),
        )
        .ctx("Read")?;
        want.push(done(RequestType::Read, Status::SUCCESS, 100 + i, q));
    }
    let r = next_results(&side.scq, LIMIT_READS as usize, "Reads beyond the ORD")?;
    expect_results(&r, &want, "Reads beyond the ORD, in order")?;
    let n = chunk * LIMIT_READS as usize;
    // SAFETY: every Read completed.
    let got = unsafe { side.read(&[0..n], n) };
    expect_bytes(
        &got,
        &fast_pattern(0x11D, MIB)[..n],
        "what the Reads fetched",
    )?;
    client_bye(&side)
}

// ---------------------------------------------------------------------------------------------
// rdma-windows

const WIN_BUF: usize = 64 * 1024 + 64 * 1024;
/// The first and the second binding of window 1.
const W1A: Range<usize> = 4096..4096 + 8192;
const W1B: Range<usize> = 20_000..20_000 + 4096;

pub(crate) fn windows_server(ctx: &Ctx) -> Check {
    let side = server_side(ctx, config(WIN_BUF, 4))?;
    // R-MW-1: a window works over a region registered without remote rights.
    let region = side.register_again(MrFlags::ALLOW_LOCAL_WRITE)?;
    post_msg(&side, 0, 0xD1)?;
    post_msg(&side, 1, 0xD2)?;
    let (_listener, _) = await_request(ctx, &side)?;
    let aov = side.connector.accept(&side.qp, 2, 0, &[]).ctx("Accept")?;
    wait_ok(&aov, "Accept")?;
    let q = side.qp_context;
    let w1 = side
        .adapter
        .create_memory_window()
        .ctx("CreateMemoryWindow")?;
    let w2 = side
        .adapter
        .create_memory_window()
        .ctx("CreateMemoryWindow")?;
    side.qp
        .bind(
            0xB1,
            &region,
            &w1,
            side.buf.sge(W1A, 0).buffer,
            W1A.len(),
            OpFlags::ALLOW_READ | OpFlags::ALLOW_WRITE,
        )
        .ctx("Bind window 1")?;
    // §2.8: the token is valid as soon as Bind returns, before its completion is seen.
    let t1 = w1.get_remote_token();
    ensure!(t1 != 0, "window token after Bind is 0");
    // D11: flags 0 is a valid Bind (no remote rights).
    side.qp
        .bind(
            0xB2,
            &region,
            &w2,
            side.buf.sge(0..64, 0).buffer,
            64,
            OpFlags::empty(),
        )
        .ctx("Bind window 2 with flags 0 (D11)")?;
    let r = next_results(&side.scq, 2, "Bind completions")?;
    expect_results(
        &r,
        &[
            done(RequestType::Bind, Status::SUCCESS, 0xB1, q),
            done(RequestType::Bind, Status::SUCCESS, 0xB2, q),
        ],
        "Bind completions",
    )?;
    // R-MR-2: Deregister with bound windows is synchronously ND_DEVICE_BUSY.
    expect_status(
        region.deregister(),
        Status::DEVICE_BUSY,
        "Deregister a region with bound windows (R-MR-2)",
    )?;
    // A bound window cannot be bound again before Invalidate.
    expect_status(
        side.qp.bind(
            0xB3,
            &region,
            &w1,
            side.buf.sge(0..64, 0).buffer,
            64,
            OpFlags::ALLOW_READ,
        ),
        Status::INVALID_DEVICE_STATE,
        "Bind of a window that is bound",
    )?;
    let a1 = Area {
        token: t1,
        addr: side.addr(W1A.start),
        len: W1A.len() as u64,
    };
    send_msg(&side, 2, INFO, &a1.encode())?;
    recv_msg(&side, 0, 0xD1, "the client's first done message")?;
    // SAFETY: the client is done with this range.
    let got = unsafe { side.read(&[W1A], W1A.len()) };
    expect_bytes(
        &got,
        &fast_pattern(0xA1, W1A.len()),
        "Write through window 1",
    )?;
    // Invalidate, then rebind the same window elsewhere with write rights only.
    side.qp
        .invalidate(0x11, &w1, OpFlags::empty())
        .ctx("Invalidate window 1")?;
    side.qp
        .bind(
            0xB4,
            &region,
            &w1,
            side.buf.sge(W1B, 0).buffer,
            W1B.len(),
            OpFlags::ALLOW_WRITE,
        )
        .ctx("rebind window 1")?;
    let t1b = w1.get_remote_token();
    ensure!(t1b != t1, "a rebound window kept its token {t1:#x}");
    let r = next_results(&side.scq, 2, "Invalidate and rebind")?;
    expect_results(
        &r,
        &[
            done(RequestType::Invalidate, Status::SUCCESS, 0x11, q),
            done(RequestType::Bind, Status::SUCCESS, 0xB4, q),
        ],
        "Invalidate and rebind",
    )?;
    let a2 = Area {
        token: t1b,
        addr: side.addr(W1B.start),
        len: W1B.len() as u64,
    };
    send_msg(&side, 3, INFO, &a2.encode())?;
    recv_msg(&side, 1, 0xD2, "the client's second done message")?;
    // SAFETY: the client is done.
    let got = unsafe { side.read(&[W1B], W1B.len()) };
    expect_bytes(
        &got,
        &fast_pattern(0xA2, W1B.len()),
        "Write through the rebound window",
    )?;
    // Everything else of the buffer is untouched.
    // SAFETY: as above.
    let all = unsafe { side.read(&[0..W1B.end + 4096], W1B.end + 4096) };
    ensure!(
        all[..W1A.start].iter().all(|&b| b == 0)
            && all[W1A.end..W1B.start].iter().all(|&b| b == 0)
            && all[W1B.end..].iter().all(|&b| b == 0),
        "bytes outside the windows changed"
    );
    side.qp
        .invalidate(0x12, &w1, OpFlags::empty())
        .ctx("Invalidate window 1")?;
    side.qp
        .invalidate(0x13, &w2, OpFlags::SILENT_SUCCESS)
        .ctx("Invalidate window 2")?;
    let r = next_results(&side.scq, 1, "Invalidates")?;
    done(RequestType::Invalidate, Status::SUCCESS, 0x12, q).check(&r[0], "Invalidate")?;
    // With no window bound the region deregisters.
    wait_ok(
        &region.deregister().ctx("Deregister")?,
        "Deregister after Invalidate",
    )?;
    // Invalidate of an unbound window: ND_INVALID_DEVICE_REQUEST, which ends the connection.
    side.qp
        .invalidate(0x14, &w1, OpFlags::empty())
        .ctx("Invalidate an unbound window")?;
    let r = next_results(&side.scq, 1, "Invalidate of an unbound window")?;
    done(
        RequestType::Invalidate,
        Status::INVALID_DEVICE_REQUEST,
        0x14,
        q,
    )
    .check(&r[0], "Invalidate of an unbound window (§2.9)")?;
    ctx.linger();
    Ok(())
}

pub(crate) fn windows_client(ctx: &Ctx) -> Check {
    let side = client_side(ctx, config(WIN_BUF, 4))?;
    post_msg(&side, 0, INFO)?;
    post_msg(&side, 1, INFO + 1)?;
    let ov = side.connect(ctx.client_local(), ctx.addr, 0, 2, &[])?;
    wait_ok(&ov, "Connect")?;
    let cc = side.connector.complete_connect().ctx("CompleteConnect")?;
    wait_ok(&cc, "CompleteConnect")?;
    let q = side.qp_context;
    let a1 = Area::decode(&recv_msg(&side, 0, INFO, "window 1")?);
    let n = a1.len as usize;
    // SAFETY: nothing is posted on this range.
    unsafe { side.write(&[0..n], &fast_pattern(0xA1, n)) };
    side.rdma_write(1, &[0..n], a1.addr, a1.token, OpFlags::empty())
        .ctx("Write through window 1")?;
    side.rdma_read(2, &[n..2 * n], a1.addr, a1.token, OpFlags::empty())
        .ctx("Read through window 1")?;
    let r = next_results(&side.scq, 2, "window 1")?;
    expect_results(
        &r,
        &[
            done(RequestType::Write, Status::SUCCESS, 1, q),
            done(RequestType::Read, Status::SUCCESS, 2, q),
        ],
        "Write and Read through window 1",
    )?;
    // SAFETY: the Read completed.
    expect_bytes(
        &unsafe { side.read(&[n..2 * n], n) },
        &fast_pattern(0xA1, n),
        "Read through window 1",
    )?;
    send_msg(&side, 2, 0xD1, &[])?;
    let a2 = Area::decode(&recv_msg(&side, 1, INFO + 1, "the rebound window")?);
    let n = a2.len as usize;
    // SAFETY: nothing is posted on this range.
    unsafe { side.write(&[0..n], &fast_pattern(0xA2, n)) };
    side.rdma_write(3, &[0..n], a2.addr, a2.token, OpFlags::empty())
        .ctx("Write through the rebound window")?;
    let r = next_results(&side.scq, 1, "rebound window")?;
    done(RequestType::Write, Status::SUCCESS, 3, q)
        .check(&r[0], "Write through the rebound window")?;
    // The server then ends the connection (an error completion on its side).
    let nd = side.connector.notify_disconnect().ctx("NotifyDisconnect")?;
    send_msg(&side, 3, 0xD2, &[])?;
    wait_ok(&nd, "NotifyDisconnect after the server's error completion")?;
    let d = side.connector.disconnect().ctx("Disconnect")?;
    wait_ok(&d, "Disconnect")
}

// ---------------------------------------------------------------------------------------------
// rdma-protection

/// Server buffer: [guard | target 16 KiB | guard | good area | ... | messages].
const PROT_BUF: usize = 512 * 1024;
const TARGET: Range<usize> = 64 * 1024..80 * 1024;
const GOOD: Range<usize> = 256 * 1024..256 * 1024 + 4096;
const GUARD_SEED: u64 = 0x6A4D;
const GOOD_SEED: u64 = 0x600D;

/// How the target is exposed, and what the initiator does to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// A region over `TARGET` with these `ND_MR_FLAG_*`.
    Region(MrFlags),
    /// A region over `TARGET` that is deregistered before its token is sent.
    Deregistered,
    /// A window over `TARGET` (region without remote rights) with these Bind flags.
    Window(OpFlags),
    /// A window that is bound and invalidated before its token is sent.
    Invalidated,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Write,
    Read,
}

/// Where the access goes, relative to the target the server announced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Aim {
    /// `len` bytes at the start, with a token whose index (or only the key) was changed.
    WrongIndex,
    WrongKey,
    /// `len` bytes inside the target.
    Inside,
    /// One byte before the start.
    BelowStart,
    /// The last `len - 1` bytes and one more.
    PastEnd,
    /// At `u64::MAX - 7`: address + length overflows.
    Overflow,
}

#[derive(Debug, Clone, Copy)]
struct ProtCase {
    name: &'static str,
    target: Target,
    op: Op,
    aim: Aim,
    len: usize,
}

const RW: MrFlags = MrFlags::ALLOW_REMOTE_READ.union(MrFlags::ALLOW_REMOTE_WRITE);

const PROT_CASES: &[ProtCase] = &[
    ProtCase {
        name: "Write with a token nobody issued",
        target: Target::Region(RW),
        op: Op::Write,
        aim: Aim::WrongIndex,
        len: 16,
    },
    ProtCase {
        name: "Read with a token nobody issued",
        target: Target::Region(RW),
        op: Op::Read,
        aim: Aim::WrongIndex,
        len: 16,
    },
    ProtCase {
        name: "Write with the right index and a wrong key",
        target: Target::Region(RW),
        op: Op::Write,
        aim: Aim::WrongKey,
        len: 16,
    },
    ProtCase {
        name: "Write to a deregistered region",
        target: Target::Deregistered,
        op: Op::Write,
        aim: Aim::Inside,
        len: 16,
    },
    ProtCase {
        name: "Read from a deregistered region",
        target: Target::Deregistered,
        op: Op::Read,
        aim: Aim::Inside,
        len: 16,
    },
    ProtCase {
        name: "Write to a region without remote write",
        target: Target::Region(MrFlags::ALLOW_REMOTE_READ),
        op: Op::Write,
        aim: Aim::Inside,
        len: 16,
    },
    ProtCase {
        name: "Read from a region without remote read",
        target: Target::Region(MrFlags::ALLOW_REMOTE_WRITE),
        op: Op::Read,
        aim: Aim::Inside,
        len: 16,
    },
    ProtCase {
        name: "Write one byte before the region",
        target: Target::Region(RW),
        op: Op::Write,
        aim: Aim::BelowStart,
        len: 16,
    },
    ProtCase {
        name: "Write one byte past the region",
        target: Target::Region(RW),
        op: Op::Write,
        aim: Aim::PastEnd,
        len: 16,
    },
    ProtCase {
        name: "Write of 200 KiB (several segments) from one byte before the region",
        target: Target::Region(RW),
        op: Op::Write,
        aim: Aim::BelowStart,
        len: 200 * 1024,
    },
    ProtCase {
        name: "Read one byte before the region",
        target: Target::Region(RW),
        op: Op::Read,
        aim: Aim::BelowStart,
        len: 16,
    },
    ProtCase {
        name: "Read one byte past the region",
        target: Target::Region(RW),
        op: Op::Read,
        aim: Aim::PastEnd,
        len: 16,
    },
    ProtCase {
        name: "Write where address + length overflows",
        target: Target::Region(RW),
        op: Op::Write,
        aim: Aim::Overflow,
        len: 16,
    },
    ProtCase {
        name: "Read where address + length overflows",
        target: Target::Region(RW),
        op: Op::Read,
        aim: Aim::Overflow,
        len: 16,
    },
    ProtCase {
        name: "Write through an invalidated window",
        target: Target::Invalidated,
        op: Op::Write,
        aim: Aim::Inside,
        len: 16,
    },
    ProtCase {
        name: "Read through an invalidated window",
        target: Target::Invalidated,
        op: Op::Read,
        aim: Aim::Inside,
        len: 16,
    },
    ProtCase {
        name: "Write through a read-only window",
        target: Target::Window(OpFlags::ALLOW_READ),
        op: Op::Write,
        aim: Aim::Inside,
        len: 16,
    },
    ProtCase {
        name: "Read through a write-only window",
        target: Target::Window(OpFlags::ALLOW_WRITE),
        op: Op::Read,
        aim: Aim::Inside,
        len: 16,
    },
    ProtCase {
        name: "Write one byte past a window",
        target: Target::Window(OpFlags::ALLOW_WRITE),
        op: Op::Write,
        aim: Aim::PastEnd,
        len: 16,
    },
];

/// The guard pattern of the server's buffer, outside the message area.
fn guard(len: usize) -> Vec<u8> {
    let mut g = fast_pattern(GUARD_SEED, len);
    g[GOOD].copy_from_slice(&fast_pattern(GOOD_SEED, GOOD.len()));
    g
}

/// The target of one case; what keeps it alive is returned with it.
fn expose(
    side: &Side,
    t: Target,
) -> Check<(
    Area,
    Vec<netdirect::MemoryRegion>,
    Option<netdirect::MemoryWindow>,
)> {
    let ptr = side.buf.sge(TARGET, 0).buffer;
    let region = |flags: MrFlags| -> Check<netdirect::MemoryRegion> {
        let mr = side.adapter.create_memory_region().ctx("create MR")?;
        // SAFETY: TARGET lies in the side's buffer, which outlives the region (the region is
        // dropped, and deregistered, before the side).
        let ov = unsafe { mr.register(ptr, TARGET.len(), flags) }.ctx("Register")?;
        wait_ok(&ov, "Register")?;
        Ok(mr)
    };
    let area = |token| Area {
        token,
        addr: side.addr(TARGET.start),
        len: TARGET.len() as u64,
    };
    match t {
        Target::Region(flags) => {
            let mr = region(flags)?;
            Ok((area(mr.get_remote_token()), vec![mr], None))
        }
        Target::Deregistered => {
            let mr = region(RW)?;
            let token = mr.get_remote_token();
            wait_ok(&mr.deregister().ctx("Deregister")?, "Deregister")?;
            Ok((area(token), vec![mr], None))
        }
        Target::Window(_) | Target::Invalidated => {
            let mr = region(MrFlags::ALLOW_LOCAL_WRITE)?;
            let w = side
                .adapter
                .create_memory_window()
                .ctx("CreateMemoryWindow")?;
            let flags = match t {
                Target::Window(f) => f,
                _ => OpFlags::ALLOW_READ | OpFlags::ALLOW_WRITE,
            };
            side.qp
                .bind(0xB, &mr, &w, ptr, TARGET.len(), flags)
                .ctx("Bind")?;
            let token = w.get_remote_token();
            let mut n = 1;
            if t == Target::Invalidated {
                side.qp
                    .invalidate(0x1, &w, OpFlags::empty())
                    .ctx("Invalidate")?;
                n = 2;
            }
            let r = next_results(&side.scq, n, "Bind/Invalidate")?;
            ensure!(
                r.iter().all(|c| c.status == Status::SUCCESS),
                "Bind/Invalidate failed: {r:?}"
            );
            Ok((area(token), vec![mr], Some(w)))
        }
    }
}

pub(crate) fn protection_server(ctx: &Ctx) -> Check {
    let adapter = ctx.adapter(any_port(ctx))?;
    let (listener, laddr) = listen(&adapter, any_port(ctx), 4)?;
    ctx.announce_listening(laddr);
    // Each case's connection lives until the client comes back for the next one: it has
    // read our Terminate by then.
    let mut previous: Option<Side> = None;
    for (i, case) in PROT_CASES.iter().enumerate() {
        let what = format!("case {i} ({})", case.name);
        let side = Side::on(
            &adapter,
            SideConfig {
                qp_context: super::SERVER_QP,
                ..config(PROT_BUF, 4)
            },
        )?;
        let body = PROT_BUF - 64 * 1024;
        // SAFETY: nothing is posted yet.
        unsafe { side.write(&[0..body], &guard(body)) };
        let good = side.register_again(MrFlags::ALLOW_REMOTE_READ)?;
        post_msg(&side, 0, 0xCA5E)?;
        let ov = listener
            .get_connection_request(&side.connector)
            .ctx("GetConnectionRequest")?;
        wait_ok(&ov, &format!("{what}: GetConnectionRequest"))?;
        drop(previous.take());
        let aov = side.connector.accept(&side.qp, 2, 0, &[]).ctx("Accept")?;
        wait_ok(&aov, &format!("{what}: Accept"))?;
        let (area, _keep_mr, _keep_mw) = expose(&side, case.target)?;
        let good_area = Area {
            token: good.get_remote_token(),
            addr: side.addr(GOOD.start),
            len: GOOD.len() as u64,
        };
        let mut m = area.encode().to_vec();
        m.extend_from_slice(&good_area.encode());
        send_msg(&side, 1, INFO, &m)?;
        // R-QP-6: the responder's fault flushes its outstanding Receive with ND_CANCELED.
        let r = next_results(&side.rcq, 1, &format!("{what}: the server's Receive"))?;
        Expect::recv(Status::CANCELED, 0xCA5E, side.qp_context, None).check(
            &r[0],
            &format!("{what}: the server's Receive after the violation"),
        )?;
        // Not one byte of the target (or around it) changed.
        // SAFETY: the connection is gone; nothing writes the buffer.
        let now = unsafe { side.read(&[0..body], body) };
        expect_bytes(&now, &guard(body), &format!("{what}: the server's memory"))?;
        previous = Some(side);
    }
    ctx.linger();
    Ok(())
}

pub(crate) fn protection_client(ctx: &Ctx) -> Check {
    let adapter = ctx.adapter(ctx.client_local())?;
    for (i, case) in PROT_CASES.iter().enumerate() {
        let what = format!("case {i} ({})", case.name);
        let side = Side::on(
            &adapter,
            SideConfig {
                qp_context: super::CLIENT_QP,
                ..config(256 * 1024 + 64 * 1024, 4)
            },
        )?;
        post_msg(&side, 0, INFO)?;
        post_msg(&side, 1, 0x999)?;
        let ov = side.connect(ctx.client_local(), ctx.addr, 0, 2, &[])?;
        wait_ok(&ov, &format!("{what}: Connect"))?;
        let cc = side.connector.complete_connect().ctx("CompleteConnect")?;
        wait_ok(&cc, &format!("{what}: CompleteConnect"))?;
        let m = recv_msg(&side, 0, INFO, &format!("{what}: the server's areas"))?;
        let (area, good) = (Area::decode(&m), Area::decode(&m[AREA_LEN..]));
        let host = u32::from_be(area.token);
        let (token, addr) = match case.aim {
            Aim::WrongIndex => ((host ^ 0x5A_5A00).to_be(), area.addr),
            Aim::WrongKey => ((host ^ 0x01).to_be(), area.addr),
            Aim::Inside => (area.token, area.addr),
            Aim::BelowStart => (area.token, area.addr - 1),
            Aim::PastEnd => (area.token, area.addr + area.len - case.len as u64 + 1),
            Aim::Overflow => (area.token, u64::MAX - 7),
        };
        let q = side.qp_context;
        // A good Read first: it completes; then the bad request; then a Send that must be
        // flushed.
        side.rdma_read(1, &[0..GOOD.len()], good.addr, good.token, OpFlags::empty())
            .ctx("good Read")?;
        let local = [8192..8192 + case.len];
        let (ty, r) = match case.op {
            Op::Write => (
                RequestType::Write,
                side.rdma_write(2, &local, addr, token, OpFlags::empty()),
            ),
            Op::Read => (
                RequestType::Read,
                side.rdma_read(2, &local, addr, token, OpFlags::empty()),
            ),
        };
        // D6: the post itself succeeds.
        r.ctx(&format!("{what}: post"))?;
        side.send(3, &[0..8], OpFlags::empty()).ctx("Send")?;
        let r = next_results(&side.scq, 3, &what)?;
        expect_results(
            &r,
            &[
                done(RequestType::Read, Status::SUCCESS, 1, q),
                done(ty, Status::ACCESS_VIOLATION, 2, q),
                Expect::send(Status::CANCELED, 3, q),
            ],
            &format!("{what}: completions (D6: ND_ACCESS_VIOLATION, then ND_CANCELED)"),
        )?;
        // SAFETY: the good Read completed.
        let got = unsafe { side.read(&[0..GOOD.len()], GOOD.len()) };
        expect_bytes(
            &got,
            &fast_pattern(GOOD_SEED, GOOD.len()),
            &format!("{what}: good Read"),
        )?;
        if case.op == Op::Read {
            // A refused Read brings nothing.
            // SAFETY: the Read completed.
            let sink = unsafe { side.read(&local, case.len) };
            ensure!(
                sink.iter().all(|&b| b == 0),
                "{what}: a refused Read wrote its sink"
            );
        }
        let r = next_results(&side.rcq, 1, &format!("{what}: the client's Receive"))?;
        Expect::recv(Status::CANCELED, 0x999, q, None).check(
            &r[0],
            &format!("{what}: the client's Receive after the violation"),
        )?;
        expect_empty(&side.scq, &format!("{what}: initiator CQ"))?;
        let d = side.connector.disconnect().ctx("Disconnect")?;
        wait_ok(&d, &format!("{what}: Disconnect"))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// rdma-window-other-qp

pub(crate) fn window_other_qp_server(ctx: &Ctx) -> Check {
    let adapter = ctx.adapter(any_port(ctx))?;
    let cfg = SideConfig {
        qp_context: super::SERVER_QP,
        ..config(PROT_BUF, 4)
    };
    let a = Side::on(&adapter, cfg)?;
    let b = Side::on(
        &adapter,
        SideConfig {
            qp_context: super::SERVER_QP + 1,
            ..cfg
        },
    )?;
    let body = PROT_BUF - 64 * 1024;
    // SAFETY: nothing is posted yet.
    unsafe { a.write(&[0..body], &guard(body)) };
    post_msg(&b, 0, 0xB0)?;
    post_msg(&a, 0, 0xA0)?;
    let (listener, laddr) = listen(&adapter, any_port(ctx), 4)?;
    ctx.announce_listening(laddr);
    for s in [&a, &b] {
        let ov = listener
            .get_connection_request(&s.connector)
            .ctx("GetConnectionRequest")?;
        wait_ok(&ov, "GetConnectionRequest")?;
        let aov = s.connector.accept(&s.qp, 2, 0, &[]).ctx("Accept")?;
        wait_ok(&aov, "Accept")?;
    }
    // One window over A's buffer, bound through A's queue pair; its token goes out on both
    // connections.
    let region = a.register_again(MrFlags::ALLOW_LOCAL_WRITE)?;
    let w = adapter.create_memory_window().ctx("CreateMemoryWindow")?;
    a.qp.bind(
        0xB,
        &region,
        &w,
        a.buf.sge(TARGET, 0).buffer,
        TARGET.len(),
        OpFlags::ALLOW_READ | OpFlags::ALLOW_WRITE,
    )
    .ctx("Bind")?;
    next_results(&a.scq, 1, "Bind")?;
    let area = Area {
        token: w.get_remote_token(),
        addr: a.addr(TARGET.start),
        len: TARGET.len() as u64,
    };
    send_msg(&a, 1, INFO, &area.encode())?;
    send_msg(&b, 1, INFO, &area.encode())?;
    // The access through B is refused: B's connection ends, its Receive is flushed.
    let r = next_results(&b.rcq, 1, "B's Receive")?;
    Expect::recv(Status::CANCELED, 0xB0, b.qp_context, None).check(
        &r[0],
        "the Receive of the connection the window is not bound to",
    )?;
    // Through A it works; A's client says so.
    recv_msg(&a, 0, 0xA0, "A's done message")?;
    // SAFETY: both clients are done.
    let now = unsafe { a.read(&[0..body], body) };
    let mut want = guard(body);
    want[TARGET.start..TARGET.start + 16].copy_from_slice(&fast_pattern(0x0A, 16));
    expect_bytes(&now, &want, "memory after Writes through both connections")?;
    ctx.linger();
    Ok(())
}

pub(crate) fn window_other_qp_client(ctx: &Ctx) -> Check {
    let adapter = ctx.adapter(ctx.client_local())?;
    let cfg = SideConfig {
        qp_context: super::CLIENT_QP,
        ..config(128 * 1024, 4)
    };
    let a = Side::on(&adapter, cfg)?;
    let b = Side::on(
        &adapter,
        SideConfig {
            qp_context: super::CLIENT_QP + 1,
            ..cfg
        },
    )?;
    for s in [&a, &b] {
        post_msg(s, 0, INFO)?;
        let ov = s.connect(ctx.client_local(), ctx.addr, 0, 2, &[])?;
        wait_ok(&ov, "Connect")?;
        let cc = s.connector.complete_connect().ctx("CompleteConnect")?;
        wait_ok(&cc, "CompleteConnect")?;
    }
    let area_a = Area::decode(&recv_msg(&a, 0, INFO, "window via A")?);
    let area_b = Area::decode(&recv_msg(&b, 0, INFO, "window via B")?);
    // SAFETY: nothing is posted on these ranges.
    unsafe {
        a.write(&[0..16], &fast_pattern(0x0A, 16));
        b.write(&[0..16], &fast_pattern(0x0B, 16));
    }
    b.rdma_write(1, &[0..16], area_b.addr, area_b.token, OpFlags::empty())
        .ctx("Write through the other connection")?;
    let r = next_results(&b.scq, 1, "Write through the other connection")?;
    done(
        RequestType::Write,
        Status::ACCESS_VIOLATION,
        1,
        b.qp_context,
    )
    .check(
        &r[0],
        "a window used through a connection it is not bound to (STag not associated)",
    )?;
    a.rdma_write(2, &[0..16], area_a.addr, area_a.token, OpFlags::empty())
        .ctx("Write through the window's own connection")?;
    let r = next_results(&a.scq, 1, "Write through the window's connection")?;
    done(RequestType::Write, Status::SUCCESS, 2, a.qp_context)
        .check(&r[0], "Write through the window's own connection")?;
    send_msg(&a, 1, 0xA0, &[])?;
    for s in [&a, &b] {
        let d = s.connector.disconnect().ctx("Disconnect")?;
        wait_ok(&d, "Disconnect")?;
    }
    Ok(())
}
