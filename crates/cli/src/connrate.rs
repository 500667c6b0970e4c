//! `nd connrate`: connection setup rate as connections accumulate, and what each connection
//! costs. Two processes on this host: this one connects `-n` connections one after another,
//! each to a queue pair of its own on one adapter, to a server child (this program again, with
//! `--serve`) that accepts each into a queue pair of its own; neither releases any. The rate
//! is reported over each stretch between the marks (`--marks`, default 1,000, 5,000 and
//! 10,000). Then one 8-byte message goes over every connection (the client's index), and the
//! server checks each arrived intact on its own connection. Resident memory and descriptors
//! per connection are each process's growth over the run, divided by the connections.
//!
//! `--raw` measures the yardstick the same way: kernel TCP connect, accept and one 8-byte
//! message per connection, all kept open.
//!
//! Each side polls for its connection steps, as the other `nd` tools do by default (an RDMA
//! application drives its connections the way it drives its data); `--blocking` sleeps on
//! each instead, which adds two cross-process wake-ups to every connection (the server's, for
//! the request, and the client's, for the reply) that raw TCP's connect does not wait for.
//!
//! Raise the descriptor limit first (`ulimit -n 20000` for 10,000 connections).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::Instant;

use netdirect::{Adapter, Buffer, MrFlags, NdResult, NotifyType, OpFlags, Provider, QueuePair};

/// Arguments of `nd connrate`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Provider name (default: ND_PROVIDER, else tcp).
    #[arg(long)]
    provider: Option<String>,
    /// Connections to make.
    #[arg(short = 'n', long, default_value_t = 10_000)]
    connections: usize,
    /// Where to report the rate (connection counts, ascending).
    #[arg(long, value_delimiter = ',', default_value = "1000,5000,10000")]
    marks: Vec<usize>,
    /// Raw kernel TCP instead of ND: connect + accept + one message each.
    #[arg(long)]
    raw: bool,
    /// Sleep on each connection step instead of polling.
    #[arg(long)]
    blocking: bool,
    /// Be the server child and print its address (set by the client).
    #[arg(long, hide = true)]
    serve: bool,
}

/// Resident bytes and open descriptors of this process.
fn usage() -> (u64, usize) {
    let rss = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0)
        * 4096;
    let fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count());
    (rss, fds)
}

fn ndfail(what: &str) -> impl Fn(netdirect::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

pub(crate) fn run(args: &Args) -> Result<(), String> {
    let n = args.connections;
    if n == 0 {
        return Err("-n must be at least 1".into());
    }
    if args.serve {
        return if args.raw {
            raw_server(n)
        } else {
            server(args, n)
        };
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(exe);
    cmd.arg("connrate")
        .arg("--serve")
        .arg("-n")
        .arg(n.to_string());
    if args.raw {
        cmd.arg("--raw");
    }
    if args.blocking {
        cmd.arg("--blocking");
    }
    if let Some(p) = &args.provider {
        cmd.args(["--provider", p]);
    }
    let me: Vec<String> = std::env::args().collect();
    println!("# {}", me.join(" "));
    println!("# {}", shown(&cmd));
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn server: {e}"))?;
    let mut out = BufReader::new(child.stdout.take().expect("piped"));
    let mut line = String::new();
    out.read_line(&mut line).map_err(|e| e.to_string())?;
    let addr: SocketAddr = line
        .trim()
        .strip_prefix("LISTENING ")
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| format!("server said {line:?}"))?;
    let before = usage();
    let result = if args.raw {
        raw_client(addr, n, &args.marks)
    } else {
        client(args, addr, n)
    };
    // The server reports once it has checked every message; it exits when our end of its
    // stdin closes.
    line.clear();
    let _ = out.read_line(&mut line);
    drop(child.stdin.take());
    let _ = child.wait();
    let (times, after) = result?;
    let server = line.trim().strip_prefix("SERVER ").map(|s| {
        let v: Vec<u64> = s
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        v
    });
    let what = if args.raw {
        "raw TCP".to_string()
    } else {
        args.provider.clone().unwrap_or_else(|| "default".into())
    };
    println!("# {what}: {n} connections, one verified 8-byte message on each");
    println!("{:>8} {:>10} {:>12}", "#conns", "conn/s", "stretch[s]");
    let mut last = (0usize, 0f64);
    for (k, t) in times {
        println!(
            "{k:>8} {:>10.0} {:>12.3}",
            (k - last.0) as f64 / (t - last.1),
            t - last.1
        );
        last = (k, t);
    }
    let per = |a: u64, b: u64| a.saturating_sub(b) as f64 / n as f64;
    println!(
        "client: {:.1} KiB resident and {:.2} descriptors per connection",
        per(after.0, before.0) / 1024.0,
        per(after.1 as u64, before.1 as u64)
    );
    match server {
        Some(v) if v.len() == 4 => println!(
            "server: {:.1} KiB resident and {:.2} descriptors per connection",
            per(v[2], v[0]) / 1024.0,
            per(v[3], v[1])
        ),
        _ => return Err(format!("server did not report: {line:?}")),
    }
    Ok(())
}

/// The command line, as a shell would take it.
fn shown(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Marks that apply: those up to `n`, and `n` itself.
fn marks_for(marks: &[usize], n: usize) -> Vec<usize> {
    let mut m: Vec<usize> = marks.iter().copied().filter(|&k| k < n).collect();
    m.push(n);
    m
}

type Outcome = Result<(Vec<(usize, f64)>, (u64, usize)), String>;

fn open(provider: Option<&str>) -> Result<(Provider, Adapter), String> {
    let p = match provider {
        Some(name) => Provider::select(name),
        None => Provider::from_env(),
    }
    .map_err(ndfail("open provider"))?;
    let a = p
        .open_adapter_for(SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0))
        .map_err(ndfail("open adapter"))?;
    Ok((p, a))
}

/// Take `want` completions from `cq`, sleeping on Notify between polls; each must succeed.
fn drain(cq: &netdirect::CompletionQueue, mut want: usize) -> Result<(), String> {
    let mut r = [NdResult::EMPTY; 64];
    while want > 0 {
        let got = cq.get_results(&mut r[..want.min(64)]);
        for x in &r[..got] {
            if x.status != netdirect::Status::SUCCESS {
                return Err(format!("a request failed: {:?}", x.status));
            }
        }
        want -= got;
        if want > 0 && got == 0 {
            let ov = match cq.notify(NotifyType::Any) {
                Ok(ov) => ov,
                // The queue overran (it keeps every completion): poll on.
                Err(e) if e.status() == netdirect::Status::BUFFER_OVERFLOW => continue,
                Err(e) => return Err(format!("notify: {e}")),
            };
            match crate::common::finish(&ov, true) {
                Err(e) if e.status() != netdirect::Status::BUFFER_OVERFLOW => {
                    return Err(format!("notify: {e}"))
                }
                _ => {}
            }
        }
    }
    Ok(())
}

fn client(args: &Args, to: SocketAddr, n: usize) -> Outcome {
    let (_p, a) = open(args.provider.as_deref())?;
    let cq = a
        .create_completion_queue(1024, 0, 0)
        .map_err(ndfail("create CQ"))?;
    let buf = Buffer::new(8 * n).map_err(|e| e.to_string())?;
    let mr = a.create_memory_region().map_err(ndfail("create MR"))?;
    crate::common::finish(
        &mr.register_buffer(&buf, MrFlags::ALLOW_LOCAL_WRITE)
            .map_err(ndfail("register"))?,
        true,
    )
    .map_err(ndfail("register"))?;
    let marks = marks_for(&args.marks, n);
    let mut times = Vec::new();
    let mut held: Vec<(QueuePair, netdirect::Connector)> = Vec::with_capacity(n);
    let start = Instant::now();
    for i in 0..n {
        let qp = a
            .create_queue_pair(&cq, &cq, i as u64, 1, 1, 1, 1, 0)
            .map_err(ndfail("create QP"))?;
        let c = a.create_connector().map_err(ndfail("create connector"))?;
        let ov = c.connect(&qp, to, 0, 0, &[]).map_err(ndfail("Connect"))?;
        crate::common::finish(&ov, args.blocking).map_err(|e| format!("Connect {i}: {e}"))?;
        let ov = c.complete_connect().map_err(ndfail("CompleteConnect"))?;
        crate::common::finish(&ov, args.blocking).map_err(ndfail("CompleteConnect"))?;
        held.push((qp, c));
        if marks.contains(&(i + 1)) {
            times.push((i + 1, start.elapsed().as_secs_f64()));
        }
    }
    let token = mr.get_local_token();
    for (i, (qp, _)) in held.iter().enumerate() {
        // SAFETY: slot `i` of `buf` is written before its Send is posted and not again; the
        // registration outlives the Sends, which complete in `drain` below.
        unsafe {
            buf.as_mut_slice()[8 * i..8 * i + 8].copy_from_slice(&(i as u64).to_le_bytes());
            qp.send(0, &[buf.sge(8 * i..8 * i + 8, token)], OpFlags::empty())
                .map_err(ndfail("Send"))?;
        }
        if i % 512 == 511 {
            drain(&cq, 512)?;
        }
    }
    drain(&cq, n % 512)?;
    let after = usage();
    Ok((times, after))
}

fn server(args: &Args, n: usize) -> Result<(), String> {
    let (_p, a) = open(args.provider.as_deref())?;
    let before = usage();
    // Every Receive may complete before the first is taken.
    let depth = (n as u32).clamp(1024, a.query().max_completion_queue_depth.max(1024));
    let cq = a
        .create_completion_queue(depth, 0, 0)
        .map_err(ndfail("create CQ"))?;
    let buf = Buffer::new(8 * n).map_err(|e| e.to_string())?;
    let mr = a.create_memory_region().map_err(ndfail("create MR"))?;
    crate::common::finish(
        &mr.register_buffer(&buf, MrFlags::ALLOW_LOCAL_WRITE)
            .map_err(ndfail("register"))?,
        true,
    )
    .map_err(ndfail("register"))?;
    let l = a.create_listener().map_err(ndfail("create listener"))?;
    l.bind(SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0))
        .map_err(ndfail("bind"))?;
    l.listen(0).map_err(ndfail("listen"))?;
    let at = l.get_local_address().map_err(ndfail("local address"))?;
    println!("LISTENING {at}");
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    let token = mr.get_local_token();
    let mut held = Vec::with_capacity(n);
    for i in 0..n {
        let qp = a
            .create_queue_pair(&cq, &cq, i as u64, 1, 1, 1, 1, 0)
            .map_err(ndfail("create QP"))?;
        // SAFETY: slot `i` is this Receive's alone; it is read only after every Receive
        // completed (`drain`).
        unsafe {
            qp.receive(i as u64, &[buf.sge(8 * i..8 * i + 8, token)])
                .map_err(ndfail("Receive"))?;
        }
        let c = a.create_connector().map_err(ndfail("create connector"))?;
        let ov = l
            .get_connection_request(&c)
            .map_err(ndfail("GetConnectionRequest"))?;
        crate::common::finish(&ov, args.blocking).map_err(ndfail("GetConnectionRequest"))?;
        let ov = c.accept(&qp, 0, 0, &[]).map_err(ndfail("Accept"))?;
        crate::common::finish(&ov, args.blocking).map_err(|e| format!("Accept {i}: {e}"))?;
        held.push((qp, c));
    }
    drain(&cq, n)?;
    // SAFETY: every Receive completed.
    let got = unsafe { buf.as_slice() };
    for i in 0..n {
        if got[8 * i..8 * i + 8] != (i as u64).to_le_bytes() {
            return Err(format!("connection {i}: wrong message"));
        }
    }
    report(before)
}

/// Print the SERVER line, then wait for the client to close our stdin.
fn report(before: (u64, usize)) -> Result<(), String> {
    let after = usage();
    println!("SERVER {} {} {} {}", before.0, before.1, after.0, after.1);
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    let _ = std::io::stdin().read(&mut [0u8; 1]);
    Ok(())
}

fn raw_server(n: usize) -> Result<(), String> {
    let before = usage();
    let l = raw_listener().map_err(|e| format!("raw listener: {e}"))?;
    println!("LISTENING {}", l.local_addr().map_err(|e| e.to_string())?);
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    let mut held = Vec::with_capacity(n);
    for i in 0..n {
        let (mut s, _) = l.accept().map_err(|e| e.to_string())?;
        let mut m = [0u8; 8];
        s.read_exact(&mut m).map_err(|e| e.to_string())?;
        if m != (i as u64).to_le_bytes() {
            return Err(format!("connection {i}: wrong message"));
        }
        held.push(s);
    }
    report(before)
}

/// A TCP listener on 127.0.0.1 with the kernel backlog the `tcp` provider's listeners get
/// (1,024; std's is smaller, and a full backlog drops SYNs, each costing the client a
/// one-second retransmission).
fn raw_listener() -> std::io::Result<TcpListener> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType};
    let s = rustix::net::socket_with(
        AddressFamily::INET,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    rustix::net::sockopt::set_socket_reuseaddr(&s, true)?;
    rustix::net::bind(&s, &SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0))?;
    rustix::net::listen(&s, 1024)?;
    Ok(TcpListener::from(s))
}

fn raw_client(to: SocketAddr, n: usize, marks: &[usize]) -> Outcome {
    let marks = marks_for(marks, n);
    let mut times = Vec::new();
    let mut held = Vec::with_capacity(n);
    let start = Instant::now();
    for i in 0..n {
        let mut s = TcpStream::connect(to).map_err(|e| format!("connect {i}: {e}"))?;
        s.set_nodelay(true).map_err(|e| e.to_string())?;
        s.write_all(&(i as u64).to_le_bytes())
            .map_err(|e| e.to_string())?;
        held.push(s);
        if marks.contains(&(i + 1)) {
            times.push((i + 1, start.elapsed().as_secs_f64()));
        }
    }
    Ok((times, usage()))
}
