//! Processes and addresses: pinning, loopback runs as two processes, the local address.

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, SocketAddr};
use std::process::{Command, Stdio};

/// Pin the calling process to `cpu`.
pub(crate) fn pin(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
        eprintln!("nd: cannot pin to cpu {cpu}: {e}");
    }
}

/// Run this same command line, minus `--loopback`, as a server child on cpu 1 and a client
/// child on cpu 0 over 127.0.0.1; the client's output is passed through, and the run fails if
/// either end fails.
pub(super) fn run_loopback() -> Result<(), String> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--loopback")
        .collect();
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (server_cpu, client_cpu) = if cpus > 1 { (1, 0) } else { (0, 0) };
    let mut server = Command::new(&exe)
        .args(&args)
        .args(["-s", "127.0.0.1:0", "--announce", "--cpu"])
        .arg(server_cpu.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn server: {e}"))?;
    let mut lines = BufReader::new(server.stdout.take().expect("piped"));
    let mut line = String::new();
    lines.read_line(&mut line).map_err(|e| e.to_string())?;
    let Some(addr) = line.trim().strip_prefix("LISTENING ") else {
        let _ = server.kill();
        let status = server.wait().map_err(|e| e.to_string())?;
        return Err(ended("server", status));
    };
    let client = Command::new(&exe)
        .args(&args)
        .args(["-c", addr, "--cpu"])
        .arg(client_cpu.to_string())
        .status()
        .map_err(|e| format!("spawn client: {e}"))?;
    if !client.success() {
        // The server may be waiting for a peer that will never come back.
        let _ = server.kill();
    }
    let server = server.wait().map_err(|e| e.to_string())?;
    if !client.success() {
        return Err(ended("client", client));
    }
    if !server.success() {
        return Err(ended("server", server));
    }
    Ok(())
}

/// The error of a loopback run whose `end` exited with `status`: empty (nothing more to
/// print) when the child reported its own error (exit code 1, see `main`), else what ended it.
fn ended(end: &str, status: std::process::ExitStatus) -> String {
    if status.code() == Some(1) {
        return String::new();
    }
    format!("the {end} ended with {status}")
}

/// The local address the kernel would use to reach `dest` (`NdResolveAddress`), as the ND
/// examples bind their connectors to it.
pub(crate) fn resolve_local(dest: SocketAddr) -> Result<IpAddr, String> {
    netdirect::support::resolve_address(dest)
        .map(|a| a.ip())
        .map_err(|e| format!("no local address reaches {dest}: {e}"))
}
