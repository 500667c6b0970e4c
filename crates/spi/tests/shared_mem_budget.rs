//! `SharedMemory::new` stops at its descriptor budget and gives a slot back when one is
//! dropped (its own process: the count is process-wide).

use netdirect_spi::kit::shared_mem::SharedMemory;

#[test]
fn new_stops_at_the_budget() {
    let budget = SharedMemory::budget();
    assert!((16..=4096).contains(&budget), "{budget}");
    let mut held: Vec<SharedMemory> = (0..budget)
        .map(|i| SharedMemory::new(4096).unwrap_or_else(|e| panic!("memfd {i}: {e}")))
        .collect();
    let e = SharedMemory::new(4096).expect_err("over the budget");
    assert_eq!(
        e.raw_os_error(),
        Some(rustix::io::Errno::MFILE.raw_os_error())
    );
    held.pop();
    let again = SharedMemory::new(4096).expect("a slot came back");
    drop(again);
    drop(held);
    SharedMemory::new(4096).expect("all slots back");
}
