//! The harness itself: a peer that hangs, fails or never announces must make the run fail
//! within its deadline, with the peers killed, never hang the test.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use netdirect_conformance::check::Failure;
use netdirect_conformance::find;
use netdirect_conformance::harness::{self, Drive, Family};

const SHORT: Duration = Duration::from_secs(2);

/// A fake `nd-peer`: a shell script whose `server` and `client` branches are given. It records
/// its PIDs in a file next to it.
struct Fake {
    dir: PathBuf,
    script: PathBuf,
    pids: PathBuf,
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Fake {
    fn new(name: &str, server: &str, client: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "nd-conformance-selftest-{}-{name}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let pids = dir.join("pids");
        let _ = std::fs::remove_file(&pids);
        let script = dir.join("fake-nd-peer");
        let text = format!(
            "#!/bin/sh\necho $$ >> '{}'\ncase \"$2\" in\n  server) {server} ;;\n  client) {client} ;;\nesac\n",
            pids.display()
        );
        // The executable is written by a child process, never through a descriptor of ours:
        // a sibling test forking while we held one open for writing would carry it into its
        // child until that child's exec, and executing the script meanwhile fails with
        // ETXTBSY ("Text file busy"). The draft we write ourselves is never executed.
        let draft = dir.join("fake-nd-peer.draft");
        std::fs::write(&draft, text).expect("write script");
        let ok = std::process::Command::new("install")
            .arg("-m755")
            .arg(&draft)
            .arg(&script)
            .status()
            .expect("run install");
        assert!(ok.success(), "install the script: {ok}");
        Self { dir, script, pids }
    }

    fn run(&self) -> (Result<(), String>, Duration) {
        let scenario = find("accept").expect("accept scenario");
        let t = Instant::now();
        let r = harness::run_within(
            &self.script,
            "tcp",
            Family::V4,
            Drive::Waits,
            scenario,
            SHORT,
        );
        (r, t.elapsed())
    }

    /// Every process the fake started is gone (killed and reaped).
    fn all_gone(&self) {
        let pids = std::fs::read_to_string(&self.pids).unwrap_or_default();
        for pid in pids.split_whitespace() {
            assert!(
                !std::path::Path::new(&format!("/proc/{pid}")).exists(),
                "fake peer {pid} is still there"
            );
        }
    }
}

#[test]
fn hung_client_is_killed_at_the_deadline() {
    let f = Fake::new(
        "hung",
        "echo 'LISTENING 127.0.0.1:9'; exec cat >/dev/null",
        "exec cat >/dev/null",
    );
    let (r, took) = f.run();
    let e = r.expect_err("a hung client must fail the run");
    assert!(e.contains("hard timeout"), "{e}");
    assert!(e.contains("provider=tcp family=ipv4"), "{e}");
    assert!(took < SHORT + Duration::from_secs(10), "took {took:?}");
    f.all_gone();
}

#[test]
fn failing_client_is_reported_with_its_output() {
    let f = Fake::new(
        "fail",
        "echo 'LISTENING 127.0.0.1:9'; exec cat >/dev/null",
        "echo 'check xyz failed' >&2; exit 3",
    );
    let (r, _) = f.run();
    let e = r.expect_err("a failing client must fail the run");
    assert!(e.contains("the client failed (exit code 3)"), "{e}");
    assert!(e.contains("check xyz failed"), "{e}");
    f.all_gone();
}

#[test]
fn server_that_never_listens_is_killed_at_the_deadline() {
    let f = Fake::new("silent", "exec cat", "exit 0");
    let (r, took) = f.run();
    let e = r.expect_err("a silent server must fail the run");
    assert!(e.contains("no LISTENING line"), "{e}");
    assert!(took < SHORT + Duration::from_secs(10), "took {took:?}");
    f.all_gone();
}

#[test]
fn hung_or_panicking_checks_are_reported() {
    let r = harness::with_deadline_within("[hang]", SHORT, || {
        let (keep, rx) = std::sync::mpsc::channel::<()>();
        let _ = rx.recv();
        drop(keep);
        Ok(())
    });
    assert!(r.expect_err("hung").contains("hung"));
    let r = harness::with_deadline_within("[panic]", SHORT, || panic!("kaboom"));
    assert!(r.expect_err("panicked").contains("kaboom"));
    let r = harness::with_deadline_within("[fail]", SHORT, || Err(Failure("nope".into())));
    assert_eq!(r, Err("[fail] nope".to_string()));
}
