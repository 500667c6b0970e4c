//! `nd pingpong --api ndk` and `nd rping --api ndk`: the measurements through
//! `netdirect::ndk`, both providers, polling and blocking, as two processes on loopback; the
//! rows are the v2 tools' with `api` = `ndk`. The tools without an NDK loop refuse it.

mod common;

use common::nd;
use serde_json::Value;

#[test]
fn ndk_pingpong_both_providers_both_modes() {
    for p in ["tcp", "shm"] {
        for (mode, flag) in [("poll", None), ("blocking", Some("--blocking"))] {
            for order in [None, Some("--repost-first")] {
                let mut a = vec![
                    "pingpong",
                    "--loopback",
                    "--api",
                    "ndk",
                    "--provider",
                    p,
                    "--size",
                    "8",
                    "-n",
                    "100",
                    "--json",
                ];
                a.extend(flag);
                a.extend(order);
                let (ok, out, err) = nd(&a);
                assert!(ok, "nd {a:?} failed: {err}");
                let last = out.lines().last().unwrap_or_default();
                let v: Value =
                    serde_json::from_str(last).unwrap_or_else(|e| panic!("{last:?}: {e}"));
                assert_eq!(v["tool"], "pingpong", "{v}");
                assert_eq!(v["api"], "ndk", "{v}");
                assert_eq!(v["provider"], p, "{v}");
                assert_eq!(v["mode"], mode, "{v}");
                assert_eq!(v["size"], 8, "{v}");
                assert_eq!(v["iterations"], 100, "{v}");
                assert_eq!(
                    v["repost"],
                    if order.is_some() { "first" } else { "after" },
                    "{v}"
                );
                assert!(v["median_us"].as_f64().is_some_and(|m| m > 0.0), "{v}");
            }
        }
    }
}

#[test]
fn ndk_rping_writes_and_reads_on_both_providers() {
    for p in ["tcp", "shm"] {
        for op in ["write", "read"] {
            for flag in [None, Some("--blocking")] {
                let mut a = vec![
                    "rping",
                    "--loopback",
                    "--api",
                    "ndk",
                    "--provider",
                    p,
                    "--op",
                    op,
                    "--size",
                    "4096",
                    "-n",
                    "200",
                    "--json",
                ];
                a.extend(flag);
                let (ok, out, err) = nd(&a);
                assert!(ok, "nd {a:?} failed: {err}");
                let last = out.lines().last().unwrap_or_default();
                let v: Value =
                    serde_json::from_str(last).unwrap_or_else(|e| panic!("{last:?}: {e}"));
                assert_eq!(v["tool"], "rping", "{v}");
                assert_eq!(v["api"], "ndk", "{v}");
                assert_eq!(v["op"], op, "{v}");
                assert_eq!(v["iterations"], 200, "{v}");
                assert!(v["mb_per_s"].as_f64().is_some_and(|m| m > 0.0), "{v}");
            }
        }
    }
}

#[test]
fn tools_without_an_ndk_loop_refuse_it() {
    let (ok, _, err) = nd(&[
        "rpingpong",
        "--loopback",
        "--api",
        "ndk",
        "--size",
        "8",
        "-n",
        "10",
    ]);
    assert!(!ok && err.contains("--api ndk"), "{err}");
}
