//! `nd tcp-stream`: the yardstick for `nd rping`. A raw kernel-TCP stream of `size`-byte
//! messages between two processes (like `iperf3 -l <size>`): the client writes `iterations`
//! messages, the server reads them into one `size`-byte buffer, and acknowledges the last with
//! one byte; the time runs from the first write to that acknowledgement, which is when
//! `nd rping` would see its last Write complete.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

use crate::common::{self, PeerArgs, Role};

/// Arguments of `nd tcp-stream`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    peer: PeerArgs,
    /// Bytes per message (one `write` each).
    #[arg(long, default_value_t = 1 << 20)]
    size: usize,
    /// Timed messages (default: 4 GiB worth, at least 100).
    #[arg(short = 'n', long = "iterations")]
    iterations: Option<u64>,
    /// Untimed warm-up messages (default: a tenth of the timed ones).
    #[arg(long)]
    warmup: Option<u64>,
    /// Non-blocking sockets, spinning on EAGAIN (as `nd rping` polls), instead of blocking.
    #[arg(long)]
    spin: bool,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

fn io(what: &'static str) -> impl Fn(std::io::Error) -> String {
    move |e| format!("{what}: {e}")
}

fn read_exact(s: &mut TcpStream, mut buf: &mut [u8]) -> Result<(), String> {
    while !buf.is_empty() {
        match s.read(buf) {
            Ok(0) => return Err("peer closed".into()),
            Ok(n) => buf = &mut buf[n..],
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                std::hint::spin_loop()
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

fn write_all(s: &mut TcpStream, mut buf: &[u8]) -> Result<(), String> {
    while !buf.is_empty() {
        match s.write(buf) {
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                std::hint::spin_loop()
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

/// Read `count` messages of `buf.len()` bytes (reads may split or join them), then ack.
fn drain(s: &mut TcpStream, buf: &mut [u8], count: u64) -> Result<(), String> {
    let mut left = buf.len() as u64 * count;
    while left > 0 {
        let n = (left.min(buf.len() as u64)) as usize;
        match s.read(&mut buf[..n]) {
            Ok(0) => return Err("peer closed".into()),
            Ok(k) => left -= k as u64,
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                std::hint::spin_loop()
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    write_all(s, &[1])
}

pub(crate) fn run(args: &Args) -> Result<(), String> {
    let n = args
        .iterations
        .unwrap_or_else(|| ((4u64 << 30) / args.size.max(1) as u64).clamp(100, 10_000_000));
    let warmup = args.warmup.unwrap_or(n / 10);
    if args.peer.loopback {
        let mut f: Vec<String> = vec![
            "tcp-stream".into(),
            "--size".into(),
            args.size.to_string(),
            "-n".into(),
            n.to_string(),
            "--warmup".into(),
            warmup.to_string(),
        ];
        if args.spin {
            f.push("--spin".into());
        }
        if args.json {
            f.push("--json".into());
        }
        return common::run_loopback(&f);
    }
    if let Some(cpu) = args.peer.cpu {
        common::pin(cpu);
    }
    let mut buf = vec![0x5Au8; args.size.max(1)];
    match args.peer.role()? {
        Role::Server(addr) => {
            let l = TcpListener::bind(addr).map_err(io("bind"))?;
            if args.peer.announce {
                println!("LISTENING {}", l.local_addr().map_err(io("local address"))?);
                let _ = std::io::stdout().flush();
            }
            let (mut s, _) = l.accept().map_err(io("accept"))?;
            s.set_nodelay(true).map_err(io("nodelay"))?;
            s.set_nonblocking(args.spin).map_err(io("nonblocking"))?;
            drain(&mut s, &mut buf, warmup)?;
            drain(&mut s, &mut buf, n)?;
        }
        Role::Client(dest) => {
            let mut s = TcpStream::connect(dest).map_err(io("connect"))?;
            s.set_nodelay(true).map_err(io("nodelay"))?;
            s.set_nonblocking(args.spin).map_err(io("nonblocking"))?;
            let mut ack = [0u8; 1];
            for _ in 0..warmup {
                write_all(&mut s, &buf)?;
            }
            read_exact(&mut s, &mut ack)?;
            let t0 = Instant::now();
            for _ in 0..n {
                write_all(&mut s, &buf)?;
            }
            read_exact(&mut s, &mut ack)?;
            let secs = t0.elapsed().as_secs_f64();
            let mb_per_s = args.size as f64 * n as f64 / secs / 1e6;
            let msg_per_s = n as f64 / secs;
            let op = if args.spin { "stream-spin" } else { "stream" };
            if args.json {
                let v = serde_json::json!({
                    "provider": "kernel-tcp", "op": op, "size": args.size, "iterations": n,
                    "seconds": secs, "mb_per_s": mb_per_s, "msg_per_s": msg_per_s,
                });
                println!("{v}");
            } else {
                println!(
                    "raw TCP stream of {}-byte messages: {:.1} MB/s, {:.0} msg/s",
                    args.size, mb_per_s, msg_per_s
                );
            }
        }
    }
    Ok(())
}
