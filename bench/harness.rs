//! The instruction-count mode shared by the divan benchmarks (`crates/*/benches`), included
//! with `#[path]`: `bench/callgrind` sets `ND_BENCH_CASE=name/arg` and `ND_BENCH_ITERS=n`, and
//! the benchmark binary then runs that one case exactly `n` times without divan, so callgrind
//! counts a known number of operations (divan cannot select a single argument, and its own
//! calibration would change the count).

use std::hint::black_box;

/// One case to run under callgrind.
#[derive(Debug)]
pub(crate) struct Case {
    /// The benchmark function's name, e.g. `encode_send`.
    pub(crate) name: String,
    /// Its argument (a message size).
    pub(crate) arg: usize,
    iters: u64,
}

impl Case {
    /// The case named by the environment, if any.
    ///
    /// # Panics
    /// If the variables are set but malformed: `bench/callgrind` always sets both correctly.
    pub(crate) fn from_env() -> Option<Self> {
        let spec = std::env::var("ND_BENCH_CASE").ok()?;
        let (name, arg) = spec.split_once('/').expect("ND_BENCH_CASE=name/arg");
        let iters = std::env::var("ND_BENCH_ITERS")
            .expect("ND_BENCH_ITERS")
            .parse()
            .expect("ND_BENCH_ITERS is a count");
        Some(Self {
            name: name.to_owned(),
            arg: arg.parse().expect("argument is a size"),
            iters,
        })
    }

    /// Run one operation `iters` times.
    pub(crate) fn run<O>(&self, mut op: impl FnMut() -> O) {
        for _ in 0..self.iters {
            black_box(op());
        }
    }

    /// The case is not in this binary: fail loudly so the script does not report a count of
    /// nothing.
    pub(crate) fn unknown(&self) -> ! {
        eprintln!("no benchmark case {}/{}", self.name, self.arg);
        std::process::exit(2);
    }
}
