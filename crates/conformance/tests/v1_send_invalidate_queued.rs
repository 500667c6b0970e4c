//! ND v1 `SendAndInvalidate` posted behind requests still queued: it queues like any Send
//! (`ND_NO_MORE_ENTRIES` only for a full initiator queue), completes after them, in order,
//! and invalidates the peer's window, which reports it in the `ND_RESULT` given to
//! `CreateMemoryWindow` (INDEndpoint::SendAndInvalidate, INDAdapter::CreateMemoryWindow in
//! Microsoft's NDSPI v1 reference). Every provider, 127.0.0.1 and ::1.
//!
//! One adapter serves both ends, so one thread drives both, and the server posts no Receive
//! until the client has posted everything: nothing the client sends is taken in meanwhile,
//! so on `shm` the earlier Sends (more bytes than its ring holds) are still queued when the
//! SendAndInvalidate is posted.

use std::cell::UnsafeCell;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use netdirect::v1::{self, NdResult1, Sge1, PROTOCOL_TCP};
use netdirect::{OpFlags, Status};
use netdirect_conformance::check::{fail, wait_ok, Check, Context};
use netdirect_conformance::harness::{each_provider, Family};
use netdirect_conformance::{ensure, ensure_eq, Needs};

/// Sends before the SendAndInvalidate, and their size: 768 KiB, more than `shm`'s ring
/// holds by default (512 KiB), so the last of them wait in the initiator queue.
const SENDS: usize = 12;
const SEND_LEN: usize = 64 * 1024;
/// The SendAndInvalidate's bytes.
const SAI_LEN: usize = 8;
/// The server's window, behind the Receive buffers.
const WIN_AT: usize = (SENDS + 1) * SEND_LEN;
const WIN: usize = 4096;
const BUF: usize = WIN_AT + WIN;

/// Memory registered with a v1 adapter, and `ND_RESULT` slots, both written by the provider:
/// reached only through raw pointers once handed out.
struct Mem {
    buf: Box<[UnsafeCell<u8>]>,
    slots: Box<[UnsafeCell<NdResult1>]>,
}

impl Mem {
    fn new() -> Self {
        Self {
            buf: (0..BUF).map(|_| UnsafeCell::new(0)).collect(),
            slots: (0..64)
                .map(|_| UnsafeCell::new(NdResult1::PENDING))
                .collect(),
        }
    }

    fn at(&self, off: usize) -> *mut u8 {
        self.buf[off].get()
    }

    fn slot(&self, k: usize) -> *mut NdResult1 {
        self.slots[k].get()
    }

    fn index(&self, p: *mut NdResult1) -> usize {
        (p as usize - self.slot(0) as usize) / size_of::<NdResult1>()
    }
}

fn register(a: &v1::Adapter, m: &Mem) -> Check<v1::MrHandle> {
    // SAFETY: `m` outlives the adapter's use of it (dropped after the endpoints).
    let (h, ov) = unsafe { a.register_memory(m.at(0), BUF) }.ctx("RegisterMemory")?;
    wait_ok(&ov, "RegisterMemory")?;
    Ok(h)
}

/// Poll both queues until `want` results came from each; each `(slot, result)` in order.
type Reaped = Vec<(usize, NdResult1)>;
fn reap_both(pairs: [(&v1::CompletionQueue, &Mem, usize); 2]) -> Check<(Reaped, Reaped)> {
    let mut got: [Reaped; 2] = [Vec::new(), Vec::new()];
    let until = Instant::now() + Duration::from_secs(30);
    while got.iter().zip(&pairs).any(|(g, p)| g.len() < p.2) {
        for (g, (cq, m, _)) in got.iter_mut().zip(&pairs) {
            let mut out = [std::ptr::null_mut(); 8];
            let n = cq.get_results(&mut out);
            for &p in &out[..n] {
                // SAFETY: a pointer `get_results` returned: one of `m`'s slots, written.
                g.push((m.index(p), unsafe { p.read() }));
            }
        }
        if Instant::now() > until {
            return fail(format!("results so far: {got:?}"));
        }
    }
    let [a, b] = got;
    Ok((a, b))
}

fn queued_send_and_invalidate(p: &netdirect::Provider, fam: Family) -> Check {
    let a = v1::Provider::from_v2(p.clone())
        .open_adapter(SocketAddr::new(fam.ip(), 0))
        .ctx("OpenAdapter")?;
    // Declared first: dropped after the endpoints and the window that write them.
    let (sm, cm) = (Mem::new(), Mem::new());
    let invalidated = UnsafeCell::new(NdResult1::PENDING);
    let mut port = 0u16;
    let l = a
        .listen(0, PROTOCOL_TCP, 0, Some(&mut port))
        .ctx("Listen")?;
    let to = SocketAddr::new(fam.ip(), u16::from_be(port));
    let (scq, ccq) = (
        a.create_completion_queue(64).ctx("CQ")?,
        a.create_completion_queue(64).ctx("CQ")?,
    );
    let (sc, cc) = (
        a.create_connector().ctx("CreateConnector")?,
        a.create_connector().ctx("CreateConnector")?,
    );
    let req = l.get_connection_request(&sc).ctx("GetConnectionRequest")?;
    let cep = cc
        .create_endpoint(&ccq, &ccq, 4, SENDS + 4, 1, 1, 0, 0, None)
        .ctx("client CreateEndpoint")?;
    let cov = cc.connect(&cep, to, PROTOCOL_TCP, 0, &[]).ctx("Connect")?;
    wait_ok(&req, "GetConnectionRequest")?;
    let sep = sc
        .create_endpoint(&scq, &scq, SENDS + 4, 4, 1, 1, 0, 0, None)
        .ctx("server CreateEndpoint")?;
    let aov = sc.accept(&sep, &[]).ctx("Accept")?;
    wait_ok(&cov, "Connect")?;
    wait_ok(
        &cc.complete_connect().ctx("CompleteConnect")?,
        "CompleteConnect",
    )?;
    wait_ok(&aov, "Accept")?;

    let (smr, cmr) = (register(&a, &sm)?, register(&a, &cm)?);
    // SAFETY: `invalidated` outlives the window (declared before it).
    let mw = unsafe { a.create_memory_window(invalidated.get()) }.ctx("CreateMemoryWindow")?;
    // SAFETY: the window lies in the registered buffer; the slot is read after reaping.
    let d = unsafe {
        sep.bind(
            sm.slot(40),
            smr,
            &mw,
            sm.at(WIN_AT),
            WIN,
            OpFlags::ALLOW_WRITE,
        )
    }
    .ctx("Bind")?;
    let (bound, _) = reap_both([(&scq, &sm, 1), (&ccq, &cm, 0)])?;
    ensure_eq!(bound[0].1.status, Status::SUCCESS, "Bind");

    // The client: SENDS large Sends, then the SendAndInvalidate behind them.
    for k in 0..SENDS {
        let sge = Sge1::new(cm.at(k * SEND_LEN), SEND_LEN, Some(cmr));
        // SAFETY: registered memory, untouched until the Send completes.
        unsafe { cep.send(cm.slot(k), &[sge], OpFlags::empty()) }.ctx("Send")?;
    }
    let sge = Sge1::new(cm.at(SENDS * SEND_LEN), SAI_LEN, Some(cmr));
    // SAFETY: as above.
    unsafe { cep.send_and_invalidate(cm.slot(SENDS), &[sge], &d, OpFlags::empty()) }
        .ctx("SendAndInvalidate behind queued Sends")?;
    // Only now the server's Receives: one per message, in order.
    for k in 0..=SENDS {
        let sge = Sge1::new(sm.at(k * SEND_LEN), SEND_LEN, Some(smr));
        // SAFETY: registered memory, read after the Receive completes.
        unsafe { sep.receive(sm.slot(k), &[sge]) }.ctx("Receive")?;
    }
    let (recvs, sends) = reap_both([(&scq, &sm, SENDS + 1), (&ccq, &cm, SENDS + 1)])?;
    let want = |last: usize| -> Vec<(usize, NdResult1)> {
        (0..=SENDS)
            .map(|k| {
                let bytes = if k == SENDS { last } else { SEND_LEN };
                (
                    k,
                    NdResult1 {
                        status: Status::SUCCESS,
                        bytes_transferred: bytes,
                    },
                )
            })
            .collect()
    };
    ensure_eq!(sends, want(SAI_LEN), "the client's completions, in order");
    ensure_eq!(recvs, want(SAI_LEN), "the server's Receives, in order");
    // SAFETY: a live `ND_RESULT`, written (if at all) before the last Receive completed.
    let inv = unsafe { invalidated.get().read_volatile() };
    ensure_eq!(
        inv,
        NdResult1 {
            status: Status::SUCCESS,
            bytes_transferred: 0
        },
        "CreateMemoryWindow's ND_RESULT after the peer's SendAndInvalidate"
    );
    // Invalidated at the server: the window binds again (a bound one is refused).
    // SAFETY: as the first Bind.
    unsafe {
        sep.bind(
            sm.slot(41),
            smr,
            &mw,
            sm.at(WIN_AT),
            WIN,
            OpFlags::ALLOW_WRITE,
        )
    }
    .ctx("Bind after the peer's invalidation")?;
    let (rebound, _) = reap_both([(&scq, &sm, 1), (&ccq, &cm, 0)])?;
    ensure!(
        rebound[0]
            == (
                41,
                NdResult1 {
                    status: Status::SUCCESS,
                    ..rebound[0].1
                }
            ),
        "re-Bind: {rebound:?}"
    );
    Ok(())
}

#[test]
fn send_and_invalidate_queues_behind_earlier_requests() {
    each_provider(
        Needs::OneSided,
        "v1 SendAndInvalidate behind queued Sends",
        queued_send_and_invalidate,
    );
}
