//! `nd bench`: the one command a newcomer runs. On loopback (two processes pinned to
//! different cores), for every available provider, a short matrix: Send/Receive ping-pong
//! latency polling and blocking, RDMA Write ping-pong latency, Send throughput (ndping),
//! RDMA Write and Read throughput; and the raw kernel-TCP yardsticks measured the same way.
//! Each cell is a child `nd <tool> --loopback --json` run, so the numbers are exactly what
//! the individual tools print. A provider that does not support an operation yet shows
//! "n/a (ND_NOT_SUPPORTED)" in that cell; any other failure is shown and fails the run.
//!
//! JSON: the last line is an array with one object per cell: the tool's own object (see
//! [`Row`](crate::common::Row)) plus `test` (the cell's name) and `vs_tcp` (ratio to the
//! kernel-TCP yardstick of the same kind, when it ran: median latency ours / TCP, or
//! bandwidth ours / TCP); a failed cell has `test`, `provider`, `error` and
//! `not_supported`.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use netdirect::Provider;
use serde_json::{json, Value};

/// Arguments of `nd bench`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Only this provider (default: those ND_PROVIDER admits, else every provider).
    #[arg(long)]
    provider: Option<String>,
    /// A twentieth of the iterations: a smoke test, not a measurement.
    #[arg(long)]
    quick: bool,
    /// Print JSON: the last line is an array with one object per cell.
    #[arg(long)]
    json: bool,
}

/// One cell of the matrix.
struct Cell {
    test: &'static str,
    /// `nd` arguments after the tool name is chosen; `--loopback --json`, the provider and
    /// `-n` are added.
    args: &'static [&'static str],
    iterations: u64,
    /// Whether it runs once per provider (false: a kernel-TCP yardstick, run once).
    per_provider: bool,
    /// Latency (median µs) or bandwidth (MB/s).
    latency: bool,
    /// The yardstick cell it is compared with.
    yardstick: Option<&'static str>,
}

const TCP_LAT: &str = "tcp-pingpong 8 B";
const TCP_LAT_B: &str = "tcp-pingpong 8 B, blocking";
const TCP_BW: &str = "tcp-stream 1 MiB";
const TCP_BW_4K: &str = "tcp-stream 4 KiB";

#[rustfmt::skip]
const CELLS: &[Cell] = &[
    Cell { test: TCP_LAT, args: &["tcp-pingpong", "--size", "8"], iterations: 20_000, per_provider: false, latency: true, yardstick: None },
    Cell { test: TCP_LAT_B, args: &["tcp-pingpong", "--size", "8", "--blocking"], iterations: 5_000, per_provider: false, latency: true, yardstick: None },
    Cell { test: TCP_BW, args: &["tcp-stream", "--size", "1048576", "--spin"], iterations: 500, per_provider: false, latency: false, yardstick: None },
    Cell { test: TCP_BW_4K, args: &["tcp-stream", "--size", "4096", "--spin"], iterations: 20_000, per_provider: false, latency: false, yardstick: None },
    Cell { test: "pingpong 8 B", args: &["pingpong", "--size", "8"], iterations: 20_000, per_provider: true, latency: true, yardstick: Some(TCP_LAT) },
    Cell { test: "pingpong 8 B, blocking", args: &["pingpong", "--size", "8", "--blocking"], iterations: 5_000, per_provider: true, latency: true, yardstick: Some(TCP_LAT_B) },
    Cell { test: "rpingpong 8 B", args: &["rpingpong", "--size", "8"], iterations: 20_000, per_provider: true, latency: true, yardstick: Some(TCP_LAT) },
    Cell { test: "ping 4 KiB", args: &["ping", "--size", "4096"], iterations: 20_000, per_provider: true, latency: false, yardstick: Some(TCP_BW_4K) },
    Cell { test: "rping write 1 MiB", args: &["rping", "--op", "write", "--size", "1048576"], iterations: 500, per_provider: true, latency: false, yardstick: Some(TCP_BW) },
    Cell { test: "rping read 1 MiB", args: &["rping", "--op", "read", "--size", "1048576"], iterations: 500, per_provider: true, latency: false, yardstick: Some(TCP_BW) },
];

/// How long one cell may take before it is killed (it is a few seconds normally).
const CELL_TIMEOUT: Duration = Duration::from_secs(60);

pub(crate) fn run(args: &Args) -> Result<(), String> {
    let providers: Vec<&'static str> = crate::common::listed_providers(args.provider.as_deref())?
        .iter()
        .map(Provider::name)
        .collect();
    if !args.json {
        println!(
            "{:<28} {:<10} {:>10} {:>10} {:>10} {:>8}",
            "test", "provider", "median[us]", "p99[us]", "MB/s", "vs TCP"
        );
    }
    let mut out: Vec<Value> = Vec::new();
    let mut failed = false;
    for cell in CELLS {
        let targets: Vec<Option<&str>> = if cell.per_provider {
            providers.iter().map(|p| Some(*p)).collect()
        } else {
            vec![None]
        };
        for provider in targets {
            let n = if args.quick {
                (cell.iterations / 20).max(50)
            } else {
                cell.iterations
            };
            let mut v = match run_cell(cell, provider, n) {
                Ok(v) => v,
                Err(e) => {
                    let not_supported = e.contains("ND_NOT_SUPPORTED");
                    failed |= !not_supported;
                    json!({"test": cell.test, "provider": provider.unwrap_or("kernel-tcp"),
                           "error": e, "not_supported": not_supported})
                }
            };
            v["test"] = json!(cell.test);
            if let Some(r) = cell
                .yardstick
                .and_then(|y| ratio(&out, &v, y, cell.latency))
            {
                v["vs_tcp"] = json!(r);
            }
            if !args.json {
                print_row(&v);
            }
            out.push(v);
        }
    }
    if args.json {
        println!("{}", Value::Array(out));
    } else {
        println!(
            "vs TCP: median latency ours / raw TCP (lower is better), or bandwidth ours / raw \
             TCP (higher is better). Loopback, server and client pinned to different cores."
        );
    }
    if failed {
        return Err("some cells failed (see above)".into());
    }
    Ok(())
}

/// The ratio of `v` to the yardstick row `y` already in `out`.
fn ratio(out: &[Value], v: &Value, y: &str, latency: bool) -> Option<f64> {
    let base = out.iter().find(|r| r["test"] == y)?;
    let key = if latency { "median_us" } else { "mb_per_s" };
    let (a, b) = (v[key].as_f64()?, base[key].as_f64()?);
    (b > 0.0).then(|| a / b)
}

fn print_row(v: &Value) {
    let num = |k: &str, prec: usize| {
        v[k].as_f64()
            .map_or_else(|| "-".to_string(), |x| format!("{x:.prec$}"))
    };
    let test = v["test"].as_str().unwrap_or("?");
    let provider = v["provider"].as_str().unwrap_or("?");
    if let Some(e) = v["error"].as_str() {
        let cell = if v["not_supported"] == json!(true) {
            "n/a (ND_NOT_SUPPORTED)".to_string()
        } else {
            format!("failed: {e}")
        };
        println!("{test:<28} {provider:<10} {cell}");
        return;
    }
    println!(
        "{test:<28} {provider:<10} {:>10} {:>10} {:>10} {:>8}",
        num("median_us", 2),
        num("p99_us", 2),
        num("mb_per_s", 0),
        num("vs_tcp", 2)
    );
}

/// Run one cell as a child `nd` in its own process group (so a stuck run, grandchildren
/// included, can be killed as a whole) and parse the last line of its output.
fn run_cell(cell: &Cell, provider: Option<&str>, n: u64) -> Result<Value, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(exe);
    cmd.args(cell.args)
        .args(["--loopback", "--json", "-n", &n.to_string()]);
    if let Some(p) = provider {
        cmd.args(["--provider", p]);
    }
    let mut child = cmd
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let pid = child.id();
    let (mut stdout, mut stderr) = (child.stdout.take(), child.stderr.take());
    let (tx, rx) = mpsc::channel();
    // Collect the output on a helper thread so the timeout below can fire; it ends with the
    // child.
    std::thread::spawn(move || {
        let (mut o, mut e) = (String::new(), String::new());
        let err_reader = std::thread::spawn(move || {
            if let Some(s) = stderr.as_mut() {
                let _ = s.read_to_string(&mut e);
            }
            e
        });
        if let Some(s) = stdout.as_mut() {
            let _ = s.read_to_string(&mut o);
        }
        let e = err_reader.join().unwrap_or_default();
        let _ = tx.send((o, e, child.wait()));
    });
    let (o, e, status) = match rx.recv_timeout(CELL_TIMEOUT) {
        Ok(r) => r,
        Err(_) => {
            if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
            return Err(format!("timed out after {CELL_TIMEOUT:?}"));
        }
    };
    let ok = status.map_err(|e| e.to_string())?.success();
    let last = o.lines().last().unwrap_or_default();
    match serde_json::from_str::<Value>(last) {
        Ok(v) if ok && v.is_object() => Ok(v),
        _ => Err(e
            .lines()
            .filter(|l| !l.trim().is_empty())
            // The cell's own "nd: " prefixes: bench adds its own where it prints the error.
            .map(|l| l.strip_prefix("nd: ").unwrap_or(l))
            .collect::<Vec<_>>()
            .join("; ")),
    }
}
