//! `nd`: NetworkDirect tools in the style of Microsoft's ND examples and perftest.

mod common;
mod info;
mod pingpong;
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
    /// Providers, adapters, every ND2_ADAPTER_INFO field and the configuration variables
    /// (like ndadapterinfo and fi_info).
    Info(info::Args),
    /// Send/Receive ping-pong latency (like ndpingpong); latency is half a round trip.
    Pingpong(pingpong::Args),
    /// Raw kernel-TCP ping-pong, measured like `pingpong`: the yardstick for comparisons.
    TcpPingpong(rawtcp::Args),
    /// RDMA Write ping-pong latency (like ndrpingpong): arrival is seen by polling the last
    /// byte of the buffer; latency is half a round trip.
    Rpingpong(rpingpong::Args),
    /// One-way RDMA Write or Read throughput with a pipeline of requests (like ndrping).
    Rping(rping::Args),
    /// Raw kernel-TCP stream of fixed-size messages (like iperf3 -l): the yardstick for rping.
    TcpStream(rawstream::Args),
}

fn main() {
    let cli = Cli::parse();
    let r = match cli.command {
        Command::Info(a) => info::run(&a),
        Command::Pingpong(a) => pingpong::run(&a),
        Command::TcpPingpong(a) => rawtcp::run(&a),
        Command::Rpingpong(a) => rpingpong::run(&a),
        Command::Rping(a) => rping::run(&a),
        Command::TcpStream(a) => rawstream::run(&a),
    };
    if let Err(e) = r {
        eprintln!("nd: {e}");
        std::process::exit(1);
    }
}
