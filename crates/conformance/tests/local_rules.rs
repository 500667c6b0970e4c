//! Argument validation and local rules, in one process but over real sockets, for every
//! provider and both loopback families (docs/ND-RULES.md §2.4–§2.11, R-*, D3, D7, D12, D13).

// Requests are lists of byte ranges (one per SGE): `&[0..64]` is a one-SGE request, not a
// mistaken attempt at a Vec of the range's elements.
#![allow(clippy::single_range_in_vec_init)]

use std::net::{IpAddr, SocketAddr};

use netdirect::{MrFlags, NotifyType, OpFlags, Overlapped, Provider, Status};
use netdirect_conformance::check::{
    expect_empty, expect_pending, expect_results, expect_status, finish, next_results, not_run,
    show, wait_ok, wait_status, Check, Context, Expect,
};
use netdirect_conformance::harness;
use netdirect_conformance::side::{
    accept_and_exchange, connect_and_exchange, connect_pair, default_pair, EPHEMERAL,
};
use netdirect_conformance::{ensure, ensure_eq, Needs, Side, SideConfig};

/// Run `f` for every provider and family, each with the hard deadline.
fn each(name: &'static str, f: fn(&Provider, IpAddr) -> Check) {
    harness::each_provider(Needs::TwoSided, name, move |p, fam| f(p, fam.ip()));
}

/// The final status of an asynchronous call, whether it failed at once or completed with an
/// error later (the ND tests accept both forms, G3/G6).
fn outcome(r: netdirect::Result<Overlapped>, what: &str) -> Check<Status> {
    match r {
        Err(e) => Ok(e.status()),
        Ok(ov) => Ok(finish(&ov, what)?
            .err()
            .map_or(Status::SUCCESS, |e| e.status())),
    }
}

fn expect_outcome(r: netdirect::Result<Overlapped>, want: Status, what: &str) -> Check {
    let got = outcome(r, what)?;
    ensure!(
        got == want,
        "{what}: expected {}, got {}",
        show(want),
        show(got)
    );
    Ok(())
}

fn open(p: &Provider, ip: IpAddr) -> Check<netdirect::Adapter> {
    p.open_adapter_for(SocketAddr::new(ip, 0))
        .ctx("open adapter")
}

#[test]
fn completion_queue_depth_limits() {
    each("cq-depth", |p, ip| {
        let a = open(p, ip)?;
        let max = a.query().max_completion_queue_depth;
        expect_status(
            a.create_completion_queue(0, 0, 0),
            Status::INVALID_PARAMETER_3,
            "CQ depth 0",
        )?;
        expect_status(
            a.create_completion_queue(max + 1, 0, 0),
            Status::INVALID_PARAMETER_3,
            "CQ depth MaxCompletionQueueDepth + 1",
        )?;
        // D3 / R-CQ-2: the maximum itself is allowed.
        a.create_completion_queue(max, 0, 0)
            .ctx("CQ depth == MaxCompletionQueueDepth (R-CQ-2)")?;
        Ok(())
    });
}

#[test]
fn queue_pair_limits() {
    each("qp-limits", |p, ip| {
        let a = open(p, ip)?;
        let i = a.query();
        let cq = a.create_completion_queue(2, 0, 0).ctx("create CQ")?;
        let qp = |rd, id, rs, is, inline| a.create_queue_pair(&cq, &cq, 0, rd, id, rs, is, inline);
        let cases = [
            (
                (i.max_receive_queue_depth + 1, 1, 1, 1, 0),
                Status::INVALID_PARAMETER_5,
                "receive depth MaxReceiveQueueDepth + 1 (R-QP-1)",
            ),
            (
                (1, i.max_initiator_queue_depth + 1, 1, 1, 0),
                Status::INVALID_PARAMETER_6,
                "initiator depth MaxInitiatorQueueDepth + 1",
            ),
            (
                (1, 1, i.max_receive_sge + 1, 1, 0),
                Status::INVALID_PARAMETER_7,
                "MaxReceiveSge + 1",
            ),
            (
                (1, 1, 1, i.max_initiator_sge + 1, 0),
                Status::INVALID_PARAMETER_8,
                "MaxInitiatorSge + 1",
            ),
            (
                (1, 1, 1, 1, i.max_inline_data_size + 1),
                Status::INVALID_PARAMETER_9,
                "MaxInlineDataSize + 1",
            ),
        ];
        for ((rd, id, rs, is, inline), want, what) in cases {
            expect_status(qp(rd, id, rs, is, inline), want, what)?;
        }
        // R-QP-2 (ndqpmaxall, as the helper really calls it) and R-CQ-3 (QP deeper than its CQ).
        qp(
            i.max_receive_sge,
            i.max_initiator_queue_depth,
            i.max_receive_sge,
            i.max_initiator_sge,
            0,
        )
        .ctx("all maxima together (R-QP-2)")?;
        qp(64, 64, 1, 1, i.max_inline_data_size)
            .ctx("a QP of depth 64 on a CQ of depth 2 (R-CQ-3)")?;
        // Only depths beyond the limits are errors (IND2Adapter::CreateQueuePair): a queue
        // pair without Receives (one-sided traffic only), or without requests of its own.
        qp(0, 1, 1, 1, 0).ctx("receive depth 0")?;
        qp(1, 0, 1, 1, 0).ctx("initiator depth 0")?;
        Ok(())
    });
}

/// One adapter's queues with another adapter of the same provider: `ND_INVALID_PARAMETER_2`
/// (receive CQ), `_3` (initiator CQ), `_4` (SRQ), checked before the limits (`_5` on), through
/// the API and through the SPI objects. Accepted, such a queue pair's completions would be
/// driven by the wrong adapter's engine: a wait on the CQ could sleep forever.
#[test]
fn queues_of_another_adapter_are_invalid_parameters() {
    each("qp-foreign-queues", |p, ip| {
        use netdirect::spi::QueuePairConfig;
        let (a, b) = (open(p, ip)?, open(p, ip)?);
        let mine = a.create_completion_queue(2, 0, 0).ctx("create CQ")?;
        let theirs = b.create_completion_queue(2, 0, 0).ctx("create CQ")?;
        let deep = a.query().max_receive_queue_depth + 1;
        let qp = |r: &netdirect::CompletionQueue, i: &netdirect::CompletionQueue, depth| {
            a.create_queue_pair(r, i, 0, depth, 1, 1, 1, 0)
        };
        expect_status(
            qp(&theirs, &mine, 1),
            Status::INVALID_PARAMETER_2,
            "receive CQ",
        )?;
        expect_status(
            qp(&mine, &theirs, 1),
            Status::INVALID_PARAMETER_3,
            "initiator CQ",
        )?;
        expect_status(
            qp(&theirs, &theirs, deep),
            Status::INVALID_PARAMETER_2,
            "another adapter's CQ and a depth beyond the limit",
        )?;
        let spi = |r: &netdirect::CompletionQueue, i: &netdirect::CompletionQueue, depth| {
            let mut cfg = QueuePairConfig::single_cq(r.as_spi().clone(), depth);
            cfg.initiator_cq = i.as_spi().clone();
            a.as_spi().create_queue_pair(cfg).map(|_| ())
        };
        expect_status(
            spi(&theirs, &mine, 1),
            Status::INVALID_PARAMETER_2,
            "SPI receive CQ",
        )?;
        expect_status(
            spi(&mine, &theirs, 1),
            Status::INVALID_PARAMETER_3,
            "SPI initiator CQ",
        )?;
        expect_status(
            spi(&theirs, &mine, deep),
            Status::INVALID_PARAMETER_2,
            "SPI: another adapter's CQ and a depth beyond the limit",
        )?;
        if a.query().max_shared_receive_queue_depth > 0 {
            let srq = b
                .create_shared_receive_queue(4, 1, 0, 0, 0)
                .ctx("create SRQ")?;
            expect_status(
                a.create_queue_pair_with_srq(&mine, &mine, &srq, 0, 1, 1, 0),
                Status::INVALID_PARAMETER_4,
                "another adapter's SRQ",
            )?;
        }
        // A connector of one adapter with the other's queue pair: `_1` (the queue pair is
        // Connect's first parameter).
        let foreign = b
            .create_queue_pair(&theirs, &theirs, 0, 1, 1, 1, 1, 0)
            .ctx("create QP")?;
        let dest = SocketAddr::new(ip, 9);
        expect_status(
            a.create_connector()
                .ctx("create connector")?
                .connect(&foreign, dest, 0, 0, &[]),
            Status::INVALID_PARAMETER_1,
            "Connect with another adapter's queue pair",
        )?;
        qp(&mine, &mine, 1).ctx("the adapter's own CQs")?;
        Ok(())
    });
}

#[test]
fn memory_region_register_errors() {
    each("mr-register", |p, ip| {
        let a = open(p, ip)?;
        let mr = a.create_memory_region().ctx("create MR")?;
        let buf = netdirect::Buffer::new(4096).ctx("buffer")?;
        // D7: null first, then zero length.
        // SAFETY: a null pointer and a zero-length range name no memory.
        let null = unsafe { mr.register(std::ptr::null_mut(), 4096, MrFlags::ALLOW_LOCAL_WRITE) };
        expect_outcome(null, Status::INVALID_PARAMETER, "Register a null buffer")?;
        // SAFETY: zero bytes of a live buffer.
        let empty = unsafe { mr.register(buf.as_ptr(), 0, MrFlags::ALLOW_LOCAL_WRITE) };
        expect_outcome(empty, Status::INVALID_BUFFER_SIZE, "Register 0 bytes")?;
        // The failures left the MR usable: Register → Deregister → Register again (ndmrlat).
        for round in 0..2 {
            let ov = mr
                .register_buffer(&buf, MrFlags::ALLOW_LOCAL_WRITE)
                .ctx("Register")?;
            wait_ok(&ov, &format!("Register, round {round}"))?;
            let ov = mr.deregister().ctx("Deregister")?;
            wait_ok(&ov, &format!("Deregister, round {round}"))?;
        }
        Ok(())
    });
}

#[test]
fn listener_bind_and_listen_rules() {
    each("listener", |p, ip| {
        let a = open(p, ip)?;
        let l = a.create_listener().ctx("create listener")?;
        expect_status(
            l.get_local_address(),
            Status::INVALID_DEVICE_STATE,
            "Listener::GetLocalAddress before Listen (§2.11)",
        )?;
        l.bind(SocketAddr::new(ip, 0)).ctx("Listener::bind")?;
        // D13 (NdDualListen): a second Bind.
        expect_status(
            l.bind(SocketAddr::new(ip, 0)),
            Status::ADDRESS_ALREADY_ASSOCIATED,
            "second Bind on a bound listener",
        )?;
        l.listen(0).ctx("Listen")?;
        let addr = l.get_local_address().ctx("Listener::get_local_address")?;
        ensure!(
            EPHEMERAL.contains(&addr.port()),
            "port 0 gave {}, outside 49152-65535 (R-CONN-1)",
            addr.port()
        );
        expect_status(
            l.bind(SocketAddr::new(ip, 0)),
            Status::ADDRESS_ALREADY_ASSOCIATED,
            "Bind on a bound, listening listener (NdDualListen)",
        )?;
        // §2.11: a second Listen must not return ND_SUCCESS.
        ensure!(
            l.listen(0).is_err(),
            "a second Listen on a listening listener succeeded"
        );
        // The address is in use: a second listener cannot have it (§2.11 Bind).
        let l2 = a.create_listener().ctx("create listener")?;
        expect_status(
            l2.bind(addr),
            Status::SHARING_VIOLATION,
            "Bind a second listener to a listening listener's address",
        )?;
        Ok(())
    });
}

#[test]
fn listener_address_in_use_before_listen() {
    each("listener-bound-address", |p, ip| {
        let a = open(p, ip)?;
        // A bound listener's port is unknown before Listen, so use an explicit free port.
        let probe = std::net::TcpListener::bind(SocketAddr::new(ip, 0)).ctx_io("probe port")?;
        let port = probe.local_addr().ctx_io("probe port")?.port();
        drop(probe);
        let addr = SocketAddr::new(ip, port);
        let l2 = a.create_listener().ctx("create listener")?;
        l2.bind(addr).ctx("Listener::bind to an explicit port")?;
        // §2.11 Bind: ND_SHARING_VIOLATION when the address is already in use on this
        // adapter; a bound listener holds its address even before Listen.
        let l3 = a.create_listener().ctx("create listener")?;
        expect_status(
            l3.bind(addr),
            Status::SHARING_VIOLATION,
            "Bind to the address of a bound (not yet listening) listener",
        )?;
        Ok(())
    });
}

#[test]
fn connector_rules() {
    each("connector", |p, ip| {
        let a = open(p, ip)?;
        // R-CONN-1: port 0 gives an ephemeral port, every time. The port shows once Connect
        // starts: a bound connector is neither connected nor connecting, so GetLocalAddress
        // fails (IND2Connector::GetLocalAddress). The listener takes no request, so each
        // Connect stays under way.
        let (_listener, laddr) =
            netdirect_conformance::side::listen(&a, SocketAddr::new(ip, 0), 32)?;
        let cq = a.create_completion_queue(4, 0, 0).ctx("CQ")?;
        let mut connecting = Vec::new();
        for i in 0..16 {
            let qp = a.create_queue_pair(&cq, &cq, i, 1, 1, 1, 1, 0).ctx("QP")?;
            let c = a.create_connector().ctx("create connector")?;
            expect_status(
                c.get_local_address(),
                Status::CONNECTION_INVALID,
                "GetLocalAddress of a fresh connector",
            )?;
            c.bind(SocketAddr::new(ip, 0)).ctx("Connector::bind")?;
            expect_status(
                c.get_local_address(),
                Status::CONNECTION_INVALID,
                "GetLocalAddress of a bound connector",
            )?;
            let ov = c.connect(&qp, laddr, 0, 0, &[]).ctx("Connect")?;
            let l = c
                .get_local_address()
                .ctx("GetLocalAddress while connecting")?;
            ensure_eq!(l.ip(), ip, "connector IP");
            ensure!(
                EPHEMERAL.contains(&l.port()),
                "connector port 0 gave {}, outside 49152-65535 (R-CONN-1)",
                l.port()
            );
            ensure!(
                !connecting.iter().any(|(_, _, _, p)| *p == l.port()),
                "port {} given to two connectors at once",
                l.port()
            );
            connecting.push((qp, c, ov, l.port()));
        }
        drop(connecting);
        let side = Side::on(&a, SideConfig::default())?;
        // D13 (NdInvalidIP): Connect to the unspecified address.
        let unspecified = unspecified_like(ip);
        side.connector
            .bind(SocketAddr::new(ip, 0))
            .ctx("Connector::bind")?;
        expect_outcome(
            side.connector
                .connect(&side.qp, SocketAddr::new(unspecified, 54321), 0, 0, &[]),
            Status::BAD_NETWORK_NAME,
            &format!("Connect to {unspecified}"),
        )?;
        // A destination of the other family than the Bind is refused before anything looks
        // whether it can be reached (documentation addresses, of no host here).
        let other: IpAddr = if ip.is_ipv4() {
            "2001:db8::1".parse().expect("literal")
        } else {
            "192.0.2.1".parse().expect("literal")
        };
        expect_outcome(
            side.connector
                .connect(&side.qp, SocketAddr::new(other, 54321), 0, 0, &[]),
            Status::INVALID_ADDRESS,
            &format!("Connect from {ip} to {other}"),
        )?;
        // Never connected: the connection calls say so.
        expect_status(
            side.connector.complete_connect(),
            Status::CONNECTION_INVALID,
            "CompleteConnect without Connect",
        )?;
        expect_status(
            side.connector.notify_disconnect(),
            Status::CONNECTION_INVALID,
            "NotifyDisconnect, never connected",
        )?;
        expect_status(
            side.connector.disconnect(),
            Status::CONNECTION_INVALID,
            "Disconnect, never connected",
        )?;
        expect_status(
            side.connector.get_read_limits(),
            Status::CONNECTION_INVALID,
            "GetReadLimits, never connected",
        )?;
        Ok(())
    });
}

#[test]
fn unconnected_queue_pair() {
    each("unconnected-qp", |p, ip| {
        let a = open(p, ip)?;
        let max_sge = a.query().max_receive_sge;
        let side = Side::on(
            &a,
            SideConfig {
                depth: 2,
                sge: max_sge,
                ..SideConfig::default()
            },
        )?;
        // §2.9 Send: not connected.
        expect_status(
            side.send(1, &[0..8], OpFlags::empty()),
            Status::CONNECTION_INVALID,
            "Send on an unconnected QP",
        )?;
        expect_status(
            side.send(1, &[], OpFlags::empty()),
            Status::CONNECTION_INVALID,
            "zero-byte Send on an unconnected QP",
        )?;
        // Too many SGEs: more than the QP was created with, even at the adapter maximum.
        let many: Vec<_> = (0..=max_sge as usize).map(|i| i * 8..i * 8 + 8).collect();
        expect_status(
            side.recv(9, &many),
            Status::DATA_OVERRUN,
            "Receive with MaxReceiveSge + 1 SGEs",
        )?;
        // R-QP-5: Receives work before any connection; the queue holds `depth` of them.
        side.recv(1, &[0..64]).ctx("first Receive")?;
        side.recv(2, &[64..128]).ctx("second Receive")?;
        expect_status(
            side.recv(3, &[128..192]),
            Status::NO_MORE_ENTRIES,
            "Receive beyond the receive queue depth",
        )?;
        // ndreceiveflushqp: Flush, then Notify(ANY) completes on the unreported CQEs, and the
        // CQ yields exactly 2 CQEs, both ND_CANCELED.
        side.qp.flush().ctx("Flush")?;
        let n = side.rcq.notify(NotifyType::Any).ctx("Notify")?;
        wait_ok(&n, "Notify(ANY) after Flush")?;
        let r = next_results(&side.rcq, 2, "flushed Receives")?;
        expect_results(
            &r,
            &[
                Expect::recv(Status::CANCELED, 1, side.qp_context, None),
                Expect::recv(Status::CANCELED, 2, side.qp_context, None),
            ],
            "flushed Receives",
        )?;
        expect_empty(&side.rcq, "receive CQ after the 2 flushed CQEs")?;
        expect_empty(&side.scq, "initiator CQ after the Flush")?;
        // The QP is still usable after the synchronous failures and the Flush.
        side.recv(4, &[0..64]).ctx("Receive after Flush")?;
        side.qp.flush().ctx("second Flush")?;
        let r = next_results(&side.rcq, 1, "Receive flushed by the second Flush")?;
        Expect::recv(Status::CANCELED, 4, side.qp_context, None).check(&r[0], "second Flush")?;
        Ok(())
    });
}

#[test]
fn connected_queue_pair_limits() {
    each("connected-qp", |p, ip| {
        let a = open(p, ip)?;
        let max_sge = a.query().max_initiator_sge.min(a.query().max_receive_sge);
        let server = Side::on(&a, SideConfig::default())?;
        // Initiator depth 1, and a Send far larger than what the socket buffers can hold
        // while the peer has no Receive posted (its stream stalls): the Send stays queued.
        const BIG: usize = 64 << 20;
        let client = Side::on(
            &a,
            SideConfig {
                buf_len: BIG,
                depth: 1,
                sge: max_sge,
                ..SideConfig::default()
            },
        )?;
        let _listener = connect_pair(&server, &client, ip)?;
        // §2.10 Connect: the QP is already connected.
        let c2 = a.create_connector().ctx("create connector")?;
        c2.bind(SocketAddr::new(ip, 0)).ctx("Connector::bind")?;
        let dest = server
            .connector
            .get_local_address()
            .ctx("GetLocalAddress")?;
        expect_outcome(
            c2.connect(&client.qp, dest, 0, 0, &[]),
            Status::CONNECTION_ACTIVE,
            "Connect with an already connected QP",
        )?;
        // §2.9 Send: more SGEs than the QP allows, even at the adapter maximum.
        let many: Vec<_> = (0..=max_sge as usize).map(|i| i * 8..i * 8 + 8).collect();
        expect_status(
            client.send(1, &many, OpFlags::empty()),
            Status::DATA_OVERRUN,
            "Send with MaxInitiatorSge + 1 SGEs",
        )?;
        // INLINE is not bound by the queue pair's SGE limit (§2.9), but by the providers' own
        // (64), the same on every provider.
        let inline_many: Vec<_> = (0..65).map(|i| i..i + 1).collect();
        expect_status(
            client.send(1, &inline_many, OpFlags::INLINE),
            Status::DATA_OVERRUN,
            "INLINE Send with 65 SGEs",
        )?;
        expect_status(
            client.send(1, &[0..8], OpFlags::from_bits_retain(0x4000)),
            Status::INVALID_PARAMETER_4,
            "Send with an unknown flag",
        )?;
        client
            .send(2, &[0..BIG], OpFlags::empty())
            .ctx("64 MiB Send")?;
        expect_status(
            client.send(3, &[0..8], OpFlags::empty()),
            Status::NO_MORE_ENTRIES,
            "Send beyond the initiator queue depth",
        )?;
        // Disconnect flushes the queued Send (§2.10 Disconnect).
        let d = client.connector.disconnect().ctx("Disconnect")?;
        wait_ok(&d, "Disconnect")?;
        let r = next_results(&client.scq, 1, "the queued Send")?;
        Expect::send(Status::CANCELED, 2, client.qp_context).check(&r[0], "the queued Send")?;
        expect_empty(&client.scq, "initiator CQ")?;
        Ok(())
    });
}

/// `io::Result` context, for the few std socket calls.
trait IoContext<T> {
    fn ctx_io(self, what: &str) -> Check<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx_io(self, what: &str) -> Check<T> {
        self.map_err(|e| netdirect_conformance::Failure(format!("{what}: {e}")))
    }
}

/// A region's Deregister waits for every queued request that uses the region, and for nothing
/// else: with two Receives posted in it, it is still pending after the first completes, and
/// done once the second has (whatever the queue pair keeps to make its next posts cheap, it
/// holds no part of the region with no request queued).
#[test]
fn deregister_waits_for_queued_receives_and_no_longer() {
    each("deregister-queued", |p, ip| {
        let (_a, server, client, _listener) = default_pair(p, ip)?;
        server.recv(1, &[0..64]).ctx("Receive 1")?;
        server.recv(2, &[64..128]).ctx("Receive 2")?;
        let dereg = server.mr.deregister().ctx("Deregister")?;
        expect_pending(&dereg, "Deregister with two Receives queued in the region")?;
        for k in 1..=2u64 {
            client
                .send(k, &[0..8], OpFlags::empty())
                .ctx(&format!("Send {k}"))?;
            let r = next_results(&server.rcq, 1, &format!("Receive {k}"))?;
            Expect::recv(Status::SUCCESS, k, server.qp_context, Some(8))
                .check(&r[0], &format!("Receive {k}"))?;
            next_results(&client.scq, 1, &format!("Send {k}"))?;
            if k == 1 {
                expect_pending(&dereg, "Deregister while Receive 2 is queued in the region")?;
            }
        }
        wait_ok(&dereg, "Deregister once no request uses the region")
    });
}

/// A Receive whose segment fails its check completes ND_ACCESS_VIOLATION and ends the
/// connection (R-QP-6); the Receive posted before it is flushed first, so the completions keep
/// the order the Receives were posted in.
#[test]
fn a_refused_receive_completes_after_the_ones_before_it() {
    each("refused-receive-order", |p, ip| {
        let (_a, server, _client, _listener) = default_pair(p, ip)?;
        refused_after_flushed(&server)
    });
}

/// Receive 1, then Receive 2 under a wrong token, on `server`: they complete ND_CANCELED
/// and ND_ACCESS_VIOLATION, in that order.
fn refused_after_flushed(server: &Side) -> Check {
    server.recv(1, &[0..64]).ctx("Receive 1")?;
    let mut bad = server.sges(&[64..128]);
    bad[0].memory_region_token ^= 0x5A5A_0000;
    // SAFETY: the segment names memory of `buf` (under a wrong token): nothing is written.
    unsafe { server.qp.receive(2, &bad) }.ctx("Receive 2")?;
    let r = next_results(&server.rcq, 2, "both Receives")?;
    Expect::recv(Status::CANCELED, 1, server.qp_context, None).check(&r[0], "Receive 1")?;
    Expect::recv(Status::ACCESS_VIOLATION, 2, server.qp_context, None).check(&r[1], "Receive 2")
}

/// The same on a queue pair that never connected (Receives may be posted before connecting,
/// R-QP-5): the Receive before the refused one is flushed first, and as there is no connection
/// for the error to end, the queue pair stays ready to connect (IND2Connector::Connect lists
/// ND_CONNECTION_ACTIVE only for a queue pair already connected): it connects and carries a
/// message.
#[test]
fn a_refused_receive_before_connecting_leaves_the_queue_pair_connectable() {
    each("refused-receive-unconnected", |p, ip| {
        let a = open(p, ip)?;
        let server = Side::on(&a, SideConfig::default())?;
        let client = Side::on(&a, SideConfig::default())?;
        refused_after_flushed(&server)?;
        connect_and_exchange(&server, &client, ip).map(drop)
    });
}

/// IND2Connector::Connect: "To abandon a connection attempt, you can release the connector":
/// its Connect completes ND_CANCELED, not never (here against a listener that never takes the
/// request), and the queue pair may connect again with another connector.
#[test]
fn releasing_the_connector_abandons_its_connect() {
    each("connector-release-mid-connect", |p, ip| {
        let a = open(p, ip)?;
        let (listener, laddr) = netdirect_conformance::side::listen(&a, SocketAddr::new(ip, 0), 4)?;
        let side = Side::on(&a, SideConfig::default())?;
        let c = a.create_connector().ctx("create connector")?;
        c.bind(SocketAddr::new(ip, 0)).ctx("Connector::bind")?;
        let ov = c
            .connect(&side.qp, laddr, 0, 0, &[])
            .ctx("Connector::connect")?;
        ensure!(!ov.is_complete(), "nobody accepts: the Connect is pending");
        drop(c);
        wait_status(&ov, Status::CANCELED, "the Connect of a released connector")?;
        drop(listener);
        Ok(())
    });
}

/// The provider objects behind the API (`as_spi()`) check the adapter's limits too: a depth
/// no adapter offers is ND_INVALID_PARAMETER_n there as well, not a queue sized from it.
#[test]
fn provider_objects_check_the_limits_themselves() {
    each("spi-limits", |p, ip| {
        use netdirect::spi::QueuePairConfig;
        let a = open(p, ip)?;
        let spi = a.as_spi();
        expect_status(
            spi.create_completion_queue(0, 0, 0).map(|_| ()),
            Status::INVALID_PARAMETER_3,
            "SPI CreateCompletionQueue of depth 0",
        )?;
        expect_status(
            spi.create_completion_queue(u32::MAX, 0, 0).map(|_| ()),
            Status::INVALID_PARAMETER_3,
            "SPI CreateCompletionQueue beyond the maximum",
        )?;
        let cq = a.create_completion_queue(8, 0, 0).ctx("create CQ")?;
        expect_status(
            spi.create_queue_pair(QueuePairConfig::single_cq(cq.as_spi().clone(), u32::MAX))
                .map(|_| ()),
            Status::INVALID_PARAMETER_5,
            "SPI CreateQueuePair beyond the maximum depth",
        )?;
        // Resize and Modify of the SPI objects: a depth of 0 would make the next completion
        // an overrun, which leaves the CQ unusable.
        let max = a.query().max_completion_queue_depth;
        for depth in [Some(0), max.checked_add(1)].into_iter().flatten() {
            expect_status(
                cq.as_spi().resize(depth),
                Status::INVALID_PARAMETER,
                &format!("SPI Resize to {depth}"),
            )?;
        }
        cq.as_spi().resize(max).ctx("SPI Resize to the maximum")?;
        let max_srq = a.query().max_shared_receive_queue_depth;
        if max_srq > 0 {
            expect_status(
                spi.create_shared_receive_queue(u32::MAX, 1, 0, 0, 0)
                    .map(|_| ()),
                Status::INVALID_PARAMETER_3,
                "SPI CreateSharedReceiveQueue beyond the maximum",
            )?;
            let srq = a
                .create_shared_receive_queue(4, 1, 0, 0, 0)
                .ctx("create SRQ")?;
            expect_status(
                srq.as_spi().modify(max_srq.saturating_add(1), 0),
                Status::INVALID_PARAMETER,
                "SPI Modify beyond the maximum",
            )?;
        }
        Ok(())
    });
}

/// A Receive for more than `MaxTransferLength` bytes: ND_BUFFER_OVERFLOW ("more data than the
/// hardware supports", IND2QueuePair::Receive, IND2SharedReceiveQueue::Receive), checked
/// before anything else about its SGEs; nothing is queued.
#[test]
fn a_receive_beyond_the_transfer_limit_is_refused() {
    each("receive-beyond-max-transfer", |p, ip| {
        let a = open(p, ip)?;
        let side = Side::on(&a, SideConfig::default())?;
        let max = u64::from(a.query().max_transfer_length);
        let half = u32::try_from(max / 2 + 1).unwrap_or(u32::MAX);
        let sge = netdirect::Sge::new(side.buf.as_ptr(), half, side.mr.get_local_token());
        // SAFETY: refused before the provider keeps or touches anything.
        let r = unsafe { side.qp.receive(1, &[sge, sge]) };
        expect_status(
            r,
            Status::BUFFER_OVERFLOW,
            "QP Receive beyond MaxTransferLength",
        )?;
        if a.query().max_shared_receive_queue_depth > 0 {
            let srq = a
                .create_shared_receive_queue(4, 4, 0, 0, 0)
                .ctx("create SRQ")?;
            // SAFETY: as above.
            let r = unsafe { srq.receive(1, &[sge, sge]) };
            expect_status(
                r,
                Status::BUFFER_OVERFLOW,
                "SRQ Receive beyond MaxTransferLength",
            )?;
        }
        expect_empty(&side.rcq, "nothing completes for a refused Receive")?;
        Ok(())
    });
}

/// A port nobody listens on (a listener bound and released).
fn dead_port(a: &netdirect::Adapter, ip: IpAddr) -> Check<SocketAddr> {
    let (l, addr) = netdirect_conformance::side::listen(a, SocketAddr::new(ip, 0), 1)?;
    drop(l);
    Ok(addr)
}

/// Bind `c` to a port known to be free here (one a released listener held, so no connection
/// of the past lingers on it); another port if something else on the host has that one in the
/// connectors' space (`ND_SHARING_VIOLATION`), a few times.
fn bind_free_port(
    a: &netdirect::Adapter,
    c: &netdirect::Connector,
    ip: IpAddr,
) -> Check<SocketAddr> {
    let mut tries = 0;
    loop {
        let at = SocketAddr::new(ip, dead_port(a, ip)?.port());
        match c.bind(at) {
            Ok(()) => return Ok(at),
            Err(e) if e.status() == Status::SHARING_VIOLATION && tries < 8 => tries += 1,
            Err(e) => return Err(e).ctx("Connector::bind"),
        }
    }
}

/// A refused Connect leaves the connector usable (IND2Connector::Connect: "The connection
/// attempt may be retried"): never bound, it has no local address afterwards
/// (ND_CONNECTION_INVALID, "neither connected nor connecting"); bound, it may Connect again,
/// and stays bound ("a failed connect leaves the QP unchanged", and ndmpic binds once, then
/// retries Connect on refusal): the retry goes out from the port it bound.
#[test]
fn a_refused_connect_leaves_the_connector_as_it_was() {
    each("connector-after-refusal", |p, ip| {
        let a = open(p, ip)?;
        let dead = dead_port(&a, ip)?;
        let side = Side::on(&a, SideConfig::default())?;
        let c = a.create_connector().ctx("create connector")?;
        let ov = c.connect(&side.qp, dead, 0, 0, &[]).ctx("Connect")?;
        wait_status(&ov, Status::CONNECTION_REFUSED, "Connect to nobody")?;
        expect_status(
            c.get_local_address(),
            Status::CONNECTION_INVALID,
            "GetLocalAddress of a never-bound connector after a refusal",
        )?;
        // Bound first, to a port known here: a retry on the same connector is refused again,
        // not ND_CONNECTION_ACTIVE.
        let src = bind_free_port(&a, &c, ip)?;
        let ov = c.connect(&side.qp, dead, 0, 0, &[]).ctx("Connect")?;
        wait_status(&ov, Status::CONNECTION_REFUSED, "bound Connect to nobody")?;
        let ov = c.connect(&side.qp, dead, 0, 0, &[]).ctx("Connect again")?;
        wait_status(&ov, Status::CONNECTION_REFUSED, "the retry")?;
        // Still bound after two refusals: a Connect to a listener goes out from `src`.
        let (_l, live) = netdirect_conformance::side::listen(&a, SocketAddr::new(ip, 0), 1)?;
        let _ov = c
            .connect(&side.qp, live, 0, 0, &[])
            .ctx("Connect to a listener")?;
        ensure_eq!(
            c.get_local_address()
                .ctx("GetLocalAddress while connecting")?,
            src,
            "the address a Connect after two refusals goes out from (the connector was bound)"
        );
        Ok(())
    });
}

/// A second Bind of a connector replaces the first (IND2Connector::Bind), the same way on
/// every provider: to the same port on the wildcard address (which overlaps the first) it
/// succeeds, and the Connect then goes out from that port; to a port another connector holds
/// it fails `ND_SHARING_VIOLATION` and leaves the connector bound as before.
#[test]
fn a_second_bind_replaces_the_first() {
    each("connector-rebind", |p, ip| {
        let a = open(p, ip)?;
        let side = Side::on(&a, SideConfig::default())?;
        let c = a.create_connector().ctx("create connector")?;
        let other = a.create_connector().ctx("create connector")?;
        let first = bind_free_port(&a, &c, ip)?;
        let taken = bind_free_port(&a, &other, ip)?;
        expect_status(
            c.bind(taken),
            Status::SHARING_VIOLATION,
            "a Bind to another connector's port",
        )?;
        let (_l, live) = netdirect_conformance::side::listen(&a, SocketAddr::new(ip, 0), 4)?;
        let _ov = c
            .connect(&side.qp, live, 0, 0, &[])
            .ctx("Connect after the refused Bind")?;
        ensure_eq!(
            c.get_local_address().ctx("GetLocalAddress")?,
            first,
            "the address a Connect goes out from after a refused second Bind"
        );
        // The overlapping Bind, on a connector bound as `c` was.
        let d = a.create_connector().ctx("create connector")?;
        let side2 = Side::on(&a, SideConfig::default())?;
        let port = bind_free_port(&a, &d, ip)?.port();
        let wildcard = SocketAddr::new(unspecified_like(ip), port);
        d.bind(wildcard)
            .ctx("a second Bind to the same port on the wildcard address")?;
        let _ov2 = d
            .connect(&side2.qp, live, 0, 0, &[])
            .ctx("Connect after the second Bind")?;
        ensure_eq!(
            d.get_local_address().ctx("GetLocalAddress")?,
            SocketAddr::new(ip, port),
            "the address a Connect goes out from after the second Bind"
        );
        Ok(())
    });
}

/// A Connect to another local address at a listener's port (IPv4: 127.0.0.2, still this
/// host): nobody listens there, so it is refused as "no listener", with no private data, and
/// the connector may try again.
#[test]
fn a_connect_to_another_local_address_is_refused_and_retryable() {
    each("connect-other-local-address", |p, ip| {
        if ip.is_ipv6() {
            return not_run("::1 is the only IPv6 loopback address");
        }
        let a = open(p, ip)?;
        let (_l, laddr) = netdirect_conformance::side::listen(&a, SocketAddr::new(ip, 0), 4)?;
        let other = SocketAddr::new(std::net::Ipv4Addr::new(127, 0, 0, 2).into(), laddr.port());
        let side = Side::on(&a, SideConfig::default())?;
        let c = a.create_connector().ctx("create connector")?;
        for what in ["Connect", "the retry"] {
            let ov = c.connect(&side.qp, other, 0, 0, &[]).ctx(what)?;
            wait_status(&ov, Status::CONNECTION_REFUSED, what)?;
        }
        Ok(())
    });
}

/// An ND port belongs to an address, as a TCP port does, on every provider (IND2Listener::Bind:
/// ND_SHARING_VIOLATION "when the address is already in use"): a listener on one address of
/// the host leaves the same port free on another (ndmpic runs its processes on one host by
/// giving each its own IP, R-CONN-2), the wildcard address clashes with the port on every
/// address, and a Connect reaches the listener bound to its destination, or else its port's
/// wildcard listener.
#[test]
fn a_port_belongs_to_an_address() {
    each("port-per-address", |p, ip| {
        let a = open(p, ip)?;
        if ip.is_ipv6() {
            // ::1 is the only IPv6 loopback address: the wildcard clash, and the families'
            // ports kept apart (IPV6_V6ONLY: an IPv4 listener may have the same number).
            // The IPv4 port of the same number may be held by anything else on the host (a
            // connection of another test, one in TIME_WAIT): a refusal is retried on a fresh
            // port, and only one that repeats on every port fails.
            let mut refused = Vec::new();
            for _ in 0..8 {
                let (_l, addr) =
                    netdirect_conformance::side::listen(&a, SocketAddr::new(ip, 0), 4)?;
                let wild = a.create_listener().ctx("create listener")?;
                let any6 = SocketAddr::new(std::net::Ipv6Addr::UNSPECIFIED.into(), addr.port());
                expect_status(
                    wild.bind(any6),
                    Status::SHARING_VIOLATION,
                    "Bind [::] at the port [::1]'s listener has",
                )?;
                let v4 = SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), addr.port());
                match netdirect_conformance::side::listen(&a, v4, 4) {
                    Ok(_) => return Ok(()),
                    Err(e) => refused.push(e.to_string()),
                }
            }
            return Err(netdirect_conformance::Failure(format!(
                "IPv4 listeners at the ports of [::1]'s: {}",
                refused.join("; ")
            )));
        }
        let at = |last: u8, port: u16| {
            SocketAddr::new(std::net::Ipv4Addr::new(127, 0, 0, last).into(), port)
        };
        let any = |port: u16| SocketAddr::new(std::net::Ipv4Addr::UNSPECIFIED.into(), port);
        let (one, addr) = netdirect_conformance::side::listen(&a, at(1, 0), 4)?;
        let port = addr.port();
        // The port 127.0.0.1's listener has is free on 127.0.0.2.
        let (two, _) = netdirect_conformance::side::listen(&a, at(2, port), 4)?;
        let wild = a.create_listener().ctx("create listener")?;
        expect_status(
            wild.bind(any(port)),
            Status::SHARING_VIOLATION,
            "Bind the wildcard address at a port listeners on two addresses have",
        )?;
        // Each Connect reaches its own address's listener, and only that one.
        let (s1, s2) = (
            Side::on(&a, SideConfig::default())?,
            Side::on(&a, SideConfig::default())?,
        );
        let gcr1 = one
            .get_connection_request(&s1.connector)
            .ctx("GetConnectionRequest")?;
        let gcr2 = two
            .get_connection_request(&s2.connector)
            .ctx("GetConnectionRequest")?;
        let client = Side::on(&a, SideConfig::default())?;
        let _cov = client.connect(any(0), at(2, port), 0, 0, &[])?;
        wait_ok(&gcr2, "GetConnectionRequest on 127.0.0.2's listener")?;
        expect_pending(&gcr1, "GetConnectionRequest on 127.0.0.1's listener")?;
        ensure_eq!(
            s2.connector
                .get_local_address()
                .ctx("the request's local address")?,
            at(2, port),
            "the request's local address"
        );
        // A wildcard listener: its port is taken on every address, and serves each of them.
        let (wild, waddr) = netdirect_conformance::side::listen(&a, any(0), 4)?;
        let taken = a.create_listener().ctx("create listener")?;
        expect_status(
            taken.bind(at(3, waddr.port())),
            Status::SHARING_VIOLATION,
            "Bind 127.0.0.3 at a wildcard listener's port",
        )?;
        let s3 = Side::on(&a, SideConfig::default())?;
        let gcr3 = wild
            .get_connection_request(&s3.connector)
            .ctx("GetConnectionRequest")?;
        let client3 = Side::on(&a, SideConfig::default())?;
        let _cov3 = client3.connect(any(0), at(3, waddr.port()), 0, 0, &[])?;
        wait_ok(&gcr3, "GetConnectionRequest on the wildcard listener")?;
        ensure_eq!(
            s3.connector
                .get_local_address()
                .ctx("the request's local address")?,
            at(3, waddr.port()),
            "the wildcard listener's request's local address"
        );
        Ok(())
    });
}

/// A connection request on its way: `client` Connects (`cov` pending) to `listener` at
/// `laddr`, whose GetConnectionRequest gave it to `server`'s connector, not answered yet.
struct Requested {
    listener: netdirect::Listener,
    laddr: SocketAddr,
    server: Side,
    client: Side,
    cov: Overlapped,
}

/// [`Requested`] with both sides on one adapter of `p`.
fn requested(p: &Provider, ip: IpAddr) -> Check<Requested> {
    let a = open(p, ip)?;
    requested_between(&a, &a, ip)
}

/// [`Requested`] from a side on `client_adapter` to one on `server_adapter`.
fn requested_between(
    server_adapter: &netdirect::Adapter,
    client_adapter: &netdirect::Adapter,
    ip: IpAddr,
) -> Check<Requested> {
    let (listener, laddr) =
        netdirect_conformance::side::listen(server_adapter, SocketAddr::new(ip, 0), 4)?;
    let server = Side::on(server_adapter, SideConfig::default())?;
    let client = Side::on(client_adapter, SideConfig::default())?;
    let gcr = listener
        .get_connection_request(&server.connector)
        .ctx("GetConnectionRequest")?;
    let cov = client.connect(SocketAddr::new(ip, 0), laddr, 0, 0, &[])?;
    wait_ok(&gcr, "GetConnectionRequest")?;
    Ok(Requested {
        listener,
        laddr,
        server,
        client,
        cov,
    })
}

/// A connector whose GetConnectionRequest waits is still the caller's: used for a Connect
/// meanwhile, that Connect goes on, and the GetConnectionRequest fails
/// `ND_INVALID_DEVICE_STATE` (what it returns when made on a connector that is not fresh)
/// when a request arrives, which goes to the next GetConnectionRequest instead of being
/// lost. Handing the request over anyway would drop the pending Connect, which then never
/// completed.
#[test]
fn a_connector_used_while_its_get_connection_request_waits_keeps_its_connect() {
    each("gcr-then-connect", |p, ip| {
        let a = open(p, ip)?;
        let (first, faddr) = netdirect_conformance::side::listen(&a, SocketAddr::new(ip, 0), 4)?;
        let both = Side::on(&a, SideConfig::default())?;
        let gcr = first
            .get_connection_request(&both.connector)
            .ctx("GetConnectionRequest")?;
        // The same connector Connects to a second listener, where `server` takes it.
        let (second, saddr) = netdirect_conformance::side::listen(&a, SocketAddr::new(ip, 0), 4)?;
        let server = Side::on(&a, SideConfig::default())?;
        let sgcr = second
            .get_connection_request(&server.connector)
            .ctx("GetConnectionRequest")?;
        let cov = both.connect(SocketAddr::new(ip, 0), saddr, 0, 0, &[])?;
        wait_ok(&sgcr, "GetConnectionRequest for the Connect")?;
        // A request for the first listener arrives while `both` is connecting.
        let client = Side::on(&a, SideConfig::default())?;
        let ccov = client.connect(SocketAddr::new(ip, 0), faddr, 0, 0, &[])?;
        wait_status(
            &gcr,
            Status::INVALID_DEVICE_STATE,
            "the GetConnectionRequest of a connector that Connects",
        )?;
        accept_and_exchange(&server, &both, &cov)?;
        // The request was kept for the next GetConnectionRequest.
        let fresh = Side::on(&a, SideConfig::default())?;
        let next = first
            .get_connection_request(&fresh.connector)
            .ctx("GetConnectionRequest")?;
        wait_ok(&next, "the next GetConnectionRequest")?;
        accept_and_exchange(&fresh, &client, &ccov)
    });
}

/// Accept or Reject after the connecting side gave up, by cancelling its pending Connect or by
/// releasing its connector (either closes its end): ND_CONNECTION_ABORTED, "the connecting peer
/// abandoned the connection establishment" (IND2Connector::Accept and Reject), whichever
/// provider. Leaving after the Accept reached it is the other case, ND_CONNECTION_REFUSED (D9:
/// the `active-reject` scenario, and shm's `sigkill_active_side_before_complete_connect`).
#[test]
fn answering_a_request_whose_connecting_side_gave_up_is_aborted() {
    each("answer-after-abandon", |p, ip| {
        for (release, reject) in [(false, false), (true, false), (false, true), (true, true)] {
            let how = if release { "released" } else { "cancelled" };
            let Requested {
                listener: _listener,
                laddr,
                server,
                client,
                cov,
            } = requested(p, ip)?;
            let caddr = client
                .connector
                .get_local_address()
                .ctx("the connecting side's address")?;
            let Side { connector, .. } = client;
            if release {
                drop(connector);
            } else {
                connector
                    .cancel_overlapped_requests()
                    .ctx("CancelOverlappedRequests")?;
            }
            wait_status(&cov, Status::CANCELED, &format!("the Connect, {how}"))?;
            if p.name() == "tcp" {
                end_of_stream_reached(laddr, caddr)?;
            }
            if reject {
                expect_status(
                    server.connector.reject(&[]),
                    Status::CONNECTION_ABORTED,
                    &format!("Reject of a request whose connector was {how}"),
                )?;
            } else {
                let aov = server
                    .connector
                    .accept(&server.qp, 0, 0, &[])
                    .ctx("Accept")?;
                wait_status(
                    &aov,
                    Status::CONNECTION_ABORTED,
                    &format!("Accept of a request whose connector was {how}"),
                )?;
            }
        }
        Ok(())
    });
}

/// CancelOverlappedRequests on a connector whose Accept waits for the peer's CompleteConnect
/// cancels that Accept and a NotifyDisconnect posted behind it, both ND_CANCELED before the call
/// returns (R-CANCEL-1): the connection the cancelled Accept abandons must not complete the
/// NotifyDisconnect successfully first.
#[test]
fn cancelling_a_pending_accept_cancels_notify_disconnect_too() {
    each("cancel-pending-accept", |p, ip| {
        // Every part kept: the client must live to take the Accept.
        let Requested {
            listener: _listener,
            server,
            client: _client,
            cov,
            ..
        } = requested(p, ip)?;
        let aov = server
            .connector
            .accept(&server.qp, 0, 0, &[])
            .ctx("Accept")?;
        // The client has the Accept and never calls CompleteConnect.
        wait_ok(&cov, "Connect")?;
        expect_pending(&aov, "Accept before CompleteConnect")?;
        let nd = server
            .connector
            .notify_disconnect()
            .ctx("NotifyDisconnect")?;
        expect_pending(&nd, "NotifyDisconnect")?;
        server
            .connector
            .cancel_overlapped_requests()
            .ctx("CancelOverlappedRequests")?;
        ensure!(
            aov.is_complete() && nd.is_complete(),
            "both complete before CancelOverlappedRequests returns"
        );
        wait_status(&aov, Status::CANCELED, "the cancelled Accept")?;
        wait_status(&nd, Status::CANCELED, "the NotifyDisconnect behind it")
    });
}

/// Over TCP the connecting side's close reaches the accepted socket through the kernel's
/// loopback, perhaps after `close` returned: wait (bounded) until the connection from `client`
/// to `server` is no longer ESTABLISHED (`/proc/net/tcp`, state 01), so that the Accept surely
/// comes after the peer's FIN.
fn end_of_stream_reached(server: SocketAddr, client: SocketAddr) -> Check {
    let table = if server.is_ipv6() {
        "/proc/net/tcp6"
    } else {
        "/proc/net/tcp"
    };
    // Columns: sl, local address, remote address, state; an address ends in ":PORT" (hex).
    let ports = (
        format!(":{:04X}", server.port()),
        format!(":{:04X}", client.port()),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(table).ctx(table)?;
        let established = text.lines().skip(1).any(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            f.len() > 3 && f[1].ends_with(&ports.0) && f[2].ends_with(&ports.1) && f[3] == "01"
        });
        if !established {
            return Ok(());
        }
        ensure!(
            std::time::Instant::now() < deadline,
            "the accepted socket {server} <- {client} still ESTABLISHED after 10 s"
        );
        std::thread::yield_now();
    }
}

/// A connector's port is free again once its connection ended and the connector and queue
/// pair are released, though the completion queue they used lives on (a server keeps its CQ
/// across connections; ndmpic-style clients reuse a fixed local port, R-CONN-2): six
/// connections in a row from the same local port, over the same two CQs.
#[test]
fn a_connectors_port_is_free_again_while_its_cq_lives_on() {
    each("connector-port-reuse", |p, ip| {
        if p.name() == "tcp" {
            // Over TCP the side that closes first keeps its port in TIME_WAIT for a minute
            // (RFC 793), whatever the provider does: an immediate re-Bind is not ND's to give.
            return not_run("TCP keeps a closed connection's port in TIME_WAIT");
        }
        let a = open(p, ip)?;
        let ccq = a.create_completion_queue(16, 0, 0).ctx("client CQ")?;
        let scq = a.create_completion_queue(16, 0, 0).ctx("server CQ")?;
        let (l, laddr) = netdirect_conformance::side::listen(&a, SocketAddr::new(ip, 0), 4)?;
        let mut port = 0;
        for i in 0..6 {
            let cqp = a
                .create_queue_pair(&ccq, &ccq, 1, 4, 4, 1, 1, 0)
                .ctx("client QP")?;
            let sqp = a
                .create_queue_pair(&scq, &scq, 2, 4, 4, 1, 1, 0)
                .ctx("server QP")?;
            let c = a.create_connector().ctx("client connector")?;
            let s = a.create_connector().ctx("server connector")?;
            c.bind(SocketAddr::new(ip, port))
                .ctx(&format!("connection {i}: Bind to port {port}"))?;
            let gcr = l.get_connection_request(&s).ctx("GetConnectionRequest")?;
            let cov = c.connect(&cqp, laddr, 0, 0, &[]).ctx("Connect")?;
            port = c.get_local_address().ctx("GetLocalAddress")?.port();
            wait_ok(&gcr, "GetConnectionRequest")?;
            let aov = s.accept(&sqp, 0, 0, &[]).ctx("Accept")?;
            wait_ok(&cov, "Connect")?;
            wait_ok(
                &c.complete_connect().ctx("CompleteConnect")?,
                "CompleteConnect",
            )?;
            wait_ok(&aov, "Accept")?;
            wait_ok(&c.disconnect().ctx("Disconnect")?, "client Disconnect")?;
            wait_ok(&s.disconnect().ctx("Disconnect")?, "server Disconnect")?;
            // Poll both CQs once, as a server's loop would.
            let mut r = [netdirect::NdResult::EMPTY; 4];
            let _ = ccq.get_results(&mut r);
            let _ = scq.get_results(&mut r);
        }
        Ok(())
    });
}

/// Wait until thread `tid` of this process sleeps in a system call (its state in
/// `/proc/self/task/<tid>/stat` is `S`): a thread about to block in the adapter's wait is there
/// once the kernel has put it to sleep.
fn until_asleep(tid: i32) -> Check {
    let path = format!("/proc/self/task/{tid}/stat");
    let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let stat = std::fs::read_to_string(&path).unwrap_or_default();
        // "tid (comm) S ...": the state follows the last ')'.
        let state = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().chars().next());
        if state == Some(Some('S')) {
            return Ok(());
        }
        ensure!(std::time::Instant::now() < end, "thread {tid} never slept");
        std::thread::yield_now();
    }
}

/// Another thread that waits for `ov` (which never completes on its own), once it sleeps.
fn sleep_on(ov: Overlapped) -> Check<std::thread::JoinHandle<netdirect::Result<()>>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let sleeper = std::thread::spawn(move || {
        let _ = tx.send(rustix::thread::gettid().as_raw_nonzero().get());
        ov.wait()
    });
    let tid = rx
        .recv()
        .map_err(|_| netdirect_conformance::check::Failure("no tid".into()))?;
    until_asleep(tid)?;
    Ok(sleeper)
}

/// The [`sleep_on`] thread's request ended ND_CANCELED.
fn canceled(sleeper: std::thread::JoinHandle<netdirect::Result<()>>) -> Check {
    let woke = sleeper.join();
    ensure!(
        matches!(woke, Ok(Err(e)) if e.status() == Status::CANCELED),
        "the sleeping thread's request: {woke:?}"
    );
    Ok(())
}

/// One thread of a server's adapter blocks on GetConnectionRequest (it leads the adapter's
/// wait, asleep on the connections it knows, with no time limit); another accepts a request
/// and waits for the Accept, also with no time limit. The connection the Accept attaches is
/// watched at once, so the peer's RTR completes the Accept; were it not, both threads would
/// sleep until the scenario's deadline fails it as hung.
#[test]
fn a_connection_attached_while_another_thread_sleeps_is_watched() {
    each("accept-while-another-leads", |p, ip| {
        let server = open(p, ip)?;
        let client = open(p, ip)?;
        let Requested {
            listener: l,
            server: s,
            client: c,
            cov,
            ..
        } = requested_between(&server, &client, ip)?;
        // The other thread: asleep in the server adapter's wait, on a request that never comes.
        let idle = server.create_connector().ctx("connector")?;
        let never = l
            .get_connection_request(&idle)
            .ctx("second GetConnectionRequest")?;
        let sleeper = sleep_on(never)?;
        // Accept (its progress finds no RTR yet), then the client's RTR, then wait.
        let aov = s.connector.accept(&s.qp, 0, 0, &[]).ctx("Accept")?;
        wait_ok(&cov, "Connect")?;
        wait_ok(
            &c.connector.complete_connect().ctx("CompleteConnect")?,
            "CompleteConnect",
        )?;
        aov.wait().ctx("Accept")?;
        l.cancel_overlapped_requests().ctx("cancel")?;
        canceled(sleeper)
    });
}

/// One thread of a server's adapter sleeps in the adapter's wait (a Notify on a queue that
/// never completes) before the adapter has any listener: it leads the wait, asleep on what
/// the adapter had then. This thread then listens and blocks on GetConnectionRequest, with no
/// time limit, as a follower, and only then does a client connect. The new listener must
/// reach the leader's sleep, or the connection wakes nobody and both threads sleep until the
/// scenario's deadline fails it as hung.
#[test]
fn a_listener_created_while_another_thread_sleeps_is_watched() {
    each("listen-while-another-leads", |p, ip| {
        let server = open(p, ip)?;
        // Everything but the listener exists before the other thread sleeps (a registration
        // completing would wake it, which would hide the fault).
        let s = Side::on(&server, SideConfig::default())?;
        let idle_cq = server.create_completion_queue(2, 0, 0).ctx("create CQ")?;
        let never = idle_cq.notify(NotifyType::Any).ctx("Notify")?;
        let sleeper = sleep_on(never)?;
        let (l, laddr) = netdirect_conformance::side::listen(&server, SocketAddr::new(ip, 0), 4)?;
        let gcr = l
            .get_connection_request(&s.connector)
            .ctx("GetConnectionRequest")?;
        // The client connects once this thread sleeps in its wait for the request.
        let me = rustix::thread::gettid().as_raw_nonzero().get();
        let provider = p.clone();
        let client = std::thread::spawn(move || -> Check {
            until_asleep(me)?;
            let adapter = open(&provider, ip)?;
            let c = Side::on(&adapter, SideConfig::default())?;
            let cov = c.connect(SocketAddr::new(ip, 0), laddr, 0, 0, &[])?;
            wait_ok(&cov, "Connect")?;
            wait_ok(
                &c.connector.complete_connect().ctx("CompleteConnect")?,
                "CompleteConnect",
            )
        });
        gcr.wait().ctx("GetConnectionRequest")?;
        let aov = s.connector.accept(&s.qp, 0, 0, &[]).ctx("Accept")?;
        wait_ok(&aov, "Accept")?;
        client
            .join()
            .map_err(|_| netdirect_conformance::check::Failure("client panicked".into()))??;
        idle_cq.cancel_overlapped_requests().ctx("cancel")?;
        canceled(sleeper)
    });
}

/// A connection's 4-tuple is never made twice (IND2Connector::Connect's
/// ND_ADDRESS_ALREADY_EXISTS case): a connector's local address stays its own while connected,
/// so a second connector cannot Bind it (ND_SHARING_VIOLATION, "the address is already in
/// use"), on the address the connection uses or on the wildcard, and so a Connect from that
/// port to the same listener cannot even be attempted. The refused Binds leave the second
/// connector unbound (it may Bind elsewhere).
#[test]
fn a_connected_local_address_is_not_bound_twice() {
    each("connected-address-exclusive", |p, ip| {
        let (a, _server, client, _listener) = default_pair(p, ip)?;
        let local = client
            .connector
            .get_local_address()
            .ctx("the client's local address")?;
        ensure!(local.port() != 0, "a connected connector has port 0");
        let second = Side::on(&a, SideConfig::default())?;
        expect_status(
            second.connector.bind(local),
            Status::SHARING_VIOLATION,
            "Bind a second connector to a connected connector's local address",
        )?;
        let wild = SocketAddr::new(unspecified_like(ip), local.port());
        expect_status(
            second.connector.bind(wild),
            Status::SHARING_VIOLATION,
            "Bind the wildcard address at a connected connector's port",
        )?;
        ensure!(
            second.connector.get_local_address().is_err(),
            "a refused Bind left the connector bound"
        );
        second
            .connector
            .bind(SocketAddr::new(ip, 0))
            .ctx("Bind the second connector to a port of its own")?;
        Ok(())
    });
}

/// The unspecified address of `ip`'s family.
fn unspecified_like(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => std::net::Ipv4Addr::UNSPECIFIED.into(),
        IpAddr::V6(_) => std::net::Ipv6Addr::UNSPECIFIED.into(),
    }
}

/// While a Connect is under way, GetLocalAddress reports the address and port the connection
/// goes out from, whether the connector was never bound or bound to the wildcard address
/// (IND2Connector::GetLocalAddress: "the local IP and port"), not the wildcard address.
#[test]
fn a_connecting_connector_reports_its_real_local_address() {
    each("connecting-local-address", |p, ip| {
        let a = open(p, ip)?;
        let (_listener, laddr) =
            netdirect_conformance::side::listen(&a, SocketAddr::new(ip, 0), 4)?;
        for bind in [None, Some(SocketAddr::new(unspecified_like(ip), 0))] {
            let client = Side::on(&a, SideConfig::default())?;
            if let Some(b) = bind {
                client.connector.bind(b).ctx("Bind")?;
            }
            let _cov = client
                .connector
                .connect(&client.qp, laddr, 0, 0, &[])
                .ctx("Connect")?;
            let local = client
                .connector
                .get_local_address()
                .ctx("GetLocalAddress while connecting")?;
            ensure!(
                local.ip() == ip && local.port() != 0,
                "bound to {bind:?}: GetLocalAddress while connecting gave {local}"
            );
        }
        Ok(())
    });
}

/// A queue pair is one Connect's from the call on (IND2Connector::Connect: ND_CONNECTION_ACTIVE
/// "the QP is already connected"; Accept: "One QP <-> one peer QP"): another connector's
/// Connect or Accept with it fails `ND_CONNECTION_ACTIVE` at once, not only when one of them
/// reaches CompleteConnect. Once the first attempt ends (cancelled here), the queue pair is
/// free again ("a failed connect leaves the QP unchanged").
#[test]
fn a_queue_pair_belongs_to_one_connect_at_a_time() {
    each("qp-one-connect", |p, ip| {
        let a = open(p, ip)?;
        let (listener, live) = netdirect_conformance::side::listen(&a, SocketAddr::new(ip, 0), 4)?;
        let side = Side::on(&a, SideConfig::default())?;
        let first = a.create_connector().ctx("create connector")?;
        let ov = first
            .connect(&side.qp, live, 0, 0, &[])
            .ctx("the first Connect")?;
        let second = a.create_connector().ctx("create connector")?;
        expect_outcome(
            second.connect(&side.qp, live, 0, 0, &[]),
            Status::CONNECTION_ACTIVE,
            "another connector's Connect with the queue pair a Connect holds",
        )?;
        let server = a.create_connector().ctx("create connector")?;
        let gcr = listener
            .get_connection_request(&server)
            .ctx("GetConnectionRequest")?;
        wait_ok(&gcr, "GetConnectionRequest")?;
        expect_outcome(
            server.accept(&side.qp, 0, 0, &[]),
            Status::CONNECTION_ACTIVE,
            "an Accept with the queue pair a Connect holds",
        )?;
        first
            .cancel_overlapped_requests()
            .ctx("CancelOverlappedRequests")?;
        wait_status(&ov, Status::CANCELED, "the cancelled Connect")?;
        let again = second
            .connect(&side.qp, live, 0, 0, &[])
            .ctx("a Connect with the queue pair once the first attempt ended")?;
        ensure!(
            again.try_result().is_none_or(|r| r.is_ok()),
            "a Connect with the freed queue pair: {:?}",
            again.try_result()
        );
        Ok(())
    });
}
