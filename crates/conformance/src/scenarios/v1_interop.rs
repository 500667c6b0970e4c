//! v1 ↔ v2 interoperation: a v1 endpoint and a v2 queue pair on one connection, either side
//! listening, exchange Sends and each Writes and Reads the other's memory (one engine, one
//! wire: nd-v1 §3).
//!
//! The protocol: the "first" side binds (v1) or registers (v2) a window and Sends its
//! descriptor; the "second" Reads and Writes it and Sends its own; the first Writes and
//! Reads that and Sends a zero-byte "done"; the second checks its memory and disconnects.

use netdirect::v1::{self, MwDescriptor, Sge1};
use netdirect::{MrFlags, OpFlags, Sge, Status};

use super::v1::{descriptor_at, reap_one, v1_await_request, v1_connect, V1Side};
use super::{await_request, client_side, server_side};
use crate::check::{finish, next_results, pattern, wait_ok, Check, Context, Expect};
use crate::side::{Ctx, Side, SideConfig};
use crate::{ensure, ensure_eq};

const WIN_AT: usize = 16 * 1024;
const WIN: usize = 4096;
/// The first side's window content, what the second writes into it (at 512), what the
/// first writes into the second's (at 100), and what the second's holds at 2048.
const FIRST: u64 = 0xA1;
const SECOND_WRITES: u64 = 0xD4;
const FIRST_WRITES: u64 = 0xB2;
const SECOND_HOLDS: u64 = 0xC3;

/// Bind a window over this side's window area (read and write) through the endpoint, with
/// the Bind's `ND_RESULT` in slot `bind`, and send its descriptor to the peer from slot `send`;
/// the window is returned to be kept while the peer uses it.
fn expose_window(side: &V1Side, bind: usize, send: usize) -> Check<v1::MemoryWindow> {
    // SAFETY: a null ND_RESULT is never written.
    let mw = unsafe { side.adapter.create_memory_window(std::ptr::null_mut()) }
        .ctx("CreateMemoryWindow")?;
    // SAFETY: in bounds; the slot is read after reaping.
    let d = unsafe {
        side.ep().bind(
            side.slots.at(bind),
            side.mr,
            &mw,
            side.buf.as_ptr().add(WIN_AT),
            WIN,
            OpFlags::ALLOW_READ | OpFlags::ALLOW_WRITE,
        )
    }
    .ctx("Bind")?;
    reap_one(side, &side.ocq, bind, Status::SUCCESS, None, "Bind")?;
    let b = d.to_bytes();
    // SAFETY: inline.
    unsafe {
        side.ep().send(
            side.slots.at(send),
            &[Sge1::new(b.as_ptr().cast_mut(), 20, None)],
            OpFlags::empty(),
        )
    }
    .ctx("Send descriptor")?;
    reap_one(
        side,
        &side.ocq,
        send,
        Status::SUCCESS,
        Some(20),
        "Send descriptor",
    )?;
    Ok(mw)
}

// ---- the v1 halves ----

fn v1_first(side: &V1Side) -> Check {
    side.put(WIN_AT, &pattern(FIRST, WIN));
    let _mw = expose_window(side, 1, 2)?;
    reap_one(
        side,
        &side.icq,
        0,
        Status::SUCCESS,
        Some(20),
        "the v2 side's descriptor",
    )?;
    let mut want = pattern(FIRST, WIN);
    want[512..640].copy_from_slice(&pattern(SECOND_WRITES, 128));
    ensure_eq!(
        side.get(WIN_AT, WIN),
        want,
        "the window after the v2 side's Write"
    );
    let peer = descriptor_at(side, 0);
    side.put(8192, &pattern(FIRST_WRITES, 256));
    // SAFETY: sources unchanged and sinks unread until completion.
    unsafe {
        side.ep()
            .write(
                side.slots.at(3),
                &[side.sge(8192..8448)],
                &peer,
                100,
                OpFlags::empty(),
            )
            .ctx("v1 Write")?;
        side.ep()
            .read(
                side.slots.at(4),
                &[side.sge(9000..9256)],
                &peer,
                2048,
                OpFlags::empty(),
            )
            .ctx("v1 Read")?;
    }
    reap_one(side, &side.ocq, 3, Status::SUCCESS, Some(256), "v1 Write")?;
    reap_one(side, &side.ocq, 4, Status::SUCCESS, Some(256), "v1 Read")?;
    ensure_eq!(
        side.get(9000, 256),
        pattern(SECOND_HOLDS, 256),
        "v1 Read of v2 memory"
    );
    // SAFETY: zero-byte Send.
    unsafe { side.ep().send(side.slots.at(5), &[], OpFlags::empty()) }.ctx("Send done")?;
    reap_one(side, &side.ocq, 5, Status::SUCCESS, Some(0), "Send done")
}

fn v1_second(side: &V1Side) -> Check {
    reap_one(
        side,
        &side.icq,
        0,
        Status::SUCCESS,
        Some(20),
        "the v2 side's descriptor",
    )?;
    let peer = descriptor_at(side, 0);
    side.put(8192, &pattern(SECOND_WRITES, 128));
    side.put(WIN_AT + 2048, &pattern(SECOND_HOLDS, 256));
    // The Read covers what the Write changes: one after the other.
    // SAFETY: the sink is read only after the Read completed.
    unsafe {
        side.ep().read(
            side.slots.at(3),
            &[side.sge(9000..10024)],
            &peer,
            0,
            OpFlags::empty(),
        )
    }
    .ctx("v1 Read")?;
    reap_one(side, &side.ocq, 3, Status::SUCCESS, Some(1024), "v1 Read")?;
    // SAFETY: the source is unchanged until the Write completed.
    unsafe {
        side.ep().write(
            side.slots.at(4),
            &[side.sge(8192..8320)],
            &peer,
            512,
            OpFlags::empty(),
        )
    }
    .ctx("v1 Write")?;
    reap_one(side, &side.ocq, 4, Status::SUCCESS, Some(128), "v1 Write")?;
    ensure_eq!(
        side.get(9000, 1024),
        pattern(FIRST, WIN)[..1024].to_vec(),
        "v1 Read of v2 memory"
    );
    let _mw = expose_window(side, 5, 6)?;
    reap_one(side, &side.icq, 1, Status::SUCCESS, Some(0), "done")?;
    ensure_eq!(
        side.get(WIN_AT + 100, 256),
        pattern(FIRST_WRITES, 256),
        "the v2 side's Write into v1 memory"
    );
    Ok(())
}

// ---- the v2 halves ----

const RECV_DESC: u64 = 0xD5C;
const RECV_DONE: u64 = 0xD0E;

fn v2_send_descriptor(side: &Side, ctx_: u64, d: &MwDescriptor) -> Check {
    let b = d.to_bytes();
    let sge = Sge::new(b.as_ptr().cast_mut(), 20, 0);
    // SAFETY: INLINE: read during the call.
    unsafe { side.qp.send(ctx_, &[sge], OpFlags::INLINE) }.ctx("v2 Send descriptor")?;
    let r = next_results(&side.scq, 1, "v2 Send descriptor")?;
    Expect::send(Status::SUCCESS, ctx_, side.qp_context).check(&r[0], "v2 Send descriptor")
}

fn v2_descriptor(side: &Side) -> MwDescriptor {
    // SAFETY: the Receive that wrote it completed.
    let b: [u8; 20] = unsafe { side.read(&[0..20], 20) }
        .try_into()
        .unwrap_or([0; 20]);
    MwDescriptor::from_bytes(&b)
}

fn v2_first(side: &Side) -> Check {
    // SAFETY: nothing accesses the window yet.
    unsafe { side.write(&[WIN_AT..WIN_AT + WIN], &pattern(FIRST, WIN)) };
    let remote = side.register_again(MrFlags::ALLOW_REMOTE_READ | MrFlags::ALLOW_REMOTE_WRITE)?;
    let d = MwDescriptor::new(side.addr(WIN_AT), WIN as u64, remote.get_remote_token());
    v2_send_descriptor(side, 1, &d)?;
    let r = next_results(&side.rcq, 1, "the v1 side's descriptor")?;
    Expect::recv(Status::SUCCESS, RECV_DESC, side.qp_context, Some(20))
        .check(&r[0], "descriptor")?;
    let mut want = pattern(FIRST, WIN);
    want[512..640].copy_from_slice(&pattern(SECOND_WRITES, 128));
    // SAFETY: the peer's Write completed before its Send.
    ensure_eq!(
        unsafe { side.read(&[WIN_AT..WIN_AT + WIN], WIN) },
        want,
        "the window after the v1 side's Write"
    );
    let peer = v2_descriptor(side);
    // SAFETY: no request covers it.
    unsafe { side.write(&[8192..8448], &pattern(FIRST_WRITES, 256)) };
    side.rdma_write(
        2,
        &[8192..8448],
        peer.base() + 100,
        peer.token(),
        OpFlags::empty(),
    )
    .ctx("v2 Write")?;
    side.rdma_read(
        3,
        &[9000..9256],
        peer.base() + 2048,
        peer.token(),
        OpFlags::empty(),
    )
    .ctx("v2 Read")?;
    let r = next_results(&side.scq, 2, "v2 Write and Read")?;
    ensure!(
        r.iter().all(|r| r.status == Status::SUCCESS),
        "v2 Write/Read: {r:?}"
    );
    // SAFETY: the Read completed.
    ensure_eq!(
        unsafe { side.read(&[9000..9256], 256) },
        pattern(SECOND_HOLDS, 256),
        "v2 Read of v1 memory"
    );
    side.send(4, &[], OpFlags::empty()).ctx("v2 Send done")?;
    next_results(&side.scq, 1, "v2 Send done")?;
    Ok(())
}

fn v2_second(side: &Side) -> Check {
    let r = next_results(&side.rcq, 1, "the v1 side's descriptor")?;
    Expect::recv(Status::SUCCESS, RECV_DESC, side.qp_context, Some(20))
        .check(&r[0], "descriptor")?;
    let peer = v2_descriptor(side);
    // SAFETY: no request covers these.
    unsafe {
        side.write(&[8192..8320], &pattern(SECOND_WRITES, 128));
        side.write(&[WIN_AT + 2048..WIN_AT + 2304], &pattern(SECOND_HOLDS, 256));
    }
    side.rdma_read(
        2,
        &[9000..10024],
        peer.base(),
        peer.token(),
        OpFlags::empty(),
    )
    .ctx("v2 Read")?;
    // The Read covers what the Write changes: one after the other.
    let mut r = next_results(&side.scq, 1, "v2 Read")?;
    side.rdma_write(
        3,
        &[8192..8320],
        peer.base() + 512,
        peer.token(),
        OpFlags::empty(),
    )
    .ctx("v2 Write")?;
    r.extend(next_results(&side.scq, 1, "v2 Write")?);
    ensure!(
        r.iter().all(|r| r.status == Status::SUCCESS),
        "v2 Read/Write: {r:?}"
    );
    // SAFETY: the Read completed.
    ensure_eq!(
        unsafe { side.read(&[9000..10024], 1024) },
        pattern(FIRST, WIN)[..1024].to_vec(),
        "v2 Read of v1 memory"
    );
    let remote = side.register_again(MrFlags::ALLOW_REMOTE_READ | MrFlags::ALLOW_REMOTE_WRITE)?;
    let d = MwDescriptor::new(side.addr(WIN_AT), WIN as u64, remote.get_remote_token());
    v2_send_descriptor(side, 4, &d)?;
    let r = next_results(&side.rcq, 1, "done")?;
    Expect::recv(Status::SUCCESS, RECV_DONE, side.qp_context, Some(0)).check(&r[0], "done")?;
    // SAFETY: the peer's Write completed before its Send.
    ensure_eq!(
        unsafe { side.read(&[WIN_AT + 100..WIN_AT + 356], 256) },
        pattern(FIRST_WRITES, 256),
        "the v1 side's Write into v2 memory"
    );
    Ok(())
}

// ---- the roles ----

pub(super) fn v1_server(ctx: &Ctx) -> Check {
    let mut side = V1Side::open(ctx)?;
    let (_listen, _) = v1_await_request(ctx, &side)?;
    let (mut irl, mut orl) = (0, 0);
    side.connector
        .get_connection_data(Some(&mut irl), Some(&mut orl), &mut [])
        .ctx("GetConnectionData")?;
    ensure_eq!((irl, orl), (4, 4), "the v2 client's read limits");
    side.make_endpoint(irl, orl)?;
    side.recv(0, 0..64).ctx("Receive")?;
    wait_ok(
        &side.connector.accept(side.ep(), &[]).ctx("Accept")?,
        "Accept",
    )?;
    v1_first(&side)?;
    let nd = side.connector.notify_disconnect().ctx("NotifyDisconnect")?;
    let _ = finish(&nd, "NotifyDisconnect")?;
    ctx.linger();
    Ok(())
}

pub(super) fn v2_client(ctx: &Ctx) -> Check {
    let side = client_side(ctx, SideConfig::default())?;
    side.recv(RECV_DESC, &[0..64]).ctx("Receive")?;
    side.recv(RECV_DONE, &[64..128]).ctx("Receive")?;
    let ov = side.connect(ctx.client_local(), ctx.addr, 4, 4, &[])?;
    wait_ok(&ov, "v2 Connect to a v1 listener")?;
    wait_ok(
        &side.connector.complete_connect().ctx("CompleteConnect")?,
        "CompleteConnect",
    )?;
    v2_second(&side)?;
    wait_ok(
        &side.connector.disconnect().ctx("Disconnect")?,
        "Disconnect",
    )
}

pub(super) fn v2_server(ctx: &Ctx) -> Check {
    let side = server_side(ctx, SideConfig::default())?;
    let (_listener, _) = await_request(ctx, &side)?;
    let limits = side.connector.get_read_limits().ctx("GetReadLimits")?;
    ensure_eq!(
        (limits.inbound, limits.outbound),
        (4, 4),
        "the v1 client's read limits"
    );
    side.recv(RECV_DESC, &[0..64]).ctx("Receive")?;
    side.recv(RECV_DONE, &[64..128]).ctx("Receive")?;
    wait_ok(
        &side.connector.accept(&side.qp, 4, 4, &[]).ctx("Accept")?,
        "Accept",
    )?;
    v2_first(&side)?;
    let nd = side.connector.notify_disconnect().ctx("NotifyDisconnect")?;
    let _ = finish(&nd, "NotifyDisconnect")?;
    ctx.linger();
    Ok(())
}

pub(super) fn v1_client(ctx: &Ctx) -> Check {
    let mut side = V1Side::open(ctx)?;
    side.make_endpoint(4, 4)?;
    side.recv(0, 0..64).ctx("Receive")?;
    side.recv(1, 64..128).ctx("Receive")?;
    let ov = v1_connect(ctx, &side, &[])?;
    wait_ok(&ov, "v1 Connect to a v2 listener")?;
    wait_ok(
        &side.connector.complete_connect().ctx("CompleteConnect")?,
        "CompleteConnect",
    )?;
    v1_second(&side)?;
    let _ = v1::PROTOCOL_TCP;
    wait_ok(
        &side.connector.disconnect().ctx("Disconnect")?,
        "Disconnect",
    )
}
