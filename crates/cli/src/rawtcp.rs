//! `nd tcp-pingpong`: the yardstick. A plain TCP ping-pong between two processes
//! (TCP_NODELAY), measured exactly like `nd pingpong`, so the two can be run side by side and
//! compared as a ratio. Polling spins on non-blocking `recv`; `--blocking` sleeps in a
//! blocking `recv` (one wake-up per message, the floor `nd pingpong --blocking` is held to).
//!
//! JSON: the [`Row`] latency keys; `provider` = `kernel-tcp`, `op` =
//! `raw-tcp`.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};

use crate::common::{self, Defaults, Laps, PeerArgs, Report, Role, Row, SizeArgs, LAT_COLS};

/// Arguments of `nd tcp-pingpong`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    peer: PeerArgs,
    #[command(flatten)]
    sizes: SizeArgs,
}

const DEFAULTS: Defaults = Defaults::new(8, 100_000, 256 << 20);

/// Fill `buf` from the stream; a non-blocking socket spins on `EAGAIN`.
pub(crate) fn recv_all(s: &mut TcpStream, mut buf: &mut [u8]) -> Result<(), String> {
    while !buf.is_empty() {
        match s.read(buf) {
            Ok(0) => return Err("peer closed".into()),
            Ok(n) => buf = &mut buf[n..],
            // Spin with no PAUSE, as `nd`'s own polling loops (common::endpoint).
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

/// Write all of `buf`; a non-blocking socket spins on `EAGAIN`.
pub(crate) fn send_all(s: &mut TcpStream, mut buf: &[u8]) -> Result<(), String> {
    while !buf.is_empty() {
        match s.write(buf) {
            Ok(n) => buf = &buf[n..],
            // Spin with no PAUSE, as `nd`'s own polling loops (common::endpoint).
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

/// Connect or accept one stream for a yardstick run, exchange and check `settings`, then
/// set TCP_NODELAY and the polling/blocking mode.
pub(crate) fn open_stream(
    role: Role,
    peer: &PeerArgs,
    settings: &str,
    nonblocking: bool,
) -> Result<TcpStream, String> {
    let io = |what: &'static str| move |e: std::io::Error| format!("{what}: {e}");
    let (mut s, client) = match role {
        Role::Server(addr) => {
            let l = TcpListener::bind(addr).map_err(io("bind"))?;
            if peer.announce {
                println!("LISTENING {}", l.local_addr().map_err(io("local address"))?);
                let _ = std::io::stdout().flush();
            }
            (l.accept().map_err(io("accept"))?.0, false)
        }
        Role::Client(dest) => (TcpStream::connect(dest).map_err(io("connect"))?, true),
    };
    s.set_nodelay(true).map_err(io("nodelay"))?;
    common::exchange_tcp_settings(&mut s, settings, client)?;
    s.set_nonblocking(nonblocking).map_err(io("nonblocking"))?;
    Ok(s)
}

pub(crate) fn run(args: &Args) -> Result<(), String> {
    args.peer.once_only("tcp-pingpong")?;
    let Some(role) = args.peer.start()? else {
        return Ok(());
    };
    let plan = args.sizes.plan(DEFAULTS)?;
    let settings = common::settings("tcp-pingpong", &args.peer, &plan, &[]);
    let mut s = open_stream(role, &args.peer, &settings, !args.peer.blocking)?;
    let mut buf = vec![1u8; plan.max_size()];
    let mut report = Report::new(args.peer.json, plan.sweep, LAT_COLS);
    for &(size, n) in &plan.rounds {
        let warmup = plan.warmup_for(n);
        let buf = &mut buf[..size];
        match role {
            Role::Server(_) => {
                for _ in 0..warmup + n {
                    recv_all(&mut s, buf)?;
                    send_all(&mut s, buf)?;
                }
            }
            Role::Client(_) => {
                let mut laps = Laps::time(warmup, n, || {
                    send_all(&mut s, buf)?;
                    recv_all(&mut s, buf)
                })?;
                let row = Row::new(
                    "tcp-pingpong",
                    "kernel-tcp",
                    "raw-tcp",
                    args.peer.mode(),
                    size,
                    n,
                );
                report.push(&row.latency(laps.samples()));
            }
        }
    }
    report.finish();
    Ok(())
}
