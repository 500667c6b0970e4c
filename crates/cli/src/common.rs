//! What every `nd` test shares: roles and addresses, connection setup, loopback runs as two
//! pinned processes, and latency statistics.

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::process::{Command, Stdio};

use netdirect::{
    Adapter, CompletionQueue, Connector, MemoryRegion, MrFlags, NdResult, Provider, QueuePair,
    Status,
};

/// The perftest default port.
pub(crate) const DEFAULT_PORT: u16 = 18515;

/// Options every peer-to-peer test takes.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct PeerArgs {
    /// Serve one run on ADDR[:PORT] and exit.
    #[arg(short = 's', long = "server", value_name = "ADDR[:PORT]", conflicts_with_all = ["client", "loopback"])]
    pub(crate) server: Option<String>,
    /// Connect to a server at ADDR[:PORT].
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
    /// Pin this process to a CPU (set by --loopback).
    #[arg(long, hide = true)]
    pub(crate) cpu: Option<usize>,
    /// Print "LISTENING <addr>" once listening (set by --loopback).
    #[arg(long, hide = true)]
    pub(crate) announce: bool,
}

/// Which end this process is.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Role {
    Server(SocketAddr),
    Client(SocketAddr),
}

/// Parse `ADDR[:PORT]` (IPv6 as `[ADDR]:PORT` or a bare address).
pub(crate) fn parse_endpoint(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    let ip: IpAddr = s
        .trim_matches(['[', ']'])
        .parse()
        .map_err(|_| format!("bad address {s:?}"))?;
    Ok(SocketAddr::new(ip, DEFAULT_PORT))
}

impl PeerArgs {
    pub(crate) fn role(&self) -> Result<Role, String> {
        match (&self.server, &self.client) {
            (Some(s), None) => Ok(Role::Server(parse_endpoint(s)?)),
            (None, Some(c)) => Ok(Role::Client(parse_endpoint(c)?)),
            _ => Err("give -s ADDR[:PORT], -c ADDR[:PORT] or --loopback".into()),
        }
    }

    pub(crate) fn provider(&self) -> Result<Provider, String> {
        match &self.provider {
            Some(p) => Provider::select(p).map_err(|e| format!("provider {p}: {e}")),
            None => Provider::from_env().map_err(|e| format!("ND_PROVIDER: {e}")),
        }
    }
}

/// Pin the calling process to `cpu`.
pub(crate) fn pin(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
        eprintln!("nd: cannot pin to cpu {cpu}: {e}");
    }
}

/// Run this same command as a server child on cpu 1 and a client child on cpu 0, over
/// 127.0.0.1; the client's standard output is passed through.
pub(crate) fn run_loopback(args: &[String]) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (server_cpu, client_cpu) = if cpus > 1 { (1, 0) } else { (0, 0) };
    let mut server = Command::new(&exe)
        .args(args)
        .args([
            "-s",
            "127.0.0.1:0",
            "--announce",
            "--cpu",
            &server_cpu.to_string(),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn server: {e}"))?;
    let mut lines = BufReader::new(server.stdout.take().expect("piped"));
    let mut line = String::new();
    lines.read_line(&mut line).map_err(|e| e.to_string())?;
    let Some(addr) = line.trim().strip_prefix("LISTENING ") else {
        let _ = server.kill();
        return Err(format!("server did not start: {line:?}"));
    };
    let client = Command::new(&exe)
        .args(args)
        .args(["-c", addr, "--cpu", &client_cpu.to_string()])
        .status()
        .map_err(|e| format!("spawn client: {e}"))?;
    let server = server.wait().map_err(|e| e.to_string())?;
    if !client.success() {
        return Err(format!("client failed: {client}"));
    }
    if !server.success() {
        return Err(format!("server failed: {server}"));
    }
    Ok(())
}

/// The local address the kernel would use to reach `dest` (`NdResolveAddress`): a connected
/// UDP socket sends nothing but learns its source address.
pub(crate) fn resolve_local(dest: SocketAddr) -> Result<IpAddr, String> {
    if dest.ip().is_loopback() {
        return Ok(dest.ip());
    }
    let bind: SocketAddr = if dest.is_ipv6() {
        "[::]:0".parse().expect("literal")
    } else {
        "0.0.0.0:0".parse().expect("literal")
    };
    let s = UdpSocket::bind(bind).map_err(|e| e.to_string())?;
    s.connect(dest)
        .map_err(|e| format!("no route to {dest}: {e}"))?;
    Ok(s.local_addr().map_err(|e| e.to_string())?.ip())
}

/// One end of a connection with one CQ, one QP and one registered buffer.
pub(crate) struct Endpoint {
    pub(crate) adapter: Adapter,
    pub(crate) cq: CompletionQueue,
    pub(crate) qp: QueuePair,
    pub(crate) connector: Connector,
    pub(crate) mr: MemoryRegion,
    pub(crate) buf: netdirect::Buffer,
}

/// Sizes of an [`Endpoint`].
#[derive(Default)]
pub(crate) struct EndpointConfig {
    pub(crate) buf_len: usize,
    pub(crate) depth: u32,
    pub(crate) inline: u32,
    /// The read limits to Connect or Accept with (inbound, outbound): Reads the peer may
    /// issue to us, Reads we issue.
    pub(crate) read_limits: (u32, u32),
}

fn err(what: &str) -> impl Fn(netdirect::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

impl Endpoint {
    fn open(provider: &Provider, local: IpAddr, cfg: &EndpointConfig) -> Result<Self, String> {
        let adapter = provider
            .open_adapter_for(SocketAddr::new(local, 0))
            .map_err(err("open adapter"))?;
        let info = adapter.query();
        let depth = cfg
            .depth
            .min(info.max_completion_queue_depth)
            .min(info.max_receive_queue_depth);
        let cq = adapter
            .create_completion_queue(depth * 2, 0, 0)
            .map_err(err("create CQ"))?;
        let inline = cfg.inline.min(info.max_inline_data_size);
        let qp = adapter
            .create_queue_pair(&cq, &cq, 0, depth, depth, 1, 1, inline)
            .map_err(err("create QP"))?;
        let buf = netdirect::Buffer::new(cfg.buf_len).map_err(err("buffer"))?;
        let mr = adapter.create_memory_region().map_err(err("create MR"))?;
        mr.register_buffer(
            &buf,
            MrFlags::ALLOW_LOCAL_WRITE | MrFlags::ALLOW_REMOTE_WRITE | MrFlags::ALLOW_REMOTE_READ,
        )
        .map_err(err("register"))?
        .wait()
        .map_err(err("register"))?;
        let connector = adapter
            .create_connector()
            .map_err(err("create connector"))?;
        Ok(Self {
            adapter,
            cq,
            qp,
            connector,
            mr,
            buf,
        })
    }

    /// Listen on `addr`, take one connection, run `pre_accept` (post Receives), accept.
    pub(crate) fn serve(
        provider: &Provider,
        addr: SocketAddr,
        announce: bool,
        cfg: &EndpointConfig,
        pre_accept: impl FnOnce(&Self) -> Result<(), String>,
    ) -> Result<Self, String> {
        let ep = Self::open(provider, addr.ip(), cfg)?;
        let listener = ep
            .adapter
            .create_listener()
            .map_err(err("create listener"))?;
        listener.bind(addr).map_err(err("bind"))?;
        listener.listen(1).map_err(err("listen"))?;
        if announce {
            let a = listener.get_local_address().map_err(err("local address"))?;
            println!("LISTENING {a}");
            use std::io::Write;
            let _ = std::io::stdout().flush();
        }
        listener
            .get_connection_request(&ep.connector)
            .map_err(err("get connection request"))?
            .wait()
            .map_err(err("get connection request"))?;
        pre_accept(&ep)?;
        let (inbound, outbound) = cfg.read_limits;
        ep.connector
            .accept(&ep.qp, inbound, outbound, &[])
            .map_err(err("accept"))?
            .wait()
            .map_err(err("accept"))?;
        Ok(ep)
    }

    /// Connect to `dest`, run `pre_connect` (post Receives), complete the connection.
    pub(crate) fn connect(
        provider: &Provider,
        dest: SocketAddr,
        cfg: &EndpointConfig,
        pre_connect: impl FnOnce(&Self) -> Result<(), String>,
    ) -> Result<Self, String> {
        let local = resolve_local(dest)?;
        let ep = Self::open(provider, local, cfg)?;
        pre_connect(&ep)?;
        ep.connector
            .bind(SocketAddr::new(local, 0))
            .map_err(err("bind"))?;
        let (inbound, outbound) = cfg.read_limits;
        ep.connector
            .connect(&ep.qp, dest, inbound, outbound, &[])
            .map_err(err("connect"))?
            .wait()
            .map_err(err("connect"))?;
        ep.connector
            .complete_connect()
            .map_err(err("complete connect"))?
            .wait()
            .map_err(err("complete connect"))?;
        Ok(ep)
    }

    /// Spin on the CQ until one completion arrives; an error status is an error.
    pub(crate) fn poll_one(&self) -> Result<NdResult, String> {
        let mut r = [NdResult::EMPTY; 1];
        loop {
            if self.cq.get_results(&mut r) == 1 {
                if r[0].status != Status::SUCCESS {
                    return Err(format!(
                        "{:?} completed with {}",
                        r[0].request_type, r[0].status
                    ));
                }
                return Ok(r[0]);
            }
            std::hint::spin_loop();
        }
    }

    /// Disconnect and wait.
    pub(crate) fn shutdown(&self) {
        if let Ok(ov) = self.connector.disconnect() {
            let _ = ov.wait();
        }
    }
}

/// Latency percentiles over samples in nanoseconds.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub(crate) struct Latency {
    pub(crate) min_us: f64,
    pub(crate) median_us: f64,
    pub(crate) mean_us: f64,
    pub(crate) p99_us: f64,
    pub(crate) p999_us: f64,
    pub(crate) max_us: f64,
}

impl Latency {
    pub(crate) fn from_ns(samples: &mut [u64]) -> Self {
        samples.sort_unstable();
        let n = samples.len().max(1);
        let at = |q: f64| {
            samples
                .get(((n as f64 - 1.0) * q).round() as usize)
                .copied()
                .unwrap_or(0) as f64
                / 1000.0
        };
        let mean = samples.iter().map(|&s| s as f64).sum::<f64>() / n as f64 / 1000.0;
        Self {
            min_us: at(0.0),
            median_us: at(0.5),
            mean_us: mean,
            p99_us: at(0.99),
            p999_us: at(0.999),
            max_us: at(1.0),
        }
    }
}
