//! ND port numbers: what `Bind` with port 0 picks (R-CONN-1).
//!
//! Both software providers hold their ports in the host's TCP port space (`tcp` with the
//! connection's own socket, `shm` with a reserving socket that never listens or connects), so
//! the kernel's bind rules decide every clash: a port taken on one address, or on the wildcard
//! address, is taken for the other, whichever process or provider took it.

use std::ops::RangeInclusive;

/// The dynamic port range ND assigns from (Windows' and IANA's, RFC 6335 §6), not the Linux
/// `ip_local_port_range`: ND applications see the ports Windows would give them.
pub const EPHEMERAL: RangeInclusive<u16> = 49152..=65535;

/// Why [`choose`] found no port.
#[derive(Debug, PartialEq, Eq)]
pub enum PortError<E> {
    /// Port 0 and every port of [`EPHEMERAL`] is taken (`ND_TOO_MANY_ADDRESSES`).
    Exhausted,
    /// `bind` failed otherwise (an explicit port that is taken, a foreign address, ...).
    Bind(E),
}

/// Bind `port`, or for port 0 the first port of [`EPHEMERAL`] that `bind` accepts, starting
/// from a random one (a predictable next port helps a blind attacker guess a connection's
/// 4-tuple, RFC 6056). `taken` says which errors mean "in use, try the next".
///
/// # Errors
/// [`PortError::Exhausted`] when no port of the range is free; [`PortError::Bind`] with the
/// first other error, or with the error of an explicit port.
pub fn choose<E>(
    port: u16,
    mut bind: impl FnMut(u16) -> Result<(), E>,
    taken: impl Fn(&E) -> bool,
) -> Result<u16, PortError<E>> {
    if port != 0 {
        return bind(port).map(|()| port).map_err(PortError::Bind);
    }
    let mut r = [0u8; 2];
    crate::kit::mr::fill_random(&mut r);
    let first = *EPHEMERAL.start();
    let span = u32::from(EPHEMERAL.end() - first) + 1;
    let start = u32::from(u16::from_ne_bytes(r)) % span;
    for i in 0..span {
        // In range: `span` ports from `first`, and `first + span - 1` is `u16::MAX`.
        let p = first + ((start + i) % span) as u16;
        match bind(p) {
            Ok(()) => return Ok(p),
            Err(e) if taken(&e) => {}
            Err(e) => return Err(PortError::Bind(e)),
        }
    }
    Err(PortError::Exhausted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_explicit_port_is_bound_as_asked_or_fails_with_its_error() {
        assert_eq!(
            choose(80, |p| if p == 80 { Ok(()) } else { Err(()) }, |()| true),
            Ok(80)
        );
        assert_eq!(
            choose(80, |_| Err("taken"), |_| true),
            Err(PortError::Bind("taken"))
        );
    }

    #[test]
    fn port_zero_skips_taken_ports_and_stops_at_another_error() {
        let free = 60000;
        let got = choose(0, |p| if p == free { Ok(()) } else { Err(1) }, |&e| e == 1);
        assert_eq!(got, Ok(free));
        let mut tried = 0;
        let got = choose(
            0,
            |_| {
                tried += 1;
                Err(if tried == 3 { 2 } else { 1 })
            },
            |&e| e == 1,
        );
        assert_eq!(got, Err(PortError::Bind(2)));
    }

    #[test]
    fn port_zero_tries_every_port_of_the_range_once_before_giving_up() {
        let mut seen = std::collections::HashSet::new();
        let got = choose(
            0,
            |p| {
                assert!(EPHEMERAL.contains(&p));
                assert!(seen.insert(p), "port {p} tried twice");
                Err(())
            },
            |()| true,
        );
        assert_eq!(got, Err(PortError::Exhausted));
        assert_eq!(seen.len(), EPHEMERAL.len());
    }
}
