//! `rdma-read-fence` and `rdma-read-limits`: a Send and a Write fenced behind Reads carry
//! what the Reads brought, and the read limits are reported exactly and never exceeded.

use super::*;

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
    side.recv(BYE, &[]).ctx("post bye Receive")?;
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

const LIMIT_READS: u64 = 24;

pub(crate) fn read_limits_server(ctx: &Ctx) -> Check {
    let side = server_side(ctx, config(MIB + 64 * 1024, 4))?;
    let rmr = side.register_again(MrFlags::ALLOW_REMOTE_READ)?;
    // SAFETY: nothing is posted yet.
    unsafe { side.write(&[0..MIB], &fast_pattern(0x11D, MIB)) };
    side.recv(BYE, &[]).ctx("post bye Receive")?;
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
