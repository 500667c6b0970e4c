//! Socket helpers: creation, ND port selection, errno → ND status.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use netdirect_spi::kit::ports::{self, PortError};
use netdirect_spi::Status;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::claim::{self, PortClaim};

/// A non-blocking TCP socket for `family_of`'s address family, with Nagle off (as siw does:
/// every FPDU goes out at once).
pub(crate) fn stream_for(family_of: &SocketAddr) -> io::Result<Socket> {
    let domain = if family_of.is_ipv6() {
        Domain::IPV6
    } else {
        Domain::IPV4
    };
    let s = Socket::new(
        domain,
        Type::STREAM.nonblocking().cloexec(),
        Some(Protocol::TCP),
    )?;
    if family_of.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.set_tcp_nodelay(true)?;
    Ok(s)
}

/// Bound how long a connected socket outlives its peer or its path (`ND_TCP_TIMEOUT_MS`), as
/// an RNIC's retry limit does: the kernel ends the connection with `ETIMEDOUT` once
///
/// * data it sent stays unacknowledged for `timeout` (`TCP_USER_TIMEOUT`, tcp(7); the
///   kernel applies it to zero-window probing too, so a peer that takes nothing for that
///   long ends the connection as well), or
/// * an idle connection hears nothing for `timeout`: keepalive probes start after half of
///   it and repeat every tenth (whole seconds, at least one: the options' unit); with
///   `TCP_USER_TIMEOUT` set, the kernel gives up at the first probe due once `timeout` has
///   passed since the last segment arrived, so detection takes at most `timeout` plus an
///   interval. A live peer answers the probes, whatever its application does.
///
/// Zero leaves the kernel's limits (minutes). The error reaches the queue pair as any other
/// (`TcpQp::lost_connection`), which reports it as `ND_IO_TIMEOUT` (docs/WIRE.md §4.5).
pub(crate) fn watch_path(s: &Socket, timeout: Duration) -> io::Result<()> {
    if timeout.is_zero() {
        return Ok(());
    }
    s.set_tcp_user_timeout(Some(timeout))?;
    let (idle, interval, retries) = keepalive_for(timeout);
    s.set_tcp_keepalive(
        &socket2::TcpKeepalive::new()
            .with_time(idle)
            .with_interval(interval)
            .with_retries(retries),
    )
}

/// Keepalive timers that end an idle connection within `timeout` plus one interval (see
/// [`watch_path`]): the first probe after half of it, then one every tenth, in whole seconds
/// (at least 1 s); the probe count covers the rest of `timeout` (the kernel counts it only
/// when `TCP_USER_TIMEOUT` is off).
fn keepalive_for(timeout: Duration) -> (Duration, Duration, u32) {
    let secs = |d: Duration| Duration::from_secs(d.as_secs().max(1));
    let idle = secs(timeout / 2);
    let interval = secs(timeout / 10);
    let rest = timeout.saturating_sub(idle).as_secs_f64() / interval.as_secs_f64();
    (idle, interval, (rest.ceil() as u32).clamp(1, 127))
}

/// What a socket is bound for: ND keeps connectors' and listeners' ports apart (R-CONN-2)
/// while the kernel has one TCP port space; see [`bind_nd`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Role {
    Connector,
    Listener,
}

/// Bind `s` to `addr` for `role`; port 0 takes a free port in 49152–65535, starting at a
/// random one.
///
/// Each port is tried as the kernel allows, in steps (the reuse rules of socket(7)):
///
/// 1. A connector binds with no reuse option: a port anything holds is refused, so two ND
///    connectors never share one (our live connectors keep `SO_REUSEADDR` off).
/// 2. Refused, it binds with `SO_REUSEADDR`: that passes TIME_WAITs of connections whose
///    socket had it (every ND connection sets it as it closes, [`reusable_when_closed`]),
///    so churn never exhausts the range; a live holder still refuses. The option is cleared
///    again once bound. A listener (bound with `SO_REUSEADDR` by the caller) starts here.
/// 3. For an explicit port still refused: a connector may share a port a listener holds
///    (R-CONN-2), and a listener a port only connectors hold. With `SO_REUSEPORT` on both
///    sides the kernel lets a bound socket and a listener share a port (each connection
///    still has its own 4-tuple); every ND listener sets it once it listens
///    ([`share_with_connectors`]), and every ND connector once bound. To keep listeners
///    apart, the step is taken only when `/proc/net/tcp` shows a listener on the port (a
///    connector) or none (a listener).
///
/// Connectors keep `SO_REUSEPORT` while they live, so a listener may take their port.
///
/// Step 3 would let a second connector join the first at a listener's port: a connector's
/// explicit port is claimed first in ND's connector space ([`bind_connector`]); this
/// function takes no claim, so it serves listeners and provider-chosen connector ports.
pub(crate) fn bind_nd(s: &Socket, addr: SocketAddr, role: Role) -> Result<SocketAddr, Status> {
    bind_claiming(s, addr, role, None)
}

/// A connector's [`bind_nd`], with its explicit port (if any) claimed in ND's connector port
/// space first, across processes (R-CONN-2, [`crate::claim`]): another connector's claim
/// refuses it as a port in use (`ND_SHARING_VIOLATION`). The claim is held as long as the
/// connector uses the port; none for port 0.
pub(crate) fn bind_connector(
    s: &Socket,
    addr: SocketAddr,
) -> Result<(SocketAddr, Option<PortClaim>), Status> {
    let mut claim = None;
    let at = bind_claiming(s, addr, Role::Connector, Some(&mut claim))?;
    Ok((at, claim))
}

fn bind_claiming(
    s: &Socket,
    addr: SocketAddr,
    role: Role,
    mut claim: Option<&mut Option<PortClaim>>,
) -> Result<SocketAddr, Status> {
    let in_use =
        |e: &io::Error| e.raw_os_error() == Some(rustix::io::Errno::ADDRINUSE.raw_os_error());
    let explicit = addr.port() != 0;
    if !explicit && role == Role::Connector {
        return bind_any_port(s, addr.ip(), in_use);
    }
    let try_port = |p: u16| -> io::Result<()> {
        let at = SockAddr::from(SocketAddr::new(addr.ip(), p));
        // Before any TCP bind, so that of two connectors racing for the port one is refused.
        let held = match claim.as_deref_mut() {
            Some(slot) if explicit => Some((slot, claim::claim(SocketAddr::new(addr.ip(), p))?)),
            _ => None,
        };
        // A listener starts at step 2.
        let mut r = match role {
            Role::Connector => s.bind(&at),
            Role::Listener => Err(rustix::io::Errno::ADDRINUSE.into()),
        };
        if r.as_ref().is_err_and(in_use) {
            s.set_reuse_address(true)?;
            r = s.bind(&at);
            if role == Role::Connector {
                s.set_reuse_address(false)?;
            }
        }
        if explicit && r.as_ref().is_err_and(in_use) {
            let listened = listening_on(SocketAddr::new(addr.ip(), p));
            if listened == (role == Role::Connector) {
                s.set_reuse_port(true)?;
                s.set_reuse_address(true)?;
                r = s.bind(&at);
                if role == Role::Connector {
                    s.set_reuse_address(false)?;
                }
            }
        }
        if r.is_ok() && role == Role::Connector {
            // A listener may take this port while we hold it (step 3).
            s.set_reuse_port(true)?;
        }
        if let (Ok(()), Some((slot, c))) = (&r, held) {
            *slot = Some(c);
        }
        r
    };
    match ports::choose(addr.port(), try_port, in_use) {
        Ok(port) => Ok(SocketAddr::new(addr.ip(), port)),
        Err(PortError::Exhausted) => Err(Status::TOO_MANY_ADDRESSES),
        Err(PortError::Bind(e)) => Err(bind_status(&e)),
    }
}

/// A connector's port 0: steps 1 and 2 of [`bind_nd`] at once, one `bind` per port tried.
/// With `SO_REUSEADDR` set a bind still fails on every live holder of the port that lacks it
/// (our live connectors) or listens, which is all step 1 adds for a port nobody asked for;
/// it passes what step 2 passes. A port tried costs one system call instead of four: with
/// 10,000 connections held, port 0 tried five ports on average (`nd connrate`).
fn bind_any_port(
    s: &Socket,
    ip: std::net::IpAddr,
    in_use: impl Fn(&io::Error) -> bool,
) -> Result<SocketAddr, Status> {
    let failed = |e: &io::Error| bind_status(e);
    s.set_reuse_address(true).map_err(|e| failed(&e))?;
    let chosen = ports::choose(
        0,
        |p| s.bind(&SockAddr::from(SocketAddr::new(ip, p))),
        in_use,
    );
    s.set_reuse_address(false).map_err(|e| failed(&e))?;
    match chosen {
        Ok(port) => {
            // A listener may take this port while we hold it (step 3).
            s.set_reuse_port(true).map_err(|e| failed(&e))?;
            Ok(SocketAddr::new(ip, port))
        }
        Err(PortError::Exhausted) => Err(Status::TOO_MANY_ADDRESSES),
        Err(PortError::Bind(e)) => Err(bind_status(&e)),
    }
}

/// A socket for an unbound connector's Connect to `dest`: the kernel picks the source address
/// and port at `connect`, from ND's range (`IP_LOCAL_PORT_RANGE`, ip(7), Linux 6.3; the
/// kernel narrows it to its own `ip_local_port_range`), among the ports whose 4-tuple with
/// `dest` is free, TIME_WAITs it may reuse included. No port is searched for by `bind`: with
/// 10,000 connections held, a search among the range's ports cost the last thousand
/// connections a quarter of their rate, and one port serves connections to several peers.
/// Ports that something bound (explicit ND ports, listeners, Binds to port 0, and their
/// TIME_WAITs) are never picked (the kernel skips them), as R-CONN-2 asks; when that leaves
/// none, `connect` fails `EADDRNOTAVAIL` and the connector binds a port itself. `None` where
/// the kernel lacks the option: the caller binds a port of the range itself.
pub(crate) fn unbound_for(dest: &SocketAddr) -> io::Result<Option<Socket>> {
    let s = stream_for(dest)?;
    let (lo, hi) = (*ports::EPHEMERAL.start(), *ports::EPHEMERAL.end());
    if set_local_port_range(&s, lo, hi).is_err() {
        return Ok(None);
    }
    // A listener may take this port while we hold it ([`bind_nd`] step 3).
    s.set_reuse_port(true)?;
    Ok(Some(s))
}

/// `IP_LOCAL_PORT_RANGE` from `linux/in.h` (the `libc` crate does not have it yet).
const IP_LOCAL_PORT_RANGE: libc::c_int = 51;

/// Set `IP_LOCAL_PORT_RANGE`: the high port in the upper 16 bits, the low one in the lower.
fn set_local_port_range(s: &Socket, lo: u16, hi: u16) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let v: u32 = (u32::from(hi) << 16) | u32::from(lo);
    // SAFETY: `setsockopt` reads `size_of::<u32>()` bytes from `&v`, a live local, and
    // keeps no pointer to it; the descriptor is open for the call (borrowed from `s`).
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_IP,
            IP_LOCAL_PORT_RANGE,
            (&v as *const u32).cast(),
            size_of::<u32>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Let connectors share a listening socket's port (R-CONN-2, [`bind_nd`] step 3). Set only
/// once it listens: a listener that had `SO_REUSEPORT` when it started listening could be
/// joined by another, which would take half its connections.
pub(crate) fn share_with_connectors(s: &Socket) {
    // Without it connectors cannot Bind this port: the rest works.
    let _ = s.set_reuse_port(true);
}

/// Make the TIME_WAIT a closing connection may leave reusable by a later Bind ([`bind_nd`]
/// step 2): the kernel copies `SO_REUSEADDR` into it. Set as the connection closes, not
/// before: a live socket with it would let another connector Bind its port.
pub(crate) fn reusable_when_closed(s: &Socket) {
    let _ = s.set_reuse_address(true);
}

/// Whether a TCP socket listens on `addr`'s port at `addr`, or at an address that overlaps
/// it (the wildcard address overlaps every address of its family), per `/proc/net/tcp` or
/// `tcp6` (listeners come first there, so the read stops at the first other socket).
fn listening_on(addr: SocketAddr) -> bool {
    use std::io::BufRead;
    let path = if addr.is_ipv6() {
        "/proc/net/tcp6"
    } else {
        "/proc/net/tcp"
    };
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    for line in io::BufReader::new(f).lines().skip(1) {
        let Ok(line) = line else { return false };
        let mut fields = line.split_whitespace().skip(1);
        let (Some(local), Some(_remote), Some(state)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if state != "0A" {
            return false;
        }
        let Some((ip, port)) = local.split_once(':') else {
            continue;
        };
        if u16::from_str_radix(port, 16).ok() != Some(addr.port()) {
            continue;
        }
        match proc_ip(ip) {
            Some(ip) if ip == addr.ip() || ip.is_unspecified() || addr.ip().is_unspecified() => {
                return true
            }
            _ => {}
        }
    }
    false
}

/// An address as `/proc/net/tcp*` writes it: the bytes in network order, written as 32-bit
/// words in host order.
fn proc_ip(hex: &str) -> Option<std::net::IpAddr> {
    let words: Option<Vec<u32>> = (0..hex.len() / 8)
        .map(|i| u32::from_str_radix(hex.get(i * 8..i * 8 + 8)?, 16).ok())
        .collect();
    let bytes: Vec<u8> = words?.iter().flat_map(|w| w.to_ne_bytes()).collect();
    match bytes.len() {
        4 => Some(std::net::Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3]).into()),
        16 => Some(std::net::Ipv6Addr::from(<[u8; 16]>::try_from(bytes).ok()?).into()),
        _ => None,
    }
}

/// ND status for a failed bind.
pub(crate) fn bind_status(e: &io::Error) -> Status {
    match rustix::io::Errno::from_io_error(e) {
        Some(rustix::io::Errno::ADDRINUSE) => Status::SHARING_VIOLATION,
        Some(rustix::io::Errno::ADDRNOTAVAIL) | Some(rustix::io::Errno::AFNOSUPPORT) => {
            Status::INVALID_ADDRESS
        }
        Some(rustix::io::Errno::INVAL) => Status::ADDRESS_ALREADY_ASSOCIATED,
        _ => Status::INSUFFICIENT_RESOURCES,
    }
}

/// ND status for a failed connection attempt (IND2Connector::Connect return values). Connect
/// has no ND_CONNECTION_ABORTED: a reset before the MPA Reply (the listener went away with
/// our request in its queue, or its process died) is the peer refusing, "due to lack of
/// listener".
pub(crate) fn connect_status(e: &io::Error) -> Status {
    use rustix::io::Errno;
    match Errno::from_io_error(e) {
        Some(Errno::CONNREFUSED | Errno::CONNRESET | Errno::CONNABORTED | Errno::PIPE) => {
            Status::CONNECTION_REFUSED
        }
        Some(Errno::NETUNREACH) | Some(Errno::NETDOWN) => Status::NETWORK_UNREACHABLE,
        Some(Errno::HOSTUNREACH) | Some(Errno::HOSTDOWN) => Status::HOST_UNREACHABLE,
        Some(Errno::TIMEDOUT) => Status::IO_TIMEOUT,
        Some(Errno::ADDRNOTAVAIL) | Some(Errno::AFNOSUPPORT) => Status::INVALID_ADDRESS,
        Some(Errno::ADDRINUSE) => Status::ADDRESS_ALREADY_EXISTS,
        _ => Status::UNSUCCESSFUL,
    }
}

/// The status that reports a connection lost with socket error `e`, when it names a dead
/// path: `ND_IO_TIMEOUT` for `ETIMEDOUT` (`ND_TCP_TIMEOUT_MS` ran out: unacknowledged data,
/// unanswered keepalive probes) and for the unreachable network or host an ICMP error left
/// as the reason. `None` for the peer's own end (`ECONNRESET`, `EPIPE`): flushed as after its
/// Disconnect (docs/WIRE.md §4.5).
pub(crate) fn failure_status(e: rustix::io::Errno) -> Option<Status> {
    use rustix::io::Errno;
    match e {
        Errno::TIMEDOUT
        | Errno::HOSTUNREACH
        | Errno::NETUNREACH
        | Errno::HOSTDOWN
        | Errno::NETDOWN => Some(Status::IO_TIMEOUT),
        _ => None,
    }
}

/// Close a connection that failed to set up with a reset (`SO_LINGER` 0) instead of a FIN.
///
/// A graceful close by the end that closes first leaves that end in TCP's TIME_WAIT for a
/// minute, holding its port: a connector bound by the application could not bind it again, and
/// the retried Connect the ND reference allows ("The connection attempt may be retried") would
/// go out from another port. After a failed attempt nothing of ours is owed to the peer (our
/// MPA Request was answered, or the attempt is abandoned), so the reset loses nothing; the
/// peer sees the refusal it would see anyway (`peer_gone`).
pub(crate) fn close_abortively(s: Socket) {
    // If the option cannot be set the socket closes gracefully, as before.
    let _ = s.set_linger(Some(Duration::ZERO));
    drop(s);
}

/// The local address of a socket.
pub(crate) fn local_of(s: &Socket) -> Option<SocketAddr> {
    s.local_addr().ok().and_then(|a| a.as_socket())
}

/// The peer address of a socket.
pub(crate) fn peer_of(s: &Socket) -> Option<SocketAddr> {
    s.peer_addr().ok().and_then(|a| a.as_socket())
}

/// Whether the peer has already closed or reset the connection: its FIN (end of stream) or
/// RST is waiting at the head of the socket. Reads nothing (`MSG_PEEK`) and never blocks.
///
/// An MPA initiator sends nothing after its Request until our Reply (RFC 5044 §7.1.2), so at
/// Accept an end of stream means it abandoned the connection establishment.
pub(crate) fn peer_gone(s: &Socket) -> bool {
    use rustix::net::RecvFlags;
    let mut byte = [0u8; 1];
    loop {
        return match rustix::net::recv(s, &mut byte, RecvFlags::PEEK | RecvFlags::DONTWAIT) {
            Ok((0, _)) => true,
            Ok(_) | Err(rustix::io::Errno::AGAIN) => false,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => true,
        };
    }
}

/// Write all of `bytes` to a non-blocking socket that has room (MPA frames are small and sent
/// on fresh connections); waits for writability if it must.
pub(crate) fn write_all(s: &Socket, mut bytes: &[u8]) -> io::Result<()> {
    use rustix::net::SendFlags;
    while !bytes.is_empty() {
        // DONTWAIT: the socket may be a blocking one (`crate::wake`).
        match rustix::net::send(s, bytes, SendFlags::NOSIGNAL | SendFlags::DONTWAIT) {
            Ok(n) => bytes = &bytes[n..],
            Err(rustix::io::Errno::AGAIN) => {
                let mut fds = [rustix::event::PollFd::new(s, rustix::event::PollFlags::OUT)];
                let t = rustix::time::Timespec {
                    tv_sec: 1,
                    tv_nsec: 0,
                };
                rustix::event::poll(&mut fds, Some(&t))?;
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An idle connection is given up within the timeout plus one interval: the first probe
    /// after half of it, one per tenth after that (whole seconds).
    #[test]
    fn keepalive_fits_the_timeout() {
        let s = Duration::from_secs;
        assert_eq!(keepalive_for(s(10)), (s(5), s(1), 5));
        assert_eq!(keepalive_for(s(30)), (s(15), s(3), 5));
        assert_eq!(keepalive_for(Duration::from_millis(2000)), (s(1), s(1), 1));
        assert_eq!(keepalive_for(Duration::from_millis(300)), (s(1), s(1), 1));
    }

    /// A listening socket's Nagle setting and path watch reach the connections it accepts,
    /// which the listener relies on to set nothing per connection.
    #[test]
    fn accepted_connections_inherit_the_path_watch() {
        let at: SocketAddr = "127.0.0.1:0".parse().expect("address");
        let l = stream_for(&at).expect("socket");
        l.bind(&at.into()).expect("bind");
        l.listen(1).expect("listen");
        watch_path(&l, Duration::from_secs(4)).expect("watch");
        let to = l.local_addr().expect("address").as_socket().expect("inet");
        let _c = std::net::TcpStream::connect(to).expect("connect");
        let (a, _) = loop {
            match l.accept() {
                Ok(x) => break x,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => panic!("accept: {e}"),
            }
        };
        assert_eq!(
            a.tcp_user_timeout().expect("user timeout"),
            Some(Duration::from_secs(4))
        );
        assert!(a.keepalive().expect("keepalive"));
        assert_eq!(
            a.tcp_keepalive_time().expect("idle"),
            Duration::from_secs(2)
        );
        assert!(a.tcp_nodelay().expect("nodelay"));
    }

    /// An unbound connector's socket gets its port from ND's range at `connect`, over IPv4 and
    /// IPv6 (R-CONN-1), and two connections to one peer get two ports.
    #[test]
    fn unbound_sockets_connect_from_the_nd_range() {
        for ip in ["127.0.0.1", "::1"] {
            let l = match std::net::TcpListener::bind((ip, 0)) {
                Ok(l) => l,
                Err(_) if ip == "::1" => continue, // no IPv6 on this host
                Err(e) => panic!("listener: {e}"),
            };
            let to = l.local_addr().expect("address");
            let mut seen = Vec::new();
            for _ in 0..2 {
                let Some(s) = unbound_for(&to).expect("socket") else {
                    // A kernel before 6.3: the caller binds instead.
                    return;
                };
                match s.connect(&to.into()) {
                    Ok(()) => {}
                    Err(e)
                        if e.raw_os_error()
                            == Some(rustix::io::Errno::INPROGRESS.raw_os_error()) => {}
                    // The kernel found no free port in its range (TIME_WAITs of ports that
                    // `bind` chose hold them): the connector then binds one itself.
                    Err(e)
                        if e.raw_os_error()
                            == Some(rustix::io::Errno::ADDRNOTAVAIL.raw_os_error()) =>
                    {
                        return
                    }
                    Err(e) => panic!("{ip}: connect: {e}"),
                }
                let local = local_of(&s).expect("local address");
                assert!(
                    ports::EPHEMERAL.contains(&local.port()),
                    "{ip}: port {} outside the ND range",
                    local.port()
                );
                seen.push((local.port(), s));
            }
            assert_ne!(
                seen[0].0, seen[1].0,
                "{ip}: one port for two connections to one peer"
            );
        }
    }

    /// `/proc/net/tcp*` addresses (words of the network-order bytes in host order), and a
    /// listener found there by port and overlapping address.
    #[test]
    fn listeners_are_found_in_proc() {
        let v4 = u32::from_ne_bytes([127, 0, 0, 1]);
        assert_eq!(
            proc_ip(&format!("{v4:08X}")),
            Some(std::net::Ipv4Addr::LOCALHOST.into())
        );
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
        let at = l.local_addr().expect("address");
        assert!(listening_on(at));
        assert!(listening_on(SocketAddr::new(
            std::net::Ipv4Addr::UNSPECIFIED.into(),
            at.port()
        )));
        assert!(!listening_on(SocketAddr::new(
            std::net::Ipv4Addr::new(127, 0, 0, 2).into(),
            at.port()
        )));
        drop(l);
        assert!(!listening_on(at));
    }

    /// A dead path is ND_IO_TIMEOUT; the peer's own end (reset, broken pipe) is a flush.
    #[test]
    fn dead_paths_are_timeouts_and_resets_are_not() {
        use rustix::io::Errno;
        for e in [Errno::TIMEDOUT, Errno::HOSTUNREACH, Errno::NETUNREACH] {
            assert_eq!(failure_status(e), Some(Status::IO_TIMEOUT), "{e:?}");
        }
        for e in [Errno::CONNRESET, Errno::PIPE, Errno::NOTCONN] {
            assert_eq!(failure_status(e), None, "{e:?}");
        }
    }
}
