//! ND v1 connection management: Connect/Accept/Reject with private data, the adapter's own
//! calls, addresses, NotifyDisconnect, Disconnect and Flush (nd-v1 §1.4.6, §1.6).

use std::net::SocketAddr;
use std::os::fd::AsRawFd;

use netdirect::v1::{self, Sge1};
use netdirect::{OpFlags, Status};

use super::v1::{reap, reap_one, v1_await_request, v1_connect, V1Side};
use super::{client_pd, server_pd};
use crate::check::{expect_pending, expect_status, show, wait_ok, wait_status, Check, Context};
use crate::side::Ctx;
use crate::{ensure, ensure_eq};

const CALLER_PD: usize = 40;
const CALLEE_PD: usize = 30;
/// The client's endpoint read limits: (inbound, outbound).
const CLIENT_LIMITS: (usize, usize) = (2, 3);

/// The full private data through GetConnectionData: a zero-size probe and a short buffer
/// give `ND_BUFFER_OVERFLOW` with the full size (and the prefix), the limits come back even
/// then; a large buffer gets it all.
fn check_connection_data(
    c: &v1::Connector,
    want: &[u8],
    limits: (usize, usize),
    what: &str,
) -> Check {
    let (mut irl, mut orl) = (usize::MAX, usize::MAX);
    let e = c
        .get_connection_data(Some(&mut irl), Some(&mut orl), &mut [])
        .err();
    ensure!(
        e.is_some_and(|e| e.status() == Status::BUFFER_OVERFLOW
            && e.required_size().is_some_and(|n| n >= want.len())),
        "{what}: a zero-size probe must give ND_BUFFER_OVERFLOW and the size, got {e:?}"
    );
    ensure_eq!(
        (irl, orl),
        limits,
        "{what}: read limits (written with the overflow)"
    );
    let mut short = vec![0u8; want.len() / 2];
    expect_status(
        c.get_connection_data(None, None, &mut short),
        Status::BUFFER_OVERFLOW,
        &format!("{what}: short buffer"),
    )?;
    ensure_eq!(&short[..], &want[..short.len()], "{what}: prefix copied");
    let mut all = vec![0u8; want.len() + 64];
    let n = c
        .get_connection_data(None, None, &mut all)
        .ctx(&format!("{what}: GetConnectionData"))?;
    ensure!(n >= want.len(), "{what}: length {n} < {}", want.len());
    ensure_eq!(&all[..want.len()], want, "{what}: private data");
    Ok(())
}

pub(super) fn connect_server(ctx: &Ctx) -> Check {
    let mut side = V1Side::open(ctx)?;
    let a = &side.adapter;
    // The adapter's own calls.
    let info = a.query(1).ctx("Query(1)")?;
    ensure!(
        info.max_cq_entries >= 32 && info.max_inline_data > 0,
        "Query(1): {info:?}"
    );
    expect_status(a.query(2), Status::NOT_SUPPORTED, "Query(2)")?;
    expect_status(
        a.control(0x1234, &[], &mut []),
        Status::NOT_SUPPORTED,
        "Control",
    )?;
    let fd = a.get_file_handle().as_raw_fd();
    ensure!(
        fd >= 0 && a.get_file_handle().as_raw_fd() == fd,
        "GetFileHandle: one descriptor"
    );
    expect_status(side.icq.resize(0), Status::INVALID_PARAMETER, "Resize(0)")?;
    match side.icq.resize(48) {
        Ok(()) => {}
        Err(e) if e.status() == Status::NOT_SUPPORTED => {}
        Err(e) => return crate::check::fail(format!("Resize(48): {}", show(e.status()))),
    }
    let n = side.icq.notify(1).ctx("Notify(ANY)")?;
    expect_pending(&n, "Notify on an empty queue")?;
    side.icq.cancel_overlapped_requests().ctx("cancel Notify")?;
    wait_status(&n, Status::CANCELED, "cancelled Notify")?;
    expect_status(
        side.icq.notify(7).map(drop),
        Status::invalid_parameter(1),
        "Notify(7)",
    )?;

    let (listen, laddr) = v1_await_request(ctx, &side)?;
    // A second request, cancelled: ND_CANCELED before CancelOverlappedRequests returns.
    let spare = side.adapter.create_connector().ctx("CreateConnector")?;
    let pending = listen
        .get_connection_request(&spare)
        .ctx("GetConnectionRequest")?;
    expect_pending(&pending, "a second GetConnectionRequest")?;
    listen
        .cancel_overlapped_requests()
        .ctx("INDListen::CancelOverlappedRequests")?;
    expect_status(
        listen.get_overlapped_result(&pending, false),
        Status::CANCELED,
        "the cancelled GetConnectionRequest",
    )?;
    let peer = side
        .connector
        .get_peer_address()
        .ctx("GetPeerAddress before Accept")?;
    ensure_eq!(peer.ip(), ctx.addr.ip(), "GetPeerAddress before Accept");
    // The peer's limits from this side: inbound = its outbound, outbound = its inbound.
    check_connection_data(
        &side.connector,
        &client_pd(CALLER_PD),
        (CLIENT_LIMITS.1, CLIENT_LIMITS.0),
        "the client's Connect data",
    )?;
    let mut inline = 0usize;
    let ep = side
        .connector
        .create_endpoint(
            &side.icq,
            &side.ocq,
            8,
            8,
            2,
            2,
            CLIENT_LIMITS.1,
            CLIENT_LIMITS.0,
            Some(&mut inline),
        )
        .ctx("CreateEndpoint")?;
    ensure!(inline > 0, "CreateEndpoint: pMaxInlineData {inline}");
    side.ep = Some(ep);
    expect_status(
        side.connector
            .create_endpoint(&side.icq, &side.ocq, 8, 8, 2, 2, 0, 0, None)
            .map(drop),
        Status::NOT_SUPPORTED,
        "a second CreateEndpoint",
    )?;
    side.recv(0, 0..1024).ctx("Receive 0")?;
    side.recv(1, 1024..2048).ctx("Receive 1")?;
    side.recv(2, 2048..3072)
        .ctx("Receive 2 (stays outstanding)")?;
    let big = vec![0u8; side.adapter.query(1).ctx("Query")?.max_callee_data + 1];
    expect_status(
        side.connector.accept(side.ep(), &big).map(drop),
        Status::BUFFER_OVERFLOW,
        "Accept with too much private data",
    )?;
    let acc = side
        .connector
        .accept(side.ep(), &server_pd(CALLEE_PD))
        .ctx("Accept")?;
    wait_ok(&acc, "Accept")?;
    ensure_eq!(
        side.connector.get_local_address().ctx("GetLocalAddress")?,
        laddr,
        "GetLocalAddress"
    );

    // The client's registered Send, then its inline one.
    let got = reap(&side, &side.icq, 2, "two Receives")?;
    ensure_eq!((got[0].0, got[1].0), (0, 1), "Receives complete in order");
    ensure_eq!(got[0].1.status, Status::SUCCESS, "Receive 0");
    ensure_eq!(got[0].1.bytes_transferred, 700, "Receive 0 bytes");
    ensure_eq!(
        got[1].1.bytes_transferred,
        33,
        "Receive 1 bytes (inline Send)"
    );
    ensure_eq!(side.get(0, 700), client_pd(700), "registered Send's bytes");
    ensure_eq!(side.get(1024, 33), server_pd(33), "inline Send's bytes");

    // Reply inline from unregistered memory.
    let reply = client_pd(17);
    // SAFETY: inline: `reply` is read during the call only.
    unsafe {
        side.ep().send(
            side.slots.at(10),
            &[Sge1::new(reply.as_ptr().cast_mut(), 17, None)],
            OpFlags::empty(),
        )
    }
    .ctx("inline Send")?;
    reap_one(
        &side,
        &side.ocq,
        10,
        Status::SUCCESS,
        Some(17),
        "inline Send",
    )?;

    // The client disconnects: NotifyDisconnect completes, the outstanding Receive is
    // cancelled.
    let nd = side.connector.notify_disconnect().ctx("NotifyDisconnect")?;
    wait_ok(&nd, "NotifyDisconnect on the peer's Disconnect")?;
    reap_one(
        &side,
        &side.icq,
        2,
        Status::CANCELED,
        None,
        "Receive outstanding at the peer's Disconnect",
    )?;
    let d = side
        .connector
        .disconnect()
        .ctx("Disconnect after the peer's")?;
    wait_ok(&d, "Disconnect after the peer's")?;
    drop(listen);
    ctx.linger();
    Ok(())
}

pub(super) fn connect_client(ctx: &Ctx) -> Check {
    let mut side = V1Side::open(ctx)?;
    side.make_endpoint(CLIENT_LIMITS.0, CLIENT_LIMITS.1)?;
    expect_status(
        side.send(5, 0..8),
        Status::CONNECTION_INVALID,
        "Send before Connect",
    )?;
    side.recv(0, 4096..5120).ctx("Receive before Connect")?;
    side.recv(1, 5120..6144)
        .ctx("Receive 1 (stays outstanding)")?;
    let pd = client_pd(CALLER_PD);
    let c = &side.connector;
    expect_status(
        c.connect(side.ep(), ctx.addr, 17, 0, &pd).map(drop),
        Status::invalid_parameter(4),
        "Connect with protocol 17",
    )?;
    let other: SocketAddr = if ctx.addr.is_ipv4() {
        "[::1]:1".parse()
    } else {
        "127.0.0.1:1".parse()
    }
    .map_err(|_| crate::check::Failure("address".into()))?;
    expect_status(
        c.connect(side.ep(), other, v1::PROTOCOL_TCP, 0, &pd)
            .map(drop),
        Status::INVALID_ADDRESS,
        "Connect to another family",
    )?;
    let big = vec![0u8; side.adapter.query(1).ctx("Query")?.max_caller_data + 1];
    expect_status(
        c.connect(side.ep(), ctx.addr, v1::PROTOCOL_TCP, 0, &big)
            .map(drop),
        Status::BUFFER_OVERFLOW,
        "Connect with too much private data",
    )?;
    let other_conn = side.adapter.create_connector().ctx("CreateConnector")?;
    expect_status(
        other_conn
            .connect(side.ep(), ctx.addr, v1::PROTOCOL_TCP, 0, &pd)
            .map(drop),
        Status::invalid_parameter(1),
        "Connect with another connector's endpoint",
    )?;
    let ov = v1_connect(ctx, &side, &pd)?;
    wait_ok(&ov, "Connect")?;
    ensure_eq!(
        c.get_overlapped_result(&ov, true)
            .ctx("INDConnector::GetOverlappedResult")?,
        0,
        "Connect's byte count"
    );
    check_connection_data(
        c,
        &server_pd(CALLEE_PD),
        (CLIENT_LIMITS.0, CLIENT_LIMITS.1),
        "the server's Accept data",
    )?;
    wait_ok(
        &c.complete_connect().ctx("CompleteConnect")?,
        "CompleteConnect",
    )?;
    let local = c.get_local_address().ctx("GetLocalAddress")?;
    ensure!(
        local.ip() == ctx.addr.ip() && local.port() != 0,
        "GetLocalAddress {local}"
    );
    ensure_eq!(
        c.get_peer_address().ctx("GetPeerAddress")?,
        ctx.addr,
        "GetPeerAddress"
    );

    side.put(0, &client_pd(700));
    side.send(2, 0..700).ctx("registered Send")?;
    let inline = server_pd(33);
    // SAFETY: inline: read during the call only.
    unsafe {
        side.ep().send(
            side.slots.at(3),
            &[Sge1::new(inline.as_ptr().cast_mut(), 33, None)],
            OpFlags::empty(),
        )
    }
    .ctx("inline Send")?;
    let sent = reap(&side, &side.ocq, 2, "two Sends")?;
    ensure_eq!((sent[0].0, sent[1].0), (2, 3), "Sends complete in order");
    ensure_eq!(
        (sent[0].1.bytes_transferred, sent[1].1.bytes_transferred),
        (700, 33),
        "Send bytes"
    );
    reap_one(
        &side,
        &side.icq,
        0,
        Status::SUCCESS,
        Some(17),
        "the server's reply",
    )?;
    ensure_eq!(side.get(4096, 17), client_pd(17), "reply bytes");

    let d = c.disconnect().ctx("Disconnect")?;
    wait_ok(&d, "Disconnect")?;
    reap_one(
        &side,
        &side.icq,
        1,
        Status::CANCELED,
        None,
        "Receive outstanding at Disconnect",
    )?;
    expect_status(
        side.send(6, 0..8),
        Status::CONNECTION_INVALID,
        "Send after Disconnect",
    )
    .or_else(|_| {
        // A provider may instead take the post and complete it ND_CANCELED.
        reap_one(
            &side,
            &side.ocq,
            6,
            Status::CANCELED,
            None,
            "Send after Disconnect",
        )
    })?;
    Ok(())
}

pub(super) fn reject_server(ctx: &Ctx) -> Check {
    let side = V1Side::open(ctx)?;
    let (_listen, _) = v1_await_request(ctx, &side)?;
    check_connection_data(
        &side.connector,
        &client_pd(CALLER_PD),
        (0, 0),
        "Connect data",
    )?;
    let big = vec![0u8; side.adapter.query(1).ctx("Query")?.max_callee_data + 1];
    expect_status(
        side.connector.reject(&big),
        Status::BUFFER_OVERFLOW,
        "Reject with too much private data",
    )?;
    side.connector.reject(&server_pd(CALLEE_PD)).ctx("Reject")?;
    ctx.linger();
    Ok(())
}

pub(super) fn reject_client(ctx: &Ctx) -> Check {
    let mut side = V1Side::open(ctx)?;
    side.make_endpoint(0, 0)?;
    let ov = v1_connect(ctx, &side, &client_pd(CALLER_PD))?;
    wait_status(&ov, Status::CONNECTION_REFUSED, "Connect rejected")?;
    let mut pd = vec![0u8; 256];
    let n = side
        .connector
        .get_connection_data(None, None, &mut pd)
        .ctx("GetConnectionData after the Reject")?;
    ensure!(n >= CALLEE_PD, "Reject private data length {n}");
    ensure_eq!(
        &pd[..CALLEE_PD],
        &server_pd(CALLEE_PD)[..],
        "Reject private data"
    );
    Ok(())
}

pub(super) fn active_reject_server(ctx: &Ctx) -> Check {
    let mut side = V1Side::open(ctx)?;
    let (_listen, _) = v1_await_request(ctx, &side)?;
    side.make_endpoint(0, 0)?;
    let acc = side
        .connector
        .accept(side.ep(), &server_pd(8))
        .ctx("Accept")?;
    wait_status(
        &acc,
        Status::CONNECTION_REFUSED,
        "Accept the active side rejected",
    )?;
    ctx.linger();
    Ok(())
}

pub(super) fn active_reject_client(ctx: &Ctx) -> Check {
    let mut side = V1Side::open(ctx)?;
    side.make_endpoint(0, 0)?;
    let ov = v1_connect(ctx, &side, &[])?;
    wait_ok(&ov, "Connect")?;
    check_connection_data(&side.connector, &server_pd(8), (0, 0), "Accept data")?;
    side.connector.reject(&[]).ctx("Reject (active side)")?;
    Ok(())
}

pub(super) fn flush_server(ctx: &Ctx) -> Check {
    let mut side = V1Side::open(ctx)?;
    let (_listen, _) = v1_await_request(ctx, &side)?;
    side.make_endpoint(0, 0)?;
    side.recv(0, 0..64).ctx("Receive")?;
    let acc = side.connector.accept(side.ep(), &[]).ctx("Accept")?;
    wait_ok(&acc, "Accept")?;
    let nd = side.connector.notify_disconnect().ctx("NotifyDisconnect")?;
    wait_ok(&nd, "NotifyDisconnect on the peer's Flush")?;
    reap_one(
        &side,
        &side.icq,
        0,
        Status::CANCELED,
        None,
        "Receive at the peer's Flush",
    )?;
    ctx.linger();
    Ok(())
}

pub(super) fn flush_client(ctx: &Ctx) -> Check {
    let mut side = V1Side::open(ctx)?;
    side.make_endpoint(0, 0)?;
    for i in 0..3 {
        side.recv(i, i * 64..(i + 1) * 64).ctx("Receive")?;
    }
    let ov = v1_connect(ctx, &side, &[])?;
    wait_ok(&ov, "Connect")?;
    wait_ok(
        &side.connector.complete_connect().ctx("CompleteConnect")?,
        "CompleteConnect",
    )?;
    side.ep().flush().ctx("Flush")?;
    let got = reap(&side, &side.icq, 3, "Receives at Flush")?;
    for (k, (i, r)) in got.iter().enumerate() {
        ensure_eq!(*i, k, "flushed in order");
        ensure!(
            r.status == Status::CANCELED,
            "flushed Receive {i}: {}",
            show(r.status)
        );
    }
    Ok(())
}
