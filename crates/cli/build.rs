//! Link settings of the `nd` binary.

fn main() {
    // Where the kernel loads `nd`: at a 2 MiB-aligned address (the kernel honours a position-
    // independent executable's segment alignment), so the code's address bits 12..=20 are
    // the same in every run instead of drawn at random by address-space layout randomisation
    // (which keeps the higher bits). On this 2-vCPU AMD EPYC VM a quarter of the random 4 KiB
    // placements of one build put the shm ping-pong's process in a state 7 % slower (0.134
    // against 0.126 µs), decided by two of those bits: docs/ARCHITECTURE.md, "Where the code
    // lands". Fixed bits make each build's timing repeatable from run to run.
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo::rustc-link-arg-bin=nd=-Wl,-z,max-page-size=0x200000");
    }
}
