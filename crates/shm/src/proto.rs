//! The rendezvous: Unix-domain `SOCK_SEQPACKET` sockets in the Linux *abstract* namespace, and
//! the few control messages the two sides exchange over them.
//!
//! Ports and names:
//!
//! * An ND port is held in the kernel's port space of its address family by a socket bound to
//!   it that never listens, connects or carries a byte ([`Port`]): a listener's in the TCP
//!   space, a connector's in the UDP space. The kernel's bind rules then decide every clash,
//!   across processes, exactly as for `tcp`: the same port on two addresses of the host is two
//!   ports, the wildcard address clashes with every address, IPv4 and IPv6 are apart. The two
//!   spaces keep connector and listener ports apart (R-CONN-2: ndmpic binds connectors to
//!   ports its peer listens on).
//! * `\0netdirect-shm/L/<ip>/<port>`: the listener bound to that address (`<ip>` the wildcard
//!   address for a wildcard listener) waits for connections on this abstract Unix name. No file
//!   is ever created, so none can be left behind; the name disappears with the last descriptor
//!   of its socket. Connectors' sockets have no name.
//!
//! Messages (little-endian; every one starts with the 4-byte magic, a version and a kind):
//!
//! | kind | sender | body | ancillary |
//! |---|---|---|---|
//! | REQUEST | active | IRD, ORD, cells, data size, source and destination address, segment address, private data | the segment memfd |
//! | ACCEPT | passive | IRD, ORD, segment address, private data | |
//! | REJECT | passive | private data | |
//! | WAKE | either | (none): "something changed in the segment" | |
//! | MAP | either | the id of a shared memory about to be granted (a mapped RDMA Write or Read) | its memfd |
//! | UNMAP | either | the id of a shared memory sent by a MAP earlier and since freed: drop its mapping | |
//!
//! The connection's socket stays open as long as the connection: end-of-file on it means the
//! peer disconnected or died (the kernel closes a killed process's descriptors), and it carries
//! the WAKE messages that rouse a sleeping peer.

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::io::Errno;
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketAddrUnix, SocketFlags, SocketType,
};

use netdirect_spi::kit::ports::{self, PortError};
use netdirect_spi::Status;

use crate::segment::Params;

const MAGIC: [u8; 4] = *b"NDSH";
const VERSION: u8 = 1;

/// The largest control message (a REQUEST with 252 bytes of private data is ~330).
pub(crate) const MAX_MSG: usize = 512;

/// The abstract socket name of the listener bound to `addr`: one of this host's addresses,
/// or its family's wildcard address, and the port. A Connect to `a` looks for the listener of
/// `a`, then for the wildcard listener of its port ([`listener_names`]).
pub(crate) fn listener_name(addr: SocketAddr) -> SocketAddrUnix {
    let n = format!("netdirect-shm/L/{}/{}", addr.ip(), addr.port());
    SocketAddrUnix::new_abstract_name(n.as_bytes()).expect("short name")
}

/// Where a Connect to `dest` looks for its listener, in order: bound to `dest` itself, or to
/// the wildcard address of its family. At most one of them exists: the two ports clash in the
/// TCP port space ([`Port`]).
pub(crate) fn listener_names(dest: SocketAddr) -> [SocketAddrUnix; 2] {
    let any = SocketAddr::new(unspecified_like(dest.ip()), dest.port());
    [listener_name(dest), listener_name(any)]
}

/// Connect `sock` to the listener that serves `dest` ([`listener_names`]).
pub(crate) fn connect_listener(sock: &OwnedFd, dest: SocketAddr) -> Result<(), Errno> {
    let [exact, wildcard] = listener_names(dest);
    match rustix::net::connect(sock, &exact) {
        // No such name: nobody listens on `dest` itself (an unconnected socket may try again).
        Err(Errno::CONNREFUSED) => rustix::net::connect(sock, &wildcard),
        other => other,
    }
}

/// The wildcard address of `ip`'s family.
pub(crate) fn unspecified_like(ip: IpAddr) -> IpAddr {
    if ip.is_ipv6() {
        Ipv6Addr::UNSPECIFIED.into()
    } else {
        Ipv4Addr::UNSPECIFIED.into()
    }
}

/// Which port space an ND port belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Space {
    /// Listeners' ports: the kernel's TCP ports, where `tcp`'s listeners are too.
    Listener,
    /// Connectors' local ports: the kernel's UDP ports, apart from listeners' (R-CONN-2).
    Connector,
}

/// An ND port of this provider, held by a kernel socket bound to it that never listens,
/// connects or carries a byte (no peer can reach it; it only keeps the port), in the TCP or
/// UDP port space ([`Space`]).
///
/// So the kernel's bind rules are ours, across processes: the same port on two addresses of
/// the host is two ports, a port bound on the wildcard address clashes with that port on every
/// address, and IPv4 and IPv6 ports are apart (`IPV6_V6ONLY`), as for `tcp`. It holds no
/// `SO_REUSEADDR` (a listener's binds with it only to pass TIME_WAITs, [`reserve`]): a socket
/// that never connects leaves no TIME_WAIT to rebind over, and without it a clash shows at
/// `Bind`, where ND reports it.
///
/// A connected connector's port is held without a descriptor ([`Port::into_noted`]): one
/// descriptor per connection (its socket), so 10,000 connections fit a 20,000-descriptor
/// limit. Such a port is kept from this process's other connectors by a list of them that
/// [`reserve`] consults, but not from other processes'.
#[derive(Debug)]
pub(crate) struct Port(Hold);

#[derive(Debug)]
enum Hold {
    /// A socket bound to the port.
    Socket(#[allow(dead_code)] OwnedFd),
    /// Listed in [`NOTED`] at this address.
    Noted(SocketAddr),
    /// Given up (being replaced).
    Gone,
}

/// Connector ports of this process held without a socket ([`Port::into_noted`]), by port
/// number: a reservation looks up the ports it tries, not every connection held (a list
/// scanned per try made 10,000 connections cost O(n²)).
static NOTED: std::sync::Mutex<Noted> = std::sync::Mutex::new(BTreeMap::new());

type Noted = BTreeMap<u16, Vec<SocketAddr>>;

fn noted() -> std::sync::MutexGuard<'static, Noted> {
    NOTED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether a noted address claims `at`'s port.
fn is_noted(n: &Noted, at: &SocketAddr) -> bool {
    n.get(&at.port())
        .is_some_and(|v| v.iter().any(|a| overlaps(a, at)))
}

/// Whether two bound addresses claim the same port, as the kernel's bind rules say (a
/// wildcard address claims every address of its family; IPv6 sockets are v6-only here).
fn overlaps(a: &SocketAddr, b: &SocketAddr) -> bool {
    a.port() == b.port()
        && a.is_ipv6() == b.is_ipv6()
        && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}

impl Port {
    /// Hold the port, bound at `at` (the address [`reserve`] was given, with the port it
    /// chose), without a descriptor from now on: the socket closes and the address is listed
    /// for this process's later reservations until the port is dropped.
    pub(crate) fn into_noted(mut self, at: SocketAddr) -> Self {
        noted().entry(at.port()).or_default().push(at);
        // The socket closes only once the address is listed: no window for our own binds.
        self.0 = Hold::Noted(at);
        self
    }
}

impl Drop for Port {
    fn drop(&mut self) {
        if let Hold::Noted(at) = std::mem::replace(&mut self.0, Hold::Gone) {
            let mut n = noted();
            if let Some(v) = n.get_mut(&at.port()) {
                if let Some(i) = v.iter().position(|a| *a == at) {
                    v.swap_remove(i);
                }
                if v.is_empty() {
                    n.remove(&at.port());
                }
            }
        }
    }
}

/// Reserve `addr` in `space` (port 0: a free port of `kit::ports::EPHEMERAL`); the port
/// chosen. Errors: `ND_SHARING_VIOLATION` for a port in use, `ND_TOO_MANY_ADDRESSES` when the
/// range is exhausted, `ND_INVALID_ADDRESS` for an address not of this host,
/// `ND_INSUFFICIENT_RESOURCES` otherwise.
pub(crate) fn reserve(space: Space, addr: SocketAddr) -> Result<(Port, u16), Status> {
    let family = if addr.is_ipv6() {
        AddressFamily::INET6
    } else {
        AddressFamily::INET
    };
    let ty = match space {
        Space::Listener => SocketType::STREAM,
        Space::Connector => SocketType::DGRAM,
    };
    let s = rustix::net::socket_with(family, ty, SocketFlags::CLOEXEC, None)
        .map_err(|_| Status::INSUFFICIENT_RESOURCES)?;
    if addr.is_ipv6() {
        rustix::net::sockopt::set_ipv6_v6only(&s, true)
            .map_err(|_| Status::INSUFFICIENT_RESOURCES)?;
    }
    let bind = |p: u16| {
        let at = SocketAddr::new(addr.ip(), p);
        if space == Space::Connector && is_noted(&noted(), &at) {
            return Err(Errno::ADDRINUSE);
        }
        match rustix::net::bind(&s, &at) {
            // A listener's port may hold TIME_WAITs of earlier connections (of any program's
            // listener that set `SO_REUSEADDR`, as servers do): the kernel lets a socket with
            // the option bind over them, as a `tcp` listener does. It is cleared once bound,
            // so that no later socket with it can share the port while we hold it.
            Err(Errno::ADDRINUSE) if space == Space::Listener => {
                rustix::net::sockopt::set_socket_reuseaddr(&s, true)?;
                let r = rustix::net::bind(&s, &at);
                rustix::net::sockopt::set_socket_reuseaddr(&s, false)?;
                r
            }
            r => r,
        }
    };
    match ports::choose(addr.port(), bind, |e| *e == Errno::ADDRINUSE) {
        Ok(port) => Ok((Port(Hold::Socket(s)), port)),
        Err(PortError::Exhausted) => Err(Status::TOO_MANY_ADDRESSES),
        Err(PortError::Bind(Errno::ADDRINUSE)) => Err(Status::SHARING_VIOLATION),
        Err(PortError::Bind(Errno::ADDRNOTAVAIL | Errno::AFNOSUPPORT)) => {
            Err(Status::INVALID_ADDRESS)
        }
        Err(PortError::Bind(_)) => Err(Status::INSUFFICIENT_RESOURCES),
    }
}

/// A non-blocking, close-on-exec `SOCK_SEQPACKET` Unix socket.
pub(crate) fn socket() -> io::Result<OwnedFd> {
    Ok(rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )?)
}

/// Message kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    Request = 1,
    Accept = 2,
    Reject = 3,
    Wake = 4,
    Map = 5,
    Unmap = 6,
}

/// A connection request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    pub(crate) ird: u32,
    pub(crate) ord: u32,
    pub(crate) params: Params,
    pub(crate) src: SocketAddr,
    pub(crate) dst: SocketAddr,
    /// Where the active side mapped the segment (for the cross-memory-attach probe).
    pub(crate) seg_addr: u64,
    pub(crate) private_data: Vec<u8>,
}

/// A decoded message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Msg {
    Request(Request),
    Accept {
        ird: u32,
        ord: u32,
        /// Where the passive side mapped the segment.
        seg_addr: u64,
        private_data: Vec<u8>,
    },
    Reject {
        private_data: Vec<u8>,
    },
    Wake,
    /// The memfd attached is the shared memory with this id (`kit::shared_mem`): a GRANT
    /// naming it follows in the ring.
    Map {
        id: u64,
    },
    /// The shared memory with this id, sent by a `Map` earlier, is gone on the sender's side
    /// (its buffer was freed): no GRANT names it any more, so drop its mapping, which keeps
    /// its pages alive.
    Unmap {
        id: u64,
    },
}

fn put_addr(b: &mut Vec<u8>, a: &SocketAddr) {
    match a.ip() {
        IpAddr::V4(ip) => {
            b.push(4);
            b.extend_from_slice(&ip.octets());
            b.extend_from_slice(&[0; 12]);
        }
        IpAddr::V6(ip) => {
            b.push(6);
            b.extend_from_slice(&ip.octets());
        }
    }
    b.extend_from_slice(&a.port().to_le_bytes());
}

fn put_pd(b: &mut Vec<u8>, pd: &[u8]) {
    b.extend_from_slice(&(pd.len() as u16).to_le_bytes());
    b.extend_from_slice(pd);
}

impl Msg {
    /// The wire bytes.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(64);
        b.extend_from_slice(&MAGIC);
        b.push(VERSION);
        let kind = match self {
            Self::Request(_) => Kind::Request,
            Self::Accept { .. } => Kind::Accept,
            Self::Reject { .. } => Kind::Reject,
            Self::Wake => Kind::Wake,
            Self::Map { .. } => Kind::Map,
            Self::Unmap { .. } => Kind::Unmap,
        };
        b.push(kind as u8);
        b.extend_from_slice(&[0, 0]);
        match self {
            Self::Request(r) => {
                b.extend_from_slice(&r.ird.to_le_bytes());
                b.extend_from_slice(&r.ord.to_le_bytes());
                b.extend_from_slice(&r.params.cells.to_le_bytes());
                b.extend_from_slice(&r.params.data_len.to_le_bytes());
                put_addr(&mut b, &r.src);
                put_addr(&mut b, &r.dst);
                b.extend_from_slice(&r.seg_addr.to_le_bytes());
                put_pd(&mut b, &r.private_data);
            }
            Self::Accept {
                ird,
                ord,
                seg_addr,
                private_data,
            } => {
                b.extend_from_slice(&ird.to_le_bytes());
                b.extend_from_slice(&ord.to_le_bytes());
                b.extend_from_slice(&seg_addr.to_le_bytes());
                put_pd(&mut b, private_data);
            }
            Self::Reject { private_data } => put_pd(&mut b, private_data),
            Self::Wake => {}
            Self::Map { id } | Self::Unmap { id } => b.extend_from_slice(&id.to_le_bytes()),
        }
        b
    }

    /// Parse one message; `None` for anything malformed (the caller drops the connection).
    pub(crate) fn decode(b: &[u8]) -> Option<Self> {
        let mut r = Reader(b);
        if r.take(4)? != MAGIC || r.u8()? != VERSION {
            return None;
        }
        let kind = r.u8()?;
        r.take(2)?;
        let m = match kind {
            1 => Self::Request(Request {
                ird: r.u32()?,
                ord: r.u32()?,
                params: Params {
                    cells: r.u32()?,
                    data_len: r.u64()?,
                },
                src: r.addr()?,
                dst: r.addr()?,
                seg_addr: r.u64()?,
                private_data: r.pd()?,
            }),
            2 => Self::Accept {
                ird: r.u32()?,
                ord: r.u32()?,
                seg_addr: r.u64()?,
                private_data: r.pd()?,
            },
            3 => Self::Reject {
                private_data: r.pd()?,
            },
            4 => Self::Wake,
            5 => Self::Map { id: r.u64()? },
            6 => Self::Unmap { id: r.u64()? },
            _ => return None,
        };
        r.0.is_empty().then_some(m)
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn addr(&mut self) -> Option<SocketAddr> {
        let fam = self.u8()?;
        let ip: [u8; 16] = self.take(16)?.try_into().ok()?;
        let port = self.u16()?;
        let ip = match fam {
            4 => IpAddr::V4(Ipv4Addr::new(ip[0], ip[1], ip[2], ip[3])),
            6 => IpAddr::V6(Ipv6Addr::from(ip)),
            _ => return None,
        };
        Some(SocketAddr::new(ip, port))
    }
    fn pd(&mut self) -> Option<Vec<u8>> {
        let n = self.u16()? as usize;
        if n > crate::adapter::MAX_PRIVATE_DATA as usize {
            return None;
        }
        Some(self.take(n)?.to_vec())
    }
}

/// Send one message, with `fd` attached if given. Non-blocking: a full socket is `AGAIN`.
pub(crate) fn send(s: &impl AsFd, msg: &Msg, fd: Option<BorrowedFd<'_>>) -> Result<(), Errno> {
    let bytes = msg.encode();
    let iov = [io::IoSlice::new(&bytes)];
    let mut space = [std::mem::MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut anc = SendAncillaryBuffer::new(&mut space);
    let fds;
    if let Some(fd) = fd {
        fds = [fd];
        anc.push(SendAncillaryMessage::ScmRights(&fds));
    }
    loop {
        match rustix::net::sendmsg(s, &iov, &mut anc, SendFlags::NOSIGNAL | SendFlags::DONTWAIT) {
            Ok(_) => return Ok(()),
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e),
        }
    }
}

/// What one receive found.
#[derive(Debug)]
pub(crate) enum Recv {
    /// A message (malformed ones are `None`), with the descriptor that came with it, if any.
    Msg(Option<Msg>, Option<OwnedFd>),
    /// Nothing waiting.
    Empty,
    /// End of file (or an error): the peer is gone.
    Eof,
}

/// Receive one message without blocking. Descriptors beyond the first are closed.
pub(crate) fn recv(s: &impl AsFd) -> Recv {
    let mut buf = [0u8; MAX_MSG];
    let mut space = [std::mem::MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(2))];
    loop {
        let mut anc = RecvAncillaryBuffer::new(&mut space);
        let mut iov = [io::IoSliceMut::new(&mut buf)];
        match rustix::net::recvmsg(
            s,
            &mut iov,
            &mut anc,
            RecvFlags::DONTWAIT | RecvFlags::CMSG_CLOEXEC,
        ) {
            Ok(r) if r.bytes == 0 => return Recv::Eof,
            Ok(r) => {
                let mut fd = None;
                for m in anc.drain() {
                    if let RecvAncillaryMessage::ScmRights(fds) = m {
                        for f in fds {
                            if fd.is_none() {
                                fd = Some(f);
                            }
                        }
                    }
                }
                let truncated = r.flags.contains(rustix::net::ReturnFlags::TRUNC);
                let msg = if truncated {
                    None
                } else {
                    Msg::decode(&buf[..r.bytes.min(MAX_MSG)])
                };
                return Recv::Msg(msg, fd);
            }
            Err(Errno::AGAIN) => return Recv::Empty,
            Err(Errno::INTR) => continue,
            Err(_) => return Recv::Eof,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let req = Msg::Request(Request {
            ird: 3,
            ord: 4,
            params: Params {
                cells: 256,
                data_len: 1 << 18,
            },
            src: "127.0.0.1:50000".parse().unwrap(),
            dst: "[::1]:7".parse().unwrap(),
            seg_addr: 0x7f00_0000_1000,
            private_data: vec![1, 2, 3],
        });
        for m in [
            req,
            Msg::Accept {
                ird: 1,
                ord: 2,
                seg_addr: 42,
                private_data: vec![9; 252],
            },
            Msg::Reject {
                private_data: vec![],
            },
            Msg::Wake,
            Msg::Map { id: 7 },
            Msg::Unmap { id: 7 },
        ] {
            assert_eq!(Msg::decode(&m.encode()), Some(m));
        }
        assert_eq!(Msg::decode(b"NDSH\x01\x09\0\0"), None, "unknown kind");
        let mut long = Msg::Wake.encode();
        long.push(0);
        assert_eq!(Msg::decode(&long), None, "trailing bytes");
    }
}
