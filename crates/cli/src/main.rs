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
mod connrate;
mod info;
mod mrlat;
mod mrrate;
mod ndk_endpoint;
mod ndk_pingpong;
mod ndk_rping;
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
    /// Connection setup rate as connections accumulate (1k/5k/10k), beside raw TCP, with
    /// memory and descriptors per connection and one verified message on each.
    Connrate(connrate::Args),
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
        Command::Connrate(a) => connrate::run(&a),
    };
    if let Err(e) = r {
        // Empty: a loopback child has printed the error already.
        if !e.is_empty() {
            eprintln!("nd: {e}");
        }
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};
    use proptest::prelude::*;

    use super::Cli;
    use crate::common::{parse_endpoint, Defaults, SizeArgs};

    /// Words an `nd` command line is made of: every subcommand, the options, values that are
    /// valid, out of range or malformed.
    const WORDS: &[&str] = &[
        "bench",
        "info",
        "cat",
        "ping",
        "pingpong",
        "rping",
        "rpingpong",
        "mrlat",
        "mrrate",
        "tcp-pingpong",
        "shm-pingpong",
        "tcp-stream",
        "-s",
        "-c",
        "--loopback",
        "--provider",
        "--size",
        "-a",
        "--all",
        "-n",
        "--iters",
        "--warmup",
        "-q",
        "--op",
        "read",
        "write",
        "-b",
        "-e",
        "--blocking",
        "--json",
        "--forever",
        "--repost-first",
        "--cpu",
        "--announce",
        "--quick",
        "--help",
        "-h",
        "--version",
        "tcp",
        "shm",
        "bogus",
        "0",
        "1",
        "-1",
        "8",
        "4294967296",
        "18446744073709551615",
        "18446744073709551616",
        "127.0.0.1",
        "127.0.0.1:0",
        "[::1]:18515",
        "::1",
        "0.0.0.0",
        "localhost:18515",
        "",
        "=",
        "--",
    ];

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    proptest! {
        /// Any argv, from the tool's own words or arbitrary strings, parses or fails with a
        /// usage error: never a panic.
        #[test]
        fn any_argv_parses_or_is_refused(
            words in prop::collection::vec(
                prop_oneof![
                    4 => prop::sample::select(WORDS).prop_map(str::to_string),
                    1 => any::<String>(),
                ],
                0..8,
            )
        ) {
            let argv = std::iter::once("nd".to_string()).chain(words);
            let _ = Cli::try_parse_from(argv);
        }

        /// Addresses of digits, dots, colons and brackets (never a name lookup) parse or are
        /// an error.
        #[test]
        fn any_numeric_address_parses_or_is_refused(s in "[0-9a-f.:\\[\\]]{0,40}") {
            let _ = parse_endpoint(&s);
        }

        /// Any size plan either is an error or has rounds within 32-bit ND lengths and counts a
        /// run can hold.
        #[test]
        fn any_size_plan_is_bounded_or_refused(
            size in prop::option::of(any::<usize>()),
            all in any::<bool>(),
            iterations in prop::option::of(any::<u64>()),
            warmup in prop::option::of(any::<u64>()),
        ) {
            let sizes = SizeArgs { size, all: all && size.is_none(), iterations, warmup };
            if let Ok(plan) = sizes.plan(Defaults::new(8, 100_000, 256 << 20)) {
                prop_assert!(plan.max_size() <= u32::MAX as usize);
                // The loops run warm-up plus timed iterations, one sample each.
                for &(_, n) in &plan.rounds {
                    prop_assert!(n <= 100_000_000);
                    prop_assert!(n.checked_add(plan.warmup_for(n)).is_some());
                }
                prop_assert!(!plan.rounds.is_empty());
            }
        }
    }
}
