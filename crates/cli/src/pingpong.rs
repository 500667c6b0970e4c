//! `nd pingpong`: Send/Receive ping-pong latency, as Microsoft's ndpingpong measures it
//! (half a round trip), busy-polling the completion queue.

use std::time::Instant;

use netdirect::OpFlags;

use crate::common::{self, Endpoint, EndpointConfig, Latency, PeerArgs, Role};

/// Arguments of `nd pingpong`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    peer: PeerArgs,
    /// Message size in bytes.
    #[arg(long, default_value_t = 8)]
    size: usize,
    /// Timed iterations (each one round trip).
    #[arg(short = 'n', long = "iterations", default_value_t = 100_000)]
    iterations: u64,
    /// Untimed warm-up iterations.
    #[arg(long, default_value_t = 1000)]
    warmup: u64,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

/// Receives kept posted on each side.
const RECV_DEPTH: u32 = 16;
const SEND_CTX: u64 = u64::MAX;

pub(crate) fn run(args: &Args) -> Result<(), String> {
    if args.peer.loopback {
        let mut forward: Vec<String> = vec!["pingpong".into()];
        forward.extend([
            "--size".into(),
            args.size.to_string(),
            "-n".into(),
            args.iterations.to_string(),
        ]);
        forward.extend(["--warmup".into(), args.warmup.to_string()]);
        if let Some(p) = &args.peer.provider {
            forward.extend(["--provider".into(), p.clone()]);
        }
        if args.json {
            forward.push("--json".into());
        }
        return common::run_loopback(&forward);
    }
    if let Some(cpu) = args.peer.cpu {
        common::pin(cpu);
    }
    let provider = args.peer.provider()?;
    let size = args.size;
    // Receive slots follow the send area: [send | recv 0 | recv 1 | ...].
    let cfg = EndpointConfig {
        buf_len: size * (RECV_DEPTH as usize + 1),
        depth: RECV_DEPTH + 2,
        inline: 0,
        ..EndpointConfig::default()
    };
    let post_recvs = |ep: &Endpoint| -> Result<(), String> {
        for i in 0..RECV_DEPTH as usize {
            post_recv(ep, size, i)?;
        }
        Ok(())
    };
    let total = args.warmup + args.iterations;
    match args.peer.role()? {
        Role::Server(addr) => {
            let ep = Endpoint::serve(&provider, addr, args.peer.announce, &cfg, post_recvs)?;
            for _ in 0..total {
                let r = ep.poll_one()?;
                post_recv(&ep, size, r.request_context as usize)?;
                send(&ep, size)?;
                wait_send(&ep)?;
            }
            ep.shutdown();
        }
        Role::Client(dest) => {
            let ep = Endpoint::connect(&provider, dest, &cfg, post_recvs)?;
            let mut samples = vec![0u64; args.iterations as usize];
            for i in 0..total {
                let t0 = Instant::now();
                send(&ep, size)?;
                wait_send(&ep)?;
                let r = ep.poll_one()?;
                if r.request_context == SEND_CTX {
                    return Err("unexpected completion order".into());
                }
                post_recv(&ep, size, r.request_context as usize)?;
                if i >= args.warmup {
                    samples[(i - args.warmup) as usize] = t0.elapsed().as_nanos() as u64 / 2;
                }
            }
            ep.shutdown();
            let lat = Latency::from_ns(&mut samples);
            report(args, provider.name(), &lat);
        }
    }
    Ok(())
}

fn post_recv(ep: &Endpoint, size: usize, slot: usize) -> Result<(), String> {
    let off = size * (slot + 1);
    let sge = ep.buf.sge(off..off + size, ep.mr.get_local_token());
    // SAFETY: each receive slot is used by exactly one posted Receive and is read only after
    // its completion (it is never read at all: the payload is not checked here).
    unsafe { ep.qp.receive(slot as u64, &[sge]) }.map_err(|e| format!("receive: {e}"))
}

fn send(ep: &Endpoint, size: usize) -> Result<(), String> {
    let sge = ep.buf.sge(0..size, ep.mr.get_local_token());
    // SAFETY: the send area is not written while a Send is outstanding (we wait for each).
    unsafe { ep.qp.send(SEND_CTX, &[sge], OpFlags::empty()) }.map_err(|e| format!("send: {e}"))
}

fn wait_send(ep: &Endpoint) -> Result<(), String> {
    let r = ep.poll_one()?;
    if r.request_context != SEND_CTX {
        return Err("receive completed before the send".into());
    }
    Ok(())
}

fn report(args: &Args, provider: &str, lat: &Latency) {
    if args.json {
        let v = serde_json::json!({
            "provider": provider, "op": "send", "size": args.size, "iterations": args.iterations,
            "min_us": lat.min_us, "median_us": lat.median_us, "mean_us": lat.mean_us,
            "p99_us": lat.p99_us, "p999_us": lat.p999_us, "max_us": lat.max_us,
        });
        println!("{v}");
    } else {
        println!(
            "{:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "#bytes", "#iters", "t_min[us]", "t_typ[us]", "t_avg[us]", "99%[us]", "99.9%[us]"
        );
        println!(
            "{:>10} {:>10} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2}",
            args.size,
            args.iterations,
            lat.min_us,
            lat.median_us,
            lat.mean_us,
            lat.p99_us,
            lat.p999_us
        );
    }
}
