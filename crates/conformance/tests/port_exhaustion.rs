//! Out of ports: a Bind to port 0 when every port of the ephemeral range is taken fails
//! `ND_TOO_MANY_ADDRESSES` (IND2Connector::Bind, IND2Listener::Bind: "port 0 and no free port
//! in the ephemeral range 49152–65535", docs/ND-RULES.md §2.10, §2.11), on every provider.
//!
//! The range is exhausted for real: connectors bound to port 0 until the provider says so.
//! That takes every port of 127.0.0.1 from everybody else, so it happens on a private network
//! (`netdirect_conformance::netns`: a namespace of this test's own, loopback only), where
//! nothing else holds a port: exactly the 16,384 ports of the range must be handed out before
//! the refusal. Then:
//! * a Bind to an explicit port of the range is `ND_SHARING_VIOLATION` (taken, not exhausted);
//! * a listener's port 0: on `shm` still free (listeners and connectors have port spaces of
//!   their own, R-CONN-2); on `tcp`, whose listeners and connectors share the kernel's TCP
//!   ports, `ND_TOO_MANY_ADDRESSES` too;
//! * once one connector goes, the next Bind to port 0 finds its port, and the one after is
//!   refused again.
//!
//! A private namespace needs root (CAP_SYS_ADMIN) and `ip` (iproute2). Under CI (`CI` set)
//! the test fails without them; elsewhere it says it was skipped and why.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use netdirect::{Connector, Provider, Status};
use netdirect_conformance::check::{expect_status, fail, Check, Context, Failure};
use netdirect_conformance::netns::on_private_network;
use netdirect_conformance::side::EPHEMERAL;
use netdirect_conformance::{ensure, ensure_eq};
use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// Descriptors this test needs: one socket per port of the range, and some to spare.
const DESCRIPTORS: u64 = 20_000;

/// Room for a socket per port (root may raise the hard limit too).
fn enough_descriptors() -> Check {
    let was = getrlimit(Resource::Nofile);
    if was.current.is_some_and(|c| c >= DESCRIPTORS) {
        return Ok(());
    }
    let maximum = match was.maximum {
        Some(m) if m < DESCRIPTORS => Some(DESCRIPTORS),
        m => m,
    };
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(DESCRIPTORS),
            maximum,
        },
    )
    .map_err(std::io::Error::from)
    .ctx("raise RLIMIT_NOFILE")
}

fn exhaust(name: &str) -> Check {
    let p = Provider::open(name).ctx("open provider")?;
    let ip: IpAddr = Ipv4Addr::LOCALHOST.into();
    let any_port = SocketAddr::new(ip, 0);
    let a = p.open_adapter_for(any_port).ctx("open adapter")?;

    // Nothing else in this namespace holds a port, so the provider must hand out every port
    // of the range, each once (a port given twice, or one outside the range, would let more
    // Binds succeed than the range has ports), then refuse.
    let mut held: Vec<Connector> = Vec::with_capacity(EPHEMERAL.len());
    loop {
        let c = a.create_connector().ctx("create connector")?;
        match c.bind(any_port) {
            Ok(()) => held.push(c),
            Err(e) if e.status() == Status::TOO_MANY_ADDRESSES => break,
            Err(e) => {
                return fail(format!(
                    "Bind to port 0 with {} ports taken: {e}, not ND_TOO_MANY_ADDRESSES",
                    held.len()
                ))
            }
        }
        ensure!(
            held.len() <= EPHEMERAL.len(),
            "more connectors bound to port 0 than the range has ports"
        );
    }
    ensure_eq!(
        held.len(),
        EPHEMERAL.len(),
        "ports handed out before ND_TOO_MANY_ADDRESSES"
    );

    let taken = SocketAddr::new(ip, *EPHEMERAL.start());
    expect_status(
        a.create_connector().ctx("create connector")?.bind(taken),
        Status::SHARING_VIOLATION,
        "Bind to a taken port of the exhausted range",
    )?;

    let listener = a.create_listener().ctx("create listener")?;
    let what = "a listener's Bind to port 0 with every connector port taken";
    if name == "shm" {
        listener.bind(any_port).ctx(what)?;
    } else {
        expect_status(listener.bind(any_port), Status::TOO_MANY_ADDRESSES, what)?;
    }
    drop(listener);

    // One port free again: the next port-0 Bind must find it, however far from where its
    // search starts, and the one after is refused again.
    drop(held.swap_remove(held.len() / 2));
    let c = a.create_connector().ctx("create connector")?;
    c.bind(any_port)
        .ctx("Bind to port 0 with one port of the range free again")?;
    held.push(c);
    expect_status(
        a.create_connector().ctx("create connector")?.bind(any_port),
        Status::TOO_MANY_ADDRESSES,
        "Bind to port 0 once that port is taken again",
    )?;
    Ok(())
}

#[test]
fn port_zero_with_the_range_exhausted_is_too_many_addresses() {
    on_private_network(&["link set lo up"], "the port-exhaustion checks", || {
        enough_descriptors()?;
        for p in Provider::all() {
            exhaust(p.name()).map_err(|Failure(m)| Failure(format!("{}: {m}", p.name())))?;
        }
        Ok(())
    });
}
