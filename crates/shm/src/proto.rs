//! The rendezvous: Unix-domain `SOCK_SEQPACKET` sockets in the Linux *abstract* namespace, and
//! the few control messages the two sides exchange over them.
//!
//! Names (no file is ever created, so none can be left behind; a name disappears with the last
//! descriptor of the socket that holds it):
//!
//! * `\0netdirect-shm/L4/<port>` (`L6` for IPv6): the listener holding that ND port. One shm
//!   listener per port and address family on the host; the listener itself checks that the
//!   destination IP of a request is one it serves.
//! * `\0netdirect-shm/C4/<port>` (`C6`): a connector's local port, held by its socket for the
//!   life of the connection. Connector and listener ports are separate spaces (R-CONN-2).
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

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::io::Errno;
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketAddrUnix, SocketFlags, SocketType,
};

use crate::segment::Params;

const MAGIC: [u8; 4] = *b"NDSH";
const VERSION: u8 = 1;

/// The largest control message (a REQUEST with 252 bytes of private data is ~330).
pub(crate) const MAX_MSG: usize = 512;

/// Which name space a port belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Space {
    Listener,
    Connector,
}

/// The abstract socket name of an ND port.
pub(crate) fn name(space: Space, v6: bool, port: u16) -> SocketAddrUnix {
    let s = match space {
        Space::Listener => 'L',
        Space::Connector => 'C',
    };
    let fam = if v6 { 6 } else { 4 };
    let n = format!("netdirect-shm/{s}{fam}/{port}");
    SocketAddrUnix::new_abstract_name(n.as_bytes()).expect("short name")
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

/// Bind `s` to the name of `port` in `space` (port 0: any free one of 49152–65535, from a random
/// start). `Err(ADDRINUSE)` for a taken explicit port; `Err(AGAIN)` when the range is exhausted.
pub(crate) fn claim(s: &OwnedFd, space: Space, v6: bool, port: u16) -> Result<u16, Errno> {
    if port != 0 {
        rustix::net::bind(s, &name(space, v6, port))?;
        return Ok(port);
    }
    let mut r = [0u8; 2];
    netdirect_spi::kit::mr::fill_random(&mut r);
    const FIRST: u32 = 49152;
    const SPAN: u32 = 65536 - FIRST;
    let start = u32::from(u16::from_ne_bytes(r)) % SPAN;
    for i in 0..SPAN {
        let p = (FIRST + (start + i) % SPAN) as u16;
        match rustix::net::bind(s, &name(space, v6, p)) {
            Ok(()) => return Ok(p),
            Err(Errno::ADDRINUSE) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Errno::AGAIN)
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
