//! `NdkListen`'s contract (the NDK_FN_LISTEN page): `STATUS_SUCCESS`, or `STATUS_PENDING`
//! and the completion callback once; `STATUS_INSUFFICIENT_RESOURCES`,
//! `STATUS_SHARING_VIOLATION` and `STATUS_INVALID_ADDRESS` inline or through the callback;
//! `STATUS_TOO_MANY_ADDRESSES` when port 0 finds no free port in 49152–65535. Each status is
//! checked inline (`CompletionMode::Inline`) and through the callback
//! (`CompletionMode::Pending`), in a process of its own, on both providers, over 127.0.0.1
//! and ::1.

mod ndk_common;

use std::process::Command;

use ndk_common::*;
use netdirect::ndk::{CompletionMode, NtStatus};

/// The child: one `NdkListen` case; prints `ok` when it held.
fn child(case: &str) {
    let cfg = Cfg::from_env();
    if case == "exhausted" && !private_network() {
        say("ok skipped");
        return;
    }
    let a = cfg.open();
    let calls = Calls::default();
    let l = a
        .create_listener(|c| {
            let _ = c.close(|| {});
        })
        .expect("listener");
    let want = match case {
        "success" => NtStatus::SUCCESS,
        "sharing" => {
            let first = a.create_listener(|_| {}).expect("listener");
            assert_eq!(
                call(&calls, |cb| first.listen(cfg.addr(0), cb)),
                NtStatus::SUCCESS
            );
            let port = first.get_local_address().expect("address").port();
            let (ret, got) = call_raw(&calls, |cb| l.listen(cfg.addr(port), cb));
            check(cfg.mode, ret, got, NtStatus::SHARING_VIOLATION);
            finish(a, &calls);
            return;
        }
        "invalid" => NtStatus::INVALID_ADDRESS,
        "resources" => NtStatus::INSUFFICIENT_RESOURCES,
        "exhausted" => NtStatus::TOO_MANY_ADDRESSES,
        other => panic!("unknown case {other}"),
    };
    let at = match case {
        "invalid" => cfg.foreign(),
        _ => cfg.addr(0),
    };
    // What makes the case: no descriptor left, or no port left.
    let _hold = match case {
        "resources" => exhaust_descriptors(),
        "exhausted" => take_every_port(&cfg),
        _ => Vec::<std::os::fd::OwnedFd>::new(),
    };
    let (ret, got) = call_raw(&calls, |cb| l.listen(at, cb));
    drop(_hold);
    check(cfg.mode, ret, got, want);
    if want == NtStatus::SUCCESS {
        let port = l.get_local_address().expect("address").port();
        assert!((49152..=65535).contains(&port), "port {port}");
    }
    finish(a, &calls);
}

/// The status came the way the mode says: inline, or `STATUS_PENDING` and the callback.
fn check(mode: CompletionMode, ret: NtStatus, got: NtStatus, want: NtStatus) {
    assert_eq!(got, want);
    match mode {
        CompletionMode::Inline => assert_eq!(ret, want, "not inline"),
        CompletionMode::Pending => assert_eq!(ret, NtStatus::PENDING, "not through the callback"),
    }
}

fn finish(a: netdirect::ndk::NdkAdapter, calls: &Calls) {
    a.close();
    calls.assert_quiet();
    say("ok");
}

/// Use up the descriptor table (under a lowered limit, so it is quick): every socket the
/// provider would open fails with EMFILE.
fn exhaust_descriptors() -> Vec<std::os::fd::OwnedFd> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let old = getrlimit(Resource::Nofile);
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(256),
            maximum: old.maximum,
        },
    )
    .expect("setrlimit");
    let mut files = Vec::new();
    while let Ok(f) = std::fs::File::open("/dev/null") {
        files.push(f.into());
    }
    files
}

/// Listen on every port of 49152–65535 of the test address (in this process's private
/// network, so nothing else on the machine is starved of ports).
fn take_every_port(cfg: &Cfg) -> Vec<std::os::fd::OwnedFd> {
    (49152..=65535u16)
        .filter_map(|p| std::net::TcpListener::bind(cfg.addr(p)).ok())
        .map(Into::into)
        .collect()
}

/// Move this process's test thread (and the threads it starts) into a network namespace of
/// its own with loopback up. Needs root and `ip`: without them the case is skipped, except
/// under CI, where it fails.
fn private_network() -> bool {
    let why = if !rustix::process::geteuid().is_root() {
        Some("needs root".to_string())
    } else {
        // SAFETY: NEWNET only: this thread's (and its children's) sockets use a new network
        // namespace; no descriptor or memory another thread holds changes meaning.
        match unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNET) } {
            Err(e) => Some(format!("unshare(CLONE_NEWNET): {e}")),
            Ok(()) => match Command::new("ip")
                .args(["link", "set", "lo", "up"])
                .status()
            {
                Ok(s) if s.success() => None,
                r => Some(format!("ip link set lo up: {r:?}")),
            },
        }
    };
    if let Some(why) = why {
        assert!(
            std::env::var_os("CI").is_none(),
            "port exhaustion must run under CI: {why}"
        );
        eprintln!("SKIPPED: {why}");
        return false;
    }
    true
}

fn run(test: &str, case: &str, mode: CompletionMode) {
    if role().is_some() {
        return child(case);
    }
    for (provider, ip) in matrix() {
        let mut p = spawn(test, "listen", provider, ip, mode, &[]);
        p.line_with("ok");
        p.finish();
    }
}

#[test]
fn listen_succeeds_inline() {
    run("listen_succeeds_inline", "success", CompletionMode::Inline);
}

#[test]
fn listen_succeeds_through_the_callback() {
    run(
        "listen_succeeds_through_the_callback",
        "success",
        CompletionMode::Pending,
    );
}

#[test]
fn listen_sharing_violation_inline() {
    run(
        "listen_sharing_violation_inline",
        "sharing",
        CompletionMode::Inline,
    );
}

#[test]
fn listen_sharing_violation_through_the_callback() {
    run(
        "listen_sharing_violation_through_the_callback",
        "sharing",
        CompletionMode::Pending,
    );
}

#[test]
fn listen_invalid_address_inline() {
    run(
        "listen_invalid_address_inline",
        "invalid",
        CompletionMode::Inline,
    );
}

#[test]
fn listen_invalid_address_through_the_callback() {
    run(
        "listen_invalid_address_through_the_callback",
        "invalid",
        CompletionMode::Pending,
    );
}

#[test]
fn listen_insufficient_resources_inline() {
    run(
        "listen_insufficient_resources_inline",
        "resources",
        CompletionMode::Inline,
    );
}

#[test]
fn listen_insufficient_resources_through_the_callback() {
    run(
        "listen_insufficient_resources_through_the_callback",
        "resources",
        CompletionMode::Pending,
    );
}

#[test]
fn listen_too_many_addresses_inline() {
    run(
        "listen_too_many_addresses_inline",
        "exhausted",
        CompletionMode::Inline,
    );
}

#[test]
fn listen_too_many_addresses_through_the_callback() {
    run(
        "listen_too_many_addresses_through_the_callback",
        "exhausted",
        CompletionMode::Pending,
    );
}
