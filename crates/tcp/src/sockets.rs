//! Socket helpers: creation, ND port selection, errno → ND status.

use std::io;
use std::net::SocketAddr;

use netdirect_spi::kit::ports::{self, PortError};
use netdirect_spi::Status;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

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

/// Configure a socket that `accept` returned.
pub(crate) fn prepare_accepted(s: &Socket) -> io::Result<()> {
    s.set_nonblocking(true)?;
    s.set_tcp_nodelay(true)
}

/// Bind `s` to `addr`; port 0 takes a free port in 49152–65535, starting at a random one.
pub(crate) fn bind_nd(s: &Socket, addr: SocketAddr) -> Result<SocketAddr, Status> {
    let in_use =
        |e: &io::Error| e.raw_os_error() == Some(rustix::io::Errno::ADDRINUSE.raw_os_error());
    match ports::choose(
        addr.port(),
        |p| s.bind(&SockAddr::from(SocketAddr::new(addr.ip(), p))),
        in_use,
    ) {
        Ok(port) => Ok(SocketAddr::new(addr.ip(), port)),
        Err(PortError::Exhausted) => Err(Status::TOO_MANY_ADDRESSES),
        Err(PortError::Bind(e)) => Err(bind_status(&e)),
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
    let _ = s.set_linger(Some(std::time::Duration::ZERO));
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
