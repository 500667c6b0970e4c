//! A private network for a test: a network namespace of the test's own, entered by one thread,
//! so nothing on the machine changes and nothing is left behind (the namespace goes with the
//! thread). It needs root (CAP_SYS_ADMIN) and `ip` (iproute2): under CI (`CI` set) a test
//! fails without them; elsewhere it says it was skipped and why.
//!
//! [`on_two_hosts`] builds two such namespaces, one per thread, joined by a veth pair: two
//! hosts on one link, whose link and packets a test can take away ([`Host::run`]).

use std::net::IpAddr;
use std::process::Command;
use std::sync::mpsc;

use crate::check::{Check, Failure};

/// Run `body` on a new thread moved into a new network namespace, after the `ip` commands
/// of `setup` (each one `ip` argument list, such as `"link set lo up"`) built the network
/// there. Panics with the failure `body` returns; `what` names the checks in the skip notice.
pub fn on_private_network(setup: &[&str], what: &str, body: impl FnOnce() -> Check + Send) {
    let r = std::thread::scope(|s| {
        s.spawn(|| match enter(setup) {
            Ok(()) => body(),
            Err(why) => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "{what} must run under CI: {why}"
                );
                eprintln!("SKIPPED: {why} — {what} did not run");
                Ok(())
            }
        })
        .join()
        .expect("the test thread panicked")
    });
    if let Err(Failure(m)) = r {
        panic!("{m}");
    }
}

/// One of the two hosts of [`on_two_hosts`], as its thread sees it.
#[derive(Debug, Clone, Copy)]
pub struct Host {
    /// This host's address on the link (IPv4, a /24).
    pub ip: IpAddr,
    /// The other host's address.
    pub peer: IpAddr,
    /// This host's end of the veth pair.
    pub dev: &'static str,
}

impl Host {
    /// Run a command (`ip`, `nft`, ...) in this host's namespace. Call it from the host's own
    /// thread (the one its body runs on): a child process starts in its parent thread's
    /// namespace.
    pub fn run(&self, program: &str, args: &[&str]) -> Check {
        let out = Command::new(program)
            .args(args)
            .output()
            .map_err(|e| Failure(format!("{program}: {e}")))?;
        if !out.status.success() {
            return Err(Failure(format!(
                "{program} {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(())
    }

    /// This host's half of a permanent partition, for good: with `nft` installed, an
    /// nftables table of this namespace drops every packet that arrives from the peer (as a
    /// failed network loses it: the sender hears no error); without it, a `blackhole` route
    /// drops everything this host sends to the peer. Called on both hosts, nothing gets
    /// through either way.
    pub fn partition(&self) -> Check {
        let peer = self.peer.to_string();
        if Command::new("nft").arg("--version").output().is_ok() {
            let chain = "{ type filter hook input priority 0; policy accept; }";
            self.run("nft", &["add", "table", "inet", "nd_partition"])?;
            self.run(
                "nft",
                &["add", "chain", "inet", "nd_partition", "input", chain],
            )?;
            self.run(
                "nft",
                &[
                    "add",
                    "rule",
                    "inet",
                    "nd_partition",
                    "input",
                    "ip",
                    "saddr",
                    &peer,
                    "drop",
                ],
            )
        } else {
            self.run("ip", &["route", "add", "blackhole", &format!("{peer}/32")])
        }
    }

    /// Take this host's end of the link down (`up` false) or up again.
    pub fn set_link(&self, up: bool) -> Check {
        let state = if up { "up" } else { "down" };
        self.run("ip", &["link", "set", self.dev, state])
    }
}

/// The two hosts' addresses and devices.
const HOSTS: [(&str, &str); 2] = [("10.77.0.1", "nd0"), ("10.77.0.2", "nd1")];

/// Run `a` and `b` at once, each on its own thread in its own network namespace, the two
/// joined by a veth pair (`nd0` on `a`'s side, 10.77.0.1/24; `nd1` on `b`'s, 10.77.0.2/24),
/// both up. Panics with the failures the bodies return (both are reported). Without root or
/// `ip` the test is skipped, or fails under CI, as [`on_private_network`] does; `what` names
/// the checks in the notice. The bodies synchronise through channels of their own; a body
/// that waits on the other must also end when the other's channel end is dropped (the other
/// body failed or never ran).
pub fn on_two_hosts(
    what: &str,
    a: impl FnOnce(Host) -> Check + Send,
    b: impl FnOnce(Host) -> Check + Send,
) {
    let host = |i: usize| Host {
        ip: HOSTS[i].0.parse().expect("literal"),
        peer: HOSTS[1 - i].0.parse().expect("literal"),
        dev: HOSTS[i].1,
    };
    let skip = |why: String| -> Check {
        assert!(
            std::env::var_os("CI").is_none(),
            "{what} must run under CI: {why}"
        );
        eprintln!("SKIPPED: {why} — {what} did not run");
        Ok(())
    };
    let (ra, rb) = std::thread::scope(|s| {
        // `b` enters its namespace first and says which thread it is; `a` creates the veth
        // pair with `b`'s end in `b`'s namespace (`ip ... netns <thread id>`), then `b`
        // configures its end.
        let (tid_tx, tid_rx) = mpsc::channel::<Result<i32, String>>();
        let (link_tx, link_rx) = mpsc::channel::<()>();
        let tb = s.spawn(move || {
            if let Err(why) = enter(&["link set lo up"]) {
                let _ = tid_tx.send(Err(why.clone()));
                return skip(why);
            }
            let _ = tid_tx.send(Ok(rustix::thread::gettid().as_raw_nonzero().get()));
            if link_rx.recv().is_err() {
                // `a` could not build the link: it reports why.
                return Ok(());
            }
            let me = host(1);
            me.run("ip", &["addr", "add", "10.77.0.2/24", "dev", me.dev])?;
            me.run("ip", &["link", "set", me.dev, "up"])?;
            b(me)
        });
        let ta = s.spawn(move || {
            let tid = match tid_rx.recv() {
                Ok(Ok(tid)) => tid,
                // `b` said why it could not (and skipped or failed on it).
                Ok(Err(_)) | Err(_) => return Ok(()),
            };
            let veth = format!("link add nd0 type veth peer name nd1 netns {tid}");
            let setup = [
                "link set lo up",
                veth.as_str(),
                "addr add 10.77.0.1/24 dev nd0",
                "link set nd0 up",
            ];
            if let Err(why) = enter(&setup) {
                return skip(why);
            }
            let _ = link_tx.send(());
            a(host(0))
        });
        (
            ta.join().expect("host a panicked"),
            tb.join().expect("host b panicked"),
        )
    });
    let mut failures = Vec::new();
    for (name, r) in [("host a", ra), ("host b", rb)] {
        if let Err(Failure(m)) = r {
            failures.push(format!("{name}: {m}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Move the calling thread into a new network namespace and build the network there; `Err`
/// says why it could not be.
fn enter(setup: &[&str]) -> Result<(), String> {
    if !rustix::process::geteuid().is_root() {
        return Err("a private network namespace needs root".into());
    }
    // SAFETY: NEWNET alone: this thread's sockets (and the processes it starts) use a new
    // network namespace. No descriptor table or memory is unshared, so nothing another
    // thread holds changes meaning.
    unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNET) }
        .map_err(|e| format!("unshare(CLONE_NEWNET): {e}"))?;
    for args in setup {
        // Started from this thread, `ip` runs in its namespace.
        let out = Command::new("ip")
            .args(args.split(' '))
            .output()
            .map_err(|e| format!("ip (iproute2) is needed: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "ip {args}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    Ok(())
}
