//! Results: latency statistics, the row every tool reports, the perftest-style table and the
//! `--json` line.

/// Latency percentiles over samples in nanoseconds.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub(crate) struct Latency {
    pub(crate) min_us: f64,
    pub(crate) median_us: f64,
    pub(crate) mean_us: f64,
    /// The mean of the middle half of the samples (the interquartile mean). This VM's TSC
    /// advances in steps of about 10 ns, so a half round trip and the median move in 5 ns
    /// steps; this mean of many dithered samples resolved a 2 ns change (docs/ARCHITECTURE.md),
    /// and the tail that moves `mean_us` from run to run is trimmed off. For A/B experiments:
    /// the issues' targets are on the median.
    pub(crate) iqm_us: f64,
    pub(crate) p99_us: f64,
    pub(crate) p999_us: f64,
    pub(crate) max_us: f64,
    /// The standard deviation of the samples (perftest's `t_stdev`).
    pub(crate) stdev_us: f64,
}

impl Latency {
    pub(crate) fn from_ns(samples: &mut [u64]) -> Self {
        samples.sort_unstable();
        let n = samples.len().max(1);
        let at = |q: f64| {
            samples
                .get(((n as f64 - 1.0) * q).round() as usize)
                .copied()
                .unwrap_or(0) as f64
                / 1000.0
        };
        // In µs; 0 for no samples.
        let mean =
            |s: &[u64]| s.iter().map(|&x| x as f64).sum::<f64>() / s.len().max(1) as f64 / 1000.0;
        let quarter = samples.len() / 4;
        let avg = mean(samples);
        let var = samples
            .iter()
            .map(|&x| (x as f64 / 1000.0 - avg).powi(2))
            .sum::<f64>()
            / samples.len().max(1) as f64;
        Self {
            min_us: at(0.0),
            median_us: at(0.5),
            mean_us: avg,
            iqm_us: mean(&samples[quarter..samples.len() - quarter]),
            p99_us: at(0.99),
            p999_us: at(0.999),
            max_us: at(1.0),
            stdev_us: var.sqrt(),
        }
    }
}

/// Half-round-trip samples from one clock read per iteration, the way perftest's `*_lat`
/// tools take them (`tstamp[i+1] - tstamp[i]`, from the cycle counter).
///
/// Call [`Laps::lap`] at the top of every iteration, warm-up included, and once after the
/// last. A sample is the time from one lap to the next, halved, so every cycle of the loop is
/// counted, the clock read included. That read is the TSC (`quanta`, which falls back to the
/// OS clock where the TSC is not invariant): about 11 ns here against 28 ns for
/// `Instant::now` (vDSO `clock_gettime` on this VM), which would be 5 % of an shm half round
/// trip (~170 ns). perftest (`get_cycles`) and `ucx_perftest` (`ucs_get_time`) read the TSC
/// too, so the anchors pay the same.
pub(crate) struct Laps {
    clock: quanta::Clock,
    /// Raw clock readings at the laps from the first timed iteration's start on; turned into
    /// samples only when asked for, so that a lap inside the timed loop is a read and a store.
    stamps: Vec<u64>,
    warmup: u64,
    laps: u64,
    /// Whether `stamps` holds samples now ([`Laps::samples`] ran).
    done: bool,
}

impl Laps {
    /// Samples for `n` timed iterations after `warmup` untimed ones.
    pub(crate) fn new(warmup: u64, n: u64) -> Self {
        Self::with_clock(quanta::Clock::new(), warmup, n)
    }

    fn with_clock(clock: quanta::Clock, warmup: u64, n: u64) -> Self {
        Self {
            clock,
            stamps: Vec::with_capacity(n as usize + 1),
            warmup,
            laps: 0,
            done: false,
        }
    }

    /// Mark an iteration boundary: the iteration that ends here becomes a sample unless it
    /// was a warm-up one.
    #[inline]
    pub(crate) fn lap(&mut self) {
        let now = self.clock.raw();
        // Iterations `0..warmup` are not timed: the first stamp kept starts iteration `warmup`.
        if self.laps >= self.warmup {
            self.stamps.push(now);
        }
        self.laps += 1;
    }

    /// The client's side of a ping-pong: run `round` `warmup + n` times with a lap around
    /// each; the first error ends it.
    pub(crate) fn time(
        warmup: u64,
        n: u64,
        mut round: impl FnMut() -> Result<(), String>,
    ) -> Result<Self, String> {
        let mut laps = Self::new(warmup, n);
        for _ in 0..warmup + n {
            laps.lap();
            round()?;
        }
        laps.lap();
        Ok(laps)
    }

    /// The samples, in nanoseconds (half a round trip each).
    pub(crate) fn samples(&mut self) -> &mut [u64] {
        if !self.done {
            self.done = true;
            for i in 1..self.stamps.len() {
                self.stamps[i - 1] = self
                    .clock
                    .delta_as_nanos(self.stamps[i - 1], self.stamps[i])
                    / 2;
            }
            self.stamps.pop();
        }
        &mut self.stamps
    }
}

/// One measured row: what the table prints and what `--json` emits.
///
/// JSON contract (bench/compare reads it): with `--json` the last line of standard output is
/// one object per run, or with `-a` an array of them. Keys:
/// * `tool` (`pingpong`, `ping`, `rping`, `rpingpong`, `tcp-pingpong`, `tcp-stream`,
///   `shm-pingpong`, `mrlat`, `mrrate`), `provider` (`tcp`, `shm`, or for the yardsticks
///   `kernel-tcp` and `shared-memory`), `op` (`send`,
///   `write`, `read`, `register`, ...), `mode` (`poll` or `blocking`), `size` (bytes),
///   `iterations` (timed ones);
/// * latency tools: `min_us`, `median_us`, `mean_us`, `iqm_us`, `p99_us`, `p999_us`, `max_us`,
///   `stdev_us` (microseconds; half a round trip for the ping-pongs, like ndpingpong and
///   perftest);
/// * throughput tools: `seconds`, `mb_per_s` (10^6 bytes per second), `msg_per_s`,
///   `mmsg_per_s` (10^6 messages per second);
/// * tool-specific keys documented with each tool (e.g. `pipeline`, `threads`, `reg_us`).
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Row {
    pub(crate) tool: &'static str,
    pub(crate) provider: String,
    pub(crate) op: &'static str,
    pub(crate) mode: &'static str,
    pub(crate) size: usize,
    pub(crate) iterations: u64,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub(crate) latency: Option<Latency>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) mb_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) msg_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) mmsg_per_s: Option<f64>,
    #[serde(flatten)]
    pub(crate) extra: serde_json::Map<String, serde_json::Value>,
}

impl Row {
    pub(crate) fn new(
        tool: &'static str,
        provider: &str,
        op: &'static str,
        mode: &'static str,
        size: usize,
        iterations: u64,
    ) -> Self {
        Self {
            tool,
            provider: provider.to_string(),
            op,
            mode,
            size,
            iterations,
            latency: None,
            seconds: None,
            mb_per_s: None,
            msg_per_s: None,
            mmsg_per_s: None,
            extra: serde_json::Map::new(),
        }
    }

    /// A latency row from per-iteration samples in nanoseconds.
    pub(crate) fn latency(mut self, samples: &mut [u64]) -> Self {
        self.latency = Some(Latency::from_ns(samples));
        self
    }

    /// A throughput row: `messages` of `self.size` bytes in `secs`.
    pub(crate) fn throughput(mut self, messages: u64, secs: f64) -> Self {
        let secs = secs.max(1e-9);
        let rate = messages as f64 / secs;
        self.seconds = Some(secs);
        self.mb_per_s = Some(self.size as f64 * rate / 1e6);
        self.msg_per_s = Some(rate);
        self.mmsg_per_s = Some(rate / 1e6);
        self
    }

    pub(crate) fn with(mut self, key: &str, v: impl Into<serde_json::Value>) -> Self {
        self.extra.insert(key.to_string(), v.into());
        self
    }
}

/// One column of a result table: its title, the JSON key it shows, and decimals.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Col(
    pub(crate) &'static str,
    pub(crate) &'static str,
    pub(crate) usize,
);

/// perftest's latency columns, in its order (`t_typical` is the median).
pub(crate) const LAT_COLS: &[Col] = &[
    Col("#bytes", "size", 0),
    Col("#iters", "iterations", 0),
    Col("t_min[us]", "min_us", 2),
    Col("t_max[us]", "max_us", 2),
    Col("t_typ[us]", "median_us", 2),
    Col("t_avg[us]", "mean_us", 2),
    Col("t_stdev[us]", "stdev_us", 2),
    Col("99%[us]", "p99_us", 2),
    Col("99.9%[us]", "p999_us", 2),
];

/// Bandwidth columns.
pub(crate) const BW_COLS: &[Col] = &[
    Col("#bytes", "size", 0),
    Col("#iters", "iterations", 0),
    Col("MB/s", "mb_per_s", 1),
    Col("Mmsg/s", "mmsg_per_s", 4),
];

/// Prints rows as a table while they come (text), or collects them for the final JSON line.
#[derive(Debug)]
pub(crate) struct Report {
    json: bool,
    sweep: bool,
    cols: &'static [Col],
    rows: Vec<serde_json::Value>,
    /// Lines printed before the table (text only): [`Endpoint::header`](super::Endpoint::header).
    header: Vec<String>,
}

impl Report {
    pub(crate) fn new(json: bool, sweep: bool, cols: &'static [Col]) -> Self {
        Self {
            json,
            sweep,
            cols,
            rows: Vec::new(),
            header: Vec::new(),
        }
    }

    /// Print `lines` before the table.
    pub(crate) fn with_header(mut self, lines: Vec<String>) -> Self {
        self.header = lines;
        self
    }

    pub(crate) fn push(&mut self, row: &Row) {
        let v = serde_json::to_value(row).expect("a row serializes");
        if self.sweep {
            // A sweep's progress, where --json prints nothing until the end.
            let n = v.get("iterations").and_then(serde_json::Value::as_u64);
            eprintln!(
                "nd {}: {} B done ({} iterations)",
                row.tool,
                row.size,
                n.unwrap_or(0)
            );
        }
        if !self.json {
            if self.rows.is_empty() {
                for line in &self.header {
                    println!("{line}");
                }
                let head: Vec<String> = self.cols.iter().map(|c| format!("{:>12}", c.0)).collect();
                println!("{}", head.join(" "));
            }
            let cells: Vec<String> = self
                .cols
                .iter()
                .map(|c| match v.get(c.1) {
                    Some(serde_json::Value::Number(n)) => {
                        format!("{:>12.*}", c.2, n.as_f64().unwrap_or(0.0))
                    }
                    Some(other) => format!("{:>12}", other.to_string().trim_matches('"')),
                    None => format!("{:>12}", "-"),
                })
                .collect();
            println!("{}", cells.join(" "));
        }
        self.rows.push(v);
    }

    /// With `--json`, print the last line: the one object, or the array of a sweep.
    pub(crate) fn finish(self) {
        if !self.json {
            return;
        }
        let v = if self.sweep {
            serde_json::Value::Array(self.rows)
        } else {
            self.rows.into_iter().next().unwrap_or_default()
        };
        println!("{v}");
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Laps, Latency};

    #[test]
    fn laps_time_only_the_iterations_after_the_warm_up() {
        let (clock, mock) = quanta::Clock::mock();
        let mut laps = Laps::with_clock(clock, 2, 3);
        // Iteration i takes (i + 1) µs; the first two are warm-up.
        for i in 0..5u64 {
            laps.lap();
            mock.increment(Duration::from_micros(i + 1));
        }
        laps.lap();
        assert_eq!(laps.samples(), &[1500, 2000, 2500]);
        // Asking again gives the same samples.
        assert_eq!(laps.samples(), &[1500, 2000, 2500]);
        // No timed iteration (a server's), or only its start: no sample.
        let (clock, _) = quanta::Clock::mock();
        let mut laps = Laps::with_clock(clock, 1, 0);
        laps.lap();
        laps.lap();
        assert!(laps.samples().is_empty());
    }

    #[test]
    fn latency_statistics_of_known_samples() {
        // Eight samples out of order; the middle half (after sorting) is 130, 130, 135, 135.
        let mut ns = [135, 4000, 130, 125, 130, 120, 135, 140];
        let l = Latency::from_ns(&mut ns);
        assert_eq!(l.min_us, 0.12);
        assert_eq!(l.max_us, 4.0);
        // Index round(7 × 0.5) = 4 of the sorted samples.
        assert_eq!(l.median_us, 0.135);
        assert!((l.iqm_us - 0.1325).abs() < 1e-12, "{}", l.iqm_us);
        assert!((l.mean_us - 0.614_375).abs() < 1e-12, "{}", l.mean_us);
        // The population standard deviation.
        let var = [135, 4000, 130, 125, 130, 120, 135, 140]
            .iter()
            .map(|&x| (x as f64 / 1000.0 - 0.614_375).powi(2))
            .sum::<f64>()
            / 8.0;
        assert!((l.stdev_us - var.sqrt()).abs() < 1e-12, "{}", l.stdev_us);
        // One sample: every statistic is that sample.
        let l = Latency::from_ns(&mut [250]);
        assert_eq!(
            (l.min_us, l.median_us, l.iqm_us, l.max_us),
            (0.25, 0.25, 0.25, 0.25)
        );
    }
}
