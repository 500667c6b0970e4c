//! ND v1 data transfer: request batching, windows and `ND_MW_DESCRIPTOR`s, Read/Write at
//! offsets and their failures, SendAndInvalidate (nd-v1 §1.4.4, §1.4.5).

use std::cell::UnsafeCell;

use netdirect::v1::{self, MwDescriptor, Sge1};
use netdirect::{OpFlags, Status};

use super::v1::{
    descriptor_at, expect_ok_or_not_supported, reap, reap_one, v1_await_request, v1_connect, V1Side,
};
use crate::check::{expect_status, not_run, pattern, wait_ok, Check, Context};
use crate::side::Ctx;
use crate::{ensure, ensure_eq};

/// Where a side keeps the window it exposes: `WIN` bytes at `WIN_AT`.
const WIN_AT: usize = 16 * 1024;
const WIN: usize = 4096;
/// Where descriptors and small messages are received.
const MSG_AT: usize = 0;

/// What the provider wrote in a window's `ND_RESULT` (it may write it from its own thread).
fn read_result(r: &UnsafeCell<v1::NdResult1>) -> v1::NdResult1 {
    // SAFETY: a live, aligned `ND_RESULT`; read whole, as the provider writes it.
    unsafe { r.get().read_volatile() }
}

/// Connect the client, with read limits 4/4 each way, and complete.
fn client_connected(ctx: &Ctx) -> Check<V1Side> {
    let mut side = V1Side::open(ctx)?;
    side.make_endpoint(4, 4)?;
    side.recv(0, MSG_AT..MSG_AT + 64)
        .ctx("Receive the descriptor")?;
    let ov = v1_connect(ctx, &side, &[])?;
    wait_ok(&ov, "Connect")?;
    wait_ok(
        &side.connector.complete_connect().ctx("CompleteConnect")?,
        "CompleteConnect",
    )?;
    Ok(side)
}

/// Accept on the server, with read limits 4/4, after posting Receive slot 0.
fn server_accepted(ctx: &Ctx) -> Check<(V1Side, v1::Listen)> {
    let mut side = V1Side::open(ctx)?;
    let (listen, _) = v1_await_request(ctx, &side)?;
    side.make_endpoint(4, 4)?;
    side.recv(0, MSG_AT..MSG_AT + 64).ctx("Receive")?;
    let acc = side.connector.accept(side.ep(), &[]).ctx("Accept")?;
    wait_ok(&acc, "Accept")?;
    Ok((side, listen))
}

/// Bind `mw` over the side's window with `flags` (slot `slot`), wait for the Bind's result,
/// and send the descriptor inline (slot `slot + 1`).
fn bind_and_send(
    side: &V1Side,
    mw: &v1::MemoryWindow,
    flags: OpFlags,
    slot: usize,
) -> Check<MwDescriptor> {
    // SAFETY: in bounds of the buffer.
    let at = unsafe { side.buf.as_ptr().add(WIN_AT) };
    // SAFETY: the slot is read only after the result is reaped.
    let d = unsafe {
        side.ep()
            .bind(side.slots.at(slot), side.mr, mw, at, WIN, flags)
    }
    .ctx("Bind")?;
    reap_one(
        side,
        &side.ocq,
        slot,
        Status::SUCCESS,
        None,
        "Bind (outbound queue)",
    )?;
    ensure_eq!(d.base(), at as u64, "descriptor base");
    ensure_eq!(d.length(), WIN as u64, "descriptor length");
    let bytes = d.to_bytes();
    // SAFETY: inline: read during the call.
    unsafe {
        side.ep().send(
            side.slots.at(slot + 1),
            &[Sge1::new(bytes.as_ptr().cast_mut(), 20, None)],
            OpFlags::empty(),
        )
    }
    .ctx("send the descriptor")?;
    reap_one(
        side,
        &side.ocq,
        slot + 1,
        Status::SUCCESS,
        Some(20),
        "descriptor Send",
    )?;
    Ok(d)
}

pub(super) fn batch_server(ctx: &Ctx) -> Check {
    let mut side = V1Side::open(ctx)?;
    let (_listen, _) = v1_await_request(ctx, &side)?;
    side.make_endpoint(0, 0)?;
    for i in 0..4 {
        side.recv(i, i * 1024..(i + 1) * 1024).ctx("Receive")?;
    }
    let acc = side.connector.accept(side.ep(), &[]).ctx("Accept")?;
    wait_ok(&acc, "Accept")?;
    // Wait for the solicited one: Notify(SOLICITED) fires once the last (solicited) Send lands.
    let got = reap(&side, &side.icq, 4, "four Receives")?;
    for (k, (i, r)) in got.iter().enumerate() {
        ensure_eq!(*i, k, "Receive order");
        ensure_eq!(r.status, Status::SUCCESS, "Receive {k}");
        ensure_eq!(r.bytes_transferred, 100 * (k + 1), "Receive {k} bytes");
        ensure_eq!(
            side.get(k * 1024, 100 * (k + 1)),
            pattern(k as u64, 100 * (k + 1)),
            "Receive {k} bytes"
        );
    }
    let nd = side.connector.notify_disconnect().ctx("NotifyDisconnect")?;
    wait_ok(&nd, "NotifyDisconnect")?;
    ctx.linger();
    Ok(())
}

pub(super) fn batch_client(ctx: &Ctx) -> Check {
    let mut side = V1Side::open(ctx)?;
    side.make_endpoint(0, 0)?;
    let ov = v1_connect(ctx, &side, &[])?;
    wait_ok(&ov, "Connect")?;
    wait_ok(
        &side.connector.complete_connect().ctx("CompleteConnect")?,
        "CompleteConnect",
    )?;
    for k in 0..4 {
        side.put(k * 1024, &pattern(k as u64, 100 * (k + 1)));
    }
    let ep = side.ep();
    ep.start_request_batch();
    for k in 0..4usize {
        let flags = if k == 3 {
            OpFlags::SEND_AND_SOLICIT_EVENT
        } else {
            OpFlags::empty()
        };
        // SAFETY: the ranges are not written until the Sends complete.
        unsafe {
            ep.send(
                side.slots.at(20 + k),
                &[side.sge(k * 1024..k * 1024 + 100 * (k + 1))],
                flags,
            )
        }
        .ctx("Send in a batch")?;
    }
    ep.submit_request_batch();
    // GetResults with room for one at a time: the pointers come back in order.
    for k in 0..4 {
        reap_one(
            &side,
            &side.ocq,
            20 + k,
            Status::SUCCESS,
            Some(100 * (k + 1)),
            "batched Send",
        )?;
    }
    // An empty batch is fine too.
    ep.start_request_batch();
    ep.submit_request_batch();
    // A post with no ND_RESULT is refused.
    // SAFETY: nothing is posted (refused).
    expect_status(
        unsafe { ep.send(std::ptr::null_mut(), &[], OpFlags::empty()) },
        Status::invalid_parameter(1),
        "Send with a NULL ND_RESULT",
    )?;
    // v1 has no INLINE flag (a NULL hMr says it).
    // SAFETY: as above.
    expect_status(
        unsafe { ep.send(side.slots.at(30), &[], OpFlags::INLINE) },
        Status::invalid_parameter(4),
        "Send with flag 0x20",
    )?;
    wait_ok(
        &side.connector.disconnect().ctx("Disconnect")?,
        "Disconnect",
    )?;
    Ok(())
}

pub(super) fn rdma_server(ctx: &Ctx) -> Check {
    let (side, _listen) = server_accepted(ctx)?;
    let invalidated = UnsafeCell::new(v1::NdResult1::PENDING);
    // SAFETY: `invalidated` outlives the window (declared before it).
    let mw = unsafe { side.adapter.create_memory_window(invalidated.get()) }
        .ctx("CreateMemoryWindow")?;
    ensure!(
        std::ptr::eq(mw.invalidate_result(), invalidated.get()),
        "the window keeps its ND_RESULT"
    );
    side.put(WIN_AT, &pattern(0x5EED, WIN));
    // Bind flags must grant something (v1).
    // SAFETY: refused, nothing posted.
    expect_status(
        unsafe {
            side.ep().bind(
                side.slots.at(40),
                side.mr,
                &mw,
                side.buf.as_ptr(),
                64,
                OpFlags::empty(),
            )
        }
        .map(drop),
        Status::invalid_parameter(6),
        "Bind without ALLOW_READ or ALLOW_WRITE",
    )?;
    let d = bind_and_send(&side, &mw, OpFlags::ALLOW_READ | OpFlags::ALLOW_WRITE, 1)?;
    // The client writes 512 bytes at offset 1000, then says so.
    reap_one(
        &side,
        &side.icq,
        0,
        Status::SUCCESS,
        Some(0),
        "the client's done",
    )?;
    let mut want = pattern(0x5EED, WIN);
    want[1000..1512].copy_from_slice(&pattern(0xC11E, 512));
    ensure_eq!(
        side.get(WIN_AT, WIN),
        want,
        "the window after the client's Write"
    );
    expect_status(
        side.adapter.deregister_memory(side.mr).map(drop),
        Status::DEVICE_BUSY,
        "DeregisterMemory while a window is bound",
    )?;
    // SAFETY: the slot is read after it is reaped.
    unsafe {
        side.ep()
            .invalidate(side.slots.at(3), &mw, OpFlags::empty())
    }
    .ctx("Invalidate")?;
    reap_one(&side, &side.ocq, 3, Status::SUCCESS, None, "Invalidate")?;
    // Only the peer's invalidation writes the window's own ND_RESULT.
    ensure_eq!(
        read_result(&invalidated),
        v1::NdResult1::PENDING,
        "CreateMemoryWindow's ND_RESULT after a local Invalidate"
    );
    let _ = d;
    side.recv(4, 64..128).ctx("Receive bye")?;
    // SAFETY: inline zero-byte Send.
    unsafe { side.ep().send(side.slots.at(5), &[], OpFlags::empty()) }.ctx("Send invalidated")?;
    reap_one(
        &side,
        &side.ocq,
        5,
        Status::SUCCESS,
        None,
        "Send invalidated",
    )?;
    let nd = side.connector.notify_disconnect().ctx("NotifyDisconnect")?;
    wait_ok(&nd, "NotifyDisconnect")?;
    reap_one(
        &side,
        &side.icq,
        4,
        Status::CANCELED,
        None,
        "Receive at Disconnect",
    )?;
    let ov = side
        .adapter
        .deregister_memory(side.mr)
        .ctx("DeregisterMemory")?;
    wait_ok(&ov, "DeregisterMemory")?;
    expect_status(
        side.adapter.deregister_memory(side.mr).map(drop),
        Status::invalid_parameter(1),
        "DeregisterMemory twice",
    )?;
    ctx.linger();
    Ok(())
}

pub(super) fn rdma_client(ctx: &Ctx) -> Check {
    let side = client_connected(ctx)?;
    reap_one(
        &side,
        &side.icq,
        0,
        Status::SUCCESS,
        Some(20),
        "the descriptor",
    )?;
    let d = descriptor_at(&side, MSG_AT);
    ensure_eq!(d.length(), WIN as u64, "descriptor length");
    let ep = side.ep();
    // Read 1024 bytes at offset 0 and 100 bytes at offset 3996 (the window's end).
    // SAFETY: the sinks are read only after the Reads complete.
    unsafe {
        ep.read(
            side.slots.at(1),
            &[side.sge(4096..5120)],
            &d,
            0,
            OpFlags::empty(),
        )
        .ctx("Read")?;
        ep.read(
            side.slots.at(2),
            &[side.sge(6000..6100)],
            &d,
            (WIN - 100) as u64,
            OpFlags::empty(),
        )
        .ctx("Read at the end")?;
        // A zero-byte Read probes the peer.
        ep.read(side.slots.at(3), &[], &d, 0, OpFlags::empty())
            .ctx("zero-byte Read")?;
    }
    let got = reap(&side, &side.ocq, 3, "Reads")?;
    ensure_eq!(
        got.iter()
            .map(|g| (g.0, g.1.bytes_transferred))
            .collect::<Vec<_>>(),
        vec![(1, 1024), (2, 100), (3, 0)],
        "Read results"
    );
    ensure!(
        got.iter().all(|g| g.1.status == Status::SUCCESS),
        "Reads: {got:?}"
    );
    let all = pattern(0x5EED, WIN);
    ensure_eq!(side.get(4096, 1024), all[..1024].to_vec(), "Read at 0");
    ensure_eq!(
        side.get(6000, 100),
        all[WIN - 100..].to_vec(),
        "Read at the end"
    );
    side.put(8192, &pattern(0xC11E, 512));
    // SAFETY: the source is not written until the Write completes.
    unsafe {
        ep.write(
            side.slots.at(4),
            &[side.sge(8192..8704)],
            &d,
            1000,
            OpFlags::empty(),
        )
    }
    .ctx("Write")?;
    reap_one(&side, &side.ocq, 4, Status::SUCCESS, Some(512), "Write")?;
    side.recv(6, 64..128).ctx("Receive")?;
    // SAFETY: zero-byte Send.
    unsafe { ep.send(side.slots.at(5), &[], OpFlags::empty()) }.ctx("Send done")?;
    reap_one(&side, &side.ocq, 5, Status::SUCCESS, None, "Send done")?;
    reap_one(
        &side,
        &side.icq,
        6,
        Status::SUCCESS,
        Some(0),
        "the server's 'invalidated'",
    )?;
    wait_ok(
        &side.connector.disconnect().ctx("Disconnect")?,
        "Disconnect",
    )?;
    Ok(())
}

/// A server that exposes a bound window and waits for the client to go.
pub(super) fn window_server(ctx: &Ctx) -> Check {
    let (side, _listen) = server_accepted(ctx)?;
    // SAFETY: a null ND_RESULT is never written.
    let mw = unsafe { side.adapter.create_memory_window(std::ptr::null_mut()) }
        .ctx("CreateMemoryWindow")?;
    bind_and_send(&side, &mw, OpFlags::ALLOW_READ | OpFlags::ALLOW_WRITE, 1)?;
    let nd = side.connector.notify_disconnect().ctx("NotifyDisconnect")?;
    let _ = crate::check::finish(&nd, "NotifyDisconnect")?;
    ctx.linger();
    Ok(())
}

pub(super) fn out_of_bounds_client(ctx: &Ctx) -> Check {
    let side = client_connected(ctx)?;
    reap_one(
        &side,
        &side.icq,
        0,
        Status::SUCCESS,
        Some(20),
        "the descriptor",
    )?;
    let d = descriptor_at(&side, MSG_AT);
    // 16 bytes at offset WIN - 8: 8 bytes past the window's end.
    // SAFETY: the source is not written meanwhile.
    unsafe {
        side.ep().write(
            side.slots.at(1),
            &[side.sge(4096..4112)],
            &d,
            (WIN - 8) as u64,
            OpFlags::empty(),
        )
    }
    .ctx("Write past the window")?;
    reap_one(
        &side,
        &side.ocq,
        1,
        Status::ACCESS_VIOLATION,
        None,
        "Write past the window",
    )?;
    Ok(())
}

pub(super) fn bad_token_client(ctx: &Ctx) -> Check {
    let side = client_connected(ctx)?;
    reap_one(
        &side,
        &side.icq,
        0,
        Status::SUCCESS,
        Some(20),
        "the descriptor",
    )?;
    let good = descriptor_at(&side, MSG_AT);
    let bad = MwDescriptor::new(good.base(), good.length(), good.token() ^ 0x5A5A_0000);
    // SAFETY: the sink is read only after the Read completes.
    unsafe {
        side.ep().read(
            side.slots.at(1),
            &[side.sge(4096..4160)],
            &bad,
            0,
            OpFlags::empty(),
        )
    }
    .ctx("Read with a wrong token")?;
    reap_one(
        &side,
        &side.ocq,
        1,
        Status::ACCESS_VIOLATION,
        None,
        "Read with a wrong token",
    )?;
    Ok(())
}

pub(super) fn send_invalidate_server(ctx: &Ctx) -> Check {
    let (side, _listen) = server_accepted(ctx)?;
    let invalidated = UnsafeCell::new(v1::NdResult1::PENDING);
    // SAFETY: `invalidated` outlives the window (declared before it).
    let mw = unsafe { side.adapter.create_memory_window(invalidated.get()) }
        .ctx("CreateMemoryWindow")?;
    side.recv(10, 128..256).ctx("Receive")?;
    bind_and_send(&side, &mw, OpFlags::ALLOW_WRITE, 1)?;
    // The client's SendAndInvalidate (or its "not supported" note, an empty Send).
    let got = reap(&side, &side.icq, 1, "SendAndInvalidate")?;
    let (slot, r) = got[0];
    ensure_eq!(r.status, Status::SUCCESS, "the SendAndInvalidate's Receive");
    if r.bytes_transferred == 0 {
        ensure_eq!(slot, 0, "receive slot");
        ctx.linger();
        return Ok(());
    }
    ensure_eq!(
        (slot, r.bytes_transferred),
        (0, 8),
        "the SendAndInvalidate's Receive"
    );
    // The peer's invalidation was reported in CreateMemoryWindow's ND_RESULT before the
    // Receive completed (INDAdapter::CreateMemoryWindow, pInvalidateResult).
    ensure_eq!(
        read_result(&invalidated),
        v1::NdResult1 {
            status: Status::SUCCESS,
            bytes_transferred: 0
        },
        "CreateMemoryWindow's ND_RESULT after the peer's SendAndInvalidate"
    );
    // The window is invalidated: it binds again (a bound one would be ND_INVALID_DEVICE_STATE).
    // SAFETY: in bounds; the slot is read after reaping.
    unsafe {
        side.ep().bind(
            side.slots.at(5),
            side.mr,
            &mw,
            side.buf.as_ptr().add(WIN_AT),
            WIN,
            OpFlags::ALLOW_READ,
        )
    }
    .ctx("Bind after the peer's invalidation")?;
    reap_one(&side, &side.ocq, 5, Status::SUCCESS, None, "re-Bind")?;
    // SAFETY: zero-byte Send.
    unsafe { side.ep().send(side.slots.at(6), &[], OpFlags::empty()) }.ctx("Send ack")?;
    reap_one(&side, &side.ocq, 6, Status::SUCCESS, None, "Send ack")?;
    let nd = side.connector.notify_disconnect().ctx("NotifyDisconnect")?;
    let _ = crate::check::finish(&nd, "NotifyDisconnect")?;
    ctx.linger();
    Ok(())
}

pub(super) fn send_invalidate_client(ctx: &Ctx) -> Check {
    let side = client_connected(ctx)?;
    side.recv(1, 64..128).ctx("Receive ack")?;
    reap_one(
        &side,
        &side.icq,
        0,
        Status::SUCCESS,
        Some(20),
        "the descriptor",
    )?;
    let d = descriptor_at(&side, MSG_AT);
    side.put(4096, &pattern(7, 8));
    // SAFETY: the source is not written until the Send completes.
    let r = unsafe {
        side.ep().send_and_invalidate(
            side.slots.at(2),
            &[side.sge(4096..4104)],
            &d,
            OpFlags::empty(),
        )
    };
    if !expect_ok_or_not_supported(r, "SendAndInvalidate")? {
        // SAFETY: zero-byte Send.
        unsafe { side.ep().send(side.slots.at(2), &[], OpFlags::empty()) }.ctx("Send")?;
        reap_one(&side, &side.ocq, 2, Status::SUCCESS, None, "Send")?;
        return not_run("the provider has no SendAndInvalidate (ND_NOT_SUPPORTED)");
    }
    reap_one(
        &side,
        &side.ocq,
        2,
        Status::SUCCESS,
        Some(8),
        "SendAndInvalidate",
    )?;
    reap_one(
        &side,
        &side.icq,
        1,
        Status::SUCCESS,
        Some(0),
        "the server's ack (window bound again)",
    )?;
    // The old descriptor names a window the peer invalidated... and bound again, with only
    // ALLOW_READ: a Write through it is refused either way.
    // SAFETY: the source is not written meanwhile.
    unsafe {
        side.ep().write(
            side.slots.at(3),
            &[side.sge(4096..4104)],
            &d,
            0,
            OpFlags::empty(),
        )
    }
    .ctx("Write through the invalidated descriptor")?;
    reap_one(
        &side,
        &side.ocq,
        3,
        Status::ACCESS_VIOLATION,
        None,
        "Write through the invalidated descriptor",
    )?;
    Ok(())
}

/// The server's Receive for a SendAndInvalidate naming no window of this connection: the
/// connection ends instead (RFC 5040 §8.1.1 item 7), so it does not complete `ND_SUCCESS`.
pub(super) fn foreign_invalidate_server(ctx: &Ctx) -> Check {
    let (side, _listen) = server_accepted(ctx)?;
    // SAFETY: a null ND_RESULT is never written.
    let mw = unsafe { side.adapter.create_memory_window(std::ptr::null_mut()) }
        .ctx("CreateMemoryWindow")?;
    side.recv(10, 128..256).ctx("Receive")?;
    bind_and_send(&side, &mw, OpFlags::ALLOW_WRITE, 1)?;
    let got = reap(
        &side,
        &side.icq,
        1,
        "the Receive of the refused SendAndInvalidate",
    )?;
    ensure!(
        got[0].0 == 0 && got[0].1.status != Status::SUCCESS,
        "a SendAndInvalidate of a window not bound here must end the connection, got {got:?}"
    );
    ctx.linger();
    Ok(())
}

pub(super) fn foreign_invalidate_client(ctx: &Ctx) -> Check {
    let side = client_connected(ctx)?;
    side.recv(1, 64..128).ctx("Receive")?;
    reap_one(
        &side,
        &side.icq,
        0,
        Status::SUCCESS,
        Some(20),
        "the descriptor",
    )?;
    let d = descriptor_at(&side, MSG_AT);
    // The same memory under a token the server never bound.
    let foreign = MwDescriptor::new(d.base(), d.length(), d.token() ^ 0x0101_0000);
    // SAFETY: zero-byte Send.
    unsafe {
        side.ep()
            .send_and_invalidate(side.slots.at(2), &[], &foreign, OpFlags::empty())
    }
    .ctx("SendAndInvalidate of a foreign window")?;
    // The connection ends: the Receive posted above is flushed (the Send itself may have
    // completed before the refusal came back).
    let got = reap(&side, &side.icq, 1, "the Receive after the refusal")?;
    ensure!(
        got[0].0 == 1 && got[0].1.status != Status::SUCCESS,
        "the connection must end after the refused SendAndInvalidate, got {got:?}"
    );
    Ok(())
}
