//! The addresses a same-host software adapter serves: every address of this host's
//! interfaces, plus loopback (`IND2Adapter::QueryAddressList`, `IND2Provider::ResolveAddress`).

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use crate::{Error, Result, Status};

/// Every address of this host, with port 0, IPv4 first, each once: the interfaces' addresses
/// and the loopback addresses, `127.0.0.1` always and `::1` where the host has IPv6 (a
/// loopback address missing from the interface list, as in some containers, is still
/// served; `::1` on a host with IPv6 turned off is not, since nothing could bind it).
/// `ND_INSUFFICIENT_RESOURCES` when the interface list cannot be read.
pub fn local_addresses() -> Result<Vec<SocketAddr>> {
    let listed: Vec<IpAddr> = if_addrs::get_if_addrs()
        .map_err(|_| Error::new(Status::INSUFFICIENT_RESOURCES))?
        .into_iter()
        .map(|i| i.ip())
        .collect();
    Ok(with_loopback(listed, ipv6_loopback_works))
}

/// `listed` with the loopback addresses added (`::1` only if `v6` says it can be bound), as
/// sorted socket addresses with port 0.
fn with_loopback(mut listed: Vec<IpAddr>, v6: impl FnOnce() -> bool) -> Vec<SocketAddr> {
    let v4_lo = IpAddr::from([127, 0, 0, 1]);
    let v6_lo = IpAddr::from(Ipv6Addr::LOCALHOST);
    if !listed.contains(&v4_lo) {
        listed.push(v4_lo);
    }
    if !listed.contains(&v6_lo) && v6() {
        listed.push(v6_lo);
    }
    let mut v: Vec<SocketAddr> = listed
        .into_iter()
        .map(|ip| SocketAddr::new(ip, 0))
        .collect();
    v.sort_by_key(|a| (a.is_ipv6(), a.ip()));
    v.dedup();
    v
}

/// Whether `::1` can be bound here (IPv6 present and not turned off on loopback). Asked
/// each time rather than cached: it is asked only when the interface list lacks `::1`, and
/// the answer belongs to the caller's network namespace.
///
/// A probe that fails for want of descriptors or memory says nothing about IPv6: the address
/// counts as served, so the caller's own socket fails next with the status that says what ran
/// out (`ND_INSUFFICIENT_RESOURCES`), not `ND_INVALID_ADDRESS`.
fn ipv6_loopback_works() -> bool {
    use rustix::io::Errno;
    match std::net::UdpSocket::bind((Ipv6Addr::LOCALHOST, 0)) {
        Ok(_) => true,
        Err(e) => matches!(
            Errno::from_io_error(&e),
            Some(Errno::MFILE | Errno::NFILE | Errno::NOBUFS | Errno::NOMEM)
        ),
    }
}

/// The wildcard address of `ip`'s family (`0.0.0.0` or `::`).
#[must_use]
pub fn unspecified_like(ip: IpAddr) -> IpAddr {
    if ip.is_ipv6() {
        Ipv6Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    }
}

/// Whether `ip` is served: a local address, or any address in 127.0.0.0/8 (and `::1` where
/// the host has IPv6).
pub fn is_local(ip: IpAddr) -> bool {
    if ip.is_loopback() {
        return ip.is_ipv4() || ipv6_loopback_works();
    }
    local_addresses().is_ok_and(|l| l.iter().any(|a| a.ip() == ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_listed_and_served() {
        let l = local_addresses().expect("interface list");
        assert!(l.contains(&SocketAddr::from(([127, 0, 0, 1], 0))));
        assert!(l.contains(&SocketAddr::from((Ipv6Addr::LOCALHOST, 0))));
        assert!(l.iter().all(|a| a.port() == 0));
        assert!(l
            .windows(2)
            .all(|w| (w[0].is_ipv6(), w[0].ip()) < (w[1].is_ipv6(), w[1].ip())));
        assert!(is_local(IpAddr::from([127, 1, 2, 3])), "all of 127.0.0.0/8");
        assert!(
            !is_local(IpAddr::from([192, 0, 2, 1])),
            "TEST-NET-1 is nobody's"
        );
    }

    /// The loopback addresses join the interfaces' (each once, in order), `::1` only where
    /// it can be bound.
    #[test]
    fn loopback_is_added_only_where_it_works() {
        let eth = IpAddr::from([192, 0, 2, 7]);
        let v6_lo = IpAddr::from(Ipv6Addr::LOCALHOST);
        let v4 = SocketAddr::from(([127, 0, 0, 1], 0));
        let v6 = SocketAddr::from((Ipv6Addr::LOCALHOST, 0));
        let eth0 = SocketAddr::new(eth, 0);
        assert_eq!(with_loopback(vec![eth], || false), vec![v4, eth0]);
        assert_eq!(with_loopback(vec![eth], || true), vec![v4, eth0, v6]);
        assert_eq!(
            with_loopback(vec![v6_lo, eth], || panic!("listed: not asked")),
            vec![v4, eth0, v6]
        );
    }
}
