//! Connections that end badly: the peer disconnects, the peer is killed, a Send overruns
//! its Receive, a target refuses a Write and exits at once (R-QP-6, R-QP-8, D4, D5, D6).

use std::time::Duration;

use netdirect::{MrFlags, NotifyType, OpFlags, RequestType, Status};

use super::{await_request, client_side, server_side};
use crate::check::{
    expect_empty, expect_pending, expect_results, next_results, show, wait_ok, Check, Context,
    Expect,
};
use crate::ensure;
use crate::side::{Ctx, Side, SideConfig};

/// Accept one connection with `pre_accept` run between GetConnectionRequest and Accept.
fn serve(ctx: &Ctx, side: &Side, pre_accept: impl FnOnce(&Side) -> Check) -> Check {
    let (_listener, _) = await_request(ctx, side)?;
    pre_accept(side)?;
    let aov = side.connector.accept(&side.qp, 0, 0, &[]).ctx("Accept")?;
    wait_ok(&aov, "Accept")
}

/// Connect and CompleteConnect.
fn connect(ctx: &Ctx, side: &Side) -> Check {
    let ov = side.connect(ctx.client_local(), ctx.addr, 0, 0, &[])?;
    wait_ok(&ov, "Connect")?;
    let cc = side.connector.complete_connect().ctx("CompleteConnect")?;
    wait_ok(&cc, "CompleteConnect")
}

/// After the connection is gone, a newly posted Receive completes ND_CANCELED (R-QP-6).
fn late_receive_is_canceled(side: &Side, context: u64) -> Check {
    side.recv(context, &[0..64])
        .ctx("post Receive after the connection ended")?;
    let r = next_results(&side.rcq, 1, "Receive posted after the connection ended")?;
    Expect::recv(Status::CANCELED, context, side.qp_context, None)
        .check(&r[0], "Receive posted after the connection ended")
}

const POSTED: u64 = 0x9057;

// ---------------------------------------------------------------------------------------------
// peer-disconnect

pub(super) fn peer_disconnect_server(ctx: &Ctx) -> Check {
    let side = server_side(ctx, SideConfig::default())?;
    serve(ctx, &side, |s| s.recv(POSTED, &[]).ctx("post Receive"))?;
    // The client's zero-byte message says its Receives and NotifyDisconnect are posted.
    let r = next_results(&side.rcq, 1, "the client's message")?;
    Expect::recv(Status::SUCCESS, POSTED, side.qp_context, Some(0)).check(&r[0], "message")?;
    let d = side.connector.disconnect().ctx("Disconnect")?;
    wait_ok(&d, "Disconnect")?;
    ctx.linger();
    Ok(())
}

pub(super) fn peer_disconnect_client(ctx: &Ctx) -> Check {
    let side = client_side(ctx, SideConfig::default())?;
    // Receives may be posted before connecting (R-QP-5).
    for i in 0..3 {
        side.recv(0x100 + i, &[i as usize * 64..(i as usize + 1) * 64])
            .ctx("post Receive")?;
    }
    connect(ctx, &side)?;
    let nd = side.connector.notify_disconnect().ctx("NotifyDisconnect")?;
    expect_pending(&nd, "NotifyDisconnect while connected")?;
    side.send(POSTED, &[], OpFlags::empty())
        .ctx("Send 'posted'")?;
    // §2.10: NotifyDisconnect completes when the peer disconnects.
    wait_ok(&nd, "NotifyDisconnect after the server's Disconnect")?;
    let s = next_results(&side.scq, 1, "Send")?;
    Expect::send(Status::SUCCESS, POSTED, side.qp_context).check(&s[0], "Send")?;
    // R-QP-8 / D4: the outstanding Receives are flushed, in order.
    let r = next_results(
        &side.rcq,
        3,
        "Receives outstanding at the peer's Disconnect",
    )?;
    let want: Vec<Expect> = (0..3)
        .map(|i| Expect::recv(Status::CANCELED, 0x100 + i, side.qp_context, None))
        .collect();
    expect_results(&r, &want, "Receives flushed by the peer's Disconnect")?;
    expect_empty(&side.rcq, "receive CQ after the flush")?;
    expect_empty(&side.scq, "initiator CQ after the flush")?;
    late_receive_is_canceled(&side, 0x200)?;
    let d = side
        .connector
        .disconnect()
        .ctx("Disconnect after the peer's")?;
    wait_ok(&d, "Disconnect after the peer's (R-CONN-3)")
}

// ---------------------------------------------------------------------------------------------
// peer-killed

pub(super) fn peer_killed_server(ctx: &Ctx) -> Check {
    let side = server_side(ctx, SideConfig::default())?;
    serve(ctx, &side, |_| Ok(()))?;
    // Block on a notification that never fires; the harness kills this process.
    let ov = side.rcq.notify(NotifyType::Any).ctx("CQ Notify")?;
    let r = ov.wait_timeout(Some(Duration::from_secs(120)));
    crate::check::fail(format!(
        "the server should have been killed while blocked (Notify ended with {r:?})"
    ))
}

pub(super) fn peer_killed_client(ctx: &Ctx) -> Check {
    let side = client_side(ctx, SideConfig::default())?;
    for i in 0..2 {
        side.recv(0x300 + i, &[i as usize * 64..(i as usize + 1) * 64])
            .ctx("post Receive")?;
    }
    connect(ctx, &side)?;
    let nd = side.connector.notify_disconnect().ctx("NotifyDisconnect")?;
    expect_pending(&nd, "NotifyDisconnect while connected")?;
    // The harness SIGKILLs the server now.
    ctx.ready();
    wait_ok(&nd, "NotifyDisconnect after the server was killed")?;
    let r = next_results(&side.rcq, 2, "Receives outstanding when the server died")?;
    let want: Vec<Expect> = (0..2)
        .map(|i| Expect::recv(Status::CANCELED, 0x300 + i, side.qp_context, None))
        .collect();
    expect_results(&r, &want, "Receives flushed when the server died")?;
    expect_empty(&side.rcq, "receive CQ after the flush")?;
    late_receive_is_canceled(&side, 0x400)?;
    let d = side
        .connector
        .disconnect()
        .ctx("Disconnect after the peer died")?;
    wait_ok(&d, "Disconnect after the peer died (R-CONN-3)")
}

// ---------------------------------------------------------------------------------------------
// overrun

const SMALL: u64 = 0x0501;
const NEXT: u64 = 0x0502;
const OVERRUN_LEN: usize = 100;

pub(super) fn overrun_server(ctx: &Ctx) -> Check {
    overrun_receiver(ctx, "Receives after a 100-byte Send into 16 bytes")
}

/// The receiving side of `overrun` and `overrun-large`: a 16-byte Receive and one behind it.
fn overrun_receiver(ctx: &Ctx, what: &str) -> Check {
    let side = server_side(ctx, SideConfig::default())?;
    serve(ctx, &side, |s| {
        s.recv(SMALL, &[0..16]).ctx("post 16-byte Receive")?;
        s.recv(NEXT, &[1024..1024 + 256])
            .ctx("post a second Receive")
    })?;
    // The client's Send may already have terminated the connection; posted now, the
    // NotifyDisconnect completes either way.
    let nd = side.connector.notify_disconnect().ctx("NotifyDisconnect")?;
    // D5: the Receive that is too small completes ND_DATA_OVERRUN; R-QP-6: the connection
    // terminates and the next Receive is flushed.
    let r = next_results(&side.rcq, 2, "the overrun Receive and the next one")?;
    expect_results(
        &r,
        &[
            Expect::recv(Status::DATA_OVERRUN, SMALL, side.qp_context, None),
            Expect::recv(Status::CANCELED, NEXT, side.qp_context, None),
        ],
        what,
    )?;
    wait_ok(&nd, "NotifyDisconnect after the overrun")?;
    late_receive_is_canceled(&side, 0x0503)?;
    ctx.linger();
    Ok(())
}

pub(super) fn overrun_client(ctx: &Ctx) -> Check {
    let side = client_side(ctx, SideConfig::default())?;
    side.recv(0x0601, &[4096..4096 + 64]).ctx("post Receive")?;
    connect(ctx, &side)?;
    let nd = side.connector.notify_disconnect().ctx("NotifyDisconnect")?;
    expect_pending(&nd, "NotifyDisconnect while connected")?;
    let data = crate::check::pattern(0x0F, OVERRUN_LEN);
    // SAFETY: no request covers these bytes yet.
    unsafe { side.write(&[0..OVERRUN_LEN], &data) };
    side.send(0x0602, &[0..OVERRUN_LEN], OpFlags::empty())
        .ctx("Send 100 bytes")?;
    wait_ok(
        &nd,
        "NotifyDisconnect after the server terminated the connection",
    )?;
    // D5: the sender sees success (iWARP: the data left) or STATUS_DATA_ERROR.
    let s = next_results(&side.scq, 1, "the overrunning Send")?;
    let st = s[0].status;
    ensure!(
        st == Status::SUCCESS || st == Status::DATA_ERROR,
        "the overrunning Send completed with {}, expected success or STATUS_DATA_ERROR (D5)",
        show(st)
    );
    Expect::send(st, 0x0602, side.qp_context).check(&s[0], "the overrunning Send")?;
    let r = next_results(&side.rcq, 1, "the Receive outstanding at termination")?;
    Expect::recv(Status::CANCELED, 0x0601, side.qp_context, None)
        .check(&r[0], "the Receive outstanding at termination")?;
    late_receive_is_canceled(&side, 0x0603)?;
    let d = side
        .connector
        .disconnect()
        .ctx("Disconnect after termination")?;
    wait_ok(&d, "Disconnect after the connection terminated")
}

// ---------------------------------------------------------------------------------------------
// overrun-large

/// Larger than what the kernel buffers of a stalled loopback connection hold (`tcp_rmem` +
/// `tcp_wmem` maxima are a few MiB) and than a shm ring's data area, so the Send is still in
/// progress when the receiver ends the connection.
const LARGE: usize = 32 << 20;

pub(super) fn overrun_large_server(ctx: &Ctx) -> Check {
    overrun_receiver(ctx, "Receives after a 32 MiB Send into 16 bytes")
}

pub(super) fn overrun_large_client(ctx: &Ctx) -> Check {
    let side = client_side(
        ctx,
        SideConfig {
            buf_len: LARGE,
            ..SideConfig::default()
        },
    )?;
    side.recv(0x0701, &[0..64]).ctx("post Receive")?;
    connect(ctx, &side)?;
    let nd = side.connector.notify_disconnect().ctx("NotifyDisconnect")?;
    side.send(0x0702, &[0..LARGE], OpFlags::empty())
        .ctx("Send 32 MiB")?;
    side.send(0x0703, &[0..8], OpFlags::empty())
        .ctx("Send behind it")?;
    wait_ok(
        &nd,
        "NotifyDisconnect after the server terminated the connection",
    )?;
    // D5: a Send the receiver could not take, still in progress when it said so, completes
    // STATUS_DATA_ERROR; the one behind it is flushed (R-QP-6).
    let s = next_results(&side.scq, 2, "the overrunning Send and the one behind it")?;
    expect_results(
        &s,
        &[
            Expect::send(Status::DATA_ERROR, 0x0702, side.qp_context),
            Expect::send(Status::CANCELED, 0x0703, side.qp_context),
        ],
        "Sends after the receiver refused the 32 MiB one",
    )?;
    let r = next_results(&side.rcq, 1, "the Receive outstanding at termination")?;
    Expect::recv(Status::CANCELED, 0x0701, side.qp_context, None)
        .check(&r[0], "the Receive outstanding at termination")
}

// ---------------------------------------------------------------------------------------------
// refused-then-exit

/// The refused Write: more than the socket buffers or a ring hold, so it is still being sent
/// when the target refuses it and exits.
const REFUSED_LEN: usize = 8 << 20;
const REFUSED: u64 = 0x0801;

/// The target: a region the client may only Read, announced in the Accept's private data;
/// the process exits the moment the connection ends (no release, no linger: the kernel
/// closes its sockets with the rest of the Write unread).
pub(super) fn refused_then_exit_server(ctx: &Ctx) -> Check {
    let side = server_side(
        ctx,
        SideConfig {
            buf_len: REFUSED_LEN,
            ..SideConfig::default()
        },
    )?;
    let ro = side.register_again(MrFlags::ALLOW_REMOTE_READ)?;
    let area = super::rdma::Area {
        token: ro.get_remote_token(),
        addr: side.addr(0),
        len: REFUSED_LEN as u64,
    };
    let (_listener, _) = await_request(ctx, &side)?;
    let aov = side
        .connector
        .accept(&side.qp, 0, 0, &area.encode())
        .ctx("Accept")?;
    wait_ok(&aov, "Accept")?;
    // Completes at once if the Write already ended the connection.
    let nd = side.connector.notify_disconnect().ctx("NotifyDisconnect")?;
    wait_ok(&nd, "NotifyDisconnect after the refused Write")?;
    std::process::exit(0)
}

/// The initiator: an 8 MiB Write into the read-only region completes ND_ACCESS_VIOLATION
/// (D6), though the target's process is gone by the time the Write's rest meets its closed
/// socket (docs/WIRE.md §4.5).
pub(super) fn refused_then_exit_client(ctx: &Ctx) -> Check {
    let side = client_side(
        ctx,
        SideConfig {
            buf_len: REFUSED_LEN,
            ..SideConfig::default()
        },
    )?;
    connect(ctx, &side)?;
    let pd = side.connector.private_data().ctx("private data")?;
    ensure!(pd.len() >= super::rdma::AREA_LEN, "no area in the Accept");
    let area = super::rdma::Area::decode(&pd);
    side.rdma_write(
        REFUSED,
        &[0..REFUSED_LEN],
        area.addr,
        area.token,
        OpFlags::empty(),
    )
    .ctx("Write 8 MiB into a read-only region")?;
    let r = next_results(&side.scq, 1, "the refused Write")?;
    expect_results(
        &r,
        &[Expect::initiator(
            RequestType::Write,
            Status::ACCESS_VIOLATION,
            REFUSED,
            side.qp_context,
        )],
        "an 8 MiB Write into a read-only region whose target exited at once (D6)",
    )
}
