//! Build script: only declares the `fuzzing` cfg (set by cargo-fuzz) so that
//! `#[cfg(fuzzing)]` does not trigger the `unexpected_cfgs` lint.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(fuzzing)");
}
