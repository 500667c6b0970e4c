//! Connection management: every outcome of Connect, Accept, Reject and their cancellation
//! (docs/ND-RULES.md §2.10, §2.11, R-CANCEL-1, D8, D9, D13, D25).

use std::net::SocketAddr;

use netdirect::{OpFlags, ReadLimits, Status};

use super::{
    any_port, await_request, check_private_data, client_bye, client_pd, client_side, server_bye,
    server_pd, server_side, BYE,
};
use crate::check::{
    expect_completed, expect_pending, expect_status, next_results, show, wait_ok, wait_status,
    Check, Context, Expect,
};
use crate::side::{listen, Ctx, SideConfig, EPHEMERAL};
use crate::{ensure, ensure_eq};

/// Context of the client's "my address" message in `accept`.
const ADDR_MSG: u64 = 0xADD5;
/// Private-data sizes in `accept`: the ND tests' own sizes (§8.4: 40 and 36 bytes).
const ACCEPT_CALLER_PD: usize = 40;
const ACCEPT_CALLEE_PD: usize = 36;

/// `addr` is on the test's IP with a port from the ephemeral range (R-CONN-1: port 0 gives one).
fn ephemeral_on(addr: SocketAddr, ctx: &Ctx, what: &str) -> Check {
    ensure_eq!(addr.ip(), ctx.addr.ip(), "{what}: IP");
    ensure!(
        EPHEMERAL.contains(&addr.port()),
        "{what}: port {} is outside 49152-65535 (R-CONN-1)",
        addr.port()
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// accept

pub(super) fn accept_server(ctx: &Ctx) -> Check {
    let side = server_side(ctx, SideConfig::default())?;
    let (_listener, laddr) = await_request(ctx, &side)?;

    // ndmpic: GetPeerAddress works on the passive connector before Accept (§2.10).
    let peer = side
        .connector
        .get_peer_address()
        .ctx("GetPeerAddress before Accept")?;
    ephemeral_on(
        peer,
        ctx,
        "GetPeerAddress before Accept (the client bound port 0)",
    )?;
    let local = side
        .connector
        .get_local_address()
        .ctx("GetLocalAddress before Accept")?;
    ensure_eq!(
        local,
        laddr,
        "passive connector's local address before Accept"
    );
    check_private_data(
        &side.connector,
        &client_pd(ACCEPT_CALLER_PD),
        "the client's Connect private data",
    )?;
    ensure_eq!(
        side.connector
            .get_read_limits()
            .ctx("GetReadLimits before Accept")?,
        ReadLimits {
            inbound: 1,
            outbound: 1
        },
        "passive GetReadLimits after Connect(1, 1)"
    );

    // Step 4: pre-post the Receives, then Accept.
    side.recv(ADDR_MSG, &[0..128]).ctx("post Receive")?;
    side.recv(BYE, &[]).ctx("post bye Receive")?;
    let aov = side
        .connector
        .accept(&side.qp, 1, 1, &server_pd(ACCEPT_CALLEE_PD))
        .ctx("Accept")?;
    wait_ok(&aov, "Accept")?;
    ensure_eq!(
        side.connector
            .get_peer_address()
            .ctx("GetPeerAddress after Accept")?,
        peer,
        "GetPeerAddress after Accept"
    );
    ensure_eq!(
        side.connector
            .get_local_address()
            .ctx("GetLocalAddress after Accept")?,
        laddr,
        "GetLocalAddress after Accept"
    );

    // NotifyDisconnect completes ND_CANCELED only through CancelOverlappedRequests, before the
    // call returns (§2.10, R-CANCEL-1).
    let nd1 = side.connector.notify_disconnect().ctx("NotifyDisconnect")?;
    expect_pending(&nd1, "NotifyDisconnect while connected")?;
    side.connector
        .cancel_overlapped_requests()
        .ctx("Connector::cancel_overlapped_requests")?;
    expect_completed(&nd1, Status::CANCELED, "NotifyDisconnect after cancel")?;
    let nd2 = side
        .connector
        .notify_disconnect()
        .ctx("NotifyDisconnect after a cancel")?;
    expect_pending(&nd2, "second NotifyDisconnect while connected")?;

    // The client sends its own view of its address: it must be what GetPeerAddress said.
    let r = next_results(&side.rcq, 2, "the client's address message and bye")?;
    Expect::recv(Status::SUCCESS, ADDR_MSG, side.qp_context, None)
        .check(&r[0], "address message")?;
    Expect::recv(Status::SUCCESS, BYE, side.qp_context, Some(0)).check(&r[1], "bye")?;
    // SAFETY: the Receive covering these bytes has completed; none is outstanding there.
    let text = unsafe { side.read(&[0..128], r[0].bytes_transferred as usize) };
    let theirs: SocketAddr = String::from_utf8_lossy(&text)
        .parse()
        .map_err(|_| crate::Failure(format!("address message {text:?} is not an address")))?;
    ensure_eq!(
        theirs,
        peer,
        "the client's GetLocalAddress vs our GetPeerAddress"
    );

    let d = side.connector.disconnect().ctx("Disconnect")?;
    wait_ok(&d, "Disconnect")?;
    // After a local Disconnect the ND tests accept success, ND_CANCELED or
    // STATUS_CONNECTION_DISCONNECTED for a pending NotifyDisconnect (§2.10, ndconn).
    let got = crate::check::finish(&nd2, "NotifyDisconnect after our Disconnect")?
        .err()
        .map_or(Status::SUCCESS, |e| e.status());
    ensure!(
        [
            Status::SUCCESS,
            Status::CANCELED,
            Status::CONNECTION_DISCONNECTED
        ]
        .contains(&got),
        "NotifyDisconnect after our Disconnect completed with {}",
        show(got)
    );
    ctx.linger();
    Ok(())
}

pub(super) fn accept_client(ctx: &Ctx) -> Check {
    let side = client_side(ctx, SideConfig::default())?;
    side.connector
        .bind(ctx.client_local())
        .ctx("Connector::bind")?;
    // A bound connector is neither connected nor connecting (IND2Connector::GetLocalAddress).
    expect_status(
        side.connector.get_local_address(),
        Status::CONNECTION_INVALID,
        "GetLocalAddress after Bind",
    )?;
    let ov = side
        .connector
        .connect(&side.qp, ctx.addr, 1, 1, &client_pd(ACCEPT_CALLER_PD))
        .ctx("Connect")?;
    wait_ok(&ov, "Connect")?;

    // Step 4: GetPrivateData / GetReadLimits between Connect and CompleteConnect.
    check_private_data(
        &side.connector,
        &server_pd(ACCEPT_CALLEE_PD),
        "the server's Accept private data",
    )?;
    ensure_eq!(
        side.connector.get_read_limits().ctx("GetReadLimits")?,
        ReadLimits {
            inbound: 1,
            outbound: 1
        },
        "active GetReadLimits after Connect(1, 1) / Accept(1, 1)"
    );
    ensure_eq!(
        side.connector
            .get_peer_address()
            .ctx("GetPeerAddress after Connect")?,
        ctx.addr,
        "GetPeerAddress after Connect"
    );
    let bound = side
        .connector
        .get_local_address()
        .ctx("GetLocalAddress after Connect")?;
    ephemeral_on(
        bound,
        ctx,
        "GetLocalAddress after Connect (bound to port 0)",
    )?;
    let cc = side.connector.complete_connect().ctx("CompleteConnect")?;
    wait_ok(&cc, "CompleteConnect")?;
    ensure_eq!(
        side.connector
            .get_peer_address()
            .ctx("GetPeerAddress when connected")?,
        ctx.addr,
        "GetPeerAddress when connected"
    );
    // NdDualConnection: Bind on a connected connector (D13).
    expect_status(
        side.connector.bind(ctx.client_local()),
        Status::ADDRESS_ALREADY_ASSOCIATED,
        "Bind on a connected connector",
    )?;

    let text = bound.to_string().into_bytes();
    // SAFETY: nothing is posted on the buffer yet.
    unsafe { side.write(&[0..text.len()], &text) };
    side.send(ADDR_MSG, &[0..text.len()], OpFlags::empty())
        .ctx("Send address message")?;
    let r = next_results(&side.scq, 1, "address message Send")?;
    Expect::send(Status::SUCCESS, ADDR_MSG, side.qp_context).check(&r[0], "address Send")?;
    client_bye(&side)
}

// ---------------------------------------------------------------------------------------------
// reject

pub(super) fn reject_server(ctx: &Ctx) -> Check {
    let side = server_side(ctx, SideConfig::default())?;
    let (listener, _) = await_request(ctx, &side)?;
    check_private_data(&side.connector, &client_pd(16), "the client's private data")?;
    let max = side.info.max_callee_data as usize;
    // Too much private data: synchronous ND_INVALID_BUFFER_SIZE, no state change (§2.10).
    expect_status(
        side.connector.reject(&server_pd(max + 1)),
        Status::INVALID_BUFFER_SIZE,
        "Reject with MaxCalleeData+1 bytes",
    )?;
    side.connector
        .get_peer_address()
        .ctx("GetPeerAddress after the failed Reject (the request must still be there)")?;
    side.connector
        .reject(&server_pd(max))
        .ctx("Reject with MaxCalleeData bytes")?;
    // Rejected: the request is gone, Accept cannot revive it.
    match side.connector.accept(&side.qp, 0, 0, &[]) {
        Err(_) => {}
        Ok(ov) => {
            let r = crate::check::finish(&ov, "Accept after Reject")?;
            ensure!(r.is_err(), "Accept after Reject succeeded");
        }
    }
    // The client retries on its refused connector: a second request, rejected too.
    let second = side
        .adapter
        .create_connector()
        .ctx("create a second connector")?;
    let gcr = listener
        .get_connection_request(&second)
        .ctx("GetConnectionRequest for the retry")?;
    wait_ok(&gcr, "GetConnectionRequest for the retry")?;
    check_private_data(&second, &client_pd(8), "the retry's private data")?;
    second.reject(&server_pd(4)).ctx("Reject the retry")?;
    ctx.linger();
    Ok(())
}

pub(super) fn reject_client(ctx: &Ctx) -> Check {
    let side = client_side(ctx, SideConfig::default())?;
    let ov = side.connect(ctx.client_local(), ctx.addr, 0, 0, &client_pd(16))?;
    wait_status(
        &ov,
        Status::CONNECTION_REFUSED,
        "Connect to a rejecting server",
    )?;
    let max = side.info.max_callee_data as usize;
    check_private_data(
        &side.connector,
        &server_pd(max),
        "the Reject's private data",
    )?;
    expect_status(
        side.connector.complete_connect(),
        Status::CONNECTION_INVALID,
        "CompleteConnect after a rejected Connect",
    )?;
    // §2.10 Connect: ND_CONNECTION_REFUSED "may be retried", an active Reject included: the
    // same connector and queue pair Connect again (not ND_CONNECTION_ACTIVE), and the second
    // refusal brings its own private data.
    let ov = side
        .connector
        .connect(&side.qp, ctx.addr, 0, 0, &client_pd(8))
        .ctx("Connect again on the refused connector")?;
    wait_status(&ov, Status::CONNECTION_REFUSED, "the retried Connect")?;
    check_private_data(
        &side.connector,
        &server_pd(4),
        "the second Reject's private data",
    )?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// active-reject

pub(super) fn active_reject_server(ctx: &Ctx) -> Check {
    let side = server_side(ctx, SideConfig::default())?;
    let (_listener, _) = await_request(ctx, &side)?;
    side.recv(1, &[0..64]).ctx("post Receive")?;
    let aov = side
        .connector
        .accept(&side.qp, 0, 0, &server_pd(24))
        .ctx("Accept")?;
    // D9: the active side's Reject makes the Accept complete ND_CONNECTION_REFUSED.
    wait_status(
        &aov,
        Status::CONNECTION_REFUSED,
        "Accept when the client Rejects",
    )?;
    // R-QP-6 / D4: the pre-posted Receive is flushed.
    let r = next_results(&side.rcq, 1, "Receive posted before the failed Accept")?;
    Expect::recv(Status::CANCELED, 1, side.qp_context, None).check(&r[0], "flushed Receive")?;
    ctx.linger();
    Ok(())
}

pub(super) fn active_reject_client(ctx: &Ctx) -> Check {
    let side = client_side(ctx, SideConfig::default())?;
    let ov = side.connect(ctx.client_local(), ctx.addr, 0, 0, &client_pd(8))?;
    wait_ok(&ov, "Connect")?;
    check_private_data(&side.connector, &server_pd(24), "the Accept's private data")?;
    // §2.10 Reject, active side: returns ND_SUCCESS.
    side.connector
        .reject(&[])
        .ctx("active-side Reject after Connect completed")?;
    expect_status(
        side.connector.complete_connect(),
        Status::CONNECTION_INVALID,
        "CompleteConnect after Reject",
    )?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// refused

pub(super) fn refused_server(ctx: &Ctx) -> Check {
    let side = server_side(ctx, SideConfig::default())?;
    let (listener, laddr) = listen(&side.adapter, any_port(ctx), 4)?;
    // Releasing the listener makes Connects to its port fail (NdConnListenClosing, §2.11),
    // while this process, and its adapter, live on until the client is done: the refusal is
    // the release's doing, not the process's exit.
    drop(listener);
    ctx.announce_listening(laddr);
    ctx.linger();
    Ok(())
}

pub(super) fn refused_client(ctx: &Ctx) -> Check {
    let side = client_side(ctx, SideConfig::default())?;
    let ov = side.connect(ctx.client_local(), ctx.addr, 0, 0, &client_pd(8))?;
    wait_status(
        &ov,
        Status::CONNECTION_REFUSED,
        "Connect to a released listener's port",
    )?;
    // ND_CONNECTION_REFUSED may be retried (§2.10), and a failed Connect leaves the QP
    // unchanged: Bind again and retry with the same connector and QP.
    let ov = side.connect(ctx.client_local(), ctx.addr, 0, 0, &client_pd(8))?;
    wait_status(&ov, Status::CONNECTION_REFUSED, "retried Connect")?;
    expect_status(
        side.connector.complete_connect(),
        Status::CONNECTION_INVALID,
        "CompleteConnect after a refused Connect",
    )?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// oversize-private-data

pub(super) fn oversize_server(ctx: &Ctx) -> Check {
    let side = server_side(ctx, SideConfig::default())?;
    let (_listener, _) = await_request(ctx, &side)?;
    // Both ends run the same provider, so the client's MaxCallerData is ours.
    let caller = side.info.max_caller_data as usize;
    let callee = side.info.max_callee_data as usize;
    check_private_data(
        &side.connector,
        &client_pd(caller),
        "MaxCallerData bytes of Connect private data",
    )?;
    side.recv(BYE, &[]).ctx("post bye Receive")?;
    // NdLargePrivateData (D8): the oversize Accept fails synchronously and leaves the
    // connector as it was; the second Accept succeeds.
    expect_status(
        side.connector
            .accept(&side.qp, 0, 0, &server_pd(callee + 1)),
        Status::INVALID_BUFFER_SIZE,
        "Accept with MaxCalleeData+1 bytes",
    )?;
    let aov = side
        .connector
        .accept(&side.qp, 0, 0, &server_pd(callee))
        .ctx("Accept with exactly MaxCalleeData bytes on the same connector")?;
    wait_ok(&aov, "Accept with exactly MaxCalleeData bytes")?;
    server_bye(ctx, &side)
}

pub(super) fn oversize_client(ctx: &Ctx) -> Check {
    let side = client_side(ctx, SideConfig::default())?;
    let caller = side.info.max_caller_data as usize;
    let callee = side.info.max_callee_data as usize;
    side.connector
        .bind(ctx.client_local())
        .ctx("Connector::bind")?;
    expect_status(
        side.connector
            .connect(&side.qp, ctx.addr, 0, 0, &client_pd(caller + 1)),
        Status::INVALID_BUFFER_SIZE,
        "Connect with MaxCallerData+1 bytes",
    )?;
    // D8: a second Bind and a Connect with exactly MaxCallerData bytes, same connector.
    let ov = side.connect(ctx.client_local(), ctx.addr, 0, 0, &client_pd(caller))?;
    wait_ok(
        &ov,
        "Connect with exactly MaxCallerData bytes on the same connector",
    )?;
    check_private_data(
        &side.connector,
        &server_pd(callee),
        "MaxCalleeData bytes of Accept private data",
    )?;
    let cc = side.connector.complete_connect().ctx("CompleteConnect")?;
    wait_ok(&cc, "CompleteConnect")?;
    client_bye(&side)
}

// ---------------------------------------------------------------------------------------------
// read-limits

pub(super) fn read_limits_server(ctx: &Ctx) -> Check {
    let side = server_side(ctx, SideConfig::default())?;
    let (_listener, _) = await_request(ctx, &side)?;
    // §2.10: the passive side sees in = peer ORD (8), out = peer IRD (4).
    ensure_eq!(
        side.connector
            .get_read_limits()
            .ctx("GetReadLimits before Accept")?,
        ReadLimits {
            inbound: 8,
            outbound: 4
        },
        "passive GetReadLimits after the peer's Connect(inbound 4, outbound 8)"
    );
    side.recv(BYE, &[]).ctx("post bye Receive")?;
    let aov = side
        .connector
        .accept(&side.qp, 2, 16, &[])
        .ctx("Accept(inbound 2, outbound 16)")?;
    wait_ok(&aov, "Accept")?;
    // Accept clamps: our IRD = min(2, peer ORD 8) = 2, our ORD = min(16, peer IRD 4) = 4. From
    // our point of view now: in = the peer's (negotiated) ORD = 2, out = the peer's IRD = 4.
    ensure_eq!(
        side.connector
            .get_read_limits()
            .ctx("GetReadLimits after Accept")?,
        ReadLimits {
            inbound: 2,
            outbound: 4
        },
        "passive GetReadLimits after Accept(2, 16)"
    );
    server_bye(ctx, &side)
}

pub(super) fn read_limits_client(ctx: &Ctx) -> Check {
    let side = client_side(ctx, SideConfig::default())?;
    let ov = side.connect(ctx.client_local(), ctx.addr, 4, 8, &[])?;
    wait_ok(&ov, "Connect(inbound 4, outbound 8)")?;
    // §2.10: the active side sees the acceptor's values swapped: in = its ORD
    // (min(16, our IRD 4) = 4), out = its IRD (min(2, our ORD 8) = 2).
    ensure_eq!(
        side.connector.get_read_limits().ctx("GetReadLimits")?,
        ReadLimits {
            inbound: 4,
            outbound: 2
        },
        "active GetReadLimits after Accept(2, 16)"
    );
    let cc = side.connector.complete_connect().ctx("CompleteConnect")?;
    wait_ok(&cc, "CompleteConnect")?;
    ensure_eq!(
        side.connector
            .get_read_limits()
            .ctx("GetReadLimits when connected")?,
        ReadLimits {
            inbound: 4,
            outbound: 2
        },
        "active GetReadLimits after CompleteConnect"
    );
    client_bye(&side)
}

// ---------------------------------------------------------------------------------------------
// cancel-connect

pub(super) fn cancel_connect_server(ctx: &Ctx) -> Check {
    let side = server_side(ctx, SideConfig::default())?;
    let (listener, laddr) = listen(&side.adapter, any_port(ctx), 4)?;
    ctx.announce_listening(laddr);
    // Never ask for the request: the client's Connect can only stay pending. Keep the
    // listener until the client is done.
    ctx.linger();
    drop(listener);
    Ok(())
}

pub(super) fn cancel_connect_client(ctx: &Ctx) -> Check {
    let side = client_side(ctx, SideConfig::default())?;
    let ov = side.connect(ctx.client_local(), ctx.addr, 0, 0, &client_pd(8))?;
    // "Do not time out because the peer is slow to Accept" (§2.10): nobody will answer.
    expect_pending(&ov, "Connect that nobody answers")?;
    expect_pending(&ov, "Connect that nobody answers (polled again)")?;
    side.connector
        .cancel_overlapped_requests()
        .ctx("Connector::cancel_overlapped_requests")?;
    // R-CANCEL-1: completed ND_CANCELED before the call returned.
    expect_completed(&ov, Status::CANCELED, "Connect after cancel")?;
    expect_status(
        side.connector.complete_connect(),
        Status::CONNECTION_INVALID,
        "CompleteConnect after a canceled Connect",
    )?;
    side.connector
        .cancel_overlapped_requests()
        .ctx("a second cancel with nothing pending")?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// cancel-get-connection-request

pub(super) fn cancel_gcr_server(ctx: &Ctx) -> Check {
    let side = server_side(ctx, SideConfig::default())?;
    let (listener, laddr) = listen(&side.adapter, any_port(ctx), 4)?;
    let c1 = side.adapter.create_connector().ctx("create connector")?;
    let c2 = side.adapter.create_connector().ctx("create connector")?;
    // Nobody knows the port yet: both requests stay pending.
    let o1 = listener
        .get_connection_request(&c1)
        .ctx("first GetConnectionRequest")?;
    let o2 = listener
        .get_connection_request(&c2)
        .ctx("second GetConnectionRequest")?;
    expect_pending(&o1, "first GetConnectionRequest")?;
    expect_pending(&o2, "second GetConnectionRequest")?;
    listener
        .cancel_overlapped_requests()
        .ctx("Listener::cancel_overlapped_requests")?;
    // R-CANCEL-1, §6.5 (ndconn, ndmpic): every queued request, before the call returns.
    expect_completed(
        &o1,
        Status::CANCELED,
        "first GetConnectionRequest after cancel",
    )?;
    expect_completed(
        &o2,
        Status::CANCELED,
        "second GetConnectionRequest after cancel",
    )?;

    // The listener stays usable, and requests are handed out in order: the oldest
    // outstanding GetConnectionRequest gets the connection, the younger one stays pending.
    ctx.announce_listening(laddr);
    let o3 = listener
        .get_connection_request(&side.connector)
        .ctx("GetConnectionRequest after cancel")?;
    let o4 = listener
        .get_connection_request(&c1)
        .ctx("GetConnectionRequest on a connector whose request was canceled")?;
    wait_ok(&o3, "GetConnectionRequest after cancel")?;
    expect_pending(&o4, "the younger GetConnectionRequest")?;
    check_private_data(&side.connector, &client_pd(12), "the client's private data")?;
    side.recv(BYE, &[]).ctx("post bye Receive")?;
    let aov = side.connector.accept(&side.qp, 0, 0, &[]).ctx("Accept")?;
    wait_ok(&aov, "Accept")?;
    expect_pending(&o4, "the younger GetConnectionRequest")?;
    listener
        .cancel_overlapped_requests()
        .ctx("Listener::cancel_overlapped_requests")?;
    expect_completed(&o4, Status::CANCELED, "the younger GetConnectionRequest")?;
    server_bye(ctx, &side)
}

pub(super) fn cancel_gcr_client(ctx: &Ctx) -> Check {
    let side = client_side(ctx, SideConfig::default())?;
    let ov = side.connect(ctx.client_local(), ctx.addr, 0, 0, &client_pd(12))?;
    wait_ok(&ov, "Connect")?;
    let cc = side.connector.complete_connect().ctx("CompleteConnect")?;
    wait_ok(&cc, "CompleteConnect")?;
    client_bye(&side)
}
