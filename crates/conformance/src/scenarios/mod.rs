//! The scenarios: each a server role and a client role, run in two processes.

mod connection;
mod data;
mod rdma;
mod srq;
mod teardown;
mod v1;
mod v1_connection;
mod v1_data;
mod v1_interop;

pub use v1::V1_SCENARIOS;

use std::fmt;
use std::net::SocketAddr;

use netdirect::{Connector, Listener, OpFlags, Status};

use crate::check::{
    expect_bytes, expect_pending, expect_status, next_results, wait_ok, Check, Context, Expect,
};
use crate::side::{Ctx, Side, SideConfig};
use crate::{ensure, ensure_eq};

/// How the harness runs a scenario's two processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// The server prints `LISTENING`, the client runs and exits, then the server's standard
    /// input is closed and it exits. Both must exit 0.
    Normal,
    /// The client prints `READY` once connected; the harness then kills the server with
    /// SIGKILL. The client must exit 0.
    KillServerOnReady,
}

/// A role: runs to completion, or reports the first failed check.
pub type Role = fn(&Ctx) -> Check;

/// A named scenario.
#[derive(Clone, Copy)]
pub struct Scenario {
    /// The name `nd-peer` takes.
    pub name: &'static str,
    /// What it checks.
    pub summary: &'static str,
    /// How the harness runs it.
    pub flow: Flow,
    /// The passive side.
    pub server: Role,
    /// The active side.
    pub client: Role,
}

impl fmt::Debug for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scenario")
            .field("name", &self.name)
            .field("flow", &self.flow)
            .finish_non_exhaustive()
    }
}

/// Every scenario.
pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "accept",
        summary: "Connect/Accept with private data both ways (GetPrivateData overflow rules), \
                  addresses on both sides, GetPeerAddress before Accept, NotifyDisconnect \
                  cancel and completion on the peer's Disconnect",
        flow: Flow::Normal,
        server: connection::accept_server,
        client: connection::accept_client,
    },
    Scenario {
        name: "reject",
        summary: "the passive side Rejects with MaxCalleeData bytes of private data: the \
                  Connect completes ND_CONNECTION_REFUSED and sees them; the same connector \
                  Connects again and is refused again, with the new private data",
        flow: Flow::Normal,
        server: connection::reject_server,
        client: connection::reject_client,
    },
    Scenario {
        name: "active-reject",
        summary: "the active side Rejects after its Connect completed: the pending Accept \
                  completes ND_CONNECTION_REFUSED (D9)",
        flow: Flow::Normal,
        server: connection::active_reject_server,
        client: connection::active_reject_client,
    },
    Scenario {
        name: "refused",
        summary: "Connect to a port whose listener was released (its process still running): \
                  ND_CONNECTION_REFUSED, and a retry on the same connector is refused the same \
                  way",
        flow: Flow::Normal,
        server: connection::refused_server,
        client: connection::refused_client,
    },
    Scenario {
        name: "oversize-private-data",
        summary: "Connect/Accept with MaxCallerData+1 / MaxCalleeData+1 bytes fail \
                  ND_INVALID_BUFFER_SIZE synchronously; the same connectors then succeed with \
                  exactly the maximum (D8)",
        flow: Flow::Normal,
        server: connection::oversize_server,
        client: connection::oversize_client,
    },
    Scenario {
        name: "read-limits",
        summary: "Connect(4, 8) / Accept(2, 16): GetReadLimits on both sides, before and after \
                  (§2.10 read-limit negotiation, D25)",
        flow: Flow::Normal,
        server: connection::read_limits_server,
        client: connection::read_limits_client,
    },
    Scenario {
        name: "cancel-connect",
        summary: "a Connect nobody answers stays ND_PENDING; CancelOverlappedRequests completes \
                  it ND_CANCELED before returning",
        flow: Flow::Normal,
        server: connection::cancel_connect_server,
        client: connection::cancel_connect_client,
    },
    Scenario {
        name: "cancel-get-connection-request",
        summary: "two pending GetConnectionRequests complete ND_CANCELED on cancel; the \
                  listener then serves a connection, to the oldest request first",
        flow: Flow::Normal,
        server: connection::cancel_gcr_server,
        client: connection::cancel_gcr_client,
    },
    Scenario {
        name: "peer-disconnect",
        summary: "the server Disconnects: the client's posted Receives complete ND_CANCELED \
                  and its NotifyDisconnect completes (R-QP-8, D4)",
        flow: Flow::Normal,
        server: teardown::peer_disconnect_server,
        client: teardown::peer_disconnect_client,
    },
    Scenario {
        name: "peer-killed",
        summary: "the server is killed with SIGKILL: the client's posted Receives complete \
                  ND_CANCELED and its NotifyDisconnect completes",
        flow: Flow::KillServerOnReady,
        server: teardown::peer_killed_server,
        client: teardown::peer_killed_client,
    },
    Scenario {
        name: "refused-then-exit",
        summary: "an 8 MiB RDMA Write into a read-only region; the target refuses it and its \
                  process exits at once: the Write completes ND_ACCESS_VIOLATION (D6), the \
                  Terminate not lost to the reset the Write's unread rest causes",
        flow: Flow::Normal,
        server: teardown::refused_then_exit_server,
        client: teardown::refused_then_exit_client,
    },
    Scenario {
        name: "send-receive",
        summary: "Sends with 1 and 5 SGEs, zero-byte Sends, three 1 MiB Sends, both ways; \
                  every byte, bytes_transferred and every completion's contexts and type",
        flow: Flow::Normal,
        server: data::send_receive_server,
        client: data::send_receive_client,
    },
    Scenario {
        name: "overrun",
        summary: "100 bytes into a 16-byte Receive: ND_DATA_OVERRUN (D5), the connection \
                  terminates, both sides' other requests complete ND_CANCELED",
        flow: Flow::Normal,
        server: teardown::overrun_server,
        client: teardown::overrun_client,
    },
    Scenario {
        name: "overrun-large",
        summary: "32 MiB into a 16-byte Receive: ND_DATA_OVERRUN (D5); the Send, still in \
                  progress, completes STATUS_DATA_ERROR and the one behind it ND_CANCELED",
        flow: Flow::Normal,
        server: teardown::overrun_large_server,
        client: teardown::overrun_large_client,
    },
    Scenario {
        name: "rdma-write-read",
        summary: "RDMA Write then Read back of 0 B, 1 B, 4 KiB, 1 MiB and 64 MiB in 1, 3 and \
                  MaxSge SGEs, every byte checked; SILENT_SUCCESS, INLINE from unregistered \
                  memory, in-order completions; the passive side Writes and Reads too",
        flow: Flow::Normal,
        server: rdma::write_read_server,
        client: rdma::write_read_client,
    },
    Scenario {
        name: "rdma-read-fence",
        summary: "READ_FENCE: a Send and a Write posted right after Reads carry what the \
                  Reads brought (they waited for them)",
        flow: Flow::Normal,
        server: rdma::read_fence_server,
        client: rdma::read_fence_client,
    },
    Scenario {
        name: "rdma-read-limits",
        summary: "Connect(0, 3) / Accept(3, 0): exact GetReadLimits; 24 Reads (some of 4 SGEs) \
                  posted at once never exceed the IRD",
        flow: Flow::Normal,
        server: rdma::read_limits_server,
        client: rdma::read_limits_client,
    },
    Scenario {
        name: "rdma-windows",
        summary: "memory windows over a region without remote rights (R-MW-1): token valid at \
                  Bind, Bind/Invalidate completions in order, flags 0 (D11), Deregister busy \
                  (R-MR-2), rebind with new rights, Invalidate of an unbound window",
        flow: Flow::Normal,
        server: rdma::windows_server,
        client: rdma::windows_client,
    },
    Scenario {
        name: "rdma-protection",
        summary: "every remote-access violation (unknown token, wrong key, deregistered region, \
                  missing rights, one byte out at either end, address + length overflow, \
                  invalidated or read-only window): the request completes \
                  ND_ACCESS_VIOLATION (D6), the rest ND_CANCELED on both sides, the target's \
                  memory untouched",
        flow: Flow::Normal,
        server: rdma::protection_server,
        client: rdma::protection_client,
    },
    Scenario {
        name: "rdma-window-other-qp",
        summary: "a window is bound to one queue pair: its token fails through another \
                  connection to the same peer (STag not associated) and works through its own",
        flow: Flow::Normal,
        server: rdma::window_other_qp_server,
        client: rdma::window_other_qp_client,
    },
    Scenario {
        name: "rnr-timeout",
        summary: "a Send with no Receive posted at the peer waits there for the receiver's \
                  bound, then completes ND_IO_TIMEOUT; the receiver sees no CQE, both sides \
                  see the connection end (R-QP-7)",
        flow: Flow::Normal,
        server: srq::rnr_timeout_server,
        client: srq::rnr_timeout_client,
    },
    Scenario {
        name: "rnr-timeout-polling",
        summary: "the same with a receiver that only busy-polls its CQ (no blocking wait \
                  drives the engine's timers): the bound still holds",
        flow: Flow::Normal,
        server: srq::rnr_timeout_polling_server,
        client: srq::rnr_timeout_client,
    },
    Scenario {
        name: "rnr-timeout-srq",
        summary: "the same with the receiver's queue pair on an empty SRQ; the SRQ keeps \
                  working for Receives posted afterwards",
        flow: Flow::Normal,
        server: srq::rnr_timeout_srq_server,
        client: srq::rnr_timeout_srq_client,
    },
    Scenario {
        name: "srq-server-256",
        summary: "one SRQ of 512 buffers serves 256 connections from one client process, 8 \
                  messages each, echoed: every byte checked both ways, Sends wait for reposts \
                  when the SRQ runs dry, every buffer accounted for at the end",
        flow: Flow::Normal,
        server: srq::srq_server_256_server,
        client: srq::srq_server_256_client,
    },
];

/// The scenario called `name`.
pub fn find(name: &str) -> Option<&'static Scenario> {
    SCENARIOS
        .iter()
        .chain(V1_SCENARIOS)
        .find(|s| s.name == name)
}

/// The server's queue pair context.
const SERVER_QP: u64 = 0x5E4E_0000_0000_0051;
/// The client's queue pair context.
const CLIENT_QP: u64 = 0xC11E_0000_0000_00C1;
/// The request context of the zero-byte "bye" message that ends an orderly scenario.
const BYE: u64 = 0xB7E0_0000_0000_0B7E;

fn open_side(ctx: &Ctx, cfg: SideConfig) -> Check<Side> {
    let side = Side::open(&ctx.provider, ctx.addr.ip(), cfg)?;
    if ctx.export_fd {
        let _ = side.adapter.fd();
    }
    Ok(side)
}

fn server_side(ctx: &Ctx, cfg: SideConfig) -> Check<Side> {
    open_side(
        ctx,
        SideConfig {
            qp_context: SERVER_QP,
            ..cfg
        },
    )
}

fn client_side(ctx: &Ctx, cfg: SideConfig) -> Check<Side> {
    open_side(
        ctx,
        SideConfig {
            qp_context: CLIENT_QP,
            ..cfg
        },
    )
}

/// The listener address for a server: the given IP, port 0.
fn any_port(ctx: &Ctx) -> SocketAddr {
    SocketAddr::new(ctx.addr.ip(), 0)
}

/// The passive side's opening: listen on an ephemeral port of the run's IP (backlog 4),
/// announce it to the client, and wait for the client's connection request on `side`'s
/// connector. The caller keeps the listener for as long as the scenario needs it; the
/// address is the one announced.
fn await_request(ctx: &Ctx, side: &Side) -> Check<(Listener, SocketAddr)> {
    let (listener, laddr) = crate::side::listen(&side.adapter, any_port(ctx), 4)?;
    ctx.announce_listening(laddr);
    let ov = listener
        .get_connection_request(&side.connector)
        .ctx("GetConnectionRequest")?;
    wait_ok(&ov, "GetConnectionRequest")?;
    Ok((listener, laddr))
}

/// The private data the client's Connect carries.
fn client_pd(len: usize) -> Vec<u8> {
    crate::check::pattern(0xC0FF_EE00 + len as u64, len)
}

/// The private data the server's Accept or Reject carries.
fn server_pd(len: usize) -> Vec<u8> {
    crate::check::pattern(0x5E4E_0000 + len as u64, len)
}

/// GetPrivateData as the ND tests use it (§2.10): the full data comes back (the length may
/// exceed what the peer sent, the prefix must match); a too-small buffer gives
/// `ND_BUFFER_OVERFLOW` with the prefix that fits copied and the full size named; a zero-size
/// buffer gives `ND_BUFFER_OVERFLOW` and the size (ndping, ndmw).
fn check_private_data(c: &Connector, want: &[u8], what: &str) -> Check {
    let all = c.private_data().ctx(&format!("{what}: private_data"))?;
    ensure!(
        all.len() >= want.len(),
        "{what}: {} bytes of private data, expected at least {}",
        all.len(),
        want.len()
    );
    expect_bytes(&all[..want.len()], want, what)?;
    let mut big = vec![0u8; all.len() + 16];
    let n = c
        .get_private_data(&mut big)
        .ctx(&format!("{what}: get_private_data into a large buffer"))?;
    ensure_eq!(n, all.len(), "{what}: get_private_data length");
    expect_bytes(&big[..want.len()], want, &format!("{what} (large buffer)"))?;
    if !want.is_empty() {
        let half = want.len() / 2;
        let mut small = vec![0u8; half];
        expect_status(
            c.get_private_data(&mut small),
            Status::BUFFER_OVERFLOW,
            &format!("{what}: get_private_data into {half} bytes"),
        )?;
        expect_bytes(&small, &want[..half], &format!("{what} (partial copy)"))?;
        let probe = c.get_private_data(&mut []);
        expect_status(
            probe,
            Status::BUFFER_OVERFLOW,
            &format!("{what}: get_private_data with a zero-size buffer"),
        )?;
        // ND writes the size needed back through pcbPrivateData.
        for (len, r) in [(half, c.get_private_data(&mut small)), (0, probe)] {
            ensure_eq!(
                r.err().and_then(|e| e.required_size()),
                Some(all.len()),
                "{what}: the size get_private_data into {len} bytes says is needed"
            );
        }
    }
    Ok(())
}

/// Client end of an orderly close: a zero-byte "bye" Send, then wait for the server's
/// Disconnect (NotifyDisconnect), then Disconnect as well, which must also succeed (R-CONN-3).
fn client_bye(side: &Side) -> Check {
    let nd = side.connector.notify_disconnect().ctx("NotifyDisconnect")?;
    expect_pending(&nd, "NotifyDisconnect while connected")?;
    side.send(BYE, &[], OpFlags::empty()).ctx("Send bye")?;
    let r = next_results(&side.scq, 1, "bye Send")?;
    Expect::send(Status::SUCCESS, BYE, side.qp_context).check(&r[0], "bye Send")?;
    wait_ok(&nd, "NotifyDisconnect after the server's Disconnect")?;
    let d = side
        .connector
        .disconnect()
        .ctx("Disconnect after the peer's")?;
    wait_ok(&d, "Disconnect after the peer's (R-CONN-3)")
}

/// Server end of an orderly close (the zero-byte "bye" Receive was posted before Accept):
/// wait for the bye, Disconnect, and stay until the client has gone.
fn server_bye(ctx: &Ctx, side: &Side) -> Check {
    let r = next_results(&side.rcq, 1, "bye Receive")?;
    Expect::recv(Status::SUCCESS, BYE, side.qp_context, Some(0)).check(&r[0], "bye Receive")?;
    let d = side.connector.disconnect().ctx("Disconnect")?;
    wait_ok(&d, "Disconnect")?;
    ctx.linger();
    Ok(())
}
