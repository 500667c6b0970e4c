//! Checks that report what failed instead of panicking, and bounded waits on ND requests.

use std::fmt;
use std::time::{Duration, Instant};

use netdirect::{CompletionQueue, NdResult, NotifyType, Overlapped, RequestType, Status};

/// A failed check: what was expected and what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure(pub String);

/// What a [`not_run`] failure starts with: `harness::each_provider` reports such a run as not
/// run (with the reason) rather than passed or failed.
pub const NOT_RUN: &str = "NOT RUN: ";

/// End a case that cannot apply to this provider or family (say why): it is reported as
/// not run, never as passed.
pub fn not_run(why: &str) -> Check {
    Err(Failure(format!("{NOT_RUN}{why}")))
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failure {}

/// The result of a role or of one check.
pub type Check<T = ()> = Result<T, Failure>;

/// Fail with a message.
pub fn fail<T>(msg: impl Into<String>) -> Check<T> {
    Err(Failure(msg.into()))
}

/// Fail with a formatted message unless the condition holds.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            return Err($crate::check::Failure(format!($($arg)+)));
        }
    };
}

/// Fail unless `got == want`; the message says what was compared.
#[macro_export]
macro_rules! ensure_eq {
    ($got:expr, $want:expr, $($arg:tt)+) => {
        match (&$got, &$want) {
            (got, want) => {
                if got != want {
                    return Err($crate::check::Failure(format!(
                        "{}: expected {:?}, got {:?}",
                        format!($($arg)+),
                        want,
                        got
                    )));
                }
            }
        }
    };
}

/// How long one ND request may stay pending before a role gives up. Generous: nothing in a
/// scenario waits for long, the bound only turns a provider hang into a reported failure.
pub const WAIT: Duration = Duration::from_secs(20);

/// A status as `ND_NAME (0xVALUE)`.
pub fn show(s: Status) -> String {
    format!("{s:?} ({:#010X})", s.as_u32())
}

/// Attach context to an ND or I/O error.
pub trait Context<T> {
    /// Turn the error into a [`Failure`] that says what was being done.
    fn ctx(self, what: &str) -> Check<T>;
}

impl<T> Context<T> for netdirect::Result<T> {
    fn ctx(self, what: &str) -> Check<T> {
        self.map_err(|e| Failure(format!("{what}: unexpected {}", show(e.status()))))
    }
}

/// The raw-socket peers of the wire tests (`forged.rs`, `bad_input.rs`, ...) report their own
/// I/O errors the same way.
impl<T> Context<T> for std::io::Result<T> {
    fn ctx(self, what: &str) -> Check<T> {
        self.map_err(|e| Failure(format!("{what}: {e}")))
    }
}

/// The call must have failed with exactly `want`.
pub fn expect_status<T: fmt::Debug>(r: netdirect::Result<T>, want: Status, what: &str) -> Check {
    match r {
        Err(e) if e.status() == want => Ok(()),
        Err(e) => fail(format!(
            "{what}: expected {}, got {}",
            show(want),
            show(e.status())
        )),
        Ok(v) => fail(format!(
            "{what}: expected {}, got success ({v:?})",
            show(want)
        )),
    }
}

/// The final status of `ov`, waiting at most [`WAIT`]; a request still pending then is a
/// failure.
pub fn finish(ov: &Overlapped, what: &str) -> Check<netdirect::Result<()>> {
    ov.wait_timeout(Some(WAIT))
        .ok_or_else(|| Failure(format!("{what}: still pending after {WAIT:?}")))
}

/// Wait for `ov`; it must succeed.
pub fn wait_ok(ov: &Overlapped, what: &str) -> Check {
    finish(ov, what)?.ctx(what)
}

/// Wait for `ov`; it must fail with exactly `want`.
pub fn wait_status(ov: &Overlapped, want: Status, what: &str) -> Check {
    expect_status(finish(ov, what)?, want, what)
}

/// `GetOverlappedResult(wait = FALSE)` must say `ND_PENDING`.
pub fn expect_pending(ov: &Overlapped, what: &str) -> Check {
    match ov.get_overlapped_result(false) {
        Err(e) if e.is_pending() => Ok(()),
        Err(e) => fail(format!(
            "{what}: expected ND_PENDING, already completed with {}",
            show(e.status())
        )),
        Ok(()) => fail(format!(
            "{what}: expected ND_PENDING, already completed successfully"
        )),
    }
}

/// The request must already be complete (no waiting, no driving) with `want`: for
/// `CancelOverlappedRequests`, whose cancellations are delivered before it returns
/// (R-CANCEL-1).
pub fn expect_completed(ov: &Overlapped, want: Status, what: &str) -> Check {
    match ov.try_result() {
        None => fail(format!("{what}: still pending, expected {}", show(want))),
        Some(r) => {
            let got = r.err().map_or(Status::SUCCESS, |e| e.status());
            ensure!(
                got == want,
                "{what}: expected {}, got {}",
                show(want),
                show(got)
            );
            Ok(())
        }
    }
}

/// Exactly `n` completions from `cq`, blocking on `Notify(ANY)` between polls, at most
/// [`WAIT`] in all.
pub fn next_results(cq: &CompletionQueue, n: usize, what: &str) -> Check<Vec<NdResult>> {
    let deadline = Instant::now() + WAIT;
    let mut out = vec![NdResult::EMPTY; n];
    let mut got = 0;
    while got < n {
        got += cq.get_results(&mut out[got..]);
        if got == n {
            break;
        }
        // The poll above came back short, so any completion queued from now on fires this
        // Notify (the race rule of docs/ND-RULES.md §2.5).
        let ov = cq.notify(NotifyType::Any).ctx("CompletionQueue::notify")?;
        let left = deadline.saturating_duration_since(Instant::now());
        match ov.wait_timeout(Some(left)) {
            Some(r) => r.ctx(&format!("{what}: CQ notify"))?,
            None => {
                let _ = cq.cancel_overlapped_requests();
                return fail(format!(
                    "{what}: only {got} of {n} completions after {WAIT:?}: {:?}",
                    &out[..got]
                ));
            }
        }
    }
    Ok(out)
}

/// The CQ must have nothing more to report (after one drive of the provider).
pub fn expect_empty(cq: &CompletionQueue, what: &str) -> Check {
    let mut r = [NdResult::EMPTY; 4];
    let n = cq.get_results(&mut r);
    ensure!(n == 0, "{what}: unexpected extra completions {:?}", &r[..n]);
    Ok(())
}

/// What one completion must look like.
#[derive(Debug, Clone, Copy)]
pub struct Expect {
    /// Final status.
    pub status: Status,
    /// Send, Receive, ...
    pub request_type: RequestType,
    /// The per-request context given when it was posted.
    pub request_context: u64,
    /// The queue pair's context (D14: `QueuePairContext`).
    pub qp_context: u64,
    /// `BytesTransferred`, checked when given: what a successful Receive received, or what a
    /// successful Send, Write or Read carried (`tests/lengths.rs`).
    pub bytes: Option<u32>,
}

impl Expect {
    /// A completion of a Receive.
    pub fn recv(status: Status, request_context: u64, qp_context: u64, bytes: Option<u32>) -> Self {
        Self {
            status,
            request_type: RequestType::Receive,
            request_context,
            qp_context,
            bytes,
        }
    }

    /// A completion of a Send.
    pub fn send(status: Status, request_context: u64, qp_context: u64) -> Self {
        Self {
            status,
            request_type: RequestType::Send,
            request_context,
            qp_context,
            bytes: None,
        }
    }

    /// A completion of an initiator request (Send, Write, Read, Bind, Invalidate).
    pub fn initiator(
        request_type: RequestType,
        status: Status,
        request_context: u64,
        qp_context: u64,
    ) -> Self {
        Self {
            status,
            request_type,
            request_context,
            qp_context,
            bytes: None,
        }
    }

    /// The same, with `BytesTransferred` checked too.
    pub fn with_bytes(self, bytes: u32) -> Self {
        Self {
            bytes: Some(bytes),
            ..self
        }
    }

    /// Compare with a real completion.
    pub fn check(&self, r: &NdResult, what: &str) -> Check {
        ensure!(
            r.status == self.status,
            "{what}: status: expected {}, got {} in {r:?}",
            show(self.status),
            show(r.status)
        );
        ensure_eq!(r.request_type, self.request_type, "{what}: request_type");
        ensure_eq!(
            r.request_context,
            self.request_context,
            "{what}: request_context"
        );
        ensure_eq!(r.qp_context, self.qp_context, "{what}: qp_context");
        if let Some(b) = self.bytes {
            ensure_eq!(r.bytes_transferred, b, "{what}: bytes_transferred");
        }
        Ok(())
    }
}

/// Check a list of completions against a list of expectations, in order.
pub fn expect_results(got: &[NdResult], want: &[Expect], what: &str) -> Check {
    ensure_eq!(got.len(), want.len(), "{what}: number of completions");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        w.check(g, &format!("{what} #{i}"))?;
    }
    Ok(())
}

/// A deterministic byte pattern, different for every seed.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            // xorshift64*
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect()
}

/// [`pattern`] for large sizes: the same idea eight bytes at a time (tens of MiB stay quick
/// in a debug build). Different seeds give different bytes at every offset.
pub fn fast_pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    fill_pattern(seed, &mut out);
    out
}

/// Fill `buf` with [`fast_pattern`]`(seed, buf.len())`.
pub fn fill_pattern(seed: u64, buf: &mut [u8]) {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut chunks = buf.chunks_exact_mut(8);
    for c in &mut chunks {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        c.copy_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    for b in chunks.into_remainder() {
        x ^= x << 7;
        *b = (x >> 31) as u8;
    }
}

/// Compare received bytes with what was sent; report the first difference.
pub fn expect_bytes(got: &[u8], want: &[u8], what: &str) -> Check {
    ensure_eq!(got.len(), want.len(), "{what}: length");
    if got == want {
        return Ok(());
    }
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        return fail(format!(
            "{what}: byte {i} of {} differs: expected {:#04x}, got {:#04x}",
            want.len(),
            want[i],
            got[i]
        ));
    }
    Ok(())
}
