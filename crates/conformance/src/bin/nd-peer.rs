//! `nd-peer <scenario> <server|client> <addr>`: run one role of one conformance scenario.
//!
//! The server listens on `<addr>` with port 0, prints `LISTENING <addr:port>` once listening,
//! and runs; the client connects to `<addr>` (with the port). The provider is `ND_PROVIDER`
//! (default `tcp`); with `ND_PEER_EXPORT_FD=1` every adapter's overlapped descriptor is
//! exported (`Adapter::fd`), as an event-loop application does. Exit status 0: every check passed; 1: a check failed (printed on standard
//! error); 2: bad usage. `nd-peer list` prints the scenarios.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;

use netdirect::Provider;
use netdirect_conformance::{find, Ctx, SCENARIOS, V1_SCENARIOS};

fn usage() -> ExitCode {
    eprintln!("usage: nd-peer <scenario> <server|client> <addr>   (nd-peer list: the scenarios)");
    ExitCode::from(2)
}

fn parse_addr(s: &str) -> Option<SocketAddr> {
    s.parse::<SocketAddr>().ok().or_else(|| {
        s.trim_matches(['[', ']'])
            .parse::<IpAddr>()
            .ok()
            .map(|ip| SocketAddr::new(ip, 0))
    })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("list") {
        for s in SCENARIOS.iter().chain(V1_SCENARIOS) {
            println!("{:32} {}", s.name, s.summary);
        }
        return ExitCode::SUCCESS;
    }
    let [name, role, addr] = args.as_slice() else {
        return usage();
    };
    let Some(scenario) = find(name) else {
        eprintln!("nd-peer: unknown scenario {name:?}");
        return usage();
    };
    let Some(addr) = parse_addr(addr) else {
        eprintln!("nd-peer: bad address {addr:?}");
        return usage();
    };
    let run = match role.as_str() {
        "server" => scenario.server,
        "client" => scenario.client,
        _ => return usage(),
    };
    let provider = match Provider::from_env() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("nd-peer: ND_PROVIDER: {e}");
            return ExitCode::from(2);
        }
    };
    let export_fd = std::env::var_os("ND_PEER_EXPORT_FD").is_some_and(|v| v == "1");
    let label = format!(
        "[provider={} family={} scenario={}{} role={role}]",
        provider.name(),
        if addr.is_ipv6() { "ipv6" } else { "ipv4" },
        scenario.name,
        if export_fd { " (fd exported)" } else { "" },
    );
    match run(&Ctx {
        provider,
        addr,
        export_fd,
    }) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("{label} FAILED: {f}");
            ExitCode::FAILURE
        }
    }
}
