//! `sockaddr` in and out of the ABI. The C ABI takes Linux sockaddrs (`AF_INET6` is 10, not
//! Windows' 23; docs/PORTING.md): `sockaddr_in` is 16 bytes and `sockaddr_in6` 28 on both
//! systems, with the same field offsets.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use nd::{Error, Status};

/// `AF_INET`.
pub const AF_INET: u16 = 2;
/// `AF_INET6` on Linux.
pub const AF_INET6: u16 = 10;
/// `sizeof(struct sockaddr_in)`.
pub const V4_LEN: usize = 16;
/// `sizeof(struct sockaddr_in6)`.
pub const V6_LEN: usize = 28;

/// Why a caller's sockaddr could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bad {
    /// Null pointer.
    Null,
    /// Shorter than its family needs.
    Short,
    /// A family other than `AF_INET`/`AF_INET6`.
    Family,
}

impl Bad {
    /// The status of a bad address at parameter `n` (its length is parameter `n + 1`): null →
    /// `ND_INVALID_PARAMETER_n`, too short → `ND_INVALID_PARAMETER_{n+1}`, another family →
    /// `ND_INVALID_ADDRESS` (the validation ndsupport.h's helpers do, docs/ND-RULES.md §3).
    pub fn status(self, n: u32) -> Status {
        match self {
            Self::Null => Status::invalid_parameter(n),
            Self::Short => Status::invalid_parameter(n + 1),
            Self::Family => Status::INVALID_ADDRESS,
        }
    }
}

/// Read the sockaddr of `len` bytes at `p`.
///
/// # Safety
/// `p` is null or valid for reads of `len` bytes.
pub unsafe fn read(p: *const u8, len: usize) -> Result<SocketAddr, Bad> {
    if p.is_null() {
        return Err(Bad::Null);
    }
    if len < 2 {
        return Err(Bad::Short);
    }
    // SAFETY: `len` bytes are readable (caller), and every read below stays within the length
    // checked for its family.
    let bytes = unsafe { std::slice::from_raw_parts(p, len) };
    let family = u16::from_ne_bytes([bytes[0], bytes[1]]);
    let port = |b: &[u8]| u16::from_be_bytes([b[2], b[3]]);
    match family {
        AF_INET if len >= V4_LEN => {
            let ip = Ipv4Addr::new(bytes[4], bytes[5], bytes[6], bytes[7]);
            Ok(SocketAddr::V4(SocketAddrV4::new(ip, port(bytes))))
        }
        AF_INET6 if len >= V6_LEN => {
            let flow = u32::from_be_bytes(bytes[4..8].try_into().expect("4 bytes"));
            let ip: [u8; 16] = bytes[8..24].try_into().expect("16 bytes");
            let scope = u32::from_ne_bytes(bytes[24..28].try_into().expect("4 bytes"));
            Ok(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(ip),
                port(bytes),
                flow,
                scope,
            )))
        }
        AF_INET | AF_INET6 => Err(Bad::Short),
        _ => Err(Bad::Family),
    }
}

/// The C form of `addr`: its bytes, of which the first `len` are used.
pub fn encode(addr: &SocketAddr) -> ([u8; V6_LEN], usize) {
    let mut b = [0u8; V6_LEN];
    b[2..4].copy_from_slice(&addr.port().to_be_bytes());
    match addr {
        SocketAddr::V4(a) => {
            b[0..2].copy_from_slice(&AF_INET.to_ne_bytes());
            b[4..8].copy_from_slice(&a.ip().octets());
            (b, V4_LEN)
        }
        SocketAddr::V6(a) => {
            b[0..2].copy_from_slice(&AF_INET6.to_ne_bytes());
            b[4..8].copy_from_slice(&a.flowinfo().to_be_bytes());
            b[8..24].copy_from_slice(&a.ip().octets());
            b[24..28].copy_from_slice(&a.scope_id().to_ne_bytes());
            (b, V6_LEN)
        }
    }
}

/// The out-parameter pattern of `GetLocalAddress`/`GetPeerAddress`: `*pcb` is the buffer's
/// size in; if it is too small (or `out` is null), `*pcb` becomes the size needed and the call
/// fails `ND_BUFFER_OVERFLOW` with the buffer untouched; otherwise the address is written and
/// `*pcb` is its size. A null `pcb` is `ND_INVALID_PARAMETER_{pcb_param}`.
///
/// # Safety
/// `pcb` is null or valid for reads and writes of a `u32`; `out` is null or valid for writes
/// of `*pcb` bytes.
pub unsafe fn write_out(
    addr: nd::Result<SocketAddr>,
    out: *mut u8,
    pcb: *mut u32,
    pcb_param: u32,
) -> Status {
    if pcb.is_null() {
        return Status::invalid_parameter(pcb_param);
    }
    let addr = match addr {
        Ok(a) => a,
        Err(e) => return e.status(),
    };
    let (bytes, len) = encode(&addr);
    // SAFETY: `pcb` is valid (caller), checked non-null above.
    let room = unsafe { *pcb } as usize;
    if out.is_null() || room < len {
        // SAFETY: as above.
        unsafe { *pcb = len as u32 };
        return Status::BUFFER_OVERFLOW;
    }
    // SAFETY: `out` has room for `room >= len` bytes (caller).
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), out, len);
        *pcb = len as u32;
    }
    Status::SUCCESS
}

/// The status of `r`, or `ND_SUCCESS`.
pub fn status<T>(r: &Result<T, Error>) -> Status {
    r.as_ref().err().map_or(Status::SUCCESS, |e| e.status())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_families_round_trip_and_bad_ones_are_named() {
        for a in ["127.0.0.1:54325", "[::1]:7", "[fe80::1%3]:9"] {
            let a: SocketAddr = a.parse().expect("literal");
            let (b, len) = encode(&a);
            // SAFETY: `b` holds `len` bytes.
            assert_eq!(unsafe { read(b.as_ptr(), len) }, Ok(a));
            // SAFETY: as above, one byte fewer.
            assert_eq!(unsafe { read(b.as_ptr(), len - 1) }, Err(Bad::Short));
        }
        let mut b = [0u8; 16];
        b[0] = 23; // Windows' AF_INET6
                   // SAFETY: 16 bytes.
        assert_eq!(unsafe { read(b.as_ptr(), 16) }, Err(Bad::Family));
        // SAFETY: null is allowed.
        assert_eq!(unsafe { read(std::ptr::null(), 16) }, Err(Bad::Null));
        assert_eq!(Bad::Short.status(1), Status::invalid_parameter(2));
    }

    proptest::proptest! {
        /// Whatever bytes and length a caller passes, reading never panics and never reads
        /// past the length; what it accepts encodes back to the same bytes' address.
        #[test]
        fn any_bytes_read_safely(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..40)) {
            // SAFETY: `bytes` holds `len` readable bytes.
            let r = unsafe { read(bytes.as_ptr(), bytes.len()) };
            if let Ok(a) = r {
                let (b, len) = encode(&a);
                // SAFETY: `b` holds `len` bytes.
                proptest::prop_assert_eq!(unsafe { read(b.as_ptr(), len) }, Ok(a));
            }
        }
    }
}
