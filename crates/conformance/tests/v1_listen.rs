//! `INDAdapter::Listen` (ND v1): one test per status of its contract, and the listener's
//! GetConnectionRequest rules, on every provider over 127.0.0.1 and ::1.
//!
//! The contract: the listener is created and started in one call on the adapter's own
//! address; `Port` is in network byte order, 0 picks a free port in 49152–65535 and writes it
//! (network byte order) to `pAssignedPort`. Statuses: `ND_SUCCESS`, `ND_INVALID_PARAMETER_2`
//! (a protocol the provider does not serve), `ND_ADDRESS_ALREADY_EXISTS` (the port is in use
//! on this adapter instance), `ND_INVALID_PARAMETER_MIX` (Port 0 with no `pAssignedPort`),
//! `ND_INSUFFICIENT_RESOURCES`; backlog 0 means no limit and any backlog is clamped
//! silently; `ND_TOO_MANY_ADDRESSES` when no ephemeral port is left. Several
//! GetConnectionRequests may be outstanding, each completing on one arriving request, and
//! those pending when the listener is released complete `ND_CANCELED`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use netdirect::v1::{self, PROTOCOL_TCP};
use netdirect::{Provider, Status};
use netdirect_conformance::check::{
    expect_pending, expect_status, fail, wait_ok, wait_status, Check, Context, Failure,
};
use netdirect_conformance::harness::{
    each_provider, one_at_a_time, output_within, Family, HARD_TIMEOUT,
};
use netdirect_conformance::netns::on_private_network;
use netdirect_conformance::side::EPHEMERAL;
use netdirect_conformance::{ensure, ensure_eq, Needs};
use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

fn adapter(p: &Provider, fam: Family) -> Check<v1::Adapter> {
    v1::Provider::from_v2(p.clone())
        .open_adapter(SocketAddr::new(fam.ip(), 0))
        .ctx("OpenAdapter")
}

#[test]
fn port_zero_succeeds_and_assigns_an_ephemeral_port() {
    // The port is checked free once released ([`one_at_a_time`]).
    let _serial = one_at_a_time();
    each_provider(Needs::TwoSided, "Listen port 0", |p, fam| {
        let a = adapter(p, fam)?;
        let mut port = 0u16;
        let l = a
            .listen(0, PROTOCOL_TCP, 0, Some(&mut port))
            .ctx("Listen(port 0)")?;
        let host = u16::from_be(port);
        ensure!(
            EPHEMERAL.contains(&host),
            "assigned port {host} (network order {port:#06x})"
        );
        ensure_eq!(
            l.local_address().ctx("address")?,
            SocketAddr::new(fam.ip(), host),
            "where it listens"
        );
        // A given port: listened on, and written back as it is.
        drop(l);
        let mut again = 0u16;
        let l = a
            .listen(4, PROTOCOL_TCP, port, Some(&mut again))
            .ctx("Listen(given port)")?;
        ensure_eq!(again, port, "pAssignedPort for a given port");
        drop(l);
        // A given port needs no pAssignedPort.
        a.listen(4, PROTOCOL_TCP, port, None)
            .ctx("Listen(given port, no pAssignedPort)")?;
        Ok(())
    });
}

#[test]
fn a_protocol_not_served_is_invalid_parameter_2() {
    each_provider(Needs::TwoSided, "Listen protocol", |p, fam| {
        let a = adapter(p, fam)?;
        let mut port = 0u16;
        for proto in [17, 0, -1, 256] {
            expect_status(
                a.listen(0, proto, 0, Some(&mut port)).map(drop),
                Status::invalid_parameter(2),
                &format!("Listen with protocol {proto}"),
            )?;
        }
        Ok(())
    });
}

#[test]
fn a_port_in_use_on_the_adapter_is_address_already_exists() {
    // The port is checked free once released ([`one_at_a_time`]).
    let _serial = one_at_a_time();
    each_provider(Needs::TwoSided, "Listen port in use", |p, fam| {
        let a = adapter(p, fam)?;
        let mut port = 0u16;
        let first = a
            .listen(0, PROTOCOL_TCP, 0, Some(&mut port))
            .ctx("first Listen")?;
        let mut out = 0u16;
        expect_status(
            a.listen(0, PROTOCOL_TCP, port, Some(&mut out)).map(drop),
            Status::ADDRESS_ALREADY_EXISTS,
            "a second Listen on the same port of the same adapter",
        )?;
        ensure_eq!(out, 0, "pAssignedPort untouched by a failed Listen");
        // Released, the port is free again.
        drop(first);
        a.listen(0, PROTOCOL_TCP, port, None)
            .ctx("Listen after the first was released")?;
        Ok(())
    });
}

#[test]
fn port_zero_without_an_assigned_port_is_invalid_parameter_mix() {
    each_provider(Needs::TwoSided, "Listen MIX", |p, fam| {
        let a = adapter(p, fam)?;
        expect_status(
            a.listen(0, PROTOCOL_TCP, 0, None).map(drop),
            Status::INVALID_PARAMETER_MIX,
            "Listen(port 0, pAssignedPort NULL)",
        )
    });
}

#[test]
fn any_backlog_is_accepted_and_clamped() {
    each_provider(Needs::TwoSided, "Listen backlog", |p, fam| {
        let a = adapter(p, fam)?;
        let mut port = 0u16;
        for backlog in [0, 1, 1 << 20, usize::MAX] {
            a.listen(backlog, PROTOCOL_TCP, 0, Some(&mut port))
                .ctx(&format!("Listen with backlog {backlog}"))?;
        }
        Ok(())
    });
}

/// Several outstanding GetConnectionRequests complete one per arriving request, in order;
/// those still pending complete `ND_CANCELED` when the listener is released. One adapter
/// for both ends, so that one waiting thread drives both.
#[test]
fn requests_complete_one_per_arrival_and_cancel_on_release() {
    each_provider(Needs::TwoSided, "GetConnectionRequest", |p, fam| {
        let a = adapter(p, fam)?;
        let mut port = 0u16;
        let l = a
            .listen(0, PROTOCOL_TCP, 0, Some(&mut port))
            .ctx("Listen")?;
        let to = SocketAddr::new(fam.ip(), u16::from_be(port));
        let conns: Vec<v1::Connector> = (0..3)
            .map(|_| a.create_connector())
            .collect::<netdirect::Result<_>>()
            .ctx("CreateConnector")?;
        let reqs = conns
            .iter()
            .map(|c| l.get_connection_request(c))
            .collect::<netdirect::Result<Vec<_>>>()
            .ctx("GetConnectionRequest")?;
        for r in &reqs {
            expect_pending(r, "GetConnectionRequest before any client")?;
        }
        let cq = a.create_completion_queue(8).ctx("CQ")?;
        let mut clients = Vec::new();
        for k in 0..2 {
            let c = a.create_connector().ctx("client connector")?;
            let ep = c
                .create_endpoint(&cq, &cq, 1, 1, 1, 1, 0, 0, None)
                .ctx("CreateEndpoint")?;
            let ov = c.connect(&ep, to, PROTOCOL_TCP, 0, &[k]).ctx("Connect")?;
            wait_ok(
                &reqs[k as usize],
                "GetConnectionRequest for an arriving request",
            )?;
            let mut pd = [0u8; 8];
            let n = conns[k as usize]
                .get_connection_data(None, None, &mut pd)
                .ctx("GetConnectionData")?;
            ensure!(n >= 1 && pd[0] == k, "request {k} went to connector {k}");
            clients.push((c, ep, ov));
        }
        expect_pending(
            &reqs[2],
            "the third GetConnectionRequest with two requests arrived",
        )?;
        drop(l);
        wait_status(
            &reqs[2],
            Status::CANCELED,
            "a pending GetConnectionRequest at release",
        )?;
        Ok(())
    });
}

// ---- ND_INSUFFICIENT_RESOURCES: out of descriptors, in a child process ----

const ROLE: &str = "ND_V1_LISTEN_PROVIDER";
const DONE: &str = "V1 LISTEN CHECKED";

#[test]
fn out_of_descriptors_is_insufficient_resources() {
    if let Ok(name) = std::env::var(ROLE) {
        match insufficient_child(&name) {
            Ok(()) => println!("{DONE}"),
            Err(e) => panic!("[provider={name}] {e}"),
        }
        return;
    }
    // Starts children ([`one_at_a_time`]).
    let _serial = one_at_a_time();
    for p in Provider::all() {
        let exe = std::env::current_exe().expect("test binary");
        let mut cmd = std::process::Command::new(exe);
        cmd.args([
            "--exact",
            "out_of_descriptors_is_insufficient_resources",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, p.name());
        let out = output_within(&mut cmd, HARD_TIMEOUT)
            .unwrap_or_else(|e| panic!("[provider={}] {e}", p.name()));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains(DONE),
            "[provider={}] child failed ({}):\n{stdout}\n{}",
            p.name(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn insufficient_child(name: &str) -> Check {
    let p = Provider::open(name).ctx("open provider")?;
    let a = adapter(&p, Family::V4)?;
    let was = getrlimit(Resource::Nofile);
    let free = rustix::io::dup(std::io::stdin())
        .map_err(std::io::Error::from)
        .ctx("dup")?;
    let cap = std::os::fd::AsRawFd::as_raw_fd(&free) as u64;
    drop(free);
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(cap),
            maximum: was.maximum,
        },
    )
    .map_err(std::io::Error::from)
    .ctx("lower RLIMIT_NOFILE")?;
    let mut port = 0u16;
    let r = a.listen(0, PROTOCOL_TCP, 0, Some(&mut port)).map(drop);
    setrlimit(Resource::Nofile, was)
        .map_err(std::io::Error::from)
        .ctx("restore RLIMIT_NOFILE")?;
    expect_status(
        r,
        Status::INSUFFICIENT_RESOURCES,
        "Listen without a descriptor",
    )?;
    // With descriptors again, the same adapter listens.
    a.listen(0, PROTOCOL_TCP, 0, Some(&mut port))
        .ctx("Listen with descriptors")?;
    Ok(())
}

// ---- ND_TOO_MANY_ADDRESSES: every ephemeral port taken, on a private network ----

#[test]
fn port_zero_with_no_free_port_is_too_many_addresses() {
    // Starts `ip` ([`one_at_a_time`]).
    let _serial = one_at_a_time();
    on_private_network(&["link set lo up"], "v1 Listen port exhaustion", || {
        // A socket per port, two on shm (its listeners hold a descriptor more), and spare;
        // as many as the hard limit allows without privileges.
        let was = getrlimit(Resource::Nofile);
        let want = was.maximum.map_or(40_000, |m| m.min(40_000));
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(want),
                maximum: was.maximum,
            },
        )
        .map_err(std::io::Error::from)
        .ctx("raise RLIMIT_NOFILE")?;
        for p in Provider::all() {
            exhaust(&p).map_err(|Failure(m)| Failure(format!("{}: {m}", p.name())))?;
        }
        Ok(())
    });
}

fn exhaust(p: &Provider) -> Check {
    let ip: IpAddr = Ipv4Addr::LOCALHOST.into();
    let a = v1::Provider::from_v2(p.clone())
        .open_adapter(SocketAddr::new(ip, 0))
        .ctx("OpenAdapter")?;
    let mut held = Vec::with_capacity(EPHEMERAL.len());
    loop {
        let mut port = 0u16;
        match a.listen(0, PROTOCOL_TCP, 0, Some(&mut port)) {
            Ok(l) => held.push(l),
            Err(e) if e.status() == Status::TOO_MANY_ADDRESSES => break,
            Err(e) if e.status() == Status::INSUFFICIENT_RESOURCES && p.name() == "shm" => {
                // The descriptors (two per shm listener) ran out before the ports did.
                eprintln!(
                    "[provider=shm] not run: out of descriptors after {} listeners (RLIMIT_NOFILE)",
                    held.len()
                );
                return Ok(());
            }
            Err(e) => {
                return fail(format!(
                    "Listen(port 0) with {} ports taken: {e}",
                    held.len()
                ))
            }
        }
        ensure!(
            held.len() <= EPHEMERAL.len(),
            "more listeners on port 0 than the range has ports"
        );
    }
    ensure!(!held.is_empty(), "no Listen succeeded at all");
    // One released: port 0 finds a port again.
    held.pop();
    let mut port = 0u16;
    held.push(
        a.listen(0, PROTOCOL_TCP, 0, Some(&mut port))
            .ctx("Listen after one was released")?,
    );
    Ok(())
}
