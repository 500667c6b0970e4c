//! `nd pingpong --api ndk`: the ping-pong through `netdirect::ndk`, both providers, polling and
//! blocking, as two processes on loopback; the row is `nd pingpong`'s with `api` = `ndk`.

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
