//! Two processes over the `shm` provider: data integrity across the inline and chunked paths in
//! polling and blocking modes, a peer killed with SIGKILL at several moments, and the leak check.
//!
//! The children are this test binary re-run with a role (`child_main` dispatches on it). Every
//! wait has a deadline (`common::DEADLINE`); nothing sleeps to synchronise.

#![cfg(not(loom))]

mod common;

use std::net::SocketAddr;

use common::{message, role, say, End, Peer, DEADLINE};
use netdirect::Status;

/// Message sizes: empty, one word, a full cell, one byte over, a page, a multi-chunk message.
const SIZES: [usize; 6] = [0, 8, 48, 49, 4096, 300_000];
const BUF: usize = 1 << 20;

/// The child process's entry point; a no-op in a normal test run.
#[test]
fn child_main() {
    let Some((role, args)) = role() else { return };
    match role.as_str() {
        "echo" => echo_server(args == "blocking"),
        "stream" => stream_server(),
        "hold-connect" => hold_connect(args.parse().expect("address")),
        "listen-only" => listen_only(),
        other => panic!("unknown role {other}"),
    }
}

/// Accept one connection; send every message back; exit when the peer disconnects.
fn echo_server(blocking: bool) {
    let e = End::new(2 * BUF, 8);
    let (l, a) = e.listen();
    say(&format!("LISTENING {a}"));
    e.recv(0, 0, BUF);
    e.accept_one(&l);
    loop {
        let r = if blocking { e.wait() } else { e.poll() };
        if r.status == Status::CANCELED {
            return; // the peer disconnected
        }
        assert_eq!(r.status, Status::SUCCESS, "{r:?}");
        let n = r.bytes_transferred as usize;
        // Echo from a copy so the next Receive can be posted at once.
        let data = e.read(0, n);
        e.fill(BUF, &data);
        e.recv(0, 0, BUF);
        e.send(1, BUF, n).expect("send");
        let s = if blocking { e.wait() } else { e.poll() };
        if s.status == Status::CANCELED {
            return;
        }
        assert_eq!(s.status, Status::SUCCESS, "{s:?}");
    }
}

/// Accept one connection, print READY, then send 64 KiB messages for ever (until killed).
fn stream_server() {
    let e = End::new(BUF, 64);
    let (l, a) = e.listen();
    say(&format!("LISTENING {a}"));
    e.accept_one(&l);
    say("READY");
    let mut k = 0u64;
    loop {
        while e.send(k, 0, 65536).is_ok() {
            k += 1;
        }
        // Queue full: reap completions (blocked Sends complete as the peer makes room).
        let _ = e.poll();
    }
}

/// Listen, print LISTENING, and never take a connection request (until killed).
fn listen_only() {
    let e = End::new(64, 1);
    let (_l, a) = e.listen();
    say(&format!("LISTENING {a}"));
    let mut buf = String::new();
    let _ = std::io::stdin().read_line(&mut buf);
}

/// Connect to `dest`, print READY once the Connect completed, and never CompleteConnect.
fn hold_connect(dest: SocketAddr) {
    let e = End::new(4096, 4);
    e.connector
        .connect(&e.qp, dest, 0, 0, &[])
        .expect("connect")
        .wait()
        .expect("connect");
    say("READY");
    let mut buf = String::new();
    let _ = std::io::stdin().read_line(&mut buf);
}

fn ping_pong(server_blocking: bool, client_blocking: bool) {
    ping_pong_env(server_blocking, client_blocking, &[]);
}

fn ping_pong_env(server_blocking: bool, client_blocking: bool, env: &[(&str, &str)]) {
    let mut peer = Peer::spawn_env(
        "child_main",
        "echo",
        if server_blocking { "blocking" } else { "poll" },
        env,
    );
    let addr: SocketAddr = peer.expect("LISTENING ").parse().expect("address");
    let e = End::new(2 * BUF, 8);
    e.connect(addr);
    for (k, &len) in SIZES.iter().enumerate().chain(SIZES.iter().enumerate()) {
        let msg = message(k as u64, len);
        e.fill(0, &msg);
        e.recv(2, BUF, BUF);
        e.send(1, 0, len).expect("send");
        let mut got_send = false;
        let mut got_recv = None;
        while !got_send || got_recv.is_none() {
            let r = if client_blocking { e.wait() } else { e.poll() };
            assert_eq!(r.status, Status::SUCCESS, "{r:?}");
            match r.request_context {
                1 => got_send = true,
                2 => got_recv = Some(r.bytes_transferred as usize),
                c => panic!("unexpected context {c}"),
            }
        }
        assert_eq!(got_recv, Some(len));
        assert_eq!(e.read(BUF, len), msg, "echo of {len} bytes");
    }
    e.disconnect();
    assert!(peer.wait_exit().success(), "server failed");
}

#[test]
fn echo_polling_both_sides() {
    ping_pong(false, false);
}

/// Large messages one way pulled by the receiver (cross-memory attach: the echo server sends
/// with `ND_SHM_PULL_MIN_KIB=4`), the other way copied through the data area (the default).
#[test]
fn echo_pull_one_way_copy_the_other() {
    ping_pong_env(false, false, &[("ND_SHM_PULL_MIN_KIB", "4")]);
    ping_pong_env(true, true, &[("ND_SHM_PULL_MIN_KIB", "4")]);
}

#[test]
fn echo_blocking_both_sides() {
    ping_pong(true, true);
}

#[test]
fn echo_blocking_server_polling_client() {
    ping_pong(true, false);
}

/// The passive side is killed while we sleep waiting for a message: the Receives complete
/// with ND_CANCELED (the sleeper wakes on the socket's end-of-file).
#[test]
fn sigkill_while_peer_sleeps_waiting() {
    let mut peer = Peer::spawn("child_main", "stream", "");
    let addr: SocketAddr = peer.expect("LISTENING ").parse().expect("address");
    // Receives that can never be filled by a 64 KiB message would overrun: make them large.
    let e = End::new(BUF, 64);
    e.connect(addr);
    peer.expect("READY");
    peer.sigkill();
    // Whatever arrived before the kill completes first; then everything is flushed.
    for i in 0..4 {
        e.recv(i, 0, 65536);
    }
    let mut canceled = 0;
    while canceled < 4 {
        let r = e.wait();
        match r.status {
            Status::SUCCESS => e.recv(r.request_context, 0, 65536),
            Status::CANCELED => canceled += 1,
            s => panic!("unexpected status {s}"),
        }
    }
    // Later posts complete at once with ND_CANCELED.
    e.recv(9, 0, 16);
    assert_eq!(e.poll().status, Status::CANCELED);
}

/// The sender is killed mid-stream (ring full, chunked messages in flight) while we busy-poll:
/// our Receives complete ND_CANCELED within the deadline. Repeated with different amounts
/// received before the kill, so the kill lands at different points of the protocol.
#[test]
fn sigkill_while_busy_polling_mid_stream() {
    for received_before_kill in [0u64, 1, 7, 33] {
        let mut peer = Peer::spawn("child_main", "stream", "");
        let addr: SocketAddr = peer.expect("LISTENING ").parse().expect("address");
        let e = End::new(BUF, 16);
        for i in 0..8 {
            e.recv(i, (i as usize) * 65536, 65536);
        }
        e.connect(addr);
        peer.expect("READY");
        let mut got = 0;
        while got < received_before_kill {
            let r = e.poll();
            assert_eq!(r.status, Status::SUCCESS);
            e.recv(r.request_context, r.request_context as usize * 65536, 65536);
            got += 1;
        }
        peer.sigkill();
        let mut canceled = 0;
        while canceled < 8 {
            let r = e.poll();
            match r.status {
                Status::SUCCESS => {
                    e.recv(r.request_context, r.request_context as usize * 65536, 65536)
                }
                Status::CANCELED => canceled += 1,
                s => panic!("unexpected status {s}"),
            }
        }
    }
}

/// The active side is killed after its Connect completed but before CompleteConnect: our
/// pending Accept completes with ND_CONNECTION_REFUSED (D9) instead of hanging.
#[test]
fn sigkill_active_side_before_complete_connect() {
    let e = End::new(4096, 4);
    let (l, addr) = e.listen();
    let mut peer = Peer::spawn("child_main", "hold-connect", &addr.to_string());
    l.get_connection_request(&e.connector)
        .expect("request")
        .wait_timeout(Some(DEADLINE))
        .expect("in time")
        .expect("request");
    let ov = e.connector.accept(&e.qp, 0, 0, &[]).expect("accept");
    peer.expect("READY");
    peer.sigkill();
    let r = ov.wait_timeout(Some(DEADLINE)).expect("accept completes");
    assert_eq!(r.expect_err("refused").status(), Status::CONNECTION_REFUSED);
}

fn dev_shm() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Abstract socket names of this provider held by any process (`/proc/net/unix`).
fn shm_names() -> Vec<String> {
    let t = std::fs::read_to_string("/proc/net/unix").unwrap_or_default();
    let mut v: Vec<String> = t
        .lines()
        .filter_map(|l| l.split_whitespace().nth(7))
        .filter(|n| n.starts_with("@netdirect-shm/"))
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

/// Nothing is left behind: no /dev/shm entry, no socket file (abstract names die with their
/// sockets), after a normal run and after a killed one.
#[test]
fn no_leftovers_after_normal_and_killed_runs() {
    let before = dev_shm();
    // A normal run (server exits by itself) ...
    let mut peer = Peer::spawn("child_main", "echo", "poll");
    let addr: SocketAddr = peer.expect("LISTENING ").parse().expect("address");
    let name_of = |a: SocketAddr| format!("@netdirect-shm/L/{}/{}", a.ip(), a.port());
    let listener_name = name_of(addr);
    assert!(
        shm_names().contains(&listener_name),
        "the listener holds its name"
    );
    {
        let e = End::new(2 * BUF, 8);
        e.connect(addr);
        e.recv(2, BUF, BUF);
        e.fill(0, b"ping");
        e.send(1, 0, 4).expect("send");
        let _ = e.poll();
        let _ = e.poll();
        e.disconnect();
    }
    assert!(peer.wait_exit().success());
    // ... and a killed one.
    let mut peer = Peer::spawn("child_main", "stream", "");
    let addr2: SocketAddr = peer.expect("LISTENING ").parse().expect("address");
    {
        let e = End::new(BUF, 8);
        e.connect(addr2);
        peer.expect("READY");
        peer.sigkill();
    }
    assert_eq!(dev_shm(), before, "no /dev/shm entry appeared");
    let names = shm_names();
    for a in [addr, addr2] {
        let n = name_of(a);
        assert!(!names.contains(&n), "{n} was left behind: {names:?}");
        // The port the listener held in the TCP port space went with the process too.
        std::net::TcpListener::bind(a).unwrap_or_else(|e| panic!("{a} still held: {e}"));
    }
}

/// CPU time of process `pid` (user + system), from /proc.
fn cpu_time(pid: u32) -> std::time::Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let after = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    std::time::Duration::from_millis(ticks * 10) // USER_HZ is 100 on Linux
}

/// A blocking waiter sleeps: neither our thread waiting on an idle connection nor the peer
/// blocked in its own wait burns CPU (no spinning, no helper thread).
#[test]
fn blocking_waits_do_not_spin() {
    let mut peer = Peer::spawn("child_main", "echo", "blocking");
    let addr: SocketAddr = peer.expect("LISTENING ").parse().expect("address");
    let e = End::new(2 * BUF, 8);
    e.connect(addr);
    e.recv(2, BUF, 64);
    let thread_cpu = || {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        std::time::Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
    };
    let pid = peer.child.id();
    let (peer0, our0) = (cpu_time(pid), thread_cpu());
    let idle = std::time::Duration::from_millis(500);
    let ov = e.cq.notify(netdirect::NotifyType::Any).expect("notify");
    assert!(ov.wait_timeout(Some(idle)).is_none(), "nothing arrives");
    let (peer_used, our_used) = (cpu_time(pid) - peer0, thread_cpu() - our0);
    assert!(
        our_used < idle / 5,
        "our waiting thread used {our_used:?} in {idle:?}"
    );
    assert!(
        peer_used < idle / 5,
        "the waiting peer used {peer_used:?} in {idle:?}"
    );
    // And it still wakes promptly for a message.
    e.fill(0, b"wake up");
    e.send(1, 0, 7).expect("send");
    let mut got = 0;
    while got < 2 {
        let r = e.wait();
        assert_eq!(r.status, Status::SUCCESS);
        got += 1;
    }
    e.disconnect();
    assert!(peer.wait_exit().success());
}

/// The listening process is killed while our Connect waits for its answer (its request sits in
/// the listener's queue): the Connect completes with ND_CONNECTION_REFUSED.
#[test]
fn sigkill_listener_while_connect_pending() {
    let mut peer = Peer::spawn("child_main", "listen-only", "");
    let addr: SocketAddr = peer.expect("LISTENING ").parse().expect("address");
    let e = End::new(4096, 4);
    let ov = e
        .connector
        .connect(&e.qp, addr, 0, 0, &[])
        .expect("connect");
    assert!(
        ov.try_result().is_none(),
        "nobody answers yet: {:?}",
        ov.try_result()
    );
    peer.sigkill();
    let r = ov.wait_timeout(Some(DEADLINE)).expect("connect completes");
    assert_eq!(r.expect_err("refused").status(), Status::CONNECTION_REFUSED);
}
