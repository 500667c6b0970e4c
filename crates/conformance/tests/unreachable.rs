//! Destinations that cannot be reached, on a private network this test builds: a network
//! namespace of its own (so nothing on the machine changes, and nothing is left behind: the
//! namespace goes with the thread) holding loopback, an `unreachable` route, and a veth
//! interface whose only neighbour swallows every packet.
//!
//! * IND2Connector::Connect lists ND_NETWORK_UNREACHABLE, ND_HOST_UNREACHABLE and
//!   ND_IO_TIMEOUT as outcomes "the attempt may be retried" after (docs/ND-RULES.md §2.10), and
//!   a failed Connect leaves the queue pair unchanged. Over `tcp`: no route at all
//!   (`ENETUNREACH`) is ND_NETWORK_UNREACHABLE, an `unreachable` route (`EHOSTUNREACH`) is
//!   ND_HOST_UNREACHABLE, and a neighbour that never answers the handshake is ND_IO_TIMEOUT
//!   once `ND_TCP_CONNECT_TIMEOUT_MS` passes. Over `shm`, which reaches this host only, each of
//!   them is ND_HOST_UNREACHABLE at once. After every failure the same connector and queue
//!   pair connect to a listener on the private address and carry a message.
//! * `support::resolve_address` (NdResolveAddress) finds the private interface's address
//!   for a destination routed through it, and ND_NETWORK_UNREACHABLE for one with no route
//!   (either way Linux says it); `support::open_adapter` opens an adapter on the private
//!   address.
//!
//! A private namespace needs root (CAP_SYS_ADMIN) and `ip` (iproute2). Under CI (`CI` set)
//! the test fails without them; elsewhere it says it was skipped and why.

use std::net::{IpAddr, SocketAddr};

use netdirect::support;
use netdirect::{Adapter, Provider, Status};
use netdirect_conformance::check::{wait_status, Check, Context, Failure};
use netdirect_conformance::netns::on_private_network;
use netdirect_conformance::side::connect_and_exchange;
use netdirect_conformance::{ensure, ensure_eq, Side, SideConfig};

/// The addresses of one family on the private network.
struct Net {
    /// Ours, on the veth interface.
    local: IpAddr,
    /// No route matches it.
    no_route: IpAddr,
    /// An `unreachable` route matches it.
    unreachable: IpAddr,
    /// On the veth's subnet, with a static neighbour entry nobody answers to.
    silent: IpAddr,
}

const V4: [&str; 4] = ["10.99.0.1", "198.51.100.1", "192.0.2.1", "10.99.0.2"];
const V6: [&str; 4] = ["fd00:99::1", "2001:db8:2::1", "2001:db8:1::1", "fd00:99::2"];

impl Net {
    fn of(a: [&str; 4]) -> Self {
        let ip = |s: &str| s.parse::<IpAddr>().expect("literal");
        Self {
            local: ip(a[0]),
            no_route: ip(a[1]),
            unreachable: ip(a[2]),
            silent: ip(a[3]),
        }
    }
}

/// The commands that build the network, run inside the namespace. The neighbour's link-layer
/// address is no interface's, so the veth peer drops what it receives; `nodad` makes the IPv6
/// address usable at once.
const SETUP: &[&str] = &[
    "link set lo up",
    "route add unreachable 192.0.2.0/24",
    "-6 route add unreachable 2001:db8:1::/48",
    "link add nd0 type veth peer name nd1",
    "addr add 10.99.0.1/24 dev nd0",
    "-6 addr add fd00:99::1/64 dev nd0 nodad",
    "link set nd1 up",
    "link set nd0 up",
    "neigh add 10.99.0.2 lladdr 02:00:00:00:00:02 dev nd0 nud permanent",
    "-6 neigh add fd00:99::2 lladdr 02:00:00:00:00:02 dev nd0 nud permanent",
];

/// Connect from `local` to each unreachable destination of `net` and check the outcome, then
/// connect the same connector and queue pair to a listener on `local` and move a message.
fn connect_outcomes(p: &Provider, net: &Net) -> Check {
    let local = SocketAddr::new(net.local, 0);
    let a: Adapter = p.open_adapter_for(local).ctx("open adapter")?;
    let client = Side::on(&a, SideConfig::default())?;
    let server = Side::on(&a, SideConfig::default())?;
    let shm = p.name() == "shm";
    let cases = [
        (net.no_route, Status::NETWORK_UNREACHABLE, "no route"),
        (
            net.unreachable,
            Status::HOST_UNREACHABLE,
            "an unreachable route",
        ),
        (
            net.silent,
            Status::IO_TIMEOUT,
            "a neighbour that never answers",
        ),
    ];
    client.connector.bind(local).ctx("Connector::bind")?;
    for (dest, want, what) in cases {
        // Shared memory reaches this host only: any other address is a host it cannot reach.
        let want = if shm { Status::HOST_UNREACHABLE } else { want };
        let dest = SocketAddr::new(dest, 7);
        let what = format!("{} Connect to {dest} ({what})", p.name());
        let ov = client
            .connector
            .connect(&client.qp, dest, 0, 0, &[])
            .ctx(&what)?;
        wait_status(&ov, want, &what)?;
    }
    // The attempts may be retried: the same connector and queue pair connect.
    connect_and_exchange(&server, &client, net.local).map(drop)
}

/// NdResolveAddress and NdOpenAdapter on the private network.
fn support_helpers(net: &Net) -> Check {
    for dest in [net.no_route, net.unreachable] {
        let r = support::resolve_address(SocketAddr::new(dest, 7));
        ensure_eq!(
            r.map_err(|e| e.status()),
            Err(Status::NETWORK_UNREACHABLE),
            "NdResolveAddress {dest}"
        );
    }
    let found = support::resolve_address(SocketAddr::new(net.silent, 7)).ctx("resolve")?;
    ensure_eq!(
        found,
        SocketAddr::new(net.local, 0),
        "NdResolveAddress {}",
        net.silent
    );
    let list = support::query_address_list().ctx("NdQueryAddressList")?;
    ensure!(
        list.contains(&SocketAddr::new(net.local, 0)),
        "NdQueryAddressList lacks {}: {list:?}",
        net.local
    );
    support::check_address(found).ctx("NdCheckAddress")?;
    support::open_adapter(found).ctx("NdOpenAdapter")?;
    Ok(())
}

#[test]
fn unreachable_destinations() {
    // Read when an adapter opens: the silent neighbour's handshake gives up after this.
    std::env::set_var("ND_TCP_CONNECT_TIMEOUT_MS", "300");
    on_private_network(SETUP, "the unreachable-destination checks", || {
        for net in [Net::of(V4), Net::of(V6)] {
            support_helpers(&net)?;
            for name in ["tcp", "shm"] {
                let p = Provider::open(name).ctx(name)?;
                connect_outcomes(&p, &net)
                    .map_err(|Failure(m)| Failure(format!("{name}, {}: {m}", net.local)))?;
            }
        }
        Ok(())
    });
}
