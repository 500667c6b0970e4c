//! NDK from C: `examples/c/ndkpingpong.c`, built with `gcc -Wall -Werror` against
//! `include/ndkpi.h` and `libnetdirect.so`, run as a server (connect event callback, Accept
//! with a disconnect event, a listener closed while its connector lives) and a client
//! (Connect, CompleteConnect, ping-pong, Disconnect) on both providers over 127.0.0.1 and
//! ::1, with requests completing inline and through their callbacks.

mod cbuild;

use cbuild::{build, loopbacks, start, Lang};

#[test]
fn ndkpingpong_runs_from_c() {
    let exe = build("ndkpingpong", Lang::C, &["examples/c/ndkpingpong.c"], &[]);
    for provider in ["tcp", "shm"] {
        for ip in loopbacks() {
            for completion in ["inline", "pending"] {
                let env = [("ND_PROVIDER", provider), ("ND_NDK_COMPLETION", completion)];
                let mut srv = start(&exe, &["-s", ip], &env);
                let line = srv.expect_line("LISTENING ");
                let port: u16 = line
                    .split_whitespace()
                    .last()
                    .and_then(|p| p.parse().ok())
                    .unwrap_or_else(|| panic!("bad line {line:?}"));
                let at = cbuild::endpoint(ip, port);
                let out = start(&exe, &["-c", &at, "-i", "200"], &env).success();
                assert!(
                    out.contains("200 round trips") && out.contains("client ok"),
                    "{out}"
                );
                let out = srv.success();
                assert!(
                    out.contains("server: 201 messages, ok"),
                    "{provider} {ip}:\n{out}"
                );
            }
        }
    }
}
