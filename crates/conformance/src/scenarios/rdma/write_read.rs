//! `rdma-write-read`: RDMA Write then Read back of every size up to 64 MiB in 1, 3 and
//! MaxSge SGEs, every byte checked, from both sides.

use super::*;

/// Client buffer: [source area | read-back area | messages].
const SRC: usize = 0;
const RB: usize = BIG + MIB;
const RW_BUF: usize = 2 * (BIG + MIB) + 64 * 1024;
/// Request contexts.
pub(super) const INFO: u64 = 0x1AF0;
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
    side.recv(BYE, &[]).ctx("post bye Receive")?;
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
            qp_context: CLIENT_QP,
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
