//! The command-line options the tools share: who this end is (`-s`, `-c`, `--loopback`),
//! the provider and mode, and the size plan (`--size`, `-a`, `-n`, `--warmup`).

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

use netdirect::{Adapter, Provider};

use super::endpoint::err;
use super::process::{pin, run_loopback};

/// The perftest default port.
pub(crate) const DEFAULT_PORT: u16 = 18515;

/// The most iterations `-n` may ask for: the latency tools keep an 8-byte sample per iteration
/// (800 MB here), and at the throughput tools' fastest rates it is minutes of running.
pub(crate) const MAX_ITERATIONS: u64 = 100_000_000;

/// Largest size of an `-a` sweep (perftest's 2^23).
pub(crate) const SWEEP_MAX: usize = 8 << 20;

/// Options every peer-to-peer test takes.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct PeerArgs {
    /// Serve one run on this address or host name (port 18515, perftest's, if none is
    /// given) and exit.
    #[arg(short = 's', long = "server", value_name = "ADDR[:PORT]", conflicts_with_all = ["client", "loopback"])]
    pub(crate) server: Option<String>,
    /// With -s: serve one client after another until interrupted; a run a client took part
    /// in that fails is reported and the next client is served.
    #[arg(long, requires = "server")]
    pub(crate) forever: bool,
    /// Connect to a server at this address or host name.
    #[arg(
        short = 'c',
        long = "client",
        value_name = "ADDR[:PORT]",
        conflicts_with = "loopback"
    )]
    pub(crate) client: Option<String>,
    /// Run both ends on 127.0.0.1 as two processes pinned to different cores.
    #[arg(long)]
    pub(crate) loopback: bool,
    /// Provider name (default: ND_PROVIDER, else tcp).
    #[arg(long)]
    pub(crate) provider: Option<String>,
    /// Sleep on completion notifications (Notify + wait; the raw-TCP tools: a blocking recv)
    /// instead of busy-polling, as the Microsoft examples' -b does (perftest: -e/--events).
    /// Both ends must agree.
    #[arg(short = 'b', long, visible_alias = "events", visible_short_alias = 'e')]
    pub(crate) blocking: bool,
    /// Print the results as JSON: the last line of output is one object (an array with -a).
    #[arg(long)]
    pub(crate) json: bool,
    /// Pin this process to a CPU (set by --loopback).
    #[arg(long, hide = true)]
    pub(crate) cpu: Option<usize>,
    /// Print a LISTENING line with the bound address once listening, and a CONNECTED line
    /// once a client is accepted (set by --loopback; the tests read them).
    #[arg(long, hide = true)]
    pub(crate) announce: bool,
}

/// Which end this process is.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Role {
    Server(SocketAddr),
    Client(SocketAddr),
}

/// Parse `ADDR[:PORT]`: an IP address (IPv6 as `[ADDR]:PORT` or bare) or a host name,
/// resolved by the system resolver (`getaddrinfo`, through std's `ToSocketAddrs`). Port 0 on
/// a client, or a missing port, means [`DEFAULT_PORT`]; a server may bind port 0 (any free
/// port).
pub(crate) fn parse_endpoint(s: &str) -> Result<SocketAddr, String> {
    let a = match s.parse::<SocketAddr>() {
        Ok(a) => a,
        Err(_) => match s.trim_matches(['[', ']']).parse::<IpAddr>() {
            Ok(ip) => SocketAddr::new(ip, DEFAULT_PORT),
            Err(_) => resolve_host(s)?,
        },
    };
    // docs/ND-RULES.md §5.0: an address of 0.0.0.0 is "Bad address."
    if a.ip().is_unspecified() {
        return Err(format!(
            "bad address {s:?}: give a host's address, not 0.0.0.0 or ::"
        ));
    }
    Ok(a)
}

/// `HOST[:PORT]` through the resolver. The first IPv4 address wins over IPv6 ones: servers
/// listen on one address, and `localhost` is commonly `::1` first while `-s localhost` and
/// the examples' servers are on `127.0.0.1`.
fn resolve_host(s: &str) -> Result<SocketAddr, String> {
    let (host, port) = match s.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => {
            let port = p
                .parse::<u16>()
                .map_err(|_| format!("bad address {s:?}: the port must be a number 0..=65535"))?;
            (h, port)
        }
        _ => (s, DEFAULT_PORT),
    };
    if host.is_empty() {
        return Err(format!("bad address {s:?}: no host"));
    }
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("bad address {s:?}: cannot resolve {host:?}: {e}"))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| format!("bad address {s:?}: {host:?} has no address"))
}

impl PeerArgs {
    /// Start the run: with `--loopback`, run both ends as child processes and return `None`
    /// (the client's output has been passed through); otherwise pin this process as asked and
    /// return its role.
    pub(crate) fn start(&self) -> Result<Option<Role>, String> {
        if self.loopback {
            run_loopback()?;
            return Ok(None);
        }
        if let Some(cpu) = self.cpu {
            pin(cpu);
        }
        let role = match (&self.server, &self.client) {
            (Some(s), None) => Role::Server(parse_endpoint(s)?),
            (None, Some(c)) => {
                let mut a = parse_endpoint(c)?;
                if a.port() == 0 {
                    a.set_port(DEFAULT_PORT);
                }
                Role::Client(a)
            }
            _ => return Err("give -s ADDR[:PORT], -c ADDR[:PORT] or --loopback".into()),
        };
        Ok(Some(role))
    }

    /// Run `once` for this role; a `--forever` server runs it again for the next client after
    /// each run, reporting a failed run instead of ending.
    pub(crate) fn serve(
        &self,
        role: Role,
        mut once: impl FnMut(Role) -> Result<(), String>,
    ) -> Result<(), String> {
        if !(self.forever && matches!(role, Role::Server(_))) {
            return once(role);
        }
        let mut role = role;
        loop {
            super::endpoint::take_request_seen();
            let r = once(role);
            if let Some(a) = super::endpoint::listened_on() {
                role = Role::Server(a);
            }
            if let Err(e) = r {
                if !super::endpoint::take_request_seen() {
                    return Err(e);
                }
                eprintln!("nd: {e}; waiting for the next client");
            }
        }
    }

    pub(crate) fn provider(&self) -> Result<Provider, String> {
        open_provider(self.provider.as_deref())
    }

    /// The yardsticks serve one run: `--forever` is an error for them, not ignored.
    pub(crate) fn once_only(&self, tool: &str) -> Result<(), String> {
        if self.forever {
            return Err(format!(
                "{tool} serves one run; --forever is for ping, pingpong, rping and rpingpong"
            ));
        }
        Ok(())
    }

    /// "poll" or "blocking", as reported and exchanged.
    pub(crate) fn mode(&self) -> &'static str {
        if self.blocking {
            "blocking"
        } else {
            "poll"
        }
    }
}

/// The provider called `name`, else the one `ND_PROVIDER` selects (default tcp). An unknown
/// name is an error that lists the names there are.
pub(crate) fn open_provider(name: Option<&str>) -> Result<Provider, String> {
    match name {
        Some(p) => Provider::select(p).map_err(|_| unknown_provider("--provider", p)),
        None => Provider::from_env().map_err(|_| unknown_provider("ND_PROVIDER", &env_spec())),
    }
}

/// The providers a listing tool (`nd info`, `nd cat`) covers: the one `--provider` names, else
/// those `ND_PROVIDER` admits when it is set, else every provider.
pub(crate) fn listed_providers(name: Option<&str>) -> Result<Vec<Provider>, String> {
    if name.is_some() {
        return open_provider(name).map(|p| vec![p]);
    }
    if env_spec().trim().is_empty() {
        return Ok(Provider::all());
    }
    Provider::catalog().map_err(|_| unknown_provider("ND_PROVIDER", &env_spec()))
}

fn env_spec() -> String {
    std::env::var("ND_PROVIDER").unwrap_or_default()
}

/// The error for a provider selection that names no provider: what was given, and the
/// choices.
fn unknown_provider(source: &str, spec: &str) -> String {
    let names: Vec<&str> = Provider::all().iter().map(Provider::name).collect();
    format!(
        "{source} {spec:?} names no provider; the providers are {} (or a list such as \
         \"shm,tcp\", first present wins, or \"^shm\" for any but shm)",
        names.join(", ")
    )
}

/// Message sizes and counts (perftest's `-s`, `-a`, `-n`; `-s` is taken by ND's server flag,
/// so the size is `--size` only).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct SizeArgs {
    /// Message size in bytes (default: the tool's, as in Microsoft's example: 8 for
    /// pingpong and rpingpong, 4096 for ping, 65536 for rping).
    #[arg(long, conflicts_with = "all")]
    pub(crate) size: Option<usize>,
    /// Sweep sizes by powers of two, 1 B to 8 MiB (mrlat and mrrate: to 4 MiB, and always).
    #[arg(short = 'a', long = "all")]
    pub(crate) all: bool,
    /// Timed iterations per size (with -a, capped so a size moves at most the tool's volume).
    #[arg(short = 'n', long = "iterations", visible_alias = "iters")]
    pub(crate) iterations: Option<u64>,
    /// Untimed warm-up iterations before each size.
    #[arg(long)]
    pub(crate) warmup: Option<u64>,
}

/// A tool's defaults for [`SizeArgs::plan`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Defaults {
    pub(crate) size: usize,
    pub(crate) iterations: u64,
    /// Iterations per size of a sweep without `-n` (capped by `volume` too).
    pub(crate) sweep_iterations: u64,
    /// Bytes one size may move at most in a sweep (large sizes get fewer iterations, as
    /// Microsoft's x_MaxVolume does).
    pub(crate) volume: u64,
    /// Smallest size the tool accepts.
    pub(crate) min_size: usize,
    /// Sweep even without `-a` (ndmrlat and ndmrrate always sweep).
    pub(crate) sweep: bool,
    /// Largest size of the sweep.
    pub(crate) sweep_max: usize,
}

impl Defaults {
    pub(crate) const fn new(size: usize, iterations: u64, volume: u64) -> Self {
        Self {
            size,
            iterations,
            sweep_iterations: iterations,
            volume,
            min_size: 0,
            sweep: false,
            sweep_max: SWEEP_MAX,
        }
    }
}

/// What one run measures: `(size, iterations)` per round, and the warm-up before each.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) rounds: Vec<(usize, u64)>,
    pub(crate) warmup: u64,
    pub(crate) sweep: bool,
    /// `-n` was given: the counts are the user's, not to be cut short by time.
    pub(crate) counted: bool,
}

impl SizeArgs {
    /// The rounds to run. Without `-n`, each size gets `volume / size` iterations, at least 10
    /// and at most the tool's default count; with `-n`, a single size gets exactly that many
    /// and a sweep at most that many.
    pub(crate) fn plan(&self, d: Defaults) -> Result<Plan, String> {
        match self.iterations {
            Some(0) => return Err("-n must be at least 1".into()),
            Some(n) if n > MAX_ITERATIONS => {
                return Err(format!(
                    "-n {n} is more than the {MAX_ITERATIONS} iterations a run may have (the \
                     latency tools keep an 8-byte sample per iteration)"
                ))
            }
            _ => {}
        }
        let sweep = self.all || (d.sweep && self.size.is_none());
        let by_volume = |s: usize| (d.volume / s.max(1) as u64).max(10);
        let count = |s: usize| match self.iterations {
            Some(n) if sweep => n.min(by_volume(s)),
            Some(n) => n,
            None if sweep => d.sweep_iterations.min(by_volume(s)),
            None => d.iterations.min(by_volume(s)),
        };
        let rounds: Vec<(usize, u64)> = if sweep {
            std::iter::successors(Some(1usize), |s| Some(s * 2))
                .take_while(|&s| s <= d.sweep_max)
                .filter(|&s| s >= d.min_size)
                .map(|s| (s, count(s)))
                .collect()
        } else {
            let size = self.size.unwrap_or(d.size);
            // ND lengths are 32-bit (ND2_SGE's BufferLength, MaxTransferLength): a larger size
            // is refused here, before any buffer is sized from it; the adapter's own limit is
            // checked once it is open (EndpointConfig::max_message).
            if size > u32::MAX as usize {
                return Err(format!(
                    "--size {size} is larger than any ND transfer (at most {} bytes: ND lengths \
                     are 32-bit)",
                    u32::MAX
                ));
            }
            if size < d.min_size {
                return Err(format!("--size must be at least {}", d.min_size));
            }
            vec![(size, count(size))]
        };
        let most = rounds.iter().map(|r| r.1).max().unwrap_or(1);
        let warmup = self.warmup.unwrap_or((most / 10).clamp(1, 1000));
        Ok(Plan {
            rounds,
            warmup,
            sweep,
            counted: self.iterations.is_some(),
        })
    }
}

impl Plan {
    pub(crate) fn max_size(&self) -> usize {
        self.rounds.iter().map(|r| r.0).max().unwrap_or(0)
    }

    /// Warm-up iterations for a round of `iterations`.
    pub(crate) fn warmup_for(&self, iterations: u64) -> u64 {
        self.warmup.min(iterations.max(1))
    }
}

/// Options of the tools that need no peer (`mrlat`, `mrrate`, `cat`).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct LocalArgs {
    /// The local address whose adapter to use (the Microsoft tools' `<IPv4>` argument).
    #[arg(default_value = "127.0.0.1")]
    pub(crate) address: IpAddr,
    /// Provider name (default: ND_PROVIDER, else tcp).
    #[arg(long)]
    pub(crate) provider: Option<String>,
    /// Wait for each request in GetOverlappedResult(wait) instead of polling it with
    /// GetOverlappedResult(no wait).
    #[arg(short = 'b', long, visible_alias = "events", visible_short_alias = 'e')]
    pub(crate) blocking: bool,
    /// Print the results as JSON: the last line of output is one object (an array for a
    /// sweep).
    #[arg(long)]
    pub(crate) json: bool,
}

impl LocalArgs {
    pub(crate) fn mode(&self) -> &'static str {
        if self.blocking {
            "blocking"
        } else {
            "poll"
        }
    }

    /// The provider and its adapter for [`LocalArgs::address`].
    pub(crate) fn open(&self) -> Result<(Provider, Adapter), String> {
        let provider = open_provider(self.provider.as_deref())?;
        let adapter = provider
            .open_adapter_for(SocketAddr::new(self.address, 0))
            .map_err(err("open adapter"))?;
        Ok((provider, adapter))
    }
}

#[cfg(test)]
mod tests {
    use super::{Defaults, SizeArgs};

    fn args(size: Option<usize>, all: bool, n: Option<u64>) -> SizeArgs {
        SizeArgs {
            size,
            all,
            iterations: n,
            warmup: None,
        }
    }

    const D: Defaults = Defaults::new(8, 1000, 1 << 20);

    #[test]
    fn single_size_gets_exactly_n() {
        let p = args(Some(4 << 20), false, Some(7)).plan(D).unwrap();
        assert_eq!(p.rounds, vec![(4 << 20, 7)]);
        assert!(!p.sweep);
    }

    #[test]
    fn default_count_is_capped_by_volume_but_at_least_10() {
        let p = args(Some(1 << 19), false, None).plan(D).unwrap();
        assert_eq!(p.rounds, vec![(1 << 19, 10)]);
        let p = args(None, false, None).plan(D).unwrap();
        assert_eq!(p.rounds, vec![(8, 1000)]);
    }

    #[test]
    fn sweep_is_powers_of_two_from_min_size_to_max() {
        let p = args(None, true, Some(100)).plan(D).unwrap();
        assert!(p.sweep);
        let sizes: Vec<usize> = p.rounds.iter().map(|r| r.0).collect();
        assert_eq!(sizes, (0..24).map(|i| 1usize << i).collect::<Vec<_>>());
        assert_eq!(p.rounds[0].1, 100);
        assert_eq!(
            p.rounds[23].1, 10,
            "8 MiB against a 1 MiB volume: the floor of 10"
        );
        assert_eq!(p.max_size(), 8 << 20);
    }

    #[test]
    fn zero_iterations_and_too_small_sizes_are_errors() {
        assert!(args(None, false, Some(0)).plan(D).is_err());
        let d = Defaults { min_size: 1, ..D };
        assert!(args(Some(0), false, None).plan(d).is_err());
    }
}
