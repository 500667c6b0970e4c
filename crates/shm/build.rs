//! Declares the `loom` cfg (set through RUSTFLAGS for the model-checking run) so that
//! `unexpected_cfgs` accepts it.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(loom)");
}
