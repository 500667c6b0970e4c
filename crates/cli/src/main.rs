//! `nd`: NetworkDirect tools in the style of Microsoft's ND examples and perftest.
//!
//! Every tool that needs a peer runs as a server (`-s ADDR[:PORT]`), a client
//! (`-c ADDR[:PORT]`), or both ends on this host (`--loopback`: two processes pinned to
//! different cores). Options that must agree between the ends are exchanged when they
//! connect, and a mismatch fails both. `--json` makes the last line of output machine
//! readable (see `common::Row` for the keys).

mod bench;
mod cat;
mod common;
mod info;
mod mrlat;
mod mrrate;
mod ping;
mod pingpong;
mod rawshm;
mod rawstream;
mod rawtcp;
mod rping;
mod rpingpong;

use clap::{Parser, Subcommand};

/// NetworkDirect tools for Linux.
#[derive(Debug, Parser)]
#[command(name = "nd", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a short latency and bandwidth matrix over every provider on loopback, with the
    /// raw-TCP yardsticks, and print one table (start here).
    Bench(bench::Args),
    /// Providers, adapters, every ND2_ADAPTER_INFO field and every configuration variable
    /// (like ndadapterinfo and fi_info -e).
    Info(info::Args),
    /// Check the ND address catalog (like ndcat).
    Cat(cat::Args),
    /// One-way Send/Receive throughput with credit flow control (like ndping).
    Ping(ping::Args),
    /// Send/Receive ping-pong latency (like ndpingpong); latency is half a round trip.
    Pingpong(pingpong::Args),
    /// One-way RDMA Write or Read throughput with a pipeline of requests (like ndrping).
    Rping(rping::Args),
    /// RDMA Write ping-pong latency (like ndrpingpong): arrival is seen in the last byte of
    /// the buffer; latency is half a round trip.
    Rpingpong(rpingpong::Args),
    /// Memory registration and deregistration latency by size, one process (like ndmrlat).
    Mrlat(mrlat::Args),
    /// Memory registrations per second with several threads (like ndmrrate).
    Mrrate(mrrate::Args),
    /// Raw kernel-TCP ping-pong, measured like `pingpong`: the yardstick for latency.
    TcpPingpong(rawtcp::Args),
    /// Raw shared-memory ping-pong between two processes (one 64-byte line each way, no ND),
    /// measured like `pingpong`: the floor for `shm` latency.
    ShmPingpong(rawshm::Args),
    /// Raw kernel-TCP stream of fixed-size messages (like iperf3 -l): the yardstick for
    /// bandwidth.
    TcpStream(rawstream::Args),
}

/// Output piped into a reader that stopped (`nd info | head`) ends the process quietly, as the
/// default SIGPIPE action would (Rust ignores SIGPIPE, so the write fails and `println!`
/// panics instead); any other panic reports as usual.
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.contains("Broken pipe") {
            // 128 + SIGPIPE: what a shell reports for a process killed by it.
            std::process::exit(141);
        }
        default(info);
    }));
}

fn main() {
    quiet_on_broken_pipe();
    let cli = Cli::parse();
    let r = match cli.command {
        Command::Bench(a) => bench::run(&a),
        Command::Info(a) => info::run(&a),
        Command::Cat(a) => cat::run(&a),
        Command::Ping(a) => ping::run(&a),
        Command::Pingpong(a) => pingpong::run(&a),
        Command::Rping(a) => rping::run(&a),
        Command::Rpingpong(a) => rpingpong::run(&a),
        Command::Mrlat(a) => mrlat::run(&a),
        Command::Mrrate(a) => mrrate::run(&a),
        Command::TcpPingpong(a) => rawtcp::run(&a),
        Command::ShmPingpong(a) => rawshm::run(&a),
        Command::TcpStream(a) => rawstream::run(&a),
    };
    if let Err(e) = r {
        // Empty: a loopback child has printed the error already.
        if !e.is_empty() {
            eprintln!("nd: {e}");
        }
        std::process::exit(1);
    }
}
