//! `nd shm-pingpong`: the shared-memory yardstick. Two processes bounce a message through
//! shared memory with nothing else in the way (no ND object, no queue, no completion, no
//! system call): each message is one 64-byte line, its payload words and then a sequence word
//! the peer spins on. This is the floor `nd pingpong --provider shm` pays its software on top
//! of: one cache-line transfer each way (the two-process flag spin of docs/BENCHMARKS.md),
//! measured exactly like `nd pingpong` (same processes, pinning, warm-up and timing), so the
//! two can run side by side and be compared as a ratio. Its spin has no `PAUSE`, as `nd`'s own polling loops
//! (docs/ARCHITECTURE.md, "Busy polling without PAUSE").
//!
//! The line pair lives in a file under `/dev/shm` that the server creates and names over the
//! TCP connection both ends use to agree on the settings; the server removes it as soon as
//! the client has mapped it, so nothing is left behind even if a process dies later.
//!
//! JSON: the [`Row`] latency keys; `provider` = `shared-memory`, `op` =
//! `raw-shm`.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::common::{self, Defaults, Laps, PeerArgs, Report, Role, Row, SizeArgs, LAT_COLS};
use crate::rawtcp::open_stream;

mod lines;

use lines::{Lines, WORDS};

/// Arguments of `nd shm-pingpong`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    peer: PeerArgs,
    #[command(flatten)]
    sizes: SizeArgs,
}

/// The payload one line carries: the words before the sequence word.
pub(crate) const MAX_SIZE: usize = (WORDS - 1) * 8;

const DEFAULTS: Defaults = Defaults {
    sweep_max: 32,
    ..Defaults::new(8, 100_000, 256 << 20)
};

/// Spins between two looks at the TCP connection for a peer that went away.
const SPINS_PER_LIVENESS_CHECK: u32 = 1 << 22;

pub(crate) fn run(args: &Args) -> Result<(), String> {
    args.peer.once_only("shm-pingpong")?;
    if args.peer.blocking {
        return Err("shm-pingpong has no blocking mode: it is a busy-polling floor".into());
    }
    // Checked before `--loopback` starts the two processes, so the refusal is said once.
    let plan = args.sizes.plan(DEFAULTS)?;
    if plan.max_size() > MAX_SIZE {
        return Err(format!(
            "shm-pingpong carries at most {MAX_SIZE} bytes (one 64-byte line per message)"
        ));
    }
    let Some(role) = args.peer.start()? else {
        return Ok(());
    };
    let settings = common::settings("shm-pingpong", &args.peer, &plan, &[]);
    let mut s = open_stream(role, &args.peer, &settings, false)?;
    // The client writes line 0 and the server answers on line 1.
    let (lines, mine, theirs) = match role {
        Role::Server(_) => (serve_lines(&mut s)?, 1, 0),
        Role::Client(_) => (join_lines(&mut s)?, 0, 1),
    };
    let mut payload = [0u64; WORDS - 1];
    let mut seq = 0u64;
    let mut report = Report::new(args.peer.json, plan.sweep, LAT_COLS);
    for &(size, n) in &plan.rounds {
        let words = size.div_ceil(8);
        let warmup = plan.warmup_for(n);
        let wait = |seq: u64, payload: &mut [u64]| {
            lines.wait(theirs, seq, &mut payload[..words], &mut || alive(&s))
        };
        match role {
            Role::Server(_) => {
                for _ in 0..warmup + n {
                    seq += 1;
                    wait(seq, &mut payload)?;
                    lines.publish(mine, seq, &payload[..words]);
                }
            }
            Role::Client(_) => {
                let mut laps = Laps::time(warmup, n, || {
                    seq += 1;
                    lines.publish(mine, seq, &payload[..words]);
                    wait(seq, &mut payload)
                })?;
                let row = Row::new(
                    "shm-pingpong",
                    "shared-memory",
                    "raw-shm",
                    args.peer.mode(),
                    size,
                    n,
                );
                report.push(&row.latency(laps.samples()));
            }
        }
    }
    report.finish();
    Ok(())
}

/// The server's side of the rendezvous: create the file, name it, and remove it once the
/// client has mapped it (its mapping keeps the memory).
fn serve_lines(s: &mut TcpStream) -> Result<Lines, String> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let path = PathBuf::from(format!(
        "/dev/shm/nd-shm-pingpong-{}-{nanos}",
        std::process::id()
    ));
    let lines = Lines::create(&path)?;
    // Removed whatever happens next: an error here must not leave the file behind either.
    let removed = Removed(&path);
    writeln!(s, "{}", path.display()).map_err(|e| format!("rendezvous: {e}"))?;
    let mut ack = String::new();
    BufReader::new(&*s)
        .read_line(&mut ack)
        .map_err(|e| format!("rendezvous: {e}"))?;
    if ack.trim() != "mapped" {
        return Err(format!("rendezvous: the client answered {ack:?}"));
    }
    drop(removed);
    Ok(lines)
}

/// The client's side: map the file the server names, and say so.
fn join_lines(s: &mut TcpStream) -> Result<Lines, String> {
    let mut name = String::new();
    // One line and nothing after it until we answer, so the buffered reader takes no more.
    BufReader::new(&*s)
        .read_line(&mut name)
        .map_err(|e| format!("rendezvous: {e}"))?;
    let path = PathBuf::from(name.trim_end());
    if !path.starts_with("/dev/shm/") {
        return Err(format!("rendezvous: unexpected file name {path:?}"));
    }
    let lines = Lines::open(&path)?;
    writeln!(s, "mapped").map_err(|e| format!("rendezvous: {e}"))?;
    Ok(lines)
}

/// Removes a file when dropped.
struct Removed<'a>(&'a std::path::Path);

impl Drop for Removed<'_> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.0);
    }
}

/// Whether the peer is still there: its end of the TCP connection is open (it sends nothing
/// after the rendezvous, so any readable byte or end of stream means it left).
fn alive(s: &TcpStream) -> bool {
    use rustix::net::RecvFlags;
    let mut b = [0u8; 1];
    matches!(
        rustix::net::recv(s, &mut b, RecvFlags::PEEK | RecvFlags::DONTWAIT),
        Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR)
    )
}

impl Lines {
    /// Spin until line `line` carries sequence number `seq`, then read its payload words into
    /// `payload` (as many as it holds). Every [`SPINS_PER_LIVENESS_CHECK`] spins, `alive` is
    /// asked whether the writer can still come.
    fn wait(
        &self,
        line: usize,
        seq: u64,
        payload: &mut [u64],
        alive: &mut dyn FnMut() -> bool,
    ) -> Result<(), String> {
        let mut spins = 0u32;
        while self.seq(line) != seq {
            spins += 1;
            if spins == SPINS_PER_LIVENESS_CHECK {
                spins = 0;
                if !alive() {
                    return Err("peer closed".into());
                }
            }
        }
        self.read(line, payload);
        Ok(())
    }
}
