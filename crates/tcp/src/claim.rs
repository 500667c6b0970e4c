//! Connectors' claims on explicit ports: ND's connector port space, kept beside the kernel's
//! one TCP port space (R-CONN-2, docs/ND-RULES.md).
//!
//! A connector may Bind the IP:port a listener holds ([`crate::sockets::bind_nd`] step 3,
//! with `SO_REUSEPORT` on both sockets). Once such sharing is allowed, the kernel no longer
//! keeps two connectors apart at that port: both set the option, so both binds succeed. In
//! ND's connector port space the second is refused like any port in use. So every connector
//! that Binds an explicit port first claims it here, by binding a Unix datagram socket to
//! an abstract name made of the address ([`name`]); the kernel gives a name to one socket
//! at a time (`EADDRINUSE` for the next), across every process of the network namespace,
//! as it does TCP ports, and frees it when the descriptor closes, so a crashed process never
//! leaves a claim behind.
//!
//! A claim is taken for every explicit port, not only where step 3 is taken: a connector
//! bound where no listener was may be joined by a listener later (step 3 from the listener's
//! side), after which a second connector would take step 3 over them both. Provider-chosen
//! ports (Bind to port 0, or no Bind) are not claimed, so that an ordinary connection keeps
//! one descriptor.
//!
//! Addresses: the kernel makes the wildcard address clash with every address of its family
//! at a port. A connector at a specific IP claims `ip/port`, then looks whether the
//! wildcard's name of that port is held; one at the wildcard claims that name, then looks
//! for any specific one of its family at that port in `/proc/net/unix` (the namespace's
//! bound Unix sockets). Each claims before it looks, so of two racing Binds that clash at
//! least one sees the other (both may be refused; never both admitted).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::OwnedFd;

use netdirect_spi::kit::addresses::unspecified_like;
use rustix::io::Errno;
use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};

/// The start of every claim's abstract name.
const PREFIX: &str = "netdirect-tcp/C/";

/// A connector's hold on its explicit IP:port in ND's connector port space: held while the
/// connector uses the port (bound, connecting, connected, then by its queue pair until the
/// connection closes); dropping it frees the port for another connector.
#[derive(Debug)]
pub(crate) struct PortClaim {
    _name: OwnedFd,
}

/// Claim `addr` (an explicit port) for a connector: `EADDRINUSE` if another connector of
/// this network namespace, in any process, holds it or an address that clashes with it.
pub(crate) fn claim(addr: SocketAddr) -> io::Result<PortClaim> {
    let held = bind_name(addr)?;
    let clash = if addr.ip().is_unspecified() {
        specific_held(addr.ip(), addr.port())
    } else {
        name_held(SocketAddr::new(unspecified_like(addr.ip()), addr.port()))?
    };
    if clash {
        return Err(Errno::ADDRINUSE.into());
    }
    Ok(PortClaim { _name: held })
}

/// The abstract name of a claim on `addr`.
fn name(addr: SocketAddr) -> io::Result<SocketAddrUnix> {
    let n = format!("{PREFIX}{}/{}", addr.ip(), addr.port());
    Ok(SocketAddrUnix::new_abstract_name(n.as_bytes())?)
}

fn datagram_socket() -> io::Result<OwnedFd> {
    Ok(rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

/// A socket holding `addr`'s name (`EADDRINUSE` if another holds it). It is shut for
/// reading: nothing is ever sent to it, and nobody can fill its queue.
fn bind_name(addr: SocketAddr) -> io::Result<OwnedFd> {
    let fd = datagram_socket()?;
    rustix::net::bind(&fd, &name(addr)?)?;
    let _ = rustix::net::shutdown(&fd, rustix::net::Shutdown::Read);
    Ok(fd)
}

/// Whether a claim on `addr` is held: a datagram `connect` reaches a bound name
/// (`ECONNREFUSED` where nobody holds it), without taking it.
fn name_held(addr: SocketAddr) -> io::Result<bool> {
    let probe = datagram_socket()?;
    match rustix::net::connect(&probe, &name(addr)?) {
        Ok(()) => Ok(true),
        Err(Errno::CONNREFUSED) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Whether a claim on `port` at a specific address of `family_of`'s family is held, per
/// `/proc/net/unix` (abstract names show there with `@` for the leading NUL). Unreadable, it
/// finds none: the kernel's own rule is all that applies then.
fn specific_held(family_of: IpAddr, port: u16) -> bool {
    let Ok(table) = std::fs::read_to_string("/proc/net/unix") else {
        return false;
    };
    table
        .lines()
        .filter_map(|line| line.split_whitespace().nth(7)?.strip_prefix('@'))
        .filter_map(|n| n.strip_prefix(PREFIX)?.rsplit_once('/'))
        .any(|(ip, p)| {
            p.parse() == Ok(port)
                && ip
                    .parse::<IpAddr>()
                    .is_ok_and(|ip| ip.is_ipv6() == family_of.is_ipv6() && !ip.is_unspecified())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ip: &str, port: u16) -> SocketAddr {
        SocketAddr::new(ip.parse().expect("address"), port)
    }

    /// A claimed port (whatever the test's random pick, no TCP socket is involved) is refused
    /// to a second claim until the first is dropped; the wildcard address clashes with a
    /// specific one of its family both ways, and not with another family or another port.
    #[test]
    fn claims_exclude_each_other_as_tcp_ports_do() {
        let mut r = [0u8; 2];
        netdirect_spi::kit::mr::fill_random(&mut r);
        // A port of the upper half (no claim of another test lands on it by chance).
        let port = 40_000 + u16::from_ne_bytes(r) % 20_000;
        let refused = |a: SocketAddr| {
            claim(a).err().and_then(|e| e.raw_os_error()) == Some(Errno::ADDRINUSE.raw_os_error())
        };
        let one = claim(at("127.0.0.1", port)).expect("claim");
        assert!(refused(at("127.0.0.1", port)));
        assert!(refused(at("0.0.0.0", port)));
        let other_ip = claim(at("127.0.0.2", port)).expect("another address");
        let v6 = claim(at("::", port)).expect("the other family");
        assert!(refused(at("::1", port)));
        drop((one, other_ip));
        let any = claim(at("0.0.0.0", port)).expect("the wildcard, once free");
        assert!(refused(at("127.0.0.3", port)));
        drop((any, v6));
        let again = claim(at("127.0.0.1", port)).expect("free again");
        drop(again);
    }
}
