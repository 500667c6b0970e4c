//! The C ABI from C and C++: programs compiled by this test with `gcc`/`g++ -Wall -Werror`
//! against `include/` and `libnetdirect.so`, run on both providers over 127.0.0.1 and ::1.

mod cbuild;

use cbuild::{build, loopbacks, start, Lang};

const PROVIDERS: [&str; 2] = ["tcp", "shm"];

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
