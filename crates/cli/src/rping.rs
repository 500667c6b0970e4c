//! `nd rping`: one-way RDMA Write or Read throughput, as Microsoft's ndrping measures it
//! (nd-reference.md §5.3): the server advertises a buffer once; the client keeps a pipeline of
//! requests outstanding against the same remote address and reposts one per completion. The
//! server only drives its I/O (it polls its completion queue for the client's final message).

use std::time::Instant;

use netdirect::{NdResult, OpFlags, Sge, Status};

use crate::common::{self, Endpoint, EndpointConfig, PeerArgs, Role};

/// Which one-sided operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Op {
    Write,
    Read,
}

/// Arguments of `nd rping`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    peer: PeerArgs,
    /// RDMA Write (default) or Read; give the server the same choice.
    #[arg(long, value_enum, default_value_t = Op::Write)]
    op: Op,
    /// Bytes per request.
    #[arg(long, default_value_t = 65536)]
    size: usize,
    /// Timed requests (default: 4 GiB worth, at least 100).
    #[arg(short = 'n', long = "iterations")]
    iterations: Option<u64>,
    /// Untimed warm-up requests (default: a tenth of the timed ones).
    #[arg(long)]
    warmup: Option<u64>,
    /// Requests kept outstanding.
    #[arg(short = 'q', long, default_value_t = 16)]
    pipeline: u32,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

const INFO_RECV: u64 = 1;
const INFO_SEND: u64 = 2;
const DONE: u64 = 3;
const OP_CTX: u64 = 4;
const INFO_LEN: usize = 16;

fn iterations(args: &Args) -> (u64, u64) {
    let n = args
        .iterations
        .unwrap_or_else(|| ((4u64 << 30) / args.size.max(1) as u64).clamp(100, 10_000_000));
    (n, args.warmup.unwrap_or(n / 10))
}

pub(crate) fn run(args: &Args) -> Result<(), String> {
    let (n, warmup) = iterations(args);
    if args.peer.loopback {
        let mut f: Vec<String> = vec![
            "rping".into(),
            "--op".into(),
            match args.op {
                Op::Write => "write".into(),
                Op::Read => "read".into(),
            },
            "--size".into(),
            args.size.to_string(),
            "-n".into(),
            n.to_string(),
            "--warmup".into(),
            warmup.to_string(),
            "-q".into(),
            args.pipeline.to_string(),
        ];
        if let Some(p) = &args.peer.provider {
            f.extend(["--provider".into(), p.clone()]);
        }
        if args.json {
            f.push("--json".into());
        }
        return common::run_loopback(&f);
    }
    if let Some(cpu) = args.peer.cpu {
        common::pin(cpu);
    }
    let provider = args.peer.provider()?;
    let size = args.size;
    let data = size.max(1).next_multiple_of(64);
    let info_slot = data;
    match args.peer.role()? {
        Role::Server(addr) => {
            let adapter_ird = 128;
            let cfg = EndpointConfig {
                buf_len: data + 64,
                depth: 4,
                inline: 0,
                // ndrping: Accept(MaxInboundReadLimit, 0) in read mode.
                read_limits: if args.op == Op::Read {
                    (adapter_ird, 0)
                } else {
                    (0, 0)
                },
            };
            let ep = Endpoint::serve(&provider, addr, args.peer.announce, &cfg, |ep| {
                post_info_recv(ep, info_slot, DONE)
            })?;
            send_info(&ep)?;
            // Busy-poll until the client's final message: every poll drives the I/O that
            // places the client's Writes and answers its Reads.
            loop {
                let r = ep.poll_one()?;
                if r.request_context == DONE {
                    break;
                }
            }
            ep.shutdown();
        }
        Role::Client(dest) => {
            let depth = args.pipeline + 4;
            let cfg = EndpointConfig {
                buf_len: data + 64,
                depth,
                inline: 256,
                read_limits: if args.op == Op::Read {
                    (0, args.pipeline)
                } else {
                    (0, 0)
                },
            };
            let ep = Endpoint::connect(&provider, dest, &cfg, |ep| {
                post_info_recv(ep, info_slot, INFO_RECV)
            })?;
            let (token, remote) = wait_info(&ep, info_slot)?;
            let inline = args.op == Op::Write
                && size <= ep.adapter.query().inline_request_threshold as usize;
            let pump = |count: u64| -> Result<(), String> {
                pipeline(
                    &ep,
                    args.op,
                    size,
                    token,
                    remote,
                    inline,
                    args.pipeline,
                    count,
                )
            };
            pump(warmup)?;
            let t0 = Instant::now();
            pump(n)?;
            let secs = t0.elapsed().as_secs_f64();
            // Tell the server we are done (a zero-byte Send) and wait for it to leave.
            // SAFETY: a zero-byte Send names no memory.
            unsafe { ep.qp.send(DONE, &[], OpFlags::empty()) }.map_err(|e| format!("send: {e}"))?;
            let r = ep.poll_one()?;
            if r.request_context != DONE {
                return Err("unexpected completion after the run".into());
            }
            ep.shutdown();
            let bytes = size as f64 * n as f64;
            let mb_per_s = bytes / secs / 1e6;
            let msg_per_s = n as f64 / secs;
            let op = match args.op {
                Op::Write => "write",
                Op::Read => "read",
            };
            if args.json {
                let v = serde_json::json!({
                    "provider": provider.name(), "op": op, "size": size, "iterations": n,
                    "pipeline": args.pipeline, "seconds": secs,
                    "mb_per_s": mb_per_s, "msg_per_s": msg_per_s,
                });
                println!("{v}");
            } else {
                println!(
                    "{:>10} {:>10} {:>8} {:>12} {:>12}",
                    "#bytes", "#iters", "op", "MB/s", "msg/s"
                );
                println!(
                    "{:>10} {:>10} {:>8} {:>12.1} {:>12.0}",
                    size, n, op, mb_per_s, msg_per_s
                );
            }
        }
    }
    Ok(())
}

/// Keep `depth` requests outstanding until `count` have completed.
#[allow(clippy::too_many_arguments)]
fn pipeline(
    ep: &Endpoint,
    op: Op,
    size: usize,
    token: u32,
    remote: u64,
    inline: bool,
    depth: u32,
    count: u64,
) -> Result<(), String> {
    let sge = [ep.buf.sge(0..size, ep.mr.get_local_token())];
    let sge: &[Sge] = if size == 0 { &[] } else { &sge };
    let flags = if inline {
        OpFlags::INLINE
    } else {
        OpFlags::empty()
    };
    let (mut posted, mut done, mut outstanding) = (0u64, 0u64, 0u32);
    let mut r = [NdResult::EMPTY; 32];
    while done < count {
        while outstanding < depth && posted < count {
            // SAFETY: the buffer is registered; its bytes are neither checked nor changed while
            // requests use it (ndrping reads and writes the same buffer concurrently too).
            let res = unsafe {
                match op {
                    Op::Write => ep.qp.write(OP_CTX, sge, remote, token, flags),
                    Op::Read => ep.qp.read(OP_CTX, sge, remote, token, OpFlags::empty()),
                }
            };
            res.map_err(|e| format!("post: {e}"))?;
            posted += 1;
            outstanding += 1;
        }
        let k = ep.cq.get_results(&mut r);
        for c in &r[..k] {
            if c.status != Status::SUCCESS || c.request_context != OP_CTX {
                return Err(format!(
                    "{:?} completed with {} (context {:#x})",
                    c.request_type, c.status, c.request_context
                ));
            }
        }
        done += k as u64;
        outstanding -= k as u32;
    }
    Ok(())
}

fn post_info_recv(ep: &Endpoint, slot: usize, ctx: u64) -> Result<(), String> {
    let sge = ep.buf.sge(slot..slot + INFO_LEN, ep.mr.get_local_token());
    // SAFETY: the slot is read only after this Receive completes.
    unsafe { ep.qp.receive(ctx, &[sge]) }.map_err(|e| format!("receive: {e}"))
}

/// The server's buffer info, as ndrping's PeerInfo: remote token, then the address.
fn send_info(ep: &Endpoint) -> Result<(), String> {
    let mut info = [0u8; INFO_LEN];
    info[..4].copy_from_slice(&ep.mr.get_remote_token().to_ne_bytes());
    info[8..].copy_from_slice(&(ep.buf.as_ptr() as u64).to_le_bytes());
    let sge = Sge::new(info.as_ptr() as *mut u8, INFO_LEN as u32, 0);
    // SAFETY: INLINE: `info` is read during the call only.
    unsafe { ep.qp.send(INFO_SEND, &[sge], OpFlags::INLINE) }.map_err(|e| format!("send: {e}"))?;
    let r = ep.poll_one()?;
    if r.request_context != INFO_SEND {
        return Err("unexpected completion before the run".into());
    }
    Ok(())
}

fn wait_info(ep: &Endpoint, slot: usize) -> Result<(u32, u64), String> {
    let r = ep.poll_one()?;
    if r.request_context != INFO_RECV || r.bytes_transferred as usize != INFO_LEN {
        return Err("no buffer info from the server".into());
    }
    // SAFETY: the Receive into the slot completed; nothing writes it any more.
    let b = unsafe { &ep.buf.as_slice()[slot..slot + INFO_LEN] };
    Ok((
        u32::from_ne_bytes(b[..4].try_into().expect("4 bytes")),
        u64::from_le_bytes(b[8..].try_into().expect("8 bytes")),
    ))
}
