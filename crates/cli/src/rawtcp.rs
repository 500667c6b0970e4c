//! `nd tcp-pingpong`: the yardstick. A plain TCP ping-pong between two processes (TCP_NODELAY,
//! non-blocking receive spin), measured exactly like `nd pingpong`, so the two can be run side
//! by side and compared as a ratio.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

use crate::common::{self, Latency, PeerArgs, Role};

/// Arguments of `nd tcp-pingpong`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    peer: PeerArgs,
    /// Message size in bytes.
    #[arg(long, default_value_t = 8)]
    size: usize,
    /// Timed iterations.
    #[arg(short = 'n', long = "iterations", default_value_t = 100_000)]
    iterations: u64,
    /// Untimed warm-up iterations.
    #[arg(long, default_value_t = 1000)]
    warmup: u64,
    /// Block in recv instead of spinning.
    #[arg(long)]
    blocking: bool,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

fn xrecv(s: &mut TcpStream, buf: &mut [u8]) -> Result<(), String> {
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) => return Err("peer closed".into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                std::hint::spin_loop()
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

fn xsend(s: &mut TcpStream, buf: &[u8]) -> Result<(), String> {
    let mut sent = 0;
    while sent < buf.len() {
        match s.write(&buf[sent..]) {
            Ok(n) => sent += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                std::hint::spin_loop()
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

pub(crate) fn run(args: &Args) -> Result<(), String> {
    if args.peer.loopback {
        let mut f: Vec<String> = vec![
            "tcp-pingpong".into(),
            "--size".into(),
            args.size.to_string(),
        ];
        f.extend([
            "-n".into(),
            args.iterations.to_string(),
            "--warmup".into(),
            args.warmup.to_string(),
        ]);
        if args.blocking {
            f.push("--blocking".into());
        }
        if args.json {
            f.push("--json".into());
        }
        return common::run_loopback(&f);
    }
    if let Some(cpu) = args.peer.cpu {
        common::pin(cpu);
    }
    let mut buf = vec![1u8; args.size];
    let total = args.warmup + args.iterations;
    match args.peer.role()? {
        Role::Server(addr) => {
            let l = TcpListener::bind(addr).map_err(|e| e.to_string())?;
            if args.peer.announce {
                println!("LISTENING {}", l.local_addr().map_err(|e| e.to_string())?);
                let _ = std::io::stdout().flush();
            }
            let (mut s, _) = l.accept().map_err(|e| e.to_string())?;
            s.set_nodelay(true).map_err(|e| e.to_string())?;
            s.set_nonblocking(!args.blocking)
                .map_err(|e| e.to_string())?;
            for _ in 0..total {
                xrecv(&mut s, &mut buf)?;
                xsend(&mut s, &buf)?;
            }
        }
        Role::Client(dest) => {
            let mut s = TcpStream::connect(dest).map_err(|e| e.to_string())?;
            s.set_nodelay(true).map_err(|e| e.to_string())?;
            s.set_nonblocking(!args.blocking)
                .map_err(|e| e.to_string())?;
            let mut samples = vec![0u64; args.iterations as usize];
            for i in 0..total {
                let t0 = Instant::now();
                xsend(&mut s, &buf)?;
                xrecv(&mut s, &mut buf)?;
                if i >= args.warmup {
                    samples[(i - args.warmup) as usize] = t0.elapsed().as_nanos() as u64 / 2;
                }
            }
            let lat = Latency::from_ns(&mut samples);
            let op = if args.blocking {
                "raw-tcp-blocking"
            } else {
                "raw-tcp"
            };
            if args.json {
                let v = serde_json::json!({
                    "provider": "kernel-tcp", "op": op, "size": args.size, "iterations": args.iterations,
                    "min_us": lat.min_us, "median_us": lat.median_us, "mean_us": lat.mean_us,
                    "p99_us": lat.p99_us, "p999_us": lat.p999_us, "max_us": lat.max_us,
                });
                println!("{v}");
            } else {
                println!(
                    "raw TCP ping-pong {} bytes: median {:.2} us, p99 {:.2} us (half round trip)",
                    args.size, lat.median_us, lat.p99_us
                );
            }
        }
    }
    Ok(())
}
