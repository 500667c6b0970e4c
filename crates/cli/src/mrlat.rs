//! `nd mrlat`: memory-registration latency by size, in one process, as Microsoft's ndmrlat
//! measures it (docs/ND-RULES.md §5.5): the same memory-region object is registered over the
//! first `size` bytes of a 4 MiB buffer and deregistered again, `-n` times per size (10,000
//! by default); both the call alone and the call plus its completion are timed. Sizes sweep
//! 1 B to 4 MiB unless `--size` picks one. Polling (GetOverlappedResult without wait, the
//! default) or `--blocking` (with wait: ndmrlat's "Event Driven" pass).
//!
//! JSON: `tool` = `mrlat`, `op` = `register`, `mode`, `size`, `iterations`, and the means in
//! microseconds `reg_call_us`, `reg_us` (call plus completion), `dereg_call_us`, `dereg_us`.

use std::time::Instant;

use netdirect::MrFlags;

use crate::common::{self, Col, Defaults, LocalArgs, Report, Row, SizeArgs};

/// Arguments of `nd mrlat`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    local: LocalArgs,
    #[command(flatten)]
    sizes: SizeArgs,
}

/// ndmrlat: 1 B to 4 MiB, 10,000 iterations each.
pub(crate) const DEFAULTS: Defaults = Defaults {
    min_size: 1,
    sweep: true,
    sweep_max: 4 << 20,
    ..Defaults::new(4 << 20, 10_000, u64::MAX)
};

const COLS: &[Col] = &[
    Col("#bytes", "size", 0),
    Col("#iters", "iterations", 0),
    Col("reg call[us]", "reg_call_us", 2),
    Col("reg[us]", "reg_us", 2),
    Col("dereg call", "dereg_call_us", 2),
    Col("dereg[us]", "dereg_us", 2),
];

pub(crate) fn run(args: &Args) -> Result<(), String> {
    let plan = args.sizes.plan(DEFAULTS)?;
    let (provider, adapter) = args.local.open()?;
    let buf = netdirect::Buffer::new(plan.max_size()).map_err(common::err("buffer"))?;
    let mr = adapter
        .create_memory_region()
        .map_err(common::err("create MR"))?;
    let mut report = Report::new(args.local.json, plan.sweep, COLS);
    for &(size, n) in &plan.rounds {
        // [register call, register total, deregister call, deregister total], in ns.
        let mut sum = [0u128; 4];
        for _ in 0..n {
            let t = time_pair(args.local.blocking, || {
                // SAFETY: `buf` outlives the region's registration: it is deregistered (and
                // the deregistration completed) before the next iteration and before `buf`
                // is dropped; nothing accesses the bytes.
                unsafe { mr.register(buf.as_ptr(), size, MrFlags::ALLOW_LOCAL_WRITE) }
            })
            .map_err(common::err("register"))?;
            let d = time_pair(args.local.blocking, || mr.deregister())
                .map_err(common::err("deregister"))?;
            for (s, v) in sum.iter_mut().zip([t.0, t.1, d.0, d.1]) {
                *s += v;
            }
        }
        let us = |ns: u128| ns as f64 / n as f64 / 1000.0;
        let row = Row::new(
            "mrlat",
            provider.name(),
            "register",
            args.local.mode(),
            size,
            n,
        )
        .with("reg_call_us", us(sum[0]))
        .with("reg_us", us(sum[1]))
        .with("dereg_call_us", us(sum[2]))
        .with("dereg_us", us(sum[3]));
        report.push(&row);
    }
    report.finish();
    Ok(())
}

/// Time one asynchronous call: (the call alone, the call plus its completion), in ns.
pub(crate) fn time_pair(
    blocking: bool,
    call: impl FnOnce() -> netdirect::Result<netdirect::Overlapped>,
) -> netdirect::Result<(u128, u128)> {
    let t0 = Instant::now();
    let ov = call()?;
    let split = t0.elapsed().as_nanos();
    common::finish(&ov, blocking)?;
    Ok((split, t0.elapsed().as_nanos()))
}
