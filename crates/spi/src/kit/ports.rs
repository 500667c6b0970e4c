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

/// How many random ports port 0 tries before it walks the range in order.
pub const RANDOM_TRIES: u32 = 32;

/// Bind `port`, or for port 0 a port of [`EPHEMERAL`] that `bind` accepts: first up to
/// [`RANDOM_TRIES`] random ones (RFC 6056 §3.3.1, simple port randomization: a predictable
/// next port helps a blind attacker guess a connection's 4-tuple), then every port in order
/// from a random one. Random tries keep the cost flat where the taken ports form long runs,
/// as a kernel's own assignments and their TIME_WAITs do: a walk in order from a random start
/// inside a run of thousands tried them all (a `Connect` took 13–19 ms). `taken` says which
/// errors mean "in use, try another".
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
    let mut seed = [0u8; 8];
    crate::kit::mr::fill_random(&mut seed);
    let mut rng = SplitMix(u64::from_ne_bytes(seed));
    let first = *EPHEMERAL.start();
    let span = u32::from(EPHEMERAL.end() - first) + 1;
    let start = (rng.next() % u64::from(span)) as u32;
    let randoms = (0..RANDOM_TRIES).map(|_| (rng.next() % u64::from(span)) as u32);
    let in_order = (0..span).map(|i| (start + i) % span);
    for off in randoms.chain(in_order) {
        // In range: `span` ports from `first`, and `first + span - 1` is `u16::MAX`.
        let p = first + off as u16;
        match bind(p) {
            Ok(()) => return Ok(p),
            Err(e) if taken(&e) => {}
            Err(e) => return Err(PortError::Bind(e)),
        }
    }
    Err(PortError::Exhausted)
}

/// SplitMix64 (Steele, Lea and Flood, 2014): a few well-spread draws from one random seed,
/// without a system call per draw.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
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
    fn port_zero_tries_every_port_of_the_range_before_giving_up() {
        let mut seen = std::collections::HashSet::new();
        let mut tries = 0;
        let got = choose(
            0,
            |p| {
                assert!(EPHEMERAL.contains(&p));
                seen.insert(p);
                tries += 1;
                Err(())
            },
            |()| true,
        );
        assert_eq!(got, Err(PortError::Exhausted));
        assert_eq!(seen.len(), EPHEMERAL.len());
        assert_eq!(tries, EPHEMERAL.len() + RANDOM_TRIES as usize);
    }

    /// A free port past a long run of taken ones is found in few tries, wherever the run is:
    /// with half the range free, 32 random tries all miss once in 4·10^9 calls.
    #[test]
    fn port_zero_is_not_slowed_by_a_long_run_of_taken_ports() {
        let first = *EPHEMERAL.start();
        let mut worst = 0;
        for _ in 0..200 {
            let mut tries = 0;
            let got = choose(
                0,
                |p| {
                    tries += 1;
                    // Half the range taken, in one run.
                    if p - first < 8192 {
                        Err(())
                    } else {
                        Ok(())
                    }
                },
                |()| true,
            );
            assert!(got.is_ok());
            worst = worst.max(tries);
        }
        assert!(worst <= RANDOM_TRIES, "a choice took {worst} tries");
    }
}
