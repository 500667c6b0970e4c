//! RDMA Writes and Reads of every size through the paths the configuration chooses, each in a
//! test binary of its own because the configuration is read from the environment when an
//! adapter opens: here the data area for every size (mapping off), then the target's pull
//! (`process_vm_readv`) from 16 KiB on. One test, so the variables change only between its
//! steps.

#![cfg(not(loom))]

mod common;

use common::{pair, sweep};

#[test]
fn writes_and_reads_through_the_data_area_and_the_pull() {
    std::env::set_var("ND_SHM_MAP_MIN_KIB", "0");
    let (c, s) = pair(2 << 20);
    sweep(&c, &s, "data area");
    std::env::set_var("ND_SHM_WRITE_PULL_MIN_KIB", "16");
    let (c, s) = pair(2 << 20);
    sweep(&c, &s, "pull");
}
