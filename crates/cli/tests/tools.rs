//! Every `nd` tool, run as the real binary for a few iterations (two processes on loopback
//! where a peer is needed, both providers where they apply), with its `--json` output
//! checked: keys present, values sane, sizes and counts as asked. Also the option exchange
//! (a mismatch fails both ends with a clear message) and `nd bench --json`.

mod common;

use serde_json::Value;

use common::{nd, Server};

/// Run `nd args --json`, which must succeed; the last line of its output, parsed.
fn json(args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.push("--json");
    let (ok, out, err) = nd(&a);
    assert!(ok, "nd {a:?} failed: {err}");
    let last = out.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("nd {a:?}: last line {last:?}: {e}"))
}

fn num(v: &Value, k: &str) -> f64 {
    v[k].as_f64()
        .unwrap_or_else(|| panic!("key {k} missing or not a number in {v}"))
}

/// The keys every measured row has, with the values asked for.
fn check_row(v: &Value, tool: &str, provider: &str, mode: &str, size: u64, iterations: u64) {
    assert_eq!(v["tool"], tool, "{v}");
    assert_eq!(v["provider"], provider, "{v}");
    assert_eq!(v["mode"], mode, "{v}");
    assert_eq!(v["size"].as_u64(), Some(size), "{v}");
    assert_eq!(v["iterations"].as_u64(), Some(iterations), "{v}");
    assert!(v["op"].is_string(), "{v}");
}

fn check_latency(v: &Value) {
    let (min, med, p99, p999, max) = (
        num(v, "min_us"),
        num(v, "median_us"),
        num(v, "p99_us"),
        num(v, "p999_us"),
        num(v, "max_us"),
    );
    assert!(min > 0.0, "{v}");
    assert!(
        min <= med && med <= p99 && p99 <= p999 && p999 <= max,
        "{v}"
    );
    assert!(num(v, "mean_us") > 0.0, "{v}");
}

fn check_bandwidth(v: &Value) {
    let (secs, mb, msg, mmsg) = (
        num(v, "seconds"),
        num(v, "mb_per_s"),
        num(v, "msg_per_s"),
        num(v, "mmsg_per_s"),
    );
    assert!(secs > 0.0 && mb > 0.0 && msg > 0.0 && mmsg > 0.0, "{v}");
    let size = v["size"].as_f64().unwrap();
    assert!((mb * 1e6 - size * msg).abs() <= 1e-6 * size * msg, "{v}");
    assert!((mmsg * 1e6 - msg).abs() <= 1e-6 * msg, "{v}");
}

const PROVIDERS: [&str; 2] = ["tcp", "shm"];
const MODES: [(&str, &[&str]); 2] = [("poll", &[]), ("blocking", &["--blocking"])];

fn with<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(extra).copied().collect()
}

#[test]
fn pingpong_both_providers_both_modes() {
    for p in PROVIDERS {
        for (mode, flags) in MODES {
            let base = [
                "pingpong",
                "--loopback",
                "--provider",
                p,
                "--size",
                "8",
                "-n",
                "100",
            ];
            let v = json(&with(&base, flags));
            check_row(&v, "pingpong", p, mode, 8, 100);
            check_latency(&v);
            assert_eq!(v["repost"], "after", "{v}");
            // ndpingpong's order: each Receive reposted before its answer.
            let v = json(&with(&with(&base, flags), &["--repost-first"]));
            check_row(&v, "pingpong", p, mode, 8, 100);
            check_latency(&v);
            assert_eq!(v["repost"], "first", "{v}");
        }
    }
}

#[test]
fn pingpong_sweep_covers_1_byte_to_8_mib() {
    for p in PROVIDERS {
        let v = json(&[
            "pingpong",
            "--loopback",
            "--provider",
            p,
            "-a",
            "-n",
            "3",
            "--warmup",
            "1",
        ]);
        let rows = v.as_array().expect("-a gives an array");
        let sizes: Vec<u64> = rows.iter().map(|r| r["size"].as_u64().unwrap()).collect();
        let want: Vec<u64> = (0..24).map(|i| 1u64 << i).collect();
        assert_eq!(sizes, want);
        for r in rows {
            check_row(r, "pingpong", p, "poll", r["size"].as_u64().unwrap(), 3);
            check_latency(r);
        }
    }
}

#[test]
fn rpingpong_both_providers_both_modes() {
    for p in PROVIDERS {
        for (mode, flags) in MODES {
            let base = [
                "rpingpong",
                "--loopback",
                "--provider",
                p,
                "--size",
                "64",
                "-n",
                "100",
            ];
            let v = json(&with(&base, flags));
            check_row(&v, "rpingpong", p, mode, 64, 100);
            check_latency(&v);
        }
    }
}

#[test]
fn rpingpong_sweep_of_growing_sizes() {
    let v = json(&[
        "rpingpong",
        "--loopback",
        "--provider",
        "shm",
        "-a",
        "-n",
        "3",
    ]);
    let rows = v.as_array().expect("-a gives an array");
    assert_eq!(rows.len(), 24);
    rows.iter().for_each(check_latency);
}

#[test]
fn ping_both_providers_both_modes() {
    for p in PROVIDERS {
        for (mode, flags) in MODES {
            // 1000 messages: several credit windows of 64 and a partial one.
            let base = [
                "ping",
                "--loopback",
                "--provider",
                p,
                "--size",
                "4096",
                "-n",
                "1000",
            ];
            let v = json(&with(&base, flags));
            check_row(&v, "ping", p, mode, 4096, 1000);
            check_bandwidth(&v);
            assert_eq!(v["pipeline"].as_u64(), Some(128), "{v}");
        }
    }
}

#[test]
fn ping_small_pipeline_and_sweep() {
    let v = json(&[
        "ping",
        "--loopback",
        "--provider",
        "tcp",
        "-a",
        "-n",
        "20",
        "-q",
        "3",
    ]);
    let rows = v.as_array().expect("-a gives an array");
    assert_eq!(rows.len(), 24);
    assert_eq!(rows[0]["size"].as_u64(), Some(1));
    rows.iter().for_each(check_bandwidth);
}

#[test]
fn rping_write_and_read_both_providers() {
    for p in PROVIDERS {
        for op in ["write", "read"] {
            let base = [
                "rping",
                "--loopback",
                "--provider",
                p,
                "--op",
                op,
                "--size",
                "65536",
            ];
            let v = json(&with(&base, &["-n", "64", "-q", "4"]));
            check_row(&v, "rping", p, "poll", 65536, 64);
            assert_eq!(v["op"], op);
            check_bandwidth(&v);
        }
        let v = json(&[
            "rping",
            "--loopback",
            "--provider",
            p,
            "--blocking",
            "-n",
            "64",
        ]);
        check_row(&v, "rping", p, "blocking", 65536, 64);
        check_bandwidth(&v);
        // A passive target: its progress engine serves the Writes and Reads.
        for op in ["write", "read"] {
            let v = json(&[
                "rping",
                "--loopback",
                "--provider",
                p,
                "--op",
                op,
                "--passive",
                "-n",
                "64",
            ]);
            check_row(&v, "rping", p, "poll", 65536, 64);
            check_bandwidth(&v);
        }
    }
}

#[test]
fn tcp_yardsticks() {
    for (mode, flags) in MODES {
        let v = json(&with(
            &["tcp-pingpong", "--loopback", "--size", "8", "-n", "100"],
            flags,
        ));
        check_row(&v, "tcp-pingpong", "kernel-tcp", mode, 8, 100);
        check_latency(&v);
    }
    let v = json(&["tcp-stream", "--loopback", "--size", "65536", "-n", "50"]);
    check_row(&v, "tcp-stream", "kernel-tcp", "blocking", 65536, 50);
    check_bandwidth(&v);
}

/// The `/dev/shm` files `nd shm-pingpong` names for its rendezvous.
fn shm_pingpong_files() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with("nd-shm-pingpong-"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn shm_yardstick() {
    let v = json(&["shm-pingpong", "--loopback", "--size", "8", "-n", "1000"]);
    check_row(&v, "shm-pingpong", "shared-memory", "poll", 8, 1000);
    check_latency(&v);
    // Every size of the sweep fits one line; the largest payload a line holds goes through.
    let v = json(&["shm-pingpong", "--loopback", "-a", "-n", "100"]);
    let sizes: Vec<u64> = v
        .as_array()
        .expect("a sweep prints an array")
        .iter()
        .map(|r| r["size"].as_u64().expect("size"))
        .collect();
    assert_eq!(sizes, [1, 2, 4, 8, 16, 32], "{v}");
    let v = json(&["shm-pingpong", "--loopback", "--size", "56", "-n", "100"]);
    check_row(&v, "shm-pingpong", "shared-memory", "poll", 56, 100);
    // The file is gone once the client has mapped it (no other test makes these).
    assert_eq!(shm_pingpong_files(), Vec::<String>::new());
    // Refused before any process starts: more than a line, and a blocking mode it has not.
    for (args, says) in [
        (
            &["shm-pingpong", "--loopback", "--size", "57"][..],
            "at most 56 bytes",
        ),
        (
            &["shm-pingpong", "--loopback", "--blocking"][..],
            "no blocking mode",
        ),
    ] {
        let (ok, out, err) = nd(args);
        assert!(!ok && out.is_empty(), "nd {args:?}: {out}");
        assert!(
            err.contains(says) && err.lines().count() == 1,
            "nd {args:?}: {err}"
        );
    }
}

#[test]
fn mrlat_single_size_and_default_sweep() {
    for p in PROVIDERS {
        for (mode, flags) in MODES {
            let base = ["mrlat", "--provider", p, "--size", "4096", "-n", "50"];
            let v = json(&with(&base, flags));
            check_row(&v, "mrlat", p, mode, 4096, 50);
            for k in ["reg_call_us", "reg_us", "dereg_call_us", "dereg_us"] {
                assert!(num(&v, k) > 0.0, "{v}");
            }
            assert!(num(&v, "reg_call_us") <= num(&v, "reg_us"), "{v}");
        }
    }
    // Without --size, ndmrlat's sweep: 1 B to 4 MiB.
    let v = json(&["mrlat", "-n", "3"]);
    let sizes: Vec<u64> = v
        .as_array()
        .expect("sweep")
        .iter()
        .map(|r| r["size"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, (0..23).map(|i| 1u64 << i).collect::<Vec<_>>());
}

#[test]
fn mrrate_several_threads() {
    for p in PROVIDERS {
        let v = json(&[
            "mrrate",
            "--provider",
            p,
            "-t",
            "2",
            "--size",
            "65536",
            "-n",
            "100",
        ]);
        check_row(&v, "mrrate", p, "poll", 65536, 100);
        assert_eq!(v["threads"].as_u64(), Some(2));
        for k in ["reg_us", "reg_per_s", "dereg_us", "dereg_per_s"] {
            assert!(num(&v, k) > 0.0, "{v}");
        }
    }
    // ndmrrate's counts: 4 MiB / 1 MiB = 4 ≤ 5, so 4 × 2000 = 8000, capped by -n.
    let v = json(&["mrrate", "-t", "1", "-a", "-n", "20"]);
    let rows = v.as_array().expect("-a gives an array");
    assert_eq!(rows.len(), 23);
    assert!(rows.iter().all(|r| r["iterations"].as_u64() == Some(20)));
}

#[test]
fn cat_checks_every_provider() {
    let v = json(&["cat"]);
    let rows = v.as_array().expect("array");
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["provider"].as_str().unwrap())
        .collect();
    assert_eq!(names, PROVIDERS);
    for r in rows {
        assert_eq!(r["tool"], "cat");
        assert_eq!(r["passed"], true);
        assert!(
            r["addresses"]
                .as_array()
                .is_some_and(|a| a.iter().any(|x| x == "127.0.0.1")),
            "{r}"
        );
    }
    // An address no provider serves fails the check.
    let (ok, _, err) = nd(&["cat", "203.0.113.77"]);
    assert!(!ok);
    assert!(err.contains("203.0.113.77"), "{err}");
}

#[test]
fn info_lists_adapter_fields_and_every_variable() {
    let v = json(&["info"]);
    let rows = v.as_array().expect("array");
    for (row, prefix) in rows.iter().zip(["ND_TCP_", "ND_SHM_"]) {
        let a = &row["adapters"][0];
        for k in [
            "InfoVersion",
            "MaxInlineDataSize",
            "MaxCallerData",
            "AdapterFlags",
        ] {
            assert!(!a[k].is_null(), "{k} missing in {a}");
        }
        assert_eq!(a["InfoVersion"].as_u64(), Some(0x20000));
        let vars = row["variables"].as_array().expect("variables");
        assert!(vars.len() >= 3, "{row}");
        for var in vars {
            assert!(var["name"].as_str().unwrap().starts_with(prefix), "{var}");
            assert!(!var["default"].as_str().unwrap().is_empty(), "{var}");
            assert!(var["meaning"].as_str().unwrap().len() > 10, "{var}");
        }
    }
}

/// Start `nd server_args -s 127.0.0.1:0 --announce`, run `nd client_args -c <addr>`; both
/// must fail, each naming the option that differs.
fn mismatch(server_args: &[&str], client_args: &[&str], key: &str) {
    let server = Server::start(server_args);
    let (ok, _, client_err) = nd(&with(client_args, &["-c", &server.addr]));
    let (server_ok, server_err) = server.finish();
    assert!(!ok, "the client must fail");
    assert!(!server_ok, "the server must fail");
    for (who, e) in [("client", &client_err), ("server", &server_err)] {
        assert!(
            e.contains("option mismatch") && e.contains(key),
            "{who}: {e}"
        );
    }
}

#[test]
fn mismatched_options_fail_both_ends() {
    mismatch(
        &["pingpong", "--size", "8", "-n", "10"],
        &["pingpong", "--size", "16", "-n", "10"],
        "size: here",
    );
    mismatch(
        &["rping", "--op", "write", "-n", "10"],
        &["rping", "--op", "read", "-n", "10"],
        "op: here",
    );
    mismatch(
        &["pingpong", "-n", "10"],
        &["pingpong", "-n", "10", "--blocking"],
        "mode: here",
    );
    mismatch(
        &["pingpong", "-n", "10"],
        &["pingpong", "-n", "10", "--repost-first"],
        "repost: here",
    );
    mismatch(
        &["tcp-pingpong", "-n", "10"],
        &["tcp-pingpong", "-n", "20"],
        "n: here",
    );
}

#[test]
fn bench_json_covers_the_matrix() {
    let v = json(&["bench", "--quick"]);
    let rows = v.as_array().expect("array");
    for p in PROVIDERS {
        for test in [
            "pingpong 8 B",
            "pingpong 8 B, blocking",
            "rpingpong 8 B",
            "ping 4 KiB",
            "rping write 1 MiB",
        ] {
            let r = rows
                .iter()
                .find(|r| r["test"] == test && r["provider"] == p)
                .unwrap_or_else(|| panic!("no {test} / {p} cell in {v}"));
            if r["error"].is_string() {
                assert_eq!(
                    r["not_supported"], true,
                    "only ND_NOT_SUPPORTED may fail: {r}"
                );
            } else if r["median_us"].is_number() {
                check_latency(r);
            } else {
                check_bandwidth(r);
            }
        }
    }
    for test in [
        "tcp-pingpong 8 B",
        "tcp-pingpong 8 B, blocking",
        "tcp-stream 1 MiB",
    ] {
        let r = rows
            .iter()
            .find(|r| r["test"] == test)
            .expect("yardstick cell");
        assert_eq!(r["provider"], "kernel-tcp");
    }
}
