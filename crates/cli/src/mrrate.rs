//! `nd mrrate`: memory registrations per second with several threads, as Microsoft's
//! ndmrrate measures it (docs/ND-RULES.md §5.6). Each thread owns a 4 MiB buffer; per size,
//! each creates a memory region and registers it over its buffer `iterations` times (all of
//! them stay registered at once), meets the others at a barrier, then deregisters them all
//! and meets them again. Thread 0's clock, barriers included, gives the per-iteration times.
//! Iterations per size follow ndmrrate: 10,000 while 4 MiB / size > 5, else
//! (4 MiB / size) × 2,000 (capped by `-n`).
//!
//! JSON: `tool` = `mrrate`, `op` = `register`, `mode`, `size`, `iterations` (per thread),
//! `threads`, `reg_us` and `dereg_us` (per iteration of one thread), `reg_per_s` and
//! `dereg_per_s` (all threads together).

use std::sync::Barrier;
use std::time::Instant;

use netdirect::{Adapter, MrFlags};

use crate::common::{self, Col, LocalArgs, Report, Row, SizeArgs};

/// Arguments of `nd mrrate`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    local: LocalArgs,
    #[command(flatten)]
    sizes: SizeArgs,
    /// Registering threads.
    #[arg(short = 't', long, default_value_t = 2)]
    threads: usize,
}

const COLS: &[Col] = &[
    Col("#bytes", "size", 0),
    Col("#iters", "iterations", 0),
    Col("reg[us]", "reg_us", 2),
    Col("reg/s", "reg_per_s", 0),
    Col("dereg[us]", "dereg_us", 2),
    Col("dereg/s", "dereg_per_s", 0),
];

/// ndmrrate's count for `size`.
fn iterations(size: usize, cap: u64) -> u64 {
    let ratio = ((4u64 << 20) / size as u64).max(1);
    let n = if ratio > 5 { 10_000 } else { ratio * 2000 };
    n.min(cap)
}

pub(crate) fn run(args: &Args) -> Result<(), String> {
    if args.threads == 0 {
        return Err("-t must be at least 1".into());
    }
    let mut plan = args.sizes.plan(crate::mrlat::DEFAULTS)?;
    for r in &mut plan.rounds {
        r.1 = iterations(r.0, r.1);
    }
    let (provider, adapter) = args.local.open()?;
    let start = Barrier::new(args.threads);
    let mut report = Report::new(args.local.json, plan.sweep, COLS);
    let times = std::thread::scope(|s| {
        let workers: Vec<_> = (0..args.threads)
            .map(|_| {
                let (adapter, plan, start) = (&adapter, &plan, &start);
                s.spawn(move || worker(adapter, plan, start, args.local.blocking))
            })
            .collect();
        let mut all = Vec::with_capacity(args.threads);
        for w in workers {
            all.push(w.join().map_err(|_| "a worker panicked".to_string())?);
        }
        // Thread 0's clock; any thread's error fails the run.
        let mut all = all.into_iter();
        let first = all.next().expect("at least one thread")?;
        all.try_for_each(|r| r.map(drop))?;
        Ok::<_, String>(first)
    })?;
    for (&(size, n), (reg, dereg)) in plan.rounds.iter().zip(times) {
        let per = |secs: f64| {
            (
                secs * 1e6 / n as f64,
                (n * args.threads as u64) as f64 / secs,
            )
        };
        let (reg_us, reg_rate) = per(reg);
        let (dereg_us, dereg_rate) = per(dereg);
        let row = Row::new(
            "mrrate",
            provider.name(),
            "register",
            args.local.mode(),
            size,
            n,
        )
        .with("threads", args.threads)
        .with("reg_us", reg_us)
        .with("reg_per_s", reg_rate)
        .with("dereg_us", dereg_us)
        .with("dereg_per_s", dereg_rate);
        report.push(&row);
    }
    report.finish();
    Ok(())
}

/// One thread: per size, (register phase, deregister phase) in seconds, barriers included.
/// Every thread reaches every barrier even after an error, so none is left waiting.
fn worker(
    adapter: &Adapter,
    plan: &common::Plan,
    barrier: &Barrier,
    blocking: bool,
) -> Result<Vec<(f64, f64)>, String> {
    let buf = netdirect::Buffer::new(4 << 20).map_err(common::err("buffer"));
    let most = plan.rounds.iter().map(|r| r.1).max().unwrap_or(0) as usize;
    let mut mrs = Vec::with_capacity(most);
    let mut times = Vec::with_capacity(plan.rounds.len());
    let mut failed: Option<String> = buf.as_ref().err().cloned();
    barrier.wait();
    for &(size, n) in &plan.rounds {
        let t0 = Instant::now();
        if let (None, Ok(buf)) = (&failed, &buf) {
            for _ in 0..n {
                let r = adapter.create_memory_region().and_then(|mr| {
                    // SAFETY: `buf` outlives every region: all are deregistered (and waited
                    // for) below before the next size, and `buf` is dropped after them.
                    let ov =
                        unsafe { mr.register(buf.as_ptr(), size, MrFlags::ALLOW_LOCAL_WRITE) }?;
                    common::finish(&ov, blocking)?;
                    Ok(mr)
                });
                match r {
                    Ok(mr) => mrs.push(mr),
                    Err(e) => {
                        failed = Some(format!("register: {e}"));
                        break;
                    }
                }
            }
        }
        barrier.wait();
        let reg = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        for mr in mrs.drain(..) {
            let r = mr.deregister().and_then(|ov| common::finish(&ov, blocking));
            if let (Err(e), None) = (r, &failed) {
                failed = Some(format!("deregister: {e}"));
            }
        }
        barrier.wait();
        times.push((reg, t1.elapsed().as_secs_f64()));
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(times),
    }
}
