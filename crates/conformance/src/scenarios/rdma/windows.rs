//! `rdma-windows`: memory windows over a region without remote rights, bound, used,
//! invalidated and rebound, their completions in order (R-MW-1, R-MR-2, D11).

use super::*;

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
