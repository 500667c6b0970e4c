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

mod connector;
mod objects;
mod ports;
mod queue_pair;
mod sleepers;

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

/// The unspecified address of `ip`'s family.
fn unspecified_like(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => std::net::Ipv4Addr::UNSPECIFIED.into(),
        IpAddr::V6(_) => std::net::Ipv6Addr::UNSPECIFIED.into(),
    }
}
