//! Building and running C and C++ programs against `include/` and this crate's
//! `libnetdirect.so`, as a user would: `gcc`/`g++ -Wall -Werror -I include -I include/win32
//! ... -lnetdirect`.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The repository root.
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The directory holding `libnetdirect.so` (the test binary's profile directory), with the
/// library built from the current sources first: this crate builds no `rlib`, so nothing
/// guarantees that `cargo test` rebuilt the shared library its integration tests link.
pub(crate) fn lib_dir() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("test binary path");
            // target/<profile>/deps/<test> → target/<profile>
            let dir = exe
                .parent()
                .and_then(Path::parent)
                .expect("profile dir")
                .to_path_buf();
            let mut cargo = Command::new(env!("CARGO"));
            cargo
                .args(["build", "-p", "netdirect-ffi"])
                .current_dir(root());
            if dir.file_name().is_some_and(|n| n == "release") {
                cargo.arg("--release");
            }
            let st = cargo.status().expect("run cargo build -p netdirect-ffi");
            assert!(st.success(), "cargo build -p netdirect-ffi failed");
            dir
        })
        .clone()
}

/// Where the built programs go.
pub(crate) fn out_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("c-programs");
    std::fs::create_dir_all(&d).expect("create the output directory");
    d
}

/// Which compiler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lang {
    /// `gcc -std=c11`.
    C,
    /// `g++ -std=c++17`.
    Cxx,
}

/// Compile `sources` (paths relative to the repository root) into `name`, failing the test
/// with the compiler's output on any warning or error.
pub(crate) fn build(name: &str, lang: Lang, sources: &[&str], extra: &[&str]) -> PathBuf {
    let root = root();
    let out = out_dir().join(name);
    let (cc, std) = match lang {
        Lang::C => ("gcc", "-std=c11"),
        Lang::Cxx => ("g++", "-std=c++17"),
    };
    let lib = lib_dir();
    let mut cmd = Command::new(cc);
    cmd.arg(std)
        .args(["-Wall", "-Werror", "-O2", "-g"])
        .arg("-I")
        .arg(root.join("include"))
        .arg("-I")
        .arg(root.join("include/win32"))
        .args(extra);
    for s in sources {
        cmd.arg(root.join(s));
    }
    cmd.arg("-o")
        .arg(&out)
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lnetdirect", "-lpthread"]);
    let o = cmd
        .output()
        .unwrap_or_else(|e| panic!("run {cc}: {e} (is it installed?)"));
    assert!(
        o.status.success(),
        "{cc} failed for {name}:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// A running program whose output is collected.
#[derive(Debug)]
pub(crate) struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    name: String,
}

/// How long any one program may run.
pub(crate) const LIMIT: Duration = Duration::from_secs(60);

/// Start `exe` with `args` and the environment `env`; stdout and stderr are collected.
pub(crate) fn start(exe: &Path, args: &[&str], env: &[(&str, &str)]) -> Running {
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", exe.display()));
    let (tx, rx) = mpsc::channel();
    let out = child.stdout.take().expect("stdout");
    let tx2 = tx.clone();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let mut err = child.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        for l in s.lines() {
            let _ = tx2.send(format!("stderr: {l}"));
        }
    });
    Running {
        child,
        lines: rx,
        seen: Vec::new(),
        name: exe
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
    }
}

impl Running {
    /// Wait until a line containing `needle` is printed (the program announces it is
    /// listening), failing the test if the program ends or `LIMIT` passes first.
    pub(crate) fn expect_line(&mut self, needle: &str) -> String {
        let deadline = std::time::Instant::now() + LIMIT;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    self.seen.push(l.clone());
                    if l.contains(needle) {
                        return l;
                    }
                }
                Err(_) => {
                    let _ = self.child.kill();
                    panic!(
                        "{}: no line with {needle:?}; output:\n{}",
                        self.name,
                        self.seen.join("\n")
                    );
                }
            }
        }
    }

    /// Wait for the program to exit (killing it after `LIMIT`); returns its output, and
    /// fails the test unless it exited 0.
    pub(crate) fn success(mut self) -> String {
        let status = wait_limited(&mut self.child);
        // The readers end when the pipes close.
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.seen.push(l);
        }
        let out = self.seen.join("\n");
        assert!(
            status.is_some_and(|s| s.success()),
            "{} exited {status:?}; output:\n{out}",
            self.name
        );
        out
    }
}

/// Wait for `child`, killing it after `LIMIT`: `None` if it had to be killed.
fn wait_limited(child: &mut Child) -> Option<std::process::ExitStatus> {
    let pid = child.id();
    let (tx, rx) = mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if rx.recv_timeout(LIMIT).is_err() {
            // Still running at the limit: end it (the wait below then returns).
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            return true;
        }
        false
    });
    let status = child.wait().ok();
    let _ = tx.send(());
    let killed = watchdog.join().unwrap_or(true);
    if killed {
        None
    } else {
        status
    }
}

/// The loopback addresses to test: 127.0.0.1, and ::1 where IPv6 is on.
pub(crate) fn loopbacks() -> Vec<&'static str> {
    let mut v = vec!["127.0.0.1"];
    if std::net::UdpSocket::bind("[::1]:0").is_ok() {
        v.push("::1");
    } else if std::env::var_os("CI").is_some() {
        panic!("::1 is not available, and CI requires the IPv6 cases");
    }
    v
}

/// `ip:port` with brackets for IPv6.
pub(crate) fn endpoint(ip: &str, port: u16) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

/// A port no one listens on right now: bound with TCP port 0, then released.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}
