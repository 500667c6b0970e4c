//! `nd`: NetworkDirect tools in the style of Microsoft's ND examples and perftest.

mod common;
mod info;
mod pingpong;
mod rawtcp;

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
}

fn main() {
    let cli = Cli::parse();
    let r = match cli.command {
        Command::Info(a) => info::run(&a),
        Command::Pingpong(a) => pingpong::run(&a),
        Command::TcpPingpong(a) => rawtcp::run(&a),
    };
    if let Err(e) = r {
        eprintln!("nd: {e}");
        std::process::exit(1);
    }
}
