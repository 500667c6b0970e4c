//! Every scenario, as two `nd-peer` processes, over 127.0.0.1 and over ::1, for every provider
//! of `netdirect_conformance::providers()`.
//!
//! Each scenario also runs with every adapter's overlapped descriptor exported
//! (`Adapter::fd`, as an event-loop application does), which changes how a provider may watch
//! its sockets, and over IPv4 with every adapter's progress engine running (`ND_PROGRESS=thread`),
//! which drives the same connections from a second thread.
//!
//! Test names are `<scenario>::<family>[_fd_exported|_engine]`; every failure message starts with
//! `[provider=... family=... scenario=...]` and carries both processes' output.

// Requests are lists of byte ranges (one per SGE): `&[0..64]` is a one-SGE request, not a
// mistaken attempt at a Vec of the range's elements.
#![allow(clippy::single_range_in_vec_init)]

use netdirect_conformance::harness::{self, Drive, Family};
use netdirect_conformance::{find, providers_for, Needs, SCENARIOS};

fn run(scenario: &str, family: Family, drive: Drive) {
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_nd-peer"));
    let s = find(scenario).unwrap_or_else(|| panic!("no scenario {scenario:?}"));
    let mut failures = Vec::new();
    let needs = if s.name.starts_with("rdma") {
        Needs::OneSided
    } else if s.name.starts_with("rnr") {
        Needs::RnrTimeout
    } else if s.name.starts_with("srq") {
        Needs::Srq
    } else {
        Needs::TwoSided
    };
    for p in providers_for(needs) {
        let what = format!("{}{}", s.name, drive.suffix());
        match harness::run(exe, p, family, drive, s) {
            Ok(()) => eprintln!("{} passed", harness::label(p, family, &what)),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

macro_rules! scenarios {
    ($($module:ident => $name:literal,)*) => {
        $(
            mod $module {
                use super::*;

                #[test]
                fn ipv4() {
                    run($name, Family::V4, Drive::Waits);
                }

                #[test]
                fn ipv6() {
                    run($name, Family::V6, Drive::Waits);
                }

                #[test]
                fn ipv4_fd_exported() {
                    run($name, Family::V4, Drive::FdExported);
                }

                #[test]
                fn ipv6_fd_exported() {
                    run($name, Family::V6, Drive::FdExported);
                }

                #[test]
                fn ipv4_engine() {
                    run($name, Family::V4, Drive::Engine);
                }
            }
        )*

        /// Every scenario of the library has its tests here.
        #[test]
        fn every_scenario_is_tested() {
            let tested = [$($name),*];
            for s in SCENARIOS {
                assert!(tested.contains(&s.name), "scenario {} has no test", s.name);
            }
            assert_eq!(tested.len(), SCENARIOS.len());
        }
    };
}

scenarios! {
    accept => "accept",
    reject => "reject",
    active_reject => "active-reject",
    refused => "refused",
    oversize_private_data => "oversize-private-data",
    read_limits => "read-limits",
    cancel_connect => "cancel-connect",
    cancel_get_connection_request => "cancel-get-connection-request",
    peer_disconnect => "peer-disconnect",
    peer_killed => "peer-killed",
    refused_then_exit => "refused-then-exit",
    send_receive => "send-receive",
    overrun => "overrun",
    overrun_large => "overrun-large",
    rdma_write_read => "rdma-write-read",
    rdma_read_fence => "rdma-read-fence",
    rdma_read_limits => "rdma-read-limits",
    rdma_windows => "rdma-windows",
    rdma_protection => "rdma-protection",
    rdma_window_other_qp => "rdma-window-other-qp",
    rnr_timeout => "rnr-timeout",
    rnr_timeout_polling => "rnr-timeout-polling",
    rnr_timeout_srq => "rnr-timeout-srq",
    srq_server_256 => "srq-server-256",
}
