//! The C ABI from C and C++: programs compiled by this test with `gcc`/`g++ -Wall -Werror`
//! against `include/` and `libnetdirect.so`, run on both providers over 127.0.0.1 and ::1.

mod cbuild;

use cbuild::{build, loopbacks, start, Lang};

const PROVIDERS: [&str; 2] = ["tcp", "shm"];

/// `scripts/install-c.sh` lays out a prefix that `pkg-config` describes, and a program built
/// from that prefix alone runs.
#[test]
fn an_installed_prefix_builds_programs_through_pkg_config() {
    if std::process::Command::new("pkg-config").arg("--version").output().is_err() {
        assert!(std::env::var_os("CI").is_none(), "CI must have pkg-config");
        eprintln!("skipped: pkg-config is not installed");
        return;
    }
    let prefix = cbuild::out_dir().join("prefix");
    let _ = std::fs::remove_dir_all(&prefix);
    let st = std::process::Command::new(cbuild::root().join("scripts/install-c.sh"))
        .arg(&prefix)
        .env("NETDIRECT_LIB_DIR", cbuild::lib_dir())
        .status()
        .expect("run scripts/install-c.sh");
    assert!(st.success(), "install-c.sh failed");
    let pc = std::process::Command::new("pkg-config")
        .args(["--cflags", "--libs", "netdirect"])
        .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
        .output()
        .expect("pkg-config");
    assert!(pc.status.success(), "pkg-config does not know netdirect");
    let flags = String::from_utf8(pc.stdout).expect("flags");
    let exe = cbuild::out_dir().join("overlapped-installed");
    let o = std::process::Command::new("g++")
        .args(["-std=c++17", "-Wall", "-Werror"])
        .arg(cbuild::root().join("crates/ffi/tests/c/overlapped.cpp"))
        .arg("-o")
        .arg(&exe)
        .args(flags.split_whitespace())
        .arg(format!("-Wl,-rpath,{}", prefix.join("lib").display()))
        .output()
        .expect("g++");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = start(&exe, &["127.0.0.1"], &[("ND_PROVIDER", "tcp")]).success();
    assert!(out.contains("0 failed"), "{out}");
}

/// The overlapped rules (tests/c/overlapped.cpp): ND_PENDING, OVERLAPPED, events, ports,
/// tagged events, synchronous failures, FIFO cancellation, COM identity and counts.
#[test]
fn overlapped_requests_complete_as_on_windows() {
    let exe = build(
        "overlapped",
        Lang::Cxx,
        &["crates/ffi/tests/c/overlapped.cpp"],
        &[],
    );
    for provider in PROVIDERS {
        for ip in loopbacks() {
            let out = start(&exe, &[ip], &[("ND_PROVIDER", provider)]).success();
            assert!(out.contains("0 failed"), "{provider} {ip}:\n{out}");
        }
    }
}
