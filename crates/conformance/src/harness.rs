//! Run a scenario as two processes (`nd-peer ... server` and `nd-peer ... client`) with a hard
//! deadline, and single-process checks with the same deadline.
//!
//! Every wait here blocks on something that happens: a line on a child's standard output, a
//! child's exit (a pidfd becoming readable), a channel. The deadline only bounds those waits;
//! when it passes, both children are killed and the run fails.

use std::io::{BufRead, BufReader, Read};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::check::Check;
use crate::scenarios::{Flow, Scenario};

/// The most one scenario run (both processes) or one single-process check may take.
pub const HARD_TIMEOUT: Duration = Duration::from_secs(60);

/// The address family a run uses: its loopback address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// 127.0.0.1
    V4,
    /// ::1
    V6,
}

impl Family {
    /// Both families.
    pub const ALL: [Self; 2] = [Self::V4, Self::V6];

    /// The families this machine has a loopback address for: both, except where IPv6 is off
    /// (some containers), which is said once on stderr. Under CI (`CI` set) both must be
    /// there: a suite that silently ran half its cases would pass for the wrong reason.
    pub fn available() -> Vec<Self> {
        static V6: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let v6 = *V6.get_or_init(|| {
            let ok = std::net::TcpListener::bind((Ipv6Addr::LOCALHOST, 0)).is_ok();
            if !ok {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "::1 is not available: the IPv6 cases must run under CI"
                );
                eprintln!("SKIPPED: the IPv6 cases (no ::1 on this machine)");
            }
            ok
        });
        Self::ALL
            .into_iter()
            .filter(|f| *f == Self::V4 || v6)
            .collect()
    }

    /// The loopback address.
    pub fn ip(self) -> IpAddr {
        match self {
            Self::V4 => Ipv4Addr::LOCALHOST.into(),
            Self::V6 => Ipv6Addr::LOCALHOST.into(),
        }
    }

    /// `ipv4` or `ipv6`.
    pub fn name(self) -> &'static str {
        match self {
            Self::V4 => "ipv4",
            Self::V6 => "ipv6",
        }
    }
}

/// How the processes drive their adapters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drive {
    /// Only through their own waits and polls (`ND_PROGRESS=manual`).
    Waits,
    /// With the adapter's overlapped descriptor exported (`ND_PEER_EXPORT_FD=1`).
    FdExported,
    /// With every adapter's progress engine running (`ND_PROGRESS=thread`): the engine and
    /// the scenario's own waits and polls drive the same connections.
    Engine,
}

impl Drive {
    /// Every way.
    pub const ALL: [Self; 3] = [Self::Waits, Self::FdExported, Self::Engine];

    /// What to append to a scenario name in messages.
    pub fn suffix(self) -> &'static str {
        match self {
            Self::Waits => "",
            Self::FdExported => " (fd exported)",
            Self::Engine => " (progress engine)",
        }
    }
}

/// `[provider=tcp family=ipv4 scenario=accept]`: the prefix of every message of a run.
pub fn label(provider: &str, family: Family, what: &str) -> String {
    format!(
        "[provider={provider} family={} ({}) scenario={what}]",
        family.name(),
        family.ip()
    )
}

/// Open this process's adapters without a progress engine (`ND_PROGRESS=manual`, unless the
/// environment chose): the in-process tests drive both ends from their own thread and check
/// states a second driver would race (a full initiator queue, a response still in progress,
/// a message waiting for a Receive). The engine's side of every scenario is the multi-process
/// suite's [`Drive::Engine`].
fn manual_progress() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if std::env::var_os(netdirect::spi::kit::progress::VAR).is_none() {
            std::env::set_var(netdirect::spi::kit::progress::VAR, "manual");
        }
    });
}

/// Run `f` once for every provider that meets `needs` (the others are reported as not run)
/// and each loopback family, each run on its own thread under [`with_deadline`] with the
/// provider opened afresh. Every run is reported as passed or failed; after the last one this
/// panics with every failure's report, so one failing combination does not hide the others.
/// A run that ends with [`crate::check::not_run`] is reported as not run. Returns how many
/// runs there were; panics if there were none (no provider meets `needs`, or no run applied):
/// a test that ran nothing proved nothing.
pub fn each_provider(
    needs: crate::Needs,
    name: &str,
    f: impl Fn(&netdirect::Provider, Family) -> Check + Copy + Send + 'static,
) -> usize {
    use crate::check::Context;
    manual_progress();
    let mut failures = Vec::new();
    let mut ran = 0;
    for p in crate::providers_for(needs) {
        for fam in Family::available() {
            let label = label(p, fam, name);
            let r = with_deadline(&label, move || {
                let provider = netdirect::Provider::select(p).ctx("open provider")?;
                f(&provider, fam)
            });
            match r {
                Ok(()) => {
                    eprintln!("{label} passed");
                    ran += 1;
                }
                Err(e) => match e.split_once(crate::check::NOT_RUN) {
                    Some((_, why)) => eprintln!("{label} not run: {why}"),
                    None => {
                        failures.push(e);
                        ran += 1;
                    }
                },
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // A test none of whose runs applied proved nothing.
    assert!(ran > 0, "{name}: no provider and family ran it");
    ran
}

/// What a line wait found.
enum Line {
    Found(String),
    Eof,
    TimedOut,
}

/// One `nd-peer` child.
struct Peer {
    role: &'static str,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    seen: Vec<String>,
    stderr: Option<JoinHandle<String>>,
    status: Option<ExitStatus>,
}

impl Peer {
    fn spawn(
        exe: &Path,
        provider: &str,
        drive: Drive,
        scenario: &str,
        role: &'static str,
        addr: &str,
    ) -> Result<Self, String> {
        let mut cmd = Command::new(exe);
        // The scenarios were written for processes that drive their own I/O: `Waits` and
        // `FdExported` run them so (some decide when a response may leave by when they
        // poll), `Engine` with the engine as well.
        cmd.env_remove("ND_PEER_EXPORT_FD");
        match drive {
            Drive::Waits => cmd.env("ND_PROGRESS", "manual"),
            Drive::FdExported => cmd
                .env("ND_PEER_EXPORT_FD", "1")
                .env("ND_PROGRESS", "manual"),
            Drive::Engine => cmd.env("ND_PROGRESS", "thread"),
        };
        let mut child = cmd
            .args([scenario, role, addr])
            .env("ND_PROVIDER", provider)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {} {role}: {e}", exe.display()))?;
        let stdin = child.stdin.take();
        let out = child.stdout.take().expect("piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut err = child.stderr.take().expect("piped");
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        Ok(Self {
            role,
            child,
            stdin,
            lines,
            seen: Vec::new(),
            stderr: Some(stderr),
            status: None,
        })
    }

    /// The next stdout line starting with `prefix` (its remainder), skipping others.
    fn wait_line(&mut self, prefix: &str, deadline: Instant) -> Line {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    self.seen.push(l.clone());
                    if let Some(rest) = l.strip_prefix(prefix) {
                        return Line::Found(rest.trim().to_string());
                    }
                }
                Err(RecvTimeoutError::Timeout) => return Line::TimedOut,
                Err(RecvTimeoutError::Disconnected) => return Line::Eof,
            }
        }
    }

    /// Wait for the child to exit, at most until `deadline` (`None`: still running).
    fn wait_until(&mut self, deadline: Instant) -> Option<ExitStatus> {
        if self.status.is_some() {
            return self.status;
        }
        self.status = wait_child(&mut self.child, deadline);
        self.status
    }

    /// SIGKILL (if still running) and reap.
    fn kill(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            let _ = self.child.kill();
            self.status = self.child.wait().ok();
        }
        self.status
    }

    /// Close the child's standard input (a lingering server exits then).
    fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Everything the child wrote, once it has exited.
    fn output(&mut self) -> String {
        let err = match self.stderr.take() {
            Some(h) if self.status.is_some() => h.join().unwrap_or_default(),
            Some(h) => {
                self.stderr = Some(h);
                String::from("(still running)")
            }
            None => String::new(),
        };
        while let Ok(l) = self.lines.try_recv() {
            self.seen.push(l);
        }
        format!(
            "--- {} exit: {} ---\nstdout: {:?}\nstderr:\n{}",
            self.role,
            describe(self.status),
            self.seen,
            err.trim_end()
        )
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn describe(s: Option<ExitStatus>) -> String {
    match s {
        None => "still running".into(),
        Some(s) => match (s.code(), s.signal()) {
            (Some(c), _) => format!("exit code {c}"),
            (None, Some(sig)) => format!("killed by signal {sig}"),
            _ => format!("{s}"),
        },
    }
}

/// Wait for `child` until `deadline`: poll(2) on a pidfd, which becomes readable when the
/// child exits.
fn wait_child(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    if let Ok(Some(s)) = child.try_wait() {
        return Some(s);
    }
    let pid = rustix::process::Pid::from_raw(child.id() as i32)?;
    let Ok(fd) = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) else {
        // No pidfd (kernel before 5.3): a thread blocks in waitid(WNOWAIT), which sees the
        // exit without reaping, and the deadline bounds the wait for its message.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            use rustix::process::{waitid, WaitId, WaitIdOptions};
            let _ = waitid(
                WaitId::Pid(pid),
                WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
            );
            let _ = tx.send(());
        });
        let left = deadline.saturating_duration_since(Instant::now());
        return match rx.recv_timeout(left) {
            Ok(()) => child.wait().ok(),
            Err(_) => None,
        };
    };
    loop {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        let ts = Timespec {
            tv_sec: left.as_secs() as _,
            tv_nsec: left.subsec_nanos() as _,
        };
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        let _ = poll(&mut fds, Some(&ts));
    }
}

/// Run `scenario` with `exe` (the `nd-peer` binary) for `provider` over `family`'s loopback
/// address, within [`HARD_TIMEOUT`]. `Err` says what went wrong, with both processes' output.
pub fn run(
    exe: &Path,
    provider: &str,
    family: Family,
    drive: Drive,
    scenario: &Scenario,
) -> Result<(), String> {
    run_within(exe, provider, family, drive, scenario, HARD_TIMEOUT)
}

/// [`run`] with another deadline (the harness's own tests use a short one).
pub fn run_within(
    exe: &Path,
    provider: &str,
    family: Family,
    drive: Drive,
    scenario: &Scenario,
    timeout: Duration,
) -> Result<(), String> {
    let label = label(
        provider,
        family,
        &format!("{}{}", scenario.name, drive.suffix()),
    );
    let deadline = Instant::now() + timeout;
    let mut server = Peer::spawn(
        exe,
        provider,
        drive,
        scenario.name,
        "server",
        &family.ip().to_string(),
    )
    .map_err(|e| format!("{label} {e}"))?;
    let addr = match server.wait_line("LISTENING ", deadline) {
        Line::Found(a) => a,
        Line::Eof => {
            let exited = server.wait_until(deadline).is_some();
            server.kill();
            return Err(format!(
                "{label} the server closed its output without printing LISTENING{}\n{}",
                if exited {
                    ""
                } else {
                    " and did not exit (killed at the hard timeout)"
                },
                server.output()
            ));
        }
        Line::TimedOut => {
            server.kill();
            return Err(format!(
                "{label} hard timeout ({timeout:?}): no LISTENING line\n{}",
                server.output()
            ));
        }
    };

    let mut client = Peer::spawn(exe, provider, drive, scenario.name, "client", &addr)
        .map_err(|e| format!("{label} {e}"))?;

    let mut problems = Vec::new();
    if scenario.flow == Flow::KillServerOnReady {
        match client.wait_line("READY", deadline) {
            Line::Found(_) => match server.kill() {
                Some(s) if s.signal() == Some(rustix::process::Signal::KILL.as_raw()) => {}
                other => problems.push(format!(
                    "the server was to be killed by SIGKILL, but it ended with {}",
                    describe(other)
                )),
            },
            Line::Eof => problems.push("the client ended without printing READY".to_string()),
            Line::TimedOut => problems.push(format!(
                "hard timeout ({timeout:?}): the client never printed READY"
            )),
        }
    }

    match client.wait_until(deadline) {
        Some(s) if s.success() => {}
        Some(s) => problems.push(format!("the client failed ({})", describe(Some(s)))),
        None => {
            client.kill();
            problems.push(format!(
                "hard timeout ({timeout:?}): the client was still running (killed)"
            ));
        }
    }
    server.close_stdin();
    if scenario.flow != Flow::KillServerOnReady {
        match server.wait_until(deadline) {
            Some(s) if s.success() => {}
            Some(s) => problems.push(format!("the server failed ({})", describe(Some(s)))),
            None => {
                server.kill();
                problems.push(format!(
                    "hard timeout ({timeout:?}): the server was still running (killed)"
                ));
            }
        }
    }
    server.kill();
    client.kill();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{label} {}\n{}\n{}",
            problems.join("; "),
            server.output(),
            client.output()
        ))
    }
}

/// Everything `r` yields, read on a thread of its own.
fn drain(mut r: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        v
    })
}

/// Run `cmd` with its standard output and error captured, for at most `timeout`: its output,
/// or `Err` if it had to be killed (for tests that need a process of their own, such as one
/// with its own resource limits).
pub fn output_within(cmd: &mut Command, timeout: Duration) -> Result<Output, String> {
    let deadline = Instant::now() + timeout;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    // Drained on their own threads, so a chatty child never blocks on a full pipe.
    let stdout = drain(child.stdout.take().expect("piped"));
    let stderr = drain(child.stderr.take().expect("piped"));
    let Some(status) = wait_child(&mut child, deadline) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!("{cmd:?} did not exit within {timeout:?} (killed)"));
    };
    Ok(Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

/// Held by tests of one test binary that start child processes and by those that check a
/// port is free once released: a child holds a copy of every descriptor of the test process
/// from its fork to its exec (all are close-on-exec), among them a socket another test has
/// just released, whose port then stays taken until the exec. Tests in other binaries are
/// other processes, whose children hold no descriptor of this one.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Run `f` on its own thread and wait at most [`HARD_TIMEOUT`] for it. A check that fails,
/// panics or hangs is reported as `Err` with `label` in front; a hung thread is abandoned (the
/// test process ends with it).
pub fn with_deadline(
    label: &str,
    f: impl FnOnce() -> Check + Send + 'static,
) -> Result<(), String> {
    with_deadline_within(label, HARD_TIMEOUT, f)
}

/// [`with_deadline`] with another deadline.
pub fn with_deadline_within(
    label: &str,
    timeout: Duration,
    f: impl FnOnce() -> Check + Send + 'static,
) -> Result<(), String> {
    let (tx, rx) = mpsc::channel();
    let t = std::thread::Builder::new()
        .name(label.to_string())
        .spawn(move || {
            let _ = tx.send(f());
        })
        .map_err(|e| format!("{label} cannot start a thread: {e}"))?;
    match rx.recv_timeout(timeout) {
        Ok(r) => {
            let _ = t.join();
            r.map_err(|e| format!("{label} {e}"))
        }
        Err(RecvTimeoutError::Timeout) => {
            Err(format!("{label} did not finish within {timeout:?} (hung)"))
        }
        Err(RecvTimeoutError::Disconnected) => {
            let why = match t.join() {
                Err(p) => p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "a panic".into()),
                Ok(()) => "no result".into(),
            };
            Err(format!("{label} panicked: {why}"))
        }
    }
}
