//! `--api v1`: `nd pingpong`, `nd rping` and `nd rpingpong` run through ND v1
//! (`netdirect::v1`) on both providers, with both ends on v1, and with one end on v1 and the
//! other on v2 (either way round): one wire, two programming models.

mod common;

use serde_json::Value;

use common::{nd, Server};

const PROVIDERS: [&str; 2] = ["tcp", "shm"];

/// The tools and their arguments (a few iterations each).
const RUNS: [&[&str]; 4] = [
    &["pingpong", "-n", "200"],
    &["rping", "-n", "200", "--size", "4096"],
    &["rping", "-n", "200", "--size", "4096", "--op", "read"],
    &["rpingpong", "-n", "200"],
];

fn last_json(out: &str, what: &str) -> Value {
    let last = out.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{what}: last line {last:?}: {e}"))
}

fn args<'a>(run: &[&'a str], provider: &'a str, api: &'a str) -> Vec<&'a str> {
    let mut a = run.to_vec();
    a.extend(["--provider", provider, "--api", api, "--json"]);
    a
}

#[test]
fn both_ends_on_v1() {
    for p in PROVIDERS {
        for run in RUNS {
            let mut a = args(run, p, "v1");
            a.push("--loopback");
            let (ok, out, err) = nd(&a);
            assert!(ok, "nd {a:?} failed: {err}");
            let v = last_json(&out, &format!("{a:?}"));
            assert_eq!(v["provider"], p, "{v}");
            assert_eq!(v["iterations"].as_u64(), Some(200), "{v}");
        }
    }
}

#[test]
fn blocking_on_v1() {
    for p in PROVIDERS {
        let mut a = args(&["pingpong", "-n", "200", "--blocking"], p, "v1");
        a.push("--loopback");
        let (ok, out, err) = nd(&a);
        assert!(ok, "nd {a:?} failed: {err}");
        assert_eq!(last_json(&out, "blocking")["mode"], "blocking");
    }
}

#[test]
fn one_end_on_v1_the_other_on_v2() {
    for p in PROVIDERS {
        for run in RUNS {
            for (server_api, client_api) in [("v1", "v2"), ("v2", "v1")] {
                let server = Server::start(&args(run, p, server_api));
                let mut c = args(run, p, client_api);
                c.extend(["-c", &server.addr]);
                let (ok, out, err) = nd(&c);
                let (server_ok, server_err) = server.finish();
                let what = format!("{run:?} on {p}, server {server_api}, client {client_api}");
                assert!(ok, "{what}: client failed: {err}");
                assert!(server_ok, "{what}: server failed: {server_err}");
                assert_eq!(last_json(&out, &what)["iterations"].as_u64(), Some(200));
            }
        }
    }
}
