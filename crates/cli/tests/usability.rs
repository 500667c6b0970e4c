//! The tool on ordinary input and ordinary mistakes, run as the real binary: each mistake gets
//! a message that says what is wrong and a non-zero exit, never a panic or a wait without end;
//! sweeps finish in bounded time; a `--forever` server serves client after client; the table
//! has perftest's header block and columns.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{nd, nd_with, Server, ND};

const PROVIDERS: [&str; 2] = ["tcp", "shm"];

/// `nd args` (with `env`) must fail, without a panic, saying every one of `words`; its stderr.
fn fails_saying(args: &[&str], env: &[(&str, &str)], words: &[&str]) -> String {
    let (ok, _, err) = nd_with(args, env, common::LIMIT);
    assert!(!ok, "nd {args:?} must fail: {err}");
    assert!(!err.contains("panicked"), "nd {args:?} panicked: {err}");
    for w in words {
        assert!(err.contains(w), "nd {args:?}: {w:?} missing from: {err}");
    }
    err
}

#[test]
fn a_size_beyond_32_bits_is_refused() {
    for p in PROVIDERS {
        fails_saying(
            &[
                "pingpong",
                "--loopback",
                "--provider",
                p,
                "--size",
                "4294967296",
            ],
            &[],
            &["--size 4294967296 is larger than any ND transfer"],
        );
    }
}

#[test]
fn a_size_beyond_max_transfer_length_names_the_limit() {
    for p in PROVIDERS {
        for tool in ["pingpong", "rpingpong", "ping", "rping"] {
            let err = fails_saying(
                &[tool, "--loopback", "--provider", p, "--size", "2147483648"],
                &[],
                &["--size 2147483648 is larger than the adapter's MaxTransferLength (1073741824 bytes)"],
            );
            assert!(!err.contains("ND_BUFFER_OVERFLOW"), "{tool} {p}: {err}");
        }
    }
}

/// Every subcommand that opens a provider.
const PROVIDER_TOOLS: &[&[&str]] = &[
    &["info"],
    &["cat"],
    &["bench", "--quick"],
    &["mrlat"],
    &["mrrate"],
    &["pingpong", "--loopback", "-n", "10"],
    &["rpingpong", "--loopback", "-n", "10"],
    &["ping", "--loopback", "-n", "10"],
    &["rping", "--loopback", "-n", "10"],
];

#[test]
fn an_unknown_provider_lists_the_provider_names_in_every_subcommand() {
    for tool in PROVIDER_TOOLS {
        fails_saying(
            tool,
            &[("ND_PROVIDER", "bogus")],
            &[
                "ND_PROVIDER \"bogus\" names no provider",
                "the providers are tcp, shm",
            ],
        );
        let args: Vec<&str> = tool
            .iter()
            .copied()
            .chain(["--provider", "bogus"])
            .collect();
        fails_saying(
            &args,
            &[],
            &[
                "--provider \"bogus\" names no provider",
                "the providers are tcp, shm",
            ],
        );
    }
}

#[test]
fn a_client_may_name_the_server_by_host_name() {
    for p in PROVIDERS {
        let server = Server::start(&["pingpong", "-n", "10", "--provider", p]);
        let port = server.addr.rsplit(':').next().expect("port").to_string();
        let dest = format!("localhost:{port}");
        let (ok, _, err) = nd(&["pingpong", "-n", "10", "--provider", p, "-c", &dest]);
        let (server_ok, server_err) = server.finish();
        assert!(ok, "client -c {dest} on {p}: {err}");
        assert!(server_ok, "server on {p}: {server_err}");
    }
}

/// A server on `server` and a client on `client`: both fail, each naming the other's provider,
/// and the server does not wait for a client that cannot reach it (the watchdog of
/// [`Server`] would kill it after a minute, without the message).
fn providers_differ(server: &str, client: &str) {
    let s = Server::start(&["pingpong", "-n", "10", "--provider", server]);
    let (ok, _, client_err) = nd(&["pingpong", "-n", "10", "--provider", client, "-c", &s.addr]);
    let (server_ok, server_err) = s.finish();
    assert!(!ok, "the client must fail");
    assert!(!server_ok, "the server must fail: {server_err}");
    let says = format!("the server uses provider {server}");
    assert!(client_err.contains(&says), "client: {client_err}");
    let says = format!("the client uses provider {client}");
    assert!(server_err.contains(&says), "server: {server_err}");
}

#[test]
fn a_client_on_another_provider_than_its_server_is_named_by_both() {
    providers_differ("shm", "tcp");
    providers_differ("tcp", "shm");
}

/// `nd rping -a --loopback` on `provider`: every size from 1 B to 8 MiB, a progress line on
/// stderr for each, all within a minute.
fn rping_sweep(provider: &str) {
    let t0 = Instant::now();
    let limit = Duration::from_secs(60);
    let (ok, out, err) = nd_with(
        &[
            "rping",
            "-a",
            "--loopback",
            "--provider",
            provider,
            "--json",
        ],
        &[],
        limit,
    );
    assert!(ok, "{err}");
    assert!(t0.elapsed() < limit, "{:?}", t0.elapsed());
    let last = out.lines().last().unwrap_or_default();
    let rows: serde_json::Value = serde_json::from_str(last).expect("JSON array");
    let rows = rows.as_array().expect("array");
    assert_eq!(rows.len(), 24, "{last}");
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r["size"].as_u64(), Some(1 << i), "{r}");
        assert!(r["iterations"].as_u64().unwrap_or(0) >= 1, "{r}");
    }
    assert_eq!(
        err.matches(" B done (").count(),
        24,
        "progress lines: {err}"
    );
}

#[test]
fn rping_sweep_on_tcp_finishes_within_a_minute() {
    rping_sweep("tcp");
}

#[test]
fn rping_sweep_on_shm_finishes_within_a_minute() {
    rping_sweep("shm");
}

#[test]
fn a_forever_server_serves_one_client_after_another() {
    let mut server = Server::start(&["pingpong", "-n", "10", "--forever"]);
    let addr = server.addr.clone();
    let client = |n: &str| nd(&["pingpong", "-n", n, "-c", &addr]);
    assert!(client("10").0, "first client");
    // Each LISTENING line says the server is ready for the next client, on the same port.
    assert_eq!(server.next_listening(), addr);
    assert!(client("10").0, "second client");
    assert_eq!(server.next_listening(), addr);
    assert!(!client("20").0, "a mismatched client fails");
    assert_eq!(server.next_listening(), addr);
    assert!(client("10").0, "a client after a failed one");
    assert_eq!(server.next_listening(), addr);
    let err = server.kill();
    assert!(err.contains("waiting for the next client"), "{err}");
}

#[test]
fn the_table_has_a_header_block_and_perftest_columns() {
    let (ok, out, err) = nd(&["pingpong", "--loopback", "-n", "10", "--provider", "tcp"]);
    assert!(ok, "{err}");
    for w in [
        "provider: tcp",
        "local address: 127.0.0.1:",
        "remote address: 127.0.0.1:",
        "queue pair: depth",
        "inline: up to",
        "t_max[us]",
        "t_stdev[us]",
    ] {
        assert!(out.contains(w), "{w:?} missing from: {out}");
    }
    // The header comes before the table's column titles.
    assert!(out.find("provider: tcp") < out.find("#bytes"), "{out}");
    let (ok, out, err) = nd(&["pingpong", "--loopback", "-n", "10", "--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert!(v["stdev_us"].as_f64().is_some_and(|s| s >= 0.0), "{v}");
    assert!(v["max_us"].as_f64() >= v["min_us"].as_f64(), "{v}");
}

/// A run whose `victim` end (`"client"` or `"server"`) is killed once connected: the other end
/// says the peer disconnected and fails, on each provider and each tool with a peer.
fn peer_killed(victim: &str) {
    for p in PROVIDERS {
        for tool in ["pingpong", "rpingpong", "ping", "rping"] {
            let args = [tool, "-n", "100000000", "--provider", p];
            let mut server = Server::start(&args);
            let mut client = Command::new(ND)
                .args(args)
                .args(["-c", &server.addr])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn client");
            server.connected();
            let err = if victim == "client" {
                client.kill().expect("kill client");
                let _ = client.wait();
                let (ok, err) = server.finish();
                assert!(!ok, "{tool} {p}: the server must fail");
                err
            } else {
                let _ = server.kill();
                let out = client.wait_with_output().expect("client");
                assert!(!out.status.success(), "{tool} {p}: the client must fail");
                String::from_utf8_lossy(&out.stderr).into_owned()
            };
            assert!(!err.contains("panicked"), "{tool} {p}: {err}");
            assert!(err.contains("the peer disconnected"), "{tool} {p}: {err}");
        }
    }
}

#[test]
fn a_server_whose_client_is_killed_says_the_peer_disconnected() {
    peer_killed("client");
}

#[test]
fn a_client_whose_server_is_killed_says_the_peer_disconnected() {
    peer_killed("server");
}
