//! The C ABI from C and C++: programs compiled by this test with `gcc`/`g++ -Wall -Werror`
//! against `include/` and `libnetdirect.so`, run on both providers over 127.0.0.1 and ::1.

mod cbuild;

use cbuild::{build, loopbacks, start, Lang};

const PROVIDERS: [&str; 2] = ["tcp", "shm"];

/// `scripts/install-c.sh` lays out a prefix that `pkg-config` describes, and a program built
/// from that prefix alone runs.
#[test]
fn an_installed_prefix_builds_programs_through_pkg_config() {
    if std::process::Command::new("pkg-config")
        .arg("--version")
        .output()
        .is_err()
    {
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

/// Every ND v1 method through the C ABI (tests/c/v1methods.cpp): the provider, the opens,
/// the address-list flags, the adapter's one file and a port on it, Listen's statuses, a
/// connection with private data, batching, descriptors, Flush, Reject, release.
#[test]
fn every_v1_method_from_cxx() {
    let exe = build(
        "v1methods",
        Lang::Cxx,
        &["crates/ffi/tests/c/v1methods.cpp"],
        &[],
    );
    each(|provider, ip| {
        let out = start(&exe, &[ip], &[("ND_PROVIDER", provider)]).success();
        assert!(out.contains(" 0 failed"), "{provider} {ip}:\n{out}");
    });
}

/// Run `exe` as a server (`-s`) and a client (`-c`) on a fresh port of `ip`, on `provider`:
/// both must exit 0. Returns the client's output.
fn pair(
    exe: &std::path::Path,
    server: &[&str],
    client: &[&str],
    provider: &str,
    ip: &str,
) -> String {
    let at = cbuild::endpoint(ip, cbuild::free_port());
    let env = [("ND_PROVIDER", provider)];
    let mut s_args = vec!["-s"];
    s_args.extend_from_slice(server);
    s_args.push(&at);
    let mut srv = start(exe, &s_args, &env);
    srv.expect_line("Listening.");
    let mut c_args = vec!["-c"];
    c_args.extend_from_slice(client);
    c_args.push(&at);
    let out = start(exe, &c_args, &env).success();
    srv.success();
    out
}

/// Every provider and loopback address.
fn each(mut f: impl FnMut(&str, &str)) {
    for provider in PROVIDERS {
        for ip in loopbacks() {
            f(provider, ip);
        }
    }
}

/// examples/c/ndpingpong.cpp: Send/Receive ping-pong with the data checked, polling (a size
/// sweep) and blocking (CQ Notify and an event), through `_tmain` and `wprintf`.
#[test]
fn ndpingpong_runs_polling_and_blocking() {
    let exe = build("ndpingpong", Lang::Cxx, &["examples/c/ndpingpong.cpp"], &[]);
    each(|provider, ip| {
        let out = pair(&exe, &[], &["-i", "200"], provider, ip);
        assert!(out.contains("End of test"), "{provider} {ip}:\n{out}");
        let out = pair(
            &exe,
            &["-b"],
            &["-b", "-i", "100", "-z", "64"],
            provider,
            ip,
        );
        assert!(
            out.contains("End of test"),
            "{provider} {ip} blocking:\n{out}"
        );
    });
}

/// examples/c/ndrpingpong.c: RDMA Write ping-pong from C (`lpVtbl` calls).
#[test]
fn ndrpingpong_runs_from_c() {
    let exe = build("ndrpingpong", Lang::C, &["examples/c/ndrpingpong.c"], &[]);
    each(|provider, ip| {
        let out = pair(&exe, &[], &["-i", "200"], provider, ip);
        assert!(out.contains("End of test"), "{provider} {ip}:\n{out}");
    });
}

/// examples/c/ndv1pingpong.c: Send/Receive ping-pong through the ND v1 interfaces from C
/// (`NdOpenV1Adapter`, `INDAdapter::Listen`, connector-made endpoints, `ND_RESULT` pointers),
/// polling and blocking (the CQ's Notify reaped from a completion port associated with the
/// adapter's one file handle).
#[test]
fn ndv1pingpong_runs_from_c() {
    let exe = build("ndv1pingpong", Lang::C, &["examples/c/ndv1pingpong.c"], &[]);
    each(|provider, ip| {
        let out = pair(&exe, &[], &["-i", "200"], provider, ip);
        assert!(out.contains("End of test"), "{provider} {ip}:\n{out}");
        let out = pair(
            &exe,
            &["-b"],
            &["-b", "-i", "100", "-z", "1000"],
            provider,
            ip,
        );
        assert!(
            out.contains("End of test"),
            "{provider} {ip} blocking:\n{out}"
        );
    });
}

/// examples/c/ndrping.cpp: RDMA Write and Read throughput with the data verified.
#[test]
fn ndrping_writes_and_reads_verified_data() {
    let exe = build("ndrping", Lang::Cxx, &["examples/c/ndrping.cpp"], &[]);
    each(|provider, ip| {
        for mode in ["-w", "-r"] {
            let out = pair(&exe, &[], &[mode, "-i", "100"], provider, ip);
            assert!(
                out.contains("End of test"),
                "{provider} {ip} {mode}:\n{out}"
            );
        }
    });
}

/// examples/c/ndconn.cpp: reject with private data, accept, disconnect, cancel, through a
/// completion port; each check prints PASS.
#[test]
fn ndconn_manages_connections_through_a_completion_port() {
    let exe = build("ndconn", Lang::Cxx, &["examples/c/ndconn.cpp"], &[]);
    each(|provider, ip| {
        let out = pair(&exe, &[], &[], provider, ip);
        assert!(
            out.contains("PASS") && !out.contains("FAIL"),
            "{provider} {ip}:\n{out}"
        );
    });
}

/// tests/abi/check.sh: every header alone and together, in C and C++ standards; every
/// structure's size and offsets, every vtable slot (C `offsetof` and C++ pointer-to-member),
/// every IID's bytes, calls across C and C++ objects, the libstdc++ pitfalls, `wprintf`,
/// `_tmain` and Windows-style C++ under `-Wall -Werror`.
#[test]
fn headers_hold_the_abi_from_c_and_cxx() {
    let o = std::process::Command::new("sh")
        .arg(cbuild::root().join("tests/abi/check.sh"))
        .output()
        .expect("run tests/abi/check.sh");
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "tests/abi/check.sh failed:\n{out}");
    assert!(out.contains(" 0 failed"), "{out}");
}

/// examples/c/ndabi.cpp: every method of every ND v2 interface and every helper, with the NULL
/// and short-buffer cases, each status checked; it lists the methods it covered.
#[test]
fn ndabi_covers_every_method_with_its_statuses() {
    let exe = build("ndabi", Lang::Cxx, &["examples/c/ndabi.cpp"], &[]);
    each(|provider, ip| {
        let out = start(&exe, &[ip], &[("ND_PROVIDER", provider)]).success();
        assert!(
            out.contains("Methods covered") && out.contains(" 0 failed"),
            "{provider} {ip}:\n{out}"
        );
    });
}
