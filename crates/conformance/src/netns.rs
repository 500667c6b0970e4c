//! A private network for a test: a network namespace of the test's own, entered by one thread,
//! so nothing on the machine changes and nothing is left behind (the namespace goes with the
//! thread). It needs root (CAP_SYS_ADMIN) and `ip` (iproute2): under CI (`CI` set) a test
//! fails without them; elsewhere it says it was skipped and why.

use std::process::Command;

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
