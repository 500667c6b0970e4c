//! A host with IPv6 turned off, on a private network this test builds (a network namespace
//! of its own, whose loopback has IPv6 disabled; nothing on the machine changes): no
//! provider lists or serves `::1`, which nothing could bind there, while `127.0.0.1` still
//! works (IND2Adapter::QueryAddressList lists "the addresses the adapter supports").
//!
//! A private namespace needs root (CAP_SYS_ADMIN) and `ip` (iproute2). Under CI (`CI` set)
//! the test fails without them; elsewhere it says it was skipped and why.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use netdirect::{support, Provider, Status};
use netdirect_conformance::check::{expect_status, Check, Context, Failure};
use netdirect_conformance::ensure;
use netdirect_conformance::netns::on_private_network;

/// Turn IPv6 off on this thread's namespace's loopback (the sysctl belongs to the namespace
/// of the thread that opens it).
fn ipv6_off() -> Check {
    for knob in ["all", "lo"] {
        std::fs::write(format!("/proc/sys/net/ipv6/conf/{knob}/disable_ipv6"), "1")
            .map_err(|e| Failure(format!("disable IPv6 ({knob}): {e}")))?;
    }
    ensure!(
        std::net::UdpSocket::bind((Ipv6Addr::LOCALHOST, 0)).is_err(),
        "::1 still binds with IPv6 disabled"
    );
    Ok(())
}

#[test]
fn without_ipv6_no_provider_lists_or_serves_the_ipv6_loopback() {
    on_private_network(&["link set lo up"], "the IPv6-less address list", || {
        ipv6_off()?;
        let v6 = SocketAddr::new(Ipv6Addr::LOCALHOST.into(), 0);
        let v4 = SocketAddr::new(IpAddr::from([127, 0, 0, 1]), 0);
        let all = support::query_address_list().ctx("NdQueryAddressList")?;
        ensure!(!all.contains(&v6), "NdQueryAddressList lists ::1: {all:?}");
        ensure!(
            all.contains(&v4),
            "NdQueryAddressList lacks 127.0.0.1: {all:?}"
        );
        for p in Provider::catalog().ctx("providers")? {
            let name = p.name();
            let list = p.query_address_list().ctx("QueryAddressList")?;
            ensure!(!list.contains(&v6), "{name} lists ::1: {list:?}");
            expect_status(
                p.resolve_address(v6),
                Status::INVALID_ADDRESS,
                &format!("{name}: ResolveAddress(::1)"),
            )?;
            let a = p.open_adapter_for(v4).ctx("open an adapter on 127.0.0.1")?;
            let list = a.query_address_list().ctx("adapter QueryAddressList")?;
            ensure!(!list.contains(&v6), "{name}'s adapter lists ::1: {list:?}");
        }
        Ok(())
    });
}
