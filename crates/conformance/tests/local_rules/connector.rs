//! Listener and connector rules: Bind and Listen, the connector's states, connection
//! requests answered, abandoned or canceled, and one Connect per queue pair at a time.

use super::*;

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

/// `io::Result` context, for the few std socket calls.
trait IoContext<T> {
    fn ctx_io(self, what: &str) -> Check<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx_io(self, what: &str) -> Check<T> {
        self.map_err(|e| netdirect_conformance::Failure(format!("{what}: {e}")))
    }
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
            let how = if release { "released" } else { "canceled" };
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
/// returns (R-CANCEL-1): the connection the canceled Accept abandons must not complete the
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
        wait_status(&aov, Status::CANCELED, "the canceled Accept")?;
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

/// A queue pair is one Connect's from the call on (IND2Connector::Connect: ND_CONNECTION_ACTIVE
/// "the QP is already connected"; Accept: "One QP <-> one peer QP"): another connector's
/// Connect or Accept with it fails `ND_CONNECTION_ACTIVE` at once, not only when one of them
/// reaches CompleteConnect. Once the first attempt ends (canceled here), the queue pair is
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
        wait_status(&ov, Status::CANCELED, "the canceled Connect")?;
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
