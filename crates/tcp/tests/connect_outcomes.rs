//! How a tcp Connect ends when the peer is slow or gone.
//!
//! * IND2Connector::Connect: "NetworkDirect providers should avoid timing out connections
//!   because the listening peer did not call IND2Connector::Accept". With the connect timeout
//!   cut to 200 ms (`ND_TCP_CONNECT_TIMEOUT_MS`, which bounds the TCP handshake and sending
//!   the MPA Request only), a Connect whose request the listening application takes and
//!   accepts well after that still completes, and the connection works.
//! * A reset before the MPA Reply is a refusal (Connect has no ND_CONNECTION_ABORTED).
//!
//! Its own test binary: the variable is read when an adapter opens, and set here before any.

// One-SGE requests are written `&[a..b]`, as in the conformance suite.
#![allow(clippy::single_range_in_vec_init)]

use std::net::SocketAddr;
use std::time::Duration;

use netdirect::{OpFlags, Provider, Status};
use netdirect_conformance::check::{expect_results, next_results, wait_ok, Check, Context, Expect};
use netdirect_conformance::harness::{self, Family};
use netdirect_conformance::side::listen;
use netdirect_conformance::{ensure, Needs, Side, SideConfig};

fn run(p: &Provider, fam: Family) -> Check {
    let ip = fam.ip();
    let a = p
        .open_adapter_for(SocketAddr::new(ip, 0))
        .ctx("open adapter")?;
    let (listener, laddr) = listen(&a, SocketAddr::new(ip, 0), 4)?;
    let server = Side::on(&a, SideConfig::default())?;
    let client = Side::on(&a, SideConfig::default())?;
    let cov = client.connect(SocketAddr::new(ip, 0), laddr, 0, 0, &[])?;
    // Five timeouts' worth with the request unanswered (each wait drives the adapter).
    ensure!(
        cov.wait_timeout(Some(Duration::from_secs(1))).is_none(),
        "Connect completed ({:?}) while the peer had not accepted",
        cov.try_result()
    );
    let gcr = listener
        .get_connection_request(&server.connector)
        .ctx("GetConnectionRequest")?;
    wait_ok(&gcr, "GetConnectionRequest")?;
    let aov = server
        .connector
        .accept(&server.qp, 0, 0, &[])
        .ctx("Accept")?;
    wait_ok(&cov, "Connect, accepted late")?;
    let cc = client.connector.complete_connect().ctx("CompleteConnect")?;
    wait_ok(&cc, "CompleteConnect")?;
    wait_ok(&aov, "Accept")?;
    server.recv(1, &[0..64]).ctx("Receive")?;
    client.send(2, &[0..8], OpFlags::empty()).ctx("Send")?;
    let r = next_results(&server.rcq, 1, "the Receive")?;
    expect_results(
        &r,
        &[Expect::recv(Status::SUCCESS, 1, server.qp_context, Some(8))],
        "the Receive",
    )?;
    Ok(())
}

#[test]
fn a_slow_accept_does_not_time_out_the_connect() {
    std::env::set_var("ND_TCP_CONNECT_TIMEOUT_MS", "200");
    harness::each_provider(Needs::IwarpWire, "tcp-slow-accept", run);
}

fn io<T>(r: std::io::Result<T>, what: &str) -> Check<T> {
    r.map_err(|e| netdirect_conformance::check::Failure(format!("{what}: {e}")))
}

/// A listener that resets the connection before answering (its socket closed with our MPA
/// Request unread, as when a listening process dies): Connect has no ND_CONNECTION_ABORTED,
/// and this is a refusal "due to lack of listener" (ND_CONNECTION_REFUSED, which invites a
/// retry).
fn reset(p: &Provider, fam: Family) -> Check {
    use std::io::Read;
    let ip = fam.ip();
    let raw = io(
        std::net::TcpListener::bind(SocketAddr::new(ip, 0)),
        "raw listener",
    )?;
    let laddr = io(raw.local_addr(), "raw listener address")?;
    let a = p
        .open_adapter_for(SocketAddr::new(ip, 0))
        .ctx("open adapter")?;
    let client = Side::on(&a, SideConfig::default())?;
    let cov = client.connect(SocketAddr::new(ip, 0), laddr, 0, 0, &[])?;
    let (mut s, _) = io(raw.accept(), "accept")?;
    // Read part of the Request, so the rest is unread when the socket closes: a reset.
    let mut first = [0u8; 4];
    io(s.read_exact(&mut first), "the Request's first bytes")?;
    drop(s);
    netdirect_conformance::check::wait_status(
        &cov,
        Status::CONNECTION_REFUSED,
        "Connect reset by the listener",
    )
}

#[test]
fn a_reset_before_the_reply_is_a_refusal() {
    harness::each_provider(Needs::IwarpWire, "tcp-connect-reset", reset);
}
