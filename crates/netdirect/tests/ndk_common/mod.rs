//! What the NDK conformance tests share: the child-process harness (the test binary runs
//! itself again in a role, and the processes talk through their standard output lines), and
//! small NDK helpers that turn a request's inline-or-callback completion into one status.

#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use netdirect::ndk::{
    CompletionMode, NdkAdapter, NdkConnector, NdkCq, NdkResult, NtStatus, OpenParams,
    RequestCompletion,
};
use netdirect::Provider;

pub const ROLE: &str = "ND_NDK_TEST_ROLE";
/// The longest any step may take before the test calls it hung.
pub const BOUND: Duration = Duration::from_secs(60);

/// The configuration a child runs with.
#[derive(Debug, Clone)]
pub struct Cfg {
    pub provider: String,
    pub ip: IpAddr,
    pub mode: CompletionMode,
}

impl Cfg {
    /// The child's configuration, from its environment.
    pub fn from_env() -> Self {
        Self {
            provider: std::env::var("ND_TEST_PROVIDER").expect("provider"),
            ip: std::env::var("ND_TEST_IP")
                .expect("ip")
                .parse()
                .expect("ip"),
            mode: CompletionMode::parse(&std::env::var("ND_NDK_COMPLETION").expect("mode"))
                .expect("mode"),
        }
    }

    pub fn addr(&self, port: u16) -> SocketAddr {
        SocketAddr::new(self.ip, port)
    }

    pub fn open(&self) -> NdkAdapter {
        let p = Provider::open(&self.provider).expect("provider");
        let params = OpenParams {
            completion: self.mode,
            ..OpenParams::default()
        };
        NdkAdapter::open(&p, self.addr(0), params).expect("open the NDK adapter")
    }

    /// An address of the same family that is nobody's (RFC 5737, RFC 3849).
    pub fn foreign(&self) -> SocketAddr {
        match self.ip {
            IpAddr::V4(_) => SocketAddr::new(Ipv4Addr::new(192, 0, 2, 1).into(), 0),
            IpAddr::V6(_) => SocketAddr::new("2001:db8::1".parse::<Ipv6Addr>().unwrap().into(), 0),
        }
    }
}

/// The configurations every scenario runs in: both providers, IPv4 and IPv6 loopback.
pub fn matrix() -> Vec<(&'static str, IpAddr)> {
    let mut m = Vec::new();
    for p in ["tcp", "shm"] {
        m.push((p, IpAddr::from(Ipv4Addr::LOCALHOST)));
        if ipv6() {
            m.push((p, IpAddr::from(Ipv6Addr::LOCALHOST)));
        }
    }
    m
}

fn ipv6() -> bool {
    std::net::TcpListener::bind((Ipv6Addr::LOCALHOST, 0)).is_ok()
}

pub fn mode_name(m: CompletionMode) -> &'static str {
    match m {
        CompletionMode::Inline => "inline",
        CompletionMode::Pending => "pending",
    }
}

/// A child process running `test` in `role`.
pub struct Peer {
    pub child: Child,
    pub input: std::process::ChildStdin,
    pub out: BufReader<ChildStdout>,
    pub what: String,
}

pub fn spawn(
    test: &str,
    role: &str,
    provider: &str,
    ip: IpAddr,
    mode: CompletionMode,
    extra: &[(&str, String)],
) -> Peer {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env(ROLE, role)
        .env("ND_TEST_PROVIDER", provider)
        .env("ND_TEST_IP", ip.to_string())
        .env("ND_NDK_COMPLETION", mode_name(mode))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn the peer process");
    let out = BufReader::new(child.stdout.take().unwrap());
    let input = child.stdin.take().unwrap();
    Peer {
        child,
        input,
        out,
        what: format!("{role} ({provider}, {ip}, {})", mode_name(mode)),
    }
}

impl Peer {
    /// What follows `needle` on the first line that has it.
    pub fn line_with(&mut self, needle: &str) -> String {
        let mut l = String::new();
        loop {
            l.clear();
            let n = self.out.read_line(&mut l).unwrap();
            assert!(n > 0, "{}: no line with {needle:?}", self.what);
            if let Some((_, rest)) = l.split_once(needle) {
                return rest.trim().to_string();
            }
        }
    }

    /// The child's next line.
    pub fn next_line(&mut self) -> String {
        let mut l = String::new();
        let n = self.out.read_line(&mut l).unwrap();
        assert!(n > 0, "{}: ended early", self.what);
        l.trim().to_string()
    }

    /// Send the child a line (it reads it with [`hear`]).
    pub fn tell(&mut self, line: &str) {
        writeln!(self.input, "{line}").unwrap();
        self.input.flush().unwrap();
    }

    /// Wait for the child; it must succeed.
    pub fn finish(mut self) {
        // Drain its output so it never blocks on a full pipe.
        let mut rest = String::new();
        while self
            .out
            .read_line(&mut rest)
            .map(|n| n > 0)
            .unwrap_or(false)
        {}
        let st = self.child.wait().unwrap();
        assert!(st.success(), "{} failed: {st}", self.what);
    }
}

/// Tell the parent something (one line).
pub fn say(what: impl std::fmt::Display) {
    println!("{what}");
    std::io::stdout().flush().unwrap();
}

/// In a child: block until the parent tells `needle`; what follows it.
pub fn hear(needle: &str) -> String {
    let mut l = String::new();
    loop {
        l.clear();
        let n = std::io::stdin().read_line(&mut l).unwrap();
        assert!(n > 0, "the parent never said {needle:?}");
        if let Some((_, rest)) = l.split_once(needle) {
            return rest.trim().to_string();
        }
    }
}

/// The role of this process, if it is a child.
pub fn role() -> Option<String> {
    std::env::var(ROLE).ok()
}

/// Run `f` with a completion callback and return the request's status: the inline one (and
/// then the callback must never be called: see [`Calls::assert_quiet`]), or the one the
/// callback delivered once (`STATUS_PENDING` returned).
pub fn call(calls: &Calls, f: impl FnOnce(RequestCompletion) -> NtStatus) -> NtStatus {
    call_raw(calls, f).1
}

/// [`call`], with what the function returned as well: `(returned, final status)`.
pub fn call_raw(
    calls: &Calls,
    f: impl FnOnce(RequestCompletion) -> NtStatus,
) -> (NtStatus, NtStatus) {
    let (tx, rx) = mpsc::channel();
    let s = f(Box::new(move |st| {
        assert!(
            netdirect::ndk::on_callback_thread(),
            "a completion callback ran on a consumer's thread"
        );
        let _ = tx.send(st);
    }));
    if s == NtStatus::PENDING {
        (
            s,
            rx.recv_timeout(BOUND)
                .expect("the completion callback never came"),
        )
    } else {
        calls.inline.lock().unwrap().push(rx);
        (s, s)
    }
}

/// Receivers of callbacks of requests that completed inline: none may ever fire.
#[derive(Default)]
pub struct Calls {
    inline: Mutex<Vec<Receiver<NtStatus>>>,
}

impl Calls {
    /// After the adapter's close (which returns once every callback has run): no callback came
    /// for a request that completed inline.
    pub fn assert_quiet(&self) {
        for rx in self.inline.lock().unwrap().iter() {
            assert!(
                rx.try_recv().is_err(),
                "a callback came for an inline completion"
            );
        }
    }
}

/// Poll `cq` until one completion arrives.
pub fn next(cq: &NdkCq) -> NdkResult {
    let mut r = [NdkResult::EMPTY; 1];
    let deadline = Instant::now() + BOUND;
    while cq.get_cq_results(&mut r) == 0 {
        assert!(Instant::now() < deadline, "no completion in {BOUND:?}");
        std::thread::yield_now();
    }
    r[0]
}

/// A log of events, in the order they happened, shared with callbacks.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<String>>>, Arc<std::sync::Condvar>);

impl Log {
    pub fn push(&self, e: impl Into<String>) {
        self.0.lock().unwrap().push(e.into());
        self.1.notify_all();
    }

    pub fn get(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    /// Block until `e` is logged.
    pub fn wait_for(&self, e: &str) {
        let deadline = Instant::now() + BOUND;
        let mut g = self.0.lock().unwrap();
        while !g.iter().any(|x| x == e) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "never logged {e:?}; log: {:?}", *g);
            g = self.1.wait_timeout(g, left).unwrap().0;
        }
    }
}

/// A channel-backed one-shot signal for callbacks.
pub fn signal<T: Send + 'static>() -> (Sender<T>, Receiver<T>) {
    mpsc::channel()
}

/// One NDK side of a connection: adapter, PD, one CQ, a QP and a registered buffer.
pub struct Side {
    pub cfg: Cfg,
    pub a: NdkAdapter,
    pub pd: netdirect::ndk::NdkPd,
    pub cq: NdkCq,
    pub qp: netdirect::ndk::NdkQp,
    pub buf: netdirect::Buffer,
    pub mr: netdirect::ndk::NdkMr,
    pub calls: Calls,
}

impl Side {
    /// A side whose CQ notification callback is `notify`.
    pub fn new(cfg: &Cfg, notify: impl Fn(NtStatus) + Send + Sync + 'static) -> Self {
        let a = cfg.open();
        let calls = Calls::default();
        let pd = a.create_pd().expect("pd");
        let cq = a.create_cq(1024, notify, None).expect("cq");
        let qp = pd
            .create_qp(&cq, &cq, 0x51de, 256, 64, 1, 1, 64)
            .expect("qp");
        let buf = netdirect::Buffer::new(8192).expect("buffer");
        let mr = pd.create_mr(false).expect("mr");
        let flags = netdirect::MrFlags::ALLOW_LOCAL_WRITE
            | netdirect::MrFlags::ALLOW_REMOTE_READ
            | netdirect::MrFlags::ALLOW_REMOTE_WRITE
            | netdirect::MrFlags::RDMA_READ_SINK;
        assert_eq!(
            call(&calls, |cb| mr.register_buffer(&buf, flags, cb)),
            NtStatus::SUCCESS
        );
        Self {
            cfg: cfg.clone(),
            a,
            pd,
            cq,
            qp,
            buf,
            mr,
            calls,
        }
    }

    /// A listener at the config's address whose connection requests arrive on the returned
    /// channel, listening, its address announced to the peer (`say`).
    pub fn listen_announced(&self) -> (netdirect::ndk::NdkListener, Receiver<NdkConnector>) {
        let (tx, rx) = mpsc::channel::<NdkConnector>();
        let tx = Mutex::new(tx);
        let l = self
            .a
            .create_listener(move |c| tx.lock().unwrap().send(c).unwrap())
            .expect("listener");
        assert_eq!(
            call(&self.calls, |cb| l.listen(self.cfg.addr(0), cb)),
            NtStatus::SUCCESS
        );
        say(format!(
            "listening {}",
            l.get_local_address().expect("address")
        ));
        (l, rx)
    }

    /// Post a Receive of 64 bytes into slot `ctx` (slots of 64 bytes).
    pub fn recv(&self, ctx: u64) {
        let sge = self.slot(ctx);
        // SAFETY: the buffer is only read after the Receive completed.
        assert_eq!(
            unsafe { self.qp.receive(ctx, &[sge]) },
            NtStatus::SUCCESS,
            "receive {ctx}"
        );
    }

    /// The SGE of 64-byte slot `i`.
    pub fn slot(&self, i: u64) -> netdirect::ndk::NdkSge {
        let at = (i as usize % 128) * 64;
        self.buf.sge(at..at + 64, self.mr.get_local_token())
    }

    /// The bytes of slot `i` a completed Receive wrote.
    pub fn slot_bytes(&self, i: u64, len: usize) -> Vec<u8> {
        let at = (i as usize % 128) * 64;
        // SAFETY: the Receive that wrote the slot completed.
        unsafe { self.buf.as_slice()[at..at + len].to_vec() }
    }

    /// An INLINE Send of `data` (the post's status).
    pub fn send(&self, ctx: u64, data: &[u8], flags: netdirect::ndk::NdkOpFlags) -> NtStatus {
        let sge = netdirect::Sge::new(data.as_ptr().cast_mut(), data.len() as u32, 0);
        // SAFETY: INLINE copies `data` during the call.
        unsafe {
            self.qp
                .send(ctx, &[sge], flags | netdirect::ndk::NdkOpFlags::INLINE)
        }
    }

    /// Close everything (the QP first), then the adapter; no callback came for an inline
    /// completion.
    pub fn close(self) {
        let (tx, rx) = mpsc::channel::<&'static str>();
        let closer = |what: &'static str| {
            let tx = tx.clone();
            move || {
                let _ = tx.send(what);
            }
        };
        let mut pending = 0;
        for s in [
            self.qp.close(closer("qp")),
            self.cq.close(closer("cq")),
            self.mr.close(closer("mr")),
            self.pd.close(closer("pd")),
        ] {
            if s == NtStatus::PENDING {
                pending += 1;
            } else {
                assert_eq!(s, NtStatus::SUCCESS);
            }
        }
        for _ in 0..pending {
            rx.recv_timeout(BOUND)
                .expect("a close completion never came");
        }
        self.a.close();
        assert!(
            rx.try_recv().is_err(),
            "a close completed twice, or after SUCCESS"
        );
        self.calls.assert_quiet();
    }
}
