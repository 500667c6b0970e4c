//! Running the real `nd` binary from the tests: one process with a time limit, or a server
//! that announces its address.

#![allow(dead_code)] // Each test binary uses its own part.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub(crate) const ND: &str = env!("CARGO_BIN_EXE_nd");
/// Far above what any of these runs takes; only a hang reaches it.
pub(crate) const LIMIT: Duration = Duration::from_secs(180);

/// Run `nd args` in its own process group; kill the group if it outlives [`LIMIT`].
/// Returns (success, stdout, stderr).
pub(crate) fn nd(args: &[&str]) -> (bool, String, String) {
    nd_with(args, &[], LIMIT)
}

/// [`nd`] with extra environment variables and a time limit of its own.
pub(crate) fn nd_with(
    args: &[&str],
    env: &[(&str, &str)],
    limit: Duration,
) -> (bool, String, String) {
    let mut child = Command::new(ND)
        .args(args)
        .envs(env.iter().copied())
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn nd");
    let pid = child.id();
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let e = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        let mut o = String::new();
        let _ = out.read_to_string(&mut o);
        let e = e.join().unwrap_or_default();
        let _ = tx.send((child.wait().map(|s| s.success()).unwrap_or(false), o, e));
    });
    match rx.recv_timeout(limit) {
        Ok(r) => r,
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .status();
            panic!("nd {args:?} did not finish within {limit:?}");
        }
    }
}

/// `nd args -s 127.0.0.1:0 --announce`, once it listens; killed after a minute if it is still
/// running then (so a server that waits forever fails its test instead of hanging it).
pub(crate) struct Server {
    child: Child,
    out: BufReader<ChildStdout>,
    /// The address from its first LISTENING line.
    pub(crate) addr: String,
    done: Option<mpsc::Sender<()>>,
    watchdog: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    pub(crate) fn start(args: &[&str]) -> Self {
        let mut child = Command::new(ND)
            .args(args)
            .args(["-s", "127.0.0.1:0", "--announce"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn server");
        let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("pid");
        let (done, watch) = mpsc::channel::<()>();
        let watchdog = std::thread::spawn(move || {
            if watch.recv_timeout(Duration::from_secs(60)).is_err() {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        });
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).expect("LISTENING line");
        let addr = line
            .trim()
            .strip_prefix("LISTENING ")
            .unwrap_or_else(|| panic!("server did not announce: {line:?}"))
            .to_string();
        Self {
            child,
            out,
            addr,
            done: Some(done),
            watchdog: Some(watchdog),
        }
    }

    /// The next LISTENING line's address (a `--forever` server prints one per client),
    /// passing over CONNECTED lines.
    pub(crate) fn next_listening(&mut self) -> String {
        self.next_line("LISTENING ")
    }

    /// Wait for the server to accept a client: its CONNECTED line (the client's address).
    pub(crate) fn connected(&mut self) -> String {
        self.next_line("CONNECTED ")
    }

    /// The rest of the next line that starts with `prefix`.
    fn next_line(&mut self, prefix: &str) -> String {
        loop {
            let mut line = String::new();
            let n = self.out.read_line(&mut line).expect("server output");
            assert!(n > 0, "the server ended before a {prefix:?} line");
            if let Some(rest) = line.trim().strip_prefix(prefix) {
                return rest.to_string();
            }
        }
    }

    /// Wait for the server to exit: (success, stderr).
    pub(crate) fn finish(mut self) -> (bool, String) {
        let mut err = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let status = self.child.wait().unwrap();
        self.stop_watchdog();
        (status.success(), err)
    }

    /// Kill the server (a `--forever` one) and return its stderr.
    pub(crate) fn kill(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut err = String::new();
        let _ = self.child.stderr.take().unwrap().read_to_string(&mut err);
        self.stop_watchdog();
        err
    }

    fn stop_watchdog(&mut self) {
        if let Some(done) = self.done.take() {
            let _ = done.send(());
        }
        if let Some(w) = self.watchdog.take() {
            let _ = w.join();
        }
    }
}

impl Drop for Server {
    /// A test that fails half-way leaves no server behind.
    fn drop(&mut self) {
        if self.done.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
            self.stop_watchdog();
        }
    }
}
