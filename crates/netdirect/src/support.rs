//! The ND support library's helpers (`ndsupport.h`, implemented by Microsoft's ndutil;
//! `docs/ND-RULES.md` §3): the calls every ND example makes before it touches a provider —
//! list the addresses ND serves, find the local address that reaches a peer, open the adapter
//! for an address.
//!
//! They work across the providers [`Provider::catalog`] lists (those `ND_PROVIDER` admits, in
//! its order), as the Windows framework walks its provider catalog. `NdStartup` and
//! `NdCleanup` have no counterpart: the registry needs no start-up, so the helpers'
//! `ND_DEVICE_NOT_READY` ("not started") never arises.
//!
//! | ndsupport.h | here |
//! |---|---|
//! | `NdQueryAddressList` | [`query_address_list`] |
//! | `NdResolveAddress` | [`resolve_address`] |
//! | `NdCheckAddress` | [`check_address`] |
//! | `NdOpenAdapter` | [`open_adapter`] |

use std::io;
use std::net::{SocketAddr, UdpSocket};

use rustix::io::Errno;

use crate::{Adapter, Error, Provider, Result, Status};

/// `NdQueryAddressList`: every address some provider serves, each IP once (ports 0), in
/// catalog order. Empty when none does (ND_SUCCESS with no addresses, as ndutil answers).
/// A provider that cannot read the interface list fails the call with its status
/// (`ND_INSUFFICIENT_RESOURCES`).
pub fn query_address_list() -> Result<Vec<SocketAddr>> {
    let mut out: Vec<SocketAddr> = Vec::new();
    for p in Provider::catalog()? {
        for a in p.query_address_list()? {
            if !out.iter().any(|b| b.ip() == a.ip()) {
                out.push(a);
            }
        }
    }
    Ok(out)
}

/// `NdCheckAddress`: `Ok` if some provider serves `addr`'s IP (the port is ignored),
/// `ND_INVALID_ADDRESS` if none does.
pub fn check_address(addr: SocketAddr) -> Result<()> {
    for p in Provider::catalog()? {
        if p.resolve_address(addr).is_ok() {
            return Ok(());
        }
    }
    Err(Error::new(Status::INVALID_ADDRESS))
}

/// `NdResolveAddress`: the local address (port 0) the kernel's routing would send from to
/// reach `remote` — what an ND client binds its connector to before it connects. The port of
/// `remote` does not matter and nothing is sent.
///
/// Statuses, as ndutil maps its routing query's errors:
/// * `ND_NETWORK_UNREACHABLE`: no route to `remote`. Linux says so two ways: `ENETUNREACH`
///   when no route matches, `EHOSTUNREACH` when an `unreachable` route does (the Windows
///   query has only the first); both are "no route" and get the one status. `ENETDOWN` too.
/// * `ND_INVALID_ADDRESS`: `remote` names no host (the unspecified address), its family is
///   not available on this host, or the local address found is one no provider serves.
/// * `ND_UNSUCCESSFUL`: any other failure of the query.
pub fn resolve_address(remote: SocketAddr) -> Result<SocketAddr> {
    if remote.ip().is_unspecified() {
        return Err(Error::new(Status::INVALID_ADDRESS));
    }
    // A connected UDP socket learns its source address from the routing table and sends
    // nothing (SIO_ROUTING_INTERFACE_QUERY on Windows).
    let any = netdirect_spi::kit::addresses::unspecified_like(remote.ip());
    let s = UdpSocket::bind(SocketAddr::new(any, 0)).map_err(|e| routing_error(&e))?;
    s.connect(remote).map_err(|e| routing_error(&e))?;
    let mut local = s.local_addr().map_err(|e| routing_error(&e))?;
    local.set_port(0);
    if let SocketAddr::V6(v6) = &mut local {
        v6.set_flowinfo(0);
    }
    // The address must be one ND serves (compared by IP), else the client could not bind to it.
    check_address(local)?;
    Ok(local)
}

/// ND status for a failed routing query (ndutil's mapping of its Winsock errors).
fn routing_error(e: &io::Error) -> Error {
    let status = match Errno::from_io_error(e) {
        Some(Errno::NETUNREACH | Errno::HOSTUNREACH | Errno::NETDOWN) => {
            Status::NETWORK_UNREACHABLE
        }
        Some(Errno::INVAL | Errno::AFNOSUPPORT | Errno::ADDRNOTAVAIL) => Status::INVALID_ADDRESS,
        _ => Status::UNSUCCESSFUL,
    };
    Error::new(status)
}

/// `NdOpenAdapter`: the adapter of the first provider in catalog order that serves `local`'s
/// IP and opens it. A provider that serves the address but fails to open moves the search
/// on to the next one; if none opens, the last failure is returned, or `ND_INVALID_ADDRESS`
/// when no provider serves the address at all.
pub fn open_adapter(local: SocketAddr) -> Result<Adapter> {
    let mut last = Error::new(Status::INVALID_ADDRESS);
    for p in Provider::catalog()? {
        let Ok(id) = p.resolve_address(local) else {
            continue;
        };
        match p.open_adapter(id) {
            Ok(a) => return Ok(a),
            Err(e) => last = e,
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv6Addr};

    fn status<T: std::fmt::Debug>(r: Result<T>) -> Status {
        r.expect_err("the call should fail").status()
    }

    #[test]
    fn loopback_resolves_to_itself_and_is_served() {
        let local = resolve_address(SocketAddr::from(([127, 0, 0, 1], 4791))).expect("resolve");
        assert_eq!(local, SocketAddr::from(([127, 0, 0, 1], 0)));
        if UdpSocket::bind((Ipv6Addr::LOCALHOST, 0)).is_ok() {
            let local = resolve_address(SocketAddr::from((Ipv6Addr::LOCALHOST, 9))).expect("::1");
            assert_eq!(local.ip(), IpAddr::from(Ipv6Addr::LOCALHOST));
            assert_eq!(local.port(), 0);
        }
        check_address(SocketAddr::from(([127, 0, 0, 1], 80))).expect("127.0.0.1 is served");
    }

    #[test]
    fn addresses_that_name_no_host_are_invalid() {
        for a in ["0.0.0.0:1", "[::]:1"] {
            let a: SocketAddr = a.parse().expect("literal");
            assert_eq!(status(resolve_address(a)), Status::INVALID_ADDRESS, "{a}");
        }
        // TEST-NET-1 (RFC 5737) is nobody's address.
        let foreign = SocketAddr::from(([192, 0, 2, 1], 0));
        assert_eq!(status(check_address(foreign)), Status::INVALID_ADDRESS);
        assert_eq!(status(open_adapter(foreign)), Status::INVALID_ADDRESS);
    }

    #[test]
    fn the_list_holds_loopback_once_and_opens() {
        let list = query_address_list().expect("list");
        let v4 = SocketAddr::from(([127, 0, 0, 1], 0));
        assert_eq!(list.iter().filter(|a| **a == v4).count(), 1, "{list:?}");
        assert!(list.iter().all(|a| a.port() == 0), "{list:?}");
        for (i, a) in list.iter().enumerate() {
            assert!(
                list[..i].iter().all(|b| b.ip() != a.ip()),
                "{a} twice in {list:?}"
            );
        }
        // The first provider of the catalog that serves the address opens it.
        let adapter = open_adapter(v4).expect("open the loopback adapter");
        let first = Provider::catalog().expect("catalog")[0].name();
        assert_eq!(adapter.provider_name(), first);
    }
}
