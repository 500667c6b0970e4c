//! What a hostile same-host process can do through the shm provider's rendezvous sockets (the
//! abstract Unix names of `proto`), checked from the outside with raw sockets.

#![cfg(not(loom))]

mod common;

use std::sync::mpsc;

use common::{provider, DEADLINE};
use rustix::net::{
    accept, bind, listen, recv, send, socket, AddressFamily, RecvFlags, SendFlags, SocketAddrUnix,
    SocketType,
};

/// A fake listener on some free ND port: the abstract name and the port.
fn fake_listener() -> (std::os::fd::OwnedFd, u16) {
    let s = socket(AddressFamily::UNIX, SocketType::SEQPACKET, None).expect("socket");
    for port in (50_000..60_000).step_by(97) {
        let name = SocketAddrUnix::new_abstract_name(
            format!("netdirect-shm/L/127.0.0.1/{port}").as_bytes(),
        )
        .expect("name");
        if bind(&s, &name).is_ok() {
            listen(&s, 4).expect("listen");
            return (s, port);
        }
    }
    panic!("no free ND port for the fake listener");
}

/// An ACCEPT that names read limits far beyond anything offered: the connecting side reports
/// and programs no more than it offered (docs/ND-RULES.md §2.10: GetReadLimits values are
/// "already clamped by both ends' hardware"), so the acceptor cannot widen how many Reads it
/// may have outstanding against us.
#[test]
fn an_acceptor_cannot_raise_the_read_limits() {
    let (ls, port) = fake_listener();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let peer = std::thread::spawn(move || {
        let s = accept(&ls).expect("accept");
        let mut b = [0u8; 1024];
        let _ = recv(&s, &mut b, RecvFlags::empty()).expect("the REQUEST");
        // ACCEPT (proto v1, kind 2): ird, ord, segment address, no private data.
        let mut m = b"NDSH\x01\x02\x00\x00".to_vec();
        m.extend_from_slice(&u32::MAX.to_le_bytes());
        m.extend_from_slice(&u32::MAX.to_le_bytes());
        m.extend_from_slice(&0u64.to_le_bytes());
        m.extend_from_slice(&0u16.to_le_bytes());
        send(&s, &m, SendFlags::empty()).expect("ACCEPT");
        // Keep the connection until the test has looked.
        let _ = done_rx.recv_timeout(DEADLINE);
    });
    let a = provider()
        .open_adapter_for("127.0.0.1:0".parse().unwrap())
        .expect("adapter");
    let cq = a.create_completion_queue(16, 0, 0).expect("cq");
    let qp = a.create_queue_pair(&cq, &cq, 1, 4, 4, 1, 1, 0).expect("qp");
    let c = a.create_connector().expect("connector");
    c.connect(&qp, format!("127.0.0.1:{port}").parse().unwrap(), 4, 3, &[])
        .expect("connect")
        .wait_timeout(Some(DEADLINE))
        .expect("in time")
        .expect("accepted");
    let limits = c.get_read_limits().expect("GetReadLimits");
    assert!(
        limits.inbound <= 4 && limits.outbound <= 3,
        "read limits beyond the offer: {limits:?}"
    );
    done_tx.send(()).expect("peer waits");
    peer.join().expect("peer");
}

/// A process that connects to a listener's rendezvous socket and sends nothing: the listener
/// closes it once `ND_SHM_REQUEST_TIMEOUT_MS` passes (left at its default here, 5 s, so this
/// test takes that long) while the application waits on GetConnectionRequest, which stays
/// pending; a real request still connects afterwards.
#[test]
fn a_silent_peer_is_dropped_by_the_listener() {
    use std::time::{Duration, Instant};
    let a = provider()
        .open_adapter_for("127.0.0.1:0".parse().unwrap())
        .expect("adapter");
    let l = a.create_listener().expect("listener");
    l.bind("127.0.0.1:0".parse().unwrap()).expect("bind");
    l.listen(0).expect("listen");
    let port = l.get_local_address().expect("address").port();
    let cq = a.create_completion_queue(16, 0, 0).expect("cq");
    let qp = a.create_queue_pair(&cq, &cq, 1, 4, 4, 1, 1, 0).expect("qp");
    let server = a.create_connector().expect("connector");
    let gcr = l
        .get_connection_request(&server)
        .expect("GetConnectionRequest");
    let raw = socket(AddressFamily::UNIX, SocketType::SEQPACKET, None).expect("socket");
    let name =
        SocketAddrUnix::new_abstract_name(format!("netdirect-shm/L/127.0.0.1/{port}").as_bytes())
            .expect("name");
    rustix::net::connect(&raw, &name).expect("connect to the rendezvous socket");
    let end = Instant::now() + DEADLINE;
    loop {
        assert!(
            gcr.wait_timeout(Some(Duration::from_millis(50))).is_none(),
            "a silent peer completed GetConnectionRequest"
        );
        let mut b = [0u8; 16];
        match recv(&raw, &mut b, RecvFlags::DONTWAIT) {
            Ok((0, _)) => break,
            Err(rustix::io::Errno::AGAIN) => {}
            other => panic!("the listener answered nothing with {other:?}"),
        }
        assert!(
            Instant::now() < end,
            "the listener still holds a silent peer"
        );
    }
    // A real connection is still served.
    let client = a.create_connector().expect("connector");
    let cqp = a.create_queue_pair(&cq, &cq, 2, 4, 4, 1, 1, 0).expect("qp");
    let cov = client
        .connect(
            &cqp,
            format!("127.0.0.1:{port}").parse().unwrap(),
            0,
            0,
            &[],
        )
        .expect("connect");
    gcr.wait_timeout(Some(DEADLINE))
        .expect("in time")
        .expect("a request");
    let aov = server.accept(&qp, 0, 0, &[]).expect("accept");
    cov.wait_timeout(Some(DEADLINE))
        .expect("in time")
        .expect("connected");
    client
        .complete_connect()
        .expect("complete connect")
        .wait()
        .expect("complete connect");
    aov.wait_timeout(Some(DEADLINE))
        .expect("in time")
        .expect("accepted");
}
