//! The addresses a same-host software adapter serves: every address of this host's
//! interfaces, plus loopback (`IND2Adapter::QueryAddressList`, `IND2Provider::ResolveAddress`).

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use crate::{Error, Result, Status};

/// Every address of this host (both loopback addresses included, even on a host whose
/// interface list lacks them), with port 0, IPv4 first, each once. `ND_INSUFFICIENT_RESOURCES`
/// when the interface list cannot be read.
pub fn local_addresses() -> Result<Vec<SocketAddr>> {
    let mut v: Vec<SocketAddr> = if_addrs::get_if_addrs()
        .map_err(|_| Error::new(Status::INSUFFICIENT_RESOURCES))?
        .into_iter()
        .map(|i| SocketAddr::new(i.ip(), 0))
        .collect();
    for lo in [
        IpAddr::from([127, 0, 0, 1]),
        IpAddr::from(Ipv6Addr::LOCALHOST),
    ] {
        if !v.iter().any(|a| a.ip() == lo) {
            v.push(SocketAddr::new(lo, 0));
        }
    }
    v.sort_by_key(|a| (a.is_ipv6(), a.ip()));
    v.dedup();
    Ok(v)
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

/// Whether `ip` is served: a local address, or any address in 127.0.0.0/8 (and `::1`).
pub fn is_local(ip: IpAddr) -> bool {
    if ip.is_loopback() {
        return true;
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
}
