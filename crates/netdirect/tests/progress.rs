//! The progress engine (`ProgressMode::Thread`), between separate processes: what a program
//! written for RDMA hardware expects to advance while it makes no netdirect call.
//!
//! Each test runs this test binary again as the peer process (`ROLE` in the environment), and
//! the two talk through their standard output lines.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use netdirect::{
    Adapter, CompletionQueue, Connector, Listener, MrFlags, NdResult, NotifyType, OpFlags,
    ProgressMode, Provider, QueuePair, Result, Sge, Status,
};

const ROLE: &str = "ND_PROGRESS_TEST_ROLE";
/// How long the target makes no netdirect call.
const IDLE: Duration = Duration::from_secs(30);
/// The target's memory: all of it is written, then read back.
const SIZE: usize = 1 << 30;
/// One request's share.
const CHUNK: usize = 16 << 20;

fn adapter(provider: &str, mode: ProgressMode) -> Result<Adapter> {
    let a = Provider::open(provider)?.open_adapter_for("127.0.0.1:0".parse().unwrap())?;
    a.set_progress_mode(mode)?;
    Ok(a)
}

fn next(cq: &CompletionQueue) -> NdResult {
    let mut r = [NdResult::EMPTY; 1];
    let deadline = Instant::now() + Duration::from_secs(60);
    while cq.get_results(&mut r) == 0 {
        assert!(Instant::now() < deadline, "no completion in 60 s");
        std::thread::yield_now();
    }
    assert_eq!(r[0].status, Status::SUCCESS, "{:?}", r[0]);
    r[0]
}

/// The pattern of the chunk at `base`: a fixed pseudo-random block (made once), with every
/// 4 KiB page stamped with its offset in the target's memory, so a chunk that lands in the
/// wrong place, or not at all, shows. Cheap enough for 1 GiB in a debug build.
fn fill(buf: &mut [u8], base: usize) {
    static BLOCK: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let block = BLOCK.get_or_init(|| {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        (0..CHUNK)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    });
    buf.copy_from_slice(&block[..buf.len()]);
    for page in (0..buf.len()).step_by(4096) {
        buf[page..page + 8].copy_from_slice(&((base + page) as u64).to_le_bytes());
    }
}

/// The passive target: registers `SIZE` bytes, accepts one connection, tells the peer where
/// its memory is, and then makes no netdirect call for `IDLE`.
fn target(provider: &str) -> Result<()> {
    let a = adapter(provider, ProgressMode::Thread)?;
    let cq = a.create_completion_queue(8, 0, 0)?;
    let qp = a.create_queue_pair(&cq, &cq, 0, 4, 4, 1, 1, 0)?;
    // Heap memory, not a `Buffer`: shm then places the peer's Writes itself (a `Buffer` it
    // could map, and the peer would copy into it without the target's help).
    let mut mem = vec![0u8; SIZE];
    let mr = a.create_memory_region()?;
    // SAFETY: `mem` outlives the registration (deregistered below) and is not read until
    // the peer is done.
    unsafe {
        mr.register(
            mem.as_mut_ptr(),
            SIZE,
            MrFlags::ALLOW_REMOTE_READ | MrFlags::ALLOW_REMOTE_WRITE,
        )?
        .wait()?;
    }
    let l = a.create_listener()?;
    l.bind("127.0.0.1:0".parse().unwrap())?;
    l.listen(0)?;
    println!("listening {}", l.get_local_address()?);
    let c = a.create_connector()?;
    l.get_connection_request(&c)?.wait()?;
    let mut pd = (mem.as_ptr() as u64).to_le_bytes().to_vec();
    pd.extend_from_slice(&mr.get_remote_token().to_le_bytes());
    c.accept(&qp, 8, 0, &pd)?.wait()?;
    println!("idle");
    std::io::stdout().flush().unwrap();
    // Computing: no netdirect call at all while the peer writes and reads everything.
    std::thread::sleep(IDLE);
    println!("awake");
    std::io::stdout().flush().unwrap();
    let mut want = vec![0u8; CHUNK];
    for off in (0..SIZE).step_by(CHUNK) {
        fill(&mut want, off);
        assert!(
            mem[off..off + CHUNK] == want[..],
            "the Write did not land at {off}"
        );
    }
    c.disconnect()?.wait()?;
    mr.deregister()?.wait()
}

/// The active peer: Writes all of the target's memory, Reads it all back and compares.
fn peer(provider: &str, at: SocketAddr) -> Result<()> {
    let a = adapter(provider, ProgressMode::Thread)?;
    let cq = a.create_completion_queue(8, 0, 0)?;
    let qp = a.create_queue_pair(&cq, &cq, 0, 4, 4, 1, 1, 0)?;
    let mut mem = vec![0u8; 2 * CHUNK];
    let mr = a.create_memory_region()?;
    // SAFETY: `mem` outlives the registration; each half is touched only between requests.
    unsafe {
        mr.register(
            mem.as_mut_ptr(),
            2 * CHUNK,
            MrFlags::ALLOW_LOCAL_WRITE | MrFlags::RDMA_READ_SINK,
        )?
        .wait()?;
    }
    let token = mr.get_local_token();
    let c = a.create_connector()?;
    c.bind("127.0.0.1:0".parse().unwrap())?;
    c.connect(&qp, at, 0, 8, b"")?.wait()?;
    let pd = c.private_data()?;
    let base = u64::from_le_bytes(pd[..8].try_into().unwrap());
    let rtoken = u32::from_le_bytes(pd[8..12].try_into().unwrap());
    c.complete_connect()?.wait()?;
    let (src, sink) = mem.split_at_mut(CHUNK);
    for off in (0..SIZE).step_by(CHUNK) {
        fill(src, off);
        let sge = Sge::new(src.as_mut_ptr(), CHUNK as u32, token);
        // SAFETY: `src` is not touched until the Write completes (next).
        unsafe { qp.write(1, &[sge], base + off as u64, rtoken, OpFlags::empty())? };
        next(&cq);
    }
    for off in (0..SIZE).step_by(CHUNK) {
        let sge = Sge::new(sink.as_mut_ptr(), CHUNK as u32, token);
        // SAFETY: `sink` is not read until the Read completes (next).
        unsafe { qp.read(2, &[sge], base + off as u64, rtoken, OpFlags::empty())? };
        next(&cq);
        fill(src, off);
        assert!(
            sink[..] == src[..],
            "the Read brought back other bytes at {off}"
        );
    }
    println!("done");
    c.disconnect()?.wait()?;
    mr.deregister()?.wait()
}

fn spawn(
    test: &str,
    role: &str,
    provider: &str,
    extra: &[(&str, String)],
) -> (Child, BufReader<ChildStdout>) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env(ROLE, role)
        .env("ND_TEST_PROVIDER", provider)
        // shm: place Writes through the rings, not a mapping (see `target`).
        .env("ND_SHM_MAP_MIN_KIB", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn the peer process");
    let out = BufReader::new(child.stdout.take().unwrap());
    (child, out)
}

/// Read lines up to the first with `needle`; what follows `needle` on it.
fn line_with(out: &mut BufReader<ChildStdout>, needle: &str) -> String {
    let mut l = String::new();
    loop {
        l.clear();
        assert!(
            out.read_line(&mut l).unwrap() > 0,
            "no line with {needle:?}"
        );
        // libtest may print its `test name ... ` prefix on the same line.
        if let Some((_, rest)) = l.split_once(needle) {
            return rest.trim().to_string();
        }
    }
}

/// Whether this side of a sleeping-side test is the one that sleeps.
fn sleeps(role: &str) -> bool {
    std::env::var("ND_TEST_SLEEPER").is_ok_and(|s| s == role)
}

/// A listener that (when it is the sleeper) makes no call for 10 s after `listen`, then takes
/// the request and accepts.
fn late_listener(provider: &str) -> Result<()> {
    let a = adapter(provider, ProgressMode::Thread)?;
    let cq = a.create_completion_queue(8, 0, 0)?;
    let qp = a.create_queue_pair(&cq, &cq, 0, 4, 4, 1, 1, 0)?;
    let l = a.create_listener()?;
    l.bind("127.0.0.1:0".parse().unwrap())?;
    l.listen(0)?;
    println!("listening {}", l.get_local_address()?);
    std::io::stdout().flush().unwrap();
    if sleeps("listener") {
        std::thread::sleep(Duration::from_secs(10));
    }
    let c = a.create_connector()?;
    l.get_connection_request(&c)?.wait()?;
    c.accept(&qp, 0, 0, b"")?.wait()?;
    println!("accepted");
    c.disconnect()?.wait()?;
    Ok(())
}

/// The peer of `late_listener`. When it is the sleeper it makes no call for 10 s after
/// `connect`: twice the request timeout after which a listener drops a connection whose MPA
/// request (or shm REQUEST) has not come, which only the connector's progress sends.
fn early_connector(provider: &str, at: SocketAddr) -> Result<()> {
    let a = adapter(provider, ProgressMode::Thread)?;
    let cq = a.create_completion_queue(8, 0, 0)?;
    let qp = a.create_queue_pair(&cq, &cq, 0, 4, 4, 1, 1, 0)?;
    let c = a.create_connector()?;
    c.bind("127.0.0.1:0".parse().unwrap())?;
    let connecting = c.connect(&qp, at, 0, 0, b"")?;
    if sleeps("connector") {
        std::thread::sleep(Duration::from_secs(10));
    }
    connecting.wait()?;
    c.complete_connect()?.wait()?;
    println!("connected");
    Ok(())
}

/// The child's side of a test, if this process is one.
fn child_role(test: &str) -> bool {
    let Ok(role) = std::env::var(ROLE) else {
        return false;
    };
    let provider = std::env::var("ND_TEST_PROVIDER").unwrap();
    let r = match role.as_str() {
        "target" => target(&provider),
        "peer" => peer(
            &provider,
            std::env::var("ND_TEST_AT").unwrap().parse().unwrap(),
        ),
        "listener" => late_listener(&provider),
        "connector" => early_connector(
            &provider,
            std::env::var("ND_TEST_AT").unwrap().parse().unwrap(),
        ),
        "notified" => notified_receiver(&provider),
        "counter" => burst_receiver(&provider),
        "burster" => burst_sender(
            &provider,
            std::env::var("ND_TEST_AT").unwrap().parse().unwrap(),
        ),
        "sender" => late_sender(
            &provider,
            std::env::var("ND_TEST_AT").unwrap().parse().unwrap(),
        ),
        other => panic!("unknown role {other} in {test}"),
    };
    r.expect("the child's side failed");
    true
}

/// A target that makes no call for 30 s serves its peer's RDMA Writes and Reads of 1 GiB in
/// that window: the peer finishes before the target wakes.
fn passive_target(provider: &str, test: &str) {
    if child_role(test) {
        return;
    }
    let (mut t, mut t_out) = spawn(test, "target", provider, &[]);
    let at = line_with(&mut t_out, "listening ");
    let (mut p, mut p_out) = spawn(test, "peer", provider, &[("ND_TEST_AT", at)]);
    line_with(&mut t_out, "idle");
    let idle = Instant::now();
    line_with(&mut p_out, "done");
    // Without the target's engine nothing moves until it wakes, IDLE after "idle".
    let took = idle.elapsed();
    assert!(
        took < IDLE,
        "the peer finished {took:?} after the target went idle"
    );
    eprintln!("{provider}: 1 GiB written and read back {took:?} into the target's idle window");
    line_with(&mut t_out, "awake");
    assert!(p.wait().unwrap().success(), "the peer failed");
    assert!(t.wait().unwrap().success(), "the target failed");
}

#[test]
fn a_passive_tcp_target_serves_rdma() {
    passive_target("tcp", "a_passive_tcp_target_serves_rdma");
}

#[test]
fn a_passive_shm_target_serves_rdma() {
    passive_target("shm", "a_passive_shm_target_serves_rdma");
}

/// A connection whose `sleeper` side makes no call for 10 s is made all the same, with the
/// engines running: a Connect to a listener whose process sleeps before
/// `GetConnectionRequest` waits for the Accept, and a connector that sleeps right after
/// `Connect` is not refused. On loopback both also hold in manual mode (the connector's
/// request leaves within its Connect call, and the listener takes it only when asked): what
/// these guard is that an engine leading through the sleep does not break connection set-up.
fn sleeping_side(provider: &str, test: &str, sleeper: &str) {
    if child_role(test) {
        return;
    }
    let s = ("ND_TEST_SLEEPER", sleeper.to_string());
    let (mut l, mut l_out) = spawn(test, "listener", provider, std::slice::from_ref(&s));
    let at = line_with(&mut l_out, "listening ");
    let (mut c, mut c_out) = spawn(test, "connector", provider, &[("ND_TEST_AT", at), s]);
    line_with(&mut c_out, "connected");
    line_with(&mut l_out, "accepted");
    assert!(c.wait().unwrap().success(), "the connector failed");
    assert!(l.wait().unwrap().success(), "the listener failed");
}

#[test]
fn a_tcp_connect_waits_for_a_sleeping_listener() {
    sleeping_side(
        "tcp",
        "a_tcp_connect_waits_for_a_sleeping_listener",
        "listener",
    );
}

#[test]
fn an_shm_connect_waits_for_a_sleeping_listener() {
    sleeping_side(
        "shm",
        "an_shm_connect_waits_for_a_sleeping_listener",
        "listener",
    );
}

#[test]
fn a_sleeping_tcp_connector_is_not_refused() {
    sleeping_side(
        "tcp",
        "a_sleeping_tcp_connector_is_not_refused",
        "connector",
    );
}

#[test]
fn a_sleeping_shm_connector_is_not_refused() {
    sleeping_side(
        "shm",
        "a_sleeping_shm_connector_is_not_refused",
        "connector",
    );
}

/// Listen on 127.0.0.1 (the address goes to standard output, for the parent), take one
/// connection request and accept it on `qp`.
fn accept_one(a: &Adapter, qp: &QueuePair) -> Result<(Listener, Connector)> {
    let l = a.create_listener()?;
    l.bind("127.0.0.1:0".parse().unwrap())?;
    l.listen(0)?;
    println!("listening {}", l.get_local_address()?);
    std::io::stdout().flush().unwrap();
    let c = a.create_connector()?;
    l.get_connection_request(&c)?.wait()?;
    c.accept(qp, 0, 0, b"")?.wait()?;
    Ok((l, c))
}

/// Connect `qp` to `at` and complete the connection.
fn connect_to(a: &Adapter, qp: &QueuePair, at: SocketAddr) -> Result<Connector> {
    let c = a.create_connector()?;
    c.bind("127.0.0.1:0".parse().unwrap())?;
    c.connect(qp, at, 0, 0, b"")?.wait()?;
    c.complete_connect()?.wait()?;
    Ok(c)
}

/// Sends a message to the [`Wake`](std::task::Wake) channel when woken.
struct ChannelWaker(std::sync::Mutex<std::sync::mpsc::Sender<()>>);

impl std::task::Wake for ChannelWaker {
    fn wake(self: std::sync::Arc<Self>) {
        let _ = self.0.lock().unwrap().send(());
    }
}

/// Accepts one connection with a Receive posted, arms its CQ (`Notify`) and blocks on a
/// channel that only the request's completion hook feeds: no thread of this process polls or
/// waits in netdirect while the peer's Send arrives, so only the engine can complete it.
fn notified_receiver(provider: &str) -> Result<()> {
    let a = adapter(provider, ProgressMode::Thread)?;
    let cq = a.create_completion_queue(8, 0, 0)?;
    let qp = a.create_queue_pair(&cq, &cq, 0, 4, 4, 1, 1, 0)?;
    let buf = netdirect::Buffer::new(64)?;
    let mr = a.create_memory_region()?;
    mr.register_buffer(&buf, MrFlags::ALLOW_LOCAL_WRITE)?
        .wait()?;
    // SAFETY: `buf` is not touched until the Receive completes.
    unsafe { qp.receive(7, &[buf.sge(0..64, mr.get_local_token())])? };
    let (_l, c) = accept_one(&a, &qp)?;
    let armed = cq.notify(NotifyType::Any)?;
    let (tx, rx) = std::sync::mpsc::channel();
    let waker = std::sync::Arc::new(ChannelWaker(std::sync::Mutex::new(tx))).into();
    assert!(
        !armed.wake_on_completion(&waker),
        "the CQ was notified before the peer sent"
    );
    println!("armed");
    std::io::stdout().flush().unwrap();
    rx.recv_timeout(Duration::from_secs(30))
        .expect("the Notify's completion hook never ran: nothing drove the adapter");
    armed.wait()?;
    let r = next(&cq);
    assert_eq!((r.request_context, r.bytes_transferred), (7, 5), "{r:?}");
    // SAFETY: the Receive that owned these bytes has completed.
    let got = unsafe { std::slice::from_raw_parts(buf.as_ptr(), 5) };
    assert_eq!(got, b"hello");
    println!("woken");
    c.disconnect()?.wait()?;
    mr.deregister()?.wait()
}

/// The peer of `notified_receiver`: connects, and sends once the parent says the receiver's
/// CQ is armed (a line on standard input).
fn late_sender(provider: &str, at: SocketAddr) -> Result<()> {
    let a = adapter(provider, ProgressMode::Thread)?;
    let cq = a.create_completion_queue(8, 0, 0)?;
    let qp = a.create_queue_pair(&cq, &cq, 0, 4, 4, 1, 1, 0)?;
    let _c = connect_to(&a, &qp, at)?;
    println!("connected");
    std::io::stdout().flush().unwrap();
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).unwrap();
    let mut msg = *b"hello";
    // SAFETY: INLINE: the bytes are copied during the call.
    unsafe { qp.send(1, &[Sge::new(msg.as_mut_ptr(), 5, 0)], OpFlags::INLINE)? };
    next(&cq);
    println!("sent");
    std::io::stdout().flush().unwrap();
    // Stay connected until the receiver has seen the message (standard input closes).
    std::io::stdin().read_line(&mut go).unwrap();
    Ok(())
}

/// A thread blocked outside netdirect, on a channel fed by a Notify's completion hook (as the
/// C ABI's events and completion ports are), wakes for a completion that no thread polled for.
fn hooked_notify(provider: &str, test: &str) {
    if child_role(test) {
        return;
    }
    let (mut r, mut r_out) = spawn(test, "notified", provider, &[]);
    let at = line_with(&mut r_out, "listening ");
    let (mut s, mut s_out) = spawn(test, "sender", provider, &[("ND_TEST_AT", at)]);
    line_with(&mut s_out, "connected");
    line_with(&mut r_out, "armed");
    let mut s_in = s.stdin.take().unwrap();
    writeln!(s_in, "go").unwrap();
    line_with(&mut s_out, "sent");
    line_with(&mut r_out, "woken");
    drop(s_in);
    assert!(r.wait().unwrap().success(), "the receiver failed");
    assert!(s.wait().unwrap().success(), "the sender failed");
}

#[test]
fn a_tcp_notify_hook_fires_with_no_thread_driving() {
    hooked_notify("tcp", "a_tcp_notify_hook_fires_with_no_thread_driving");
}

#[test]
fn an_shm_notify_hook_fires_with_no_thread_driving() {
    hooked_notify("shm", "an_shm_notify_hook_fires_with_no_thread_driving");
}

/// Messages of the burst: more than one `sendmsg` batch of `tcp`.
const BURST: u64 = 100;

/// Receives `BURST` 8-byte messages and checks that each carries its sequence number, in order.
fn burst_receiver(provider: &str) -> Result<()> {
    let a = adapter(provider, ProgressMode::Thread)?;
    let cq = a.create_completion_queue(2 * BURST as u32, 0, 0)?;
    let qp = a.create_queue_pair(&cq, &cq, 0, BURST as u32, 4, 1, 1, 0)?;
    let buf = netdirect::Buffer::new(8 * BURST as usize)?;
    let mr = a.create_memory_region()?;
    mr.register_buffer(&buf, MrFlags::ALLOW_LOCAL_WRITE)?
        .wait()?;
    for i in 0..BURST {
        let at = 8 * i as usize;
        // SAFETY: the buffer is read only after every Receive completed.
        unsafe { qp.receive(i, &[buf.sge(at..at + 8, mr.get_local_token())])? };
    }
    let (_l, c) = accept_one(&a, &qp)?;
    for i in 0..BURST {
        let r = next(&cq);
        assert_eq!((r.request_context, r.bytes_transferred), (i, 8), "{r:?}");
    }
    // SAFETY: every Receive has completed.
    let got = unsafe { std::slice::from_raw_parts(buf.as_ptr(), 8 * BURST as usize) };
    for (i, m) in got.chunks(8).enumerate() {
        assert_eq!(m, (i as u64).to_le_bytes(), "message {i}");
    }
    println!("received");
    std::io::stdout().flush().unwrap();
    c.disconnect()?.wait()?;
    mr.deregister()?.wait()
}

/// Posts `BURST` INLINE Sends back to back without taking a completion (so `tcp` queues most
/// of them for one write at the next drive), then makes no netdirect call until the parent
/// closes its standard input.
fn burst_sender(provider: &str, at: SocketAddr) -> Result<()> {
    let a = adapter(provider, ProgressMode::Thread)?;
    let cq = a.create_completion_queue(2 * BURST as u32, 0, 0)?;
    let qp = a.create_queue_pair(&cq, &cq, 0, 4, BURST as u32, 1, 1, 0)?;
    let _c = connect_to(&a, &qp, at)?;
    for i in 0..BURST {
        let mut msg = i.to_le_bytes();
        // SAFETY: INLINE: the bytes are copied during the call.
        unsafe { qp.send(i, &[Sge::new(msg.as_mut_ptr(), 8, 0)], OpFlags::INLINE)? };
    }
    println!("posted");
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    for i in 0..BURST {
        assert_eq!(next(&cq).request_context, i);
    }
    Ok(())
}

/// A run of Sends posted with no completion taken, and then no call at all: every message
/// arrives, in order, while the sender makes no call (its engine writes what its posts left
/// queued for one `sendmsg`).
fn burst_then_silence(provider: &str, test: &str) {
    if child_role(test) {
        return;
    }
    let (mut r, mut r_out) = spawn(test, "counter", provider, &[]);
    let at = line_with(&mut r_out, "listening ");
    let (mut s, mut s_out) = spawn(test, "burster", provider, &[("ND_TEST_AT", at)]);
    line_with(&mut s_out, "posted");
    line_with(&mut r_out, "received");
    drop(s.stdin.take());
    assert!(r.wait().unwrap().success(), "the receiver failed");
    assert!(s.wait().unwrap().success(), "the sender failed");
}

#[test]
fn a_tcp_burst_arrives_while_its_sender_makes_no_call() {
    burst_then_silence("tcp", "a_tcp_burst_arrives_while_its_sender_makes_no_call");
}

#[test]
fn an_shm_burst_arrives_while_its_sender_makes_no_call() {
    burst_then_silence("shm", "an_shm_burst_arrives_while_its_sender_makes_no_call");
}

/// Threads of this process named as progress engines are (`nd-progress`), once `n` of them
/// are (a new thread names itself as it starts), or what there are after 10 s.
fn engine_threads_reach(n: usize) -> usize {
    let count = || {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .filter(|name| name.trim() == "nd-progress")
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let c = count();
        if c == n || Instant::now() > deadline {
            return c;
        }
        std::thread::yield_now();
    }
}

/// An adapter makes no thread until it has a connector or listener, the first object that can
/// give an engine work: an adapter opened only to be queried costs none.
#[test]
fn an_engine_starts_with_the_first_connector_or_listener() {
    const TEST: &str = "an_engine_starts_with_the_first_connector_or_listener";
    if std::env::var(ROLE).is_ok() {
        let a = adapter("tcp", ProgressMode::Thread).unwrap();
        let _ = a.query();
        assert_eq!(engine_threads_reach(0), 0, "an adapter only queried");
        let _c = a.create_connector().unwrap();
        assert_eq!(engine_threads_reach(1), 1, "after its first connector");
        a.set_progress_mode(ProgressMode::Manual).unwrap();
        let b = adapter("shm", ProgressMode::Manual).unwrap();
        let _l = b.create_listener().unwrap();
        println!("checked");
        return;
    }
    let (mut child, mut out) = spawn(TEST, "lazy", "tcp", &[]);
    line_with(&mut out, "checked");
    assert!(
        child.wait().unwrap().success(),
        "the checking process failed"
    );
}

/// CPU time this process has used (user + system), from /proc/self/stat.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // After the command name in parentheses: fields 14 and 15 are utime and stime in ticks.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    let hz = rustix::param::clock_ticks_per_second().max(1);
    Duration::from_millis((f[11] + f[12]) * 1000 / hz)
}

/// An idle adapter with its engine running for 10 s costs under 1 % of a CPU. Run in its own
/// process, so that no other test's threads count.
#[test]
fn an_idle_engine_costs_under_one_percent_of_a_cpu() {
    const TEST: &str = "an_idle_engine_costs_under_one_percent_of_a_cpu";
    if std::env::var(ROLE).is_ok() {
        let adapters: Vec<Adapter> = ["tcp", "shm"]
            .iter()
            .map(|p| adapter(p, ProgressMode::Thread).unwrap())
            .collect();
        // A listener gives each engine something to watch (an engine starts with its adapter's
        // first connector or listener).
        let listeners: Vec<Listener> = adapters
            .iter()
            .map(|a| {
                let l = a.create_listener().unwrap();
                l.bind("127.0.0.1:0".parse().unwrap()).unwrap();
                l.listen(0).unwrap();
                l
            })
            .collect();
        assert_eq!(engine_threads_reach(2), 2, "one engine per adapter runs");
        let before = cpu_time();
        std::thread::sleep(Duration::from_secs(10));
        let used = cpu_time() - before;
        drop(listeners);
        drop(adapters);
        println!("used {used:?}");
        assert!(used < Duration::from_millis(100), "{used:?} of CPU in 10 s");
        return;
    }
    let (mut child, mut out) = spawn(TEST, "idle", "tcp", &[]);
    let used = line_with(&mut out, "used ");
    assert!(
        child.wait().unwrap().success(),
        "the idle process failed ({used})"
    );
    eprintln!("two idle adapters with engines used {used} of CPU in 10 s");
}
