//! `NDK_SHARED_ENDPOINT`: an explicit local address:port for `NdkConnectWithSharedEndpoint`.
//!
//! The software providers give every connection a socket of its own, bound without
//! `SO_REUSEADDR`, so two live connections cannot share a local port. The endpoint therefore
//! holds its port (a bound, never listening TCP socket) until the first connector through it
//! takes it over; later connectors through the same endpoint use its address with a port of
//! their own. docs/NDK.md, "Shared endpoints".

use std::fmt;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};

use rustix::io::Errno;
use rustix::net::{AddressFamily, SocketFlags, SocketType};

use super::adapter::Shared;
use super::callbacks::{CloseCompletion, Core, ObjectType};
use super::NtStatus;
use crate::spi::kit::{addresses, ports};
use crate::Connector;

struct Reservation {
    addr: SocketAddr,
    /// The socket holding the port, until a connector takes it over.
    held: Option<OwnedFd>,
}

/// A shared endpoint (`NDK_SHARED_ENDPOINT`). Cloning shares it.
#[derive(Clone)]
pub struct NdkSharedEndpoint {
    pub(crate) core: Arc<Core>,
    r: Arc<Mutex<Reservation>>,
}

impl fmt::Debug for NdkSharedEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NdkSharedEndpoint")
            .field(
                "addr",
                &self.r.lock().unwrap_or_else(|e| e.into_inner()).addr,
            )
            .finish()
    }
}

/// Hold `addr` (port 0: a free port of 49152–65535) with a bound TCP socket that never
/// listens: the kernel's bind rules then refuse the port to every other socket of the host,
/// and a peer's connection attempt to it is refused.
pub(crate) fn reserve(addr: SocketAddr) -> Result<(OwnedFd, SocketAddr), NtStatus> {
    let family = if addr.is_ipv6() {
        AddressFamily::INET6
    } else {
        AddressFamily::INET
    };
    let s = rustix::net::socket_with(family, SocketType::STREAM, SocketFlags::CLOEXEC, None)
        .map_err(|_| NtStatus::INSUFFICIENT_RESOURCES)?;
    if addr.is_ipv6() {
        rustix::net::sockopt::set_ipv6_v6only(&s, true)
            .map_err(|_| NtStatus::INSUFFICIENT_RESOURCES)?;
    }
    let bind = |p: u16| rustix::net::bind(&s, &SocketAddr::new(addr.ip(), p));
    match ports::choose(addr.port(), bind, |e| *e == Errno::ADDRINUSE) {
        Ok(p) => Ok((s, SocketAddr::new(addr.ip(), p))),
        Err(ports::PortError::Exhausted) => Err(NtStatus::TOO_MANY_ADDRESSES),
        Err(ports::PortError::Bind(Errno::ADDRINUSE)) => Err(NtStatus::SHARING_VIOLATION),
        Err(ports::PortError::Bind(Errno::ADDRNOTAVAIL | Errno::AFNOSUPPORT)) => {
            Err(NtStatus::INVALID_ADDRESS)
        }
        Err(ports::PortError::Bind(_)) => Err(NtStatus::INSUFFICIENT_RESOURCES),
    }
}

impl NdkSharedEndpoint {
    pub(crate) fn create(shared: Arc<Shared>, addr: SocketAddr) -> Result<Self, NtStatus> {
        if !addresses::is_local(addr.ip()) {
            return Err(NtStatus::INVALID_ADDRESS);
        }
        let (held, addr) = reserve(addr)?;
        Ok(Self {
            core: Core::new(ObjectType::SharedEndpoint, &shared.disp, &[]),
            r: Arc::new(Mutex::new(Reservation {
                addr,
                held: Some(held),
            })),
        })
    }

    /// Bind `c` to the endpoint (module docs).
    pub(crate) fn bind_connector(&self, c: &Connector) -> crate::Result<()> {
        let mut r = self.r.lock().unwrap_or_else(|e| e.into_inner());
        if r.held.take().is_some() {
            return c.bind(r.addr);
        }
        c.bind(SocketAddr::new(r.addr.ip(), 0))
    }

    /// `NdkGetLocalAddress` of the endpoint.
    pub fn get_local_address(&self) -> SocketAddr {
        self.r.lock().unwrap_or_else(|e| e.into_inner()).addr
    }

    /// `NdkQueryExtensionInterface`: `STATUS_NOT_SUPPORTED`.
    pub fn query_extension_interface(&self) -> NtStatus {
        NtStatus::NOT_SUPPORTED
    }

    /// `NdkCloseSharedEndpoint`: `STATUS_PENDING` until every connector connected through
    /// it has closed; the port is released then.
    pub fn close(&self, completion: impl FnOnce() + Send + 'static) -> NtStatus {
        self.core.start_close();
        let r = self.r.clone();
        let cb: CloseCompletion = Box::new(completion);
        self.core.finish_close(
            Box::new(move || {
                r.lock().unwrap_or_else(|e| e.into_inner()).held = None;
            }),
            cb,
        )
    }
}
