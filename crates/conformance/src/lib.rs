//! # netdirect-conformance: ND conformance scenarios run as separate processes
//!
//! Every [`Scenario`] has a server role and a client role, written against the public
//! `netdirect` API only, so a scenario checks what an application sees from a provider. The
//! `nd-peer` binary runs one role of one scenario (`nd-peer <scenario> <server|client> <addr>`);
//! [`harness::run`] starts both roles as separate processes over 127.0.0.1 or ::1 and judges
//! the outcome, with a hard deadline so that nothing ever hangs.
//!
//! The rules checked are those of `docs/ND-RULES.md` §2.9–§2.12 and §7 (statuses in §1.1); each
//! check names the rule it comes from.
//!
//! Synchronisation is by blocking waits only: ND requests (`Overlapped` waits, CQ `Notify`),
//! pipes (the `LISTENING`/`READY` lines, a server's standard input reaching end-of-file), and
//! child exit. No role or harness step sleeps to let something happen.
//!
//! Rule ids (`R-CANCEL-1`, `D9`, ...) and sections (`§2.10`) refer to the repository's
//! `docs/ND-RULES.md`; wire facts to `docs/WIRE.md` and their RFCs.

#![warn(missing_docs)]
// Requests are lists of byte ranges (one per SGE): `&[0..64]` is a one-SGE request, not a
// mistaken attempt at a Vec of the range's elements.
#![allow(clippy::single_range_in_vec_init)]

pub mod check;
pub mod harness;
pub mod netns;
pub mod scenarios;
pub mod side;

pub use check::{Check, Failure};
pub use scenarios::{find, Flow, Scenario, SCENARIOS, V1_SCENARIOS};
pub use side::{Ctx, Side, SideConfig};

/// The providers the conformance suite runs against. Every test iterates this list and sets
/// `ND_PROVIDER` for the processes it starts, so a new provider is one more entry here.
pub fn providers() -> Vec<&'static str> {
    vec!["tcp", "shm"]
}

/// What a test needs from a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Connection management and Send/Receive: every provider.
    TwoSided,
    /// RDMA Read/Write and memory windows.
    OneSided,
    /// The iWARP wire itself (raw TCP clients speaking MPA/DDP/RDMAP at the provider).
    IwarpWire,
    /// Shared receive queues (`MaxSharedReceiveQueueDepth > 0`).
    Srq,
    /// A bounded wait for a Receive (`ND_TCP_RNR_TIMEOUT_MS`, `ND_SHM_RNR_TIMEOUT_MS`), with
    /// shared receive queues.
    RnrTimeout,
}

/// The providers a test with `needs` applies to; for the others it says why it does not run
/// (stated once per test on stderr, so a skipped combination is never silent).
pub fn providers_for(needs: Needs) -> Vec<&'static str> {
    providers()
        .into_iter()
        .filter(|p| match not_applicable(p, needs) {
            Some(why) => {
                eprintln!("[provider={p}] not run: {why}");
                false
            }
            None => true,
        })
        .collect()
}

/// Why a test with `needs` cannot apply to `provider`, if it cannot.
pub fn not_applicable(provider: &str, needs: Needs) -> Option<&'static str> {
    match (provider, needs) {
        (_, Needs::TwoSided | Needs::OneSided) | ("tcp", _) => None,
        ("shm", Needs::IwarpWire) => Some("shm speaks no iWARP: its wire is a shared-memory ring"),
        (p, Needs::Srq | Needs::RnrTimeout) if !supports_srq(p) => {
            Some("its adapter reports MaxSharedReceiveQueueDepth 0 (no shared receive queues)")
        }
        ("shm", Needs::Srq | Needs::RnrTimeout) => None,
        _ => Some("unknown provider"),
    }
}

/// Whether `provider`'s adapter for 127.0.0.1 offers shared receive queues (asked, so a
/// provider that gains them is tested without an edit here).
fn supports_srq(provider: &str) -> bool {
    netdirect::Provider::select(provider)
        .and_then(|p| p.open_adapter_for((std::net::Ipv4Addr::LOCALHOST, 0).into()))
        .is_ok_and(|a| a.query().max_shared_receive_queue_depth > 0)
}
