//! Addresses and ports: a refused Connect and a second Bind leave the connector usable, a port
//! belongs to its address, and a connector's port is free again when it goes.

use super::*;

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

/// Connectors and listeners have port spaces of their own (R-CONN-2: "a connector and a
/// listener may use the same IP:port"; MPI-style clients bind each connector to a fixed port,
/// which may be another process's listener port): a connector Binds the port a listener holds
/// and connects from it, and a listener Binds and Listens on the port a connected connector
/// holds and takes connections there. Listeners stay apart from each other, and so do
/// connectors where no listener is: a second one is `ND_SHARING_VIOLATION`.
#[test]
fn connectors_and_listeners_have_separate_port_spaces() {
    each("separate-port-spaces", |p, ip| {
        let a = open(p, ip)?;
        // A connector at a listener's port, connected to another listener.
        let (shared, at) = netdirect_conformance::side::listen(&a, SocketAddr::new(ip, 0), 4)?;
        let (server, client) = (
            Side::on(&a, SideConfig::default())?,
            Side::on(&a, SideConfig::default())?,
        );
        client
            .connector
            .bind(at)
            .ctx("Bind a connector to a listener's address")?;
        let _other = connect_and_exchange(&server, &client, ip)?;
        ensure_eq!(
            client
                .connector
                .get_local_address()
                .ctx("GetLocalAddress")?,
            at,
            "the connector's address"
        );
        // The listener still takes connections at that port.
        let (s2, c2) = (
            Side::on(&a, SideConfig::default())?,
            Side::on(&a, SideConfig::default())?,
        );
        let gcr = shared
            .get_connection_request(&s2.connector)
            .ctx("GetConnectionRequest")?;
        let cov = c2.connect(SocketAddr::new(ip, 0), at, 0, 0, &[])?;
        wait_ok(&gcr, "GetConnectionRequest at the shared port")?;
        accept_and_exchange(&s2, &c2, &cov)?;
        let second = a.create_listener().ctx("create listener")?;
        expect_status(
            second.bind(at),
            Status::SHARING_VIOLATION,
            "Bind a second listener at a listener's port a connector shares",
        )?;

        // A listener at a connected connector's port: c2's, which nothing listens on.
        let mine = c2.connector.get_local_address().ctx("GetLocalAddress")?;
        let (late, laddr) = netdirect_conformance::side::listen(&a, mine, 4).map_err(|e| {
            netdirect_conformance::Failure(format!("listen at a connector's port: {e}"))
        })?;
        ensure_eq!(laddr, mine, "the listener's address");
        let (s3, c3) = (
            Side::on(&a, SideConfig::default())?,
            Side::on(&a, SideConfig::default())?,
        );
        let gcr = late
            .get_connection_request(&s3.connector)
            .ctx("GetConnectionRequest")?;
        let cov = c3.connect(SocketAddr::new(ip, 0), mine, 0, 0, &[])?;
        wait_ok(&gcr, "GetConnectionRequest at a connector's port")?;
        accept_and_exchange(&s3, &c3, &cov)?;
        let again = a.create_listener().ctx("create listener")?;
        expect_status(
            again.bind(mine),
            Status::SHARING_VIOLATION,
            "Bind a second listener at that port",
        )?;
        // The connected connector c3's port, where nobody listens, stays its own.
        let c3_at = c3.connector.get_local_address().ctx("GetLocalAddress")?;
        let other = a.create_connector().ctx("create connector")?;
        expect_status(
            other.bind(c3_at),
            Status::SHARING_VIOLATION,
            "Bind a second connector at a connected connector's port",
        )?;
        Ok(())
    });
}

/// A listener Binds a port whose last connections sit in TCP's TIME_WAIT, as servers
/// restarted at once do (IND2Listener::Bind is refused only for an address "already in
/// use"): here the TIME_WAIT is a plain TCP server's (std's, which sets `SO_REUSEADDR` as
/// servers do) that closed its connection first.
#[test]
fn a_listener_binds_over_time_wait() {
    use std::io::{Read, Write};
    each("listener-over-time-wait", |p, ip| {
        let a = open(p, ip)?;
        let server = std::net::TcpListener::bind(SocketAddr::new(ip, 0)).ctx("TCP listener")?;
        let at = server.local_addr().ctx("its address")?;
        let mut client = std::net::TcpStream::connect(at).ctx("TCP connect")?;
        let (mut conn, _) = server.accept().ctx("TCP accept")?;
        drop(server);
        // The server ends first, so its end goes to TIME_WAIT once the client's FIN is in.
        conn.write_all(b"x").ctx("write")?;
        conn.shutdown(std::net::Shutdown::Write).ctx("shutdown")?;
        let mut sink = Vec::new();
        client
            .read_to_end(&mut sink)
            .ctx("client reads to the end")?;
        drop(client);
        ensure_eq!(
            conn.read(&mut [0u8; 1]).ctx("server reads the end")?,
            0,
            "end"
        );
        drop(conn);
        let (l, got) = netdirect_conformance::side::listen(&a, at, 4)
            .map_err(|e| netdirect_conformance::Failure(format!("listen over a TIME_WAIT: {e}")))?;
        ensure_eq!(got, at, "the listener's address");
        // And it takes connections there.
        let (s, c) = (
            Side::on(&a, SideConfig::default())?,
            Side::on(&a, SideConfig::default())?,
        );
        let gcr = l
            .get_connection_request(&s.connector)
            .ctx("GetConnectionRequest")?;
        let cov = c.connect(SocketAddr::new(ip, 0), at, 0, 0, &[])?;
        wait_ok(&gcr, "GetConnectionRequest")?;
        accept_and_exchange(&s, &c, &cov)
    });
}
