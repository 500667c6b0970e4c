//! Out of descriptors: every call that needs a new socket fails `ND_INSUFFICIENT_RESOURCES`
//! (never a panic, a hang or a half-made object), on every provider, and the same objects work
//! once descriptors are free again.
//!
//! The limit is per process (`RLIMIT_NOFILE`), so each provider's check runs in a child: this
//! test binary run again with [`ROLE`] naming the provider.

use std::net::SocketAddr;

use netdirect::{Provider, Status};
use netdirect_conformance::check::{expect_status, wait_ok, wait_status, Check, Context};
use netdirect_conformance::harness::{output_within, HARD_TIMEOUT};
use netdirect_conformance::side::accept_and_exchange;
use netdirect_conformance::{ensure, Side, SideConfig};
use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// Set in a child: the provider it checks.
const ROLE: &str = "ND_EXHAUSTION_PROVIDER";
const DONE: &str = "EXHAUSTION CHECKED";

#[test]
fn out_of_descriptors_is_insufficient_resources() {
    if let Ok(name) = std::env::var(ROLE) {
        match child(&name) {
            Ok(()) => println!("{DONE}"),
            Err(e) => panic!("[provider={name}] {e}"),
        }
        return;
    }
    for p in Provider::all() {
        let exe = std::env::current_exe().expect("test binary");
        let mut cmd = std::process::Command::new(exe);
        cmd.args([
            "--exact",
            "out_of_descriptors_is_insufficient_resources",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, p.name());
        let out = output_within(&mut cmd, HARD_TIMEOUT)
            .unwrap_or_else(|e| panic!("[provider={}] {e}", p.name()));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains(DONE),
            "[provider={}] child failed ({}):\n{stdout}\n{}",
            p.name(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The lowest descriptor number not in use: with the soft limit set to it, no new descriptor
/// can be made.
fn lowest_free_fd() -> Check<u64> {
    let d = rustix::io::dup(std::io::stdin())
        .map_err(std::io::Error::from)
        .ctx("dup")?;
    let n = std::os::fd::AsRawFd::as_raw_fd(&d) as u64;
    drop(d);
    Ok(n)
}

fn child(name: &str) -> Check {
    let p = Provider::open(name).ctx("open provider")?;
    let ip = std::net::Ipv4Addr::LOCALHOST.into();
    let any = SocketAddr::new(ip, 0);
    let a = p.open_adapter_for(any).ctx("open adapter")?;
    // Made before the limit: the objects that need no socket of their own.
    let server = Side::on(&a, SideConfig::default())?;
    let client = Side::on(&a, SideConfig::default())?;
    let listener = a.create_listener().ctx("create listener")?;
    let was = getrlimit(Resource::Nofile);
    let cap = lowest_free_fd()?;
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(cap),
            maximum: was.maximum,
        },
    )
    .map_err(std::io::Error::from)
    .ctx("lower RLIMIT_NOFILE")?;
    ensure!(
        rustix::io::dup(std::io::stdin()).is_err(),
        "a descriptor could still be made under the limit"
    );
    expect_status(
        listener.bind(any),
        Status::INSUFFICIENT_RESOURCES,
        "Listener::Bind without a descriptor",
    )?;
    expect_status(
        client.connector.bind(any),
        Status::INSUFFICIENT_RESOURCES,
        "Connector::Bind without a descriptor",
    )?;
    // An unbound Connect binds a port itself: it fails at once or completes with the status.
    let dest: SocketAddr = "127.0.0.1:9".parse().expect("address");
    match client.connector.connect(&client.qp, dest, 0, 0, &[]) {
        Err(e) => ensure!(
            e.status() == Status::INSUFFICIENT_RESOURCES,
            "Connect without a descriptor: expected ND_INSUFFICIENT_RESOURCES, got {e}"
        ),
        Ok(ov) => wait_status(
            &ov,
            Status::INSUFFICIENT_RESOURCES,
            "Connect without a descriptor",
        )?,
    }
    setrlimit(Resource::Nofile, was)
        .map_err(std::io::Error::from)
        .ctx("restore RLIMIT_NOFILE")?;
    // The same listener and connector, none the worse: a connection and a message.
    listener.bind(any).ctx("Listener::Bind again")?;
    listener.listen(4).ctx("Listen")?;
    let laddr = listener.get_local_address().ctx("listener address")?;
    let gcr = listener
        .get_connection_request(&server.connector)
        .ctx("GetConnectionRequest")?;
    let cov = client.connect(any, laddr, 0, 0, &[])?;
    wait_ok(&gcr, "GetConnectionRequest")?;
    accept_and_exchange(&server, &client, &cov)
}
