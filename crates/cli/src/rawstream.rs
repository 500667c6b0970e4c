//! `nd tcp-stream`: the yardstick for `nd rping` and `nd ping`. A raw kernel-TCP stream of
//! `size`-byte messages between two processes (like `iperf3 -l`): the client writes
//! `iterations` messages, the server reads them into one `size`-byte buffer and acknowledges
//! the last with one byte; the time runs from the first write to that acknowledgement, which
//! is when `nd rping` would see its last Write complete. Blocking sockets by default;
//! `--spin` spins on `EAGAIN` as `nd rping` polls.
//!
//! JSON: the [`Row`] throughput keys; `provider` = `kernel-tcp`, `op` =
//! `stream`.

use std::net::TcpStream;
use std::time::Instant;

use crate::common::{self, Defaults, PeerArgs, Report, Role, Row, SizeArgs, BW_COLS};
use crate::rawtcp::{open_stream, recv_all, send_all};

/// Arguments of `nd tcp-stream`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    peer: PeerArgs,
    #[command(flatten)]
    sizes: SizeArgs,
    /// Non-blocking sockets, spinning on EAGAIN (as `nd rping` polls), instead of blocking.
    #[arg(long)]
    spin: bool,
}

/// 1 MiB messages, 4 GiB per size.
const DEFAULTS: Defaults = Defaults::new(1 << 20, 10_000_000, 4 << 30);

/// Read `count` messages of `buf.len()` bytes (reads may split or join them), then ack.
fn drain(s: &mut TcpStream, buf: &mut [u8], count: u64) -> Result<(), String> {
    let mut left = buf.len() as u64 * count;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        recv_all(s, &mut buf[..n])?;
        left -= n as u64;
    }
    send_all(s, &[1])
}

pub(crate) fn run(args: &Args) -> Result<(), String> {
    args.peer.once_only("tcp-stream")?;
    let Some(role) = args.peer.start()? else {
        return Ok(());
    };
    let plan = args.sizes.plan(DEFAULTS)?;
    let mode = if args.spin { "poll" } else { "blocking" };
    let settings = common::settings("tcp-stream", &args.peer, &plan, &[("io", mode.into())]);
    let mut s = open_stream(role, &args.peer, &settings, args.spin)?;
    let mut buf = vec![0x5Au8; plan.max_size().max(1)];
    let mut report = Report::new(args.peer.json, plan.sweep, BW_COLS);
    for &(size, n) in &plan.rounds {
        let warmup = plan.warmup_for(n);
        let buf = &mut buf[..size.max(1)];
        match role {
            Role::Server(_) => {
                drain(&mut s, buf, warmup)?;
                drain(&mut s, buf, n)?;
            }
            Role::Client(_) => {
                let mut ack = [0u8; 1];
                for _ in 0..warmup {
                    send_all(&mut s, buf)?;
                }
                recv_all(&mut s, &mut ack)?;
                let t0 = Instant::now();
                for _ in 0..n {
                    send_all(&mut s, buf)?;
                }
                recv_all(&mut s, &mut ack)?;
                let secs = t0.elapsed().as_secs_f64();
                let row = Row::new("tcp-stream", "kernel-tcp", "stream", mode, buf.len(), n);
                report.push(&row.throughput(n, secs));
            }
        }
    }
    report.finish();
    Ok(())
}
