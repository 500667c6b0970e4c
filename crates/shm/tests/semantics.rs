//! Connection management and Send/Receive rules of the `shm` provider, both ends in one process
//! (one thread each, every wait with a deadline). They mirror what the `tcp` provider does; the
//! shared conformance suite checks the same rules across processes for both providers.

#![cfg(not(loom))]

mod common;

use std::net::SocketAddr;

use common::{message, End, DEADLINE};
use netdirect::{OpFlags, Status};

fn status_of(r: netdirect::Result<()>) -> Status {
    match r {
        Ok(()) => Status::SUCCESS,
        Err(e) => e.status(),
    }
}

/// A connected pair: (active, passive).
fn pair(buf: usize, depth: u32, server_recvs: &[(u64, usize, usize)]) -> (End, End) {
    let s = End::new(buf, depth);
    let (l, addr) = s.listen();
    let c = End::new(buf, depth);
    std::thread::scope(|t| {
        t.spawn(|| {
            for &(ctx, off, len) in server_recvs {
                s.recv(ctx, off, len);
            }
            s.accept_one(&l);
        });
        c.connect(addr);
    });
    (c, s)
}

#[test]
fn refused_when_nobody_listens_and_connector_stays_usable() {
    let c = End::new(4096, 4);
    // A port nobody holds: bind a listener, learn its port, drop it.
    let port = {
        let tmp = End::new(64, 1);
        let (_l, a) = tmp.listen();
        a.port()
    };
    let dest: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let r = c
        .connector
        .connect(&c.qp, dest, 0, 0, &[])
        .expect("connect")
        .wait_timeout(Some(DEADLINE))
        .expect("in time");
    assert_eq!(status_of(r), Status::CONNECTION_REFUSED);
    // The same connector connects once somebody listens.
    let s = End::new(4096, 4);
    let (l, addr) = s.listen();
    std::thread::scope(|t| {
        t.spawn(|| s.accept_one(&l));
        c.connect(addr);
    });
}

#[test]
fn ports_sharing_violation_and_ephemeral_range() {
    let a = End::new(64, 1);
    let l1 = a.adapter.create_listener().unwrap();
    l1.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    l1.listen(0).unwrap();
    let addr = l1.get_local_address().unwrap();
    assert!((49152..=65535).contains(&addr.port()), "{addr}");
    let l2 = a.adapter.create_listener().unwrap();
    assert_eq!(
        l2.bind(addr).unwrap_err().status(),
        Status::SHARING_VIOLATION
    );
    // The port is held in another process's view too: it is a host-wide name.
    assert_eq!(
        l1.bind("127.0.0.1:0".parse().unwrap())
            .unwrap_err()
            .status(),
        Status::ADDRESS_ALREADY_ASSOCIATED
    );
    // Connector ports are a separate space (R-CONN-2): the listener's port is free for one.
    let c = a.adapter.create_connector().unwrap();
    c.bind(addr).expect("connector on the listener's port");
    let c2 = a.adapter.create_connector().unwrap();
    assert_eq!(
        c2.bind(addr).unwrap_err().status(),
        Status::SHARING_VIOLATION
    );
    // Not served: a non-local address.
    let l3 = a.adapter.create_listener().unwrap();
    assert_eq!(
        l3.bind("192.0.2.1:0".parse().unwrap())
            .unwrap_err()
            .status(),
        Status::INVALID_ADDRESS
    );
}

#[test]
fn private_data_read_limits_and_addresses() {
    let s = End::new(4096, 4);
    let (l, addr) = s.listen();
    let c = End::new(4096, 4);
    let pd_c = vec![0xC1u8; 252];
    let pd_s = vec![0x5Eu8; 252];
    // Oversize private data: ND_INVALID_BUFFER_SIZE, and the connector stays usable (D8).
    assert_eq!(
        c.connector
            .connect(&c.qp, addr, 3, 5, &[0; 253])
            .unwrap_err()
            .status(),
        Status::INVALID_BUFFER_SIZE
    );
    std::thread::scope(|t| {
        t.spawn(|| {
            l.get_connection_request(&s.connector)
                .unwrap()
                .wait_timeout(Some(DEADLINE))
                .unwrap()
                .unwrap();
            assert_eq!(s.connector.private_data().unwrap(), pd_c);
            let lim = s.connector.get_read_limits().unwrap();
            assert_eq!((lim.inbound, lim.outbound), (5, 3), "peer ORD, peer IRD");
            let peer = s.connector.get_peer_address().unwrap();
            assert!(peer.ip().is_loopback() && peer.port() != 0);
            assert_eq!(s.connector.get_local_address().unwrap(), addr);
            assert_eq!(
                s.connector
                    .accept(&s.qp, 4, 1, &[0; 253])
                    .unwrap_err()
                    .status(),
                Status::INVALID_BUFFER_SIZE
            );
            s.connector
                .accept(&s.qp, 4, 1, &pd_s)
                .unwrap()
                .wait_timeout(Some(DEADLINE))
                .unwrap()
                .unwrap();
            let lim = s.connector.get_read_limits().unwrap();
            assert_eq!((lim.inbound, lim.outbound), (4, 1));
        });
        c.connector
            .connect(&c.qp, addr, 3, 5, &pd_c)
            .unwrap()
            .wait_timeout(Some(DEADLINE))
            .unwrap()
            .unwrap();
        assert_eq!(c.connector.private_data().unwrap(), pd_s);
        let lim = c.connector.get_read_limits().unwrap();
        assert_eq!((lim.inbound, lim.outbound), (1, 4), "acceptor's ORD, IRD");
        assert_eq!(c.connector.get_peer_address().unwrap(), addr);
        c.connector.complete_connect().unwrap().wait().unwrap();
    });
}

#[test]
fn passive_reject_refuses_with_private_data() {
    let s = End::new(64, 1);
    let (l, addr) = s.listen();
    let c = End::new(64, 1);
    std::thread::scope(|t| {
        t.spawn(|| {
            l.get_connection_request(&s.connector)
                .unwrap()
                .wait_timeout(Some(DEADLINE))
                .unwrap()
                .unwrap();
            s.connector.reject(b"no thanks").unwrap();
        });
        let r = c
            .connector
            .connect(&c.qp, addr, 0, 0, &[])
            .unwrap()
            .wait_timeout(Some(DEADLINE))
            .unwrap();
        assert_eq!(status_of(r), Status::CONNECTION_REFUSED);
        assert_eq!(c.connector.private_data().unwrap(), b"no thanks");
    });
}

#[test]
fn active_reject_refuses_the_pending_accept() {
    let s = End::new(64, 1);
    let (l, addr) = s.listen();
    let c = End::new(64, 1);
    std::thread::scope(|t| {
        t.spawn(|| {
            l.get_connection_request(&s.connector)
                .unwrap()
                .wait_timeout(Some(DEADLINE))
                .unwrap()
                .unwrap();
            let r = s
                .connector
                .accept(&s.qp, 0, 0, &[])
                .unwrap()
                .wait_timeout(Some(DEADLINE))
                .expect("accept completes");
            assert_eq!(status_of(r), Status::CONNECTION_REFUSED);
        });
        c.connector
            .connect(&c.qp, addr, 0, 0, &[])
            .unwrap()
            .wait_timeout(Some(DEADLINE))
            .unwrap()
            .unwrap();
        c.connector.reject(&[]).unwrap();
    });
}

#[test]
fn receives_in_order_zero_byte_and_multi_sge() {
    let (c, s) = pair(1 << 16, 16, &[(1, 0, 100), (2, 100, 0), (3, 200, 5000)]);
    // Message 1: two SGEs; message 2: zero bytes; message 3: larger than a cell.
    let m1 = message(1, 90);
    let m3 = message(3, 5000);
    c.fill(10_000, &m1);
    c.fill(20_000, &m3);
    let sges = [
        c.buf.sge(10_000..10_040, c.token()),
        c.buf.sge(10_040..10_090, c.token()),
    ];
    // SAFETY: the ranges are not written until the Sends complete.
    unsafe {
        c.qp.send(11, &sges, OpFlags::empty()).unwrap();
        c.qp.send(12, &[], OpFlags::SEND_AND_SOLICIT_EVENT).unwrap();
    }
    c.send(13, 20_000, 5000).unwrap();
    for want in [11, 12, 13] {
        let r = c.poll();
        assert_eq!((r.request_context, r.status), (want, Status::SUCCESS));
    }
    for (ctx, len) in [(1u64, 90u32), (2, 0), (3, 5000)] {
        let r = s.poll();
        assert_eq!(
            (r.request_context, r.status, r.bytes_transferred),
            (ctx, Status::SUCCESS, len)
        );
    }
    assert_eq!(s.read(0, 90), m1);
    assert_eq!(s.read(200, 5000), m3);
}

#[test]
fn inline_sends_capture_data_at_post_time() {
    let (c, s) = pair(1 << 16, 16, &[(1, 0, 1024), (2, 1024, 1024)]);
    let m = message(7, 300);
    c.fill(0, &m);
    let sge = c.buf.sge(0..300, 0xdead_beef); // inline: the token is not used
                                              // SAFETY: INLINE data is read during the call only.
    unsafe { c.qp.send(1, &[sge], OpFlags::INLINE).unwrap() };
    c.fill(0, &[0; 300]); // reuse the buffer at once
    let sge = c.buf.sge(0..8, 0);
    c.fill(0, b"inline-8");
    // SAFETY: as above.
    unsafe { c.qp.send(2, &[sge], OpFlags::INLINE).unwrap() };
    c.fill(0, &[0; 8]);
    assert_eq!(s.poll().bytes_transferred, 300);
    assert_eq!(s.poll().bytes_transferred, 8);
    assert_eq!(s.read(0, 300), m);
    assert_eq!(s.read(1024, 8), b"inline-8");
    // Inline data beyond the limit: ND_BUFFER_OVERFLOW, synchronously.
    let big = c.buf.sge(0..2000, 0);
    // SAFETY: as above.
    let e = unsafe { c.qp.send(3, &[big], OpFlags::INLINE) }.unwrap_err();
    assert_eq!(e.status(), Status::BUFFER_OVERFLOW);
}

#[test]
fn overrun_terminates_and_flushes_both_sides() {
    let (c, s) = pair(1 << 16, 16, &[(1, 0, 16), (2, 100, 64)]);
    c.recv(9, 1000, 64);
    c.send(1, 0, 17).unwrap();
    assert_eq!(c.poll().status, Status::SUCCESS, "local completion");
    let r = s.poll();
    assert_eq!((r.request_context, r.status), (1, Status::DATA_OVERRUN));
    let r = s.poll();
    assert_eq!((r.request_context, r.status), (2, Status::CANCELED));
    // The active side sees the connection end: its Receive is flushed.
    let r = c.poll();
    assert_eq!((r.request_context, r.status), (9, Status::CANCELED));
    // Later posts complete at once with ND_CANCELED.
    c.send(5, 0, 8).unwrap();
    assert_eq!(c.poll().status, Status::CANCELED);
}

#[test]
fn post_time_errors_leave_the_queue_pair_usable() {
    let c = End::new(4096, 2);
    // Not connected.
    assert_eq!(
        c.send(1, 0, 8).unwrap_err().status(),
        Status::CONNECTION_INVALID
    );
    // Too many SGEs for a Receive (capacity is at least 4, created with 4).
    let sges: Vec<_> = (0..5)
        .map(|i| c.buf.sge(i * 8..i * 8 + 8, c.token()))
        .collect();
    // SAFETY: the memory is not touched.
    let e = unsafe { c.qp.receive(1, &sges) }.unwrap_err();
    assert_eq!(e.status(), Status::DATA_OVERRUN);
    // Receive queue depth 2.
    c.recv(1, 0, 8);
    c.recv(2, 8, 8);
    let sge = c.buf.sge(16..24, c.token());
    // SAFETY: as above.
    let e = unsafe { c.qp.receive(3, &[sge]) }.unwrap_err();
    assert_eq!(e.status(), Status::NO_MORE_ENTRIES);
    // Flush of an unconnected queue pair: both Receives complete ND_CANCELED (R-QP-5).
    c.qp.flush().unwrap();
    for want in [1, 2] {
        let r = c.poll();
        assert_eq!((r.request_context, r.status), (want, Status::CANCELED));
    }
}

#[test]
fn send_queue_full_while_peer_does_not_receive() {
    // No Receives posted: the first message waits in the ring; small Sends complete once in
    // the ring, until the ring is full; then Sends wait in the send queue, which fills.
    let (c, s) = pair(1 << 16, 4, &[]);
    let mut accepted = 0;
    let mut full = false;
    for i in 0..10_000u64 {
        match c.send(i, 0, 8) {
            Ok(()) => accepted += 1,
            Err(e) => {
                assert_eq!(e.status(), Status::NO_MORE_ENTRIES);
                full = true;
                break;
            }
        }
        let mut r = [netdirect::NdResult::EMPTY; 8];
        let _ = c.cq.get_results(&mut r);
    }
    assert!(full, "the send queue filled after {accepted} Sends");
    // The receiver drains everything once it posts Receives.
    for i in 0..4 {
        s.recv(i, i as usize * 8, 8);
    }
    let r = s.poll();
    assert_eq!(r.status, Status::SUCCESS);
}

#[test]
fn disconnect_flushes_the_peer_and_fires_notify_disconnect() {
    let (c, s) = pair(4096, 4, &[(1, 0, 64), (2, 64, 64)]);
    let nd = s.connector.notify_disconnect().unwrap();
    c.recv(7, 0, 64);
    c.connector.disconnect().unwrap().wait().unwrap();
    assert_eq!(c.poll().status, Status::CANCELED, "local Receive flushed");
    assert_eq!(nd.wait_timeout(Some(DEADLINE)), Some(Ok(())));
    for want in [1, 2] {
        let r = s.wait();
        assert_eq!((r.request_context, r.status), (want, Status::CANCELED));
    }
    // Disconnect after the peer disconnected succeeds (R-CONN-3).
    s.connector.disconnect().unwrap().wait().unwrap();
}

#[test]
fn large_messages_round_trip_through_the_data_area() {
    const N: usize = 3 << 20; // several times the data area
    let (c, s) = pair(2 * N, 4, &[(1, N, N)]);
    let m = message(9, N);
    c.fill(0, &m);
    std::thread::scope(|t| {
        t.spawn(|| {
            let r = s.poll();
            assert_eq!((r.status, r.bytes_transferred), (Status::SUCCESS, N as u32));
        });
        c.send(1, 0, N).unwrap();
        assert_eq!(c.poll().status, Status::SUCCESS);
    });
    assert_eq!(s.read(N, N), m);
}

#[test]
fn ipv6_loopback_connects() {
    let s = End::new(4096, 4);
    let l = s.adapter.create_listener().unwrap();
    l.bind("[::1]:0".parse().unwrap()).unwrap();
    l.listen(0).unwrap();
    let addr = l.get_local_address().unwrap();
    assert!(addr.is_ipv6());
    let c = End::new(4096, 4);
    std::thread::scope(|t| {
        t.spawn(|| {
            s.recv(1, 0, 16);
            s.accept_one(&l);
            assert_eq!(s.poll().bytes_transferred, 5);
        });
        c.connect(addr);
        c.fill(0, b"hello");
        c.send(1, 0, 5).unwrap();
        assert_eq!(c.poll().status, Status::SUCCESS);
    });
}

/// One CQ serving more connections than its lock-free front holds (six, one after another, the
/// first ones disconnected): every connection still delivers.
#[test]
fn one_cq_many_connections() {
    let s = End::new(1 << 16, 16);
    let (l, addr) = s.listen();
    let c = End::new(1 << 16, 16);
    let mut live = Vec::new();
    for i in 0..6u64 {
        let sqp = s
            .adapter
            .create_queue_pair(&s.cq, &s.cq, 100 + i, 4, 4, 1, 1, 0)
            .unwrap();
        let sconn = s.adapter.create_connector().unwrap();
        let cqp = c
            .adapter
            .create_queue_pair(&c.cq, &c.cq, 200 + i, 4, 4, 1, 1, 0)
            .unwrap();
        let cconn = c.adapter.create_connector().unwrap();
        let off = (i as usize) * 64;
        let sge = s.buf.sge(off..off + 64, s.token());
        // SAFETY: read only after completion.
        unsafe { sqp.receive(i, &[sge]).unwrap() };
        std::thread::scope(|t| {
            t.spawn(|| {
                l.get_connection_request(&sconn)
                    .unwrap()
                    .wait_timeout(Some(DEADLINE))
                    .unwrap()
                    .unwrap();
                sconn
                    .accept(&sqp, 0, 0, &[])
                    .unwrap()
                    .wait_timeout(Some(DEADLINE))
                    .unwrap()
                    .unwrap();
            });
            cconn
                .connect(&cqp, addr, 0, 0, &[])
                .unwrap()
                .wait_timeout(Some(DEADLINE))
                .unwrap()
                .unwrap();
            cconn.complete_connect().unwrap().wait().unwrap();
        });
        c.fill(0, &message(i, 32));
        let sge = c.buf.sge(0..32, c.token());
        // SAFETY: not written until the Send completes.
        unsafe { cqp.send(i, &[sge], OpFlags::empty()).unwrap() };
        assert_eq!(c.poll().status, Status::SUCCESS);
        let r = s.poll();
        assert_eq!(
            (r.status, r.qp_context, r.bytes_transferred),
            (Status::SUCCESS, 100 + i, 32)
        );
        assert_eq!(s.read(i as usize * 64, 32), message(i, 32));
        if i % 2 == 0 {
            cconn.disconnect().unwrap().wait().unwrap();
        } else {
            live.push((sqp, sconn, cqp, cconn));
        }
    }
}
