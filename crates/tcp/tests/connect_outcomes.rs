//! How a tcp Connect ends when the peer is slow or gone.
//!
//! * IND2Connector::Connect: "NetworkDirect providers should avoid timing out connections
//!   because the listening peer did not call IND2Connector::Accept". With the tcp connect
//!   timeout cut to 200 ms (`ND_TCP_CONNECT_TIMEOUT_MS`, which bounds the TCP handshake and
//!   sending the MPA Request only) and both providers' listener request timeouts too
//!   (`ND_TCP_REQUEST_TIMEOUT_MS`, `ND_SHM_REQUEST_TIMEOUT_MS`, which bound the wait for a
//!   peer's request only), a Connect whose request the listening application takes and
//!   accepts well after that still completes, and the connection works. This one runs for
//!   every provider (the rule is ND's); the others speak the iWARP wire.
//! * A reset before the MPA Reply is a refusal (Connect has no ND_CONNECTION_ABORTED), after
//!   which the connector is still bound.
//! * A listener closes a connection whose MPA Request does not come within
//!   `ND_TCP_REQUEST_TIMEOUT_MS` (200 ms here), as siw does: a stray or stalled peer cannot
//!   hold a descriptor for the listener's life. Also when nobody blocks in the adapter: an
//!   event loop watching the adapter's descriptor is woken for the deadline.
//!
//! Its own test binary, and one test: the variables are read when an adapter opens, and set
//! here before any.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use netdirect::{Adapter, Listener, Provider, Status};
use netdirect_conformance::check::{wait_ok, Check, Context};
use netdirect_conformance::harness::{self, Family};
use netdirect_conformance::side::{accept_and_exchange, listen};
use netdirect_conformance::{ensure, Needs, Side, SideConfig};

/// An adapter on `ip`, a listener on it and its address, and a side to accept with.
fn listening(p: &Provider, ip: IpAddr) -> Check<(Adapter, Listener, SocketAddr, Side)> {
    let a = p
        .open_adapter_for(SocketAddr::new(ip, 0))
        .ctx("open adapter")?;
    let (listener, laddr) = listen(&a, SocketAddr::new(ip, 0), 4)?;
    let server = Side::on(&a, SideConfig::default())?;
    Ok((a, listener, laddr, server))
}

fn run(p: &Provider, fam: Family) -> Check {
    let ip = fam.ip();
    let (a, listener, laddr, server) = listening(p, ip)?;
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
    accept_and_exchange(&server, &client, &cov)
}

/// A listener that resets the connection before answering (its socket closed with our MPA
/// Request unread, as when a listening process dies): Connect has no ND_CONNECTION_ABORTED,
/// and this is a refusal "due to lack of listener" (ND_CONNECTION_REFUSED, which invites a
/// retry).
fn reset(p: &Provider, fam: Family) -> Check {
    use std::io::Read;
    let ip = fam.ip();
    let raw = std::net::TcpListener::bind(SocketAddr::new(ip, 0)).ctx("raw listener")?;
    let laddr = raw.local_addr().ctx("raw listener address")?;
    let a = p
        .open_adapter_for(SocketAddr::new(ip, 0))
        .ctx("open adapter")?;
    let client = Side::on(&a, SideConfig::default())?;
    let cov = client.connect(SocketAddr::new(ip, 0), laddr, 0, 0, &[])?;
    let (mut s, bound) = raw.accept().ctx("accept")?;
    // Read part of the Request, so the rest is unread when the socket closes: a reset.
    let mut first = [0u8; 4];
    s.read_exact(&mut first).ctx("the Request's first bytes")?;
    drop(s);
    netdirect_conformance::check::wait_status(
        &cov,
        Status::CONNECTION_REFUSED,
        "Connect reset by the listener",
    )?;
    // The connector was bound (to port 0, which chose `bound`'s port), and a failed attempt
    // leaves it so: the retry goes out from the same port.
    let retry = client
        .connector
        .connect(&client.qp, laddr, 0, 0, &[])
        .ctx("Connect again")?;
    let (_s, again) = raw.accept().ctx("accept the retry")?;
    ensure!(
        again == bound,
        "the retry came from {again}, the first attempt from the bound {bound}"
    );
    drop(retry);
    Ok(())
}

/// A peer that connects and sends part of its MPA Request, then nothing: the listener
/// closes the connection once the request timeout passes (while the application waits on a
/// GetConnectionRequest, which drives the adapter), and that request stays pending.
fn stalled_request(p: &Provider, fam: Family) -> Check {
    use std::io::Write;
    let ip = fam.ip();
    let (_a, listener, laddr, server) = listening(p, ip)?;
    let gcr = listener
        .get_connection_request(&server.connector)
        .ctx("GetConnectionRequest")?;
    let mut raw = std::net::TcpStream::connect(laddr).ctx("raw connect")?;
    raw.write_all(b"MPA ID Req").ctx("half a Request")?;
    raw.set_nonblocking(true).ctx("nonblocking")?;
    let end = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        ensure!(
            gcr.wait_timeout(Some(Duration::from_millis(20))).is_none(),
            "a stalled peer completed GetConnectionRequest"
        );
        if listener_closed(&mut raw)? {
            break;
        }
        ensure!(
            std::time::Instant::now() < end,
            "the listener still holds a connection whose Request stalled"
        );
    }
    Ok(())
}

/// As [`stalled_request`], with no blocking wait at all: an event loop sleeps on the adapter's
/// descriptor (`Adapter::fd`, ND's overlapped file) and drives the adapter when it is
/// readable, and the deadline itself makes it readable.
fn stalled_request_event_loop(p: &Provider, fam: Family) -> Check {
    use rustix::event::epoll;
    use std::io::Write;
    let ip = fam.ip();
    let (a, listener, laddr, server) = listening(p, ip)?;
    let _gcr = listener
        .get_connection_request(&server.connector)
        .ctx("GetConnectionRequest")?;
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC)
        .map_err(std::io::Error::from)
        .ctx("epoll")?;
    epoll::add(
        &ep,
        a.fd(),
        epoll::EventData::new_u64(0),
        epoll::EventFlags::IN,
    )
    .map_err(std::io::Error::from)
    .ctx("watch the adapter")?;
    let mut raw = std::net::TcpStream::connect(laddr).ctx("raw connect")?;
    raw.write_all(b"MPA ID Req").ctx("half a Request")?;
    raw.set_nonblocking(true).ctx("nonblocking")?;
    let end = std::time::Instant::now() + Duration::from_secs(20);
    let mut events = [std::mem::MaybeUninit::<epoll::Event>::uninit(); 4];
    loop {
        let t = rustix::time::Timespec {
            tv_sec: 1,
            tv_nsec: 0,
        };
        let (ready, _) = epoll::wait(&ep, &mut events[..], Some(&t))
            .map_err(std::io::Error::from)
            .ctx("epoll_wait")?;
        if !ready.is_empty() {
            a.progress();
        }
        if listener_closed(&mut raw)? {
            return Ok(());
        }
        ensure!(
            std::time::Instant::now() < end,
            "under an event loop the stalled connection is never closed"
        );
    }
}

/// Whether the listener closed the stalled raw connection (end-of-file or reset); `false` while
/// it holds it; a failure if it answered half a Request with anything at all.
fn listener_closed(raw: &mut std::net::TcpStream) -> Check<bool> {
    use std::io::{ErrorKind, Read};
    let mut b = [0u8; 16];
    match raw.read(&mut b) {
        Ok(0) => Ok(true),
        Err(e) if e.kind() == ErrorKind::ConnectionReset => Ok(true),
        Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(false),
        other => Err(netdirect_conformance::check::Failure(format!(
            "the listener answered half a Request: {other:?}"
        ))),
    }
}

/// One test: the scenarios share the environment, set once before any adapter opens.
#[test]
fn connect_outcomes() {
    std::env::set_var("ND_TCP_CONNECT_TIMEOUT_MS", "200");
    std::env::set_var("ND_TCP_REQUEST_TIMEOUT_MS", "200");
    std::env::set_var("ND_SHM_REQUEST_TIMEOUT_MS", "200");
    harness::each_provider(Needs::TwoSided, "slow-accept", run);
    harness::each_provider(Needs::IwarpWire, "tcp-connect-reset", reset);
    harness::each_provider(Needs::IwarpWire, "tcp-stalled-request", stalled_request);
    harness::each_provider(
        Needs::IwarpWire,
        "tcp-stalled-request-event-loop",
        stalled_request_event_loop,
    );
}
