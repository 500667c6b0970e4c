//! Shared pieces of the `shm` integration tests: one connected endpoint over the public
//! `netdirect` API, child processes (this test binary re-run with a role in the environment),
//! and waits that always have a deadline.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use netdirect::{
    Adapter, Buffer, CompletionQueue, Connector, Listener, MemoryRegion, MrFlags, NdResult,
    NotifyType, OpFlags, Provider, QueuePair, RequestType, Status,
};

/// Every wait in these tests gives up after this long: nothing may hang.
pub(crate) const DEADLINE: Duration = Duration::from_secs(30);

/// The environment variable that turns this test binary into a child role.
pub(crate) const ROLE_VAR: &str = "NETDIRECT_SHM_TEST_ROLE";

pub(crate) fn provider() -> Provider {
    Provider::open("shm").expect("shm provider registered")
}

/// One side of a connection: adapter, one CQ for everything, one QP, one registered buffer.
pub(crate) struct End {
    pub(crate) adapter: Adapter,
    pub(crate) cq: CompletionQueue,
    pub(crate) qp: QueuePair,
    pub(crate) connector: Connector,
    pub(crate) mr: MemoryRegion,
    pub(crate) buf: Buffer,
}

impl End {
    pub(crate) fn new(buf_len: usize, depth: u32) -> Self {
        let adapter = provider()
            .open_adapter_for("127.0.0.1:0".parse().unwrap())
            .expect("adapter");
        // These tests choose which thread drives when (`drive`), to put the rings in the
        // states they check: no progress engine (tests/progress.rs of `netdirect` and the
        // conformance suite's engine runs cover it).
        adapter
            .set_progress_mode(netdirect::ProgressMode::Manual)
            .expect("manual mode");
        let cq = adapter
            .create_completion_queue(depth * 4, 0, 0)
            .expect("cq");
        let qp = adapter
            .create_queue_pair(&cq, &cq, 7, depth, depth, 4, 4, 0)
            .expect("qp");
        let buf = Buffer::new(buf_len).expect("buffer");
        let mr = adapter.create_memory_region().expect("mr");
        mr.register_buffer(
            &buf,
            MrFlags::ALLOW_LOCAL_WRITE | MrFlags::ALLOW_REMOTE_READ | MrFlags::ALLOW_REMOTE_WRITE,
        )
        .expect("register")
        .wait()
        .expect("register");
        let connector = adapter.create_connector().expect("connector");
        Self {
            adapter,
            cq,
            qp,
            connector,
            mr,
            buf,
        }
    }

    pub(crate) fn token(&self) -> u32 {
        self.mr.get_local_token()
    }

    /// Post a Receive of `len` bytes at `off`.
    pub(crate) fn recv(&self, ctx: u64, off: usize, len: usize) {
        let sge = self.buf.sge(off..off + len, self.token());
        // SAFETY: tests read the range only after the Receive completed.
        unsafe { self.qp.receive(ctx, &[sge]) }.expect("receive");
    }

    /// Send `len` bytes at `off`.
    pub(crate) fn send(&self, ctx: u64, off: usize, len: usize) -> netdirect::Result<()> {
        let sge = self.buf.sge(off..off + len, self.token());
        // SAFETY: tests do not write the range before the Send completed.
        unsafe { self.qp.send(ctx, &[sge], OpFlags::empty()) }
    }

    pub(crate) fn fill(&self, off: usize, bytes: &[u8]) {
        // SAFETY: no request uses this range now.
        unsafe { self.buf.as_mut_slice()[off..off + bytes.len()].copy_from_slice(bytes) };
    }

    pub(crate) fn read(&self, off: usize, len: usize) -> Vec<u8> {
        // SAFETY: no request uses this range now.
        unsafe { self.buf.as_slice()[off..off + len].to_vec() }
    }

    /// Busy-poll the CQ for one completion, with the deadline.
    pub(crate) fn poll(&self) -> NdResult {
        let end = Instant::now() + DEADLINE;
        let mut r = [NdResult::EMPTY];
        loop {
            if self.cq.get_results(&mut r) == 1 {
                return r[0];
            }
            assert!(Instant::now() < end, "no completion within the deadline");
            std::hint::spin_loop();
        }
    }

    /// Block (CQ Notify, no spinning) for one completion, with the deadline.
    pub(crate) fn wait(&self) -> NdResult {
        let end = Instant::now() + DEADLINE;
        let mut r = [NdResult::EMPTY];
        loop {
            if self.cq.get_results(&mut r) == 1 {
                return r[0];
            }
            let ov = self.cq.notify(NotifyType::Any).expect("notify");
            let left = end.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no completion within the deadline");
            if self.cq.get_results(&mut r) == 1 {
                return r[0];
            }
            let _ = ov.wait_timeout(Some(left));
        }
    }

    /// Disconnect, and wait (with the deadline) for the Disconnect to complete.
    pub(crate) fn disconnect(&self) {
        self.connector
            .disconnect()
            .expect("disconnect")
            .wait_timeout(Some(DEADLINE))
            .expect("disconnect in time")
            .expect("disconnect");
    }

    /// Listen on 127.0.0.1 (port 0), returning the listener and its address.
    pub(crate) fn listen(&self) -> (Listener, SocketAddr) {
        let l = self.adapter.create_listener().expect("listener");
        l.bind("127.0.0.1:0".parse().unwrap()).expect("bind");
        l.listen(0).expect("listen");
        let a = l.get_local_address().expect("address");
        (l, a)
    }

    /// Passive side: take one request and accept it.
    pub(crate) fn accept_one(&self, l: &Listener) {
        self.accept_one_with(l, 0);
    }

    /// [`End::accept_one`] allowing `reads` Reads each way (inbound and outbound limits).
    pub(crate) fn accept_one_with(&self, l: &Listener, reads: u32) {
        l.get_connection_request(&self.connector)
            .expect("get connection request")
            .wait_timeout(Some(DEADLINE))
            .expect("request in time")
            .expect("request");
        self.connector
            .accept(&self.qp, reads, reads, &[])
            .expect("accept")
            .wait_timeout(Some(DEADLINE))
            .expect("accept in time")
            .expect("accept");
    }

    /// Active side: connect and complete.
    pub(crate) fn connect(&self, dest: SocketAddr) {
        self.connect_with(dest, 0);
    }

    /// [`End::connect`] asking for `reads` Reads each way.
    pub(crate) fn connect_with(&self, dest: SocketAddr, reads: u32) {
        self.connector
            .connect(&self.qp, dest, reads, reads, &[])
            .expect("connect")
            .wait_timeout(Some(DEADLINE))
            .expect("connect in time")
            .expect("connect");
        self.connector
            .complete_connect()
            .expect("complete connect")
            .wait()
            .expect("complete connect");
    }
}

/// The payload byte at `i` of message `k`.
pub(crate) fn pattern(k: u64, i: usize) -> u8 {
    (k as u8)
        .wrapping_mul(37)
        .wrapping_add(i as u8)
        .wrapping_add((i >> 8) as u8)
}

pub(crate) fn message(k: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| pattern(k, i)).collect()
}

/// A child process running `role` of this test binary, with its output lines.
pub(crate) struct Peer {
    pub(crate) child: Child,
    lines: Receiver<String>,
}

impl Peer {
    /// Run the test named `entry` of this binary as a child with `role` and `args`.
    pub(crate) fn spawn(entry: &str, role: &str, args: &str) -> Self {
        Self::spawn_env(entry, role, args, &[])
    }

    /// As [`Peer::spawn`], with extra environment variables for the child.
    pub(crate) fn spawn_env(entry: &str, role: &str, args: &str, env: &[(&str, &str)]) -> Self {
        let exe = std::env::current_exe().expect("test binary");
        let mut child = Command::new(exe)
            .args(["--exact", entry, "--nocapture", "--test-threads=1"])
            .envs(env.iter().copied())
            .env(ROLE_VAR, role)
            .env("NETDIRECT_SHM_TEST_ARGS", args)
            // Kept open (in `child.stdin`) until the `Peer` goes: roles that block on standard
            // input stay alive until killed.
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn child");
        let out = child.stdout.take().expect("piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines() {
                let Ok(l) = l else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Self { child, lines }
    }

    /// The text after `tag` on the first output line that contains it.
    pub(crate) fn expect(&mut self, tag: &str) -> String {
        let end = Instant::now() + DEADLINE;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    if let Some(i) = l.find(tag) {
                        return l[i + tag.len()..].trim().to_string();
                    }
                }
                Err(_) => {
                    let _ = self.child.kill();
                    panic!("child did not print {tag:?} in time");
                }
            }
        }
    }

    pub(crate) fn sigkill(&mut self) {
        let pid = rustix::process::Pid::from_child(&self.child);
        rustix::process::kill_process(pid, rustix::process::Signal::KILL).expect("kill");
        let _ = self.wait_exit();
    }

    /// Wait for the child's exit (pidfd + poll: no sleeping), killing it at the deadline.
    pub(crate) fn wait_exit(&mut self) -> std::process::ExitStatus {
        let pid = rustix::process::Pid::from_child(&self.child);
        if let Ok(fd) = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) {
            let mut fds = [rustix::event::PollFd::new(
                &fd,
                rustix::event::PollFlags::IN,
            )];
            let t = rustix::time::Timespec {
                tv_sec: DEADLINE.as_secs() as _,
                tv_nsec: 0,
            };
            let ready = rustix::event::poll(&mut fds, Some(&t)).unwrap_or(0);
            if ready == 0 {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("child did not exit in time");
            }
        }
        self.child.wait().expect("wait")
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The role and arguments this process was started with, if it is a child.
pub(crate) fn role() -> Option<(String, String)> {
    let r = std::env::var(ROLE_VAR).ok()?;
    let a = std::env::var("NETDIRECT_SHM_TEST_ARGS").unwrap_or_default();
    Some((r, a))
}

/// Print a line the parent waits for.
pub(crate) fn say(line: &str) {
    use std::io::Write;
    let mut o = std::io::stdout();
    let _ = writeln!(o, "\n{line}");
    let _ = o.flush();
}

pub(crate) fn is_canceled(r: &NdResult) -> bool {
    r.status == Status::CANCELED
}

/// A connected pair with Reads allowed both ways: (active, passive).
pub(crate) fn pair(buf: usize) -> (End, End) {
    pair_of_depth(buf, 8)
}

/// As [`pair`], with queues of `depth` requests (completion queues of four times that).
pub(crate) fn pair_of_depth(buf: usize, depth: u32) -> (End, End) {
    let s = End::new(buf, depth);
    let (l, addr) = s.listen();
    let c = End::new(buf, depth);
    std::thread::scope(|t| {
        t.spawn(|| s.accept_one_with(&l, 4));
        c.connect_with(addr, 4);
    });
    (c, s)
}

/// Poll both ends until the initiator `c` has a completion; the target must report none.
pub(crate) fn drive(c: &End, s: &End) -> NdResult {
    let end = Instant::now() + DEADLINE;
    let mut r = [NdResult::EMPTY];
    loop {
        assert_eq!(s.cq.get_results(&mut r), 0, "target completion {r:?}");
        if c.cq.get_results(&mut r) == 1 {
            return r[0];
        }
        assert!(Instant::now() < end, "no completion within the deadline");
    }
}

/// `r` is the successful completion of request `ctx` of type `ty`, `len` bytes.
pub(crate) fn done_ok(r: NdResult, ty: RequestType, ctx: u64, len: usize, what: &str) {
    assert_eq!(
        (
            r.status,
            r.request_type,
            r.request_context,
            r.bytes_transferred
        ),
        (Status::SUCCESS, ty, ctx, len as u32),
        "{what}: {ty:?} of {len}"
    );
}

/// Writes of 0 B to 1 MiB into `s`'s buffer and Reads of them back, each checked byte for
/// byte; `what` names the path in messages.
pub(crate) fn sweep(c: &End, s: &End, what: &str) {
    let area = 2 << 20;
    for (k, len) in [
        0usize,
        1,
        8,
        32,
        33,
        1000,
        4096,
        16 << 10,
        200 << 10,
        1 << 20,
    ]
    .into_iter()
    .enumerate()
    {
        let k = k as u64 + 1;
        let data = message(k, len);
        c.fill(0, &data);
        let at = 4096 + k as usize; // unaligned
        let addr = s.buf.as_ptr() as u64 + at as u64;
        let token = s.mr.get_remote_token();
        let flags = if len <= 1024 {
            OpFlags::INLINE
        } else {
            OpFlags::empty()
        };
        let sge = c.buf.sge(0..len, c.token());
        // SAFETY: the source is left alone until the Write completes.
        unsafe { c.qp.write(k, &[sge], addr, token, flags) }.expect("post Write");
        done_ok(drive(c, s), RequestType::Write, k, len, what);
        // Complete means placed: the bytes are there now, nothing past them changed.
        assert_eq!(s.read(at, len), data, "{what}: Write of {len} placed");
        // Read them back into another part of the initiator's buffer.
        let back = area - len.max(1);
        let sge = c.buf.sge(back..back + len, c.token());
        // SAFETY: the sink is read only after the Read completes.
        unsafe { c.qp.read(100 + k, &[sge], addr, token, OpFlags::empty()) }.expect("Read");
        done_ok(drive(c, s), RequestType::Read, 100 + k, len, what);
        assert_eq!(c.read(back, len), data, "{what}: Read of {len} back");
    }
}
