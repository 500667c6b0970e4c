//! The ND v1 scenarios (`netdirect::v1`), as two `nd-peer` processes, over 127.0.0.1 and ::1,
//! for every provider; `v1_listen.rs` has the single-process rules of `INDAdapter::Listen`.

use netdirect_conformance::harness::{self, Drive, Family};
use netdirect_conformance::{find, providers_for, Needs, V1_SCENARIOS};

fn run(scenario: &str, family: Family) {
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_nd-peer"));
    let s = find(scenario).unwrap_or_else(|| panic!("no scenario {scenario:?}"));
    let needs =
        if s.name.contains("rdma") || s.name.contains("interop") || s.name.contains("invalidate") {
            Needs::OneSided
        } else {
            Needs::TwoSided
        };
    let mut failures = Vec::new();
    for p in providers_for(needs) {
        match harness::run(exe, p, family, Drive::Waits, s) {
            Ok(()) => eprintln!("{} passed", harness::label(p, family, s.name)),
            Err(e) if e.contains(netdirect_conformance::check::NOT_RUN) => {
                eprintln!("{} not run: {e}", harness::label(p, family, s.name));
            }
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
                    run($name, Family::V4);
                }

                #[test]
                fn ipv6() {
                    run($name, Family::V6);
                }
            }
        )*

        /// Every v1 scenario has its tests here.
        #[test]
        fn every_v1_scenario_is_tested() {
            let tested = [$($name),*];
            for s in V1_SCENARIOS {
                assert!(tested.contains(&s.name), "scenario {} has no test", s.name);
            }
            assert_eq!(tested.len(), V1_SCENARIOS.len());
        }
    };
}

scenarios! {
    connect => "v1-connect",
    reject => "v1-reject",
    active_reject => "v1-active-reject",
    flush => "v1-flush",
    batch => "v1-batch",
    rdma => "v1-rdma",
    rdma_out_of_bounds => "v1-rdma-out-of-bounds",
    rdma_bad_token => "v1-rdma-bad-token",
    send_invalidate => "v1-send-invalidate",
    send_invalidate_foreign => "v1-send-invalidate-foreign",
    interop_v1_server => "v1-interop-v1-server",
    interop_v2_server => "v1-interop-v2-server",
}
