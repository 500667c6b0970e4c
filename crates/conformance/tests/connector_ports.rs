//! ND's connector port space (R-CONN-2, docs/ND-RULES.md): a connector may Bind the IP:port a
//! listener holds, but two connectors never share one, on every provider and family, in one
//! process or in two. Over TCP, whose one port space the kernel keeps, this is the provider's
//! doing (`tcp`: `SO_REUSEPORT` lets the connector join the listener, and a claim in the
//! connector space keeps a second connector out).
//!
//! The two-process check runs this test binary again, with [`ROLE`] naming the provider and
//! the address its connector Binds.

use std::io::{BufRead, BufReader, Read};
use std::net::{IpAddr, SocketAddr};
use std::process::{Command, Stdio};
use std::sync::mpsc;

use netdirect::{Adapter, Connector, Provider, Status};
use netdirect_conformance::check::{expect_status, wait_ok, wait_status, Check, Context};
use netdirect_conformance::harness::{self, HARD_TIMEOUT};
use netdirect_conformance::side::{connect_and_exchange, listen};
use netdirect_conformance::{ensure, Failure, Needs, Side, SideConfig};

/// Set in a child: `<provider> <address>`, the connector it Binds.
const ROLE: &str = "ND_CONNECTOR_PORTS_CHILD";
/// What the child prints once bound.
const BOUND: &str = "CONNECTOR BOUND";

fn open(p: &Provider, ip: IpAddr) -> Check<Adapter> {
    p.open_adapter_for(SocketAddr::new(ip, 0))
        .ctx("open adapter")
}

fn unspecified_like(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => std::net::Ipv4Addr::UNSPECIFIED.into(),
        IpAddr::V6(_) => std::net::Ipv6Addr::UNSPECIFIED.into(),
    }
}

fn connector(a: &Adapter) -> Check<Connector> {
    a.create_connector().ctx("create connector")
}

/// A second connector at a listener's IP:port is refused as a port in use
/// (`ND_SHARING_VIOLATION`, as for a port a connector holds where nobody listens), also at the
/// wildcard address of that port, and either way round; the port is free for a connector
/// again once the first is released. A connector connected from the listener's port (its
/// messages still flow) keeps it as well.
#[test]
fn two_connectors_never_share_a_listeners_port() {
    let _serial = harness::one_at_a_time();
    harness::each_provider(
        Needs::TwoSided,
        "two-connectors-at-a-listeners-port",
        |p, fam| {
            let ip = fam.ip();
            let a = open(p, ip)?;
            let (_l, at) = listen(&a, SocketAddr::new(ip, 0), 4)?;
            let wild = SocketAddr::new(unspecified_like(ip), at.port());
            let first = connector(&a)?;
            first
                .bind(at)
                .ctx("Bind a connector at a listener's address")?;
            let second = connector(&a)?;
            expect_status(
                second.bind(at),
                Status::SHARING_VIOLATION,
                "Bind a second connector at a listener's address a connector holds",
            )?;
            expect_status(
                second.bind(wild),
                Status::SHARING_VIOLATION,
                "Bind a second connector at the wildcard address of that port",
            )?;
            drop(first);
            second
                .bind(at)
                .ctx("Bind the second connector once the first is released")?;
            drop(second);

            // The wildcard address first: a connector at the listener's own address clashes.
            let any = connector(&a)?;
            any.bind(wild)
                .ctx("Bind a connector at the wildcard address of a listener's port")?;
            expect_status(
                connector(&a)?.bind(at),
                Status::SHARING_VIOLATION,
                "Bind a connector at a listener's address a wildcard connector's port covers",
            )?;
            drop(any);

            // A refused Connect leaves the connector bound (R-CONN-2's ndmpic retries), and
            // the port still its own.
            let retry = Side::on(&a, SideConfig::default())?;
            retry
                .connector
                .bind(at)
                .ctx("Bind the connector to retry")?;
            let (gone, dead) = listen(&a, SocketAddr::new(ip, 0), 1)?;
            drop(gone);
            let ov = retry
                .connector
                .connect(&retry.qp, dead, 0, 0, &[])
                .ctx("Connect")?;
            wait_status(&ov, Status::CONNECTION_REFUSED, "Connect to nobody")?;
            expect_status(
                connector(&a)?.bind(at),
                Status::SHARING_VIOLATION,
                "Bind a connector at the port a refused connector is bound to again",
            )?;
            drop(retry);

            // Connected from the listener's port, to another listener.
            let (server, client) = (
                Side::on(&a, SideConfig::default())?,
                Side::on(&a, SideConfig::default())?,
            );
            client
                .connector
                .bind(at)
                .ctx("Bind the connector to connect")?;
            let _other = connect_and_exchange(&server, &client, ip)?;
            expect_status(
                connector(&a)?.bind(at),
                Status::SHARING_VIOLATION,
                "Bind a connector at the listener's port a connected connector holds",
            )?;
            // Disconnected and released, it leaves the port to the next connector.
            wait_ok(
                &client.connector.disconnect().ctx("Disconnect")?,
                "Disconnect",
            )?;
            drop(client);
            connector(&a)?
                .bind(at)
                .ctx("Bind the port a disconnected connector left")?;
            Ok(())
        },
    );
}

/// A port a connector holds stays its own when a listener joins it (R-CONN-2 both ways): a
/// second connector is still refused there.
#[test]
fn a_listener_joining_a_connectors_port_lets_no_second_connector_in() {
    let _serial = harness::one_at_a_time();
    harness::each_provider(
        Needs::TwoSided,
        "listener-joins-a-connectors-port",
        |p, fam| {
            let ip = fam.ip();
            let a = open(p, ip)?;
            let first = connector(&a)?;
            // A port nothing holds here (a released listener's), tried anew if something
            // else on the host has it in the connectors' space.
            let mut tries = 0;
            let at = loop {
                let (l, at) = listen(&a, SocketAddr::new(ip, 0), 1)?;
                drop(l);
                match first.bind(at) {
                    Ok(()) => break at,
                    Err(e) if e.status() == Status::SHARING_VIOLATION && tries < 8 => tries += 1,
                    Err(e) => return Err(e).ctx("Bind a connector"),
                }
            };
            let (_l, got) = listen(&a, at, 4)
                .map_err(|e| Failure(format!("listen at a bound connector's port: {e}")))?;
            ensure!(got == at, "the listener's address {got}, not {at}");
            expect_status(
                connector(&a)?.bind(at),
                Status::SHARING_VIOLATION,
                "Bind a second connector at a port a connector and then a listener took",
            )?;
            Ok(())
        },
    );
}

/// The same across processes (ND's port spaces are the host's, not a process's): while a
/// connector of another process holds a listener's IP:port, a connector here is refused it
/// (`ND_SHARING_VIOLATION`); once that process has ended, the port is free to Bind.
#[test]
fn a_connector_in_another_process_keeps_a_listeners_port() {
    if let Ok(role) = std::env::var(ROLE) {
        if let Err(e) = child(&role) {
            panic!("[child {role}] {e}");
        }
        return;
    }
    let _serial = harness::one_at_a_time();
    harness::each_provider(Needs::TwoSided, "connector-of-another-process", |p, fam| {
        let ip = fam.ip();
        let a = open(p, ip)?;
        let (_l, at) = listen(&a, SocketAddr::new(ip, 0), 4)?;
        let exe = std::env::current_exe().ctx("test binary")?;
        let mut holder = Command::new(exe)
            .args([
                "--exact",
                "a_connector_in_another_process_keeps_a_listeners_port",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ROLE, format!("{} {at}", p.name()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .ctx("start the child")?;
        let r = while_child_holds(&mut holder, at, &a);
        // Its end of input ends it; killed if it never got that far.
        drop(holder.stdin.take());
        if r.is_err() {
            let _ = holder.kill();
        }
        let status = holder.wait().ctx("wait for the child")?;
        let mut err = String::new();
        if let Some(mut e) = holder.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        r.map_err(|e| Failure(format!("{e}\nchild ({status}):\n{err}")))?;
        ensure!(status.success(), "child failed ({status}):\n{err}");
        connector(&a)?
            .bind(at)
            .ctx("Bind the port once the other process has ended")?;
        Ok(())
    });
}

/// The parent's checks, once the child reports its connector bound at `at`.
fn while_child_holds(holder: &mut std::process::Child, at: SocketAddr, a: &Adapter) -> Check {
    let out = holder
        .stdout
        .take()
        .ok_or_else(|| Failure("the child's output is not piped".into()))?;
    ensure!(
        reports_bound(out),
        "the child never reported its connector bound"
    );
    let here = connector(a)?;
    expect_status(
        here.bind(at),
        Status::SHARING_VIOLATION,
        "Bind a connector at a listener's address another process's connector holds",
    )?;
    expect_status(
        here.bind(SocketAddr::new(unspecified_like(at.ip()), at.port())),
        Status::SHARING_VIOLATION,
        "Bind a connector at the wildcard address of that port",
    )
}

/// The child: Bind a connector at the address, say so, and hold it until the parent closes
/// our standard input.
fn child(role: &str) -> Check {
    let (name, at) = role
        .split_once(' ')
        .ok_or_else(|| Failure(format!("bad role {role:?}")))?;
    let at: SocketAddr = at
        .parse()
        .map_err(|e| Failure(format!("bad address {at:?}: {e}")))?;
    let p = Provider::select(name).ctx("open provider")?;
    let a = open(&p, at.ip())?;
    let c = connector(&a)?;
    c.bind(at).ctx("Bind in the child")?;
    println!("{BOUND}");
    let mut rest = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut rest);
    drop(c);
    Ok(())
}

/// Whether a line of `out` says [`BOUND`] (libtest may have begun the line), read on a thread
/// of its own, within [`HARD_TIMEOUT`]: `false` if the child ended (or took too long) first.
fn reports_bound(out: impl Read + Send + 'static) -> bool {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if line.contains(BOUND) {
                let _ = tx.send(());
                // Keep reading: a child whose output nobody reads could block on a full pipe.
            }
        }
    });
    rx.recv_timeout(HARD_TIMEOUT).is_ok()
}
