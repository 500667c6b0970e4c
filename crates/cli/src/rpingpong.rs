//! `nd rpingpong`: RDMA Write ping-pong latency, as Microsoft's ndrpingpong measures it
//! (nd-reference.md §5.4): each side writes `size` bytes into the peer's buffer with an RDMA
//! Write, and detects the peer's Write by polling the last byte of its own buffer (the
//! provider places a Write in order, so the last byte lands last). The polling loop also
//! polls the completion queue, so the polling thread drives the I/O. Reported like
//! `nd pingpong`: half a round trip.

use std::time::Instant;

use netdirect::{NdResult, OpFlags, RequestType, Sge, Status};

use crate::common::{self, Endpoint, EndpointConfig, Latency, PeerArgs, Role};

/// Arguments of `nd rpingpong`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    peer: PeerArgs,
    /// Message size in bytes (at least 1: the last byte signals arrival).
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

const INFO_RECV: u64 = 1;
const INFO_SEND: u64 = 2;
const WRITE_CTX: u64 = 3;
/// The values each side puts in the last byte (ndrpingpong's 'X' and 'Y').
const CLIENT_VAL: u8 = b'X';
const SERVER_VAL: u8 = b'Y';
/// `PeerInfo` (nd-reference.md §1.10): remote token, then the buffer address.
const INFO_LEN: usize = 16;

pub(crate) fn run(args: &Args) -> Result<(), String> {
    if args.size == 0 {
        return Err("--size must be at least 1".into());
    }
    if args.peer.loopback {
        let mut f: Vec<String> = vec!["rpingpong".into(), "--size".into(), args.size.to_string()];
        f.extend([
            "-n".into(),
            args.iterations.to_string(),
            "--warmup".into(),
            args.warmup.to_string(),
        ]);
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
    // [data | info received | info sent]
    let data = size.next_multiple_of(64);
    let cfg = EndpointConfig {
        buf_len: data + 2 * 64,
        depth: 8,
        inline: 256,
        read_limits: (0, 0),
    };
    let total = args.warmup + args.iterations;
    let post_info_recv = |ep: &Endpoint| -> Result<(), String> {
        let sge = ep.buf.sge(data..data + INFO_LEN, ep.mr.get_local_token());
        // SAFETY: the info slot is read only after this Receive completes.
        unsafe { ep.qp.receive(INFO_RECV, &[sge]) }.map_err(|e| format!("receive: {e}"))
    };
    match args.peer.role()? {
        Role::Server(addr) => {
            let ep = Endpoint::serve(&provider, addr, args.peer.announce, &cfg, post_info_recv)?;
            let peer = exchange(&ep, data, false)?;
            let mut writing = false;
            for _ in 0..total {
                spin(&ep, size, CLIENT_VAL, &mut writing)?;
                write(&ep, size, &peer, SERVER_VAL, &mut writing)?;
            }
            // The last Write completes once the client's next progress answers its probe (or
            // is flushed when the client goes away).
            while writing {
                let r = poll(&ep)?;
                if r.is_some_and(|r| r.request_context == WRITE_CTX) {
                    writing = false;
                }
            }
            ep.shutdown();
        }
        Role::Client(dest) => {
            let ep = Endpoint::connect(&provider, dest, &cfg, post_info_recv)?;
            let peer = exchange(&ep, data, true)?;
            let mut samples = vec![0u64; args.iterations as usize];
            let mut writing = false;
            for i in 0..total {
                let t0 = Instant::now();
                write(&ep, size, &peer, CLIENT_VAL, &mut writing)?;
                spin(&ep, size, SERVER_VAL, &mut writing)?;
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

/// The peer's buffer.
struct Peer {
    token: u32,
    addr: u64,
}

/// Poll the CQ once; an error completion is an error (ND_CANCELED at the very end is fine
/// for the caller to treat as done).
fn poll(ep: &Endpoint) -> Result<Option<NdResult>, String> {
    let mut r = [NdResult::EMPTY; 1];
    if ep.cq.get_results(&mut r) == 0 {
        return Ok(None);
    }
    if r[0].status != Status::SUCCESS && r[0].status != Status::CANCELED {
        return Err(format!(
            "{:?} completed with {}",
            r[0].request_type, r[0].status
        ));
    }
    Ok(Some(r[0]))
}

/// The byte at `i` of the buffer, as it is in memory now.
fn byte(ep: &Endpoint, i: usize) -> u8 {
    assert!(i < ep.buf.len());
    // SAFETY: in bounds (checked above). The provider places the peer's Writes on this
    // thread, inside the `get_results` calls of the same loop, so the read never races a
    // write; `read_volatile` keeps the compiler from caching it across those calls.
    unsafe { ep.buf.as_ptr().add(i).read_volatile() }
}

/// Spin until the last byte holds `want` and our previous Write has completed, polling the
/// completion queue in the same loop (which drives the I/O).
fn spin(ep: &Endpoint, size: usize, want: u8, writing: &mut bool) -> Result<(), String> {
    loop {
        if byte(ep, size - 1) == want && !*writing {
            return Ok(());
        }
        if let Some(r) = poll(ep)? {
            if r.request_context == WRITE_CTX {
                *writing = false;
            }
        }
        std::hint::spin_loop();
    }
}

/// Mark the last byte with `val` and Write the first `size` bytes to the peer.
fn write(
    ep: &Endpoint,
    size: usize,
    peer: &Peer,
    val: u8,
    writing: &mut bool,
) -> Result<(), String> {
    // SAFETY: in bounds; the previous Write from this buffer has completed (`spin` waited),
    // and the peer writes it only after receiving this one.
    unsafe { ep.buf.as_ptr().add(size - 1).write_volatile(val) };
    let inline = size <= ep.adapter.query().inline_request_threshold as usize;
    let flags = if inline {
        OpFlags::INLINE
    } else {
        OpFlags::empty()
    };
    let sge = ep.buf.sge(0..size, ep.mr.get_local_token());
    // SAFETY: the buffer is registered and left alone until the Write completes.
    unsafe { ep.qp.write(WRITE_CTX, &[sge], peer.addr, peer.token, flags) }
        .map_err(|e| format!("write: {e}"))?;
    *writing = true;
    Ok(())
}

fn send_info(ep: &Endpoint) -> Result<(), String> {
    let mut info = [0u8; INFO_LEN];
    info[..4].copy_from_slice(&ep.mr.get_remote_token().to_ne_bytes());
    info[8..].copy_from_slice(&(ep.buf.as_ptr() as u64).to_le_bytes());
    let sge = Sge::new(info.as_ptr() as *mut u8, INFO_LEN as u32, 0);
    // SAFETY: INLINE: `info` is read during the call only.
    unsafe { ep.qp.send(INFO_SEND, &[sge], OpFlags::INLINE) }.map_err(|e| format!("send: {e}"))
}

/// Trade buffer info: the client sends first (iWARP: the active side speaks first), the server
/// answers once it has the client's.
fn exchange(ep: &Endpoint, data: usize, client: bool) -> Result<Peer, String> {
    if client {
        send_info(ep)?;
    }
    let (mut peer, mut sent) = (None, false);
    loop {
        let r = ep.poll_one()?;
        match r.request_type {
            RequestType::Receive => {
                if r.bytes_transferred as usize != INFO_LEN {
                    return Err(format!("peer info of {} bytes", r.bytes_transferred));
                }
                let b: Vec<u8> = (0..INFO_LEN).map(|i| byte(ep, data + i)).collect();
                peer = Some(Peer {
                    token: u32::from_ne_bytes(b[..4].try_into().expect("4 bytes")),
                    addr: u64::from_le_bytes(b[8..].try_into().expect("8 bytes")),
                });
                if !client {
                    send_info(ep)?;
                }
            }
            RequestType::Send => sent = true,
            other => return Err(format!("unexpected {other:?} completion")),
        }
        if sent {
            if let Some(p) = peer.take() {
                return Ok(p);
            }
        }
    }
}

fn report(args: &Args, provider: &str, lat: &Latency) {
    if args.json {
        let v = serde_json::json!({
            "provider": provider, "op": "write", "size": args.size, "iterations": args.iterations,
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
